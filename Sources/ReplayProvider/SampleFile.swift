import Foundation
#if canImport(Glibc)
import Glibc
#endif
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

    /// What `read` found: the samples, and what it left out or noticed on the way.
    public struct Contents: Sendable {
        public var samples: [BiosignalSample] = []
        /// The final line was cut short (what an interrupted recording leaves behind) and is skipped.
        public var truncatedTail = false
        /// RR values that cannot be intervals (zero or negative), removed from their samples: how many, first line.
        public var impossibleRR = 0
        public var impossibleRRFirstLine: Int?
        /// Samples more than `lateToleranceMs` earlier than a sample before them: replayed in file order (at once),
        /// recorded as they are, but outside the window of the samples already seen.
        public var late = 0
        public var lateFirstLine: Int?

        /// Each finding in a sentence, for the replay's status and log.
        public var notes: [String] {
            var notes: [String] = []
            if truncatedTail { notes.append("last line incomplete, skipped") }
            if let line = impossibleRRFirstLine {
                notes.append("\(impossibleRR) RR value\(impossibleRR == 1 ? "" : "s") of zero or less dropped (first on line \(line))")
            }
            if let line = lateFirstLine {
                notes.append("\(late) sample\(late == 1 ? "" : "s") more than \(SampleFile.lateToleranceMs / 1000) s earlier "
                    + "than one before (first on line \(line)): replayed in file order")
            }
            return notes
        }
    }

    /// How far a sample may be earlier than one before it without a note: samples of two devices (a strap and a
    /// camera) are written as they arrive and their timestamps can cross by a frame or a notification.
    public static let lateToleranceMs: Int64 = 5_000

    /// Reads every sample. An unreadable line is an error naming it, except a final line without its newline,
    /// which is what an interrupted recording leaves behind: it is skipped and reported in `truncatedTail`.
    public static func read(path: String) throws -> Contents {
        guard let data = FileManager.default.contents(atPath: path) else {
            var isDirectory: ObjCBool = false
            let reason = !FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) ? "no such file"
                : isDirectory.boolValue ? "a directory, not a recording (JSON lines, as --record writes them)"
                : "cannot read it (no permission)"
            throw ReadError(path: path, line: nil, reason: reason)
        }
        let bytes = [UInt8](data)
        var contents = Contents()
        var latest: Int64?
        var lineNumber = 0
        var start = 0
        while start < bytes.count {
            lineNumber += 1
            let end = bytes[start...].firstIndex(of: 0x0A) ?? bytes.count
            let isLast = end == bytes.count
            let line = Array(bytes[start..<end])
            start = end + 1
            if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }
            var sample: BiosignalSample
            do {
                let json = try JSONValue(parsing: line)
                if json["type"] != nil, json["timestamp_ms"] == nil { continue }
                sample = try BiosignalSample(json: json)
            } catch {
                if isLast {
                    contents.truncatedTail = true
                    break
                }
                throw ReadError(path: path, line: lineNumber, reason: "\(error)")
            }
            if let rr = sample.rrIntervalsMs, rr.contains(where: { $0 <= 0 }) {
                contents.impossibleRR += rr.count { $0 <= 0 }
                contents.impossibleRRFirstLine = contents.impossibleRRFirstLine ?? lineNumber
                sample.rrIntervalsMs = rr.filter { $0 > 0 }
            }
            if let latest, sample.timestampMs < latest - lateToleranceMs {
                contents.late += 1
                contents.lateFirstLine = contents.lateFirstLine ?? lineNumber
            }
            latest = max(latest ?? sample.timestampMs, sample.timestampMs)
            contents.samples.append(sample)
        }
        return contents
    }
}

/// Appends samples to a recording, one line each, flushed as written so that a crash loses nothing already received.
///
/// A write that fails (a full disk, a removed USB stick) ends the file where it stands: the failure is reported once
/// through `onFailure`, later samples are counted (`unwritten`) rather than appended after a gap, and the session goes
/// on (the session store records them independently).
public final class SampleFileWriter: Sendable {
    /// A recording that cannot be created.
    public struct CreateError: Error, Sendable, Equatable, CustomStringConvertible {
        public let path: String
        public let reason: String
        public var description: String { "\(path): \(reason)" }
    }

    private struct State {
        var handle: FileHandle?
        var failed = false
        var unwritten = 0
    }

    public let path: String
    private let state: Locked<State>
    private let onFailure: @Sendable (String) -> Void

    /// Creates (or truncates) the file. Opened in place (not replaced by a new file), so a path that is a device or
    /// a named pipe is written to, not swapped for a regular file.
    public init(path: String, onFailure: @escaping @Sendable (String) -> Void = { _ in }) throws {
        self.path = path
        self.onFailure = onFailure
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            let code = errno
            let parent = (path as NSString).deletingLastPathComponent
            let reason = switch code {
            case EISDIR: "a directory: give a file name, such as \(path)/session.jsonl"
            case ENOENT: "cannot create it: the directory \(parent.isEmpty ? "." : parent) does not exist"
            case EACCES, EPERM: "cannot create it: no permission to write \(path) (or in \(parent.isEmpty ? "." : parent))"
            default: "cannot create it: \(String(cString: strerror(code)))"
            }
            throw CreateError(path: path, reason: reason)
        }
        state = Locked(State(handle: FileHandle(fileDescriptor: fd, closeOnDealloc: true)))
    }

    /// Samples not in the file because a write failed (the one that failed and every one after it).
    public var unwritten: Int { state.withLock { $0.unwritten } }

    public func append(_ sample: BiosignalSample) {
        let line = Data((sample.jsonValue.jsonString + "\n").utf8)
        let failure: String? = state.withLock { s in
            guard !s.failed else {
                s.unwritten += 1
                return nil
            }
            guard let h = s.handle else { return nil }
            do {
                try h.write(contentsOf: line)
                return nil
            } catch {
                s.failed = true
                s.unwritten += 1
                return Self.reason(error)
            }
        }
        if let failure {
            onFailure("--record \(path): \(failure); the recording stops here (what it holds is intact) "
                + "and the session goes on")
        }
    }

    public func close() {
        let unwritten: Int = state.withLock { s in
            try? s.handle?.synchronize()
            try? s.handle?.close()
            s.handle = nil
            return s.unwritten
        }
        if unwritten > 0 { onFailure("--record \(path): \(unwritten) sample\(unwritten == 1 ? "" : "s") not written to it") }
    }

    /// The POSIX reason of a write error in a few words ("No space left on device"), not Foundation's dump.
    private static func reason(_ error: any Error) -> String {
        let ns = error as NSError
        if let posix = ns.userInfo[NSUnderlyingErrorKey] as? NSError, posix.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(posix.code)))
        }
        if ns.domain == NSPOSIXErrorDomain { return String(cString: strerror(Int32(ns.code))) }
        return ns.localizedDescription
    }
}
