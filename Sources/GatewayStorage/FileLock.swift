#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import SystemCalls

/// An exclusive `flock` on a file, held for as long as this object lives (or until `release`).
///
/// The kernel releases it when the process dies, however it dies (`kill -9` included), so "nobody holds the lock"
/// is exactly "the holder is gone". Locks of two open files conflict even within one process.
public final class FileLock: Sendable {
    public let path: String
    private let fd: Int32

    private init(path: String, fd: Int32) {
        self.path = path
        self.fd = fd
    }

    /// Takes the lock without waiting; nil when another open file holds it. Throws when the file cannot be opened.
    public static func tryAcquire(path: String) throws(FileLockError) -> FileLock? {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o640)
        guard fd >= 0 else { throw FileLockError(path: path, reason: String(cString: strerror(errno))) }
        StateOwnership.adopt(path)
        guard SystemCall.retryingInterrupts({ flock(fd, LOCK_EX | LOCK_NB) }) == 0 else {
            close(fd)
            return nil
        }
        return FileLock(path: path, fd: fd)
    }

    /// Whether some process holds the lock at `path`, asked without writing anything (for a reader that may not
    /// create or write the file): false when the file does not exist or nobody holds it.
    public static func isHeld(path: String) -> Bool {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return errno == EACCES && heldByInode(path) }
        defer { close(fd) }
        return SystemCall.retryingInterrupts({ flock(fd, LOCK_SH | LOCK_NB) }) != 0 && errno == EWOULDBLOCK
    }

    /// A lock file this user may not open (another user's, 0640): whether the kernel's table of locks
    /// (`/proc/locks`) has an flock on its inode. One this user may not even look at (in the service's `locks/`,
    /// 0750) counts as held: nothing says otherwise, and a session being recorded was shown interrupted.
    static func heldByInode(_ path: String) -> Bool {
        var st = stat()
        guard stat(path, &st) == 0 else { return errno == EACCES }
        guard let table = try? String(contentsOfFile: "/proc/locks", encoding: .utf8) else { return false }
        let inode = ":\(st.st_ino)"
        return table.split(separator: "\n").contains { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            return fields.count > 5 && fields[1] == "FLOCK" && fields[5].hasSuffix(inode)
        }
    }

    /// Releases the lock; with `remove`, deletes the file first (while still holding it). Call at most once.
    public func release(remove: Bool) {
        if remove { unlink(path) }
        close(fd)
    }
}

/// A lock file that cannot be opened.
public struct FileLockError: Error, Sendable, CustomStringConvertible {
    public let path: String
    public let reason: String
    public var description: String { "cannot open the lock file \(path): \(reason)" }
}
