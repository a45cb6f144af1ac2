import ArgumentParser
import BLEHeartRate
import Foundation
import GatewayConfig
import GatewayEngine
import Logging
import ReplayProvider
import SessionStore
import SimulatedProvider
import StdoutSink

/// The sources a session reads, shared by every command that runs the engine (`stream`, `serve`).
/// A new source is an option here plus a case in `providers(clock:store:)`.
struct SourceOptions: ParsableArguments {
    @Option(name: .customLong("strap"), help: ArgumentHelp(
        "A BLE heart-rate strap: its address, a name prefix, or auto. Repeat for several straps. Without any source "
            + "option, the configuration's [strap] devices and [camera] device are the sources.", valueName: "strap"))
    var straps: [String] = []

    @Option(help: ArgumentHelp("Bluetooth adapter for --strap (default: the configuration's strap.adapter, else the first powered one).", valueName: "hciN"))
    var adapter: String?

    @Flag(help: ArgumentHelp(
        "With --strap: also stream raw ECG (130 Hz, µV) from a Polar strap's measurement service (H10), pairing "
            + "with it when it asks; ECG chunks go into the session store, --raw frames and EDF exports (docs/pmd.md). "
            + "Default: the configuration's strap.ecg."))
    var ecg = false

    @Option(parsing: .unconditional, help: ArgumentHelp(
        "With --strap: also stream a Polar strap's accelerometer at HZ (25, 50, 100 or 200; ±8 g), as "
            + "accelerometer chunks in g and motion_rms_g / motion_sample_count in the frames. Default: the "
            + "configuration's strap.acc_hz.",
        valueName: "hz"))
    var acc: Int?

    @Flag(help: "Use a simulated source (no hardware needed).")
    var simulate = false

    @Option(help: ArgumentHelp("With --simulate: the model, realistic (RR with breathing and ectopic beats; the default), exercise-ramp (a 20-minute ramp for live DFA alpha1, then back down) or sdk-mock.", valueName: "model"))
    var model: SimulatedBiosignalProvider.Model?

    @Option(help: ArgumentHelp("With --simulate: the seed of the simulation, for repeatable runs (default 1).", valueName: "n"))
    var seed: UInt64?

    @Option(help: ArgumentHelp(
        "Replay a sample recording (JSON lines written by --record), or a session id from the session store.",
        valueName: "file|id"))
    var replay: String?

    @Option(parsing: .unconditional,
            help: ArgumentHelp(
                "With --replay: speed factor, 1 (the default) is real time, 10 is ten times faster. The session runs on "
                    + "the recording's time: the frames, windows and --duration of the recording, only sooner.",
                valueName: "x"))
    var replaySpeed: Double?

    @OptionGroup(title: "Camera") var camera: CameraOptions

    /// The configuration file these sources came from, when the command line named none (`adopt`).
    var fromFile: String?

    /// True when the command line names a source.
    var namesASource: Bool { simulate || replay != nil || !straps.isEmpty || camera.camera != nil }

    /// Takes the configuration's `[strap]` and `[camera]` for what the command line leaves out. A source named on the
    /// command line replaces all of the file's sources; without one, the file's straps and camera are the sources.
    /// The file's strap settings (adapter, ECG, accelerometer) apply to straps from either; an option given wins.
    mutating func adopt(_ settings: GatewayConfiguration) {
        if !namesASource && (!settings.strapDevices.isEmpty || settings.cameraDevice != nil) {
            straps = settings.strapDevices
            camera.camera = settings.cameraDevice
            fromFile = settings.sourcePath ?? "the configuration"
        }
        adapter = adapter ?? settings.strapAdapter
        if !straps.isEmpty {
            ecg = ecg || settings.strapECG
            acc = acc ?? settings.strapAccHz
        }
        camera.adopt(settings)
    }

    /// A strap name as the shell takes it: quoted when it holds a space ("Polar H10 1A2B3C4D").
    static func quoted(_ strap: String) -> String { strap.contains(" ") ? "\"\(strap)\"" : strap }

    /// The sources as options, for saying where they came from.
    var described: String {
        (straps.map { "--strap \(Self.quoted($0))" } + (camera.camera.map { ["--camera \($0)"] } ?? []))
            .joined(separator: " ")
    }

    /// True when a replay is the only source, so the session can end with the file.
    var onlyReplay: Bool { replay != nil && straps.isEmpty && !simulate && camera.camera == nil }

    /// Called at the start of `run()`, not from `validate()`: ArgumentParser validates before it reports an unknown
    /// option, so a mistyped source (`--simulat`) was answered "Choose a source" instead of "Unknown option
    /// '--simulat'. Did you mean '--simulate'?".
    func requireChosen() throws {
        if !simulate && replay == nil && straps.isEmpty && camera.camera == nil {
            throw ValidationError("Choose a source: --strap auto, --camera DEVICE, --simulate or --replay FILE (see --help), "
                + "or name one in the configuration file: [strap] devices = [\"auto\"] or [camera] device = \"/dev/video0\" "
                + "(`hr-gateway config check` shows which file is read).")
        }
    }

    func check() throws {
        if let adapter, !GatewayConfiguration.isAdapterName(adapter) {
            throw ValidationError("--adapter takes a controller name such as hci0 (see `hr-gateway scan`).")
        }
        if simulate && replay != nil {
            throw ValidationError("--simulate and --replay cannot be combined.")
        }
        if !simulate, model != nil || seed != nil {
            throw ValidationError("--\(model != nil ? "model" : "seed") belongs to --simulate (a recording or a strap "
                + "has its own beats).")
        }
        if ecg && straps.isEmpty {
            throw ValidationError("--ecg streams a Polar strap's ECG: use it with --strap (such as --strap \"Polar H10\").")
        }
        if let acc {
            guard !straps.isEmpty else {
                throw ValidationError("--acc streams a Polar strap's accelerometer: use it with --strap.")
            }
            guard PolarStreams.accRates.contains(acc) else {
                throw ValidationError("--acc takes 25, 50, 100 or 200 (Hz), the rates a Polar H10 offers.")
            }
        }
        if let replaySpeed {
            guard replay != nil else { throw ValidationError("--replay-speed sets the speed of --replay; there is no --replay.") }
            guard replaySpeed > 0 && replaySpeed.isFinite else { throw ValidationError("--replay-speed must be a positive number.") }
            if replaySpeed != 1, !onlyReplay {
                throw ValidationError("--replay-speed \(Self.speedText(replaySpeed)) runs the session on the recording's "
                    + "time, which a live source (--strap, --camera) cannot follow: replay alone, or at speed 1.")
            }
        }
        try camera.check()
    }

    /// The clock of a session over these sources. A replay faster than real time as the only source runs the session
    /// on the recording's time (`ScaledSessionClock`): frames every emit interval of the recording, its windows and
    /// pacing, `--duration` and the summary's duration in the recording's seconds. Replay providers made by
    /// `providers(clock:…)` with that clock then play at its pace.
    func sessionClock() -> any SessionClock {
        guard let rate = recordingTimeRate else { return SystemSessionClock() }
        return ScaledSessionClock(base: SystemSessionClock(), rate: rate)
    }

    /// The rate of the recording's time when the session runs on it (a replay alone, faster or slower than real
    /// time); nil when it runs in real time.
    var recordingTimeRate: Double? {
        guard onlyReplay, let replaySpeed, replaySpeed != 1 else { return nil }
        return replaySpeed
    }

    static func speedText(_ speed: Double) -> String {
        speed == speed.rounded() && abs(speed) < 1e15 ? String(Int64(speed)) : String(speed)
    }

    /// A `--replay` that is not a file must name a stored session (its id or a unique prefix of it). Checked while
    /// the options are validated, so that a mistake is reported with this command's usage.
    func checkReplay(store: StoreOptions) throws {
        guard let replay else { return }
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: replay, isDirectory: &isDirectory) {
            if isDirectory.boolValue {
                throw ValidationError("--replay \(replay) is a directory: give a recording (JSON lines, as --record "
                    + "writes them) or a recorded session's id.")
            }
            return
        }
        let dir = store.quietDirectory()
        let notFound = ValidationError(
            "\(replay) is neither a file nor a session in \(dir)/sessions.sqlite: check the path, or list sessions "
                + "with `hr-gateway sessions list`.")
        guard FileManager.default.fileExists(atPath: dir + "/sessions.sqlite") else { throw notFound }
        do { _ = try SessionStore.existing(directory: dir)?.resolve(replay) } catch StoreError.sessionNotFound {
            throw notFound
        } catch { throw ValidationError("--replay \(replay): \(error)") }
    }

    /// The chosen sources, ready for a `SessionEngine`. A `--replay` that is not a file is looked up in `store`. In a
    /// paced session (a breathing pattern or a resonance assessment), whether started here or by a phone through
    /// `serve`, the simulated strap follows the pacer, with its RSA largest at `simulatedResonanceBpm`
    /// (docs/engine.md).
    func providers(clock: any SessionClock, store: StoreOptions, simulatedResonanceBpm: Double = 5.5) throws
        -> [any BiosignalProvider]
    {
        if let fromFile {
            StandardStream.error.write(Data("sources: \(described) (from \(fromFile))\n".utf8))
        }
        var providers: [any BiosignalProvider] = []
        if !straps.isEmpty {
            var logger = Logger(label: "hr-gateway.strap")
            logger.logLevel = .warning
            providers += try makeStrapProviders(
                specs: straps, adapter: adapter,
                polar: ecg || acc != nil ? PolarStreams(ecg: ecg, accHz: acc) : nil, logger: logger)
        }
        if simulate {
            providers.append(SimulatedBiosignalProvider(
                model: model ?? .realistic, followsSessionPacing: simulatedResonanceBpm, seed: seed ?? 1, clock: clock))
        }
        if let replay {
            // On the recording's time (`sessionClock()` runs at the replay's speed), the replay follows that clock.
            let replaySpeed = recordingTimeRate != nil ? 1 : replaySpeed
            if FileManager.default.fileExists(atPath: replay) {
                guard FileManager.default.isReadableFile(atPath: replay) else {
                    throw ValidationError("Cannot read \(replay): check its permissions.")
                }
                // Read now, before the session: a file that cannot be replayed is refused with nothing started,
                // stored or recorded, and a long one does not delay the replay's start.
                let contents: SampleFile.Contents
                do { contents = try SampleFile.read(path: replay) } catch {
                    throw CommandFailure("--replay \(error)")
                }
                // A span no session can last (a mistyped or corrupt timestamp_ms, years ahead): the session would
                // end at its longest duration, the samples after the jump never replayed.
                let times = contents.samples.map(\.timestampMs)
                if let first = times.min(), let last = times.max(), last - first > Int64(SessionConfig.maxDurationSec) * 1000 {
                    let line = contents.longestGapLine.map { " (the jump is before line \($0))" } ?? ""
                    throw CommandFailure("--replay \(replay): its samples span \((last - first) / 86_400_000) days\(line), "
                        + "longer than a session can last (\(SessionConfig.maxDurationSec) s): a wrong timestamp_ms? "
                        + "Correct or remove that line.")
                }
                providers.append(ReplayBiosignalProvider(
                    contents: contents, label: replay, speed: replaySpeed ?? 1, clock: clock))
            } else {
                guard let stored = try store.existing() else {
                    throw CommandFailure("--replay \(replay): no such file, and no recorded session to name: "
                        + "\(try store.directory()) holds no session store.")
                }
                let id: String
                do { id = try stored.resolve(replay) } catch { throw CommandFailure("--replay \(replay): \(error)") }
                let samples = try stored.samples(sessionId: id)
                guard !samples.isEmpty else {
                    throw CommandFailure("--replay \(replay): session \(id) has no samples recorded: choose another "
                        + "(`hr-gateway sessions list` shows each one's samples).")
                }
                // From the session's start to its end (or its last sample, when it did not end): the replay has
                // the recording's frames, windows and duration.
                let span = try stored.session(id: id).flatMap { s in
                    (s.endedAtMs ?? s.lastSampleMs).map { (startMs: s.startedAtMs, endMs: $0) }
                }
                providers.append(ReplayBiosignalProvider(
                    samples: samples, label: "session \(id)", speed: replaySpeed ?? 1, span: span, clock: clock))
            }
        }
        if let provider = try camera.provider(clock: clock) { providers.append(provider) }
        return providers
    }
}
