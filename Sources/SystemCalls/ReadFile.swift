#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A file that could not be read: its errno and why, in `PathReason`'s words.
public struct FileReadError: Error, Sendable, Equatable, CustomStringConvertible {
    public let path: String
    /// The errno of the call that failed (EFBIG: longer than the reader's limit).
    public let code: Int32
    /// "no such file", "permission denied", "a directory, not a configuration file (…)".
    public let reason: String

    public init(path: String, code: Int32, reason: String) {
        self.path = path
        self.code = code
        self.reason = reason
    }

    public var description: String { "\(path): \(reason)" }
}

extension SystemCall {
    /// Reads all of `path`, whatever it is: a regular file, a pipe or FIFO (`/dev/stdin`, a shell's `<(…)`), a
    /// character device (`/dev/null`). Past `limit` bytes it fails (EFBIG), so that a device that never ends
    /// (`/dev/zero`) is not read into memory for ever. `what` names what the file should have been, for the reason
    /// given when it is a directory.
    public static func readFile(_ path: String, notA what: String = "a file", limit: Int = 1 << 30)
        throws(FileReadError) -> [UInt8]
    {
        func failure(_ code: Int32) -> FileReadError {
            let reason = switch code {
            case EISDIR: "a directory, not \(what)"
            case EFBIG: "longer than \(limit) bytes: not \(what)"
            default: PathReason.unreadable(path, notA: what) ?? String(cString: strerror(code))
            }
            return FileReadError(path: path, code: code, reason: reason)
        }
        let fd = retryingInterrupts { open(path, O_RDONLY | O_CLOEXEC) }
        guard fd >= 0 else { throw failure(errno) }
        defer { close(fd) }
        return try readAll(fd, limit: limit, failure: failure)
    }

    /// Reads all of standard input (`hrv -`), as `readFile` reads a file: closed (`<&-`) or a directory (`< /tmp`)
    /// is an error with its reason, where Foundation's `readDataToEndOfFile` trapped.
    public static func readStandardInput(notA what: String = "a file", limit: Int = 1 << 30)
        throws(FileReadError) -> [UInt8]
    {
        let name = "standard input"
        let closed = "closed (give the input with < FILE or a pipe)"
        // Closed at start (`<&-`): /dev/null since, which would read as an empty file.
        guard !startedClosed(STDIN_FILENO) else { throw FileReadError(path: name, code: EBADF, reason: closed) }
        func failure(_ code: Int32) -> FileReadError {
            let reason = switch code {
            case EBADF: closed
            case EISDIR: "a directory, not \(what)"
            case EFBIG: "longer than \(limit) bytes: not \(what)"
            default: String(cString: strerror(code))
            }
            return FileReadError(path: name, code: code, reason: reason)
        }
        return try readAll(STDIN_FILENO, limit: limit, failure: failure)
    }

    private static func readAll(_ fd: Int32, limit: Int, failure: (Int32) -> FileReadError) throws(FileReadError)
        -> [UInt8]
    {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = chunk.withUnsafeMutableBytes { p in retryingInterrupts { read(fd, p.baseAddress, p.count) } }
            guard n >= 0 else { throw failure(errno) }
            if n == 0 { return bytes }
            guard bytes.count + n <= limit else { throw failure(EFBIG) }
            bytes.append(contentsOf: chunk[0..<n])
        }
    }
}
