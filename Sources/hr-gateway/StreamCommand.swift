import ArgumentParser
import Foundation
import GatewayMetrics
import GatewayConfig
import GatewayEngine
import HRVAnalysis
import LSLSink
import Logging
import ReplayProvider
import SessionStore
import SimulatedProvider
import StdoutSink
import WebhookSink

extension StreamCommand {
    /// Why `hr-gateway stream` would refuse `sources` (HR_GATEWAY_SOURCE, as the service passes it: split at white
    /// space), in its own words; nil when it takes them.
    static func problem(withSources sources: String) -> String? {
        do {
            _ = try parse(sources.split(whereSeparator: \.isWhitespace).map(String.init))
            return nil
        } catch {
            return message(for: error)
        }
    }
}

struct StreamCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stream",
        abstract: "Run a live session and print its events.",
        discussion: """
            Starts one session over the chosen sources and prints the Synheart session events: session_started, \
            a session_frame every --emit-interval seconds (heart rate over the last --window seconds, HRV and \
            breathing from RR intervals), biosignal_frame with --raw, sensor_status when a source changes state, \
            and session_summary at the end. Ctrl-C, SIGTERM or SIGHUP (the terminal gone) stops the session \
            cleanly and prints the summary.

            Sources:
              --strap auto            the first heart-rate strap found (BLE, bluetoothd)
              --strap AA:BB:CC:DD:EE:FF  a strap by address
              --strap "Polar H10"     a strap by name prefix
              --strap auto --strap auto  two straps, told apart by device_id
              --simulate              a simulated strap: RR with breathing and
                                      ectopic beats, 0-2 RR per notification
              --simulate --model sdk-mock
                                      the Synheart SDK's mock (72 + 5 sin(2πt/4)
                                      ± 2 bpm, one sample a second)
              --replay FILE           a recording made with --record (or with
                                      `sessions export --format jsonl`)
              --replay ID             a session in the session store (an id or
                                      its first characters; `sessions list`)
              --camera /dev/video0    a webcam: pulse and breathing from the face
                                      (rPPG); combines with the other sources
                                      (camera values go under camera_* keys,
                                      hr_mean_bpm stays the strap's)

            Recording: every session is recorded by default into the session store (sessions.sqlite in the \
            state directory, see --state-dir): each sample with its RR intervals as it arrives, every event, and \
            the session's configuration. A session killed mid-way keeps everything received and lists as \
            interrupted. --no-record-db turns this off; --keep-days N deletes sessions older than N days first. A \
            recording failure (disk full, permission) is reported once on standard error and the session goes on.

            Configuration: --mode, --window, --emit-interval, --keep-days, recording, the webhook, MQTT, the relay \
            (--listen, TLS) and the strap and camera settings default to the configuration file (see --config and \
            `hr-gateway config check`), then HR_GATEWAY_* variables override the file and options override both. \
            With no source option, the file's [strap] devices and [camera] device are the sources (said on \
            standard error); a source option replaces all of them.

            Webhook: --webhook URL posts the session_summary (its exact JSON, Content-Type: application/json) to \
            URL; --webhook-samples also posts the samples in batches ({"type":"biosignal_batch",…}). Each item is \
            written to outbox.sqlite in the state directory before it is sent, and retried with exponential \
            backoff (1 s, 2 s, 4 s … up to 5 min, plus jitter) until the server answers 2xx. After the session, \
            stream keeps trying for --webhook-grace seconds; what is left stays in the outbox and is delivered by \
            the next stream (which also delivers items left by earlier runs) or by `hr-gateway webhook flush`. \
            See `hr-gateway webhook status`.

            Relay: --listen HOST:PORT also publishes the session to phones and dashboards over WebSocket (see \
            `hr-gateway serve --help` and docs/relay-protocol.md); --connect ws://HOST:PORT/PATH --token T dials \
            out to a phone or backend that hosts the socket instead, sends it the events (reconnecting with \
            backoff; reliable events the far end has not acknowledged are sent again) and takes its \
            stop_session. At the end, stream waits up to --connect-grace seconds for the far end to have the \
            summary.

            Output: --format pretty (the default on a terminal) is a live one-screen view; --format jsonl (the \
            default in a pipe) writes one JSON event per line; --format events writes the same lines but the \
            frames (session_frame, biosignal_frame, breathing_cue), for a service whose log is kept on an SD card \
            (the session store has everything). When the program reading it exits (| head), the \
            session ends as on Ctrl-C, recorded with its summary; with another live output (--listen, --connect, \
            --webhook, --mqtt, --lsl) it goes on for that one.

            Examples:
              hr-gateway stream --strap auto
              hr-gateway stream --strap "Polar H10" --adapter hci1 --raw --format jsonl
              hr-gateway stream --simulate
              hr-gateway stream --simulate --duration 300 --format jsonl > session.jsonl
              hr-gateway stream --simulate --mode breathing --window 120 --record b.jsonl
              hr-gateway stream --replay b.jsonl --replay-speed 10 --format jsonl
              hr-gateway stream --camera /dev/video0 --mains 60
              hr-gateway stream --strap auto --camera /dev/video0
              hr-gateway stream --replay 3f2a9c1e --replay-speed 100   (a stored session)
              hr-gateway stream --strap auto --duration 600 \\
                  --webhook https://example.org/hr/summary
              hr-gateway stream --strap "Polar H10" --ecg --lsl   (to LabRecorder)
              hr-gateway stream --strap auto --listen 0.0.0.0:8765
              hr-gateway stream --strap auto --token SECRET \\
                  --connect ws://192.168.1.20:8080/gateway
            """
    )

    @OptionGroup var source: SourceOptions


    @OptionGroup var session: SessionOptions

    @Option(help: ArgumentHelp("Output: pretty (live view), jsonl (one event per line) or events (jsonl without the frames sent every second or more often: what a service's log wants). Default: pretty on a terminal, jsonl otherwise."))
    var format: OutputFormat?

    @Option(help: ArgumentHelp(
        "Also write every sample received to FILE (JSON lines), for --replay. A file that already holds data is "
            + "refused unless --overwrite.", valueName: "file"))
    var record: String?

    @Flag(help: "With --record: replace what the file holds.")
    var overwrite = false

    @Flag(help: "Do not record this session into the session store.")
    var noRecordDb = false

    @Option(parsing: .unconditional, help: ArgumentHelp(
        "Before starting, delete stored sessions that started more than N days ago (default: the configuration's "
            + "store.keep_days; 0 keeps every session). From today when an NTP client keeps the clock; otherwise from the "
            + "newest session, saying what it kept (`sessions prune --help`).",
        valueName: "n"))
    var keepDays: Int?

    @Option(help: ArgumentHelp(
        "POST the session_summary to this http:// or https:// URL, through a durable outbox retried until it "
            + "answers 2xx (default: $HR_GATEWAY_WEBHOOK, else the configuration's webhook.url).",
        valueName: "url"))
    var webhook: String?

    @Flag(help: "With a webhook, also POST the samples in batches of webhook.batch_size (default 60).")
    var webhookSamples = false

    @Option(parsing: .unconditional, help: ArgumentHelp(
        "Seconds to keep retrying the webhook after the session before leaving the rest in the outbox "
            + "(default: the configuration's webhook.grace_sec, else 10).",
        valueName: "sec"))
    var webhookGrace: Int?

    @Flag(help: ArgumentHelp(
        "Publish Lab Streaming Layer streams: per device HR (bpm), RR (ms, one per beat) and, with --ecg, ECG "
            + "(µV, 130 Hz), with LSL time stamps. Needs liblsl: `pip install pylsl` (docs/lsl.md)."))
    var lsl = false

    @OptionGroup var store: StoreOptions

    @OptionGroup(title: "Relay") var relay: RelayOptions

    @OptionGroup(title: "Dial out") var uplink: UplinkOptions

    @OptionGroup(title: "MQTT") var mqtt: MQTTOptions

    @OptionGroup(title: "Metrics") var metrics: MetricsOptions

    enum OutputFormat: String, ExpressibleByArgument, CaseIterable {
        case jsonl, pretty, events

        /// The runner's output for this format.
        var output: SessionRunner.Output {
            switch self {
            case .jsonl: .jsonl
            case .pretty: .pretty
            case .events: .events
            }
        }
    }

    mutating func validate() throws {
        // The file's [strap], [camera] and [relay] fill in what the options leave out, before they are checked.
        let settings = try store.settings()
        // An option for an output that is not there did nothing without a word (as --overwrite without --record
        // is refused).
        try relay.checkTLSHasARelay(settings)
        try mqtt.checkGraceHasABroker(settings)
        if webhookSamples || webhookGrace != nil, webhook == nil, settings.webhookURL == nil {
            throw ValidationError("--\(webhookSamples ? "webhook-samples" : "webhook-grace") is for --webhook URL; there "
                + "is no --webhook (nor HR_GATEWAY_WEBHOOK, nor [webhook] url in the configuration file).")
        }
        source.adopt(settings)
        relay.adopt(settings)
        metrics.adopt(settings)
        try source.check()
        try source.checkReplay(store: store)
        if let record, let replay = source.replay, SampleFileWriter.sameFile(record, replay) {
            throw ValidationError("--record \(record) is the file --replay reads: recording into it would erase it "
                + "before it is played. Record into another file.")
        }
        if let record, !overwrite, let size = SampleFileWriter.heldBytes(record) {
            throw ValidationError("--record \(record) already holds \(size) bytes (an earlier recording?): record into "
                + "another file, or add --overwrite to replace it.")
        }
        if overwrite && record == nil { throw ValidationError("--overwrite is for --record FILE; there is no --record.") }
        if let k = keepDays, k < 0 { throw ValidationError("--keep-days must be 0 or more.") }
        if let webhook {
            do { _ = try parseWebhookURL(webhook) } catch { throw ValidationError("--webhook: \(error)") }
        }
        if let g = webhookGrace, g < 0 { throw ValidationError("--webhook-grace must be 0 or more seconds.") }
        try session.check()
        try relay.check()
        try uplink.check()
        try mqtt.check()
        try metrics.check(relayListen: relay.listen)
    }

    func run() async throws {
        // Said with this command's usage (thrown from run, ArgumentParser printed the top level's).
        do { try source.requireChosen() } catch { throw Self.usageFailure(error) }
        let clock = source.sessionClock()
        let settings = try store.settings()
        let config = session.config(defaults: settings)
        let providers = try source.providers(clock: clock, store: store)
        let lslSink = lsl ? try Self.lslSink(gatewayId: mqtt.gatewayId ?? settings.mqttGatewayId) : nil
        let output = format ?? (isatty(STDOUT_FILENO) == 1 ? .pretty : .jsonl)
        var delivery: WebhookDelivery?
        if let text = webhook ?? settings.webhookURL {
            let url: URL
            do { url = try parseWebhookURL(text) } catch { throw CommandFailure("\(error)") }
            let dir = StateDirectory.resolve(option: store.stateDir, configured: settings.stateDir)
            delivery = WebhookDelivery.forwarderForSession(stateDir: dir, settings: settings).map { forwarder in
                WebhookDelivery(
                    forwarder: forwarder, url: url, samples: webhookSamples || settings.webhookSamples,
                    batchSize: settings.webhookBatchSize, graceSec: webhookGrace ?? settings.webhookGraceSec)
            }
        }
        let stateDirectory = try store.directory()
        let mqttSink = try mqtt.sink(sources: providers.map(\.name), settings: settings, stateDirectory: stateDirectory)
        // Last before the session: a command that fails before this leaves nothing in the store.
        // Signals are taken from before the recording exists (`SessionStop`).
        let stop = await SessionStop.install()
        let recorder = noRecordDb || !settings.record ? nil : try store.recorder(config, settings, keepDays: keepDays, clock: clock)
        let exitCode = try await SessionRunner(
            config: config,
            providers: providers,
            correction: session.correct,
            output: output.output,
            recordPath: record,
            recorder: recorder,
            stopWhenSourcesEnd: source.onlyReplay && session.duration == nil,
            relay: relay.listen == nil ? nil : (relay, stateDirectory),
            uplink: uplink.connect == nil ? nil : (uplink, stateDirectory),
            webhook: delivery,
            mqtt: mqttSink,
            metrics: relay.listen == nil && metrics.metricsListen == nil
                ? nil : (GatewayMetrics(), metrics.metricsListen),
            lsl: lslSink,
            endNote: recorder.flatMap { $0.isRecording ? Self.recordedNote($0, stateDir: store.stateDir) : nil },
            clock: clock,
            stop: stop
        ).run()
        if exitCode != 0 { throw ExitCode(exitCode) }
    }

    /// The Lab Streaming Layer sink, announced on standard error; a missing liblsl is a clear failure.
    static func lslSink(gatewayId: String? = nil) throws -> LSLSink {
        do throws(LSLLibrary.Unavailable) {
            let sink = try LSLSink(gatewayId: gatewayId)
            let v = sink.library.version
            StandardStream.error.write(Data(
                "lsl: publishing with liblsl \(v / 100).\(v % 100) (\(sink.library.path)); streams appear per device as data comes\n".utf8))
            return sink
        } catch {
            throw CommandFailure("--lsl: \(error)")
        }
    }

    /// Where the session was recorded and how to look at it.
    static func recordedNote(_ recorder: SessionRecorder, stateDir: String?) -> String {
        let option = stateDir.map { " --state-dir \($0)" } ?? ""
        return "Recorded as session \(recorder.sessionId) in \(recorder.databasePath).\n"
            + "Export its beats: hr-gateway sessions export \(recorder.sessionId)\(option) --format csv > beats.csv"
    }
}

extension SimulatedBiosignalProvider.Model: ExpressibleByArgument {}
extension ArtifactCorrection: ExpressibleByArgument {}
extension SessionMode: ExpressibleByArgument {}

/// Session options shared by every command that runs a session.
struct SessionOptions: ParsableArguments {
    @Option(help: ArgumentHelp(
        "Session mode: focus, breathing (paced breathing: respiration searched down to 3 /min) or typing. "
            + "Default: the configuration's session.mode, else focus."))
    var mode: SessionMode?

    // Numbers are taken as values even when they start with "-", so that `--duration -5` is refused as not
    // positive rather than reported as a missing value.
    @Option(parsing: .unconditional,
            help: ArgumentHelp("Stop after SEC seconds (a whole number). Without it the session runs until Ctrl-C or SIGTERM.", valueName: "sec"))
    var duration: Int?

    @Option(parsing: .unconditional, help: ArgumentHelp(
        "Sliding window for the metrics, in seconds. Default: the configuration's session.window_sec, else 60.",
        valueName: "sec"))
    var window: Int?

    @Option(parsing: .unconditional, help: ArgumentHelp(
        "Seconds between session_frame events. Default: the configuration's session.emit_interval_sec, else 5.",
        valueName: "sec"))
    var emitInterval: Int?

    @Flag(help: "Also emit biosignal_frame events with the raw samples of the window.")
    var raw = false

    @Option(parsing: .unconditional,
            help: ArgumentHelp("Seconds between biosignal_frame events (default: the emit interval).", valueName: "sec"))
    var rawInterval: Int?

    @Option(help: ArgumentHelp(
        "Paced breathing: box (4-4-4-4), 4-7-8, coherent (6 /min), resonance (5.5 /min) or IN-HOLD-OUT[-HOLD] in "
            + "seconds. Emits breathing_cue events and adds RSA, adherence and coherence to the frames. Implies "
            + "--mode breathing. Default: the configuration's session.pattern in breathing mode.",
        valueName: "pattern"))
    var pattern: String?

    @Option(help: ArgumentHelp("Session id (default: a new UUID).", valueName: "id"))
    var sessionId: String?

    @Option(help: ArgumentHelp("RR artefact correction before HRV: kubios, median (hr-gateway's own, docs/hrv.md) or none."))
    var correct: ArtifactCorrection = .kubios

    func check() throws {
        let (day, longest) = (SessionConfig.maxWindowSec, SessionConfig.maxDurationSec)
        if let d = duration, d <= 0 || d > longest { throw ValidationError("--duration must be 1 to \(longest) seconds, got \(d).") }
        if let w = window, w <= 0 || w > day { throw ValidationError("--window must be 1 to \(day) seconds (a day), got \(w).") }
        if let e = emitInterval, e <= 0 || e > day {
            throw ValidationError("--emit-interval must be 1 to \(day) seconds (a day), got \(e).")
        }
        if let r = rawInterval, r <= 0 || r > day {
            throw ValidationError("--raw-interval must be 1 to \(day) seconds (a day), got \(r).")
        }
        if let sessionId, let problem = SessionConfig.sessionIdProblem(sessionId, named: "--session-id") {
            throw ValidationError(problem + ".")
        }
        if let pattern {
            do { _ = try BreathingPattern(parsing: pattern) } catch { throw ValidationError("--pattern: \(error.message)") }
            if let mode, mode != .breathing {
                throw ValidationError("--pattern paces breathing: use it with --mode breathing (or without --mode).")
            }
        }
    }

    /// The session's configuration: these options over `defaults` (configuration file and environment).
    func config(defaults: GatewayConfiguration = GatewayConfiguration()) -> SessionConfig {
        let paced = pattern.flatMap { try? BreathingPattern(parsing: $0) }
        let mode = paced != nil ? .breathing : (mode ?? defaults.mode)
        return SessionConfig(
            sessionId: sessionId ?? UUID().uuidString.lowercased(),
            mode: mode,
            durationSec: duration ?? SessionConfig.untilStopped,
            profile: ComputeProfile(
                windowSec: window ?? defaults.windowSec, emitIntervalSec: emitInterval ?? defaults.emitIntervalSec,
                rawEmitIntervalSec: rawInterval),
            includeRawSamples: raw || rawInterval != nil,
            breathingPattern: paced ?? (mode == .breathing ? defaults.breathingPattern : nil)
        )
    }
}
