import Foundation
import GatewayEngine
import HRVAnalysis
import SimulatedProvider
import Testing

/// Paced breathing: patterns, `breathing_cue` events in virtual time, and the heart's answer in the metrics.
@Suite struct PacedBreathingTests {
    @Test func namedAndCustomPatternsParse() throws {
        let box = try BreathingPattern(parsing: "box")
        #expect(box.phases.map(\.phase) == [.inhale, .hold, .exhale, .holdOut] && box.cycleMs == 16_000)
        let sleep = try BreathingPattern(parsing: "4-7-8")
        #expect(sleep.phases.map(\.durationMs) == [4000, 7000, 8000] && sleep.phases.last?.phase == .exhale)
        #expect(try BreathingPattern(parsing: "coherent").rateBpm == 6)
        #expect(abs(try BreathingPattern(parsing: "Resonance").rateBpm - 5.5) < 0.01)
        let custom = try BreathingPattern(parsing: "4.5-0-5.5")
        #expect(custom.phases.map(\.durationMs) == [4500, 5500] && custom.name == "4.5-0-5.5")
        for bad in ["", "fast", "4-4", "0-0-4", "4-x-4", "4-4-4-4-4", "4-4-100", "-1-2-3"] {
            #expect(throws: SessionError.self, "\(bad)") { try BreathingPattern(parsing: bad) }
        }
    }

    @Test func aPatternNeedsBreathingModeAndTravelsInTheDictionary() throws {
        let json = try JSONValue(parsing: #"{"session_id":"b","mode":"breathing","duration_sec":60,"pattern":"4-7-8"}"#)
        let config = try SessionConfig(json: json)
        #expect(config.breathingPattern?.name == "4-7-8" && config.jsonValue["pattern"] == .string("4-7-8"))
        let focus = try JSONValue(parsing: #"{"session_id":"b","mode":"focus","duration_sec":60,"pattern":"box"}"#)
        #expect(throws: SessionError.self) { try SessionConfig(json: focus) }
        let number = try JSONValue(parsing: #"{"session_id":"b","mode":"breathing","duration_sec":60,"pattern":6}"#)
        #expect(throws: SessionError.self) { try SessionConfig(json: number) }
    }

    @Test(arguments: ["box", "4-7-8", "coherent", "resonance", "3-1-5-2"])
    func cuesFollowThePattern(name: String) async throws {
        let pattern = try BreathingPattern(parsing: name)
        let clock = ManualSessionClock(startMs: 1_000_000)
        let engine = SessionEngine(providers: [], clock: clock)
        let log = EventLog(engine)
        let seconds = Int(3 * pattern.cycleMs / 1000) + 2
        _ = try await engine.startSession(SessionConfig(
            sessionId: "p", mode: .breathing, durationSec: seconds, breathingPattern: pattern))
        clock.advance(toMs: 1_000_000 + Int64(seconds) * 1000)
        await log.ended()
        let cues = log.all.compactMap { e -> (at: Int64, cue: BreathingCue)? in
            if case .breathingCue(_, let at, let c) = e { (at, c) } else { nil }
        }
        let phases = pattern.phases
        #expect(cues.count >= 3 * phases.count)
        var start: Int64 = 1_000_000 + BreathingCue.firstBreathAfterMs
        for (i, c) in cues.enumerated() {
            let expected = phases[i % phases.count]
            #expect(c.cue.phase == expected.phase && c.cue.phaseDurationMs == expected.durationMs)
            #expect(c.cue.cycle == i / phases.count + 1)
            #expect(c.cue.startsAtMs == start, "cue \(i) starts at \(c.cue.startsAtMs), pattern says \(start)")
            #expect(c.cue.startsAtMs - c.at == BreathingCue.cueLeadMs)
            #expect(c.cue.pattern == pattern.name)
            start += expected.durationMs
        }
        #expect(log.last?.type == "session_summary")
    }

    /// Timers that fire late (the process got no CPU): a cue is still sent while its phase lasts, with the phase's
    /// true start, and skipped once its phase has ended.
    @Test func aLateCueIsSentWhileItsPhaseLastsAndSkippedAfter() async throws {
        let clock = ManualSessionClock(startMs: 1_000_000)
        let engine = SessionEngine(providers: [], clock: clock)
        let log = EventLog(engine)
        _ = try await engine.startSession(SessionConfig(
            sessionId: "p", mode: .breathing, durationSec: 12, breathingPattern: try BreathingPattern(parsing: "2-1-2-0")))
        // Phases: inhale 1 001 000, hold 1 003 000, exhale 1 004 000, inhale 1 006 000, hold 1 008 000, exhale 1 009 000.
        clock.advance(toMs: 1_002_000)
        clock.stall(byMs: 1_500)  // the hold's cue (due 1 002 700) fires at 1 003 500, halfway through the hold
        clock.advance(byMs: 0)
        clock.advance(toMs: 1_005_000)
        clock.stall(byMs: 3_100)  // 1 008 100: the second inhale (1 006 000-1 008 000) is over, its hold under way
        clock.advance(byMs: 0)
        clock.advance(toMs: 1_010_000)
        let cues = log.all.compactMap { e -> [Int64]? in
            if case .breathingCue(_, let at, let c) = e { [Int64(c.cycle), c.phaseDurationMs, c.startsAtMs, at] } else { nil }
        }
        #expect(cues == [
            [1, 2000, 1_001_000, 1_000_700],
            [1, 1000, 1_003_000, 1_003_500],
            [1, 2000, 1_004_000, 1_003_700],
            [2, 1000, 1_008_000, 1_008_100],
            [2, 2000, 1_009_000, 1_008_700],
        ])
    }

    @Test func noPatternNoCues() async throws {
        let clock = ManualSessionClock(startMs: 0)
        let engine = SessionEngine(providers: [], clock: clock)
        let log = EventLog(engine)
        _ = try await engine.startSession(SessionConfig(sessionId: "p", mode: .breathing, durationSec: 30))
        clock.advance(toMs: 30_000)
        await log.ended()
        #expect(!log.types.contains("breathing_cue"))
    }

    /// One provider for every session, as `serve` has: with `followsSessionPacing`, it reads each session's pacer
    /// from the engine (`ProviderSink.session`, through a `TappedProvider` as `serve`'s outputs wrap it) and breathes
    /// with it, at 6 /min in the first session and 7.5 /min in the second; the same provider without it keeps
    /// breathing at 12 /min. Synthetic RR: this proves the plumbing, not the physiology.
    @Test func oneProviderFollowsEachSessionsPacer() async throws {
        func adherence(follows: Bool) async throws -> [Double?] {
            let clock = ManualSessionClock(startMs: 0)
            let sim = SimulatedBiosignalProvider(followsSessionPacing: follows ? 5.5 : nil, seed: 3, clock: clock)
            let engine = SessionEngine(providers: [TappedProvider(sim, onSample: { _ in })], clock: clock)
            let log = EventLog(engine)
            var result: [Double?] = []
            for (i, pattern) in ["coherent", "3-0-5-0"].enumerated() {
                _ = try await engine.startSession(SessionConfig(
                    sessionId: "p\(i)", mode: .breathing, durationSec: 180,
                    profile: ComputeProfile(windowSec: 120, emitIntervalSec: 10),
                    breathingPattern: try BreathingPattern(parsing: pattern)))
                clock.advance(toMs: Int64(i + 1) * 180_000)
                await log.ended()
                guard case .summary(_, _, let m, _)? = log.last else { throw ProviderBroke() }
                result.append(m.breathingAdherence)
            }
            return result
        }
        let following = try await adherence(follows: true)
        let fixed = try await adherence(follows: false)
        #expect(following.allSatisfy { ($0 ?? 0) > 0.9 }, "adherence \(following)")
        #expect(fixed.allSatisfy { ($0 ?? 0) < 0.5 }, "adherence \(fixed)")
    }

    /// The simulated body that follows the pacer (at 6 /min, near its resonance) against one that keeps breathing at
    /// 12 /min under the same pacer: adherence, RSA and coherence tell them apart. Synthetic RR: this proves the
    /// arithmetic, not the physiology.
    @Test func theHeartsAnswerShowsInTheMetrics() async throws {
        func run(_ physiology: SimulatedBiosignalProvider.Physiology) async throws -> SessionMetrics {
            let clock = ManualSessionClock(startMs: 0)
            let sim = SimulatedBiosignalProvider(physiology: physiology, seed: 3, clock: clock)
            let engine = SessionEngine(providers: [sim], clock: clock)
            let log = EventLog(engine)
            _ = try await engine.startSession(SessionConfig(
                sessionId: "p", mode: .breathing, durationSec: 180, profile: ComputeProfile(windowSec: 120, emitIntervalSec: 10),
                breathingPattern: try BreathingPattern(parsing: "coherent")))
            clock.advance(toMs: 180_000)
            await log.ended()
            guard case .summary(_, _, let m, _)? = log.last else { throw ProviderBroke() }
            return m
        }
        let following = try await run(.paced(at: 6))
        let ignoring = try await run(SimulatedBiosignalProvider.Physiology(breathingRateBpm: 12))
        #expect(following.pacedBreathingRateBpm == 6 && ignoring.pacedBreathingRateBpm == 6)
        let adherence = try #require(following.breathingAdherence)
        #expect(adherence > 0.9, "adherence \(adherence)")
        #expect((ignoring.breathingAdherence ?? 0) < 0.5, "adherence \(String(describing: ignoring.breathingAdherence))")
        let rsa = try #require(following.rsaAmplitudeBpm)
        let rsaIgnoring = try #require(ignoring.rsaAmplitudeBpm)
        #expect(rsa > 2 * rsaIgnoring, "RSA \(rsa) vs \(rsaIgnoring) bpm")
        #expect((following.rsaBreaths ?? 0) >= 10)
        let coherence = try #require(following.coherence)
        #expect(coherence > 0.5 && coherence > (ignoring.coherence ?? 1), "coherence \(coherence) vs \(String(describing: ignoring.coherence))")
        #expect(abs((following.coherencePeakHz ?? 0) - 0.1) < 0.02)
        let json = try #require(following.jsonValue.objectValue)
        for key in ["paced_breathing_rate_bpm", "rsa_amplitude_bpm", "rsa_breaths", "breathing_adherence", "coherence"] {
            #expect(json[key] != nil, "\(key)")
        }
    }

    /// A slow pacer (3.2 /min, 4-7-8) needs more than four of its breaths before the spectrum can hold its peak: the
    /// coherence is withheld until then (it scored the lowest kept frequency, 0.06-0.13), and found at the pace after.
    @Test func coherenceWaitsForFourSlowBreaths() {
        let pacedHz = 1.0 / 19
        func beats(seconds: Double) -> [Double] {
            var rr: [Double] = []
            var t = 0.0
            while t < seconds {
                let v = 900 + 80 * sin(2 * Double.pi * pacedHz * t)
                rr.append(v)
                t += v / 1000
            }
            return rr
        }
        #expect(PacedBreathing.coherence(beats(seconds: 70), pacedHz: pacedHz) == nil)
        #expect(PacedBreathing.coherence(beats(seconds: 70)) != nil, "without the pacer's rate: scored, as before")
        let later = PacedBreathing.coherence(beats(seconds: 120), pacedHz: pacedHz)
        #expect(abs((later?.peakHz ?? 0) - pacedHz) < 0.01, "\(String(describing: later))")
        #expect((later?.score ?? 0) > 0.5, "\(String(describing: later))")
    }

    /// A steady 6 /min rhythm scored over 60 to 70 s (around the live window): the score stays put. A neighbour
    /// bin exactly one bin from the peak fell out of the peak window for some spectrum lengths (a float rounding at
    /// the edge), and the score halved from one frame to the next (0.58, 0.27, 0.60, ...). Synthetic RR: this proves
    /// the arithmetic of the window's edges.
    @Test func coherenceDoesNotFlipWithTheSpectrumsLength() throws {
        var scores: [Double] = []
        for seconds in stride(from: 60.0, through: 70.0, by: 0.25) {
            var rr: [Double] = []
            var t = 0.0
            while t < seconds {
                let v = 850 + 60 * sin(2 * Double.pi * 0.1 * t) + 15 * sin(2 * Double.pi * 0.27 * t)
                rr.append(v)
                t += v / 1000
            }
            scores.append(try #require(PacedBreathing.coherence(rr, pacedHz: 0.1)).score)
        }
        let (low, high) = (scores.min()!, scores.max()!)
        #expect(high - low < 0.1, "coherence over 60-70 s: \(scores.map { (($0 * 1000).rounded() / 1000) })")
    }
}
