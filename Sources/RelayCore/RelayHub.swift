import Foundation
import GatewayEngine

/// Limits and defaults of a relay hub.
public struct RelayHubConfiguration: Sendable {
    /// Live events kept for `hello` resume: at least this old (ms) ...
    public var liveRetentionMs: Int64 = 15 * 60 * 1000
    /// ... and at most this many.
    public var liveRetentionCount = 200_000
    /// Reliable events kept for consumers that have not acknowledged them; the oldest go first beyond this.
    public var outboxLimit = 10_000
    /// Largest command accepted, in UTF-8 bytes; larger ones get a `payload_too_large` result.
    public var maxCommandBytes = 64 * 1024
    /// Live frames one consumer may have queued before its oldest is dropped.
    public var consumerLiveLimit = 256
    /// Frames of any kind one consumer may have queued before it is disconnected.
    public var consumerLimit = 4096
    /// How long a command `id` is remembered for idempotency, and how many are.
    public var idempotencyMs: Int64 = 10 * 60 * 1000
    public var idempotencyLimit = 1024
    /// A `start_session` without `include_raw_samples` gets `biosignal_frame` events (phones never send the key).
    public var rawSamplesUnlessAsked = true

    public init() {}
}

/// Delivery class of a relayed message.
public enum RelayDelivery: String, Sendable {
    /// Sent while connected; dropped for a slow consumer; kept in the resume buffer.
    case live
    /// Kept until the consumer's token acknowledges it; redelivered in order on every connection until then.
    case reliable
    /// Latest status: sent on connect and on change.
    case state

    public init(for event: SessionEvent) {
        switch event {
        case .started, .summary, .error, .dfaThreshold: self = .reliable
        case .frame, .biosignalFrame, .sensorStatus, .breathingCue: self = .live
        }
    }
}

extension RelayOutboxWrite {
    /// The event number a `.reserve` or `.append` is for.
    fileprivate var seq: Int64 {
        switch self {
        case .reserve(let seq): seq
        case .append(let event): event.seq
        case .update, .trim: 0
        }
    }
}

/// One open consumer connection.
public final class RelayConnection: Sendable {
    public let id: UInt64
    public let principal: RelayPrincipal
    public let queue: ConsumerQueue
    /// Every event numbered above this is delivered live on this connection; `hello` replays up to it.
    public let startSeq: Int64
    fileprivate let resumed = Locked(false)
    /// Set when the gateway ends the connection for a reason the consumer must act on (a revoked token).
    package let closeReason = Locked<RelayCloseReason?>(nil)

    init(id: UInt64, principal: RelayPrincipal, queue: ConsumerQueue, startSeq: Int64) {
        self.id = id
        self.principal = principal
        self.queue = queue
        self.startSeq = startSeq
    }
}

/// The relay's logic, free of I/O: numbers events, keeps the resume buffer and the reliable outbox, fans out to
/// consumer queues, and answers commands. `RelayServer` carries its frames over WebSocket.
public final class RelayHub: Sendable {
    public let configuration: RelayHubConfiguration
    /// Names this hub's `relay_seq` space; a gateway restart starts a new one.
    public let epoch: String
    public let controller: (any RelayController)?
    /// Wall clock for `server_time_ms` and stored timestamps; its monotonic clock for ages (the live ring's retention,
    /// the command memo's lifetime), so that a wall-clock step neither empties nor pins them.
    private let clock: any SessionClock

    private struct Stored {
        var seq: Int64
        /// When it was published, on the monotonic clock.
        var atMonotonicMs: Int64
        var value: [String: JSONValue]
        var text: String
    }

    /// An event numbered and not yet visible: its write to the store (or one before it) is not done.
    private struct Held {
        var stored: Stored
        var event: SessionEvent
        var delivery: RelayDelivery
        var value: JSONValue
        var written: Bool
    }

    private struct State {
        /// The last number visible to consumers (`welcome`, replays, acknowledgements).
        var lastSeq: Int64 = 0
        /// The last number handed out; above `lastSeq` while events wait in `held`.
        var assignedSeq: Int64 = 0
        /// Events waiting for the store, in order: nothing overtakes an event that is not on disk yet.
        var held: [Held] = []
        var ring: [Stored] = []
        var ringHead = 0
        /// The highest seq that left the resume buffer (resume from before it is incomplete).
        var ringTrimmedThrough: Int64 = 0
        /// The last number of the gateway's earlier runs: this run's events are numbered above it.
        var runFloor: Int64 = 0
        var outbox: [Stored] = []
        var acked: [String: Int64] = [:]
        var connections: [UInt64: RelayConnection] = [:]
        var nextConnection: UInt64 = 0
        var session: [String: JSONValue]?
        var sensors: [String: JSONValue] = [:]
        var endedSessions: [String] = []
        /// Consumers of the gateway's own (the uplink), not of the token store.
        var registered: Set<String> = []
        /// Sessions whose `session_started` this hub has published (the last few).
        var startedSessions: [String] = []
        /// `start_session` commands waiting for their `session_started`, and `stop_session` commands for their
        /// session's end, by `Milestone.key`.
        var startWaiters: [String: [UInt64: CheckedContinuation<Void, Never>]] = [:]
        var nextWaiter: UInt64 = 0
    }

    private let state = Locked(State())
    private let commands: CommandMemo
    /// Keeps reliable events and cursors across restarts; nil keeps them in memory only.
    public let store: (any RelayOutbox)?
    private let storeFailure: (@Sendable (String) -> Void)?
    private let storeFailed = Locked(false)

    /// - Parameters:
    ///   - store: where reliable events and acknowledgement cursors persist; the hub starts from what it holds.
    ///   - onStoreFailure: told once when a write to `store` fails (the hub goes on from memory).
    public init(
        controller: (any RelayController)?,
        configuration: RelayHubConfiguration = RelayHubConfiguration(),
        epoch: String = UUID().uuidString.lowercased(),
        clock: any SessionClock = SystemSessionClock(),
        store: (any RelayOutbox)? = nil,
        onStoreFailure: (@Sendable (String) -> Void)? = nil
    ) {
        self.controller = controller
        self.configuration = configuration
        self.epoch = epoch
        self.clock = clock
        self.commands = CommandMemo(ttlMs: configuration.idempotencyMs, limit: configuration.idempotencyLimit)
        self.store = store
        self.storeFailure = onStoreFailure
        if let snapshot = store?.snapshot {
            state.withLock { s in
                s.lastSeq = snapshot.seqFloor
                s.assignedSeq = snapshot.seqFloor
                s.ringTrimmedThrough = snapshot.seqFloor
                s.runFloor = snapshot.seqFloor
                s.acked = snapshot.cursors
                for e in snapshot.events {
                    guard let value = (try? JSONValue(parsing: e.text))?.objectValue else { continue }
                    s.outbox.append(Stored(seq: e.seq, atMonotonicMs: clock.monotonicMs(), value: value, text: e.text))
                }
            }
        }
    }

    /// Queues a write to the store, if any, after the writes before it; never waits (it may run under the lock).
    private func persist(_ write: RelayOutboxWrite) {
        store?.enqueue(write) { [weak self] in self?.report($0) }
    }

    /// Reports the first failed write and carries on from memory.
    private func report(_ result: Result<Void, any Error>) {
        guard case .failure(let error) = result, let store else { return }
        let first = storeFailed.withLock { f -> Bool in
            defer { f = true }
            return !f
        }
        if first { storeFailure?("cannot write \(store.path): \(error); reliable events are kept in memory only") }
    }

    /// Returns once every write to the store given so far is done, and so every event published before the call is
    /// visible (at shutdown, before the process exits; in tests).
    public func settled() async { await store?.settled() }

    /// Relays every event of `engine` until the token is cancelled.
    public func attach(to engine: SessionEngine) -> ObservationToken {
        engine.observe { [weak self] event in self?.publish(event) }
    }

    public var connectionCount: Int { state.withLock { $0.connections.count } }
    /// Events numbered and waiting for the store before they become visible.
    var heldCount: Int { state.withLock { $0.held.count } }
    /// `start_session` results waiting for their `session_started`.
    var startWaiterCount: Int { state.withLock { $0.startWaiters.values.reduce(0) { $0 + $1.count } } }
    /// Events in the resume buffer whose text is still held (tests: trimmed ones must hold none).
    var resumeBufferHeld: (slots: Int, withText: Int) {
        state.withLock { s in (s.ring.count, s.ring.filter { !$0.text.isEmpty }.count) }
    }
    /// Events the resume buffer can still replay.
    var resumeBufferLive: Int { state.withLock { $0.ring.count - $0.ringHead } }
    public var lastSeq: Int64 { state.withLock { $0.lastSeq } }
    /// True when no connected consumer has anything left to send.
    /// Reliable events kept until every consumer has acknowledged them.
    public var outboxDepth: Int { state.withLock { $0.outbox.count } }

    public var allQueuesEmpty: Bool { state.withLock { $0.connections.values.allSatisfy { $0.queue.isEmpty } } }

    // MARK: Events

    /// Numbers the event, stores it for resume or redelivery, and queues it for every consumer. Never blocks: an
    /// event that must be on disk first (a reliable one, or the first of a new block of numbers) becomes visible once
    /// the store has it, and the events after it wait behind it, in order.
    public func publish(_ event: SessionEvent) { publish(EncodedEvent(event)) }

    /// As `publish(_:)`, with the event's JSON value already made (shared with the other sinks).
    public func publish(_ encoded: EncodedEvent) {
        let event = encoded.event
        let delivery = RelayDelivery(for: event)
        let now = clock.nowMs()
        let monotonicNow = clock.monotonicMs()
        let write = state.withLock { s -> RelayOutboxWrite? in
            s.assignedSeq += 1
            guard case .object(var o) = encoded.value else { return nil }
            o["relay_seq"] = .int(s.assignedSeq)
            o["delivery"] = .string(delivery.rawValue)
            let stored = Stored(seq: s.assignedSeq, atMonotonicMs: monotonicNow, value: o, text: JSONValue.object(o).jsonString)
            var write: RelayOutboxWrite?
            if let store {
                if delivery == .reliable {
                    write = .append(.init(seq: stored.seq, atMs: now, text: stored.text))
                } else if !store.covers(stored.seq) {
                    write = .reserve(through: stored.seq)
                }
            }
            let held = Held(stored: stored, event: event, delivery: delivery, value: encoded.value, written: write == nil)
            if write == nil && s.held.isEmpty {
                release(held, &s)
            } else {
                s.held.append(held)
            }
            return write
        }
        guard let write, let store else { return }
        let seq = write.seq
        // Outside the lock: done here when the file is free and nothing is queued, else on the store's queue.
        if let outcome = store.apply(write, done: { [weak self] in self?.written(seq, $0) }) { written(seq, outcome) }
    }

    /// The store has (or could not take) the write of the event numbered `seq`: it and every event behind it up to
    /// the next one still waiting become visible. A failed write is reported once and the event relayed from memory.
    private func written(_ seq: Int64, _ result: Result<Void, any Error>) {
        report(result)
        state.withLock { s in
            if let i = s.held.firstIndex(where: { $0.stored.seq == seq }) { s.held[i].written = true }
            var n = 0
            while n < s.held.count && s.held[n].written { n += 1 }
            let ready = s.held.prefix(n)
            s.held.removeFirst(n)
            for h in ready { release(h, &s) }
        }
    }

    /// Makes an event visible: kept for resume or redelivery, the gateway's state updated, queued for every consumer.
    private func release(_ h: Held, _ s: inout State) {
        let stored = h.stored
        s.lastSeq = stored.seq
        switch h.delivery {
        case .reliable:
            s.outbox.append(stored)
            if s.outbox.count > configuration.outboxLimit {
                s.outbox.removeFirst(s.outbox.count - configuration.outboxLimit)
                persist(.trim(keeping: configuration.outboxLimit))
            }
        case .live, .state:
            s.ring.append(stored)
            trimRing(&s, monotonicNow: stored.atMonotonicMs)
        }
        var stateChanged = true
        switch h.event {
        case .started(let id, _):
            s.session = ["session_id": .string(id), "active": .bool(true)]
            s.sensors = [:]
            s.startedSessions.append(id)
            if s.startedSessions.count > 256 { s.startedSessions.removeFirst() }
        case .summary(let id, _, _, _), .error(let id, _, _):
            s.session = nil
            s.endedSessions.append(id)
            if s.endedSessions.count > 256 { s.endedSessions.removeFirst() }
        case .sensorStatus(_, _, let status):
            var v = h.value.objectValue ?? [:]
            v["type"] = nil
            v["session_id"] = nil
            s.sensors[status.deviceId.map { "\(status.source)/\($0)" } ?? status.source] = .object(v)
        default:
            stateChanged = false
        }
        let snapshot = stateChanged ? stateText(s) : nil
        for c in s.connections.values {
            c.queue.push(stored.text, droppable: h.delivery == .live)
            if let snapshot { c.queue.push(snapshot, droppable: false) }
        }
        let reached: Milestone? = switch h.event {
        case .started(let id, _): .started(id)
        case .summary(let id, _, _, _), .error(let id, _, _): .ended(id)
        default: nil
        }
        if let reached, let waiters = s.startWaiters.removeValue(forKey: reached.key) {
            for w in waiters.values { w.resume() }
        }
    }

    /// What a command's result waits for: a session's `session_started`, or its end (`session_summary` or
    /// `session_error`).
    private enum Milestone {
        case started(String)
        case ended(String)

        var key: String {
            switch self {
            case .started(let id): "started " + id
            case .ended(let id): "ended " + id
            }
        }

        var sessionId: String {
            switch self {
            case .started(let id), .ended(let id): id
            }
        }

        /// A session's end counts once it is numbered, even while it waits for relay.sqlite (another process holding
        /// the file): a stop is answered at once then, as every command is (the summary follows once written).
        func reached(_ s: State) -> Bool {
            switch self {
            case .started(let id): s.startedSessions.contains(id)
            case .ended(let id): s.endedSessions.contains(id) || s.held.contains { isEvent($0.event) }
            }
        }

        func isEvent(_ event: SessionEvent) -> Bool {
            switch (self, event) {
            case (.started(let id), .started(let e, _)): id == e
            case (.ended(let id), .summary(let e, _, _, _)), (.ended(let id), .error(let e, _, _)): id == e
            default: false
            }
        }
    }

    /// How long a `start_session` result waits for its `session_started` to pass through the hub.
    static let startedWaitMs: Int64 = 5_000

    /// Returns once this hub has published `milestone` (a session's `session_started`, or its end), or after
    /// `startedWaitMs`. Events can reach the hub through a queue of their own (`RelayHubSink`); waiting here keeps the
    /// promise that a consumer sees a session's `session_started` before the `command_result` that started it, and
    /// its `session_summary` before the result of the `stop_session` that ended it (the result came first at times:
    /// a phone that closed on `ok` missed the summary).
    private func awaitPublished(_ milestone: Milestone) async {
        let key = state.withLock { s -> UInt64? in
            if milestone.reached(s) { return nil }
            s.nextWaiter += 1
            return s.nextWaiter
        }
        guard let key else { return }
        // Set when the time is up before the waiter was registered.
        let expired = Locked(false)
        let timeout = clock.schedule(afterMs: Self.startedWaitMs) { [weak self] in
            let waiter = self?.state.withLock { s -> CheckedContinuation<Void, Never>? in
                // Numbered and waiting for the store (another process holds relay.sqlite): it is on its way, and
                // its release resumes the waiter.
                if s.held.contains(where: { milestone.isEvent($0.event) }) { return nil }
                guard let w = s.startWaiters[milestone.key]?.removeValue(forKey: key) else {
                    expired.withLock { $0 = true }
                    return nil
                }
                if s.startWaiters[milestone.key]?.isEmpty == true { s.startWaiters[milestone.key] = nil }
                return w
            }
            waiter?.resume()
        }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if milestone.reached(s) || expired.withLock({ $0 }) { return true }
                s.startWaiters[milestone.key, default: [:]][key] = c
                return false
            }
            if now { c.resume() }
        }
        timeout.cancel()
    }

    private func trimRing(_ s: inout State, monotonicNow: Int64) {
        while s.ringHead < s.ring.count,
            s.ring.count - s.ringHead > configuration.liveRetentionCount
                || monotonicNow - s.ring[s.ringHead].atMonotonicMs > configuration.liveRetentionMs
        {
            s.ringTrimmedThrough = s.ring[s.ringHead].seq
            // Release the event now: the slot itself goes at the next compaction, which may be an hour away at a
            // low event rate (a soak saw the buffer hold 1024 trimmed frames, megabytes, until then).
            s.ring[s.ringHead].value = [:]
            s.ring[s.ringHead].text = ""
            s.ringHead += 1
        }
        if s.ringHead > 1024 && s.ringHead * 2 > s.ring.count {
            s.ring.removeFirst(s.ringHead)
            s.ringHead = 0
        }
    }

    private func stateText(_ s: State) -> String {
        var o: [String: JSONValue] = [
            "type": .string("gateway_status"),
            "delivery": .string(RelayDelivery.state.rawValue),
            "sensors": .array(s.sensors.keys.sorted().compactMap { s.sensors[$0] }),
            "relay_seq_last": .int(s.lastSeq),
        ]
        if let session = s.session { o["session"] = .object(session) }
        return JSONValue.object(o).jsonString
    }

    // MARK: Connections

    /// Registers a consumer. Its queue receives `welcome`, the current `gateway_status`, every reliable event its
    /// token has not acknowledged (in order), then live events as they come.
    public func connect(_ principal: RelayPrincipal, queue: ConsumerQueue? = nil) -> RelayConnection {
        let queue = queue ?? ConsumerQueue(liveLimit: configuration.consumerLiveLimit, limit: configuration.consumerLimit)
        return state.withLock { s in
            s.nextConnection += 1
            let known = s.acked[principal.consumerId]
            let cursor = known ?? s.lastSeq
            s.acked[principal.consumerId] = cursor
            if known == nil { persist(.update(cursors: [principal.consumerId: cursor], dropThrough: nil)) }
            let c = RelayConnection(id: s.nextConnection, principal: principal, queue: queue, startSeq: s.lastSeq)
            let welcome: [String: JSONValue] = [
                "type": .string("welcome"),
                "protocol": .string("hrrelay.v1"),
                "epoch": .string(epoch),
                "relay_seq_last": .int(s.lastSeq),
                "consumer_id": .string(principal.consumerId),
                "scope": .string(principal.scope.rawValue),
                "live_retention_sec": .int(configuration.liveRetentionMs / 1000),
                "max_command_bytes": .int(Int64(configuration.maxCommandBytes)),
            ]
            queue.push(JSONValue.object(welcome).jsonString, droppable: false)
            queue.push(stateText(s), droppable: false)
            for e in s.outbox where e.seq > cursor { queue.push(e.text, droppable: false) }
            s.connections[c.id] = c
            return c
        }
    }

    /// Makes `consumerId` a known consumer from now on: every reliable event published after this call is kept for
    /// it until acknowledged, even if it has not connected yet (the uplink, which dials out while the session starts).
    public func register(consumerId: String) {
        state.withLock { s in
            s.registered.insert(consumerId)
            if s.acked[consumerId] == nil {
                s.acked[consumerId] = s.lastSeq
                persist(.update(cursors: [consumerId: s.lastSeq], dropThrough: nil))
            }
        }
    }

    /// True when `consumerId` has acknowledged every reliable event kept for it.
    public func hasAcknowledgedAll(_ consumerId: String) -> Bool {
        state.withLock { Self.acknowledgedAll(consumerId, $0) }
    }

    /// True when `consumerId` has acknowledged every reliable event kept, or is connected with nothing left to send.
    public func hasDelivered(to consumerId: String) -> Bool {
        state.withLock { s in
            Self.acknowledgedAll(consumerId, s)
                || s.connections.values.contains { $0.principal.consumerId == consumerId && $0.queue.isEmpty }
        }
    }

    private static func acknowledgedAll(_ consumerId: String, _ s: State) -> Bool {
        let cursor = s.acked[consumerId] ?? s.lastSeq
        return !s.outbox.contains { $0.seq > cursor }
    }

    /// Ends the connections of every token not in `validConsumerIds` (revoked while connected) and forgets what
    /// was kept for them. The anonymous consumer of no-auth mode and registered consumers are left alone.
    @discardableResult
    public func closeRevoked(validConsumerIds: Set<String>) -> Int {
        let revoked = state.withLock { s -> [RelayConnection] in
            let registered = s.registered
            let isRevoked = { (id: String) in
                id != RelayPrincipal.anonymous.consumerId && !registered.contains(id) && !validConsumerIds.contains(id)
            }
            let gone = s.acked.keys.filter(isRevoked)
            for id in gone { s.acked[id] = nil }
            let floor = s.acked.values.min() ?? s.lastSeq
            s.outbox.removeAll { $0.seq <= floor }
            if !gone.isEmpty {
                persist(.update(cursors: Dictionary(uniqueKeysWithValues: gone.map { ($0, nil) }), dropThrough: floor))
            }
            return s.connections.values.filter { isRevoked($0.principal.consumerId) }
        }
        for c in revoked {
            c.closeReason.withLock { $0 = .revoked }
            c.queue.close()
        }
        return revoked.count
    }

    /// True while `consumerId` has an open connection.
    public func isConnected(_ consumerId: String) -> Bool {
        state.withLock { $0.connections.values.contains { $0.principal.consumerId == consumerId } }
    }

    /// Closes the connections of one consumer (their pumps end).
    public func close(consumerId: String) {
        for c in state.withLock({ $0.connections.values.filter { $0.principal.consumerId == consumerId } }) {
            c.queue.close()
        }
    }

    /// Closes every consumer's queue (their connections end); used at shutdown.
    public func closeAll() {
        for c in state.withLock({ Array($0.connections.values) }) { c.queue.close() }
    }

    public func disconnect(_ connection: RelayConnection) {
        state.withLock { _ = $0.connections.removeValue(forKey: connection.id) }
        connection.queue.close()
    }

    /// The heartbeat frame (live, unnumbered).
    public func heartbeatText() -> String {
        let last = state.withLock { $0.lastSeq }
        return JSONValue.object([
            "type": .string("heartbeat"), "delivery": .string("live"),
            "relay_seq_last": .int(last), "server_time_ms": .int(clock.nowMs()),
        ]).jsonString
    }

    // MARK: Commands

    /// The `profile` keys a session reads.
    static let profileKeys: Set<String> = ["window_sec", "emit_interval_sec", "raw_emit_interval_sec"]

    /// The longest string `id` a command may carry.
    static let maxIdBytes = 200

    /// Handles one text frame from a consumer; any reply goes to its queue.
    public func handle(text: String, from connection: RelayConnection) async {
        let reply = await response(to: text, from: connection)
        if let reply { connection.queue.push(reply.jsonString, droppable: false) }
    }

    /// Answers one command that arrived outside a relay connection (MQTT's `cmd` topic): parsed, checked,
    /// remembered by `id` and answered exactly as on the relay, under `principal`. `hello` and `ack` belong to a
    /// relay connection and are refused. Nil when no result is due (a success without `id`).
    public func command(_ text: String, principal: RelayPrincipal) async -> JSONValue? {
        if text.utf8.count <= configuration.maxCommandBytes, let m = try? JSONValue(parsing: text, maxDepth: 16),
            let name = m["command"]?.stringValue, name == "hello" || name == "ack"
        {
            let id: JSONValue? = switch m["id"] { case .string?, .int?: m["id"]; default: nil }
            return RelayCommandError(
                "unsupported", "\(name) belongs to a relay WebSocket connection; here send start_session, "
                    + "stop_session, get_status or ingest_hsi_metrics.").result(id: id, command: name)
        }
        let connection = RelayConnection(
            id: 0, principal: principal, queue: ConsumerQueue(liveLimit: 1, limit: 1), startSeq: 0)
        return await response(to: text, from: connection)
    }

    /// The `command_result` for a frame, or nil when none is due (a success without `id`, an `ack`).
    func response(to text: String, from connection: RelayConnection) async -> JSONValue? {
        if text.utf8.count > configuration.maxCommandBytes {
            return RelayCommandError(
                "payload_too_large",
                "Command of \(text.utf8.count) bytes is over the limit of \(configuration.maxCommandBytes) bytes."
            ).result(id: nil, command: nil)
        }
        let message: JSONValue
        do {
            message = try JSONValue(parsing: text, maxDepth: 16)
        } catch {
            return RelayCommandError("bad_json", "Not a JSON command: \(error.description).").result(id: nil, command: nil)
        }
        guard case .object = message else {
            return RelayCommandError("bad_request", "A command is a JSON object with a \"command\" key.")
                .result(id: nil, command: nil)
        }
        let id = message["id"]
        switch id {
        case nil, .int?: break
        case .string(let text)?:
            // Remembered for 10 minutes with its result: a 60-KB id a thousand times over held 160 MB.
            guard text.utf8.count <= Self.maxIdBytes else {
                return RelayCommandError("bad_request", "\"id\" must be at most \(Self.maxIdBytes) bytes, got "
                    + "\(text.utf8.count).").result(id: nil, command: nil)
            }
        default:
            return RelayCommandError("bad_request", "\"id\" must be a string or an integer.").result(id: nil, command: nil)
        }
        guard let command = message["command"]?.stringValue else {
            let what = message["command"] == nil ? "Missing \"command\"" : "\"command\" must be a string"
            return RelayCommandError("bad_request", "\(what); see docs/relay-protocol.md.").result(id: id, command: nil)
        }
        let outcome: Result<[String: JSONValue], RelayCommandError>
        switch command {
        case "hello":
            outcome = hello(message, connection)
        case "ack":
            outcome = ack(message, connection)
            if id == nil, case .success = outcome { return nil }
        case "get_status", "start_session", "stop_session", "ingest_hsi_metrics":
            if let id {
                let key = connection.principal.consumerId + "\u{0}" + id.jsonString
                outcome = await commands.run(key: key, message: message, monotonicMs: clock.monotonicMs()) {
                    await self.execute(command, message, connection)
                }
            } else {
                outcome = await execute(command, message, connection)
            }
        default:
            outcome = .failure(RelayCommandError(
                "unknown_command",
                "Unknown command \"\(command.prefix(64))\"; known: start_session, stop_session, get_status, "
                    + "ingest_hsi_metrics, hello, ack."))
        }
        switch outcome {
        case .success(let fields):
            guard id != nil || command == "hello" else { return nil }
            var o = fields
            o["type"] = .string("command_result")
            o["command"] = .string(command)
            o["ok"] = .bool(true)
            if let id { o["id"] = id }
            return .object(o)
        case .failure(let e):
            return e.result(id: id, command: command)
        }
    }

    private func execute(_ command: String, _ m: JSONValue, _ c: RelayConnection) async
        -> Result<[String: JSONValue], RelayCommandError>
    {
        guard let controller else {
            return .failure(RelayCommandError("unsupported", "This gateway relays a session but takes no commands."))
        }
        if command != "get_status" && c.principal.scope != .control {
            return .failure(RelayCommandError(
                "forbidden", "Token '\(c.principal.name)' is read-only: it cannot \(command). Create one without --read-only."))
        }
        switch command {
        case "get_status":
            guard let st = controller.status() else { return .success(["active": .bool(false)]) }
            return .success(st.jsonValue.objectValue ?? [:])
        case "start_session":
            var config: SessionConfig
            // A request the engine cannot take as written (a missing or mistyped key, a value out of range) is the
            // consumer's to correct: `bad_request`, as docs/relay-protocol.md says; `invalid_state` is the engine's.
            if let problem = Self.mistypedStart(m) { return .failure(RelayCommandError("bad_request", problem)) }
            do { config = try SessionConfig(json: m) } catch {
                return .failure(RelayCommandError("bad_request", error.message))
            }
            do {
                if m["include_raw_samples"] == nil && configuration.rawSamplesUnlessAsked { config.includeRawSamples = true }
                try await controller.startSession(config)
                await awaitPublished(.started(config.sessionId))
                // A misspelt profile key took its default without a word: said, not refused (the SDK's watch
                // parser sends `edge_mode`, which this gateway has no use for either).
                let ignored = (m["profile"]?.objectValue?.keys.filter { !Self.profileKeys.contains($0) } ?? []).sorted()
                var reply: [String: JSONValue] = ["session_id": .string(config.sessionId)]
                if !ignored.isEmpty { reply["ignored"] = .array(ignored.map { .string("profile." + $0) }) }
                return .success(reply)
            } catch {
                return .failure(RelayCommandError(error.code.rawValue, error.message))
            }
        case "stop_session":
            guard let id = m["session_id"]?.stringValue else {
                return .failure(RelayCommandError("bad_request", "stop_session needs \"session_id\" (a string)."))
            }
            do {
                try await controller.stopSession(sessionId: id)
                await awaitPublished(.ended(id))
                return .success(["session_id": .string(id)])
            } catch {
                if state.withLock({ $0.endedSessions.contains(id) }) {
                    return .success(["session_id": .string(id), "already_ended": .bool(true)])
                }
                if controller.status()?.sessionId != id, await controller.endedEarlier(sessionId: id) {
                    return .success(["session_id": .string(id), "already_ended": .bool(true)])
                }
                return .failure(RelayCommandError(error.code.rawValue, error.message))
            }
        default:  // ingest_hsi_metrics
            guard let metrics = m["metrics"]?.objectValue else {
                return .failure(RelayCommandError("bad_request", "ingest_hsi_metrics needs \"metrics\" (an object)."))
            }
            let sid = m["session_id"]
            if let sid, sid.stringValue == nil {
                return .failure(RelayCommandError("bad_request", "\"session_id\" must be a string."))
            }
            // An HSI document nests its keys; the SDK reads them flat (`hrv.rmssd_ms`): both are taken, and the
            // reply says which keys the metrics use (none: the values frames show are the gateway's own).
            let flat = SessionMetrics.hsiFlattened(metrics)
            if let problem = SessionMetrics.hsiOutOfRange(flat) { return .failure(RelayCommandError("bad_request", problem)) }
            let accepted = controller.ingestHsiMetrics(flat, sessionId: sid?.stringValue)
            return .success([
                "accepted": .bool(accepted),
                "used": .array(accepted ? SessionMetrics.hsiUsedKeys(flat).map { .string($0) } : []),
            ])
        }
    }

    /// What a `start_session` gives with the wrong type, said as such: the engine, as the SDK, would read a mistyped
    /// `profile` key as its default (a session with frames every 5 s for `"emit_interval_sec": 2.5`) and a mistyped
    /// `duration_sec` as missing.
    static func mistypedStart(_ m: JSONValue) -> String? {
        func whole(_ v: JSONValue?, _ name: String) -> String? {
            guard let v, v.intValue == nil else { return nil }
            if let d = v.doubleValue, d.isFinite, d == d.rounded() {
                return "\(name) is out of range, got \(v.jsonString.prefix(40))"
            }
            return "\(name) must be a whole number of seconds, got \(v.jsonString.prefix(40))"
        }
        if let id = m["session_id"], id.stringValue == nil {
            return "session_id must be a string, got \(id.jsonString.prefix(40))"
        }
        if let mode = m["mode"], mode.stringValue.flatMap(SessionMode.init(rawValue:)) == nil {
            return "mode must be one of \(SessionMode.allCases.map(\.rawValue).joined(separator: ", ")), got "
                + "\(mode.jsonString.prefix(40))"
        }
        if let problem = whole(m["duration_sec"], "duration_sec") { return problem }
        guard let profile = m["profile"] else { return nil }
        guard let keys = profile.objectValue else {
            return "profile must be an object such as {\"window_sec\":60,\"emit_interval_sec\":5}, got "
                + "\(profile.jsonString.prefix(40))"
        }
        for key in ["window_sec", "emit_interval_sec", "raw_emit_interval_sec"] {
            if let problem = whole(keys[key], "profile." + key) { return problem }
        }
        return nil
    }

    private func hello(_ m: JSONValue, _ c: RelayConnection) -> Result<[String: JSONValue], RelayCommandError> {
        if let recent = m["recent_frames_ms"] {
            guard m["resume"] == nil else {
                return .failure(RelayCommandError(
                    "bad_request", "\"resume\" and \"recent_frames_ms\" exclude each other: resume replays everything missed."))
            }
            guard let ms = recent.intValue, ms > 0 else {
                return .failure(RelayCommandError("bad_request", "\"recent_frames_ms\" must be a positive integer (ms)."))
            }
            return recentFrames(withinMs: min(Int64(ms), configuration.liveRetentionMs), c)
        }
        guard let resume = m["resume"] else { return .success(["epoch": .string(epoch), "replayed": .int(0)]) }
        guard let e = resume["epoch"]?.stringValue, let last = resume["last_seq"]?.intValue, last >= 0 else {
            return .failure(RelayCommandError(
                "bad_request", "\"resume\" needs \"epoch\" (string) and \"last_seq\" (a non-negative integer)."))
        }
        guard e == epoch else {
            return .failure(RelayCommandError(
                "resync_required", "Epoch \(e.prefix(64)) is not this gateway's (\(epoch)): it restarted, or the "
                    + "epoch is another gateway's. \(Self.afresh)"))
        }
        // A consumer that claims events this gateway has not sent (its own bookkeeping, or another gateway's with
        // the same epoch) would drop the next ones as already seen: it must start afresh.
        guard last <= c.startSeq else {
            return .failure(RelayCommandError(
                "resync_required", "last_seq \(last) is past this gateway's latest relay_seq (\(c.startSeq)). "
                    + Self.afresh))
        }
        if let refused = claimReplay(c) { return .failure(refused) }
        return state.withLock { s in
            let count = Self.replay(s, to: c) { $0.seq > last }
            return .success([
                "epoch": .string(epoch), "replayed": .int(count),
                // Complete unless this run's buffer dropped events after `last_seq` (the numbers below this run's
                // first belong to an earlier run, whose epoch this `hello` did not name).
                "complete": .bool(last >= s.ringTrimmedThrough || s.ringTrimmedThrough == s.runFloor),
                "replayed_through": .int(c.startSeq),
            ])
        }
    }

    /// What a consumer told `resync_required` does.
    static let afresh = "Start afresh: keep the epoch of this connection's welcome, take relay_seq from the events "
        + "that follow, and count the live events since your last_seq as lost (reliable ones come again until "
        + "acknowledged); a list of the sessions recorded is at GET /v1/sessions."

    /// `hello{recent_frames_ms}`: a consumer without a past (a page just loaded) gets the `session_frame` and
    /// `biosignal_frame` events of the last `ms` published before this connection started, in order, marked
    /// `replayed`, to draw its charts from. Once per connection, like `resume`.
    private func recentFrames(withinMs ms: Int64, _ c: RelayConnection) -> Result<[String: JSONValue], RelayCommandError> {
        if let refused = claimReplay(c) { return .failure(refused) }
        let since = clock.monotonicMs() - ms
        return state.withLock { s in
            let count = Self.replay(s, to: c) {
                $0.atMonotonicMs > since && Self.recentFrameTypes.contains($0.value["type"]?.stringValue ?? "")
            }
            return .success(["epoch": .string(epoch), "replayed": .int(count), "replayed_through": .int(c.startSeq)])
        }
    }

    /// What `hello{recent_frames_ms}` replays: the frames a chart is drawn from (metrics, and the samples with their RR
    /// intervals when the session sends them).
    static let recentFrameTypes: Set<String> = ["session_frame", "biosignal_frame"]

    /// Marks the connection as having had its one replay (`resume` or `recent_frames_ms`); the error if it had.
    private func claimReplay(_ c: RelayConnection) -> RelayCommandError? {
        let already = c.resumed.withLock { r -> Bool in
            defer { r = true }
            return r
        }
        return already ? RelayCommandError("bad_request", "This connection has already resumed.") : nil
    }

    /// Queues for `c`, in order and marked `replayed`, the buffered events published before it connected that
    /// `include` keeps; returns how many.
    private static func replay(_ s: State, to c: RelayConnection, where include: (Stored) -> Bool) -> Int64 {
        var count: Int64 = 0
        for e in s.ring[s.ringHead...] where e.seq <= c.startSeq && include(e) {
            var v = e.value
            v["replayed"] = .bool(true)
            c.queue.push(JSONValue.object(v).jsonString, droppable: false)
            count += 1
        }
        return count
    }

    private func ack(_ m: JSONValue, _ c: RelayConnection) -> Result<[String: JSONValue], RelayCommandError> {
        guard let seq = m["relay_seq"]?.intValue else {
            return .failure(RelayCommandError("bad_request", "ack needs \"relay_seq\" (an integer)."))
        }
        let acked = state.withLock { s -> Int64 in
            let before = s.acked[c.principal.consumerId]
            let value = max(before ?? 0, min(seq, s.lastSeq))
            s.acked[c.principal.consumerId] = value
            let floor = s.acked.values.min() ?? value
            s.outbox.removeAll { $0.seq <= floor }
            if value != before { persist(.update(cursors: [c.principal.consumerId: value], dropThrough: floor)) }
            return value
        }
        return .success(["acked_through": .int(acked)])
    }
}

/// Why the gateway closed a connection, when the consumer should not simply reconnect.
package enum RelayCloseReason: Sendable {
    case revoked
}

/// A command that failed: `error_code` and a `message` saying what to do.
public struct RelayCommandError: Error, Sendable, Equatable {
    public var code: String
    public var message: String

    public init(_ code: String, _ message: String) {
        self.code = code
        self.message = message
    }

    package func result(id: JSONValue?, command: String?) -> JSONValue {
        var o: [String: JSONValue] = [
            "type": .string("command_result"), "ok": .bool(false),
            "error_code": .string(code), "message": .string(message),
        ]
        if let id { o["id"] = id }
        if let command { o["command"] = .string(String(command.prefix(64))) }
        return .object(o)
    }
}

/// Remembers command results by key so that a retried command is not run twice.
actor CommandMemo {
    private let ttlMs: Int64
    private let limit: Int
    private var done: [String: (atMs: Int64, message: JSONValue, result: Result<[String: JSONValue], RelayCommandError>)] = [:]
    private var order: [String] = []
    private var running: [String: (message: JSONValue, task: Task<Result<[String: JSONValue], RelayCommandError>, Never>)] = [:]

    init(ttlMs: Int64, limit: Int) {
        self.ttlMs = ttlMs
        self.limit = limit
    }

    /// Runs `body` once per key; a repeat of the same message gets the first result, a different message with the
    /// same key an `id_reused` error.
    func run(
        key: String, message: JSONValue, monotonicMs nowMs: Int64,
        _ body: @escaping @Sendable () async -> Result<[String: JSONValue], RelayCommandError>
    ) async -> Result<[String: JSONValue], RelayCommandError> {
        let reused = RelayCommandError(
            "id_reused", "This id was used in the last 10 minutes for a different command (or the same one with other "
                + "arguments); give each command a new id, and repeat a retried command exactly.")
        if let d = done[key], nowMs - d.atMs <= ttlMs { return d.message == message ? d.result : .failure(reused) }
        if let r = running[key] { return r.message == message ? await r.task.value : .failure(reused) }
        let task = Task { await body() }
        running[key] = (message, task)
        let result = await task.value
        running[key] = nil
        done[key] = (nowMs, message, result)
        order.append(key)
        while order.count > limit { done[order.removeFirst()] = nil }
        return result
    }
}
