import GatewayEngine
import HRVAnalysis

/// One beat of a recorded session: when it happened and the RR interval that ends at it.
public struct ReconstructedBeat: Sendable, Equatable {
    /// Index of the sample (notification) that carried the interval, in the order given.
    public var sampleIndex: Int
    /// Index of the interval within that sample's `rrIntervalsMs` (oldest first).
    public var intervalIndex: Int
    /// `deviceId`, else `source`.
    public var device: String
    /// Epoch milliseconds of the beat that ends the interval (fractional; exports round it).
    public var timeMs: Double
    public var rrMs: Double
    /// True for the first beat of a stretch that is not continuous with the beats before it (the start of the
    /// recording for that device, or a gap).
    public var startsSegment: Bool
}

/// Beat times rebuilt from the RR intervals and the times their notifications arrived.
///
/// A strap sends a notification about once a second with the RR intervals of the beats completed since the
/// previous one: 0, 1 or 2 of them. Only the arrival time of the notification is known, not the beat times. Within
/// a continuous stretch of a device's notifications, beat k is at `offset + (rr_1 + … + rr_k)`, so that consecutive
/// beats are exactly their RR apart; `offset` is the largest value that puts no beat after the arrival of the
/// notification that reported it (the last RR of the most promptly delivered notification ends at its arrival, the
/// others a little before theirs).
///
/// A stretch ends (the next one is anchored afresh) at a gap: a sample flagged `gapBefore` (a reconnect) or reporting
/// no skin contact (as the engine splits its RR runs), a jump in `notification_seq`, no notification for more than
/// `maxSilenceMs`, or RR intervals that no longer add up to the time that passed (beats lost in transit, or the
/// intervals running ahead of the clock) by more than `maxDriftMs`. Notifications without RR do not end a stretch;
/// raw ECG and motion chunks (`isWaveformOnly`) play no part. Each device has its own timeline, whose stretches are
/// then moved back where one would end after the next one's first interval began (`keepApart`).
public enum BeatTimeline {
    /// A device silent for longer than this has lost its link (the gateway calls a strap stale after 5 s).
    public static let maxSilenceMs: Int64 = 5_000
    /// How far the RR sum may fall behind or run ahead of the arrival times before the stretch is cut.
    public static let maxDriftMs = 2_500.0

    public static func beats(_ samples: [BiosignalSample]) -> [ReconstructedBeat] {
        struct Pending {
            var sampleIndex: Int
            var intervalIndex: Int
            var cumulativeMs: Double
            var rrMs: Double
            /// Where the beat goes in the output (arrival order).
            var position: Int
        }
        struct Segment {
            var beats: [Pending] = []
            /// Sum of the intervals so far.
            var totalMs = 0.0
            /// min over notifications of (arrival − cumulative time of its last beat): the offset.
            var offset: Double?
            var lastArrivalMs: Int64
            var lastSequence: UInt64?
            /// Notifications with RR so far, each a candidate for `offset`.
            var anchors = 0
        }

        var open: [String: Segment] = [:]
        var out: [ReconstructedBeat?] = []

        func close(_ segment: Segment, device: String) {
            guard let offset = segment.offset else { return }
            for (i, b) in segment.beats.enumerated() {
                let beat = ReconstructedBeat(
                    sampleIndex: b.sampleIndex, intervalIndex: b.intervalIndex, device: device,
                    timeMs: offset + b.cumulativeMs, rrMs: b.rrMs, startsSegment: i == 0)
                out[b.position] = beat
            }
        }

        for (index, s) in samples.enumerated() {
            // A raw ECG or motion chunk carries no beat, and its gaps are the waveform's (a lost PMD frame), not the
            // beats': the engine leaves such chunks out of its RR runs, and so does the timeline.
            if s.isWaveformOnly { continue }
            let device = s.deviceId ?? s.source
            // Intervals that are not finite or not positive are not beats; the others keep their index.
            let rr = (s.rrIntervalsMs ?? []).enumerated().filter { $0.element.isFinite && $0.element > 0 }
            var segment = open[device] ?? Segment(lastArrivalMs: s.timestampMs)
            var gap = s.gapBefore || s.contact == .noContact || s.timestampMs - segment.lastArrivalMs > maxSilenceMs
            if let previous = segment.lastSequence, let now = s.sequence, now != previous &+ 1 { gap = true }
            if !gap, !rr.isEmpty, let offset = segment.offset {
                let lag = Double(s.timestampMs) - (segment.totalMs + rr.reduce(0) { $0 + $1.element })
                // Beats running ahead of the clock are told against an offset that more than one notification set:
                // a stretch's first notification may itself have come late (a notification delayed by 3 s broke
                // the stretch at it, as the engine does, and again at the next one, on time).
                if lag - offset > maxDriftMs || (offset - lag > maxDriftMs && segment.anchors > 1) { gap = true }
            }
            if gap {
                close(segment, device: device)
                segment = Segment(lastArrivalMs: s.timestampMs)
            }
            segment.lastArrivalMs = s.timestampMs
            // As the engine's runs: a sample without a number neither breaks nor hides a jump.
            if let q = s.sequence { segment.lastSequence = q }
            if !rr.isEmpty {
                for (i, v) in rr {
                    segment.totalMs += v
                    segment.beats.append(Pending(
                        sampleIndex: index, intervalIndex: i, cumulativeMs: segment.totalMs, rrMs: v, position: out.count))
                    out.append(nil)
                }
                let lag = Double(s.timestampMs) - segment.totalMs
                segment.offset = min(segment.offset ?? lag, lag)
                segment.anchors += 1
            }
            open[device] = segment
        }
        for (device, segment) in open { close(segment, device: device) }
        var beats = out.compactMap { $0 }
        keepApart(&beats)
        return beats
    }

    /// Moves stretches back so that no beat's interval starts before the beat before it (of its device). Each
    /// stretch is anchored at the latest its beats can be (none after its notification); a short one, a lone beat
    /// between notifications without skin contact, can thus end after the next stretch's first interval began
    /// (two beats 124 ms apart with an RR of 913). Moving a stretch back keeps every beat before its notification;
    /// the last stretch stays where it is. Within a stretch, beats keep their spacing.
    static func keepApart(_ beats: inout [ReconstructedBeat]) {
        var byDevice: [String: [Int]] = [:]
        for (i, b) in beats.enumerated() { byDevice[b.device, default: []].append(i) }
        for (_, mine) in byDevice {
            var limit = Double.infinity
            var end = mine.count
            while end > 0 {
                var start = end - 1
                while start > 0 && !beats[mine[start]].startsSegment { start -= 1 }
                let last = beats[mine[end - 1]].timeMs
                if last > limit {
                    for k in start..<end { beats[mine[k]].timeMs -= last - limit }
                }
                let first = beats[mine[start]]
                limit = first.timeMs - first.rrMs
                end = start
            }
        }
    }
}

extension BeatTimeline {
    /// Time-domain HRV over every recorded beat of each device that sent RR, in the order of the devices' first
    /// beats, the series broken where the beat CSV export's `segment_start` breaks it: what `hr-gateway hrv` (Kubios
    /// correction) says of that export. (The engine's own runs, `SessionMetrics.rrRuns`, break at fewer places: they
    /// let the beats run ahead of the clock, and fall behind it by up to their tolerance; a session's summary keeps
    /// those.)
    public static func recordedHRV(_ samples: [BiosignalSample]) -> [(device: String, result: HRVResult)] {
        var devices: [(device: String, runs: [[Double]])] = []
        var index: [String: Int] = [:]
        for beat in beats(samples) {
            let i: Int
            if let known = index[beat.device] { i = known } else {
                i = devices.count
                index[beat.device] = i
                devices.append((beat.device, []))
            }
            if beat.startsSegment || devices[i].runs.isEmpty { devices[i].runs.append([]) }
            devices[i].runs[devices[i].runs.count - 1].append(beat.rrMs)
        }
        return devices.map { ($0.device, HRVAnalyzer.analyze(segments: $0.runs, options: HRVOptions(extendedMetrics: false))) }
    }
}
