@testable import GatewayEngine
import HRVAnalysis
import Testing

@Suite struct SessionEngineTests {
    let clock = ManualSessionClock(startMs: 1_000_000)
    var t0: Int64 { 1_000_000 }

    func engine(_ providers: [any BiosignalProvider], behavior: (any BehaviorProvider)? = nil) -> SessionEngine {
        SessionEngine(providers: providers, behaviorProvider: behavior, clock: clock, correction: .none)
    }

    func config(_ id: String = "s1", duration: Int = 60, window: Int = 60, interval: Int = 5, raw: Bool = false,
                rawInterval: Int? = nil) -> SessionConfig {
        SessionConfig(
            sessionId: id, mode: .focus, durationSec: duration,
            profile: ComputeProfile(windowSec: window, emitIntervalSec: interval, rawEmitIntervalSec: rawInterval),
            includeRawSamples: raw)
    }

    @Test func startedComesFirstWithTheStartTime() async throws {
        let p = ScriptedProvider()
        let e = engine([p])
        let stream = try await e.startSession(config())
        var it = stream.makeAsyncIterator()
        let first = await it.next()
        #expect(first == .started(sessionId: "s1", startedAtMs: t0))
        #expect(p.starts == 1)
    }

    @Test func firstFrameComesOneIntervalAfterStartAndNotBefore() async throws {
        let p = ScriptedProvider()
        let e = engine([p])
        let log = EventLog(e)
        _ = try await e.startSession(config())
        p.send(sample(t0, bpm: 70))
        clock.advance(toMs: t0 + 4_999)
        #expect(log.frames.isEmpty)
        clock.advance(toMs: t0 + 5_000)
        #expect(log.frames.count == 1)
        #expect(log.frames.first?.seq == 1)
        #expect(log.frames.first?.emittedAtMs == t0 + 5_000)
        clock.advance(toMs: t0 + 10_000)
        #expect(log.frames.map(\.seq) == [1, 2])
    }

    @Test func emptyWindowSkipsTheFrameWithoutUsingASeq() async throws {
        let p = ScriptedProvider()
        let e = engine([p])
        let log = EventLog(e)
        _ = try await e.startSession(config())
        clock.advance(toMs: t0 + 10_000)
        #expect(log.frames.isEmpty)
        p.send(sample(t0 + 11_000))
        clock.advance(toMs: t0 + 15_000)
        #expect(log.frames.map(\.seq) == [1])
        #expect(e.getStatus()?.lastSeq == 1)
    }

    @Test func summaryOnceOnStopAndStreamFinishes() async throws {
        let p = ScriptedProvider()
        let e = engine([p])
        let stream = try await e.startSession(config())
        p.send(sample(t0 + 500, bpm: 61))
        clock.advance(toMs: t0 + 7_400)
        try await e.stopSession(sessionId: "s1")
        var types: [String] = []
        var summaries: [SessionEvent] = []
        for await ev in stream {
            types.append(ev.type)
            if ev.type == "session_summary" { summaries.append(ev) }
        }
        #expect(types == ["session_started", "session_frame", "session_summary"])
        guard case .summary(_, let duration, let metrics, _) = summaries.first else {
            Issue.record("no summary")
            return
        }
        #expect(duration == 7)
        #expect(metrics.sampleCount == 1)
        #expect(p.stops == 1)
        #expect(e.getStatus() == nil)
        clock.advance(toMs: t0 + 100_000)
        await #expect(throws: SessionError.invalidState("No active session")) { try await e.stopSession(sessionId: "s1") }
    }

    @Test func durationExpiryEmitsTheSummaryOnce() async throws {
        let p = ScriptedProvider()
        let e = engine([p])
        let log = EventLog(e)
        _ = try await e.startSession(config(duration: 12, interval: 5))
        p.send(sample(t0 + 1_000))
        clock.advance(toMs: t0 + 60_000)
        await log.ended()
        #expect(log.types == ["session_started", "session_frame", "session_frame", "session_summary"])
        if case .summary(_, let d, _, _) = log.last { #expect(d == 12) } else { Issue.record("last is not the summary") }
        #expect(e.getStatus() == nil)
        #expect(clock.pendingCount == 0)
    }

    @Test func durationMultipleOfIntervalGivesTheLastFrameThenTheSummary() async throws {
        let p = ScriptedProvider()
        let e = engine([p])
        let log = EventLog(e)
        _ = try await e.startSession(config(duration: 10, interval: 5))
        p.send(sample(t0 + 1_000))
        clock.advance(toMs: t0 + 30_000)
        await log.ended()
        #expect(log.types == ["session_started", "session_frame", "session_frame", "session_summary"])
        #expect(log.frames.map(\.emittedAtMs) == [t0 + 5_000, t0 + 10_000])
    }

    @Test(arguments: [true, false])
    func stopAtTheTickInstantGivesOneSummaryAndNothingAfter(stopBeforeTick: Bool) async throws {
        let p = ScriptedProvider()
        let e = engine([p])
        let log = EventLog(e)
        // Same deadline as the first frame; ties run in scheduling order, so this runs before or after the tick.
        let stopAction: @Sendable () -> Void = { try? e.stop(sessionId: "s1") }
        if stopBeforeTick { _ = clock.schedule(atMonotonicMs: t0 + 5_000, stopAction) }
        _ = try await e.startSession(config())
        if !stopBeforeTick { _ = clock.schedule(atMonotonicMs: t0 + 5_000, stopAction) }
        p.send(sample(t0 + 100))
        clock.advance(toMs: t0 + 20_000)
        #expect(log.types == (stopBeforeTick
            ? ["session_started", "session_summary"]
            : ["session_started", "session_frame", "session_summary"]))
        if case .summary(_, let d, _, _) = log.last { #expect(d == 5) }
    }

    @Test func startWhileActiveThrowsTheSDKMessage() async throws {
        let e = engine([ScriptedProvider()])
        _ = try await e.startSession(config("first"))
        await #expect(throws: SessionError.invalidState("Session first is already running")) {
            _ = try await e.startSession(config("second"))
        }
    }

    @Test func stopErrorsUseTheSDKMessages() async throws {
        let e = engine([ScriptedProvider()])
        await #expect(throws: SessionError.invalidState("No active session")) { try await e.stopSession(sessionId: "x") }
        _ = try await e.startSession(config("abc"))
        await #expect(throws: SessionError.invalidState("Session ID mismatch: expected abc, got xyz")) {
            try await e.stopSession(sessionId: "xyz")
        }
        #expect(e.getStatus()?.sessionId == "abc")
    }

    @Test func providerFailureAtStartGivesSensorUnavailableAndLeavesTheEngineIdle() async throws {
        let good = ScriptedProvider(name: "good")
        let bad = ScriptedProvider(name: "bad", failure: ProviderBroke())
        let e = engine([good, bad])
        let stream = try await e.startSession(config())
        var events: [SessionEvent] = []
        for await ev in stream { events.append(ev) }
        #expect(events.count == 2)
        #expect(events.first?.type == "session_started")
        guard case .error(let id, let code, let message) = events.last else {
            Issue.record("expected a session_error")
            return
        }
        #expect(id == "s1")
        #expect(code == .sensorUnavailable)
        #expect(message.contains("strap out of range"))
        #expect(good.stops == 1, "a provider that did start is released")
        #expect(e.getStatus() == nil)
        clock.advance(toMs: t0 + 120_000)
        #expect(clock.pendingCount == 0, "no timer survives the failed start")
        _ = try await engine([ScriptedProvider()]).startSession(config("again"))
    }

    @Test func thrownSessionErrorKeepsItsCode() async throws {
        let e = engine([ScriptedProvider(failure: SessionError.permissionDenied("not in group bluetooth"))])
        let log = EventLog(e)
        _ = try await e.startSession(config())
        #expect(log.last == .error(sessionId: "s1", code: .permissionDenied, message: "not in group bluetooth"))
    }

    @Test func statusReportsTheLastFrameSeq() async throws {
        let p = ScriptedProvider()
        let e = engine([p])
        #expect(e.getStatus() == nil)
        _ = try await e.startSession(config("st"))
        #expect(e.getStatus() == SessionStatus(sessionId: "st", active: true, lastSeq: 0))
        p.send(sample(t0))
        clock.advance(toMs: t0 + 15_000)
        #expect(e.getStatus()?.lastSeq == 3)
        #expect(e.getStatus()?.jsonValue.jsonString == #"{"active":true,"last_seq":3,"session_id":"st"}"#)
    }

    @Test func ingestedHsiMetricsReplaceWholesaleAndOverrideLocalHRV() async throws {
        let p = ScriptedProvider()
        let e = engine([p])
        let log = EventLog(e)
        _ = try await e.startSession(config())
        p.send(sample(t0 + 1_000, rr: [800, 900]))
        clock.advance(toMs: t0 + 5_000)
        let local = try #require(log.frames.last?.metrics)
        #expect(local.rmssdMs == 100)
        e.ingestHsiMetrics(["hrv.sdnn_ms": .double(42.0), "hrv.rmssd_ms": .double(33.5), "hrv.pnn50": .double(21.3)])
        clock.advance(toMs: t0 + 10_000)
        let ingested = try #require(log.frames.last?.metrics)
        #expect(ingested.hrSdnnMs == 42.0)
        #expect(ingested.rmssdMs == 33.5)
        #expect(ingested.pnn50 == 21.3)
        // Replacement, not merge: rmssd falls back to the local value.
        e.ingestHsiMetrics(["hrv.sdnn_ms": .double(50.0)])
        clock.advance(toMs: t0 + 15_000)
        let replaced = try #require(log.frames.last?.metrics)
        #expect(replaced.hrSdnnMs == 50.0)
        #expect(replaced.rmssdMs == 100)
        #expect(e.ingestHsiMetrics(["hrv.sdnn_ms": .double(1)], sessionId: "other") == false)
    }

    @Test func ingestBeforeStartAppliesAndIsClearedAtStop() async throws {
        let p = ScriptedProvider()
        let e = engine([p])
        let log = EventLog(e)
        e.ingestHsiMetrics(["hrv.rmssd_ms": .double(12.5)])
        _ = try await e.startSession(config())
        p.send(sample(t0 + 1_000))
        clock.advance(toMs: t0 + 5_000)
        #expect(log.frames.last?.metrics?.rmssdMs == 12.5)
        try await e.stopSession(sessionId: "s1")
        #expect(log.last?.metrics?.rmssdMs == 12.5, "the summary still uses it")
        _ = try await e.startSession(config("s2"))
        p.send(sample(clock.nowMs()))
        clock.advance(byMs: 5_000)
        #expect(log.frames.last?.sessionId == "s2")
        #expect(log.frames.last?.metrics?.rmssdMs == 0)
    }

    @Test func emptyWindowSummaryHasZerosAndNoBounds() async throws {
        let e = engine([ScriptedProvider()])
        let log = EventLog(e)
        e.ingestHsiMetrics(["hrv.sdnn_ms": .double(42.0)])
        _ = try await e.startSession(config())
        try await e.stopSession(sessionId: "s1")
        let json = try #require(log.last?.jsonValue)
        #expect(json["metrics"] == .object([
            "hr_mean_bpm": .double(0), "hr_sdnn_ms": .double(0), "rmssd_ms": .double(0), "pnn50": .double(0),
            "sample_count": .int(0),
        ]))
    }

    @Test func windowEvictsOnAppendStrictlyBeforeTheCutoff() {
        var w = SampleWindow(windowSec: 5)
        for t in stride(from: Int64(0), through: 9_000, by: 1_000) { w.append(sample(t)) }
        #expect(w.samples.map(\.timestampMs) == [4_000, 5_000, 6_000, 7_000, 8_000, 9_000])
    }

    @Test func behaviorIsPulledPerFrameOnlyWhenAvailable() async throws {
        struct Unavailable: BehaviorProvider {
            let isAvailable = false
            let name = "off"
            func currentSnapshot() -> BehaviorSnapshot? { BehaviorSnapshot(timestamp: 1) }
        }
        let p = ScriptedProvider()
        let e = engine([p], behavior: MockBehaviorProvider(clock: clock))
        let log = EventLog(e)
        _ = try await e.startSession(config())
        p.send(sample(t0))
        clock.advance(toMs: t0 + 5_000)
        let frame = try #require(log.frames.last?.jsonValue)
        #expect(frame["behavior"]?["typing_cadence"] == .double(3.5))
        #expect(frame["behavior"]?["timestamp"] == .int(t0 + 5_000))
        try await e.stopSession(sessionId: "s1")
        #expect(log.last?.jsonValue["behavior"]?["app_switches_per_minute"] == .int(4))

        let e2 = engine([p], behavior: Unavailable())
        let log2 = EventLog(e2)
        _ = try await e2.startSession(config("s2"))
        p.send(sample(clock.nowMs()))
        clock.advance(byMs: 5_000)
        #expect(log2.frames.last?.jsonValue["behavior"] == nil)
    }

    @Test func rawFramesCarryTheWholeWindowOnTheirOwnCounter() async throws {
        let p = ScriptedProvider()
        let e = engine([p])
        let log = EventLog(e)
        _ = try await e.startSession(config(window: 10, interval: 5, raw: true, rawInterval: 2))
        clock.advance(toMs: t0 + 2_000)
        #expect(log.all.filter { $0.type == "biosignal_frame" }.isEmpty, "empty window: no raw frame")
        p.send(sample(t0 + 2_500, bpm: 61, rr: [980], device: "AA"))
        p.send(sample(t0 + 3_500, bpm: 62))
        clock.advance(toMs: t0 + 6_000)
        let raws = log.all.filter { $0.type == "biosignal_frame" }
        #expect(raws.map(\.seq) == [1, 2])
        guard case .biosignalFrame(_, _, _, let samples) = raws.last else { return }
        #expect(samples.count == 2)
        #expect(raws.last?.jsonValue["samples"]?.arrayValue?.first == .object([
            "timestamp_ms": .int(t0 + 2_500), "bpm": .double(61), "source": .string("test"),
            "rr_intervals_ms": .array([.double(980)]), "device_id": .string("AA"),
        ]))
        #expect(log.frames.map(\.seq) == [1], "frames keep their own counter")
    }

    @Test func noRawFramesUnlessAskedFor() async throws {
        let p = ScriptedProvider()
        let e = engine([p])
        let log = EventLog(e)
        _ = try await e.startSession(config())
        p.send(sample(t0))
        clock.advance(toMs: t0 + 30_000)
        #expect(!log.types.contains("biosignal_frame"))
    }

    @Test func stopWaitsForTheProvidersSoTheirLastSamplesAreInTheSummary() async throws {
        // A strap's stop hands over the notifications it had already read (they reached the store's tap) before it
        // returns; the summary must count them, as of the moment of the stop.
        let p = StoppingProvider(lastSample: sample(t0 + 7_300, rr: [800]))
        let e = engine([p])
        let log = EventLog(e)
        _ = try await e.startSession(config())
        p.send(sample(t0 + 500, rr: [810]))
        clock.advance(toMs: t0 + 7_400)
        try await e.stopSession(sessionId: "s1")
        #expect(log.types == ["session_started", "session_frame", "session_summary"])
        guard case .summary(_, let duration, let metrics, _) = log.last else {
            Issue.record("no summary")
            return
        }
        #expect(metrics.sampleCount == 2)
        #expect(metrics.rrCount == 2)
        #expect(duration == 7)
        #expect(e.getStatus() == nil)
    }

    @Test func theEndAtTheDurationAlsoWaitsForTheProviders() async throws {
        // The same for a session that reaches its duration: the summary comes once the providers have stopped, with
        // the sample the strap handed over while stopping, and its duration is the configured one.
        let p = StoppingProvider(lastSample: sample(t0 + 11_900, rr: [800]))
        let e = engine([p])
        let log = EventLog(e)
        _ = try await e.startSession(config(duration: 12, interval: 5))
        p.send(sample(t0 + 500, rr: [810]))
        clock.advance(toMs: t0 + 12_000)
        await log.ended()
        #expect(log.types == ["session_started", "session_frame", "session_frame", "session_summary"])
        guard case .summary(_, let duration, let metrics, _) = log.last else {
            Issue.record("no summary")
            return
        }
        #expect(metrics.rrCount == 2)
        #expect(duration == 12)
        #expect(e.getStatus() == nil)
    }

    // Without the limit the stop would wait for this provider for ever: the time limit makes that a failure.
    @Test(.timeLimit(.minutes(1)))
    func aProviderThatDoesNotStopDelaysTheSummaryByTheLimitOnly() async throws {
        let p = StoppingProvider(lastSample: nil, hangs: true)
        let e = SessionEngine(providers: [p], clock: clock, correction: .none, providerStopLimitMs: 3_000)
        let log = EventLog(e)
        _ = try await e.startSession(config())
        p.send(sample(t0 + 500, rr: [810]))
        clock.advance(toMs: t0 + 2_000)
        let stopping = Task { try await e.stopSession(sessionId: "s1") }
        await p.stopEntered()
        // A second stop joins the first: it returns once the summary is out, having stopped nothing twice.
        let second = Task { () throws(SessionError) -> [String] in
            try await e.stopSession(sessionId: "s1")
            return log.types
        }
        // The second stop has joined (it waits for the end) before the first may finish; a task starts when the
        // pool runs it, which on a loaded machine can be after the summary.
        while e.idleWaiterCount == 0 { await Task.yield() }
        // While the provider stops: no frame, no summary yet, the session is still there.
        clock.advance(toMs: t0 + 4_999)
        #expect(log.types == ["session_started"])
        #expect(e.getStatus()?.sessionId == "s1")
        clock.advance(toMs: t0 + 5_000)
        try await stopping.value
        #expect(try await second.value == ["session_started", "session_summary"])
        #expect(log.types == ["session_started", "session_summary"])
        if case .summary(_, let d, let m, _) = log.last {
            #expect(d == 2)
            #expect(m.sampleCount == 1)
        } else {
            Issue.record("no summary")
        }
        #expect(e.getStatus() == nil)
        p.release()
    }

    // A phone that starts its next session as soon as the last one reached its duration is not refused while the
    // providers stop: the start waits for that summary, then starts.
    @Test(.timeLimit(.minutes(1)))
    func aStartWhileTheLastSessionEndsWaitsForItsSummary() async throws {
        let p = StoppingProvider(lastSample: nil, hangs: true)
        let e = SessionEngine(providers: [p], clock: clock, correction: .none, providerStopLimitMs: 3_000)
        let log = EventLog(e)
        _ = try await e.startSession(config(duration: 12, interval: 5))
        clock.advance(toMs: t0 + 12_000)
        await p.stopEntered()
        let next = Task { () throws(SessionError) -> [String] in
            _ = try await e.startSession(config("s2", interval: 5))
            return log.all.filter { $0.type == "session_summary" }.map(\.sessionId)
        }
        // The start is waiting for the end before the provider is let stop (a task starts when the pool runs it:
        // without this, on a loaded machine, it could start after the summary and test nothing).
        while e.idleWaiterCount == 0 { await Task.yield() }
        // Still ending: the new session has not started.
        #expect(e.getStatus()?.sessionId == "s1")
        p.release()
        // When the start returns, the last session's summary is out.
        #expect(try await next.value == ["s1"])
        #expect(e.getStatus()?.sessionId == "s2")
        // A start while a session runs (not ending) is still refused.
        await #expect(throws: SessionError.invalidState("Session s2 is already running")) {
            _ = try await e.startSession(config("s3"))
        }
        p.release()
        try await e.stopSession(sessionId: "s2")
        #expect(log.types == ["session_started", "session_summary", "session_started", "session_summary"])
        #expect(log.all.map(\.sessionId) == ["s1", "s1", "s2", "s2"])
    }

    @Test func samplesAfterStopAreIgnored() async throws {
        let p = ScriptedProvider()
        let e = engine([p])
        let log = EventLog(e)
        _ = try await e.startSession(config())
        try await e.stopSession(sessionId: "s1")
        p.send(sample(t0 + 1))
        p.status(SensorStatus(source: "test", state: .stale))
        clock.advance(toMs: t0 + 30_000)
        #expect(log.types == ["session_started", "session_summary"])
    }

    @Test func sensorStatusIsForwardedInOrder() async throws {
        let p = ScriptedProvider()
        let e = engine([p])
        let log = EventLog(e)
        _ = try await e.startSession(config())
        p.status(SensorStatus(source: "ble_hrm", deviceId: "AA:BB", state: .stale, batteryPercent: 80))
        #expect(log.last?.jsonValue == .object([
            "type": .string("sensor_status"), "session_id": .string("s1"), "emitted_at_ms": .int(t0),
            "source": .string("ble_hrm"), "device_id": .string("AA:BB"), "state": .string("stale"),
            "battery_percent": .int(80),
        ]))
    }

    @Test func disposeEndsWithoutSummaryAndRefusesLaterStarts() async throws {
        let p = ScriptedProvider()
        let e = engine([p])
        let stream = try await e.startSession(config())
        await e.dispose()
        var types: [String] = []
        for await ev in stream { types.append(ev.type) }
        #expect(types == ["session_started"])
        #expect(p.stops == 1)
        await #expect(throws: SessionError.self) { _ = try await e.startSession(config("x")) }
    }

    @Test func invalidConfigurationIsRefusedBeforeAnythingStarts() async throws {
        let p = ScriptedProvider()
        let e = engine([p])
        await #expect(throws: SessionError.invalidState("emit_interval_sec must be 1 to 86400, got 0")) {
            _ = try await e.startSession(config(interval: 0))
        }
        #expect(p.starts == 0)
    }

    @Test func everyEmittedEventIsFreeOfNulls() async throws {
        let p = ScriptedProvider()
        let e = SessionEngine(providers: [p], behaviorProvider: MockBehaviorProvider(clock: clock), clock: clock)
        let log = EventLog(e)
        _ = try await e.startSession(config(raw: true))
        p.send(sample(t0, rr: [.nan, 900]))
        p.send(BiosignalSample(timestampMs: t0 + 10, bpm: 70, source: SessionMetrics.cameraSource, confidence: .nan))
        p.status(SensorStatus(source: "x", state: .error, message: "gone", errorCode: .sensorUnavailable))
        clock.advance(toMs: t0 + 5_000)
        try await e.stopSession(sessionId: "s1")
        #expect(log.all.count >= 5)
        for ev in log.all { #expect(!ev.jsonValue.containsNull, "\(ev.type)") }
    }
}
