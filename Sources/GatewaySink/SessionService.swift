import GatewayEngine
import ServiceLifecycle

/// One session as a service of the group: starts it, follows its stream to the end, and stops it cleanly (with its
/// summary) on graceful shutdown. Put it last in the group, after the sinks, so that when it returns the group
/// shuts the sinks down and each delivers what the session left it.
public final class SessionService: Service, Sendable {
    public let engine: SessionEngine
    public let config: SessionConfig
    /// End the session when every source reports it has finished (a replay at its end).
    public let stopWhenSourcesEnd: Bool
    private let onError: @Sendable (String) -> Void

    private struct State: Sendable {
        var status: Int32 = 0
        var shutdownRequested = false
    }

    private let state = Locked(State())

    public init(
        engine: SessionEngine, config: SessionConfig, stopWhenSourcesEnd: Bool = false,
        onError: @escaping @Sendable (String) -> Void
    ) {
        self.engine = engine
        self.config = config
        self.stopWhenSourcesEnd = stopWhenSourcesEnd
        self.onError = onError
    }

    /// 0 after a summary, 1 after a session error, 2 when the session could not start.
    public var exitStatus: Int32 { state.withLock { $0.status } }

    public func run() async throws {
        let engine = engine
        let sessionId = config.sessionId
        await withGracefulShutdownHandler {
            let stream: AsyncStream<SessionEvent>
            do throws(SessionError) { stream = try await engine.startSession(config) } catch {
                onError(error.message)
                state.withLock { $0.status = 2 }
                return
            }
            // A shutdown that came while the providers were starting.
            if state.withLock({ $0.shutdownRequested }) { Task { try? await engine.stopSession(sessionId: sessionId) } }
            var finishedSources = Set<String>()
            for await event in stream {
                switch event {
                case .error(_, _, let message):
                    onError(message)
                    state.withLock { $0.status = 1 }
                case .sensorStatus(_, _, let s) where stopWhenSourcesEnd && s.state == .disconnected:
                    finishedSources.insert(s.deviceId ?? s.source)
                    if finishedSources.count >= engine.providers.count {
                        // Let the last samples reach a frame before the summary.
                        try? await engine.stopSession(sessionId: sessionId)
                    }
                default:
                    break
                }
            }
        } onGracefulShutdown: { [state] in
            state.withLock { $0.shutdownRequested = true }
            // The providers stop first, so that the summary covers every sample the sinks were shown; `run` returns
            // once the summary is emitted (to every sink).
            Task { try? await engine.stopSession(sessionId: sessionId) }
        }
    }
}
