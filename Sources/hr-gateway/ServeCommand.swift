import ArgumentParser
import Foundation
import GatewayEngine
import GatewayMetrics
import GatewaySink
import Logging
import MQTTSink
import RelayCore
import StdoutSink
import WebhookSink

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Wait for a phone (or any relay consumer) to start sessions, and relay their events.",
        discussion: """
            Listens at ws://HOST:PORT/v1/relay and behaves like a watch: a consumer sends the Synheart relay's \
            start_session / stop_session dictionaries, and every connected consumer receives the session's events \
            (session_started, session_frame, biosignal_frame, sensor_status, session_summary) as JSON text frames. \
            The protocol is in docs/relay-protocol.md.

            Consumers authenticate with a token (Authorization: Bearer TOKEN at the upgrade; otherwise HTTP 401). \
            Create one first with `hr-gateway token create --name phone`; --read-only tokens receive events but \
            cannot start or stop sessions. Tokens are read from the state directory on every connection, so \
            tokens created or revoked while serve runs take effect at once.

            The line `relay: listening on ws://HOST:PORT/v1/relay` is printed on stdout once connections are \
            accepted (with port 0, it shows the port chosen). Ctrl-C, SIGTERM or SIGHUP (the terminal gone; run it \
            as a service or under nohup to keep it) stops a running session (its summary is relayed and \
            recorded) and exits.

            The configuration file's relay.listen (and relay.tls) stand in for --listen (and --tls), and its \
            [strap] devices and [camera] device for the source options when none is given (see `hr-gateway \
            config check`).

            Every session a consumer starts is recorded into the session store, as `stream` records its own \
            (`hr-gateway sessions list`; each sample made durable as it arrives, so kill -9 loses nothing \
            received; store.keep_days prunes older ones first); --no-record-db or store.record = false turns \
            that off. With --webhook URL (or $HR_GATEWAY_WEBHOOK, else the configuration's webhook.url), each \
            session's summary is posted there through the durable outbox, as `stream --webhook` posts its own \
            (sample batches are stream's).

            Examples:
              hr-gateway token create --name phone
              hr-gateway serve --simulate --listen 0.0.0.0:8765
              hr-gateway serve --replay beats.jsonl --listen 127.0.0.1:8765 --no-auth
              hr-gateway attach ws://127.0.0.1:8765/v1/relay --token TOKEN \\
                  --start focus --duration 60
              hr-gateway serve --simulate --token SECRET \\
                  --connect wss://phone-relay.example/gw
              hr-gateway serve --simulate --gateway-id gym-1 \\
                  --mqtt mqtt://gym-1@broker.lan --mqtt-password-file mqtt.pw \\
                  --metrics-listen 127.0.0.1:9464

            With --mqtt, sessions are started and stopped by the same command dictionaries published on \
            hr-gateway/ID/cmd (results on hr-gateway/ID/cmd_result); who may publish there is the broker's ACL.
            """
    )

    @OptionGroup var source: SourceOptions
    @OptionGroup(title: "Relay") var relay: RelayOptions
    @OptionGroup var store: StoreOptions

    @OptionGroup(title: "Dial out") var uplink: UplinkOptions

    @OptionGroup(title: "MQTT") var mqtt: MQTTOptions

    @OptionGroup(title: "Metrics") var metrics: MetricsOptions

    @Flag(help: "Do not record the sessions into the session store.")
    var noRecordDb = false

    @Option(help: ArgumentHelp(
        "POST each session's session_summary to this http:// or https:// URL, through a durable outbox retried "
            + "until it answers 2xx (default: $HR_GATEWAY_WEBHOOK, else the configuration's webhook.url).",
        valueName: "url"))
    var webhook: String?

    mutating func validate() throws {
        // The file's [strap], [camera] and [relay] fill in what the options leave out, before they are checked.
        let settings = try store.settings()
        // An option for an output that is not there did nothing without a word, as in stream.
        try relay.checkTLSHasARelay(settings)
        try mqtt.checkGraceHasABroker(settings)
        source.adopt(settings)
        relay.adopt(settings)
        metrics.adopt(settings)
        try source.check()
        try source.checkReplay(store: store)
        if let speed = source.replaySpeed, speed != 1 {
            throw ValidationError("--replay-speed \(SourceOptions.speedText(speed)): serve replays in real time (its "
                + "sessions start whenever a phone asks); to go through a recording faster, use stream --replay.")
        }
        try mqtt.check()
        try metrics.check(relayListen: relay.listen)
        try uplink.check()
        try relay.check()
    }

    func run() async throws {
        // Here, not in validate(): ArgumentParser validates before it reports an unknown option (`--listne`).
        // Said with this command's usage (thrown from run, ArgumentParser printed the top level's).
        do { try source.requireChosen() } catch { throw Self.usageFailure(error) }
        let configuredBroker = try store.settings().mqttURL
        if relay.listen == nil && uplink.connect == nil && mqtt.mqtt == nil && configuredBroker == nil {
            throw Self.usageFailure(ValidationError(
                "serve needs --listen HOST:PORT (such as 0.0.0.0:8765), --connect URL, --mqtt URL, or several of them "
                    + "(or relay.listen or mqtt.url in the configuration file)."))
        }
        // A consumer or broker socket that goes away, or a closed standard output, must not end the service.
        StandardStream.ignoreBrokenPipe()
        let clock = SystemSessionClock()
        let settings = try store.settings()
        let providers = try source.providers(clock: clock, store: store)
        let outputs = SessionOutputs()
        // Recording first on each provider's path: a sample is durable before any other output or the engine has it.
        let recording = noRecordDb || !settings.record ? nil : ServeRecording(store: store, settings: settings, clock: clock)
        var webhook: ServeWebhook?
        if let text = self.webhook ?? settings.webhookURL {
            let url: URL
            do { url = try parseWebhookURL(text) } catch {
                throw CommandFailure("\(self.webhook == nil ? "webhook.url" : "--webhook"): \(error)")
            }
            webhook = WebhookDelivery.forwarderForSession(stateDir: try store.directory(), settings: settings).map {
                ServeWebhook(WebhookDelivery(
                    forwarder: $0, url: url, samples: false, batchSize: settings.webhookBatchSize,
                    graceSec: settings.webhookGraceSec))
            }
            if settings.webhookSamples {
                StandardStream.error.write(Data(("note: serve posts each session's summary to the webhook; sample "
                    + "batches (webhook.samples) are stream's\n").utf8))
            }
        }
        let engine = SessionEngine(providers: providers.map { p in outputs.tap(recording?.tap(p) ?? p) })
        let gatewayMetrics = relay.listen == nil && metrics.metricsListen == nil ? nil : GatewayMetrics()
        // Every listener bound before the relay's "listening" line: it is the sign that the gateway is up.
        var metricsServer: MetricsServerSink?
        if let gatewayMetrics, let listen = metrics.metricsListen {
            metricsServer = try await MetricsServerSink.start(gatewayMetrics, listen: listen)
        }
        let runtime: RelayRuntime? = relay.listen == nil
            ? nil
            : try await RelayRuntime.start(
                relay, stateDirectory: try store.directory(), engine: engine, observe: false, metrics: gatewayMetrics,
                recording: recording)
        let hub = try runtime?.hub
            ?? RelayHub.forGateway(engine: engine, stateDirectory: store.directory(), recording: recording)
        if let recording { outputs.attach(recording) }
        // Every output through SessionOutputs, as in `stream`: the hub numbers and stores events on its sink's task,
        // never on the engine's delivery path.
        let hubSink = RelayHubSink(hub: hub)
        outputs.attach(hubSink)
        let relaying = Task { try? await hubSink.run() }
        // MQTT: events of every session started here, and commands from hr-gateway/ID/cmd through the same hub.
        let mqttSink = try mqtt.sink(
            sources: providers.map(\.name), settings: settings, stateDirectory: try store.directory())
        var publishing: Task<Void, Never>?
        if let mqttSink {
            mqttSink.acceptCommands { text in await hub.command(text, principal: .mqtt)?.jsonString }
            outputs.attach(mqttSink)
            publishing = Task { try? await mqttSink.run() }
        }
        var posting: Task<Void, Never>?
        if let webhook {
            outputs.attach(webhook)
            posting = Task { try? await webhook.run() }
        }
        if let gatewayMetrics {
            outputs.attach(MetricsSink(metrics: gatewayMetrics))
            if let webhook = webhook?.delivery { gatewayMetrics.collectOutbox("webhook") { webhook.forwarder.outboxDepth } }
            gatewayMetrics.collectRelay(hub)
            if let mqttSink { gatewayMetrics.collectOutbox("mqtt") { mqttSink.outboxDepth } }
        }
        outputs.observe(engine)
        let dialer = uplink.uplink(hub: hub)
        let dialing = dialer.map { UplinkOptions.start($0) }
        let (stopped, stop) = AsyncStream<Void>.makeStream()
        let signalled = Locked(false)
        let signals = await TerminationSignals.onSignal { _ in
            signalled.withLock { $0 = true }
            stop.yield()
        }
        defer { signals.finishing() }
        // Ends on a signal, or if the server fails.
        let failure = Task { () -> String? in
            guard let runtime else { return nil }
            do { try await runtime.task.value } catch { return "\(error)" }
            return nil
        }
        let watcher = Task {
            guard runtime != nil else { return }
            _ = await failure.value
            stop.yield()
        }
        var it = stopped.makeAsyncIterator()
        await it.next()
        watcher.cancel()
        if let s = engine.getStatus() { try? await engine.stopSession(sessionId: s.sessionId) }
        await recording?.finish()
        // The summary reaches the hub before the uplink and the consumers get their grace.
        hubSink.close()
        await relaying.value
        if let dialer, let dialing { await uplink.finish(dialer, task: dialing) }
        await runtime?.stop()
        hub.closeAll()
        outputs.detach()
        mqttSink?.close()
        await publishing?.value
        webhook?.close()
        await posting?.value
        await metricsServer?.stop()
        await engine.dispose()
        if let message = await failure.value, !signalled.withLock({ $0 }) {
            StandardStream.error.write(Data("Error: relay stopped: \(message)\n".utf8))
            throw ExitCode(1)
        }
    }
}
