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
        let file = FileParts(path: path, mode: mode)
        try file.write(Array(bytes))
        try file.finish()
    }
}

/// A file written a part at a time (an export too large to hold whole; `FileWrite.write` in one part): opened in place
/// at the first part, so that an export refused before its first part leaves an existing file as it was. On a
/// failure, or `abandon()`, a regular file is removed rather than left half written.
public final class FileParts {
    public let path: String
    private let mode: mode_t
    private var fd: Int32 = -1

    public init(path: String, mode: mode_t = 0o644) {
        self.path = path
        self.mode = mode
    }

    deinit { if fd >= 0 { close(fd) } }

    public func write(_ bytes: [UInt8]) throws(FileWriteError) {
        try open()
        var failure: Int32?
        bytes.withUnsafeBytes { raw in
            do throws(SystemCallError) { try SystemCall.writeAll(fd, raw) } catch { failure = error.code }
        }
        if let failure {
            abandon()
            throw FileWriteError(path: path, code: failure)
        }
    }

    /// Syncs and closes the file (made empty if no part came).
    public func finish() throws(FileWriteError) {
        try open()
        var failure: Int32?
        if fsync(fd) != 0, errno != EINVAL, errno != EROFS { failure = errno }
        if let failure {
            abandon()
            throw FileWriteError(path: path, code: failure)
        }
        let closing = fd
        fd = -1
        if close(closing) != 0, errno != EINTR {
            let code = errno
            if Self.isRegular(path) { unlink(path) }
            throw FileWriteError(path: path, code: code)
        }
    }

    /// Closes the file and removes it when it is a regular file (not a device or a pipe written through).
    public func abandon() {
        guard fd >= 0 else { return }
        var st = stat()
        let regular = fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG
        close(fd)
        fd = -1
        if regular { unlink(path) }
    }

    private func open() throws(FileWriteError) {
        guard fd < 0 else { return }
        let opened = Glibc.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
        guard opened >= 0 else { throw FileWriteError(path: path, code: errno) }
        fd = opened
    }

    private static func isRegular(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG
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
