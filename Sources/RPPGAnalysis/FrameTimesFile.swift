import Foundation

/// The capture time of each frame of a video, for `analyze --frame-times`: a video file's frame times are often
/// evenly spaced where the camera's were not (UBFC's drift up to 0.45 s from the capture clock, and a 0.9-s gap in
/// the capture disappears), which shifts the pulse a camera recorded.
public enum FrameTimesFile {
    /// Reads one time in seconds per frame, in frame order: the `t_s` column of a CSV with a header (a dataset's
    /// per-frame file), or the first field of each line of a file without one. Blank lines and lines starting with
    /// `#` are skipped; a field that is no number is an error naming its line.
    public static func read(_ path: String) throws -> [Double] {
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
            times.append(t)
        }
        guard times.count >= 2 else {
            throw AnalysisError("--frame-times \(path): \(times.count) time\(times.count == 1 ? "" : "s"); one per frame is needed")
        }
        // Frames are hundredths of a second apart: a median step over a second is another unit.
        let steps = zip(times.dropFirst(), times).map { $0 - $1 }.sorted()
        let median = steps[steps.count / 2]
        guard median <= 1 else {
            throw AnalysisError("--frame-times \(path): the times are \(String(format: "%g", median)) apart (median), "
                + "not a video's frames: are they milliseconds? Give seconds (divide by 1000)")
        }
        return times
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
