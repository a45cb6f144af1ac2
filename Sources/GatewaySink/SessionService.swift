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

    /// An observer that ends session `sessionId` (its summary as of that moment) once every provider has reported
    /// `disconnected`: a replay at the end of its file. The providers have handed over every sample by then.
    private static func endingWithSources(engine: SessionEngine, sessionId: String) -> @Sendable (SessionEvent) -> Void {
        let finished = Locked(Set<String>())
        return { event in
            guard case .sensorStatus(let id, _, let s) = event, id == sessionId, s.state == .disconnected else { return }
            let all = finished.withLock { f -> Bool in
                f.insert(s.deviceId ?? s.source)
                return f.count >= engine.providers.count
            }
            if all { try? engine.stop(sessionId: sessionId) }
        }
    }

    /// 0 after a summary, 1 after a session error, 2 when the session could not start.
    public var exitStatus: Int32 { state.withLock { $0.status } }

    public func run() async throws {
        let engine = engine
        let sessionId = config.sessionId
        // The session ends the moment its last source has finished: watched as the engine delivers, not later through
        // the stream, whose delay at a fast replay's pace would be seconds of the recording (frames past its end).
        let watch = stopWhenSourcesEnd ? engine.observe(Self.endingWithSources(engine: engine, sessionId: sessionId)) : nil
        defer { watch?.cancel() }
        await withGracefulShutdownHandler {
            let stream: AsyncStream<SessionEvent>
            do throws(SessionError) { stream = try await engine.startSession(config) } catch {
                onError(error.message)
                state.withLock { $0.status = 2 }
                return
            }
            // A shutdown that came while the providers were starting.
            if state.withLock({ $0.shutdownRequested }) { Task { try? await engine.stopSession(sessionId: sessionId) } }
            for await event in stream {
                if case .error(_, _, let message) = event {
                    onError(message)
                    state.withLock { $0.status = 1 }
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
