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
