/// One RR interval with the time of the beat that ends it.
public struct RRBeat: Sendable, Equatable {
    /// Time of the beat ending the interval, in seconds on the recording clock.
    public var endS: Double
    /// The interval, milliseconds.
    public var rrMs: Double
    /// The first beat after a break (a lost link, lost notifications, no skin contact): no successive difference is
    /// taken from the previous beat, whatever the times say.
    public var startsRun: Bool

    public init(endS: Double, rrMs: Double, startsRun: Bool = false) {
        self.endS = endS
        self.rrMs = rrMs
        self.startsRun = startsRun
    }

    /// Time of the beat starting the interval.
    public var startS: Double { endS - rrMs / 1000 }
}

/// The analysis of one window of a longer recording.
public struct HRVWindow: Sendable, Equatable {
    public var startS: Double
    public var endS: Double
    public var result: HRVResult
}

extension HRVAnalyzer {
    /// Beat times rebuilt as the running sum of the intervals, the first interval starting at `startS`.
    public static func beats(fromRR rrMs: [Double], startS: Double = 0) -> [RRBeat] {
        var t = startS
        return rrMs.map { rr in
            t += rr / 1000
            return RRBeat(endS: t, rrMs: rr)
        }
    }

    /// Beats of uninterrupted runs (`runs`, milliseconds), each marked where it starts a run. With `endsS` (the time
    /// of each run's last beat, seconds) a run is placed back from its end, so the windows of a recording
    /// keep the time its breaks took; a run that would then overlap the one before starts where that one ends.
    /// Without, each run follows the previous one directly (the breaks still split the analysis). The first interval
    /// starts at 0 either way.
    public static func beats(runs: [[Double]], endsS: [Double]? = nil) -> [RRBeat] {
        var out: [RRBeat] = []
        out.reserveCapacity(runs.reduce(0) { $0 + $1.count })
        var previousEnd: Double?
        var origin: Double?
        for (k, run) in runs.enumerated() where !run.isEmpty {
            let length = run.reduce(0, +) / 1000
            var start = previousEnd ?? 0
            if let endsS, k < endsS.count {
                let from = origin ?? (endsS[k] - length)
                origin = from
                start = max(previousEnd ?? 0, endsS[k] - length - from)
            }
            var t = start
            for (i, rr) in run.enumerated() {
                t += rr / 1000
                out.append(RRBeat(endS: t, rrMs: rr, startsRun: i == 0 && !out.isEmpty))
            }
            previousEnd = t
        }
        return out
    }

    /// Splits beats into uninterrupted segments: a segment ends before a beat that starts a run, and where the time
    /// from one beat to the next differs from the interval between them by more than `gapToleranceS` (a lost
    /// notification or a recording gap).
    public static func segments(of beats: [RRBeat], gapToleranceS: Double = 0.25) -> [[Double]] {
        var segments: [[Double]] = []
        var current: [Double] = []
        var previousEnd: Double?
        for beat in beats {
            if let p = previousEnd, beat.startsRun || abs((beat.endS - p) - beat.rrMs / 1000) > gapToleranceS,
                !current.isEmpty
            {
                segments.append(current)
                current = []
            }
            current.append(beat.rrMs)
            previousEnd = beat.endS
        }
        if !current.isEmpty { segments.append(current) }
        return segments
    }

    /// Analyses full windows of `windowS` seconds every `stepS` seconds, from the start of the first interval.
    /// A window holds the intervals lying entirely inside it; windows past the last beat are not produced, so a
    /// recording shorter than one window gives none. Gaps split segments as in `segments(of:gapToleranceS:)`.
    public static func analyzeWindows(
        _ beats: [RRBeat],
        windowS: Double,
        stepS: Double,
        gapToleranceS: Double = 0.25,
        options: HRVOptions = HRVOptions()
    ) -> [HRVWindow] {
        guard windowS > 0, stepS > 0, let first = beats.first, let last = beats.last else { return [] }
        let origin = first.startS
        let epsilon = 1e-9
        var windows: [HRVWindow] = []
        var lo = 0
        var k = 0
        while true {
            let start = origin + Double(k) * stepS
            let end = start + windowS
            if end > last.endS + epsilon { break }
            while lo < beats.count && beats[lo].startS < start - epsilon { lo += 1 }
            var hi = lo
            while hi < beats.count && beats[hi].endS <= end + epsilon { hi += 1 }
            let inside = Array(beats[lo..<hi])
            let result = analyze(segments: segments(of: inside, gapToleranceS: gapToleranceS), options: options)
            windows.append(HRVWindow(startS: start, endS: end, result: result))
            k += 1
        }
        return windows
    }
}
