import Foundation
import GatewayStorage
import GRDB

/// What went wrong with the webhook outbox or its settings, and what to do about it.
public enum WebhookError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The URL cannot be posted to.
    case badURL(String)
    /// The outbox database could not be opened or written.
    case outbox(String)

    public var description: String {
        switch self {
        case .badURL(let s):
            "the webhook URL must be an absolute http:// or https:// URL with a host, such as "
                + "http://127.0.0.1:8080/hook, got \"\(s)\""
        case .outbox(let m): "webhook outbox: \(m)"
        }
    }
}

/// Checks a webhook URL: absolute, `http` or `https`, with a host.
public func parseWebhookURL(_ text: String) throws(WebhookError) -> URL {
    guard let c = URLComponents(string: text), let scheme = c.scheme?.lowercased(), scheme == "http" || scheme == "https",
        let host = c.host, !host.isEmpty, let url = c.url
    else { throw .badURL(text) }
    return url
}

/// One item waiting in the outbox.
public struct OutboxItem: Sendable, Equatable {
    public var id: Int64
    public var url: String
    /// The JSON text posted as the request body.
    public var body: String
    public var createdAtMs: Int64
    /// Delivery attempts made so far.
    public var attempts: Int
    /// Not attempted again before this time (epoch ms).
    public var nextAttemptMs: Int64
    /// Why the last attempt failed, if one did.
    public var lastError: String?
}

/// The durable outbox: `outbox.sqlite` (SQLite in WAL mode) in the state directory.
///
/// An item is committed before any attempt to deliver it and deleted only after a 2xx answer, so an item survives a
/// failed delivery, a crash and a restart. Several processes may share one outbox: an attempt first claims its items
/// (moves their next attempt time past the request's timeout) in one transaction, so two processes do not post the
/// same item at once.
public final class WebhookOutbox: Sendable {
    public let path: String
    /// Beyond this many items, the oldest are dropped when a new one is added.
    public let maxItems: Int
    private let dbQueue: DatabaseQueue

    /// Opens (creating when needed) `outbox.sqlite` in `directory`.
    public init(directory: String, maxItems: Int = 10_000) throws(WebhookError) {
        path = directory + "/outbox.sqlite"
        self.maxItems = max(1, maxItems)
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw .outbox("cannot create the state directory \(directory): \(error.localizedDescription) "
                + "(choose another with --state-dir or HR_GATEWAY_STATE_DIR, or fix its permissions)")
        }
        do {
            dbQueue = try StateDatabase.open(path: path, migrations: [("v1", """
                CREATE TABLE outbox (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    url TEXT NOT NULL,
                    body TEXT NOT NULL,
                    created_at_ms INTEGER NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    next_attempt_ms INTEGER NOT NULL,
                    last_error TEXT
                );
                CREATE INDEX outbox_by_due ON outbox(next_attempt_ms, id);
                """)])
        } catch {
            throw .outbox("cannot open \(path): \(Self.reason(error))")
        }
    }

    /// Adds an item, due at once. Returns how many of the oldest items were dropped to stay within `maxItems`.
    @discardableResult
    public func enqueue(url: String, body: String, nowMs: Int64) throws(WebhookError) -> (id: Int64, dropped: Int) {
        try write { db in
            try db.execute(
                sql: "INSERT INTO outbox (url, body, created_at_ms, next_attempt_ms) VALUES (?, ?, ?, ?)",
                arguments: [url, body, nowMs, nowMs])
            let id = db.lastInsertedRowID
            let count = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM outbox") ?? 0
            let excess = count - maxItems
            if excess > 0 {
                try db.execute(
                    sql: "DELETE FROM outbox WHERE id IN (SELECT id FROM outbox ORDER BY id LIMIT ?)", arguments: [excess])
            }
            return (id, max(0, excess))
        }
    }

    /// Every item, oldest first.
    public func pending() throws(WebhookError) -> [OutboxItem] {
        try read { db in try Row.fetchAll(db, sql: "SELECT * FROM outbox ORDER BY id").map(Self.item) }
    }

    /// The earliest next attempt time, or nil when the outbox is empty.
    public func nextDueMs() throws(WebhookError) -> Int64? {
        try read { db in try Int64.fetchOne(db, sql: "SELECT MIN(next_attempt_ms) FROM outbox") }
    }

    /// Claims up to `limit` items due at `nowMs` (all items with `ignoringSchedule`), oldest first, holding them until
    /// `leaseUntilMs` so that another process does not post them meanwhile.
    public func claimDue(nowMs: Int64, leaseUntilMs: Int64, limit: Int = 100, ignoringSchedule: Bool = false)
        throws(WebhookError) -> [OutboxItem]
    {
        try write { db in
            let rows = ignoringSchedule
                ? try Row.fetchAll(db, sql: "SELECT * FROM outbox ORDER BY id LIMIT ?", arguments: [limit])
                : try Row.fetchAll(
                    db, sql: "SELECT * FROM outbox WHERE next_attempt_ms <= ? ORDER BY id LIMIT ?",
                    arguments: [nowMs, limit])
            let items = rows.map(Self.item)
            for item in items {
                try db.execute(
                    sql: "UPDATE outbox SET next_attempt_ms = ? WHERE id = ?", arguments: [leaseUntilMs, item.id])
            }
            return items
        }
    }

    /// Deletes a delivered item.
    public func remove(id: Int64) throws(WebhookError) {
        try write { db in try db.execute(sql: "DELETE FROM outbox WHERE id = ?", arguments: [id]) }
    }

    /// Sets when to try an item again; with `failedAttempt`, counts a failed attempt and records why.
    public func reschedule(id: Int64, nextAttemptMs: Int64, failedAttempt error: String?) throws(WebhookError) {
        try write { db in
            if let error {
                try db.execute(
                    sql: "UPDATE outbox SET next_attempt_ms = ?, last_error = ?, attempts = attempts + 1 WHERE id = ?",
                    arguments: [nextAttemptMs, error, id])
            } else {
                try db.execute(sql: "UPDATE outbox SET next_attempt_ms = ? WHERE id = ?", arguments: [nextAttemptMs, id])
            }
        }
    }

    private static func item(_ row: Row) -> OutboxItem {
        OutboxItem(
            id: row["id"], url: row["url"], body: row["body"], createdAtMs: row["created_at_ms"],
            attempts: row["attempts"], nextAttemptMs: row["next_attempt_ms"], lastError: row["last_error"])
    }

    private func read<T>(_ body: (Database) throws -> T) throws(WebhookError) -> T {
        do { return try dbQueue.read(body) } catch { throw .outbox("reading \(path): \(Self.reason(error))") }
    }

    private func write<T>(_ body: (Database) throws -> T) throws(WebhookError) -> T {
        do { return try dbQueue.write(body) } catch { throw .outbox("writing \(path): \(Self.reason(error))") }
    }

    private static func reason(_ error: any Error) -> String {
        if let db = error as? DatabaseError { return db.message ?? "\(db.resultCode)" }
        return "\(error)"
    }
}
