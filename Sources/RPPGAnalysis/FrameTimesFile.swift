import Foundation

/// The capture time of each frame of a video, for `analyze --frame-times`: a video file's frame times are often
/// evenly spaced where the camera's were not (UBFC's drift up to 0.45 s from the capture clock, and a 0.9-s gap in
/// the capture disappears), which shifts the pulse a camera recorded.
public enum FrameTimesFile {
    /// Reads one time in seconds per frame, in frame order: the `t_s` column of a CSV with a header (a dataset's
    /// per-frame file), or the first field of each line of a file without one. Blank lines and lines starting with
    /// `#` are skipped; a field that is no number is an error naming its line, as are times that do not increase
    /// from frame to frame or are in another unit. A time far from its neighbours (a wrong first or last time, a
    /// clock reset, a long gap) is kept and said to `warn`, naming its line.
    public static func read(_ path: String, warn: (String) -> Void = { _ in }) throws -> [Double] {
        guard let data = FileManager.default.contents(atPath: path) else {
            var isDirectory: ObjCBool = false
            let exists = FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
            throw AnalysisError("cannot read --frame-times \(path): "
                + (!exists ? "no such file" : isDirectory.boolValue ? "a directory, not a file" : "permission denied"))
        }
        let lines = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }
        var column = 0
        var times: [Double] = []
        var headerSeen = false
        // A decimal comma (`0,036`): read as a point. Without a header, a line of two runs of digits split by one
        // comma is such a number (it was read as 0 and every later frame dropped: a confident wrong pulse).
        func number(_ field: String) -> Double? {
            Double(field) ?? (field.filter { $0 == "," }.count == 1 ? Double(field.replacingOccurrences(of: ",", with: ".")) : nil)
        }
        var lineOf: [Int] = []
        // Lines whose time has a decimal point, and the first with a decimal comma: one file uses one of them (a
        // "1,2" among points is two fields run together, not 1.2 s).
        var pointLine: Int?
        var commaLine: (line: Int, field: String)?
        for (index, line) in lines.enumerated() where !line.isEmpty && !line.hasPrefix("#") {
            let digits = !headerSeen && line.filter { $0 == "," }.count == 1
                && line.split(separator: ",").count == 2 && line.allSatisfy { $0.isASCII && ($0.isNumber || $0 == ",") }
            let fields = digits ? [line]
                : line.split(separator: line.contains(";") ? ";" : ",", omittingEmptySubsequences: false)
                    .map { $0.trimmingCharacters(in: .whitespaces) }
            if !headerSeen, times.isEmpty, number(fields[0]) == nil {
                headerSeen = true
                guard let at = fields.firstIndex(of: "t_s") else {
                    throw AnalysisError("--frame-times \(path): the header (line \(index + 1)) has no t_s column; "
                        + "give one time in seconds per frame, with a header naming t_s or without a header")
                }
                column = at
                continue
            }
            guard column < fields.count, let t = number(fields[column]), t.isFinite else {
                let field = column < fields.count ? Self.quoted(fields[column]) : "\"\""
                throw AnalysisError("--frame-times \(path): line \(index + 1): \(field) is not a time in seconds")
            }
            if Double(fields[column]) == nil {
                if commaLine == nil { commaLine = (index + 1, fields[column]) }
            } else if pointLine == nil, fields[column].contains(".") {
                pointLine = index + 1
            }
            times.append(t)
            lineOf.append(index + 1)
        }
        if let comma = commaLine, let point = pointLine {
            throw AnalysisError("--frame-times \(path): line \(comma.line): \(Self.quoted(comma.field)) has a decimal comma where "
                + "line \(point) has a point: give every time the same way, one per line")
        }
        guard times.count >= 2 else {
            throw AnalysisError("--frame-times \(path): \(times.count) time\(times.count == 1 ? "" : "s"); one per frame is needed")
        }
        let steps = zip(times.dropFirst(), times).map { $0 - $1 }
        let median = steps.sorted()[steps.count / 2]
        // All equal, or written newest first: every frame but one would be dropped ("record longer").
        guard median > 0 else {
            let how = median == 0 ? "the median step is 0: repeated times"
                : "they decrease: median step \(String(format: "%g", median)) s"
            throw AnalysisError("--frame-times \(path): the times do not increase from frame to frame (\(how)); give each "
                + "frame's capture time in seconds, in frame order")
        }
        // Frames are hundredths of a second apart: a median step over a second is another unit.
        guard median <= 1 else {
            let (unit, divisor) = median <= 1000 ? ("milliseconds", "1000") : median <= 1e6 ? ("microseconds", "1000000")
                : ("nanoseconds", "1000000000")
            throw AnalysisError("--frame-times \(path): the times are \(String(format: "%g", median)) apart (median), "
                + "not a video's frames: are they \(unit)? Give seconds (divide by \(divisor))")
        }
        let (kept, said) = farOff(times, steps: steps, median: median, lines: lineOf)
        for line in said { warn("--frame-times \(path): \(line)") }
        return kept
    }

    /// The gap put between the frames before a clock reset and those after it (over the estimator's 1 s, so that no
    /// window spans it), seconds.
    static let resetGapSeconds = 2.0

    /// Steps between neighbouring times much longer than the frames' (`median`): over 2 s and 30 frames, forward or
    /// back, said (the first three and a count) with their line and what is done: a far-off first or last time is
    /// dropped (a wrong time: it stretched the recording); a time going back that the next frames continue from is a
    /// clock reset, and the frames from it on are moved to follow the frames before it after `resetGapSeconds`
    /// (without that, the most frames in order were kept and the rest of the recording dropped); a long gap forward
    /// is kept (the windows start again after it); a lone time far off in the middle is dropped by the analysis (the
    /// most frames whose times increase are kept).
    static func farOff(_ times: [Double], steps: [Double], median: Double, lines: [Int]) -> (times: [Double], said: [String]) {
        let limit = max(2, 30 * median)
        func s(_ t: Double) -> String { String(format: "%.3f", t) }
        var out = times
        var said: [String] = []
        var more = 0
        func say(_ text: String) { if said.count < 3 { said.append(text) } else { more += 1 } }
        var shift = 0.0
        var i = 0
        while i < steps.count {
            let step = steps[i]
            defer { i += 1 }
            guard abs(step) > limit else { continue }
            let next = i + 1 < steps.count ? steps[i + 1] : 0
            if i == 0 && step > 0 {
                out[0] = .nan
                say("line \(lines[0]): the first time (\(s(times[0])) s) is \(s(step)) s before the next, where frames are "
                    + "\(s(median)) s apart: a wrong time? That frame is dropped")
            } else if i == steps.count - 1 && step > 0 {
                out[i + 1] = .nan
                say("line \(lines[i + 1]): the last time (\(s(times[i + 1])) s) is \(s(step)) s after the one before, where "
                    + "frames are \(s(median)) s apart: a wrong time? That frame is dropped")
            } else if abs(next) > limit && (next < 0) != (step < 0) {
                // Out and straight back: one wrong time.
                out[i + 1] = .nan
                say("line \(lines[i + 1]): \(s(times[i + 1])) s between \(s(times[i])) and \(s(times[i + 2])) s: a wrong time? "
                    + "That frame is dropped")
                i += 1
            } else if step < 0 {
                shift += times[i] - times[i + 1] + resetGapSeconds
                say("line \(lines[i + 1]): the time goes back \(s(-step)) s (\(s(times[i])) to \(s(times[i + 1]))): a clock "
                    + "reset? The frames from this line on are taken to follow the ones before, \(s(resetGapSeconds)) s "
                    + "later (the windows start again there)")
                for k in (i + 1)..<out.count where out[k].isFinite { out[k] = times[k] + shift }
            } else {
                say("line \(lines[i + 1]): \(s(step)) s after the frame before (\(s(times[i])) to \(s(times[i + 1])) s), where "
                    + "frames are \(s(median)) s apart: a gap in the capture, or a wrong time? The windows start again after it")
            }
        }
        if more > 0 { said.append("and \(more) more such step\(more == 1 ? "" : "s")") }
        return (out, said)
    }

    /// A field as an error quotes it: at most 40 characters, control and format characters escaped.
    static func quoted(_ field: String) -> String {
        var out = ""
        for scalar in field.unicodeScalars.prefix(40) {
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator: out += scalar.escaped(asASCII: true)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return "\"" + out + (field.unicodeScalars.count > 40 ? "…" : "") + "\""
    }
}
