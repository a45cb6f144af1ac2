/// A recorded per-frame mean-RGB trace (CSV), the offline input of the estimator.
///
/// Format: a header row naming at least `R`, `G` and `B` (any order, case-insensitive, other columns ignored,
/// optional `t_s` with each frame's time in seconds); then one row per frame. Without `t_s`, frame *i* is at
/// i / framesPerSecond. Blank lines are skipped; a UTF-8 byte-order mark is ignored.
///
/// Real recordings repeat a timestamp now and then: rows whose `t_s` is out of order with the most of the others
/// (``FrameOrder/inOrder(_:)``: repeated, or far from the rows around them) are dropped and counted
/// (``RGBTraceRows/droppedRows``), not an error. Only a file without a usable row is.
public enum RGBTrace {
    /// Parses CSV text into samples, dropping rows whose `t_s` is out of order. Errors name the 1-based line.
    public static func parse(_ text: String, framesPerSecond: Double?) throws(RGBTraceError) -> RGBTraceRows {
        // Any line ending: "\n", "\r\n" (one Character) and a lone "\r" (classic Mac, some exporters).
        var lines = text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
        guard !lines.isEmpty else { throw RGBTraceError(line: 1, reason: "the file is empty") }
        var headerLine = 0
        while headerLine < lines.count, lines[headerLine].trimmingSpaces().isEmpty { headerLine += 1 }
        guard headerLine < lines.count else { throw RGBTraceError(line: 1, reason: "the file is empty") }
        var headerText = lines[headerLine]
        if headerText.first == "\u{FEFF}" { headerText = headerText.dropFirst() }
        let header = headerText.split(separator: ",", omittingEmptySubsequences: false)
            .map { $0.trimmingSpaces().lowercased() }
        func column(_ name: String) -> Int? { header.firstIndex(of: name) }
        guard let ri = column("r"), let gi = column("g"), let bi = column("b") else {
            // The names found, a few and short: a file whose lines did not split would echo all of itself.
            let found = header.prefix(8).map { $0.count > 24 ? $0.prefix(24) + "…" : $0 }.joined(separator: ", ")
                + (header.count > 8 ? ", … (\(header.count) columns)" : "")
            throw RGBTraceError(line: headerLine + 1, reason: "the header must name R, G and B columns (found: \(found))")
        }
        let ti = column("t_s")
        if ti == nil {
            guard let fps = framesPerSecond else {
                throw RGBTraceError(line: headerLine + 1, reason: "there is no t_s column: give the frame rate (--fps)")
            }
            guard fps.isFinite, fps >= 5, fps <= 1000 else {
                throw RGBTraceError(line: headerLine + 1, reason: "frame rate \(fps) is outside 5-1000 fps")
            }
        }
        let needed = max(ri, gi, bi, ti ?? 0) + 1
        var samples: [RPPGSample] = []
        samples.reserveCapacity(lines.count)
        var frame = 0
        var sampleLines: [Int] = []
        var dropped = 0
        var firstDroppedLine: Int?
        var blank = 0
        var firstBlankLine: Int?
        lines.removeFirst(headerLine + 1)
        for (k, raw) in lines.enumerated() {
            let lineNumber = headerLine + 2 + k
            if raw.trimmingSpaces().isEmpty { continue }
            let fields = raw.split(separator: ",", omittingEmptySubsequences: false)
            guard fields.count >= needed else {
                throw RGBTraceError(line: lineNumber, reason: "expected at least \(needed) fields, found \(fields.count)")
            }
            func value(_ i: Int, _ name: String) throws(RGBTraceError) -> Double {
                let text = fields[i].trimmingSpaces()
                guard let v = Double(text), v.isFinite else {
                    throw RGBTraceError(line: lineNumber, reason: "\(name) is not a number: '\(text)'")
                }
                return v
            }
            // A frame without a colour (no face in it: nan or an empty cell) is left out, counted, and bridged like a
            // dropped frame; its time still counts for a trace without t_s.
            let colours = [ri, gi, bi].map { fields[$0].trimmingSpaces().lowercased() }
            if colours.contains(where: { $0.isEmpty || $0 == "nan" || $0 == "na" }) {
                blank += 1
                if firstBlankLine == nil { firstBlankLine = lineNumber }
                frame += 1
                continue
            }
            let r = try value(ri, "R"), g = try value(gi, "G"), b = try value(bi, "B")
            for (v, name) in [(r, "R"), (g, "G"), (b, "B")] where v < 0 || v > 255 {
                throw RGBTraceError(line: lineNumber, reason: "\(name) = \(v) is outside 0-255")
            }
            var t = Double(frame) / (framesPerSecond ?? 30)
            if let ti { t = try value(ti, "t_s") }
            samples.append(RPPGSample(tSeconds: t, rgb: RGBMean(r: r, g: g, b: b)))
            sampleLines.append(lineNumber)
            frame += 1
        }
        // One row 100 s late kept, every later row was dropped as not later than it: half a recording lost.
        if ti != nil {
            let keep = FrameOrder.inOrder(samples.map(\.tSeconds))
            dropped = keep.count { !$0 }
            firstDroppedLine = keep.firstIndex(of: false).map { sampleLines[$0] }
            samples = zip(samples, keep).filter(\.1).map(\.0)
        }
        guard !samples.isEmpty else {
            throw RGBTraceError(line: headerLine + 1, reason: blank > 0
                ? "no row has R, G and B values (\(blank) without)" : "no data rows after the header")
        }
        var rows = RGBTraceRows(samples: samples, droppedRows: dropped, firstDroppedLine: firstDroppedLine,
                                blankRows: blank, firstBlankLine: firstBlankLine)
        rows.timed = ti != nil
        return rows
    }
}

/// The usable rows of a trace, and how many were dropped because their `t_s` did not increase.
public struct RGBTraceRows: Sendable, Equatable {
    /// Kept rows, strictly increasing in time.
    public var samples: [RPPGSample]
    /// Rows dropped because their `t_s` was not later than the previous kept row (repeated or out of order).
    public var droppedRows: Int
    /// 1-based line of the first dropped row, for the warning.
    public var firstDroppedLine: Int?
    /// Rows left out because an R, G or B cell was empty or `nan` (a frame without a face), and the first's line.
    public var blankRows: Int
    public var firstBlankLine: Int?
    /// The times came from a `t_s` column (a frame rate given was not used).
    public var timed = false

    public init(samples: [RPPGSample], droppedRows: Int = 0, firstDroppedLine: Int? = nil, blankRows: Int = 0,
                firstBlankLine: Int? = nil) {
        self.samples = samples
        self.droppedRows = droppedRows
        self.firstDroppedLine = firstDroppedLine
        self.blankRows = blankRows
        self.firstBlankLine = firstBlankLine
    }
}

/// A trace that cannot be read, with the 1-based line where reading stopped.
public struct RGBTraceError: Error, Sendable, Equatable, CustomStringConvertible {
    public let line: Int
    public let reason: String
    public var description: String { "line \(line): \(reason)" }

    public init(line: Int, reason: String) {
        self.line = line
        self.reason = reason
    }
}

extension Substring {
    func trimmingSpaces() -> Substring {
        var s = self
        while let f = s.first, f == " " || f == "\t" || f == "\r" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" || l == "\r" { s = s.dropLast() }
        return s
    }
}
