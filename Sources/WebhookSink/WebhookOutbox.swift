import Foundation
import GatewayEngine
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
    /// A forming sample batch no sample joined for this long is sealed by the next `claimDue`.
    public static let idleBatchMs: Int64 = 60_000
    private let dbQueue: DatabaseQueue

    /// Opens (creating when needed) `outbox.sqlite` in `directory`.
    public init(directory: String, maxItems: Int = 10_000) throws(WebhookError) {
        path = directory + "/outbox.sqlite"
        self.maxItems = max(1, maxItems)
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw .outbox("cannot create the state directory \(directory): \(Self.reason(error)) "
                + "(\(StateDatabase.directoryAdvice))")
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
                """), ("v2-batch-samples", """
                CREATE TABLE batch_samples (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    url TEXT NOT NULL,
                    session_id TEXT NOT NULL,
                    sample TEXT NOT NULL,
                    added_at_ms INTEGER NOT NULL
                );
                CREATE INDEX batch_samples_by_batch ON batch_samples(url, session_id, id);
                """)])
        } catch {
            throw .outbox("cannot open \(path): \(StateDatabase.whyNotOpened(error, path: path))")
        }
    }

    /// Adds an item, due at once. Returns how many of the oldest items were dropped to stay within `maxItems`.
    @discardableResult
    public func enqueue(url: String, body: String, nowMs: Int64) throws(WebhookError) -> (id: Int64, dropped: Int) {
        try write { db in try insert(db, url: url, body: body, nowMs: nowMs) }
    }

    private func insert(_ db: Database, url: String, body: String, nowMs: Int64) throws -> (id: Int64, dropped: Int) {
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

    // MARK: Sample batches, formed on disk

    /// What adding a sample or sealing batches did.
    public struct BatchResult: Sendable, Equatable {
        /// Outbox items made from full (or sealed) batches.
        public var sealed: [Int64] = []
        /// Oldest items dropped to stay within `maxItems`.
        public var dropped = 0
        public init() {}
    }

    /// Commits one sample (its wire JSON) to the batch forming for `url` and `sessionId`; when the batch holds
    /// `batchSize` samples it becomes an outbox item (`biosignal_batch`) in the same transaction. A sample is on disk
    /// when this returns, so a crash loses none: a later `claimDue` seals what an ended process left forming.
    @discardableResult
    public func addSample(_ sampleJSON: String, sessionId: String, url: String, batchSize: Int, nowMs: Int64)
        throws(WebhookError) -> BatchResult
    {
        try write { db in try add(db, sampleJSON, sessionId: sessionId, url: url, batchSize: batchSize, nowMs: nowMs) }
    }

    /// As `addSample`, without waiting for another process's write lock: nil, and nothing written, while another
    /// connection holds it (`webhook flush` claiming items, `sqlite3`).
    public func addSampleIfFree(_ sampleJSON: String, sessionId: String, url: String, batchSize: Int, nowMs: Int64)
        throws(WebhookError) -> BatchResult?
    {
        try writeIfFree { db in try add(db, sampleJSON, sessionId: sessionId, url: url, batchSize: batchSize, nowMs: nowMs) }
    }

    private func add(_ db: Database, _ sampleJSON: String, sessionId: String, url: String, batchSize: Int, nowMs: Int64)
        throws -> BatchResult
    {
        // Statements prepared once per connection (GRDB's statement cache), not parsed again for every sample.
        try db.cachedStatement(sql: "INSERT INTO batch_samples (url, session_id, sample, added_at_ms) VALUES (?, ?, ?, ?)")
            .execute(arguments: [url, sessionId, sampleJSON, nowMs])
        let forming = try Int.fetchOne(
            db.cachedStatement(sql: "SELECT COUNT(*) FROM batch_samples WHERE url = ? AND session_id = ?"),
            arguments: [url, sessionId]) ?? 0
        var result = BatchResult()
        if forming >= max(1, batchSize) { try seal(db, url: url, sessionId: sessionId, nowMs: nowMs, into: &result) }
        return result
    }

    /// Turns the batch forming for `url` and `sessionId` into an outbox item, however many samples it holds (the
    /// session's end).
    @discardableResult
    public func sealBatch(url: String, sessionId: String, nowMs: Int64) throws(WebhookError) -> BatchResult {
        try write { db in
            var result = BatchResult()
            try seal(db, url: url, sessionId: sessionId, nowMs: nowMs, into: &result)
            return result
        }
    }

    /// Seals every forming batch that has had no sample for `idleMs` (0: every one): what a process that ended
    /// without sealing (killed, crashed) left behind. A batch still forming in a live session is only sealed early,
    /// never lost: its next samples start a new one.
    @discardableResult
    public func sealIdleBatches(idleMs: Int64, nowMs: Int64) throws(WebhookError) -> BatchResult {
        try write { db in try sealIdle(db, idleMs: idleMs, nowMs: nowMs) }
    }

    private func sealIdle(_ db: Database, idleMs: Int64, nowMs: Int64) throws -> BatchResult {
        var result = BatchResult()
        let groups = try Row.fetchAll(
            db,
            sql: """
                SELECT url, session_id FROM batch_samples GROUP BY url, session_id
                HAVING MAX(added_at_ms) <= ? ORDER BY MIN(id)
                """,
            arguments: [nowMs - max(0, idleMs)])
        for g in groups { try seal(db, url: g["url"], sessionId: g["session_id"], nowMs: nowMs, into: &result) }
        return result
    }

    /// Items waiting for delivery.
    public func count() throws(WebhookError) -> Int {
        try read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM outbox") ?? 0 }
    }

    /// Samples committed but not yet in an outbox item.
    public func formingSampleCount() throws(WebhookError) -> Int {
        try read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM batch_samples") ?? 0 }
    }

    /// A batch of samples as posted: `{"type":"biosignal_batch","session_id":…,"samples":[…]}`.
    public static func batchBody(sessionId: String, samples: [JSONValue]) -> String {
        JSONValue.object([
            "type": .string("biosignal_batch"), "session_id": .string(sessionId), "samples": .array(samples),
        ]).jsonString
    }

    private func seal(_ db: Database, url: String, sessionId: String, nowMs: Int64, into result: inout BatchResult)
        throws
    {
        let rows = try Row.fetchAll(
            db, sql: "SELECT id, sample FROM batch_samples WHERE url = ? AND session_id = ? ORDER BY id",
            arguments: [url, sessionId])
        guard let last = rows.last else { return }
        let samples: [JSONValue] = rows.map { row in
            let text: String = row["sample"]
            return (try? JSONValue(parsing: text)) ?? .string(text)
        }
        let body = Self.batchBody(sessionId: sessionId, samples: samples)
        let (id, dropped) = try insert(db, url: url, body: body, nowMs: nowMs)
        let lastId: Int64 = last["id"]
        try db.execute(
            sql: "DELETE FROM batch_samples WHERE url = ? AND session_id = ? AND id <= ?",
            arguments: [url, sessionId, lastId])
        result.sealed.append(id)
        result.dropped += dropped
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
    /// Batches left forming (by a process that ended without sealing them) are sealed first once no sample has
    /// joined them for `idleBatchMs`, or at once with `ignoringSchedule`.
    ///
    /// Schedules are wall-clock times (they outlive the process). An item scheduled more than `horizonMs` after
    /// `nowMs` is due as well: no backoff or lease is that long, so the wall clock was stepped back since it was
    /// scheduled (NTP on a machine without a real-time clock), and waiting for it would add the step to the delay.
    public func claimDue(
        nowMs: Int64, leaseUntilMs: Int64, limit: Int = 100, ignoringSchedule: Bool = false,
        idleBatchMs: Int64 = WebhookOutbox.idleBatchMs, horizonMs: Int64 = .max / 4
    ) throws(WebhookError) -> [OutboxItem] {
        try write { db in
            _ = try sealIdle(db, idleMs: ignoringSchedule ? 0 : idleBatchMs, nowMs: nowMs)
            let rows = ignoringSchedule
                ? try Row.fetchAll(db, sql: "SELECT * FROM outbox ORDER BY id LIMIT ?", arguments: [limit])
                : try Row.fetchAll(
                    db, sql: "SELECT * FROM outbox WHERE next_attempt_ms <= ? OR next_attempt_ms > ? ORDER BY id LIMIT ?",
                    arguments: [nowMs, nowMs + horizonMs, limit])
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

    /// As `write`, with no wait: nil when another connection holds the write lock (`DatabaseQueue.writeIfFree`).
    private func writeIfFree<T>(_ body: (Database) throws -> T) throws(WebhookError) -> T? {
        do { return try dbQueue.writeIfFree(body) } catch { throw .outbox("writing \(path): \(Self.reason(error))") }
    }

    private static func reason(_ error: any Error) -> String { StateDatabase.reason(error) }
}
