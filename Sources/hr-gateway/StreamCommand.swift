import ArgumentParser
import Foundation
import GatewayEngine
import HRVAnalysis
import Logging
import ReplayProvider
import SimulatedProvider
import StdoutSink

struct StreamCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stream",
        abstract: "Run a live session and print its events.",
        discussion: """
            Starts one session over the chosen sources and prints the Synheart session events: session_started, \
            a session_frame every --emit-interval seconds (heart rate over the last --window seconds, HRV and \
            breathing from RR intervals), biosignal_frame with --raw, sensor_status when a source changes state, \
            and session_summary at the end. Ctrl-C or SIGTERM stops the session cleanly and prints the summary.

            Sources:
              --strap auto                 the first heart-rate strap found (BLE, through bluetoothd)
              --strap AA:BB:CC:DD:EE:FF    a strap by address; --strap "Polar H10" by name prefix
              --strap auto --strap auto    two straps in one session, told apart by device_id
              --simulate                   a simulated strap: realistic RR with breathing and ectopic beats
              --simulate --model sdk-mock  the Synheart SDK's mock (72 + 5 sin(2πt/4) ± 2 bpm, 1 sample/s)
              --replay FILE                a recording made with --record
              --camera /dev/video0         a webcam: pulse and breathing from the face (rPPG); may run together \
            with the other sources

            Output: --format pretty (the default on a terminal) is a live one-screen view; --format jsonl (the \
            default in a pipe) writes one JSON event per line.

            Examples:
              hr-gateway stream --strap auto
              hr-gateway stream --strap "Polar H10" --adapter hci1 --raw --format jsonl
              hr-gateway stream --simulate
              hr-gateway stream --simulate --duration 300 --format jsonl > session.jsonl
              hr-gateway stream --simulate --mode breathing --window 120 --record beats.jsonl
              hr-gateway stream --replay beats.jsonl --replay-speed 10 --format jsonl
              hr-gateway stream --camera /dev/video0 --mains 60
              hr-gateway stream --simulate --camera /dev/video0 --camera-width 320 --camera-height 240
            """
    )

    @Option(name: .customLong("strap"), help: ArgumentHelp(
        "A BLE heart-rate strap: its address, a name prefix, or auto. Repeat for several straps.", valueName: "strap"))
    var straps: [String] = []

    @Option(help: ArgumentHelp("Bluetooth adapter for --strap (default: the first powered one).", valueName: "hciN"))
    var adapter: String?

    @Flag(help: "Use a simulated source (no hardware needed).")
    var simulate = false

    @Option(help: ArgumentHelp("Simulation model: realistic (RR with breathing and ectopic beats) or sdk-mock.", valueName: "model"))
    var model: SimulatedBiosignalProvider.Model = .realistic

    @Option(help: ArgumentHelp("Seed of the simulation, for repeatable runs.", valueName: "n"))
    var seed: UInt64 = 1

    @Option(help: ArgumentHelp("Replay a sample recording (JSON lines written by --record).", valueName: "file"))
    var replay: String?

    @Option(help: ArgumentHelp("Replay speed factor: 1 is real time, 10 is ten times faster.", valueName: "x"))
    var replaySpeed: Double = 1

    @OptionGroup(title: "Camera") var cameraSource: CameraOptions

    @OptionGroup var session: SessionOptions

    @Option(help: ArgumentHelp("Output: pretty (live view) or jsonl (one event per line). Default: pretty on a terminal, jsonl otherwise."))
    var format: OutputFormat?

    @Option(help: ArgumentHelp("Also write every sample received to FILE (JSON lines), for --replay.", valueName: "file"))
    var record: String?

    enum OutputFormat: String, ExpressibleByArgument, CaseIterable {
        case jsonl, pretty
    }

    func validate() throws {
        if !simulate && replay == nil && straps.isEmpty && cameraSource.camera == nil {
            throw ValidationError("Choose a source: --strap auto, --simulate or --replay FILE, and/or --camera DEVICE (see --help).")
        }
        if let adapter, !(adapter.hasPrefix("hci") && Int(adapter.dropFirst(3)) != nil) {
            throw ValidationError("--adapter takes a controller name such as hci0 (see `hr-gateway scan`).")
        }
        if simulate && replay != nil {
            throw ValidationError("--simulate and --replay cannot be combined.")
        }
        if !(replaySpeed > 0 && replaySpeed.isFinite) { throw ValidationError("--replay-speed must be a positive number.") }
        try cameraSource.check()
        try session.check()
    }

    func run() async throws {
        let clock = SystemSessionClock()
        var providers: [any BiosignalProvider] = []
        if !straps.isEmpty {
            var logger = Logger(label: "hr-gateway.strap")
            logger.logLevel = .warning
            providers += try makeStrapProviders(specs: straps, adapter: adapter, logger: logger)
        }
        if simulate {
            providers.append(SimulatedBiosignalProvider(model: model, seed: seed, clock: clock))
        }
        if let replay {
            guard FileManager.default.isReadableFile(atPath: replay) else {
                throw ValidationError("Cannot read \(replay): check the path and permissions.")
            }
            providers.append(ReplayBiosignalProvider(path: replay, speed: replaySpeed, clock: clock))
        }
        if let camera = cameraSource.provider(clock: clock) { providers.append(camera) }
        let config = session.config()
        let output = format ?? (isatty(STDOUT_FILENO) == 1 ? .pretty : .jsonl)
        let exitCode = try await SessionRunner(
            config: config,
            providers: providers,
            correction: session.correct,
            output: output == .pretty ? .pretty : .jsonl,
            recordPath: record,
            stopWhenSourcesEnd: replay != nil && straps.isEmpty && !simulate && session.duration == nil
        ).run()
        if exitCode != 0 { throw ExitCode(exitCode) }
    }
}

extension SimulatedBiosignalProvider.Model: ExpressibleByArgument {}
extension ArtifactCorrection: ExpressibleByArgument {}
extension SessionMode: ExpressibleByArgument {}

/// Session options shared by every command that runs a session.
struct SessionOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Session mode: focus, breathing (paced breathing: respiration searched down to 3 /min) or typing."))
    var mode: SessionMode = .focus

    @Option(help: ArgumentHelp("Stop after SEC seconds. Without it the session runs until Ctrl-C or SIGTERM.", valueName: "sec"))
    var duration: Int?

    @Option(help: ArgumentHelp("Sliding window for the metrics, in seconds.", valueName: "sec"))
    var window: Int = 60

    @Option(help: ArgumentHelp("Seconds between session_frame events.", valueName: "sec"))
    var emitInterval: Int = 5

    @Flag(help: "Also emit biosignal_frame events with the raw samples of the window.")
    var raw = false

    @Option(help: ArgumentHelp("Seconds between biosignal_frame events (default: the emit interval).", valueName: "sec"))
    var rawInterval: Int?

    @Option(help: ArgumentHelp("Session id (default: a new UUID).", valueName: "id"))
    var sessionId: String?

    @Option(help: ArgumentHelp("RR artefact correction before HRV: kubios or none."))
    var correct: ArtifactCorrection = .kubios

    func check() throws {
        if let d = duration, d <= 0 { throw ValidationError("--duration must be a positive number of seconds.") }
        if window <= 0 { throw ValidationError("--window must be a positive number of seconds.") }
        if emitInterval <= 0 { throw ValidationError("--emit-interval must be a positive number of seconds.") }
        if let r = rawInterval, r <= 0 { throw ValidationError("--raw-interval must be a positive number of seconds.") }
    }

    func config() -> SessionConfig {
        SessionConfig(
            sessionId: sessionId ?? UUID().uuidString.lowercased(),
            mode: mode,
            // No --duration: run until stopped (the timer is set about 68 years out).
            durationSec: duration ?? Int(Int32.max),
            profile: ComputeProfile(windowSec: window, emitIntervalSec: emitInterval, rawEmitIntervalSec: rawInterval),
            includeRawSamples: raw || rawInterval != nil
        )
    }
}
