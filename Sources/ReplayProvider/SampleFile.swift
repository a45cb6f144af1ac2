import Foundation
import GatewayEngine

/// The sample recording format: JSON lines, one sample dictionary per line (the `biosignal_frame` sample shape),
/// written as samples arrive and read back by `ReplayBiosignalProvider`.
public enum SampleFile {
    /// A recording line that could not be read.
    public struct ReadError: Error, Sendable, Equatable, CustomStringConvertible {
        public let path: String
        /// nil when the file as a whole cannot be read or created.
        public let line: Int?
        public let reason: String
        public var description: String { line.map { "\(path) line \($0): \(reason)" } ?? "\(path): \(reason)" }

        public init(path: String, line: Int?, reason: String) {
            self.path = path
            self.line = line
            self.reason = reason
        }
    }

    /// Reads every sample. An unreadable line is an error naming it, except a final line without its newline,
    /// which is what an interrupted recording leaves behind: it is skipped and reported in `truncatedTail`.
    public static func read(path: String) throws -> (samples: [BiosignalSample], truncatedTail: Bool) {
        guard let data = FileManager.default.contents(atPath: path) else {
            var isDirectory: ObjCBool = false
            let reason = !FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) ? "no such file"
                : isDirectory.boolValue ? "a directory, not a recording (JSON lines, as --record writes them)"
                : "cannot read it (no permission)"
            throw ReadError(path: path, line: nil, reason: reason)
        }
        let bytes = [UInt8](data)
        var samples: [BiosignalSample] = []
        var truncated = false
        var lineNumber = 0
        var start = 0
        while start < bytes.count {
            lineNumber += 1
            let end = bytes[start...].firstIndex(of: 0x0A) ?? bytes.count
            let isLast = end == bytes.count
            let line = Array(bytes[start..<end])
            start = end + 1
            if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }
            do {
                let json = try JSONValue(parsing: line)
                if json["type"] != nil, json["timestamp_ms"] == nil { continue }
                samples.append(try BiosignalSample(json: json))
            } catch {
                if isLast {
                    truncated = true
                    break
                }
                throw ReadError(path: path, line: lineNumber, reason: "\(error)")
            }
        }
        return (samples, truncated)
    }
}

/// Appends samples to a recording, one line each, flushed as written so that a crash loses nothing already received.
public final class SampleFileWriter: Sendable {
    public let path: String
    private let handle: Locked<FileHandle?>

    /// Creates (or truncates) the file.
    public init(path: String) throws {
        self.path = path
        guard FileManager.default.createFile(atPath: path, contents: nil) else {
            var isDirectory: ObjCBool = false
            let parent = (path as NSString).deletingLastPathComponent
            let reason: String
            if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
                reason = "a directory: give a file name, such as \(path)/session.jsonl"
            } else if !parent.isEmpty, !FileManager.default.fileExists(atPath: parent) {
                reason = "cannot create it: the directory \(parent) does not exist"
            } else {
                reason = "cannot create it (no permission to write in \(parent.isEmpty ? "." : parent)?)"
            }
            throw SampleFile.ReadError(path: path, line: nil, reason: reason)
        }
        handle = Locked(try FileHandle(forWritingTo: URL(fileURLWithPath: path)))
    }

    public func append(_ sample: BiosignalSample) {
        let line = sample.jsonValue.jsonString + "\n"
        handle.withLock { h in
            guard let h else { return }
            h.write(Data(line.utf8))
        }
    }

    public func close() {
        handle.withLock { h in
            try? h?.synchronize()
            try? h?.close()
            h = nil
        }
    }
}
