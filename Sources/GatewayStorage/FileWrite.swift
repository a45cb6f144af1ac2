import Foundation
import SystemCalls
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Whole files written with write(2): opened in place (a device or a named pipe is written to, never replaced by a
/// regular file, as `FileManager.createFile` would), interrupted writes retried, and a failure given as its errno.
public enum FileWrite {
    /// Creates or truncates `path` with `mode` (for a new file) and writes all of `bytes`. On failure a regular file is
    /// removed rather than left half written, to be taken for a whole one.
    public static func write(
        _ bytes: some Collection<UInt8>, to path: String, mode: mode_t = 0o644
    ) throws(FileWriteError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
        guard fd >= 0 else { throw FileWriteError(path: path, code: errno) }
        var failure: Int32?
        Array(bytes).withUnsafeBytes { raw in
            do throws(SystemCallError) { try SystemCall.writeAll(fd, raw) } catch { failure = error.code }
        }
        if failure == nil, fsync(fd) != 0, errno != EINVAL, errno != EROFS { failure = errno }
        var st = stat()
        let regular = fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG
        if close(fd) != 0, failure == nil, errno != EINTR { failure = errno }
        if let failure {
            if regular { unlink(path) }
            throw FileWriteError(path: path, code: failure)
        }
    }
}

/// A file that could not be written, with the errno that said why.
public struct FileWriteError: Error, Sendable, Equatable, CustomStringConvertible {
    public let path: String
    public let code: Int32

    public init(path: String, code: Int32) {
        self.path = path
        self.code = code
    }

    /// The reason in a few words, with what to do where there is something to do.
    public var reason: String { PathReason.unwritable(path, code: code) }

    public var description: String { "cannot write \(path): \(reason)" }
}
