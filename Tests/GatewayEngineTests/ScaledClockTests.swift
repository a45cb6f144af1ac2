import GatewayEngine
import ReplayProvider
import Testing

/// A replay faster than real time runs the session on the recording's time: the frames, windows and duration of the
/// recording, only sooner (before, a replay at speed 10 of 40 s in focus mode ended before its first 5-s frame).
@Suite struct ScaledClockTests {
    let t0: Int64 = 1_000_000

    @Test func theClockKeepsRealPaceUntilTheSessionThenRunsFasterAndItsTimersWaitForTheirDeadline() {
        let base = ManualSessionClock(startMs: t0)
        let clock = ScaledSessionClock(base: base, rate: 10)
        base.advance(byMs: 500)  // setting up: not multiplied
        #expect(clock.monotonicMs() == t0 + 500)
        #expect(clock.nowMs() == t0 + 500)
        clock.sessionStarting()
        base.advance(byMs: 100)
        #expect(clock.monotonicMs() == t0 + 500 + 1_000)
        #expect(clock.nowMs() == t0 + 600 + 900, "the wall clock plus the time gained")
        base.stepWallClock(byMs: -3_600_000)
        #expect(clock.nowMs() == t0 + 1_500 - 3_600_000, "a wall-clock step shows in timestamps, as live")
        #expect(clock.monotonicMs() == t0 + 1_500)

        // 2,005 ms of session time is 200.5 ms of real time: the timer fires at 201, not 200.
        let deadline = clock.monotonicMs() + 2_005
        let firedAt = Locked<Int64?>(nil)
        _ = clock.schedule(atMonotonicMs: deadline) { firedAt.withLock { $0 = clock.monotonicMs() } }
        base.advance(byMs: 200)
        #expect(firedAt.withLock { $0 } == nil)
        base.advance(byMs: 1)
        #expect(firedAt.withLock { $0 }.map { $0 >= deadline } == true, "\(String(describing: firedAt.withLock { $0 }))")

        clock.sessionStarting()  // a second session goes on from where the clock stands
        #expect(clock.monotonicMs() == t0 + 1_500 + 2_010)
    }

    @Test func aReplayAtTenTimesGivesTheFramesAndDurationOfTheRecording() async throws {
        let base = ManualSessionClock(startMs: t0)
        let clock = ScaledSessionClock(base: base, rate: 10)
        // Forty seconds of recording, a beat a second, recorded long ago.
        let recorded = (0..<40).map { i in
            BiosignalSample(timestampMs: 1_600_000_000_000 + Int64(i) * 1000, bpm: 60, rrIntervalsMs: [1000],
                            source: "ble_hrm")
        }
        let replay = ReplayBiosignalProvider(samples: recorded, label: "test", clock: clock)
        let engine = SessionEngine(providers: [replay], clock: clock, correction: .none)
        let log = EventLog(engine)
        base.advance(byMs: 2_000)  // options, store and outputs made ready: real time before the session
        _ = try await engine.startSession(SessionConfig(
            sessionId: "s", mode: .focus, durationSec: SessionConfig.untilStopped,
            profile: ComputeProfile(windowSec: 60, emitIntervalSec: 5)))
        for _ in 0..<39 { base.advance(byMs: 100) }  // 3.9 s of real time: the last sample is due at 39 s
        try await engine.stopSession(sessionId: "s")
        await log.ended()

        let start = t0 + 2_000
        #expect(log.all.first == .started(sessionId: "s", startedAtMs: start))
        let frames = log.frames
        #expect(frames.map(\.seq) == Array(1...7))
        #expect(frames.map(\.emittedAtMs) == (1...7).map { start + Int64($0) * 5_000 }, "every 5 s of the recording")
        guard case .summary(_, let duration, let metrics, _) = log.last else {
            Issue.record("no summary: \(log.types)")
            return
        }
        #expect(duration == 39)
        #expect(metrics.sampleCount == 40)
        #expect(metrics.endMs == start + 39_000)
    }

    struct SlowStart: BiosignalProvider {
        let base: any BiosignalProvider
        let clock: ManualSessionClock
        var name: String { base.name }
        var isAvailable: Bool { get async { true } }
        func startStreaming(into sink: ProviderSink) async throws {
            clock.stall(byMs: 2)
            try await base.startStreaming(into: sink)
        }
        func stopStreaming() async { await base.stopStreaming() }
    }

    /// A few milliseconds of real delay are seconds at speed 1000: with each timer set on the base clock alone, a
    /// late one read the time it fired at, so a replay of 40 s ran as long as the machine stalled, with frames lost
    /// and the end in the future. Its timers now run in lockstep, each at its own deadline: a stall slows the replay
    /// and bends none of its times.
    @Test func aStalledMachineSlowsAFastReplayWithoutBendingItsTimes() async throws {
        let base = ManualSessionClock(startMs: t0)
        let clock = ScaledSessionClock(base: base, rate: 1000)
        let recorded = (0..<40).map { i in
            BiosignalSample(timestampMs: 1_600_000_000_000 + Int64(i) * 1000, bpm: 60, rrIntervalsMs: [1000],
                            source: "ble_hrm")
        }
        // Two milliseconds of real time to start it: two seconds of the recording, which the replay started late
        // by (its beats fell two seconds off the session's frames).
        let replay = SlowStart(base: ReplayBiosignalProvider(samples: recorded, label: "test", clock: clock), clock: base)
        let engine = SessionEngine(providers: [replay], clock: clock, correction: .none)
        let log = EventLog(engine)
        _ = try await engine.startSession(SessionConfig(
            sessionId: "s", mode: .focus, durationSec: 40, profile: ComputeProfile(windowSec: 60, emitIntervalSec: 5)))
        let start = t0
        base.stall(byMs: 150)  // no CPU for 150 ms: 150 s of the recording's time at 1000
        base.advance(byMs: 1)
        await log.ended()

        let frames = log.frames
        #expect(frames.map(\.seq) == Array(1...8))
        #expect(frames.map(\.emittedAtMs) == (1...8).map { start + Int64($0) * 5_000 }, "every 5 s of the recording")
        guard case .summary(_, let duration, let metrics, _) = log.last else {
            Issue.record("no summary: \(log.types)")
            return
        }
        #expect(duration == 40)
        #expect(metrics.sampleCount == 40)
        #expect(metrics.endMs == start + 39_000, "the last sample")
        #expect(clock.monotonicMs() >= start + 40_000)
    }
}
