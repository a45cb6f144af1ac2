import Foundation
import GatewayStorage
import GRDB

/// The durable outbox of QoS 1 messages: `mqtt-outbox.sqlite` (SQLite in WAL mode) in the state directory.
///
/// A QoS 1 message is committed here before it is handed to libmosquitto and deleted once the broker has
/// acknowledged it, so it survives a broker restart, a network cut, a crash and a gateway restart: the next run with
/// the same broker and gateway ID publishes what is left, oldest first, before anything new.
///
/// Each row names the process that owns it (its pid). A process adopts, at start, the rows of its broker and
/// gateway ID whose owner is no longer running, so that two gateways sharing a state directory never publish under
/// each other's ID, and a live process's messages are not sent twice by another.
public final class MQTTOutbox: Sendable {
    /// One message waiting for the broker's acknowledgement.
    public struct Item: Sendable, Equatable {
        public var id: Int64
        public var topic: String
        public var payload: String
        public var qos: Int32
        public var retain: Bool
        public var createdAtMs: Int64
    }

    public let path: String
    /// Beyond this many rows the oldest are dropped when one is added (counted in the result of `add`).
    public let maxItems: Int
    private let dbQueue: DatabaseQueue
    private let owner: Int64

    /// Opens (creating when needed) `mqtt-outbox.sqlite` in `directory`.
    public init(directory: String, maxItems: Int = 100_000, owner: Int32 = getpid()) throws(MQTTError) {
        path = directory + "/mqtt-outbox.sqlite"
        self.maxItems = max(1, maxItems)
        self.owner = Int64(owner)
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            dbQueue = try StateDatabase.open(path: path, migrations: [("v1", """
                CREATE TABLE outbox (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    broker TEXT NOT NULL,
                    gateway_id TEXT NOT NULL,
                    topic TEXT NOT NULL,
                    payload TEXT NOT NULL,
                    qos INTEGER NOT NULL,
                    retain INTEGER NOT NULL,
                    created_at_ms INTEGER NOT NULL,
                    owner INTEGER NOT NULL
                );
                CREATE INDEX outbox_by_destination ON outbox(broker, gateway_id, id);
                """)])
        } catch {
            throw MQTTError(.outbox, "cannot open \(path): \(StateDatabase.whyNotOpened(error, path: path))")
        }
    }

    /// Commits one message for `broker` (its `host:port`) and `gatewayId`; returns its row id and how many of the
    /// oldest rows were dropped to stay within `maxItems`.
    public func add(broker: String, gatewayId: String, topic: String, payload: String, qos: Int32, retain: Bool,
                    nowMs: Int64) throws(MQTTError) -> (id: Int64, dropped: Int)
    {
        try write { db in
            // Statements prepared once per connection (GRDB's statement cache), not parsed again for every message.
            try db.cachedStatement(sql: """
                INSERT INTO outbox (broker, gateway_id, topic, payload, qos, retain, created_at_ms, owner)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """).execute(arguments: [broker, gatewayId, topic, payload, qos, retain ? 1 : 0, nowMs, owner])
            let id = db.lastInsertedRowID
            let count = try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM outbox")) ?? 0
            let excess = count - maxItems
            if excess > 0 {
                try db.execute(
                    sql: "DELETE FROM outbox WHERE id IN (SELECT id FROM outbox ORDER BY id LIMIT ?)", arguments: [excess])
            }
            return (id, max(0, excess))
        }
    }

    /// Deletes an acknowledged message.
    public func remove(id: Int64) throws(MQTTError) {
        try write { db in try db.execute(sql: "DELETE FROM outbox WHERE id = ?", arguments: [id]) }
    }

    /// Takes over the rows for `broker` and `gatewayId` left by processes that are no longer running (a crash, a
    /// run that ended before the broker acknowledged) and returns them, oldest first.
    public func adoptLeftovers(broker: String, gatewayId: String) throws(MQTTError) -> [Item] {
        try write { db in
            let owners = try Int64.fetchAll(
                db, sql: "SELECT DISTINCT owner FROM outbox WHERE broker = ? AND gateway_id = ? AND owner != ?",
                arguments: [broker, gatewayId, owner])
            for dead in owners where !Self.isRunning(pid: dead) {
                try db.execute(
                    sql: "UPDATE outbox SET owner = ? WHERE broker = ? AND gateway_id = ? AND owner = ?",
                    arguments: [owner, broker, gatewayId, dead])
            }
            return try Row.fetchAll(
                db,
                sql: """
                    SELECT id, topic, payload, qos, retain, created_at_ms FROM outbox
                    WHERE broker = ? AND gateway_id = ? AND owner = ? ORDER BY id
                    """,
                arguments: [broker, gatewayId, owner]
            ).map { row in
                Item(id: row["id"], topic: row["topic"], payload: row["payload"], qos: Int32(row["qos"] as Int64),
                     retain: (row["retain"] as Int64) != 0, createdAtMs: row["created_at_ms"])
            }
        }
    }

    /// Rows waiting, in all or for one broker and gateway ID.
    public func count(broker: String? = nil, gatewayId: String? = nil) throws(MQTTError) -> Int {
        do {
            return try dbQueue.read { db in
                if let broker, let gatewayId {
                    return try Int.fetchOne(
                        db, sql: "SELECT COUNT(*) FROM outbox WHERE broker = ? AND gateway_id = ?",
                        arguments: [broker, gatewayId]) ?? 0
                }
                return try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM outbox") ?? 0
            }
        } catch {
            throw MQTTError(.outbox, "cannot read \(path): \(error)")
        }
    }

    /// Whether a process with this id exists (EPERM: it does, under another user).
    static func isRunning(pid: Int64) -> Bool {
        guard pid > 0, pid <= Int64(Int32.max) else { return false }
        return kill(pid_t(pid), 0) == 0 || errno == EPERM
    }

    private func write<T>(_ body: (Database) throws -> T) throws(MQTTError) -> T {
        do {
            return try dbQueue.write(body)
        } catch {
            throw MQTTError(.outbox, "cannot write \(path): \(error)")
        }
    }
}
