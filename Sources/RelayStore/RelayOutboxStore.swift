import Foundation
import GatewayEngine
import GatewayStorage
import GRDB
import RelayCore

/// The relay's reliable events and acknowledgement cursors on disk (`relay.sqlite` in the state directory), so that
/// a consumer gets a `session_summary` it missed even when the gateway restarted in between.
///
/// Each reliable event is committed before it is queued for any consumer; `relay_seq` never repeats across
/// restarts (numbers are reserved in blocks, so a restart skips ahead rather than reusing). Only one process uses
/// the file at a time (an exclusive `flock` on `relay.lock`); another gateway on the same state directory is told
/// so and relays without it.
public final class RelayOutboxStore: RelayOutbox {
    /// What the previous run left.
    public typealias Snapshot = RelayOutboxSnapshot
    public typealias Event = RelayOutboxEvent

    public let path: String
    public let snapshot: Snapshot
    /// How many sequence numbers one reservation covers.
    static let reservation: Int64 = 10_000
    private let dbQueue: DatabaseQueue
    private let lock: FileLock
    /// The highest number the hub may hand out without a `.reserve`: what is on disk.
    private let reservedThrough: Locked<Int64>
    /// Every write after the opening runs here (or, when nothing is queued and the file is free, on the caller's
    /// thread without waiting), in the order given.
    private let lane = DatabaseLane(label: "hr-gateway.relay-outbox")

    /// Opens (or creates) the store in `directory` and reads what it holds.
    public init(directory: String) throws(RelayOutboxStoreError) {
        path = directory + "/relay.sqlite"
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw RelayOutboxStoreError("cannot create the state directory \(directory): \(error.localizedDescription)")
        }
        let lockPath = directory + "/relay.lock"
        let lock: FileLock?
        do { lock = try FileLock.tryAcquire(path: lockPath) } catch { throw RelayOutboxStoreError("\(error)") }
        guard let lock else {
            throw RelayOutboxStoreError(
                "another hr-gateway relays from \(directory) (it holds \(lockPath)); give this one its own --state-dir")
        }
        self.lock = lock
        do {
            dbQueue = try StateDatabase.open(path: path, migrations: [("v1", """
                CREATE TABLE events (seq INTEGER PRIMARY KEY NOT NULL, at_ms INTEGER NOT NULL, text TEXT NOT NULL);
                CREATE TABLE cursors (consumer_id TEXT PRIMARY KEY NOT NULL, acked INTEGER NOT NULL);
                CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL);
                """)])
            let (snapshot, reserved) = try dbQueue.write { db -> (Snapshot, Int64) in
                var s = Snapshot()
                let stored = try Int64.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'reserved_seq'") ?? 0
                let maxEvent = try Int64.fetchOne(db, sql: "SELECT MAX(seq) FROM events") ?? 0
                s.seqFloor = max(stored, maxEvent)
                for row in try Row.fetchAll(db, sql: "SELECT seq, at_ms, text FROM events ORDER BY seq") {
                    s.events.append(Event(seq: row["seq"], atMs: row["at_ms"], text: row["text"]))
                }
                for row in try Row.fetchAll(db, sql: "SELECT consumer_id, acked FROM cursors") {
                    s.cursors[row["consumer_id"]] = row["acked"]
                }
                let reserved = s.seqFloor + Self.reservation
                try db.execute(sql: "INSERT OR REPLACE INTO meta (key, value) VALUES ('reserved_seq', ?)", arguments: [reserved])
                return (s, reserved)
            }
            self.snapshot = snapshot
            reservedThrough = Locked(reserved)
        } catch {
            lock.release(remove: false)
            throw RelayOutboxStoreError("cannot open \(path): \(StateDatabase.whyNotOpened(error, path: path))")
        }
    }

    deinit { lock.release(remove: false) }

    public func covers(_ seq: Int64) -> Bool { reservedThrough.withLock { seq <= $0 } }

    public func apply(_ write: RelayOutboxWrite, done: @escaping @Sendable (Result<Void, any Error>) -> Void)
        -> Result<Void, any Error>?
    {
        var outcome: Result<Void, any Error>?
        lane.runHereIfIdle(
            {
                do {
                    guard try dbQueue.writeIfFree({ db in try perform(write, db) }) != nil else { return false }
                    outcome = .success(())
                } catch {
                    outcome = .failure(error)
                }
                return true
            },
            otherwise: { [self] in done(Result { try dbQueue.write { db in try perform(write, db) } }) })
        return outcome
    }

    public func enqueue(_ write: RelayOutboxWrite, done: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        lane.submit { [self] in done(Result { try dbQueue.write { db in try perform(write, db) } }) }
    }

    public func settled() async { await lane.settled() }

    /// One write, inside the caller's transaction.
    private func perform(_ write: RelayOutboxWrite, _ db: Database) throws {
        switch write {
        case .reserve(let seq):
            try reserve(through: seq, db)
        case .append(let event):
            try reserve(through: event.seq, db)
            // Prepared once per connection (GRDB's statement cache), not parsed again for every event.
            try db.cachedStatement(sql: "INSERT OR REPLACE INTO events (seq, at_ms, text) VALUES (?, ?, ?)")
                .execute(arguments: [event.seq, event.atMs, event.text])
        case .update(let cursors, let floor):
            for (id, value) in cursors {
                if let value {
                    try db.execute(
                        sql: "INSERT OR REPLACE INTO cursors (consumer_id, acked) VALUES (?, ?)", arguments: [id, value])
                } else {
                    try db.execute(sql: "DELETE FROM cursors WHERE consumer_id = ?", arguments: [id])
                }
            }
            if let floor { try db.execute(sql: "DELETE FROM events WHERE seq <= ?", arguments: [floor]) }
        case .trim(let limit):
            try db.execute(
                sql: "DELETE FROM events WHERE seq NOT IN (SELECT seq FROM events ORDER BY seq DESC LIMIT ?)",
                arguments: [limit])
        }
    }

    /// Writes a new block of numbers when `seq` is beyond the one on disk (one write per 10 000 numbers).
    private func reserve(through seq: Int64, _ db: Database) throws {
        guard !covers(seq) else { return }
        let needed = seq + Self.reservation
        try db.execute(sql: "INSERT OR REPLACE INTO meta (key, value) VALUES ('reserved_seq', ?)", arguments: [needed])
        // Only after the commit: the hub hands out numbers up to this value without asking.
        db.afterNextTransaction { _ in self.reservedThrough.withLock { $0 = max($0, needed) } }
    }
}

/// The relay outbox cannot be used; the gateway relays from memory only.
public struct RelayOutboxStoreError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
