#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An exclusive `flock` on a file, held by the process recording a session for as long as it records.
///
/// The kernel releases it when the process dies, however it dies (`kill -9` included), so "nobody holds the lock"
/// is exactly "the writer is gone". Locks of two open files conflict even within one process.
final class WriterLock: Sendable {
    let path: String
    private let fd: Int32

    private init(path: String, fd: Int32) {
        self.path = path
        self.fd = fd
    }

    /// Takes the lock without waiting; nil when another open file holds it. Throws when the file cannot be opened.
    static func tryAcquire(path: String) throws(StoreError) -> WriterLock? {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o640)
        guard fd >= 0 else {
            throw StoreError.io("cannot open the lock file \(path): \(String(cString: strerror(errno)))")
        }
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            if errno == EINTR { continue }
            close(fd)
            return nil
        }
        return WriterLock(path: path, fd: fd)
    }

    /// Releases the lock; with `remove`, deletes the file first (while still holding it).
    func release(remove: Bool) {
        if remove { unlink(path) }
        close(fd)
    }
}
