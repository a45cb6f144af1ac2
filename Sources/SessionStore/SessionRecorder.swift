import Foundation
import GatewayEngine
import GatewayStorage

/// Records one session into a `SessionStore` as it runs: samples through a tap on each provider
/// (`wrap(_:)` or `record(_:)` from an existing `TappedProvider` closure), events through `attach(to:)`.
///
/// A sample is committed before the engine receives it, an event as the engine emits it. A write that fails
/// (disk full, permission) never disturbs the session: `onFailure` is called once with the reason, recording
/// carries on trying, and the session goes on.
public final class SessionRecorder: Sendable {
    public let sessionId: String
    private let store: SessionStore
    private let onFailure: @Sendable (String) -> Void

    private struct State {
        var lock: FileLock?
        var reported = false
        var ended = false
        var token: ObservationToken?
    }

    private let state = Locked(State())

    /// Adds the session to the store as `running` and holds its writer lock. When this fails (the id is already
    /// recorded, the database cannot be written) `onFailure` is called and the recorder records nothing.
    public init(
        store: SessionStore,
        config: SessionConfig,
        nowMs: Int64 = Int64((Date().timeIntervalSince1970 * 1000).rounded()),
        onFailure: @escaping @Sendable (String) -> Void
    ) {
        self.sessionId = config.sessionId
        self.store = store
        self.onFailure = onFailure
        do {
            guard let lock = try FileLock.tryAcquire(path: store.lockPath(sessionId: config.sessionId)) else {
                throw StoreError.sessionRunning(config.sessionId)
            }
            do {
                try store.insertSession(config, startedAtMs: nowMs)
            } catch {
                lock.release(remove: false)
                throw error
            }
            state.withLock { $0.lock = lock }
        } catch {
            fail("not recording this session: \(error)")
            state.withLock { $0.ended = true }
        }
    }

    /// The database the session is recorded into.
    public var databasePath: String { store.databasePath }

    /// True when the session is being recorded (the initial insert succeeded and it has not ended).
    public var isRecording: Bool { state.withLock { $0.lock != nil && !$0.ended } }

    /// `provider`, with every sample it delivers recorded first.
    public func wrap(_ provider: any BiosignalProvider) -> TappedProvider {
        TappedProvider(provider, onSample: { [self] sample in record(sample) })
    }

    /// Records every event of this session that `engine` emits, until the session ends.
    public func attach(to engine: SessionEngine) {
        let token = engine.observe { [self] event in record(event) }
        state.withLock { $0.token = token }
    }

    public func record(_ sample: BiosignalSample) {
        guard isRecording else { return }
        attempt { try store.insert(sample, sessionId: sessionId) }
    }

    /// Records `event` when it belongs to this session; the terminal event also ends the session in the store.
    public func record(_ event: SessionEvent) {
        guard event.sessionId == sessionId, isRecording else { return }
        attempt { try store.insert(event) }
        switch event {
        case .summary: end(.completed)
        case .error: end(.failed)
        default: break
        }
    }

    /// Ends the recording: a session that has not emitted its end is marked `stopped`. Idempotent.
    public func finish() { end(.stopped) }

    private func end(_ final: RecordedSessionState) {
        let (lock, token) = state.withLock { s -> (FileLock?, ObservationToken?) in
            guard !s.ended else { return (nil, nil) }
            s.ended = true
            defer { s.lock = nil; s.token = nil }
            return (s.lock, s.token)
        }
        token?.cancel()
        guard let lock else { return }
        attempt { try store.end(sessionId: sessionId, state: final, atMs: Self.nowMs()) }
        lock.release(remove: true)
    }

    private func attempt(_ body: () throws -> Void) {
        do { try body() } catch { fail("recording to \(store.databasePath) failed: \(error); the session goes on") }
    }

    private func fail(_ message: String) {
        let first = state.withLock { s -> Bool in
            defer { s.reported = true }
            return !s.reported
        }
        if first { onFailure(message) }
    }

    private static func nowMs() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }
}
