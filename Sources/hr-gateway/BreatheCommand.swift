import ArgumentParser
import Foundation
import GatewayEngine
import SessionStore
import StdoutSink

struct BreatheCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "breathe",
        abstract: "Paced breathing with a pacer, and what your heart does about it; or find your resonance rate.",
        discussion: """
            A breathing session (mode breathing) with a pacer: breathing_cue events tell when to breathe in, hold \
            and breathe out (the live view shows them; so do the dashboard and phones with --listen), and the \
            frames add what the heart answers: RSA amplitude per breath, adherence of the breathing rate found in \
            the RR intervals to the paced one, and coherence (docs/hrv.md §12).

            Patterns: box (4-4-4-4), 4-7-8, coherent (6 /min, the default), resonance (5.5 /min), or your own \
            IN-HOLD-OUT[-HOLD] in seconds (such as 4-0-6-0).

            --find-resonance runs the resonance frequency assessment (Lehrer, Vaschillo & Vaschillo 2000) instead: \
            it paces 6.5, 6, 5.5, 5 and 4.5 breaths/min (--rates) for 2 minutes each (--step-sec), inhale as long \
            as exhale, and ranks the rates by the low-frequency peak of the heart-rate spectrum and the RSA \
            amplitude (docs/hrv.md §13). The session ends by itself after the last step and prints the table and \
            your resonance rate (in the live view; with --format jsonl the summary's metrics.resonance_assessment holds \
            them); it is stored with the session (`hr-gateway sessions show ID` prints the table). Stopped before \
            its end, it names no rate: a rate not measured may be yours. Breathe with the \
            pacer, relaxed, through the nose if you can; sit still, and keep the strap on skin: a step with lost \
            beats is not judged. Then practise at your rate: `hr-gateway breathe --pattern 5-0-5-0` paces 6 /min, \
            IN-0-OUT-0 with IN = OUT = 30 / rate in general.

            Recording and the configuration file work as for `stream` (see `hr-gateway stream --help`), except \
            the window: 120 s unless --window says otherwise, as coherence needs a minute of beats.

            Examples:
              hr-gateway breathe --strap auto
              hr-gateway breathe --strap auto --pattern 4-7-8 --duration 300
              hr-gateway breathe --strap auto --find-resonance
              hr-gateway breathe --strap auto --find-resonance --rates 6,5.5,5 \\
                  --step-sec 180
              hr-gateway breathe --simulate --find-resonance --step-sec 60 --format jsonl
              hr-gateway breathe --strap auto --listen 0.0.0.0:8765  (dashboard pacer)
            """
    )

    @OptionGroup var source: SourceOptions

    @Option(help: ArgumentHelp(
        "box, 4-7-8, coherent, resonance or IN-HOLD-OUT[-HOLD] in seconds. Default: the configuration's "
            + "session.pattern, else coherent.",
        valueName: "pattern"))
    var pattern: String?

    @Flag(help: "Run the resonance frequency assessment instead of a pattern.")
    var findResonance = false

    @Option(help: ArgumentHelp(
        "With --find-resonance: the paced rates in breaths/min, in order, comma-separated (3 to 10).",
        valueName: "list"))
    var rates: String?

    @Option(parsing: .unconditional, help: ArgumentHelp(
        "With --find-resonance: seconds per rate, 60 to 600 (in whole breaths, at least 6: a slow rate in a short "
            + "step is lengthened so that its spectrum resolves it).", valueName: "sec"))
    var stepSec: Int?

    @Option(parsing: .unconditional, help: ArgumentHelp(
        "Stop after SEC seconds (a whole number; a pattern, the assessment ends by itself). Default: until Ctrl-C.", valueName: "sec"))
    var duration: Int?

    @Option(parsing: .unconditional, help: ArgumentHelp(
        "Sliding window for the metrics, in seconds (coherence needs a minute of beats); the configuration's "
            + "session.window_sec is stream's, not this.",
        valueName: "sec"))
    var window: Int = 120

    @Option(help: ArgumentHelp("Session id (default: a new UUID).", valueName: "id"))
    var sessionId: String?

    @Option(parsing: .unconditional, help: ArgumentHelp(
        "With --simulate: the breathing rate at which the simulated heart answers most (a demonstration body; "
            + "default 5.5).",
        valueName: "rate"))
    var simulatedResonance: Double?

    @Option(help: ArgumentHelp("Output: pretty (live view), jsonl, or events (jsonl without frames and cues). Default: pretty on a terminal, jsonl otherwise."))
    var format: StreamCommand.OutputFormat?

    @Flag(help: "Do not record this session into the session store.")
    var noRecordDb = false

    @Flag(help: "Also publish Lab Streaming Layer streams, as `stream --lsl` does.")
    var lsl = false

    @OptionGroup var store: StoreOptions

    @OptionGroup(title: "Relay") var relay: RelayOptions

    mutating func validate() throws {
        if let sessionId, let problem = SessionConfig.sessionIdProblem(sessionId, named: "--session-id") {
            throw ValidationError(problem + ".")
        }
        // The file's [strap], [camera] and [relay] fill in what the options leave out, before they are checked.
        let settings = try store.settings()
        source.adopt(settings)
        relay.adopt(settings)
        try source.check()
        try source.checkReplay(store: store)
        if let pattern {
            if findResonance { throw ValidationError("--find-resonance paces its own rates: leave out --pattern.") }
            do { _ = try BreathingPattern(parsing: pattern) } catch { throw ValidationError("--pattern: \(error.message)") }
        }
        if !findResonance, rates != nil || stepSec != nil {
            throw ValidationError("--rates and --step-sec belong to --find-resonance.")
        }
        if findResonance, duration != nil {
            throw ValidationError("--find-resonance ends by itself after its last step: leave out --duration.")
        }
        if let d = duration, d <= 0 || d > SessionConfig.maxDurationSec {
            throw ValidationError("--duration must be 1 to \(SessionConfig.maxDurationSec) seconds, got \(d).")
        }
        if window <= 0 || window > SessionConfig.maxWindowSec {
            throw ValidationError("--window must be 1 to \(SessionConfig.maxWindowSec) seconds (a day), got \(window).")
        }
        if let simulatedResonance {
            guard source.simulate else {
                throw ValidationError("--simulated-resonance belongs to --simulate (a recording or a strap has its own "
                    + "heart).")
            }
            guard simulatedResonance.isFinite && (3...10).contains(simulatedResonance) else {
                throw ValidationError("--simulated-resonance must be 3 to 10 breaths/min.")
            }
        }
        if findResonance {
            do throws(SessionError) { try plan().validate() } catch {
                throw ValidationError(error.message.replacingOccurrences(of: "step_sec", with: "--step-sec"))
            }
        }
        try relay.check()
    }

    /// The assessment asked for; throws on a rate that is not a number.
    func plan() throws(SessionError) -> ResonancePlan {
        var plan = ResonancePlan()
        if let rates {
            var values: [Double] = []
            for part in rates.split(separator: ",", omittingEmptySubsequences: false) {
                guard let v = Double(part.trimmingCharacters(in: .whitespaces)) else {
                    throw .invalidState("--rates takes numbers separated by commas, such as 6.5,6,5.5,5,4.5")
                }
                values.append(v)
            }
            plan.rates = values
        }
        if let stepSec { plan.stepSec = stepSec }
        return plan
    }

    func run() async throws {
        // Said with this command's usage (thrown from run, ArgumentParser printed the top level's).
        do { try source.requireChosen() } catch { throw Self.usageFailure(error) }
        let clock = source.sessionClock()
        let settings = try store.settings()
        let resonance = findResonance ? try plan() : nil
        let paced = try pattern.map { p throws(SessionError) in try BreathingPattern(parsing: p) }
            ?? settings.breathingPattern ?? BreathingPattern.named.first { $0.name == "coherent" }!.pattern
        let config = SessionConfig(
            sessionId: sessionId ?? UUID().uuidString.lowercased(),
            mode: .breathing,
            durationSec: resonance?.sessionDurationSec ?? duration ?? SessionConfig.untilStopped,
            profile: ComputeProfile(windowSec: window, emitIntervalSec: settings.emitIntervalSec),
            breathingPattern: resonance == nil ? paced : nil,
            resonance: resonance)
        let providers = try source.providers(clock: clock, store: store, simulatedResonanceBpm: simulatedResonance ?? 5.5)
        let output = format ?? (isatty(STDOUT_FILENO) == 1 ? .pretty : .jsonl)
        if let resonance, output == .pretty {
            let minutes = Double(resonance.sessionDurationSec) / 60
            StandardStream.error.write(Data(
                "Resonance assessment: \(resonance.rates.count) steps, about \(String(format: "%.0f", minutes.rounded(.up))) minutes.\n".utf8))
        }
        let relayDirectory = relay.listen == nil ? nil : try store.directory()
        let lslSink = lsl ? try StreamCommand.lslSink() : nil
        // Last before the session: a command that fails before this leaves nothing in the store.
        // Signals are taken from before the recording exists (`SessionStop`).
        let stop = await SessionStop.install()
        let recorder = noRecordDb || !settings.record ? nil : try store.recorder(config, settings, clock: clock)
        let exitCode = try await SessionRunner(
            config: config,
            providers: providers,
            correction: .kubios,
            output: output.output,
            recordPath: nil,
            recorder: recorder,
            stopWhenSourcesEnd: source.onlyReplay && duration == nil && resonance == nil,
            relay: relayDirectory.map { (relay, $0) },
            lsl: lslSink,
            endNote: recorder.flatMap { $0.isRecording ? StreamCommand.recordedNote($0, stateDir: store.stateDir) : nil },
            clock: clock,
            stop: stop
        ).run()
        if exitCode != 0 { throw ExitCode(exitCode) }
    }
}
