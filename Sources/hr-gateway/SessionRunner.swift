import BLEHeartRate
import Foundation
import GatewayEngine
import GatewayMetrics
import GatewaySink
import HRVAnalysis
import LSLSink
import Logging
import MQTTSink
import RelayCore
import RelayWSClient
import ReplayProvider
import ServiceLifecycle
import SessionStore
import StdoutSink

/// Wiring for one session on the command line: the sinks the options ask for, attached through `SessionOutputs`,
/// the session as a service after them in one `ServiceGroup`, and SIGINT/SIGTERM turned into the group's graceful
/// shutdown (summary written, every sink drained; a second signal exits at once).
struct SessionRunner {
    enum Output {
        case jsonl, pretty
        /// jsonl without the frames (`JSONLinesSink.eventsOnly`).
        case events
    }

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
    /// Publishes status and events to an MQTT broker; nil without `--mqtt`.
    var mqtt: MQTTSink? = nil
    /// Prometheus metrics: kept by a sink, served on the relay's port with `--listen` and on `--metrics-listen`.
    var metrics: (metrics: GatewayMetrics, listen: String?)? = nil
    /// Publishes to the Lab Streaming Layer; nil without `--lsl`.
    var lsl: LSLSink? = nil
    /// Said when the session has ended (where it was recorded, how to export it): under the live view, or on a
    /// terminal's standard error with jsonl output.
    var endNote: String? = nil
    /// The session's clock: the system's, or the recording's time for a faster replay (`SourceOptions.sessionClock`).
    var clock: any SessionClock = SystemSessionClock()
    /// The signals, taken by the command from before it creates the recording; installed by `run()` without one.
    var stop: SessionStop? = nil

    /// Returns the process exit status: 0 after a summary, 1 after a session error or a summary of a session that
    /// received no sample, 2 when it could not start, 128 + N when signal N came before it started.
    func run() async throws -> Int32 {
        // A reader that goes away (standard output's, a TLS broker's socket written by OpenSSL without MSG_NOSIGNAL)
        // is an error to handle, not the end of the process: the session ends properly or goes on.
        StandardStream.ignoreBrokenPipe()
        let outputs = SessionOutputs()
        let engine = SessionEngine(providers: providers.map(outputs.tap), clock: clock, correction: correction)
        let stop = if let stop = self.stop { stop } else { await SessionStop.install() }
        defer { stop.finishing() }

        do {
            try await attach(to: outputs, engine: engine)
        } catch {
            // An output could not start (a port in use, a --record path that cannot be created): the session never
            // started, so it does not stay behind in the store as an interrupted one.
            recorder?.discardUnstarted()
            throw error
        }
        if let sig = stop.requested {
            // Stopped before the session started: nothing to keep.
            recorder?.discardUnstarted()
            StandardStream.error.write(Data("stopped by \(SessionStop.name(sig)) before the session started: nothing recorded\n".utf8))
            return 128 + sig
        }
        // Standard output, attached last, is the first output to finish after the session.
        // Standard output closed by its reader (`| head`, a viewer that quit): told by the stdout sink, acted on once
        // the group runs.
        let (stdoutClosed, closing) = AsyncStream<Void>.makeStream()
        switch output {
        case .jsonl:
            outputs.attach(JSONLinesSink(onClosed: { closing.yield() }))
        case .events:
            outputs.attach(JSONLinesSink(keeping: JSONLinesSink.eventsOnly, onClosed: { closing.yield() }))
        case .pretty:
            outputs.attach(PrettySink(
                view: PrettyView(
                    sessionId: config.sessionId, mode: config.mode.rawValue,
                    durationSec: config.durationSec == Int(Int32.max) ? nil : config.durationSec, endNote: endNote),
                onClosed: { closing.yield() }))
        }
        outputs.observe(engine)
        defer { outputs.detach() }

        // The live view shows a session error on its last screen; saying it on stderr too would repeat it.
        let sayError = output != .pretty
        let session = SessionService(engine: engine, config: config, stopWhenSourcesEnd: stopWhenSourcesEnd) { message in
            if sayError { StandardStream.error.write(Data("Error: \(message)\n".utf8)) }
        }
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(
            services: outputs.services + [
                .init(service: session, successTerminationBehavior: .gracefullyShutdownGroup,
                      failureTerminationBehavior: .gracefullyShutdownGroup, serviceName: "session"),
            ],
            logger: Logger(label: "hr-gateway.lifecycle")))
        stop.bind(group)
        let (otherOutputs, recorded, sessionId) = (liveOutputs, recorder != nil, config.sessionId)
        let whenClosed = Task {
            for await _ in stdoutClosed {
                StandardStream.error.write(
                    Self.stdoutClosedNote(otherOutputs: otherOutputs, recorded: recorded, sessionId: sessionId))
                if otherOutputs.isEmpty { await group.triggerGracefulShutdown() }
                return
            }
        }
        defer { whenClosed.cancel() }
        try await group.run()
        // A session that ran to its summary without a single sample measured nothing: a failure to the caller (a
        // script's `--duration` run, a service's log), said on stderr whatever it is; the live view has said it.
        // Standard output that failed (a full disk) is the reason the command gives instead.
        let nothing = outputs.samplesReceived == 0
        let measuredNothing = session.exitStatus == 0 && nothing && StandardStream.outputFailureReason == nil
        let status = measuredNothing ? 1 : session.exitStatus
        if output != .pretty, measuredNothing {
            StandardStream.error.write(Data(("Error: " + PrettyView.nothingMeasuredNote + "\n").utf8))
        } else if output != .pretty, isatty(STDERR_FILENO) == 1 {
            let note = session.exitStatus != 0 && nothing ? PrettyView.nothingReceivedNote : endNote
            if let note { StandardStream.error.write(Data((note + "\n").utf8)) }
        }
        return status
    }
}

extension SessionRunner {
    /// Attaches every output but standard output, starting those that listen or open files (which may fail).
    /// Attachment order is shutdown order reversed: the hub drains before the server and the uplink wait for their
    /// consumers.
    private func attach(to outputs: SessionOutputs, engine: SessionEngine) async throws {
        // Every listener bound before the relay's "listening" line: it is the sign that the gateway is up.
        var metricsServer: MetricsServerSink?
        if let metrics, let listen = metrics.listen {
            metricsServer = try await MetricsServerSink.start(metrics.metrics, listen: listen)
        }
        if let relay {
            let runtime = try await RelayRuntime.start(
                relay.options, stateDirectory: relay.stateDirectory, engine: engine, announceOnStderr: true,
                observe: false, metrics: metrics?.metrics)
            outputs.attach(RelayServerSink(runtime: runtime))
        }
        var hub: RelayHub? = outputs.all.compactMap { ($0 as? RelayServerSink)?.runtime.hub }.first
        // The uplink is registered before the session starts, so that session_started reaches the far end even if
        // the link comes up later.
        if let uplink, uplink.options.connect != nil {
            let uplinkHub = hub ?? RelayHub.forGateway(engine: engine, stateDirectory: uplink.stateDirectory)
            hub = uplinkHub
            if let dialer = uplink.options.uplink(hub: uplinkHub) {
                outputs.attach(UplinkSink(options: uplink.options, dialer: dialer))
            }
        }
        if let hub {
            outputs.attach(RelayHubSink(hub: hub))
            metrics?.metrics.collectRelay(hub)
        }
        if let webhook { outputs.attach(WebhookOutput(webhook, sessionId: config.sessionId)) }
        if let mqtt {
            // Commands over MQTT go through the relay's hub (the same checks, memo by id and results); without a
            // relay, one that keeps nothing on disk.
            let commandHub: RelayHub
            if let hub {
                commandHub = hub
            } else {
                commandHub = RelayHub(controller: EngineRelayController(engine: engine), store: nil)
                // A command's result follows its session's event (session_started, the summary): this hub sees the
                // events as a relay's does, or each result would wait out the hub's limit first.
                outputs.attach(RelayHubSink(hub: commandHub))
            }
            mqtt.acceptCommands { text in await commandHub.command(text, principal: .mqtt)?.jsonString }
            outputs.attach(mqtt)
            metrics?.metrics.collectOutbox("mqtt") { mqtt.outboxDepth }
            metrics?.metrics.addCollector { m in
                m.gauge("hr_gateway_mqtt_connected", help: "1 while the MQTT broker link is up.", mqtt.isConnected ? 1 : 0)
            }
        }
        if let webhook { metrics?.metrics.collectOutbox("webhook") { webhook.forwarder.outboxDepth } }
        if let metrics {
            outputs.attach(MetricsSink(metrics: metrics.metrics))
            metrics.metrics.collectStraps(providers.compactMap { $0 as? BLEHeartRateProvider })
            if let metricsServer { outputs.attach(metricsServer) }
        }
        if let lsl { outputs.attach(lsl) }
        if let recordPath {
            let logger = Logger(label: "hr-gateway")
            outputs.attach(RecordFileSink(writer: try SampleFileWriter(path: recordPath) { logger.warning("\($0)") }))
        }
        if let recorder { outputs.attach(StoreSink(recorder: recorder)) }
    }
}

extension SessionRunner {
    /// The outputs that take the session live besides standard output.
    var liveOutputs: [String] {
        var names: [String] = []
        if relay != nil { names.append("the relay") }
        if uplink?.options.connect != nil { names.append("the uplink") }
        if webhook != nil { names.append("the webhook") }
        if mqtt != nil { names.append("MQTT") }
        if lsl != nil { names.append("LSL") }
        return names
    }

    /// What is said when the reader of standard output has gone: the session ends as on Ctrl-C when standard output
    /// was its only live output, and goes on for the others otherwise.
    static func stdoutClosedNote(otherOutputs: [String], recorded: Bool, sessionId: String) -> String {
        let what = StandardStream.outputFailureReason.map { "note: standard output cannot be written (\($0))" }
            ?? "note: standard output was closed (the program reading it exited)"
        guard otherOutputs.isEmpty else {
            return "\(what); the session goes on for \(otherOutputs.joined(separator: ", ")) until it ends or Ctrl-C.\n"
        }
        let kept = recorded
            ? " It is recorded: hr-gateway sessions export \(sessionId)."
            : " It was not recorded (--no-record-db)."
        return "\(what): ending the session as on Ctrl-C.\(kept)\n"
    }
}

/// A session's SIGINT, SIGTERM and SIGHUP, taken from before its recording is created: one that came while the
/// outputs started (a service stopped as it starts, a script's quick `kill`) killed the process by the default
/// action and left an empty session behind as `interrupted`. A signal before the session's group runs is kept
/// (`requested`: the session is not started, its recording discarded); after `bind`, it shuts the group down.
final class SessionStop: Sendable {
    private let state: Locked<(requested: Int32?, group: ServiceGroup?)>
    private let signals: TerminationSignals

    private init(state: Locked<(requested: Int32?, group: ServiceGroup?)>, signals: TerminationSignals) {
        self.state = state
        self.signals = signals
    }

    static func install() async -> SessionStop {
        let state = Locked<(requested: Int32?, group: ServiceGroup?)>((nil, nil))
        let logger = Logger(label: "hr-gateway")
        let signals = await TerminationSignals.onSignal { sig in
            let group = state.withLock { s -> ServiceGroup? in
                if s.group == nil { s.requested = sig }
                return s.group
            }
            logger.debug("\(Self.name(sig)) taken: \(group == nil ? "the session will not start" : "the session ends")")
            if let group { Task { await group.triggerGracefulShutdown() } }
            watchStandardOutput(after: sig)
        }
        return SessionStop(state: state, signals: signals)
    }

    /// How long a write to standard output may stay blocked once a stop was asked for.
    static let blockedOutputLimit: Duration = .seconds(10)

    /// After a stop was asked for, a write to standard output blocked for `blockedOutputLimit` (its reader stopped
    /// reading: a full pipe) ends the process with 128 + `sig`, saying so. The session's end waited on it for ever,
    /// recorded already, until a second signal (a script that stops reading, then terminates and waits, hung).
    private static func watchStandardOutput(after sig: Int32) {
        // A thread of its own: the concurrency pool's may all be waiting on the blocked write.
        Thread.detachNewThread {
            while true {
                Thread.sleep(forTimeInterval: 1)
                guard StandardStream.outputWriteWaiting >= blockedOutputLimit else { continue }
                StandardStream.error.write(Data(("stopping: standard output has not been read for "
                    + "\(blockedOutputLimit.components.seconds) s (its reader stopped reading); exiting, what was "
                    + "recorded is kept\n").utf8))
                exit(128 + sig)
            }
        }
    }

    static func name(_ sig: Int32) -> String { sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "SIGHUP" }

    /// The signal that came before `bind`, if one did.
    var requested: Int32? { state.withLock { $0.requested } }

    /// Later signals shut `group` down gracefully; one that came since `requested` was read does now.
    func bind(_ group: ServiceGroup) {
        let early = state.withLock { s -> Bool in
            s.group = group
            return s.requested != nil
        }
        if early { Task { await group.triggerGracefulShutdown() } }
    }

    func finishing() { signals.finishing() }
}

/// SIGINT, SIGTERM and SIGHUP through Dispatch signal sources on a queue of their own: the first one calls the
/// handler (a graceful shutdown), any later one exits at once with status 128 + signal (except the same signal again
/// within `sameRequestWindow`: one request delivered twice). SIGHUP is the terminal going away (an ssh connection
/// dropped): the session ends as on Ctrl-C, with its summary, instead of being killed `interrupted`. A SIGHUP the
/// process was started ignoring (`nohup`) stays ignored.
///
/// Not a task on the concurrency pool (swift-service-lifecycle's `UnixSignalsSequence` is read by one): on two cores
/// the pool's two threads can both be busy (one computing under the engine's lock, one waiting for it), and then no
/// signal was ever taken, the second one included: only `kill -9` stopped the process.
///
/// The signals are also unblocked on the calling thread: a service manager or a test runner may start the process
/// with them blocked, and on Linux they are read from the thread that does not block them.
final class TerminationSignals: Sendable {
    private struct State: Sendable {
        var handler: (@Sendable (Int32) -> Void)?
        /// The first signal taken, and when (monotonic).
        var first: (signal: Int32, at: ContinuousClock.Instant)?
    }

    /// A repeat of the first signal this soon after it is the same request delivered twice, not a second Ctrl-C:
    /// `timeout`, a shell or a service manager signalling both the process and its group sends it twice at once.
    static let sameRequestWindow: Duration = .milliseconds(300)

    private enum Action {
        case handle(@Sendable (Int32) -> Void)
        case ignore
        case exitNow
    }

    /// Where the signals are taken: a serial queue, whose thread is Dispatch's, not the concurrency pool's.
    private static let queue = DispatchQueue(label: "hr-gateway.signals")

    private let state: Locked<State>
    /// Kept while the signals are taken (a source retains its handler until cancelled).
    private let sources: Sources

    /// The signal sources, cancelled with their owner.
    // @unchecked Sendable: set once, in `init`, and only cancelled afterwards (in `deinit`); a Dispatch source may be cancelled from any thread.
    private final class Sources: @unchecked Sendable {
        let all: [any DispatchSourceSignal]
        init(_ all: [any DispatchSourceSignal]) { self.all = all }
        deinit { for source in all { source.cancel() } }
    }

    private init(handler: @escaping @Sendable (Int32) -> Void, signals: [Int32]) {
        let state = Locked(State(handler: handler))
        self.state = state
        sources = Sources(signals.map { sig in
            let source = DispatchSource.makeSignalSource(signal: sig, queue: Self.queue)
            source.setEventHandler { Self.take(sig, state) }
            source.resume()
            return source
        })
    }

    private static func take(_ sig: Int32, _ state: Locked<State>) {
        let now = ContinuousClock.now
        let action = state.withLock { s -> Action in
            guard let first = s.first else {
                s.first = (sig, now)
                return s.handler.map(Action.handle) ?? .exitNow
            }
            return first.signal == sig && now - first.at < sameRequestWindow ? .ignore : .exitNow
        }
        switch action {
        case .handle(let handler): handler(sig)
        case .ignore: return
        case .exitNow:
            // Said, since the shutdown it cuts short was delivering: what was committed stays where it is.
            StandardStream.error.write(Data(("second signal: exiting now; the session store keeps what it "
                + "recorded, and webhook and MQTT items not yet delivered stay in their outboxes for the next "
                + "start\n").utf8))
            exit(128 + sig)
        }
    }

    /// Routes the next SIGINT, SIGTERM or SIGHUP to `handler` instead of the default action, until `finishing()`.
    static func onSignal(_ handler: @escaping @Sendable (Int32) -> Void) async -> TerminationSignals {
        let hangUp = ignored(SIGHUP) ? [] : [SIGHUP]
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        if !hangUp.isEmpty { sigaddset(&set, SIGHUP) }
        // The sources first: a signal that waited blocked (sent while the process started) is then taken by them
        // when unblocked, not by the default action.
        let signals = TerminationSignals(handler: handler, signals: [SIGINT, SIGTERM] + hangUp)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
        return signals
    }

    /// Whether `signal` is ignored (SIG_IGN), as `nohup` leaves SIGHUP for the program it starts.
    private static func ignored(_ signal: Int32) -> Bool {
        var current = sigaction()
        guard sigaction(signal, nil, &current) == 0 else { return false }
        return unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self) == unsafeBitCast(SIG_IGN, to: Int.self)
    }

    /// The command is finishing: a first signal from now on is taken and ignored (so that a service manager's
    /// SIGTERM during the last writes does not turn a clean exit into 143); a second one exits at once.
    func finishing() { state.withLock { $0.handler = { _ in } } }
}
