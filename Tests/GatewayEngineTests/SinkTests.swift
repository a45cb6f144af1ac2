import GatewayEngine
import GatewaySink
import Logging
import ServiceLifecycle
import Testing

/// A sink that keeps what it was handed and what its task drained.
final class RecordingSink: SessionSink {
    let name: String
    let received = Locked<[EncodedEvent]>([])
    let samples = Locked<[BiosignalSample]>([])
    let drained = Locked<[String]>([])
    let started: AsyncStream<Void>
    private let startedContinuation: AsyncStream<Void>.Continuation
    private let queue = SinkQueue<EncodedEvent>()

    init(_ name: String) {
        self.name = name
        (started, startedContinuation) = AsyncStream<Void>.makeStream()
    }

    func receive(sample: BiosignalSample) { samples.withLock { $0.append(sample) } }

    func receive(event: EncodedEvent) {
        received.withLock { $0.append(event) }
        queue.push(event)
        if event.event.type == "session_started" { startedContinuation.yield() }
    }

    func run() async throws {
        await queue.drain { [drained] event in drained.withLock { $0.append(event.json) } }
    }
}

/// Tells the test when the engine has started it.
struct SignallingProvider: BiosignalProvider {
    let base: ScriptedProvider
    let started: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation

    init(_ base: ScriptedProvider) {
        self.base = base
        (started, continuation) = AsyncStream<Void>.makeStream()
    }

    var name: String { base.name }
    var isAvailable: Bool { true }
    func startStreaming(into sink: ProviderSink) async throws {
        try await base.startStreaming(into: sink)
        continuation.yield()
    }
    func stopStreaming() async { await base.stopStreaming() }
}

@Suite struct SinkTests {
    @Test func everySinkGetsEveryEventWithItsTextAndDrainsWhenTheSessionEnds() async throws {
        let clock = ManualSessionClock(startMs: 0)
        let p = ScriptedProvider()
        let outputs = SessionOutputs()
        let signalling = SignallingProvider(p)
        let engine = SessionEngine(providers: [outputs.tap(signalling)], clock: clock, correction: .none)
        let a = RecordingSink("a")
        let b = RecordingSink("b")
        outputs.attach(a)
        outputs.attach(b)
        outputs.observe(engine)
        let session = SessionService(
            engine: engine,
            config: SessionConfig(sessionId: "s", mode: .focus, durationSec: 3,
                                  profile: ComputeProfile(windowSec: 60, emitIntervalSec: 1)),
            onError: { _ in })
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(
            services: outputs.services + [.init(service: session, successTerminationBehavior: .gracefullyShutdownGroup)],
            logger: Logger(label: "test")))
        let running = Task { try await group.run() }
        var it = signalling.started.makeAsyncIterator()
        await it.next()
        p.send(sample(0, bpm: 60, rr: [1000]))
        p.send(sample(10, bpm: .nan))
        clock.advance(toMs: 3_000)
        try await running.value

        let events = a.received.withLock { $0 }
        #expect(events.map(\.event.type)
            == ["session_started", "session_frame", "session_frame", "session_frame", "session_summary"])
        #expect(events.map(\.json) == events.map { $0.event.jsonValue.jsonString })
        #expect(b.received.withLock { $0 } == events)
        // Each sink's own task handled everything before the group returned.
        #expect(a.drained.withLock { $0 } == events.map(\.json))
        #expect(b.drained.withLock { $0 } == events.map(\.json))
        // Samples reach the sinks through the tap; the non-finite one never does.
        #expect(a.samples.withLock { $0 }.map(\.timestampMs) == [0])
        #expect(session.exitStatus == 0)
    }

    @Test func gracefulShutdownEndsTheSessionWithItsSummaryBeforeTheSinksStop() async throws {
        let clock = ManualSessionClock(startMs: 0)
        let p = ScriptedProvider()
        let outputs = SessionOutputs()
        let signalling = SignallingProvider(p)
        let engine = SessionEngine(providers: [outputs.tap(signalling)], clock: clock, correction: .none)
        let a = RecordingSink("a")
        outputs.attach(a)
        outputs.observe(engine)
        let session = SessionService(
            engine: engine, config: SessionConfig(sessionId: "s", mode: .focus, durationSec: 600), onError: { _ in })
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(
            services: outputs.services + [.init(service: session, successTerminationBehavior: .gracefullyShutdownGroup)],
            logger: Logger(label: "test")))
        let running = Task { try await group.run() }
        var it = signalling.started.makeAsyncIterator()
        await it.next()
        p.send(sample(0, bpm: 60, rr: [1000]))
        clock.advance(toMs: 7_000)
        await group.triggerGracefulShutdown()
        try await running.value
        #expect(a.drained.withLock { $0 }.count == 3)
        #expect(a.received.withLock { $0 }.last?.event.type == "session_summary")
        if case .summary(_, let d, _, _) = a.received.withLock({ $0 }).last?.event { #expect(d == 7) }
        #expect(engine.getStatus() == nil)
    }
}
