import GatewayEngine
import SimulatedProvider
import Testing

/// Timers run on monotonic time: a wall-clock step (NTP on a board without a real-time clock, `date -s`) moves the
/// timestamps in events and nothing else.
@Suite struct ClockStepTests {
    let t0: Int64 = 1_000_000

    func run(stepMs: Int64) async throws -> (events: [SessionEvent], clock: ManualSessionClock) {
        let clock = ManualSessionClock(startMs: t0)
        let provider = SimulatedBiosignalProvider(model: .sdkMock, clock: clock)
        let engine = SessionEngine(providers: [provider], clock: clock, correction: .none)
        let log = EventLog(engine)
        _ = try await engine.startSession(SessionConfig(
            sessionId: "s", mode: .focus, durationSec: 10,
            profile: ComputeProfile(windowSec: 60, emitIntervalSec: 1)))
        clock.advance(toMs: t0 + 4_000)
        clock.stepWallClock(byMs: stepMs)
        // Ten seconds of virtual time in small steps, as a real process would see them.
        for _ in 0..<100 { clock.advance(byMs: 100) }
        await log.ended()
        return (log.all, clock)
    }

    @Test(arguments: [-3_600_000, 3_600_000] as [Int64])
    func aWallClockStepNeitherStopsFramesNorEndsTheSessionEarly(stepMs: Int64) async throws {
        let (events, clock) = try await run(stepMs: stepMs)
        let frames = events.filter { $0.type == "session_frame" }
        #expect(frames.map(\.seq) == Array(1...10))
        // Frames 1-4 before the step carry the old wall time, 5-10 the stepped one, each a second apart.
        let expected = (1...10).map { i in t0 + Int64(i) * 1000 + (i > 4 ? stepMs : 0) }
        #expect(frames.map(\.emittedAtMs) == expected)
        #expect(events.last?.type == "session_summary")
        if case .summary(_, let duration, _, _) = events.last { #expect(duration == 10) }
        #expect(events.filter { $0.type == "session_summary" }.count == 1)
        #expect(clock.monotonicMs() == t0 + 14_000)
        #expect(clock.nowMs() == t0 + 14_000 + stepMs)
    }

    @Test func manualClockStepMovesOnlyTheWallClock() {
        let clock = ManualSessionClock(startMs: 5_000)
        let fired = Locked(0)
        _ = clock.schedule(afterMs: 1_000) { fired.withLock { $0 += 1 } }
        clock.stepWallClock(byMs: 10_000)
        #expect(clock.nowMs() == 15_000)
        #expect(clock.monotonicMs() == 5_000)
        #expect(fired.withLock { $0 } == 0)
        clock.advance(byMs: 999)
        #expect(fired.withLock { $0 } == 0)
        clock.advance(byMs: 1)
        #expect(fired.withLock { $0 } == 1)
    }

    @Test func systemClockSchedulesOnMonotonicTime() async {
        let clock = SystemSessionClock()
        let start = clock.monotonicMs()
        let (stream, continuation) = AsyncStream<Int64>.makeStream()
        _ = clock.schedule(afterMs: 50) { continuation.yield(clock.monotonicMs()) }
        var it = stream.makeAsyncIterator()
        let firedAt = await it.next()
        #expect((firedAt ?? 0) - start >= 50)
    }
}

/// The engine hands events to observers with its lock released.
@Suite struct EngineDeliveryTests {
    @Test func anObserverMayCallBackIntoTheEngine() async throws {
        let clock = ManualSessionClock(startMs: 0)
        let p = ScriptedProvider()
        let engine = SessionEngine(providers: [p], clock: clock, correction: .none)
        let seen = Locked<[Int?]>([])
        // Under the old design (observers called under the lock) this re-entry deadlocked.
        let token = engine.observe { event in
            if event.type == "session_frame" { seen.withLock { $0.append(engine.getStatus()?.lastSeq) } }
        }
        _ = try await engine.startSession(SessionConfig(
            sessionId: "s", mode: .focus, durationSec: 10, profile: ComputeProfile(windowSec: 60, emitIntervalSec: 1)))
        p.send(sample(0))
        clock.advance(toMs: 3_000)
        #expect(seen.withLock { $0 } == [1, 2, 3])
        token.cancel()
    }

    @Test func observersSeeEventsInTheOrderTheyWereRegistered() async throws {
        let clock = ManualSessionClock(startMs: 0)
        let p = ScriptedProvider()
        let engine = SessionEngine(providers: [p], clock: clock, correction: .none)
        let order = Locked<[String]>([])
        let tokens = (0..<8).map { i in
            engine.observe { event in if event.type == "session_started" { order.withLock { $0.append("\(i)") } } }
        }
        _ = try await engine.startSession(SessionConfig(
            sessionId: "s", mode: .focus, durationSec: 10, profile: ComputeProfile(windowSec: 60, emitIntervalSec: 1)))
        #expect(order.withLock { $0 } == (0..<8).map { "\($0)" })
        tokens.forEach { $0.cancel() }
    }
}
