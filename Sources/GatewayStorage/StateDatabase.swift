import Foundation
import GRDB
import SystemCalls

/// SQLite files in the state directory (sessions, webhook outbox, relay outbox) are opened alike: WAL, so that
/// readers never wait for the writer and a killed process loses nothing committed; `synchronous=NORMAL` (a power
/// cut may lose the commits since the last checkpoint); a 10 s wait when another process holds the write lock; and a
/// page cache of 256 KB per connection instead of SQLite's 2 MB: the writers append at the end of their tables, and
/// with the default cache a long recording's resident memory grew by the pages it had written, up to 2 MB.
public enum StateDatabase {
    /// How long a write waits for another connection's write lock before it fails with SQLITE_BUSY.
    public static let busyTimeoutMs = 10_000

    /// Opens (creating when needed) the database at `path` and applies `migrations` in order.
    public static func open(path: String, migrations: [(name: String, sql: String)]) throws -> DatabaseQueue {
        keepFromOthers(path)
        do { return try openAsIs(path: path, migrations: migrations) } catch {
            // Another user's file: say whose, and how to run as them.
            if let whose = StateOwnership.unwritable(path) { throw NotWritable(reason: whose) }
            throw error
        }
    }

    /// State files are for their owner and group only (0640, as the journals; SQLite gives its -wal and -shm the
    /// database's mode): made with SQLite's 0644 under the usual umask, the sessions (heart data, ECG) and the
    /// relay's outbox were readable by every user of a shared machine whenever the state directory was (it is
    /// 0755 outside the service). A missing file is made so; one of this user's that others may read (made before)
    /// loses those bits, with its -wal and -shm. Anything that fails here is left to the open to say.
    static func keepFromOthers(_ path: String) {
        let fd = SystemCall.retryingInterrupts { Glibc.open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o640) }
        if fd >= 0 {
            close(fd)
            return
        }
        for file in [path, path + "-wal", path + "-shm"] {
            var st = stat()
            guard stat(file, &st) == 0, st.st_uid == geteuid(), st.st_mode & 0o007 != 0 else { continue }
            _ = chmod(file, st.st_mode & 0o770)
        }
    }

    /// For a write refused as read-only (SQLite opens a file this user may not write read-only, and says only
    /// "attempt to write a readonly database" at the first write): whose the file is and how to run as them.
    public static func notWritable(_ error: any Error, path: String) -> NotWritable? {
        guard let db = error as? DatabaseError, db.resultCode.primaryResultCode == .SQLITE_READONLY,
            let whose = StateOwnership.unwritable(path)
        else { return nil }
        return NotWritable(reason: whose)
    }

    /// Below this many free bytes the disk is taken as full.
    public static let fullBelowBytes: Int64 = 1 << 20

    /// The bytes this user may still write on the file system holding `directory`.
    public static func freeBytes(_ directory: String) -> Int64? {
        var fs = statvfs()
        guard statvfs(directory, &fs) == 0 else { return nil }
        return Int64(fs.f_bavail) * Int64(fs.f_frsize)
    }

    /// Why the state file at `path` could not be opened, and what to do, for every store's message: a full disk
    /// (SQLite says "disk I/O error" or "SQLite error 13 … while executing PRAGMA"), another user's file, a damaged
    /// one, or else SQLite's words with the directory advice.
    public static func whyNotOpened(_ error: any Error, path: String) -> String {
        let dir = SystemCall.parentDirectory(of: path)
        if let free = freeBytes(dir), free < fullBelowBytes {
            return "the disk holding it is full (\(free / 1024) KB free): free some space on it, or choose another "
                + "state directory with --state-dir or HR_GATEWAY_STATE_DIR"
        }
        if let notWritable = error as? NotWritable { return notWritable.reason }
        let why = reason(error)
        if isDamage(why) {
            return why + " (the file is damaged: move it aside with its -wal and -shm, and a new one is made)"
        }
        return why + " (\(directoryAdvice))"
    }

    /// Whether SQLite's (or GRDB's) words for a failure mean the file is damaged: not a database, a malformed
    /// page, or a schema table cut short (a truncated file read its migrations table as NULLs).
    public static func isDamage(_ reason: String) -> Bool {
        reason.contains("not a database") || reason.contains("malformed") || reason.contains("could not decode")
    }

    /// A state file this user may not write (`reason` names its owner).
    public struct NotWritable: Error, CustomStringConvertible {
        public let reason: String
        public var description: String { reason }
    }

    private static func openAsIs(path: String, migrations: [(name: String, sql: String)]) throws -> DatabaseQueue {
        var config = Configuration()
        config.journalMode = .wal
        config.busyMode = .timeout(Double(busyTimeoutMs) / 1_000)
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            try db.execute(sql: "PRAGMA cache_size = -256")
        }
        let queue = try DatabaseQueue(path: path, configuration: config)
        var migrator = DatabaseMigrator()
        for m in migrations {
            let sql = m.sql
            migrator.registerMigration(m.name) { db in try db.execute(sql: sql) }
        }
        try migrator.migrate(queue)
        // As root in another user's state directory: the files are that user's (SQLite gives its -wal and -shm the
        // database file's owner).
        for file in [path, path + "-wal", path + "-shm"] { StateOwnership.adopt(file) }
        return queue
    }

    /// What to do about a state directory that cannot be used, said by every store that lives in it and by doctor.
    public static let directoryAdvice = "choose another with --state-dir or HR_GATEWAY_STATE_DIR, or fix its permissions"

    /// What went wrong opening or using a state file, in a few words: SQLite's message, or for Foundation's file
    /// errors (creating the state directory) the system's reason with the path that failed, not a dump.
    public static func reason(_ error: any Error) -> String {
        if let db = error as? DatabaseError { return db.message ?? "\(db.resultCode)" }
        if let notWritable = error as? NotWritable { return notWritable.reason }
        let ns = error as NSError
        guard ns.domain == NSCocoaErrorDomain else { return "\(error)" }
        let path = (ns.userInfo[NSFilePathErrorKey] as? String).map { " (\($0))" } ?? ""
        if let u = (ns.userInfo[NSUnderlyingErrorKey] as? any Error).map({ $0 as NSError }), u.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(u.code))) + path
        }
        switch CocoaError.Code(rawValue: ns.code) {
        case .fileWriteNoPermission, .fileReadNoPermission: return "permission denied" + path
        case .fileWriteOutOfSpace: return "no space left on the device" + path
        case .fileWriteVolumeReadOnly: return "read-only file system" + path
        case .fileWriteFileExists: return "a file is in the way" + path
        case .fileNoSuchFile, .fileReadNoSuchFile: return "no such file or directory" + path
        default: return ns.localizedDescription + path
        }
    }
}

extension DatabaseQueue {
    /// One write transaction with a busy timeout of 0 for its duration: nil when another connection holds the write
    /// lock, instead of waiting for it. For work done on a thread that must not wait (a provider's, the concurrency
    /// pool's) when nothing is queued before it (`DatabaseLane.runHereIfIdle`). The queue's connection is its owner's
    /// alone, so the timeout is put back before anything else uses it.
    public func writeIfFree<T>(_ body: (Database) throws -> T) throws -> T? {
        try writeWithoutTransaction { db -> T? in
            try db.execute(sql: "PRAGMA busy_timeout = 0")
            defer { try? db.execute(sql: "PRAGMA busy_timeout = \(StateDatabase.busyTimeoutMs)") }
            var result: T?
            do {
                try db.inTransaction(.immediate) {
                    result = try body(db)
                    return .commit
                }
            } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY {
                return nil
            }
            return result
        }
    }
}
