import Foundation
import GatewayEngine
import SessionStore
import SimulatedProvider
import Testing

@Suite struct BreatheCommandTests {
    func tempDir() -> String {
        let p = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-breathe-\(UUID().uuidString)").path
        try? FileManager.default.createDirectory(atPath: p, withIntermediateDirectories: true)
        return p
    }

    @Test func aPatternSessionPacesAndIsListedWithItsPattern() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let run = try CLI.run(["breathe", "--simulate", "--pattern", "box", "--duration", "3", "--format", "jsonl",
                               "--session-id", "b-1", "--state-dir", dir])
        #expect(run.status == 0, "\(run.stderr)")
        let events = try run.lines.map { try JSONValue(parsing: $0) }
        let cues = events.filter { $0["type"] == .string("breathing_cue") }
        #expect(cues.first?["phase"] == .string("inhale") && cues.first?["phase_duration_ms"] == .int(4000))
        #expect(cues.allSatisfy { $0["pattern"] == .string("box") && $0["assessment_step"] == nil })
        #expect(events.last?["type"] == .string("session_summary"))
        #expect(events.last?["metrics"]?["paced_breathing_rate_bpm"]?.doubleValue == 3.75)
        let list = try CLI.run(["sessions", "list", "--state-dir", dir])
        #expect(list.lines.last?.contains("box") == true, "\(list.stdout)")
    }

    @Test func withoutAPatternItPacesCoherentBreathing() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let run = try CLI.run(["breathe", "--simulate", "--duration", "2", "--format", "jsonl", "--no-record-db",
                               "--state-dir", dir])
        #expect(run.status == 0, "\(run.stderr)")
        let cue = try run.lines.map { try JSONValue(parsing: $0) }.first { $0["type"] == .string("breathing_cue") }
        #expect(cue?["pattern"] == .string("coherent") && cue?["phase_duration_ms"] == .int(5000))
    }

    @Test(arguments: [
        (["--find-resonance", "--pattern", "box"], "leave out --pattern"),
        (["--rates", "6,5"], "belong to --find-resonance"),
        (["--find-resonance", "--rates", "6,fast"], "numbers separated by commas"),
        (["--find-resonance", "--rates", "12"], "3 to 10 breaths/min"),
        (["--find-resonance", "--step-sec", "30"], "60 to 600 s"),
        (["--find-resonance", "--duration", "60"], "ends by itself"),
        (["--pattern", "fast"], "Invalid breathing pattern"),
    ])
    func mistakesAreRefusedWithTheFix(arguments: [String], says: String) throws {
        let run = try CLI.run(["breathe", "--simulate"] + arguments)
        #expect(run.status != 0)
        #expect(run.stderr.contains(says), "\(run.stderr)")
    }

    /// The simulation's options with another source were accepted without a word (and did nothing).
    @Test func simulationOptionsBelongToSimulate() throws {
        let rec = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-sim-\(UUID().uuidString).jsonl").path
        try (BiosignalSample(timestampMs: 1_000, bpm: 60, rrIntervalsMs: [1000], deviceId: "A", source: "ble_hrm")
            .jsonValue.jsonString + "\n").write(toFile: rec, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: rec) }
        for (command, option, said) in [
            (["breathe"], ["--simulated-resonance", "9"], "--simulated-resonance belongs to --simulate"),
            (["breathe"], ["--model", "exercise-ramp"], "--model belongs to --simulate"),
            (["stream"], ["--seed", "5"], "--seed belongs to --simulate"),
        ] {
            let run = try CLI.run(command + ["--replay", rec, "--no-record-db"] + option)
            #expect(run.status == 64, "\(option): \(run.stderr)")
            #expect(run.stderr.contains(said), "\(run.stderr)")
        }
    }

    /// A whole assessment run by the engine in virtual time and recorded as `breathe` records it; the store's
    /// commands then show its result.
    @Test func aRecordedAssessmentIsListedAndShownWithItsTable() async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let plan = ResonancePlan()
        let config = SessionConfig(
            sessionId: "assess-1", mode: .breathing, durationSec: plan.sessionDurationSec,
            profile: ComputeProfile(windowSec: 120), resonance: plan)
        let clock = ManualSessionClock()
        let recorder = SessionRecorder(store: try SessionStore(directory: dir), config: config) { Issue.record("\($0)") }
        let sim = SimulatedBiosignalProvider(physiology: .following(config, resonanceRateBpm: 5), seed: 7, clock: clock)
        let engine = SessionEngine(providers: [recorder.wrap(sim)], clock: clock)
        recorder.attach(to: engine)
        _ = try await engine.startSession(config)
        clock.advance(byMs: Int64(plan.sessionDurationSec) * 1000)
        await engine.idle()
        recorder.finish()

        let list = try CLI.run(["sessions", "list", "--state-dir", dir])
        #expect(list.lines.last?.hasSuffix("resonance 5/min") == true, "\(list.stdout)")
        let show = try CLI.run(["sessions", "show", "assess-1", "--state-dir", dir])
        #expect(show.status == 0, "\(show.stderr)")
        #expect(show.stdout.contains("your resonance rate is 5 breaths/min"), "\(show.stdout)")
        let marked = show.lines.filter { $0.hasSuffix("<- resonance") }
        #expect(marked.count == 1 && marked.first?.trimmingCharacters(in: .whitespaces).hasPrefix("5 ") == true)
        #expect(show.lines.filter { $0.range(of: #"^  (6\.5|6|5\.5|5|4\.5) "#, options: .regularExpression) != nil }.count == 5)
    }
}
