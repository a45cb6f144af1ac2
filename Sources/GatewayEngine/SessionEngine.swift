import HRVAnalysis

/// Runs one session at a time over a set of providers, with the Synheart SDK's rules:
///
/// - `startSession` emits `session_started` first, then starts the providers; if one fails, the session ends with a
///   `session_error` (`sensor_unavailable`, or the code the provider threw) and the engine is idle again.
/// - A `session_frame` every `emit_interval_sec` from the start (none and no `seq` step on an empty window), a
///   `biosignal_frame` every raw interval when raw samples are on, and the `session_summary` exactly once, on stop
///   or when the duration expires. Before that summary the providers are stopped (`stopSession`, the duration), so
///   that it counts every sample they had received; the SDK's synchronous `stop` emits it at once instead.
/// - Timers run on the injected `SessionClock`'s monotonic time; the wall clock only stamps events. Events arrive in
///   order on the returned stream, which finishes after the summary or the error.
/// - The engine never calls out while holding its lock: events are queued in order under the lock and delivered
///   (to the stream and to observers) after it is released, by one thread at a time.
public final class SessionEngine: Sendable {
    public let providers: [any BiosignalProvider]
    public let behaviorProvider: (any BehaviorProvider)?
    public let clock: any SessionClock
    public let correction: ArtifactCorrection
    /// How long the end of a session (`stopSession`, the duration) waits for the providers to stop before it emits the
    /// summary anyway.
    public let providerStopLimitMs: Int64

    private struct Active {
        var core: SessionCore
        var generation: UInt64
        var continuation: AsyncStream<SessionEvent>.Continuation
        var timer: (any ScheduledAction)?
        var running: [any BiosignalProvider] = []
        /// Set while the end of the session waits for the providers: the instant it ended (its summary's).
        var endingAt: SessionCore.Instant?
    }

    private struct State {
        var active: Active?
        var generation: UInt64 = 0
        /// Ingested HSI metrics waiting for the next session (ingest before start is honoured, as in SDK 0.2.0).
        var pendingHsi: [String: JSONValue] = [:]
        var disposed = false
        /// Callers of `idle()` waiting for the running session to end.
        var idleWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Locked(State())
    private let observers = Locked<Observers>(Observers())

    private struct Observers: Sendable {
        var next: UInt64 = 0
        var all: [UInt64: @Sendable (SessionEvent) -> Void] = [:]
    }

    /// What the lock holder hands over for delivery after the lock is released.
    private enum Delivery: Sendable {
        case event(SessionEvent, AsyncStream<SessionEvent>.Continuation)
        case finish(AsyncStream<SessionEvent>.Continuation)
        /// Callers of `idle()`, resumed once everything queued before them was delivered.
        case wake([CheckedContinuation<Void, Never>])
    }

    private struct Outbox: Sendable {
        var queue: [Delivery] = []
        var delivering = false
    }

    /// Taken inside `state`'s lock to queue, and alone to deliver; never the other way round.
    private let outbox = Locked(Outbox())

    public init(
        providers: [any BiosignalProvider],
        behaviorProvider: (any BehaviorProvider)? = nil,
        clock: any SessionClock = SystemSessionClock(),
        correction: ArtifactCorrection = .kubios,
        providerStopLimitMs: Int64 = 3_000
    ) {
        self.providers = providers
        self.behaviorProvider = behaviorProvider
        self.clock = clock
        self.correction = correction
        self.providerStopLimitMs = providerStopLimitMs
    }

    // MARK: Control

    /// Starts a session. Throws `invalidState` when one is running ("Session X is already running"), when the
    /// engine was disposed, or when the configuration cannot run. A session that is ending (stopped, or at its
    /// duration, its providers stopping) is not refused: the call waits for its summary (at most
    /// `providerStopLimitMs`), then starts. Returns once the providers are started (or one failed, in which case the
    /// stream holds `session_started` then `session_error`) and what the session emitted so far has reached every
    /// observer.
    public func startSession(_ config: SessionConfig) async throws(SessionError) -> AsyncStream<SessionEvent> {
        try config.validate()
        let (stream, continuation) = AsyncStream<SessionEvent>.makeStream(bufferingPolicy: .unbounded)
        let options = HRVOptions(
            correction: correction,
            respirationBandHz: config.mode == .breathing ? HRVOptions.pacedBreathingBandHz : 0.15...0.5
        )
        let generation: UInt64
        var startedAt: (monotonicMs: Int64, wallMs: Int64)?
        clock.sessionStarting()
        while true {
            let claimed = try state.withLock { s throws(SessionError) -> UInt64? in
                if s.disposed { throw .invalidState("SessionEngine has been disposed") }
                if let a = s.active {
                    if a.endingAt != nil { return nil }  // the last session's summary comes first
                    throw .invalidState("Session \(a.core.config.sessionId) is already running")
                }
                s.generation += 1
                let core = SessionCore(
                    config: config, startedAt: SessionCore.Instant(clock), hsi: s.pendingHsi, hrvOptions: options)
                s.pendingHsi = [:]
                s.active = Active(core: core, generation: s.generation, continuation: continuation)
                startedAt = (core.startedMonoMs, core.startedAtMs)
                emit(core.started, to: continuation)
                scheduleNext(&s)
                return s.generation
            }
            if let claimed {
                generation = claimed
                break
            }
            await idle()
        }
        deliver()

        var started: [any BiosignalProvider] = []
        for provider in providers {
            let sink = ProviderSink(
                session: config,
                sessionStartedAt: startedAt,
                onSample: { [weak self] sample in self?.ingest(sample, generation: generation) },
                onStatus: { [weak self] status in self?.report(status, generation: generation) }
            )
            do {
                try await provider.startStreaming(into: sink)
                started.append(provider)
                let stillOurs = state.withLock { s -> Bool in
                    guard s.active?.generation == generation, s.active?.endingAt == nil else { return false }
                    s.active?.running.append(provider)
                    return true
                }
                if !stillOurs { break }
            } catch {
                let sessionError = (error as? SessionError) ?? .sensorUnavailable("\(provider.name): \(error)")
                fail(generation: generation, error: sessionError)
                break
            }
        }
        // A stop or failure while providers were starting: release whatever this call started.
        let ended = state.withLock { $0.active?.generation != generation || $0.active?.endingAt != nil }
        if ended { for p in started { await p.stopStreaming() } }
        await delivered()
        return stream
    }

    /// Stops the running session: stops its providers first, so that every sample they had already received reaches
    /// the session (as it reached the sinks' taps, and so the store and `--record`), then emits the summary as of the
    /// moment of the call and finishes the stream. No frame comes while the providers stop; a provider that takes
    /// longer than `providerStopLimitMs` is left to finish in the background. A session already ending (another
    /// stop, or its duration reached) is not stopped twice: the call returns once that end's summary is out. Either
    /// way the summary has reached the stream and every observer when the call returns.
    /// Throws "No active session" or "Session ID mismatch: expected A, got B".
    public func stopSession(sessionId: String) async throws(SessionError) {
        let ending = try state.withLock { s throws(SessionError) -> (UInt64, [any BiosignalProvider])? in
            let a = try Self.active(s, matching: sessionId)
            guard a.endingAt == nil else { return nil }
            a.timer?.cancel()
            s.active?.timer = nil
            s.active?.endingAt = SessionCore.Instant(clock)
            return (a.generation, a.running)
        }
        guard let (generation, running) = ending else {
            await idle()
            return
        }
        await drain(generation: generation, running)
        await delivered()
    }

    /// The end of a session whose `endingAt` is set: stops its providers (at most `providerStopLimitMs`), then emits
    /// the summary as of `endingAt`, with every sample they handed over, and finishes the stream.
    private func drain(generation: UInt64, _ running: [any BiosignalProvider]) async {
        await stop(running, within: providerStopLimitMs)
        let snapshot = behaviorSnapshot()
        state.withLock { s in
            guard let a = s.active, a.generation == generation, let at = a.endingAt else { return }
            _ = finish(&s, with: a.core.summary(at: at, behavior: snapshot))
        }
        deliver()
    }

    /// The running session when its ID is `sessionId`; must be called with the lock held.
    private static func active(_ s: State, matching sessionId: String) throws(SessionError) -> Active {
        guard let a = s.active else { throw .invalidState("No active session") }
        guard a.core.config.sessionId == sessionId else {
            throw .invalidState("Session ID mismatch: expected \(a.core.config.sessionId), got \(sessionId)")
        }
        return a
    }

    /// The SDK's synchronous `stop`: the summary is emitted before this returns; providers stop in the background.
    public func stop(sessionId: String) throws(SessionError) {
        let running = try endSession(sessionId: sessionId)
        if !running.isEmpty { Task { for p in running { await p.stopStreaming() } } }
    }

    private func endSession(sessionId: String) throws(SessionError) -> [any BiosignalProvider] {
        let snapshot = behaviorSnapshot()
        let running = try state.withLock { s throws(SessionError) -> [any BiosignalProvider] in
            let a = try Self.active(s, matching: sessionId)
            let summary = a.core.summary(at: a.endingAt ?? SessionCore.Instant(clock), behavior: snapshot)
            return finish(&s, with: summary)
        }
        deliver()
        return running
    }

    /// `nil` when idle.
    public func getStatus() -> SessionStatus? {
        state.withLock { s in
            s.active.map { SessionStatus(sessionId: $0.core.config.sessionId, active: true, lastSeq: $0.core.seq) }
        }
    }

    /// Replaces the ingested HSI metrics (no merge). With a `sessionId` that is not the running session's, nothing
    /// happens and `false` is returned. Without one and with no session running, the values wait for the next start.
    @discardableResult
    public func ingestHsiMetrics(_ metrics: [String: JSONValue], sessionId: String? = nil) -> Bool {
        state.withLock { s in
            if s.active == nil {
                guard sessionId == nil else { return false }
                s.pendingHsi = metrics
                return true
            }
            if let sessionId, s.active?.core.config.sessionId != sessionId { return false }
            s.active?.core.hsi = metrics
            return true
        }
    }

    /// Ends everything without a summary (the SDK's `dispose`): the stream finishes, providers stop, later starts throw.
    public func dispose() async {
        let running = state.withLock { s -> [any BiosignalProvider] in
            s.disposed = true
            guard let a = s.active else { return [] }
            a.timer?.cancel()
            enqueue(.finish(a.continuation))
            s.active = nil
            wakeIdleWaiters(&s)
            return a.running
        }
        deliver()
        for p in running { await p.stopStreaming() }
    }

    /// Returns once everything emitted before the call has been delivered to its stream and to every observer. The
    /// thread that emits usually delivers too, but one that finds another thread delivering leaves its events to it,
    /// and that thread may be descheduled on a loaded machine: a stop would then return before its summary reached
    /// the observers.
    private func delivered() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            enqueue(.wake([c]))
            deliver()
        }
    }

    /// Returns once no session is running or ending, and what the last one emitted has been delivered to its stream
    /// and to every observer. A session that reaches its duration ends on another task than its clock's, once its
    /// providers have stopped: this is how a caller driving the clock waits for that summary.
    public func idle() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                guard s.active == nil else {
                    s.idleWaiters.append(c)
                    return false
                }
                // Queued behind whatever the last session still has to deliver.
                enqueue(.wake([c]))
                return true
            }
            if now { deliver() }
        }
    }

    /// Callers of `idle()` (and stops joining one under way) waiting for the session to end: for tests to know a
    /// second stop has joined before they let the first one finish.
    var idleWaiterCount: Int { state.withLock { $0.idleWaiters.count } }

    /// Must be called with the lock held, after the session's last event was queued.
    private func wakeIdleWaiters(_ s: inout State) {
        guard !s.idleWaiters.isEmpty else { return }
        enqueue(.wake(s.idleWaiters))
        s.idleWaiters = []
    }

    /// Calls `observer` with every event of every session, in order, until the returned token is cancelled. It is
    /// called outside the engine's lock, on whichever thread delivers, one event at a time: it must not block (queue
    /// the work and return), since the next event waits for it. Sinks use this alongside the session's own stream.
    public func observe(_ observer: @escaping @Sendable (SessionEvent) -> Void) -> ObservationToken {
        let id = observers.withLock { o -> UInt64 in
            o.next += 1
            o.all[o.next] = observer
            return o.next
        }
        return ObservationToken { [weak self] in self?.observers.withLock { _ = $0.all.removeValue(forKey: id) } }
    }

    // MARK: Internals

    /// The behaviour provider's snapshot, taken before the lock (it is a call out of the engine).
    private func behaviorSnapshot() -> () -> BehaviorSnapshot? {
        guard let b = behaviorProvider, b.isAvailable else { return { nil } }
        let snapshot = b.currentSnapshot()
        return { snapshot }
    }

    private func ingest(_ sample: BiosignalSample, generation: UInt64) {
        state.withLock { s in
            guard s.active?.generation == generation else { return }
            s.active?.core.append(sample)
        }
    }

    private func report(_ status: SensorStatus, generation: UInt64) {
        state.withLock { s in
            guard let a = s.active, a.generation == generation else { return }
            emit(.sensorStatus(sessionId: a.core.config.sessionId, emittedAtMs: clock.nowMs(), status: status), to: a.continuation)
        }
        deliver()
    }

    private func fail(generation: UInt64, error: SessionError) {
        state.withLock { s in
            guard let a = s.active, a.generation == generation else { return }
            _ = finish(&s, with: .error(sessionId: a.core.config.sessionId, code: error.code, message: error.message))
        }
        deliver()
    }

    /// Stops `providers` one after the other; returns when they have, or after `limitMs` on the engine's clock.
    private func stop(_ providers: [any BiosignalProvider], within limitMs: Int64) async {
        guard !providers.isEmpty else { return }
        let clock = clock
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let waiting = Locked<CheckedContinuation<Void, Never>?>(continuation)
            let resume: @Sendable () -> Void = {
                waiting.withLock { c -> CheckedContinuation<Void, Never>? in
                    defer { c = nil }
                    return c
                }?.resume()
            }
            let limit = clock.schedule(atMonotonicMs: clock.monotonicMs() + limitMs, resume)
            Task {
                for p in providers { await p.stopStreaming() }
                limit.cancel()
                resume()
            }
        }
    }

    /// Must be called with the lock held.
    private func finish(_ s: inout State, with event: SessionEvent) -> [any BiosignalProvider] {
        guard let a = s.active else { return [] }
        a.timer?.cancel()
        emit(event, to: a.continuation)
        enqueue(.finish(a.continuation))
        s.active = nil
        wakeIdleWaiters(&s)
        return a.running
    }

    /// Must be called with the lock held.
    private func scheduleNext(_ s: inout State) {
        guard let a = s.active else { return }
        let generation = a.generation
        s.active?.timer = clock.schedule(atMonotonicMs: a.core.nextDeadlineMs) { [weak self] in
            self?.tick(generation: generation)
        }
    }

    private func tick(generation: UInt64) {
        let snapshot = behaviorSnapshot()
        let ending = state.withLock { s -> [any BiosignalProvider]? in
            guard var a = s.active, a.generation == generation, a.endingAt == nil else { return nil }
            let now = SessionCore.Instant(clock)
            let (events, finished) = a.core.fire(at: now, behavior: snapshot)
            guard finished else {
                s.active = a
                for e in events { emit(e, to: a.continuation) }
                scheduleNext(&s)
                return nil
            }
            // The duration is over: the frames due now, then the summary once the providers have stopped (as for
            // `stopSession`), as of now.
            for e in events.dropLast() { emit(e, to: a.continuation) }
            a.timer = nil
            a.endingAt = now
            s.active = a
            return a.running
        }
        deliver()
        if let ending { Task { await self.drain(generation: generation, ending) } }
    }

    /// Must be called with the lock held, so that events keep their order across threads; `deliver()` after the
    /// lock is released hands them on.
    private func emit(_ event: SessionEvent, to continuation: AsyncStream<SessionEvent>.Continuation) {
        enqueue(.event(event, continuation))
    }

    private func enqueue(_ delivery: Delivery) {
        outbox.withLock { $0.queue.append(delivery) }
    }

    /// Delivers what is queued, in order, with no engine lock held. One thread delivers at a time; a thread that
    /// finds another delivering leaves its events to it, so order holds across threads.
    private func deliver() {
        let claimed = outbox.withLock { o -> Bool in
            guard !o.delivering, !o.queue.isEmpty else { return false }
            o.delivering = true
            return true
        }
        guard claimed else { return }
        while true {
            let batch = outbox.withLock { o -> [Delivery] in
                defer { o.queue = [] }
                if o.queue.isEmpty { o.delivering = false }
                return o.queue
            }
            if batch.isEmpty { return }
            for item in batch {
                switch item {
                case .event(let event, let continuation):
                    continuation.yield(event)
                    for o in observers.withLock({ $0.all.sorted { $0.key < $1.key }.map(\.value) }) { o(event) }
                case .finish(let continuation):
                    continuation.finish()
                case .wake(let waiters):
                    for w in waiters { w.resume() }
                }
            }
        }
    }
}

/// The SDK's status triple.
public struct SessionStatus: Sendable, Equatable {
    public let sessionId: String
    public let active: Bool
    /// The `seq` of the last `session_frame`.
    public let lastSeq: Int

    public init(sessionId: String, active: Bool, lastSeq: Int) {
        self.sessionId = sessionId
        self.active = active
        self.lastSeq = lastSeq
    }

    public var jsonValue: JSONValue {
        .object(["session_id": .string(sessionId), "active": .bool(active), "last_seq": .int(Int64(lastSeq))])
    }
}

/// Ends an observation when cancelled.
public final class ObservationToken: Sendable {
    private let onCancel: Locked<(@Sendable () -> Void)?>
    init(_ onCancel: @escaping @Sendable () -> Void) { self.onCancel = Locked(onCancel) }
    public func cancel() {
        let f = onCancel.withLock { f -> (@Sendable () -> Void)? in
            defer { f = nil }
            return f
        }
        f?()
    }
    deinit { cancel() }
}
