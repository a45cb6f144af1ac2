/// Where a `RelayHub` keeps its reliable events and acknowledgement cursors across restarts. The hub does no I/O
/// itself: `RelayOutboxStore` (target `RelayStore`, `relay.sqlite`) is the one on disk.
///
/// Every method is called with the hub's lock held, in the order the hub changes its state.
public protocol RelayOutbox: Sendable {
    /// Where the outbox lives, for messages.
    var path: String { get }
    /// What the previous run left; the hub starts from it.
    var snapshot: RelayOutboxSnapshot { get }
    /// Makes sure `seq` is never handed out again after a restart.
    func reserve(through seq: Int64) throws
    /// Commits a reliable event (before any consumer can see it).
    func append(_ event: RelayOutboxEvent) throws
    /// Stores the cursors given (nil removes one) and drops the events at or below `floor`.
    func update(cursors: [String: Int64?], dropThrough floor: Int64?) throws
    /// Drops the oldest events beyond `limit`.
    func trim(keeping limit: Int) throws
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
