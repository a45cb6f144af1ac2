import GatewayEngine
import Testing

/// NaN and infinity are dropped and counted, never written as numbers.
@Suite struct NonFiniteTests {
    @Test func anObjectMemberOrArrayElementThatIsNotFiniteIsLeftOut() {
        let before = NonFiniteValues.droppedCount
        let value = JSONValue.object([
            "a": .double(.nan), "b": .int(1), "c": .array([.double(1.5), .double(.infinity), .double(-.infinity), .double(2)]),
        ])
        #expect(value.jsonString == #"{"b":1,"c":[1.5,2.0]}"#)
        // The counter is process-wide (other suites may drop values concurrently), so it grows by at least three.
        #expect(NonFiniteValues.droppedCount - before >= 3)
    }

    @Test func aSampleWithoutAFiniteRateIsDroppedWhole() {
        #expect(BiosignalSample(timestampMs: 1, bpm: .nan, source: "x").finiteOnly() == nil)
        #expect(BiosignalSample(timestampMs: 1, bpm: .infinity, source: "x").finiteOnly() == nil)
    }

    @Test func aSampleKeepsItsFiniteValuesAndLosesTheOthers() {
        let s = BiosignalSample(
            timestampMs: 1, bpm: 61, rrIntervalsMs: [900, .nan, 1000, -.infinity], source: "x", confidence: .nan,
            breathingRateBpm: .infinity)
        let kept = s.finiteOnly()
        #expect(kept?.rrIntervalsMs == [900, 1000])
        #expect(kept?.confidence == nil)
        #expect(kept?.breathingRateBpm == nil)
        #expect(kept?.bpm == 61)
        // A clean sample passes unchanged.
        let clean = BiosignalSample(timestampMs: 1, bpm: 61, rrIntervalsMs: [900], source: "x", confidence: 0.5)
        #expect(clean.finiteOnly() == clean)
    }

    @Test func theEngineNeverSeesANonFiniteRate() async throws {
        let clock = ManualSessionClock(startMs: 0)
        let p = ScriptedProvider()
        let engine = SessionEngine(providers: [p], clock: clock, correction: .none)
        let log = EventLog(engine)
        _ = try await engine.startSession(SessionConfig(
            sessionId: "s", mode: .focus, durationSec: 3, profile: ComputeProfile(windowSec: 60, emitIntervalSec: 1)))
        p.send(sample(0, bpm: .nan, rr: [1000]))
        clock.advance(toMs: 1_000)
        // The only sample was dropped: the window is empty, so no frame.
        #expect(log.frames.isEmpty)
        p.send(sample(1_100, bpm: 60, rr: [1000, .nan]))
        clock.advance(toMs: 5_000)
        await log.ended()
        #expect(log.frames.count == 2)
        for event in log.all { #expect(!event.jsonValue.jsonString.contains("nan")) }
        if case .summary(_, _, let m, _) = log.last { #expect(m.hrMeanBpm == 60) } else { Issue.record("no summary") }
    }
}
