import GatewayEngine
import HRVAnalysis

/// Turns a series of RR intervals into the notifications a real strap would send: one packet per interval
/// (1 s by default) carrying every beat that ended since the previous packet (0, 1, 2 or more), oldest first, with
/// a smoothed heart rate. Beats beyond what fits in one packet are carried to the next one, as firmware does.
///
/// The schedule is exact in 1/1024 s: beat `k` ends at ΣRR[0...k] after the start, and packet `n` (from 1) is sent at
/// `n × intervalMs` with the beats whose end falls in `((n-1) × interval, n × interval]`.
public struct HeartRatePacer: Sequence, IteratorProtocol, Sendable {
    /// One notification to send `offsetMs` after the start.
    public struct Packet: Sendable, Equatable {
        public var offsetMs: Int64
        public var measurement: HeartRateMeasurement
        public var payload: [UInt8] { measurement.encoded() }
    }

    public let rr1024: [UInt16]
    public let intervalMs: Int64
    public let contact: SensorContact
    public let maxRRPerPacket: Int
    /// Repeat the series forever (for an emulated strap).
    public let loops: Bool

    private var nextBeat = 0
    /// End of the next beat, in 1/1024 s from the start.
    private var nextBeatEnd1024: Int64
    private var packetIndex: Int64 = 0
    private var recent: [UInt16] = []

    /// - Parameters:
    ///   - rr1024: RR intervals in 1/1024 s; zero values are skipped.
    ///   - smoothing: how many recent RR the reported heart rate averages over.
    public init(
        rr1024: [UInt16],
        intervalMs: Int64 = 1000,
        contact: SensorContact = .contact,
        maxRRPerPacket: Int = HeartRateMeasurement.maxRRCount(uint16Format: false, energyExpended: false),
        loops: Bool = false
    ) {
        self.rr1024 = rr1024.filter { $0 > 0 }
        self.intervalMs = Swift.max(1, intervalMs)
        self.contact = contact
        self.maxRRPerPacket = Swift.max(1, maxRRPerPacket)
        self.loops = loops
        self.nextBeatEnd1024 = self.rr1024.first.map(Int64.init) ?? 0
    }

    private static let smoothing = 4

    public mutating func next() -> Packet? {
        guard !rr1024.isEmpty else { return nil }
        if !loops, nextBeat >= rr1024.count { return nil }
        packetIndex += 1
        let sendAt1024 = packetIndex * intervalMs * 1024 / 1000
        var carried: [UInt16] = []
        while carried.count < maxRRPerPacket, loops || nextBeat < rr1024.count, nextBeatEnd1024 <= sendAt1024 {
            let rr = rr1024[nextBeat % rr1024.count]
            carried.append(rr)
            nextBeat += 1
            nextBeatEnd1024 += Int64(rr1024[nextBeat % rr1024.count])
        }
        recent.append(contentsOf: carried)
        if recent.count > Self.smoothing { recent.removeFirst(recent.count - Self.smoothing) }
        let basis = recent.isEmpty ? [rr1024[0]] : recent
        let meanRaw = Double(basis.reduce(0) { $0 + Int($1) }) / Double(basis.count)
        let bpm = UInt16(Swift.min(Double(UInt16.max), (60 * 1024 / meanRaw).rounded()))
        let m = HeartRateMeasurement(heartRate: bpm, contact: contact, rrIntervals1024: carried)
        return Packet(offsetMs: packetIndex * intervalMs, measurement: m)
    }
}

/// A list of RR intervals read from a file.
///
/// Accepted forms: a CSV with a header naming an `rr_1024` column (1/1024 s, preferred) or an `rr_ms` column
/// (milliseconds), like the files in `shared/data/hrv`; or plain text with one interval in milliseconds per line.
/// Blank lines and lines starting with `#` are skipped.
public struct RRSeries: Sendable, Equatable {
    public var rr1024: [UInt16]

    public init(rr1024: [UInt16]) { self.rr1024 = rr1024 }

    public var rrMs: [Double] { rr1024.map(HeartRateMeasurement.milliseconds(fromRaw1024:)) }

    /// Parses the text of an RR file with the one RR-file parser (`HRVAnalysis.RRFile`), preferring the exact
    /// `rr_1024` column when the header has both. `name` is used in error messages.
    public init(parsing text: String, name: String = "RR file") throws(RRFileError) {
        let file: RRFile
        do throws(RRFileError) {
            file = try RRFile.parse(text, preferring: .counts1024)
        } catch {
            var e = error
            e.name = name
            throw e
        }
        var values: [UInt16] = []
        values.reserveCapacity(file.rrMs.count)
        for (k, ms) in file.rrMs.enumerated() {
            let raw = (ms * 1.024).rounded()
            guard raw >= 1, raw <= Double(UInt16.max) else {
                throw RRFileError(
                    line: nil,
                    message: "RR value \(k + 1) (\(ms) ms) is outside what a strap can send (1...65535 in 1/1024 s)",
                    name: name)
            }
            values.append(UInt16(raw))
        }
        rr1024 = values
    }
}
