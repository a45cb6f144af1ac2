import Foundation
import GatewayEngine
import GRDB

/// The export formats of a recorded session. Pure: store rows in, text out.
public enum SessionExport {
    public enum Format: String, Sendable, CaseIterable {
        /// One row per beat: `session_id,device_id,beat_time_ms,rr_ms,rr_1024,hr_bpm,contact,segment_start`.
        case csv
        /// `{"session": …, "samples": […], "beats": […], "events": […]}`.
        case json
        /// One sample per line, the recording format that `stream --replay` reads.
        case jsonl
        /// EDF+ (binary): heart rate as a 1 Hz signal, every beat and the session's events as annotations.
        case edf
        /// One row per raw ECG sample: `session_id,device_id,time_ms,ecg_uv,segment_start`.
        case ecgCSV = "ecg-csv"
        /// One row per accelerometer sample: `session_id,device_id,time_ms,x_g,y_g,z_g,segment_start`.
        case accCSV = "acc-csv"

        /// The file name's extension: `ecg.csv` for ecg-csv.
        public var fileExtension: String {
            switch self {
            case .ecgCSV: "ecg.csv"
            case .accCSV: "acc.csv"
            default: rawValue
            }
        }
    }

    /// A regular stream a strap records in chunks (Polar PMD).
    public enum Waveform: Sendable {
        case ecg, acc

        public var csvHeader: String {
            switch self {
            case .ecg: "session_id,device_id,time_ms,ecg_uv,segment_start"
            case .acc: "session_id,device_id,time_ms,x_g,y_g,z_g,segment_start"
            }
        }

        /// What the session lacks when it holds none, and how it is recorded.
        public var missing: String {
            switch self {
            case .ecg: "no raw ECG (recorded by `stream --strap … --ecg` from a Polar strap)"
            case .acc: "no accelerometer samples (recorded by `stream --strap … --acc HZ` from a Polar strap)"
            }
        }

        /// How many samples a sample's chunk holds, and its rate; nil when it holds none.
        func shape(_ s: BiosignalSample) -> (count: Int, rateHz: Double)? {
            switch self {
            case .ecg:
                guard let v = s.ecgUv, !v.isEmpty, let r = s.ecgRateHz, r > 0, r.isFinite else { return nil }
                return (v.count, r)
            case .acc:
                guard let v = s.accG, !v.isEmpty, let r = s.accRateHz, r > 0, r.isFinite else { return nil }
                return (v.count, r)
            }
        }

        /// What placing a sample's chunk needs of it; nil when it holds none.
        func head(_ s: BiosignalSample) -> ChunkHead? {
            shape(s).map {
                ChunkHead(device: s.deviceId ?? s.source, timestampMs: s.timestampMs, gapBefore: s.gapBefore,
                          count: $0.count, rateHz: $0.rateHz)
            }
        }

        /// A sample's chunk as its samples' channel values one after the other (one channel for ECG, three for the
        /// accelerometer).
        func values(_ s: BiosignalSample) -> [Double] {
            switch self {
            case .ecg: (s.ecgUv ?? []).map { Double($0) }
            case .acc: (s.accG ?? []).flatMap { [$0.x, $0.y, $0.z] }
            }
        }

        /// The waveform's chunks among `samples`, held in memory.
        func chunks(in samples: [BiosignalSample]) -> WaveformChunks {
            WaveformChunks(heads: samples.map(head)) { body in
                for (i, s) in samples.enumerated() where shape(s) != nil { body(i, values(s)) }
            }
        }

        /// The store's column of the chunk's values, and of its rate; the bytes each value takes there.
        var columns: (values: String, rate: String, bytesPerValue: Int) {
            switch self {
            case .ecg: ("ecg_uv", "ecg_rate_hz", 4)
            case .acc: ("acc_g", "acc_rate_hz", 24)
            }
        }

    }

    /// How far a chunk's own time may be from the end of the previous one for it to continue that one: its time is
    /// its first sample's, mapped from the strap's clock and rounded to the millisecond, so it wanders by a few ms,
    /// more than half a sample at 130 Hz; further off is a clock reset.
    public static let continuityMs = 50.0

    /// What placing a chunk of a regular stream needs of its sample, not its values: whose it is, when it came,
    /// whether frames were lost before it, how many samples it holds and at what rate.
    public struct ChunkHead: Sendable, Equatable {
        public var device: String
        public var timestampMs: Int64
        public var gapBefore: Bool
        public var count: Int
        public var rateHz: Double
    }

    /// A chunk of a regular stream (raw ECG, accelerometer) on its device's timeline (`placeChunks`).
    struct PlacedChunk {
        /// Its position in the samples given.
        let position: Int
        let device: String
        let rateHz: Double
        /// The rate measured over its segment, nil when the nominal one holds.
        let measuredHz: Double?
        /// Its segment's samples in time: `line.timeMs(i)` is the time of the segment's sample i.
        let line: WaveformRate
        /// Its first sample's index in its segment (0: it starts the segment).
        let index: Int
    }

    /// Places each device's chunks (the heads that are not nil; a chunk's position is its head's). A chunk
    /// continues its device's segment while it follows the previous chunk by that one's sample count (within
    /// `continuityMs`, no lost frames flagged, the same rate); lost frames (`gapBefore`), a clock reset or a
    /// change of rate start a new segment. Within a segment the samples are evenly spaced from the first chunk's own
    /// time: exactly 1/rate apart, unless the chunks' times say the sensor samples at another rate than its nominal
    /// one (`WaveformRate.measured`: a Polar H10's "130 Hz" is 128–131 Hz), in which case they follow the line fitted
    /// through those times.
    static func placeChunks(_ heads: [ChunkHead?]) -> [PlacedChunk] {
        struct Open {
            let rate: Double
            let segment: Int
            var count: Int
            var lastMs: Double
            var lastCount: Int
        }
        var found: [(position: Int, device: String, rate: Double, segment: Int, index: Int)] = []
        var starts: [[(index: Int, timeMs: Double)]] = []
        var rates: [Double] = []
        var open: [String: Open] = [:]
        for (position, head) in heads.enumerated() {
            guard let head else { continue }
            let (device, count, rate) = (head.device, head.count, head.rateHz)
            let t = Double(head.timestampMs)
            if var o = open[device], o.rate == rate, !head.gapBefore,
                abs(t - (o.lastMs + Double(o.lastCount) * 1000 / rate)) <= continuityMs
            {
                found.append((position, device, rate, o.segment, o.count))
                starts[o.segment].append((o.count, t))
                o.count += count
                o.lastMs = t
                o.lastCount = count
                open[device] = o
            } else {
                let segment = starts.count
                starts.append([(0, t)])
                rates.append(rate)
                found.append((position, device, rate, segment, 0))
                open[device] = Open(rate: rate, segment: segment, count: count, lastMs: t, lastCount: count)
            }
        }
        let measured = starts.indices.map { WaveformRate.measured(chunkStarts: starts[$0], nominalHz: rates[$0]) }
        return found.map { f in
            PlacedChunk(
                position: f.position, device: f.device, rateHz: f.rate, measuredHz: measured[f.segment]?.rateHz,
                line: measured[f.segment] ?? WaveformRate(rateHz: f.rate, startMs: starts[f.segment][0].timeMs),
                index: f.index)
        }
    }

    /// Every chunk of `chunks` placed (`placeChunks`, from the heads of all of them), with its values, in recorded
    /// order.
    static func walk(_ chunks: WaveformChunks, _ body: (PlacedChunk, [Double]) -> Void) {
        let placed = placeChunks(chunks.heads)
        var next = 0
        chunks.each { position, values in
            guard next < placed.count, placed[next].position == position else { return }
            body(placed[next], values)
            next += 1
        }
    }

    /// One row per sample of `waveform`, in arrival order, each at its time (epoch ms, to the microsecond), as `walk`
    /// places them. Nil when the session holds none.
    public static func waveformCSV(sessionId: String, samples: [BiosignalSample], waveform: Waveform) -> String? {
        var any = false
        let bytes = ExportOutput.collect {
            any = waveformCSV(sessionId: sessionId, chunks: waveform.chunks(in: samples), waveform: waveform, into: $0)
        }
        return any ? String(decoding: bytes, as: UTF8.self) : nil
    }

    /// `waveformCSV` of `chunks`, a chunk at a time into `out`; false (only the header appended) when there is none.
    static func waveformCSV(sessionId: String, chunks: WaveformChunks, waveform: Waveform, into out: ExportOutput) -> Bool {
        out.append(waveform.csvHeader + "\n")
        var any = false
        let session = field(sessionId)
        let width = waveform == .ecg ? 1 : 3
        walk(chunks) { c, values in
            any = true
            guard !out.failed else { return }
            let prefix = session + "," + field(c.device) + ","
            var rows = ""
            for k in 0..<(values.count / width) {
                let value = waveform == .ecg
                    ? String(Int32(values[k]))
                    : "\(number(values[3 * k])),\(number(values[3 * k + 1])),\(number(values[3 * k + 2]))"
                let start = k == 0 && c.index == 0 ? 1 : 0
                rows += "\(prefix)\(String(format: "%.3f", c.line.timeMs(c.index + k))),\(value),\(start)\n"
            }
            out.append(rows)
        }
        return any
    }

    /// One device's stream of a waveform in a session: how many samples, at what rate, over what time, in how many
    /// segments (more than one: frames were lost, or the strap's clock was reset).
    public struct WaveformTrack: Sendable, Equatable {
        public var device: String
        public var rateHz: Double
        public var samples = 0
        public var segments = 0
        public var firstMs: Double
        public var lastMs: Double
        /// The rates measured over the segments where the sensor's differs from the nominal one (`WaveformRate`).
        public var measuredRatesHz: [Double] = []

        /// "1300 samples at 130 Hz over 10.0 s, 1 segment (A0:9E)"; "… at 130 Hz (sampled at 130.17 Hz) …" when
        /// the strap's real rate is another.
        public var text: String {
            let span = String(format: "%.1f", (lastMs - firstMs) / 1000 + 1 / rateHz)
            let rate = rateHz == rateHz.rounded() ? String(Int(rateHz)) : String(rateHz)
            let mean = measuredRatesHz.reduce(0, +) / Double(max(1, measuredRatesHz.count))
            let sampled = measuredRatesHz.isEmpty ? "" : String(format: " (sampled at %.2f Hz)", mean)
            return "\(samples) samples at \(rate) Hz\(sampled) over \(span) s, \(segments) segment\(segments == 1 ? "" : "s") (\(device))"
        }
    }

    /// The tracks of `waveform` in `samples`, in the order their devices first appear (one per device and rate).
    /// Placed as `walk` places them, counted without formatting a value (an hour of ECG is 468,000 of them).
    public static func waveformTracks(samples: [BiosignalSample], waveform: Waveform) -> [WaveformTrack] {
        waveformTracks(heads: samples.map(waveform.head))
    }

    /// `waveformTracks` of chunks' heads (as the store gives them without their values).
    public static func waveformTracks(heads: [ChunkHead?]) -> [WaveformTrack] {
        var tracks: [WaveformTrack] = []
        for c in placeChunks(heads) {
            guard let count = heads[c.position]?.count, count > 0 else { continue }
            let (device, rate, measured, starts) = (c.device, c.rateHz, c.measuredHz, c.index == 0)
            let first = c.line.timeMs(c.index)
            let last = c.line.timeMs(c.index + count - 1)
            if let i = tracks.lastIndex(where: { $0.device == device && $0.rateHz == rate }) {
                tracks[i].samples += count
                tracks[i].segments += starts ? 1 : 0
                tracks[i].firstMs = min(tracks[i].firstMs, first)
                tracks[i].lastMs = max(tracks[i].lastMs, last)
                if let measured, starts { tracks[i].measuredRatesHz.append(measured) }
            } else {
                tracks.append(WaveformTrack(
                    device: device, rateHz: rate, samples: count, segments: 1, firstMs: first, lastMs: last,
                    measuredRatesHz: measured.map { [$0] } ?? []))
            }
        }
        return tracks
    }

    public static let csvHeader = "session_id,device_id,beat_time_ms,rr_ms,rr_1024,hr_bpm,contact,segment_start"

    /// The `contact` column: `1` skin contact, `0` no skin contact, empty when the strap does not report it.
    public static func contactField(_ c: SensorContact?) -> String {
        switch c {
        case .contact: "1"
        case .noContact: "0"
        case .notSupported, nil: ""
        }
    }

    /// One line per RR interval, in arrival order, with the beat times of `BeatTimeline` (continuous across
    /// notifications, so consecutive beats of a device are their RR apart except across a gap, where `segment_start`
    /// is 1). Samples without RR have no beat rows.
    public static func csv(sessionId: String, samples: [BiosignalSample]) -> String {
        String(decoding: ExportOutput.collect { csv(sessionId: sessionId, samples: samples, into: $0) }, as: UTF8.self)
    }

    /// `csv`, a row at a time into `out`.
    public static func csv(sessionId: String, samples: [BiosignalSample], into out: ExportOutput) {
        out.append(csvHeader + "\n")
        for beat in BeatTimeline.beats(samples) {
            let s = samples[beat.sampleIndex]
            let raw = s.rrRaw1024.flatMap { $0.count == s.rrIntervalsMs?.count ? $0 : nil }
            out.append([
                field(sessionId), field(beat.device), String(Int64(beat.timeMs.rounded())),
                number(beat.rrMs), raw.map { String($0[beat.intervalIndex]) } ?? "", number(s.bpm), contactField(s.contact),
                beat.startsSegment ? "1" : "0",
            ].joined(separator: ",") + "\n")
        }
    }

    /// The beats of `BeatTimeline` as JSON, the CSV's row in each: `device_id`, `beat_time_ms` (integer), `rr_ms`,
    /// `rr_1024` (when the strap sent it), `hr_bpm`, `contact` (`true`/`false`, absent when the strap does not report
    /// it), and `segment_start` on the first beat after a gap (and the first of each device).
    public static func beatsJSON(samples: [BiosignalSample]) -> JSONValue {
        .array(BeatTimeline.beats(samples).map { b in
            let s = samples[b.sampleIndex]
            var o: [String: JSONValue] = [
                "device_id": .string(b.device),
                "beat_time_ms": .int(Int64(b.timeMs.rounded())),
                "rr_ms": .double(b.rrMs),
                "hr_bpm": .double(s.bpm),
            ]
            if let raw = s.rrRaw1024, raw.count == s.rrIntervalsMs?.count { o["rr_1024"] = .int(Int64(raw[b.intervalIndex])) }
            switch s.contact {
            case .contact: o["contact"] = .bool(true)
            case .noContact: o["contact"] = .bool(false)
            case .notSupported, nil: break
            }
            if b.startsSegment { o["segment_start"] = .bool(true) }
            return .object(o)
        })
    }

    /// The whole session as one JSON document: `session`, `samples`, `beats` (as `beatsJSON`) and `events`.
    public static func json(session: RecordedSession, samples: [BiosignalSample], events: [RecordedEvent]) -> String {
        let bytes = ExportOutput.collect { out in
            json(session: session, beats: beatsJSON(samples: samples), events: events, into: out) { samples.forEach($0) }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// EDF+ (docs/store.md, "EDF"): from the whole second at or before the session's start (or its first beat or
    /// sample, when earlier: a strap's first notification carries beats from before it), one-second records to its
    /// end, with
    /// - `HR` (bpm, 1 Hz): each second, the newest strap reading at or before it (0 before the first and after 5 s
    ///   without one); `HR camera` likewise when a camera contributed;
    /// - `ECG` (µV, at the strap's rate, 130 Hz for an H10) when raw ECG was recorded: each sample at its time, 0
    ///   where none came (before the stream, across a lost link); `Acc X`, `Acc Y`, `Acc Z` (g, ±16) likewise for
    ///   the accelerometer. Chunks follow each other sample for sample (`placeChunks`, `grid`). With more than one
    ///   strap, each has its own signals, numbered in the order the straps first appear (`HR 2`, `ECG 2`, `Acc X 2`),
    ///   the transducer field ending with the device;
    /// - annotations: `beat` at every beat time of the CSV export (`BeatTimeline`), with the device when there are
    ///   several; the session's start and end, sensor state changes, DFA alpha1 threshold crossings, and paced
    ///   breathing phases (with their durations).
    /// The HR signals' physical range: one digital step is exactly 0.01 bpm.
    public static let hrRange = -327.68...327.67
    /// How long before the session's start an EDF may begin, for beats and samples from before it.
    public static let earliestBeforeStartMs: Int64 = 10_000
    /// The longest span an EDF export covers: a week of one-second records (a few hundred MB with ECG). A session
    /// spanning more has a clock that jumped while it was recorded (a Raspberry Pi's clock set by NTP after the start,
    /// a corrupt timestamp in a replayed file), and its EDF would be years of empty records that no memory holds.
    public static let maxEDFSpanMs: Int64 = 7 * 86_400_000

    /// How many of `samples` an EDF export leaves out: stamped more than `earliestBeforeStartMs` before the
    /// session's start (a replayed recording whose clock stepped back, a clock mapping gone wrong). Said by the
    /// export and annotated in the file; the CSV and JSON lines exports hold them.
    public static func edfLeftOut(session: RecordedSession, samples: [BiosignalSample]) -> Int {
        let startMs = edfStartMs(session: session, samples: samples, beatTimes: BeatTimeline.beats(samples).map(\.timeMs))
        return samples.count { $0.timestampMs < startMs }
    }

    /// The EDF's first record's time (ms, a whole second).
    static func edfStartMs(session: RecordedSession, samples: [BiosignalSample], beatTimes: [Double]) -> Int64 {
        let times = samples.map(\.timestampMs)
        let earliest = ([session.startedAtMs] + times + beatTimes.map { Int64($0.rounded(.down)) }).min()!
        let stepped = (session.endedAtMs ?? session.startedAtMs) < session.startedAtMs
        let floor = stepped ? earliest : session.startedAtMs - earliestBeforeStartMs
        return Int64((Double(max(earliest, floor)) / 1000).rounded(.down)) * 1000
    }

    /// The chunks of one waveform, for the EDF: every sample's head (nil: no chunk of it) in recorded order, and a
    /// walk over the chunks' values in that order (each chunk's position, and its samples' channel values one after
    /// the other: x, y, z, x, … for the accelerometer).
    struct WaveformChunks {
        var heads: [ChunkHead?]
        var each: (_ body: (_ position: Int, _ values: [Double]) -> Void) -> Void
    }

    /// The EDF of a session whose samples (their waveform values among them) are held in memory.
    public static func edf(session: RecordedSession, samples: [BiosignalSample], events: [RecordedEvent]) -> [UInt8] {
        ExportOutput.collect { out in
            edf(session: session, samples: samples, events: events, ecg: Waveform.ecg.chunks(in: samples),
                acc: Waveform.acc.chunks(in: samples), into: out)
        }
    }

    /// The EDF, written a data record at a time into `out`. `samples` need not hold their waveform values (`ecg`
    /// and `acc` give them): the grids of the waveforms are the only whole-session arrays, ECG as its microvolts
    /// (4 bytes a sample) and the accelerometer as its digital values (2 bytes), as the file stores them.
    static func edf(
        session: RecordedSession, samples: [BiosignalSample], events: [RecordedEvent], ecg: WaveformChunks,
        acc: WaveformChunks, into out: ExportOutput
    ) {
        let beats = BeatTimeline.beats(samples)
        // A strap's first notification carries beats that ended before it, so before the session's start too (up to
        // a second and more): the file starts early enough to hold them (an annotation before it would be lost), but
        // not more than `earliestBeforeStartMs` early (a time far off is not worth a file of empty records).
        // A session whose end is stamped before its start had its wall clock stepped back by more than it had run
        // (NTP on a Pi that booted with its clock ahead): the times before and after the step do not overlap, and
        // the file holds them all, from the earliest (it began after all of them, with a negative length that
        // stopped the process). Otherwise it begins at most `earliestBeforeStartMs` before the start.
        let times = samples.map(\.timestampMs)
        let startMs = edfStartMs(session: session, samples: samples, beatTimes: beats.map(\.timeMs))
        let lastMs = ([session.endedAtMs, times.max(), beats.map { Int64($0.timeMs.rounded(.up)) }.max()]
            .compactMap { $0 } + [startMs]).max()!
        let records = Int((lastMs - startMs + 999) / 1000) + 1
        func series(_ arrived: [BiosignalSample]) -> [Double] {
            // In time order: after a step of the wall clock, samples that arrived later can be stamped earlier.
            let source = arrived.sorted { $0.timestampMs < $1.timestampMs }
            var out = [Double](repeating: 0, count: records)
            var i = 0
            var latest: BiosignalSample?
            for r in 0..<records {
                let t = startMs + Int64(r) * 1000
                while i < source.count && source[i].timestampMs <= t {
                    if source[i].bpm > 0, source[i].bpm.isFinite { latest = source[i] }
                    i += 1
                }
                if let l = latest, t - l.timestampMs <= 5000 { out[r] = l.bpm }
            }
            return out
        }
        let camera = samples.filter { $0.source == SessionMetrics.cameraSource }
        // The straps, in the order they first appear. With more than one, each has its own numbered signals ("HR 2",
        // "ECG 2", "Acc X 2": an EDF label holds 16 characters), the transducer field naming the device.
        let straps = samples.filter { $0.source != SessionMetrics.cameraSource }
        var devices: [String] = []
        for s in straps where !devices.contains(s.deviceId ?? s.source) { devices.append(s.deviceId ?? s.source) }
        let numbered = devices.count > 1
        func named(_ label: String, _ transducer: String, _ device: String, _ index: Int) -> (String, String) {
            numbered ? ("\(label) \(index + 1)", "\(transducer) \(device)") : (label, transducer)
        }
        var signals: [EDFWriter.Signal] = []
        for (d, device) in devices.enumerated() {
            let own = straps.filter { ($0.deviceId ?? $0.source) == device }
            let readings = own.filter { $0.contact != .noContact && $0.bpm > 0 && $0.bpm.isFinite }
            guard !readings.isEmpty || !numbered else { continue }
            let (label, transducer) = named("HR", "heart-rate strap (strap's own value)", device, d)
            signals.append(EDFWriter.Signal(
                label: label, transducer: transducer, physicalDimension: "bpm", physicalMin: hrRange.lowerBound,
                physicalMax: hrRange.upperBound, samplesPerRecord: 1, samples: series(readings)))
        }
        if signals.isEmpty {
            // No strap reading at all (none, or none with skin contact): one plain `HR` signal of zeros, as ever.
            signals.append(EDFWriter.Signal(
                label: "HR", transducer: "heart-rate strap (strap's own value)", physicalDimension: "bpm",
                physicalMin: hrRange.lowerBound, physicalMax: hrRange.upperBound, samplesPerRecord: 1,
                samples: series([])))
        }
        if !camera.isEmpty {
            signals.append(EDFWriter.Signal(
                label: "HR camera", transducer: "webcam rPPG", physicalDimension: "bpm", physicalMin: hrRange.lowerBound,
                physicalMax: hrRange.upperBound, samplesPerRecord: 1, samples: series(camera)))
        }
        // Each device's waveform at its first chunk's rate (chunks at another rate are left out), on grids made in
        // one walk over the chunks' values.
        func firstRates(_ chunks: WaveformChunks, upTo limit: Double) -> [String: Double] {
            var rates: [String: Double] = [:]
            for head in chunks.heads.compactMap({ $0 }) where rates[head.device] == nil { rates[head.device] = head.rateHz }
            return rates.filter { $0.value == $0.value.rounded() && $0.value <= limit }
        }
        let ecgRates = firstRates(ecg, upTo: 2000), accRates = firstRates(acc, upTo: 1000)
        let ecgGrids = grids(ecg, rates: ecgRates, startMs: startMs, records: records, channels: 1, zero: Int32(0)) {
            Int32(clamping: Int64($0.rounded()))
        }
        let accTemplate = EDFWriter.Signal(
            label: "", physicalDimension: "g", physicalMin: -16, physicalMax: 16, samplesPerRecord: 0, samples: [])
        let accGrids = grids(acc, rates: accRates, startMs: startMs, records: records, channels: 3,
                             zero: Int16(EDFWriter.digital(0, accTemplate))) { Int16(EDFWriter.digital($0, accTemplate)) }
        for (d, device) in devices.enumerated() {
            // Raw ECG (Polar PMD): each chunk's samples placed at their times, 130 per record; 0 where none came.
            if let rate = ecgRates[device], let ecg = ecgGrids[device]?[0] {
                let (label, transducer) = named("ECG", "Polar H10 chest strap electrodes (PMD)", device, d)
                // One µV per digital step, or the fewest whole µV per step that hold the largest value (the strap
                // sends 24 bits; electrodes off or a loose strap can go past ±32.767 mV, which was clipped).
                let peak = Double(ecg.reduce(0) { max($0, abs(Int64($1))) })
                let uvPerStep = min(256, max(1, (peak / 32767).rounded(.up)))  // 256: the strap's 24 bits
                var signal = EDFWriter.Signal(
                    label: label, transducer: transducer, physicalDimension: "uV",
                    physicalMin: -32768 * uvPerStep, physicalMax: 32767 * uvPerStep, samplesPerRecord: Int(rate),
                    samples: [])
                signal.digital = ecg.map { Int16(EDFWriter.digital(Double($0), signal)) }
                signals.append(signal)
            }
            // Accelerometer (Polar PMD): X, Y and Z in g at the strap's rate, placed likewise.
            if let rate = accRates[device], let axes = accGrids[device] {
                for (axis, values) in zip(["X", "Y", "Z"], axes) {
                    let (label, transducer) = named("Acc \(axis)", "Polar H10 accelerometer (PMD)", device, d)
                    var signal = EDFWriter.Signal(
                        label: label, transducer: transducer, physicalDimension: "g",
                        physicalMin: -16, physicalMax: 16, samplesPerRecord: Int(rate), samples: [])
                    signal.digital = values
                    signals.append(signal)
                }
            }
        }
        let several = Set(beats.map(\.device)).count > 1
        var notes = beats.map {
            EDFWriter.Annotation(onsetSec: ($0.timeMs - Double(startMs)) / 1000, text: several ? "beat \($0.device)" : "beat")
        }
        for e in events {
            guard let j = try? JSONValue(parsing: e.json) else { continue }
            func at(_ key: String) -> Double? { j[key]?.intValue.map { Double($0 - startMs) / 1000 } }
            switch e.type {
            case "session_started":
                if let t = at("started_at_ms") { notes.append(.init(onsetSec: t, text: "session started")) }
            case "session_summary":
                notes.append(.init(onsetSec: Double((session.endedAtMs ?? lastMs) - startMs) / 1000, text: "session ended"))
            case "session_error":
                notes.append(.init(
                    onsetSec: Double((session.endedAtMs ?? lastMs) - startMs) / 1000,
                    text: "session error: \(j["message"]?.stringValue ?? "")"))
            case "sensor_status":
                if let t = at("emitted_at_ms") {
                    let who = j["device_id"]?.stringValue ?? j["source"]?.stringValue ?? "sensor"
                    notes.append(.init(onsetSec: t, text: "\(who) \(j["state"]?.stringValue ?? "")"))
                }
            case "dfa_threshold":
                if let t = at("emitted_at_ms") {
                    let threshold = j["threshold"]?.doubleValue.map { String($0) } ?? "?"
                    notes.append(.init(
                        onsetSec: t, text: "DFA alpha1 \(j["direction"]?.stringValue ?? "crossed") \(threshold)"))
                }
            case "breathing_cue":
                if let t = at("starts_at_ms") {
                    notes.append(.init(
                        onsetSec: t, durationSec: j["phase_duration_ms"]?.doubleValue.map { $0 / 1000 },
                        text: j["phase"]?.stringValue ?? "breathing"))
                }
            default: break
            }
        }
        // Where a waveform has no samples (a lost frame, a link down), its channel holds zeros, which read as a flat
        // line: each such gap is annotated with its length, as the CSV exports mark the segment after it.
        for (chunks, name) in [(ecg, "ECG"), (acc, "Acc")] {
            var previousEnd: [String: Double] = [:]
            var devices: [String] = []
            let placed = placeChunks(chunks.heads)
            for c in placed where !devices.contains(c.device) { devices.append(c.device) }
            for c in placed {
                guard let count = chunks.heads[c.position]?.count, count > 0 else { continue }
                let first = c.line.timeMs(c.index)
                let end = c.line.timeMs(c.index + count)
                if c.index == 0, let before = previousEnd[c.device], first > before {
                    notes.append(.init(
                        onsetSec: (before - Double(startMs)) / 1000, durationSec: (first - before) / 1000,
                        text: devices.count > 1 ? "\(name) gap \(c.device)" : "\(name) gap"))
                }
                previousEnd[c.device] = max(previousEnd[c.device] ?? end, end)
            }
        }
        // Samples stamped before the file's start are not in it: said at its start (they went without a word).
        let leftOut = samples.count { $0.timestampMs < startMs }
        if leftOut > 0 {
            notes.append(.init(onsetSec: 0, text: "\(leftOut) sample\(leftOut == 1 ? "" : "s") stamped before this "
                + "file's start left out (csv and jsonl exports hold them)"))
        }
        // A session that did not end (killed, power lost): where its recording stops.
        if !events.contains(where: { $0.type == "session_summary" || $0.type == "session_error" }),
            session.state != .running
        {
            let lastSample = times.max() ?? lastMs
            notes.append(.init(onsetSec: Double(lastSample - startMs) / 1000, text: "session \(session.state.rawValue)"))
        }
        EDFWriter.write(
            startMs: startMs, records: records, signals: signals, annotations: notes, recordingCode: session.id, into: out)
    }

    public static func jsonl(samples: [BiosignalSample]) -> String {
        samples.map { $0.jsonValue.jsonString + "\n" }.joined()
    }

    /// `json`'s document written a part at a time (its keys in the order `JSONValue` writes them: sorted), the
    /// samples given one by one by `eachSample` rather than held in one tree with the whole document (a 24-hour
    /// session's tree took several times the file's size).
    static func json<E: Error>(
        session: RecordedSession, beats: JSONValue, events: [RecordedEvent], into out: ExportOutput,
        eachSample: ((BiosignalSample) -> Void) throws(E) -> Void
    ) throws(E) {
        let evs = events.map { (try? JSONValue(parsing: $0.json)) ?? .object(["type": .string($0.type)]) }
        out.append("{\"beats\":" + beats.jsonString + ",\"events\":" + JSONValue.array(evs).jsonString + ",\"samples\":[")
        var first = true
        try eachSample { sample in
            guard !out.failed else { return }
            out.append((first ? "" : ",") + sample.jsonValue.jsonString)
            first = false
        }
        out.append("],\"session\":" + session.jsonValue.jsonString + "}\n")
    }

    private static func number(_ v: Double) -> String {
        v == v.rounded() && abs(v) < 1e15 ? String(Int64(v)) : String(v)
    }

    /// RFC 4180 quoting when needed.
    static func field(_ s: String) -> String {
        guard s.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return s }
        return "\"" + s.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

extension SessionStore {
    /// Session `id` (exactly) in `format`, whole.
    public func export(id: String, format: SessionExport.Format) throws(StoreError) -> [UInt8] {
        var failure: StoreError?
        let bytes = ExportOutput.collect { output in
            do throws(StoreError) { try export(id: id, format: format, into: output) } catch { failure = error }
        }
        if let failure { throw failure }
        return bytes
    }

    /// Session `id` (exactly) in `format`, into `output` a part at a time (the caller then calls `output.finish()`).
    /// Nothing is appended before the checks that can refuse the export (no such session, nothing of that kind,
    /// an EDF's span), except a waveform CSV's header, gathered and not yet handed over when it is refused. The
    /// beat CSV and the beats of the JSON read the samples that are not ECG or motion chunks; JSON lines and the
    /// JSON's samples are read one at a time.
    public func export(id: String, format: SessionExport.Format, into output: ExportOutput) throws(StoreError) {
        let s = try checkExport(id: id, format: format)
        switch format {
        case .csv:
            SessionExport.csv(sessionId: id, samples: try beatSamples(sessionId: id), into: output)
        case .jsonl:
            try eachSample(sessionId: id, while: { !output.failed }) { output.append($0.jsonValue.jsonString + "\n") }
        case .json:
            let beats = SessionExport.beatsJSON(samples: try beatSamples(sessionId: id))
            try SessionExport.json(session: s, beats: beats, events: try events(sessionId: id), into: output) {
                (body: (BiosignalSample) -> Void) throws(StoreError) in try eachSample(sessionId: id, while: { !output.failed }, body)
            }
        case .edf:
            // The samples without their waveforms; those read a chunk at a time onto the grids.
            let samples = try samples(sessionId: id, waveforms: false)
            let events = try events(sessionId: id)
            try read { db in
                let failure = ReadFailure()
                SessionExport.edf(
                    session: s, samples: samples, events: events,
                    ecg: try Self.waveformChunks(db, sessionId: id, waveform: .ecg, failure: failure, while: { !output.failed }),
                    acc: try Self.waveformChunks(db, sessionId: id, waveform: .acc, failure: failure, while: { !output.failed }),
                    into: output)
                if let error = failure.error { throw error }
            }
        case .ecgCSV, .accCSV:
            // Placed from the chunks' heads, then written a chunk at a time as their values are read (a 4-hour
            // session's ECG, every chunk held at once, took 98 MB).
            let waveform: SessionExport.Waveform = format == .ecgCSV ? .ecg : .acc
            try read { db in
                let failure = ReadFailure()
                let any = SessionExport.waveformCSV(
                    sessionId: id,
                    chunks: try Self.waveformChunks(db, sessionId: id, waveform: waveform, failure: failure, while: { !output.failed }),
                    waveform: waveform, into: output)
                if let error = failure.error { throw error }
                guard any else { throw StoreError.nothingToExport("session \(id) holds \(waveform.missing)") }
            }
        }
    }

    /// Session `id` (exactly), once every check that can refuse its export in `format` has passed, without making
    /// the export: a reader answering whether (and what) it could download (a relay's HEAD) asks this, and
    /// `export` asks it first. Throws `.sessionNotFound`, or `.nothingToExport` for an EDF spanning more than
    /// `SessionExport.maxEDFSpanMs` and a waveform CSV of a session without that waveform.
    @discardableResult
    public func checkExport(id: String, format: SessionExport.Format) throws(StoreError) -> RecordedSession {
        guard let s = try session(id: id) else { throw .sessionNotFound(id) }
        switch format {
        case .csv, .jsonl, .json:
            break
        case .edf:
            let (first, last) = try read { db in
                let row = try Row.fetchOne(
                    db, sql: "SELECT min(timestamp_ms) AS first, max(timestamp_ms) AS last FROM samples WHERE session_id = ?",
                    arguments: [id])
                return (row?["first"] as Int64?, row?["last"] as Int64?)
            }
            // From the session's start (or its earliest sample, when earlier) to its end (or its latest sample).
            let span = max(s.endedAtMs ?? s.startedAtMs, last ?? s.startedAtMs) - min(s.startedAtMs, first ?? s.startedAtMs)
            guard span <= SessionExport.maxEDFSpanMs else {
                throw .nothingToExport("session \(id) spans \(span / 86_400_000) days from its start to its last sample, "
                    + "more than the \(SessionExport.maxEDFSpanMs / 86_400_000) days an EDF export covers (one record a "
                    + "second): the clock jumped while it was recorded, or a timestamp is wrong. Export it with --format "
                    + "csv, jsonl or json, which hold every sample at its recorded time")
            }
        case .ecgCSV, .accCSV:
            let waveform: SessionExport.Waveform = format == .ecgCSV ? .ecg : .acc
            let (values, rate, width) = waveform.columns
            // A chunk as `waveformHeads` takes one: some values, at a finite rate above zero.
            let any = try read { db in
                try Bool.fetchOne(db, sql: """
                    SELECT EXISTS (SELECT 1 FROM samples WHERE session_id = ? AND \(values) IS NOT NULL
                        AND length(\(values)) / \(width) > 0 AND \(rate) > 0 AND \(rate) <= 1.7976931348623157e308)
                    """, arguments: [id]) ?? false
            }
            guard any else { throw .nothingToExport("session \(id) holds \(waveform.missing)") }
        }
        return s
    }

    /// An error met reading a walk's values (the walk itself cannot throw), kept for after it.
    private final class ReadFailure {
        var error: (any Error)?
    }

    /// Session `id`'s chunks of `waveform` in the store: their heads read now, their values one chunk at a time as
    /// the walk asks for them (an error doing so kept in `failure`).
    private static func waveformChunks(
        _ db: Database, sessionId id: String, waveform: SessionExport.Waveform, failure: ReadFailure,
        while going: @escaping () -> Bool
    ) throws -> SessionExport.WaveformChunks {
        let heads = try waveformHeads(db, sessionId: id, waveform: waveform)
        return SessionExport.WaveformChunks(heads: heads.map(\.head)) { body in
            do {
                try eachChunkValues(db, sessionId: id, waveform: waveform, rowIds: heads.map(\.rowId), while: going) {
                    body($0, waveform.values($1))
                }
            } catch { failure.error = failure.error ?? error }
        }
    }

    /// The heads of session `id`'s chunks of `waveform`, in the order they were recorded; their values are not read.
    public func waveformHeads(sessionId id: String, waveform: SessionExport.Waveform) throws(StoreError) -> [SessionExport.ChunkHead] {
        try read { db in try Self.waveformHeads(db, sessionId: id, waveform: waveform).map(\.head) }
    }

    private static func waveformHeads(
        _ db: Database, sessionId id: String, waveform: SessionExport.Waveform
    ) throws -> [(rowId: Int64, head: SessionExport.ChunkHead)] {
        let (values, rate, width) = waveform.columns
        let rows = try Row.fetchCursor(db, sql: """
            SELECT id, timestamp_ms, COALESCE(device_id, source) AS device, gap_before, length(\(values)) / \(width) AS n,
                \(rate) AS rate
            FROM samples WHERE session_id = ? AND \(values) IS NOT NULL ORDER BY id
            """, arguments: [id])
        var heads: [(rowId: Int64, head: SessionExport.ChunkHead)] = []
        while let row = try rows.next() {
            let count: Int = row["n"], rateHz: Double? = row["rate"]
            // As `Waveform.shape` takes a chunk: some values, at a rate.
            guard count > 0, let rateHz, rateHz > 0, rateHz.isFinite else { continue }
            heads.append((row["id"], SessionExport.ChunkHead(
                device: row["device"], timestampMs: row["timestamp_ms"], gapBefore: (row["gap_before"] as Int64? ?? 0) != 0,
                count: count, rateHz: rateHz)))
        }
        return heads
    }

    /// The values of the chunks whose row ids are `rowIds` (the heads', in order), read one at a time: each chunk's
    /// position in `rowIds` and a sample holding its values (and its rate) only.
    private static func eachChunkValues(
        _ db: Database, sessionId id: String, waveform: SessionExport.Waveform, rowIds: [Int64],
        while going: () -> Bool, _ body: (Int, BiosignalSample) -> Void
    ) throws {
        let (values, rate, _) = waveform.columns
        let rows = try Row.fetchCursor(
            db, sql: "SELECT id, \(values) AS v, \(rate) AS r FROM samples WHERE session_id = ? AND \(values) IS NOT NULL ORDER BY id",
            arguments: [id])
        var position = 0
        while position < rowIds.count, going(), let row = try rows.next() {
            guard (row["id"] as Int64) == rowIds[position], let data = row["v"] as Data? else { continue }
            let r: Double? = row["r"]
            body(position, waveform == .ecg
                ? BiosignalSample(timestampMs: 0, bpm: 0, source: "", ecgUv: Self.int32s(data), ecgRateHz: r)
                : BiosignalSample(timestampMs: 0, bpm: 0, source: "", accG: Self.vectors(data), accRateHz: r))
            position += 1
        }
    }

    /// `s` as `sessions list --json` and the relay's `GET /v1/sessions` list it: its JSON with the table's columns,
    /// the duration (to the end, or the last sample) and the pacing summary (the relay's lacked the duration).
    public func listed(_ s: RecordedSession) -> JSONValue {
        var o = s.jsonValue.objectValue ?? [:]
        if let ms = s.durationMs { o["duration_ms"] = .int(ms) }
        if let pacing = pacingSummary(s) { o["pacing"] = .string(pacing) }
        return .object(o)
    }

    /// What paced a breathing session, for lists: "4-7-8 adherence 92 % RSA 8.1 bpm" for a pattern,
    /// "resonance 5.5/min" for a resonance assessment ("resonance ?" when it found none); nil otherwise.
    public func pacingSummary(_ s: RecordedSession) -> String? {
        let lastSummary = { (try? self.events(sessionId: s.id))?.last { $0.type == "session_summary" }
            .flatMap { try? JSONValue(parsing: $0.json) } }
        if s.config?["resonance_assessment"] != nil {
            let assessment = lastSummary()?["metrics"]?["resonance_assessment"]
            if let rate = assessment?["resonance_rate_bpm"]?.doubleValue { return String(format: "resonance %g/min", rate) }
            if case .array(let steps)? = assessment?["steps"], let scored = assessment?["scored_steps"]?.intValue {
                return "resonance incomplete (\(scored)/\(steps.count) steps)"
            }
            return "resonance ?"
        }
        guard let pattern = s.config?["pattern"]?.stringValue else { return nil }
        var text = pattern
        let summary = lastSummary()
        if let a = summary?["metrics"]?["breathing_adherence"]?.doubleValue {
            text += " adherence \(Int((a * 100).rounded())) %"
        }
        if let r = summary?["metrics"]?["rsa_amplitude_bpm"]?.doubleValue { text += " RSA \(String(format: "%.1f", r)) bpm" }
        return text
    }
}

extension SessionExport {
    /// A fixed-rate signal (EDF) of `records` seconds from `startMs`: each chunk's samples (`values`: one array of
    /// `channels` values per sample) in the slot nearest their time as `placeChunks` gives it, 0 where none came.
    /// At the nominal rate a segment's samples take consecutive slots; a strap sampling at another rate (a real
    /// H10's "130 Hz" is 128–131 Hz) keeps its samples at their times, so where it runs fast two samples meet in one
    /// slot (the later is kept: one sample in 770 at 130.17 Hz) and where it runs slow a slot between two of them is
    /// left over, which takes the earlier one's value.
    static func grid(
        _ chunks: [BiosignalSample], rateHz rate: Double, startMs: Int64, records: Int, channels: Int,
        values: @escaping (BiosignalSample) -> [[Double]]
    ) -> [[Double]] {
        let heads = chunks.map { s in
            ChunkHead(device: s.deviceId ?? s.source, timestampMs: s.timestampMs, gapBefore: s.gapBefore,
                      count: values(s).count, rateHz: rate)
        }
        let source = WaveformChunks(heads: heads) { body in for (i, s) in chunks.enumerated() { body(i, values(s).flatMap { $0 }) } }
        let devices = Set(heads.map(\.device))
        let all = grids(source, rates: Dictionary(uniqueKeysWithValues: devices.map { ($0, rate) }), startMs: startMs,
                        records: records, channels: channels, zero: 0.0) { $0 }
        // One device's chunks (as the EDF gives them): its grid.
        return all.values.first ?? [[Double]](repeating: [Double](repeating: 0, count: records * Int(rate)), count: channels)
    }

    /// Each device's chunks at its rate in `rates` (the others left out), placed as `placeChunks` places them on a
    /// grid of `records` seconds from `startMs` (`rate` slots a second, per channel), each value made by `make`:
    /// at the nominal rate a segment's samples take consecutive slots; a strap sampling at another rate (a real
    /// H10's "130 Hz" is 128–131 Hz) keeps its samples at their times, so where it runs fast two samples meet in one
    /// slot (the later is kept: one sample in 770 at 130.17 Hz) and where it runs slow a slot between two of them is
    /// left over, which takes the earlier one's value; `zero` where none came. The values are read in one walk.
    static func grids<T>(
        _ chunks: WaveformChunks, rates: [String: Double], startMs: Int64, records: Int, channels: Int, zero: T,
        make: (Double) -> T
    ) -> [String: [[T]]] {
        let heads = chunks.heads.map { h in h.flatMap { rates[$0.device] == $0.rateHz ? $0 : nil } }
        let placed = placeChunks(heads)
        var out: [String: [[T]]] = [:]
        for device in Set(placed.map(\.device)) {
            out[device] = [[T]](repeating: [T](repeating: zero, count: records * Int(rates[device]!)), count: channels)
        }
        // Per device, where its last sample went, and its segment (the segment's line's start); the sample as its
        // chunk's values and its index there.
        var lastSlot: [String: (start: Double, slot: Int, values: [Double], k: Int)] = [:]
        var next = 0
        chunks.each { position, values in
            guard next < placed.count, placed[next].position == position else { return }
            let c = placed[next]
            next += 1
            let rate = rates[c.device]!
            let size = records * Int(rate)
            // In slots: where the segment's line starts, and how many slots a sample takes (1 at the nominal rate).
            // The start is reckoned once per segment: a line half a slot off the grid then rounds the same way for
            // every sample (reckoned per sample from its time, floating-point error sent some of them the other
            // way, two samples into one slot and one left over).
            let base = (c.line.startMs - Double(startMs)) / 1000 * rate
            let perSample = rate / c.line.rateHz
            var grid = out[c.device]!
            out[c.device] = nil  // held here alone while it is written (no copy)
            for k in 0..<(values.count / channels) {
                let slot = Int((base + Double(c.index + k) * perSample).rounded())
                if c.index + k > 0, let last = lastSlot[c.device], last.start == c.line.startMs, slot == last.slot + 2,
                    slot - 1 >= 0, slot - 1 < size
                {
                    for ch in 0..<channels { grid[ch][slot - 1] = make(last.values[last.k * channels + ch]) }
                }
                lastSlot[c.device] = (c.line.startMs, slot, values, k)
                guard slot >= 0 && slot < size else { continue }
                for ch in 0..<channels { grid[ch][slot] = make(values[k * channels + ch]) }
            }
            out[c.device] = grid
        }
        return out
    }
}

/// An export's bytes on their way out: gathered up to `flushBytes`, then handed to the sink (a file, standard output,
/// a response), so that an export never holds itself whole in memory twice over (as text, then as bytes: a 4-hour
/// ECG CSV of 127 MB took 345 MB). A sink that fails is not called again; `finish()` throws its error.
public final class ExportOutput {
    public static let flushBytes = 1 << 20
    private var bytes: [UInt8] = []
    private let sink: ([UInt8]) throws -> Void
    private var failure: (any Error)?

    private let cancelled: () -> Bool

    /// `cancelled` says when nobody wants the export any more (a download's client went): producers then stop as
    /// they would after a failed write, before the next one.
    public init(sink: @escaping ([UInt8]) throws -> Void, cancelled: @escaping () -> Bool = { false }) {
        self.sink = sink
        self.cancelled = cancelled
        bytes.reserveCapacity(Self.flushBytes + 4096)
    }

    /// Whether the sink has failed, or the export is no longer wanted (producers stop early).
    public var failed: Bool { failure != nil || cancelled() }

    public func append(_ text: String) {
        bytes.append(contentsOf: text.utf8)
        if bytes.count >= Self.flushBytes { flush() }
    }

    public func append(bytes more: [UInt8]) {
        bytes.append(contentsOf: more)
        if bytes.count >= Self.flushBytes { flush() }
    }

    /// Hands over what is left; throws the sink's error, if it failed.
    public func finish() throws {
        if !bytes.isEmpty { flush() }
        if let failure { throw failure }
    }

    private func flush() {
        defer { bytes.removeAll(keepingCapacity: true) }
        guard failure == nil else { return }
        do { try sink(bytes) } catch { failure = error }
    }

    /// What `produce` appends, as one array (for callers that need the whole export: tests, small exports).
    public static func collect(_ produce: (ExportOutput) throws -> Void) rethrows -> [UInt8] {
        var all: [UInt8] = []
        let output = ExportOutput { all.append(contentsOf: $0) }
        try produce(output)
        try? output.finish()  // the collecting sink does not fail
        return all
    }
}
