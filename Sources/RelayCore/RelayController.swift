import GatewayEngine

/// What relay commands act on. `EngineRelayController` drives a `SessionEngine`; tests may supply their own.
public protocol RelayController: Sendable {
    func startSession(_ config: SessionConfig) async throws(SessionError)
    func stopSession(sessionId: String) async throws(SessionError)
    func status() -> SessionStatus?
    func ingestHsiMetrics(_ metrics: [String: JSONValue], sessionId: String?) -> Bool
    /// Whether session `sessionId` ran here and ended before what the hub remembers (a gateway run before a
    /// restart, when its sessions are recorded): a `stop_session` retried across the restart is answered
    /// `already_ended`.
    func endedEarlier(sessionId: String) async -> Bool
}

extension RelayController {
    public func endedEarlier(sessionId: String) async -> Bool { false }
}

/// Runs relay commands on a `SessionEngine`. Events reach the relay through `SessionEngine.observe`; the stream of
/// a session started here is drained in the background.
public final class EngineRelayController: RelayController {
    public let engine: SessionEngine

    public init(engine: SessionEngine) { self.engine = engine }

    public func startSession(_ config: SessionConfig) async throws(SessionError) {
        let stream = try await engine.startSession(config)
        Task { for await _ in stream {} }
    }

    public func stopSession(sessionId: String) async throws(SessionError) {
        try await engine.stopSession(sessionId: sessionId)
    }

    public func status() -> SessionStatus? { engine.getStatus() }

    public func ingestHsiMetrics(_ metrics: [String: JSONValue], sessionId: String?) -> Bool {
        engine.ingestHsiMetrics(metrics, sessionId: sessionId)
    }
}
