import Foundation
import GatewayEngine
import HRVAnalysis
import RelayCore
import RelayWSClient
import ReplayProvider
import SessionStore
import StdoutSink

/// Runs one session to its end for the command line: wires taps (recording, live view), prints events, and turns
/// Ctrl-C / SIGTERM into a clean stop with a summary.
struct SessionRunner {
    enum Output { case jsonl, pretty }

    let config: SessionConfig
    let providers: [any BiosignalProvider]
    let correction: ArtifactCorrection
    let output: Output
    let recordPath: String?
    /// Records the session into the session store (samples and events); nil with `--no-record-db`.
    var recorder: SessionRecorder? = nil
    /// End the session when every source reports it has finished (a replay at its end).
    let stopWhenSourcesEnd: Bool
    /// Also relay the session over WebSocket (`stream --listen`), with tokens from this state directory.
    var relay: (options: RelayOptions, stateDirectory: String)? = nil
    /// Also dial out to a relay endpoint (`stream --connect`), keeping its outbox in this state directory.
    var uplink: (options: UplinkOptions, stateDirectory: String)? = nil
    /// Posts the summary (and sample batches) to a webhook through the durable outbox; nil without `--webhook`.
    var webhook: WebhookDelivery? = nil

    /// Returns the process exit status: 0 after a summary, 1 after a session error.
    func run() async throws -> Int32 {
        let writer = try recordPath.map { try SampleFileWriter(path: $0) }
        defer { writer?.close() }
        let recorder = recorder
        defer { recorder?.finish() }
        let pretty = output == .pretty
            ? PrettyTerminal(view: PrettyView(
                sessionId: config.sessionId, mode: config.mode.rawValue,
                durationSec: config.durationSec == Int(Int32.max) ? nil : config.durationSec))
            : nil
        let webhookSession = webhook.map { WebhookDelivery.Session($0, sessionId: config.sessionId) }
        let tapped: [any BiosignalProvider] = providers.map { p in
            TappedProvider(p, onSample: { sample in
                recorder?.record(sample)
                webhookSession?.handle(sample)
                writer?.append(sample)
                pretty?.handle(sample)
            })
        }
        let engine = SessionEngine(providers: tapped, correction: correction)
        recorder?.attach(to: engine)
        var relayRuntime: RelayRuntime?
        if let relay {
            relayRuntime = try await RelayRuntime.start(
                relay.options, stateDirectory: relay.stateDirectory, engine: engine, announceOnStderr: true)
        }
        // The uplink shares the listening relay's hub, or has one of its own; either way it is registered before
        // the session starts, so that session_started reaches the far end even if the link comes up later.
        var uplinkHubObservation: ObservationToken?
        var dialer: RelayUplink?
        if let uplink, uplink.options.connect != nil {
            let hub = relayRuntime?.hub ?? RelayHub.forGateway(engine: engine, stateDirectory: uplink.stateDirectory)
            if relayRuntime == nil { uplinkHubObservation = hub.attach(to: engine) }
            dialer = uplink.options.uplink(hub: hub)
        }
        let dialing = dialer.map { UplinkOptions.start($0) }
        defer { uplinkHubObservation?.cancel() }
        let sessionId = config.sessionId
        let webhookToken = webhookSession.map { w in
            engine.observe { event in if event.sessionId == sessionId { w.handle(event) } }
        }
        let jsonl = JSONLinesWriter()
        pretty?.begin()

        TerminationSignals.onSignal { _ in
            Task { try? await engine.stopSession(sessionId: config.sessionId) }
        }
        defer { TerminationSignals.finishing() }

        let stream: AsyncStream<SessionEvent>
        do {
            stream = try await engine.startSession(config)
        } catch {
            FileHandle.standardError.write(Data("error: \(error.message)\n".utf8))
            await relayRuntime?.stop(graceMs: 0)
            dialing?.cancel()
            await dialing?.value
            return 2
        }
        var finishedSources = Set<String>()
        var status: Int32 = 0
        for await event in stream {
            if let pretty { pretty.handle(event) } else { jsonl.write(event) }
            switch event {
            case .error(_, _, let message):
                FileHandle.standardError.write(Data("error: \(message)\n".utf8))
                status = 1
            case .sensorStatus(_, _, let s) where stopWhenSourcesEnd && s.state == .disconnected:
                finishedSources.insert(s.deviceId ?? s.source)
                if finishedSources.count >= providers.count {
                    // Let the last samples reach a frame before the summary.
                    try? await engine.stopSession(sessionId: config.sessionId)
                }
            default:
                break
            }
        }
        webhookToken?.cancel()
        await webhookSession?.finish()
        if let uplink, let dialer, let dialing { await uplink.options.finish(dialer, task: dialing) }
        await relayRuntime?.stop()
        return status
    }
}

/// The write end of the signal pipe; set once before any handler is installed (async-signal-safe to read).
nonisolated(unsafe) private var signalPipeWriteEnd: Int32 = -1

/// SIGINT and SIGTERM turned into a call on an ordinary thread (a self-pipe), so that a command can end cleanly.
///
/// The signals are also unblocked on the calling thread: a service manager or a test runner may start the process
/// with them blocked, and the kernel delivers a process-directed signal to any thread that does not block it.
/// After the first signal has been handled, a second one exits at once with status 128 + signal.
enum TerminationSignals {
    private struct State {
        var handler: (@Sendable (Int32) -> Void)?
        var handled = false
    }

    private static let state = Locked(State())
    private static let installed: Void = {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { return }
        signalPipeWriteEnd = fds[1]
        let readEnd = fds[0]
        let reader = Thread {
            while true {
                var byte: UInt8 = 0
                let n = read(readEnd, &byte, 1)
                if n < 0 && errno == EINTR { continue }
                guard n == 1 else { return }
                let sig = Int32(byte)
                let handler = state.withLock { s -> (@Sendable (Int32) -> Void)? in
                    defer { s.handled = true }
                    return s.handled ? nil : s.handler
                }
                guard let handler else { exit(128 + sig) }
                handler(sig)
            }
        }
        reader.name = "signals"
        reader.start()
        for sig in [SIGINT, SIGTERM] {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { sig in
                var byte = UInt8(truncatingIfNeeded: sig)
                _ = write(signalPipeWriteEnd, &byte, 1)
            }
            sigemptyset(&action.sa_mask)
            action.sa_flags = SA_RESTART
            sigaction(sig, &action, nil)
        }
    }()

    /// Routes the next SIGINT or SIGTERM to `handler` (on the signal thread) instead of the default action.
    static func onSignal(_ handler: @escaping @Sendable (Int32) -> Void) {
        state.withLock {
            $0.handler = handler
            $0.handled = false
        }
        _ = installed
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
    }

    /// The command is finishing: a first signal from now on is taken and ignored (so that a service manager's
    /// SIGTERM during the last writes does not turn a clean exit into 143); a second one exits at once.
    static func finishing() { state.withLock { $0.handler = { _ in } } }
}
