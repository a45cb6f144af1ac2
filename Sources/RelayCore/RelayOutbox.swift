/// Where a `RelayHub` keeps its reliable events and acknowledgement cursors across restarts. The hub does no I/O
/// itself and never waits for any: `RelayOutboxStore` (target `RelayStore`, `relay.sqlite`) writes on a queue of its
/// own, so that another process holding the file (`sqlite3`, a backup) holds neither the hub's lock nor a thread of
/// the concurrency pool (docs/architecture.md, "No waiting on another process").
///
/// Writes reach the store in the order they are given, whichever of `apply` and `enqueue` gives them.
public protocol RelayOutbox: Sendable {
    /// Where the outbox lives, for messages.
    var path: String { get }
    /// What the previous run left; the hub starts from it.
    var snapshot: RelayOutboxSnapshot { get }
    /// False when handing out `seq` needs a `.reserve` on disk first (once per block of numbers).
    func covers(_ seq: Int64) -> Bool
    /// Performs `write` after every write given before it, never waiting for another process on the caller's
    /// thread. When nothing is queued and the file is free, it is done at once, here, and its outcome returned
    /// (`done` is not called); otherwise it is queued, nil is returned, and `done` gets its outcome from the store's
    /// queue. Call it without holding a lock that anything else waits for.
    func apply(_ write: RelayOutboxWrite, done: @escaping @Sendable (Result<Void, any Error>) -> Void)
        -> Result<Void, any Error>?
    /// Queues `write` after every write given before it and returns at once (it may be called under a lock);
    /// `done` gets its outcome from the store's queue.
    func enqueue(_ write: RelayOutboxWrite, done: @escaping @Sendable (Result<Void, any Error>) -> Void)
    /// Returns once every write given before the call is done.
    func settled() async
}

/// One change to a `RelayOutbox`.
public enum RelayOutboxWrite: Sendable, Equatable {
    /// Makes sure no number up to `seq` is handed out again after a restart.
    case reserve(through: Int64)
    /// Commits a reliable event (reserving its number with it).
    case append(RelayOutboxEvent)
    /// Stores the cursors given (nil removes one) and drops the events at or below `dropThrough`.
    case update(cursors: [String: Int64?], dropThrough: Int64?)
    /// Drops the oldest events beyond `keeping`.
    case trim(keeping: Int)
}

/// What a previous run left in a `RelayOutbox`.
public struct RelayOutboxSnapshot: Sendable, Equatable {
    /// The first `relay_seq` this run may use is above this.
    public var seqFloor: Int64 = 0
    public var events: [RelayOutboxEvent] = []
    public var cursors: [String: Int64] = [:]

    public init(seqFloor: Int64 = 0, events: [RelayOutboxEvent] = [], cursors: [String: Int64] = [:]) {
        self.seqFloor = seqFloor
        self.events = events
        self.cursors = cursors
    }
}

/// One reliable event as sent, envelope included.
public struct RelayOutboxEvent: Sendable, Equatable {
    public var seq: Int64
    public var atMs: Int64
    public var text: String

    public init(seq: Int64, atMs: Int64, text: String) {
        self.seq = seq
        self.atMs = atMs
        self.text = text
    }
}
