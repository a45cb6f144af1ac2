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
        for (index, line) in lines.enumerated() where !line.isEmpty && !line.hasPrefix("#") {
            let fields = line.split(separator: line.contains(",") ? "," : ";", omittingEmptySubsequences: false)
                .map { $0.trimmingCharacters(in: .whitespaces) }
            if !headerSeen, times.isEmpty, Double(fields[0]) == nil {
                headerSeen = true
                guard let at = fields.firstIndex(of: "t_s") else {
                    throw AnalysisError("--frame-times \(path): the header (line \(index + 1)) has no t_s column; "
                        + "give one time in seconds per frame, with a header naming t_s or without a header")
                }
                column = at
                continue
            }
            guard column < fields.count, let t = Double(fields[column]), t.isFinite else {
                let field = column < fields.count ? String(fields[column].prefix(40)) : ""
                throw AnalysisError("--frame-times \(path): line \(index + 1): \"\(field)\" is not a time in seconds")
            }
            times.append(t)
        }
        guard times.count >= 2 else {
            throw AnalysisError("--frame-times \(path): \(times.count) time\(times.count == 1 ? "" : "s"); one per frame is needed")
        }
        return times
    }
}
