/// The unit of RR values in a file.
public enum RRUnit: String, CaseIterable, Sendable {
    /// Milliseconds.
    case ms
    /// Counts of 1/1024 s, as the BLE Heart Rate Service sends them.
    case counts1024 = "1024"
    /// Seconds, as Kubios writes RR text files.
    case seconds = "s"

    /// The unit as said to a reader: "ms", "1/1024 s", "s".
    public var spoken: String {
        switch self {
        case .ms: "ms"
        case .counts1024: "1/1024 s"
        case .seconds: "s"
        }
    }

    public var column: String {
        switch self {
        case .ms: "rr_ms"
        case .counts1024: "rr_1024"
        case .seconds: "rr_s"
        }
    }

    public func milliseconds(_ v: Double) -> Double {
        switch self {
        case .ms: v
        case .counts1024: v * 1000 / 1024
        case .seconds: v * 1000
        }
    }
}

/// Why an RR file could not be read. `line` is 1-based; `name` (the file, when the caller gives one) prefixes the
/// description.
public struct RRFileError: Error, Sendable, Equatable, CustomStringConvertible {
    public var line: Int?
    public var message: String
    public var name: String?

    public init(line: Int?, message: String, name: String? = nil) {
        self.line = line
        self.message = message
        self.name = name
    }

    public var description: String {
        let located = line.map { "line \($0): \(message)" } ?? message
        return name.map { "\($0): \(located)" } ?? located
    }
}

/// RR intervals read from text: a CSV whose header names `rr_ms` (or an alias, `millisecondAliases`), `rr_1024` or
/// `rr_s` (other columns ignored, any order), or one value per line. Blank lines and lines starting with `#` are skipped.
/// The one parser of RR files: `hr-gateway hrv`, `emulate-strap --rr` (through `RRSeries`) and the benchmarks.
public struct RRFile: Sendable, Equatable {
    /// Intervals in milliseconds, in file order.
    public var rrMs: [Double]
    /// The column read, or nil for one value per line.
    public var column: String?
    public var unit: RRUnit
    /// The intervals in uninterrupted runs (a recording's beats broken by a lost link or lost notifications); one
    /// run, all of `rrMs`, for a file without beat times.
    public var segments: [[Double]]
    /// The time of each run's last beat, seconds (ascending), when the input has times (a recording, a CSV export's
    /// `beat_time_ms`): windows then keep the time a break took.
    public var runEndsS: [Double]?
    /// The device whose rows were read, when the file has a `device_id` column.
    public var device: String?
    /// The intervals read outside `plausibleMs` (of the device read), in file order.
    public var implausible: [Implausible] = []

    /// Larger values are rejected as garbage (an RR interval of a minute is already a pause, not a beat).
    public static let maximumMs = 60_000.0

    /// Header names read as milliseconds besides `rr_ms`, compared without case, spaces, `_` and `-`, and with a
    /// unit of `[ms]` or `(ms)` at the end left off: `RR`, `IBI (ms)`, the Polar Sensor Logger's `RR-interval [ms]`.
    /// A bare `IBI` is not one (Empatica's is in seconds); `IBI (ms)` is.
    public static let millisecondAliases = ["rr", "rrms", "ibims", "rri", "rrinterval", "rrintervalms"]

    /// Whether header name `name` (lower case) names RR intervals in milliseconds.
    static func namesMilliseconds(_ name: String) -> Bool {
        var key = name.filter { $0 != " " && $0 != "_" && $0 != "-" }
        var saysMs = false
        for unit in ["[ms]", "(ms)"] where key.hasSuffix(unit) {
            key.removeLast(unit.count)
            saysMs = true
        }
        return millisecondAliases.contains(key) || (saysMs && key == "ibi")
    }

    /// Intervals a heart does not beat at (faster than 240 or slower than 20 beats per minute): read, analysed as
    /// they are unless a correction finds them, and said, since a typo or a value in another unit looks like one.
    public static let plausibleMs = 250.0...3000.0

    /// An interval outside `plausibleMs`, with its line.
    public struct Implausible: Sendable, Equatable {
        public var line: Int
        public var ms: Double

        public init(line: Int, ms: Double) {
            self.line = line
            self.ms = ms
        }
    }

    /// Header names of a beat's time (epoch or any origin, milliseconds), as `sessions export --format csv` writes.
    public static let beatTimeColumn = "beat_time_ms"
    /// Header name of the device a row belongs to (a CSV export of a session with several straps).
    public static let deviceColumn = "device_id"
    /// Header name of the flag (1) on the first beat after a break, as the CSV export writes it.
    public static let segmentStartColumn = "segment_start"
    /// How far the step from one beat's time to the next may differ from the interval before it is a break.
    public static let breakToleranceMs = 250.0

    public init(
        rrMs: [Double], column: String?, unit: RRUnit, segments: [[Double]]? = nil, runEndsS: [Double]? = nil,
        device: String? = nil
    ) {
        self.rrMs = rrMs
        self.column = column
        self.unit = unit
        self.segments = segments ?? [rrMs]
        self.runEndsS = runEndsS
        self.device = device
    }

    /// The beats on their time line: the runs, placed at their times when the input has them.
    public var beats: [RRBeat] { HRVAnalyzer.beats(runs: segments, endsS: runEndsS) }

    static let expected = "expected a CSV with a header naming rr_ms (milliseconds), rr_1024 (1/1024 s) or rr_s "
        + "(seconds), or one RR value per line"

    /// Parses `text`. `unit` chooses the column when the header has both (else `preferring` does), and gives the
    /// unit of headerless values (milliseconds when nil). With a `device_id` column holding several devices, `device`
    /// chooses the rows read (`choose` says how, in the error when none is chosen). With a `beat_time_ms` column, a
    /// step between beats that differs from the interval by more than `breakToleranceMs` (a lost link in a CSV
    /// export) or goes back in time breaks the series into runs; so does a `segment_start` of 1.
    /// The device of `devices` that `given` names: itself, else the one equal to it but for case (a strap's address
    /// typed in lower case); nil when none, or when several differ only by case.
    public static func matching(_ given: String, in devices: [String]) -> String? {
        if devices.contains(given) { return given }
        let folded = devices.filter { $0.caseInsensitiveCompare(given) == .orderedSame }
        return folded.count == 1 ? folded[0] : nil
    }

    /// The fields of one CSV line, each trimmed of spaces: a field in double quotes is read whole, separators in it
    /// included, with `""` standing for one quote (RFC 4180); a quote inside an unquoted field is kept as it is.
    public static func fields(of line: String, separator: Character) -> [String] {
        var fields: [String] = []
        var field = ""
        var quoted = false  // inside a quoted field
        var wasQuoted = false  // the field began with a quote (spaces before it aside)
        var chars = Array(line)[...]
        while let c = chars.popFirst() {
            if quoted {
                if c == "\"" {
                    if chars.first == "\"" { field.append("\""); chars = chars.dropFirst() } else { quoted = false }
                } else {
                    field.append(c)
                }
            } else if c == separator {
                fields.append(wasQuoted ? field : field.trimmingSpaces)
                field = ""
                wasQuoted = false
            } else if c == "\"", field.allSatisfy({ $0 == " " || $0 == "\t" }), !wasQuoted {
                field = ""
                quoted = true
                wasQuoted = true
            } else if wasQuoted, c == " " || c == "\t" {
                continue  // spaces after the closing quote
            } else {
                field.append(c)
            }
        }
        fields.append(wasQuoted ? field : field.trimmingSpaces)
        return fields
    }

    /// A field as an error quotes it: 40 characters at most, control and format characters (a right-to-left
    /// override) as escapes. A 5-MB field came back whole, and a bidi override reordered the terminal's line.
    /// Device names as an error lists them: each quoted (cut, escaped), at most ten of them.
    static func listed(_ devices: [String]) -> String {
        let shown = devices.prefix(10).map { $0.isEmpty ? "(empty)" : Self.shown($0) }.joined(separator: ", ")
        return shown + (devices.count > 10 ? " and \(devices.count - 10) more" : "")
    }

    static func quoted<S: StringProtocol>(_ field: S) -> String { "'" + shown(field) + "'" }

    /// `quoted` without the quotes: a name or a number in a sentence.
    static func shown<S: StringProtocol>(_ field: S) -> String {
        let shown = field.prefix(40).unicodeScalars.map { scalar -> String in
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator: scalar.escaped(asASCII: true)
            default: String(scalar)
            }
        }.joined()
        return shown + (field.count > 40 ? "…" : "")
    }

    public static func parse(
        _ text: String, unit: RRUnit? = nil, preferring: RRUnit = .ms, device: String? = nil,
        choose: String = "keep one device's rows"
    ) throws(RRFileError) -> RRFile {
        // "\r\n" is one Character in Swift: splitting on "\n" alone would leave a Windows file as a single line.
        var lines = text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
        if let first = lines.first, first.hasPrefix("\u{FEFF}") { lines[0] = first.dropFirst() }

        var column: String?
        var fieldIndex = 0
        var resolvedUnit = unit ?? .ms
        var headerFields = 0
        var values: [Double] = []
        var sawFirst = false
        var timeIndex: Int?
        var deviceIndex: Int?
        var startIndex: Int?
        var devices: [String] = []
        var rows: [(device: String, line: Int, rrMs: Double, timeMs: Double?, startsRun: Bool)] = []
        // The separator, from the first line: a comma, else a semicolon or a tab (a spreadsheet in a locale with
        // decimal commas, the Polar Sensor Logger's layout), where a decimal comma in a value is read as a point.
        var separator: Character = ","
        for (offset, raw) in lines.enumerated() {
            let number = offset + 1
            let line = raw.trimmingSpaces
            if line.isEmpty || line.hasPrefix("#") { continue }
            if !sawFirst, !line.contains(",") {
                separator = line.contains(";") ? ";" : line.contains("\t") ? "\t" : ","
            }
            // Fields may be quoted, as R and spreadsheets write them ("","rr_ms"), and a quoted field may hold the
            // separator (a device name with a comma) and doubled quotes (RFC 4180).
            let fields = Self.fields(of: line, separator: separator)
            if !sawFirst {
                sawFirst = true
                if !fields.allSatisfy({ Double($0) != nil }) {
                    headerFields = fields.count
                    let names = fields.map { $0.lowercased() }
                    let ms = names.firstIndex(of: RRUnit.ms.column) ?? names.firstIndex(where: namesMilliseconds)
                    let counts = names.firstIndex(of: RRUnit.counts1024.column)
                    let seconds = names.firstIndex(of: RRUnit.seconds.column)
                    switch (unit ?? (ms != nil && counts != nil ? preferring : nil), ms, counts) {
                    case (.counts1024, _, let c?), (nil, nil, let c?):
                        fieldIndex = c
                        resolvedUnit = .counts1024
                    case (.ms, let m?, _), (nil, let m?, _):
                        fieldIndex = m
                        resolvedUnit = .ms
                    case (.seconds, _, _) where seconds != nil, (nil, nil, nil) where seconds != nil:
                        fieldIndex = seconds!
                        resolvedUnit = .seconds
                    case (let u?, _, _) where ms != nil || counts != nil || seconds != nil:
                        throw RRFileError(
                            line: number,
                            message: "--unit \(u.rawValue) asks for column \(u.column), which the header does not have"
                        )
                    default:
                        throw RRFileError(
                            line: number,
                            message: "no rr_ms, rr_1024 or rr_s column in the header (found: "
                                + "\(fields.joined(separator: ", "))); " + expected
                        )
                    }
                    // The column as the file names it (`RR`, `RR-interval [ms]`), for messages and the report.
                    column = fields[fieldIndex]
                    // A name given twice leaves which column is meant open (a header pasted over another).
                    for wanted in [names[fieldIndex], beatTimeColumn, deviceColumn, segmentStartColumn]
                        where names.filter({ $0 == wanted }).count > 1
                    {
                        throw RRFileError(line: number, message: "the header names \(wanted) twice; keep one such column")
                    }
                    timeIndex = names.firstIndex(of: beatTimeColumn)
                    deviceIndex = names.firstIndex(of: deviceColumn)
                    startIndex = names.firstIndex(of: segmentStartColumn)
                    continue
                }
            }
            let name = column ?? "RR"
            let field: String
            if column != nil {
                guard fieldIndex < fields.count else {
                    throw RRFileError(
                        line: number,
                        message: "\(fields.count) field\(fields.count == 1 ? "" : "s"), but \(name) is field "
                            + "\(fieldIndex + 1) of \(headerFields) in the header"
                    )
                }
                // More fields than the header names: a value written with a decimal comma (605,5) split in two,
                // which read as the first part alone would shift every interval a little.
                guard fields.count <= headerFields else {
                    throw RRFileError(
                        line: number,
                        message: "\(fields.count) fields, but the header has \(headerFields)"
                            + (separator == "," ? ": a decimal comma? Write 605.5, not 605,5 (or separate the "
                                + "columns with semicolons)" : "")
                    )
                }
                field = fields[fieldIndex]
            } else {
                guard fields.count == 1 else {
                    throw RRFileError(
                        line: number,
                        message: "\(fields.count) fields, expected one value per line (or a header naming rr_ms or "
                            + "rr_1024)" + (fields.count == 2 ? "; a decimal comma? Write 605.5, not 605,5" : "")
                    )
                }
                field = fields[0]
            }
            guard !field.isEmpty else { throw RRFileError(line: number, message: "empty \(name) value") }
            let text = separator == "," ? field : field.replacingOccurrences(of: ",", with: ".")
            // Decimal notation only: Swift's Double also reads hexadecimal ("0x320"), which no RR file means.
            guard !text.contains(where: { $0 == "x" || $0 == "X" }), let v = Double(text) else {
                throw RRFileError(line: number, message: "\(Self.quoted(field)) is not a number")
            }
            guard v.isFinite else { throw RRFileError(line: number, message: "\(Self.quoted(field)) is not a finite number") }
            guard v > 0 else {
                throw RRFileError(line: number, message: "RR intervals must be positive, got \(Self.quoted(field))")
            }
            let ms = resolvedUnit.milliseconds(v)
            guard ms <= maximumMs else {
                throw RRFileError(line: number, message: "\(Self.shown(field)) is not a plausible RR interval (over 60 s)")
            }
            var time: Double?
            if let timeIndex {
                let t = timeIndex < fields.count ? fields[timeIndex] : ""
                guard !t.contains(where: { $0 == "x" || $0 == "X" }), let v = Double(t), v.isFinite else {
                    throw RRFileError(line: number, message: "\(Self.quoted(t)) is not a \(beatTimeColumn) (milliseconds)")
                }
                time = v
            }
            let owner = deviceIndex.map { $0 < fields.count ? fields[$0] : "" } ?? ""
            if !devices.contains(owner) { devices.append(owner) }
            let starts = startIndex.map { $0 < fields.count && fields[$0] == "1" } ?? false
            rows.append((owner, number, ms, time, starts))
            values.append(ms)
        }
        if deviceIndex != nil {
            let chosen: String
            if let device {
                guard let match = Self.matching(device, in: devices) else {
                    throw RRFileError(line: nil, message: "no rows of device \(Self.shown(device)) (the \(deviceColumn) column "
                        + "holds \(Self.listed(devices)))")
                }
                chosen = match
            } else {
                guard devices.count <= 1 else {
                    throw RRFileError(line: nil, message: "the file holds the beats of \(devices.count) devices "
                        + "(\(Self.listed(devices))): \(choose)")
                }
                chosen = devices.first ?? ""
            }
            rows = rows.filter { $0.device == chosen }
            values = rows.map(\.rrMs)
        } else if let device {
            throw RRFileError(line: nil, message: "no \(deviceColumn) column to choose device \(device) by")
        }
        guard !values.isEmpty else {
            let what = sawFirst ? "the file has a header but no RR values" : "the file is empty"
            throw RRFileError(line: nil, message: "\(what); " + expected)
        }
        if resolvedUnit == .ms, values.allSatisfy({ $0 < 10 }) {
            throw RRFileError(
                line: nil,
                message: "every RR value is below 10 ms: they look like seconds; "
                    + (column == nil
                        ? "read them so with --unit s, or as 1/1024 s counts with --unit 1024"
                        : "name their column rr_s to read them so")
            )
        }
        let chosenDevice = deviceIndex != nil ? rows.first?.device : nil
        let implausible = rows.filter { !plausibleMs.contains($0.rrMs) }.map { Implausible(line: $0.line, ms: $0.rrMs) }
        // Many of them no heartbeat: another unit, or two, not artefacts (centiseconds read as ms gave "RMSSD 5.24
        // ms"; half the values in seconds "99 % corrected", 199 of 400 in seconds an analysis with "0.2 % corrected"
        // and an SDNN of 402 ms, and 100 of 400 "0 corrected" and 371 ms: the correction's thresholds come from the
        // series, which is then two series). Real recordings have a few in a thousand, and one with more than one in
        // twenty beyond the heart's range has no HRV worth the name (Kubios calls 5 % of artefacts the limit); a
        // file of a few values (a test, a snippet) is judged by the half as before.
        if implausible.count * 2 > rows.count || (rows.count >= 20 && implausible.count * 20 > rows.count) {
            let sorted = rows.map(\.rrMs).sorted()
            let median = sorted[sorted.count / 2]
            // Centiseconds have no --unit: say what to do with them.
            let centiseconds = resolvedUnit == .ms && plausibleMs.contains(median * 10)
            throw RRFileError(
                line: nil,
                message: "\(implausible.count) of \(rows.count) RR values are outside \(Int(plausibleMs.lowerBound))-"
                    + "\(Int(plausibleMs.upperBound)) ms once read in \(resolvedUnit.spoken) (median "
                    + "\(String(format: "%g", median)) ms): they are not RR intervals in that unit"
                    + (implausible.count * 2 <= rows.count ? ", or the file mixes units" : "") + "; "
                    + (centiseconds
                        ? "they look like centiseconds: multiply them by 10 to have milliseconds"
                        : column == nil
                        ? "say their unit with --unit ms, s or 1024"
                        : "name their column for its unit (rr_ms, rr_s or rr_1024), or say it with --unit"))
        }
        guard timeIndex != nil || startIndex != nil else {
            var file = RRFile(rrMs: values, column: column, unit: resolvedUnit, device: chosenDevice)
            file.implausible = implausible
            return file
        }
        // Runs by the flags and the beat times: consecutive beats are their interval apart within a run.
        var segments: [[Double]] = []
        var ends: [Double] = []
        var current: [Double] = []
        var previous: Double?
        for row in rows {
            var breaks = row.startsRun
            if let t = row.timeMs, let p = previous { breaks = breaks || t < p || abs((t - p) - row.rrMs) > breakToleranceMs }
            if breaks, !current.isEmpty {
                segments.append(current)
                if let p = previous { ends.append(p / 1000) }
                current = []
            }
            current.append(row.rrMs)
            previous = row.timeMs
        }
        if !current.isEmpty {
            segments.append(current)
            if let p = previous { ends.append(p / 1000) }
        }
        var file = RRFile(rrMs: values, column: column, unit: resolvedUnit, segments: segments,
            runEndsS: timeIndex != nil ? ends : nil, device: chosenDevice)
        file.implausible = implausible
        return file
    }
}

extension StringProtocol {
    /// Without one pair of surrounding double quotes.

    fileprivate var trimmingSpaces: String {
        var s = Substring(self)
        while let c = s.first, c == " " || c == "\t" { s = s.dropFirst() }
        while let c = s.last, c == " " || c == "\t" { s = s.dropLast() }
        return String(s)
    }
}
