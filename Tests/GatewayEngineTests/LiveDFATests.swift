import GatewayEngine
import HRVAnalysis
@testable import SimulatedProvider
import Testing

/// Live DFA alpha1 in a session: the simulated exercise ramp crosses 0.75 then 0.5 (`dfa_threshold` events), frames
/// carry the estimate, and the extended HRV names appear once the window is long enough.
@Suite struct LiveDFATests {
    /// The simulated ramp loops without a step: up, then back down, then up again (repeating the ramp alone jumped
    /// from 175 to 100 bpm in one beat, and the window over that step published alpha1 1.7 with both thresholds
    /// crossed upwards at once). Synthetic beats: this proves the loop's seam.
    @Test func theSimulatedRampLoopsWithoutAStep() {
        let beats = SimulatedBiosignalProvider.rampBeats(seed: 1)
        let looped = beats + beats.prefix(10)
        let largest = zip(looped, looped.dropFirst()).map { abs($0 - $1) }.max() ?? 0
        #expect(largest < 100, "largest beat-to-beat step \(largest) ms")
        #expect(abs(60000 / beats[beats.count / 2 - 1] - 175) < 10, "the top of the ramp halfway through")
    }

    @Test func theExerciseRampCrossesBothThresholdsInASession() async throws {
        let clock = ManualSessionClock(startMs: 0)
        let sim = SimulatedBiosignalProvider(model: .exerciseRamp, seed: 1, clock: clock)
        let engine = SessionEngine(providers: [sim], clock: clock, correction: .kubios)
        let log = EventLog(engine)
        _ = try await engine.startSession(SessionConfig(sessionId: "ramp", mode: .focus, durationSec: 1200,
                                                        profile: ComputeProfile(windowSec: 300, emitIntervalSec: 10)))
        clock.advance(toMs: 1_200_000)
        await log.ended()
        #expect(log.last?.type == "session_summary")
        let crossings = log.all.compactMap { e -> DFAThresholdCrossing? in
            if case .dfaThreshold(_, _, let c) = e { c } else { nil }
        }
        let down75 = crossings.first { $0.threshold == 0.75 && $0.direction == .down }
        let down50 = crossings.first { $0.threshold == 0.5 && $0.direction == .down }
        #expect(down75 != nil, "alpha1 falls through 0.75")
        #expect(down50 != nil, "alpha1 falls through 0.5")
        if let a = down75, let b = down50 { #expect(a.atS < b.atS) }
        let event = try #require(log.all.first { $0.type == "dfa_threshold" })
        let json = try #require(event.jsonValue.objectValue)
        #expect(json["threshold"] != nil && json["direction"] != nil && json["dfa_alpha1"] != nil)
        // Announced with the estimate that confirms it: 20 s after the one that crossed, at the first frame due (a frame
        // every 10 s here), on the newest sample's time.
        let crossed = try #require(json["crossed_at_ms"]?.intValue)
        let emitted = try #require(json["emitted_at_ms"]?.intValue)
        #expect(emitted - crossed >= 20_000 && emitted - crossed < 30_000, "crossed \(crossed), emitted \(emitted)")

        let metrics = log.frames.compactMap { e -> SessionMetrics? in
            if case .frame(_, _, _, let m, _) = e { m } else { nil }
        }
        // No estimate in the first two minutes; afterwards every frame carries one.
        #expect(metrics.prefix(10).allSatisfy { $0.liveDFA == nil })
        let live = metrics.compactMap(\.liveDFA)
        #expect(live.count > 80)
        #expect(live.allSatisfy { $0.artifactPercent <= LiveDFA.artifactLimitPercent && $0.alpha1 != nil })
        let last = try #require(metrics.last?.jsonValue.objectValue)
        for key in ["live_dfa_alpha1", "live_dfa_artifact_percent", "lf_ms2", "hf_ms2", "sd1_ms", "dfa_alpha1", "sampen"] {
            #expect(last[key] != nil, "\(key) in a full 5-minute frame")
        }
        let first = try #require(metrics.first?.jsonValue.objectValue)
        for key in ["vlf_ms2", "lf_ms2", "dfa_alpha1", "dfa_alpha2", "live_dfa_alpha1"] {
            #expect(first[key] == nil, "\(key) absent from a 10-second window")
        }
    }
}
