import Foundation

/// European Data Format (EDF+, Kemp & Olivan 2003; https://www.edfplus.info/specs/edfplus.html), written for
/// `sessions export --format edf`: a header, then data records of a fixed duration, each holding every signal's
/// samples for that time as 16-bit little-endian integers, plus an `EDF Annotations` signal carrying time-stamped
/// annotations (TALs). Continuous recordings only (`EDF+C`). Pure: values in, bytes out.
public enum EDFWriter {
    /// An ordinary signal: physical values (`samplesPerRecord` per record, in order), mapped linearly onto the
    /// 16-bit digital range between `physicalMin` and `physicalMax` (values outside are clipped).
    public struct Signal: Sendable, Equatable {
        public var label: String
        public var transducer: String
        public var physicalDimension: String
        public var physicalMin: Double
        public var physicalMax: Double
        public var prefiltering: String
        public var samplesPerRecord: Int
        public var samples: [Double]
        /// The digital values themselves, when the signal was made so (then `samples` is not read): a day of ECG
        /// takes 2 bytes a sample so, not 8.
        public var digital: [Int16]?

        public init(
            label: String, transducer: String = "", physicalDimension: String, physicalMin: Double, physicalMax: Double,
            prefiltering: String = "", samplesPerRecord: Int, samples: [Double]
        ) {
            self.label = label
            self.transducer = transducer
            self.physicalDimension = physicalDimension
            self.physicalMin = physicalMin
            self.physicalMax = physicalMax
            self.prefiltering = prefiltering
            self.samplesPerRecord = samplesPerRecord
            self.samples = samples
        }
    }

    /// An annotation: onset in seconds from the file's start, an optional duration, and its text.
    public struct Annotation: Sendable, Equatable {
        public var onsetSec: Double
        public var durationSec: Double?
        public var text: String
        public init(onsetSec: Double, durationSec: Double? = nil, text: String) {
            self.onsetSec = onsetSec
            self.durationSec = durationSec
            self.text = text
        }
    }

    public static let digitalMin = -32768
    public static let digitalMax = 32767

    /// The file. `startMs` (epoch ms, written as UTC) must be a whole second: onsets and records count from it.
    /// `patient` and `recording` are the EDF+ subfields after the fixed ones (spaces become underscores).
    public static func write(
        startMs: Int64, records: Int, recordDurationSec: Int = 1, signals: [Signal], annotations: [Annotation],
        patientCode: String = "X", recordingCode: String = "X", equipment: String = "hr-gateway"
    ) -> [UInt8] {
        ExportOutput.collect { out in
            write(startMs: startMs, records: records, recordDurationSec: recordDurationSec, signals: signals,
                  annotations: annotations, patientCode: patientCode, recordingCode: recordingCode, equipment: equipment,
                  into: out)
        }
    }

    /// `write`, the header and then a data record at a time into `out`.
    public static func write(
        startMs: Int64, records: Int, recordDurationSec: Int = 1, signals: [Signal], annotations: [Annotation],
        patientCode: String = "X", recordingCode: String = "X", equipment: String = "hr-gateway", into out: ExportOutput
    ) {
        let records = max(1, records)
        // Annotations by record (onset within the record's time), each record's TAL list led by its timekeeping TAL.
        var perRecord = [[UInt8]](repeating: [], count: records)
        for r in 0..<records { perRecord[r] = Array("+\(r * recordDurationSec)\u{14}\u{14}\u{0}".utf8) }
        for a in annotations.sorted(by: { $0.onsetSec < $1.onsetSec }) where a.onsetSec >= 0 {
            let r = min(records - 1, Int(a.onsetSec) / recordDurationSec)
            perRecord[r] += tal(a)
        }
        let annotationSamples = max(1, (perRecord.map(\.count).max() ?? 0) + 1) / 2 + 1
        let all = signals + [Signal(
            label: "EDF Annotations", physicalDimension: "", physicalMin: -1, physicalMax: 1,
            samplesPerRecord: annotationSamples, samples: [])]

        var header = ""
        let date = Date(timeIntervalSince1970: Double(startMs) / 1000)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        let months = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
        let year = c.year ?? 1985
        header += field("0", 8)
        header += field("\(subfield(patientCode)) X X X", 80)
        header += field(
            "Startdate \(two(c.day ?? 1))-\(months[(c.month ?? 1) - 1])-\(year) X X \(subfield(recordingCode)) \(subfield(equipment))",
            80)
        header += field("\(two(c.day ?? 1)).\(two(c.month ?? 1)).\(two(year % 100))", 8)
        header += field("\(two(c.hour ?? 0)).\(two(c.minute ?? 0)).\(two(c.second ?? 0))", 8)
        header += field(String(256 * (all.count + 1)), 8)
        header += field("EDF+C", 44)
        header += field(String(records), 8)
        header += field(String(recordDurationSec), 8)
        header += field(String(all.count), 4)
        header += all.map { field($0.label, 16) }.joined()
        header += all.map { field($0.transducer, 80) }.joined()
        header += all.map { field($0.physicalDimension, 8) }.joined()
        header += all.map { field(number($0.physicalMin), 8) }.joined()
        header += all.map { field(number($0.physicalMax), 8) }.joined()
        header += all.map { _ in field(String(digitalMin), 8) }.joined()
        header += all.map { _ in field(String(digitalMax), 8) }.joined()
        header += all.map { field($0.prefiltering, 80) }.joined()
        header += all.map { field(String($0.samplesPerRecord), 8) }.joined()
        header += all.map { _ in field("", 32) }.joined()

        out.append(header)
        var record: [UInt8] = []
        record.reserveCapacity(all.reduce(0) { $0 + 2 * $1.samplesPerRecord })
        for r in 0..<records {
            guard !out.failed else { return }  // nobody reads it any more
            record.removeAll(keepingCapacity: true)
            for s in signals {
                let floor = Int16(digital(s.physicalMin, s))
                for i in 0..<s.samplesPerRecord {
                    let k = r * s.samplesPerRecord + i
                    let v = s.digital.map { k < $0.count ? $0[k] : floor }
                        ?? (k < s.samples.count ? Int16(digital(s.samples[k], s)) : floor)
                    let u = UInt16(bitPattern: v)
                    record.append(UInt8(u & 0xFF))
                    record.append(UInt8(u >> 8))
                }
            }
            record += perRecord[r]
            record += [UInt8](repeating: 0, count: 2 * annotationSamples - perRecord[r].count)
            out.append(bytes: record)
        }
    }

    /// One time-stamped annotation list: `+onset[\x15duration]\x14text\x14\x00`.
    static func tal(_ a: Annotation) -> [UInt8] {
        var s = "+" + seconds(a.onsetSec)
        if let d = a.durationSec, d > 0 { s += "\u{15}" + seconds(d) }
        let text = a.text.unicodeScalars.filter { $0.value >= 0x20 }.map(String.init).joined()
        return Array((s + "\u{14}" + text + "\u{14}\u{0}").utf8)
    }

    /// Seconds with millisecond precision and no trailing zeros (`12.3`, `7`).
    static func seconds(_ v: Double) -> String {
        let ms = Int64((v * 1000).rounded())
        let whole = ms / 1000, frac = ms % 1000
        guard frac != 0 else { return String(whole) }
        var f = String(format: "%03d", frac)
        while f.hasSuffix("0") { f.removeLast() }
        return "\(whole).\(f)"
    }

    static func digital(_ physical: Double, _ s: Signal) -> Int {
        guard physical.isFinite, s.physicalMax > s.physicalMin else { return digitalMin }
        let scaled = (physical - s.physicalMin) / (s.physicalMax - s.physicalMin)
            * Double(digitalMax - digitalMin) + Double(digitalMin)
        return Int(max(Double(digitalMin), min(Double(digitalMax), scaled.rounded())))
    }

    /// The physical value a digital one stands for (what a reader computes).
    public static func physical(_ digital: Int, _ s: Signal) -> Double {
        s.physicalMin + Double(digital - digitalMin) / Double(digitalMax - digitalMin) * (s.physicalMax - s.physicalMin)
    }

    /// A header field: printable ASCII, left-justified, space-padded or cut to `width`.
    static func field(_ s: String, _ width: Int) -> String {
        let ascii = String(s.unicodeScalars.map { $0.value >= 0x20 && $0.value < 0x7F ? Character($0) : "_" })
        return ascii.count >= width ? String(ascii.prefix(width)) : ascii + String(repeating: " ", count: width - ascii.count)
    }

    static func subfield(_ s: String) -> String {
        let t = s.replacingOccurrences(of: " ", with: "_")
        return t.isEmpty ? "X" : t
    }

    /// A number in at most 8 characters.
    static func number(_ v: Double) -> String {
        if v == v.rounded(), abs(v) < 1e7 { return String(Int64(v)) }
        var s = String(format: "%.4f", v)
        while s.contains(".") && (s.hasSuffix("0") || s.hasSuffix(".")) { s.removeLast() }
        return String(s.prefix(8))
    }

    private static func two(_ v: Int) -> String { String(format: "%02d", v) }
}
