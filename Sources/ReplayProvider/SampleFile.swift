import Foundation
import GatewayEngine

/// The sample recording format: JSON lines, one sample dictionary per line (the `biosignal_frame` sample shape),
/// written as samples arrive and read back by `ReplayBiosignalProvider`.
public enum SampleFile {
    /// A recording line that could not be read.
    public struct ReadError: Error, Sendable, Equatable, CustomStringConvertible {
        public let path: String
        public let line: Int
        public let reason: String
        public var description: String { "\(path) line \(line): \(reason)" }

        public init(path: String, line: Int, reason: String) {
            self.path = path
            self.line = line
            self.reason = reason
        }
    }

    /// Reads every sample. An unreadable line is an error naming it, except a final line without its newline,
    /// which is what an interrupted recording leaves behind: it is skipped and reported in `truncatedTail`.
    public static func read(path: String) throws -> (samples: [BiosignalSample], truncatedTail: Bool) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ReadError(path: path, line: 0, reason: "cannot read the file (missing or no permission)")
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
            throw SampleFile.ReadError(path: path, line: 0, reason: "cannot create the file (check the directory and permissions)")
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
