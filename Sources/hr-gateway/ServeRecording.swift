import Foundation
import GatewayConfig
import GatewayEngine
import GatewaySink
import Logging
import RelayCore
import SessionStore

/// `serve`'s sessions into the session store, as `stream` records its one: each session a consumer (a phone, an
/// MQTT command) starts gets its `SessionRecorder` before the engine starts it (old sessions pruned by `keep_days`
/// first), every sample its providers deliver is made durable on the provider's thread before the engine has it
/// (`kill -9` loses nothing received), and the session's events follow through this sink. Samples are routed by the
/// session their provider was started for, so a session that is ending never writes into the next one.
final class ServeRecording: SessionSink {
    let name = "store"
    private let store: StoreOptions
    private let settings: GatewayConfiguration
    private let clock: any SessionClock
    private let recorders = Locked<[String: SessionRecorder]>([:])
    /// Ended sessions whose writer is still finishing (`finish()` at shutdown waits for them too).
    private let ending = Locked<[ObjectIdentifier: SessionRecorder]>([:])
    private let logger = Logger(label: "hr-gateway")

    init(store: StoreOptions, settings: GatewayConfiguration, clock: any SessionClock) {
        self.store = store
        self.settings = settings
        self.clock = clock
    }

    /// Before the engine starts `config`'s session. A session id already in the store is refused, as `stream`
    /// refuses it: the consumer is told (`invalid_state`) before anything runs, the earlier recording is kept, and
    /// no session runs unrecorded under a name that already means another one.
    func starting(_ config: SessionConfig) throws(SessionError) {
        // The session running now: said as the engine says it (it was "already recorded…, delete the recording").
        if recorders.withLock({ $0[config.sessionId] != nil }) {
            throw .invalidState("Session \(config.sessionId) is already running")
        }
        let recorder: SessionRecorder?
        do { recorder = try store.recorder(config, settings, clock: clock) } catch {
            logger.warning("refused to start session \(config.sessionId): \(error)")
            if "\(error)".contains("in its journal") {
                throw .invalidState("Session \(config.sessionId) is already recorded on this gateway, in a journal that "
                    + "waits for the damaged session store: start it with another session_id.")
            }
            throw .invalidState("Session \(config.sessionId) is already recorded on this gateway: start it with another "
                + "session_id (or delete the recording first: hr-gateway sessions delete \(config.sessionId)).")
        }
        guard let recorder else { return }
        recorders.withLock { $0[config.sessionId] = recorder }
    }

    /// Whether session `id` is in the store and no longer running (ended before this process, or by it), read on a
    /// thread of its own: the store may wait for another process's lock.
    func recordedEnded(_ id: String) async -> Bool {
        let store = store
        return await withCheckedContinuation { c in
            Self.onThread {
                let s = (try? store.openForReading()).flatMap { try? $0.session(id: id) }
                c.resume(returning: s.map { $0.state != .running } ?? false)
            }
        }
    }

    /// The engine refused to start it (a session already running, a configuration it cannot run): nothing stays.
    func failedToStart(_ config: SessionConfig) {
        guard let recorder = recorders.withLock({ $0.removeValue(forKey: config.sessionId) }) else { return }
        Self.onThread { recorder.discardUnstarted() }
    }

    /// `provider`, with each sample recorded into the session it was started for.
    func tap(_ provider: any BiosignalProvider) -> any BiosignalProvider {
        TappedProvider(provider, onSessionSample: { [self] sample, session in
            guard let id = session?.sessionId, let recorder = recorders.withLock({ $0[id] }) else { return }
            recorder.record(sample)
        })
    }

    func receive(event: EncodedEvent) {
        let id = event.event.sessionId
        guard let recorder = recorders.withLock({ $0[id] }) else { return }
        recorder.record(event.event, json: event.json)
        switch event.event {
        case .summary, .error:
            // Ended: the writer finishes on a thread of its own, off the engine's delivery path.
            recorders.withLock { _ = $0.removeValue(forKey: id) }
            ending.withLock { $0[ObjectIdentifier(recorder)] = recorder }
            Self.onThread { [ending] in
                recorder.finish()
                ending.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(recorder)) }
            }
        default: break
        }
    }

    func run() async throws { await untilGracefulShutdown() }

    /// At shutdown, after the last session's summary: every recording written (or left to its journal), those
    /// still finishing included (`SessionRecorder.finish` waits for its writer, however often it is called).
    func finish() async {
        let left = recorders.withLock { r in defer { r = [:] }; return Array(r.values) }
            + ending.withLock { Array($0.values) }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            Self.onThread {
                for recorder in left { recorder.finish() }
                done.resume()
            }
        }
    }

    /// Waits for the database (up to the recorder's grace) on a thread, not on a task of the cooperative pool.
    private static func onThread(_ work: @escaping @Sendable () -> Void) {
        let t = Thread(block: work)
        t.name = "serve-recording"
        t.start()
    }
}

/// The engine's relay controller with `serve`'s recording around each start.
struct RecordingRelayController: RelayController {
    let base: EngineRelayController
    let recording: ServeRecording

    func startSession(_ config: SessionConfig) async throws(SessionError) {
        try recording.starting(config)
        do { try await base.startSession(config) } catch {
            recording.failedToStart(config)
            throw error
        }
    }

    func stopSession(sessionId: String) async throws(SessionError) { try await base.stopSession(sessionId: sessionId) }
    func endedEarlier(sessionId: String) async -> Bool { await recording.recordedEnded(sessionId) }
    func status() -> SessionStatus? { base.status() }
    func ingestHsiMetrics(_ metrics: [String: JSONValue], sessionId: String?) -> Bool {
        base.ingestHsiMetrics(metrics, sessionId: sessionId)
    }
}
