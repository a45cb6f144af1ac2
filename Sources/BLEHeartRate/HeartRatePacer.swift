import GatewayEngine

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

    /// Parses the text of an RR file. `name` is used in error messages.
    public init(parsing text: String, name: String = "RR file") throws(RRFileError) {
        var header: [String]?
        var column: (index: Int, isRaw: Bool)?
        var values: [UInt16] = []
        var lineNumber = 0
        for rawLine in text.split(separator: "\n", omittingEmptySubsequences: false) {
            lineNumber += 1
            let line = rawLine.trimmingWhitespace()
            if line.isEmpty || line.hasPrefix("#") { continue }
            let fields = line.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingWhitespace() }
            if header == nil, values.isEmpty, fields.contains(where: { Double($0) == nil }) {
                header = fields
                if let i = fields.firstIndex(of: "rr_1024") {
                    column = (i, true)
                } else if let i = fields.firstIndex(where: { $0 == "rr_ms" || $0 == "rr" || $0 == "ibi_ms" }) {
                    column = (i, false)
                } else {
                    throw RRFileError(name: name, line: lineNumber, reason: "header has no rr_1024 or rr_ms column")
                }
                continue
            }
            let index = column?.index ?? 0
            let isRaw = column?.isRaw ?? false
            if column == nil, fields.count != 1 {
                throw RRFileError(name: name, line: lineNumber, reason: "expected one RR value in ms per line")
            }
            guard index < fields.count, let v = Double(fields[index]), v.isFinite else {
                throw RRFileError(name: name, line: lineNumber, reason: "not a number: \"\(line)\"")
            }
            let raw = isRaw ? v : v * 1.024
            guard raw >= 1, raw <= Double(UInt16.max) else {
                throw RRFileError(
                    name: name, line: lineNumber,
                    reason: "RR \(fields[index]) \(isRaw ? "(1/1024 s)" : "ms") is outside 1...\(isRaw ? "65535" : "63999")")
            }
            values.append(UInt16(raw.rounded()))
        }
        guard !values.isEmpty else { throw RRFileError(name: name, line: nil, reason: "no RR values") }
        rr1024 = values
    }
}

/// An RR file that could not be read: which file, which line, what is wrong.
public struct RRFileError: Error, Sendable, Equatable, CustomStringConvertible {
    public var name: String
    public var line: Int?
    public var reason: String

    public init(name: String, line: Int?, reason: String) {
        self.name = name
        self.line = line
        self.reason = reason
    }

    public var description: String { line.map { "\(name):\($0): \(reason)" } ?? "\(name): \(reason)" }
}

extension Substring {
    fileprivate func trimmingWhitespace() -> String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}
