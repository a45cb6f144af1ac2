import Foundation
import GRDB
import GatewayStorage
import Testing

@Suite struct StateDatabaseTests {
    /// Every database of the state directory is opened with WAL, `synchronous=NORMAL` and a 256 KB page cache: a
    /// long recording appends pages, and SQLite's default 2 MB cache kept up to 2 MB of them resident per connection.
    @Test func aStateDatabaseIsOpenedWithWALAndASmallPageCache() throws {
        let queue = try StateDatabase.open(
            path: tempDir() + "/state.sqlite", migrations: [(name: "t", sql: "CREATE TABLE t (x INTEGER)")])
        let (journal, synchronous, cache) = try queue.read { db in
            (try String.fetchOne(db, sql: "PRAGMA journal_mode"), try Int.fetchOne(db, sql: "PRAGMA synchronous"),
             try Int.fetchOne(db, sql: "PRAGMA cache_size"))
        }
        #expect(journal == "wal")
        #expect(synchronous == 1)   // NORMAL
        #expect(cache == -256)      // KiB
    }
}

@Suite struct StateDatabaseModeTests {
    static func mode(_ path: String) -> mode_t? {
        var st = stat()
        return stat(path, &st) == 0 ? st.st_mode & 0o777 : nil
    }

    /// A new state database and its -wal and -shm are for their owner and group (the usual umask made them 0644:
    /// every user of the machine could read the heart data); one made readable to others before is made private.
    @Test func stateFilesAreNotReadableByOtherUsers() throws {
        let old = umask(0o022)
        defer { umask(old) }
        let path = tempDir() + "/sessions.sqlite"
        let queue = try StateDatabase.open(path: path, migrations: [(name: "t", sql: "CREATE TABLE t (x INTEGER)")])
        try queue.write { try $0.execute(sql: "INSERT INTO t VALUES (1)") }
        for file in [path, path + "-wal", path + "-shm"] {
            #expect(Self.mode(file) == 0o640, "\(file): \(String(Self.mode(file) ?? 0, radix: 8))")
        }
        try queue.close()

        let older = tempDir() + "/relay.sqlite"
        for suffix in ["", "-wal", "-shm"] {
            #expect(FileManager.default.createFile(atPath: older + suffix, contents: nil, attributes: [.posixPermissions: 0o644]))
        }
        let reopened = try StateDatabase.open(path: older, migrations: [(name: "t", sql: "CREATE TABLE t (x INTEGER)")])
        for file in [older, older + "-wal", older + "-shm"] {
            #expect(Self.mode(file) == 0o640, "\(file): \(String(Self.mode(file) ?? 0, radix: 8))")
        }
        try reopened.close()
    }
}
