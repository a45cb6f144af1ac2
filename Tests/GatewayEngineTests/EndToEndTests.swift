import GatewayEngine
import HRVAnalysis
import SimulatedProvider
import StdoutSink
import Testing

@Suite struct EndToEndTests {
    @Test func aRealisticSimulationYieldsItsBreathingRateAndHeartRate() async throws {
        let clock = ManualSessionClock(startMs: 0)
        let physiology = SimulatedBiosignalProvider.Physiology(meanHeartRateBpm: 62, breathingRateBpm: 12, ectopicProbability: 0.02)
        let sim = SimulatedBiosignalProvider(model: .realistic, physiology: physiology, seed: 11, clock: clock)
        let engine = SessionEngine(providers: [sim], clock: clock, correction: .kubios)
        let log = EventLog(engine)
        _ = try await engine.startSession(SessionConfig(sessionId: "e2e", mode: .focus, durationSec: 180,
                                                        profile: ComputeProfile(windowSec: 90, emitIntervalSec: 10)))
        clock.advance(toMs: 180_000)
        await log.ended()
        #expect(log.last?.type == "session_summary")
        let late = log.frames.compactMap(\.metrics).filter { ($0.rrCount ?? 0) > 80 }
        #expect(!late.isEmpty)
        for m in late {
            #expect(abs(m.hrMeanBpm - 62) < 4)
            if let resp = m.respRateRRBpm { #expect(abs(resp - 12) < 1.5) }
            #expect(m.rmssdMs > 10)
        }
        #expect(late.contains { $0.respRateRRBpm != nil })
        // Since the simulated strap keeps each premature beat with its full compensatory pause, a window holding two
        // such pairs (69-159 s here) keeps enough error after the Kubios correction (neurokit2's, which moves six
        // beats for the two pairs) to hide the breathing peak: confidence 0.38 where 0.48 is needed, 0.97 with each
        // pair replaced by its mean. Remove this known issue when the correction handles such pairs.
        withKnownIssue("Kubios correction of premature beats with full compensatory pauses hides breathing") {
            #expect(late.allSatisfy { $0.respRateRRBpm != nil }, "breathing found in every full window")
        }
        #expect(late.contains { ($0.artifactCount ?? 0) > 0 }, "simulated ectopic beats are corrected")
    }

    @Test func theLiveViewShowsHeartRateHRVBreathingAndSources() {
        var view = PrettyView(sessionId: "v1", mode: "focus", durationSec: 300)
        view.update(.started(sessionId: "v1", startedAtMs: 0))
        view.update(BiosignalSample(timestampMs: 1_000, bpm: 63, rrIntervalsMs: [950, 960], deviceId: "AA", source: "ble_hrm",
                                    contact: .contact))
        var m = SessionMetrics()
        m.hrMeanBpm = 62.5
        m.hrSdnnMs = 41.2
        m.rmssdMs = 35.7
        m.pnn50 = 12.5
        m.rrCount = 80
        m.respRateRRBpm = 12.1
        m.sampleCount = 60
        view.update(.frame(sessionId: "v1", seq: 4, emittedAtMs: 65_000, metrics: m, behavior: nil))
        view.update(.sensorStatus(sessionId: "v1", emittedAtMs: 65_000,
                                  status: SensorStatus(source: "ble_hrm", deviceId: "AA", state: .stale, batteryPercent: 80)))
        let text = view.render()
        #expect(text.contains("00:01:05 / 00:05:00"))
        #expect(text.contains("frame #4"))
        #expect(text.contains("now 63 bpm"))
        #expect(text.contains("window mean 62.5 bpm"))
        #expect(text.contains("950 960"))
        #expect(text.contains("RMSSD 35.7 ms"))
        #expect(text.contains("12.1 /min from RR"))
        #expect(text.contains("AA  stale  battery 80 %  skin contact yes"))
        #expect(text.contains("Ctrl-C stops it earlier"), "the live view says how to stop")
    }

    /// Two straps (two people, 60 and 150 bpm): the heart-rate and RR lines are the top-level device's, not each
    /// notification's in turn, and each source line has its own strap's values.
    @Test func theLiveViewOfSeveralStrapsShowsOneAtTheTopAndEachOnItsLine() {
        var view = PrettyView(sessionId: "v3", mode: "focus")
        view.update(.started(sessionId: "v3", startedAtMs: 0))
        for second in 1...3 {
            view.update(BiosignalSample(timestampMs: Int64(second) * 1000, bpm: 60, rrIntervalsMs: [1000], deviceId: "AA",
                                        source: "ble_hrm"))
            view.update(BiosignalSample(timestampMs: Int64(second) * 1000 + 5, bpm: 150, rrIntervalsMs: [400, 400],
                                        deviceId: "BB", source: "ble_hrm"))
        }
        // Before the first frame: the first strap with beats.
        #expect(view.render().contains("now 60 bpm"))
        var m = SessionMetrics()
        m.hrMeanBpm = 150
        m.sampleCount = 3
        m.rrCount = 6
        m.rmssdMs = 20
        var a = SessionMetrics()
        a.hrMeanBpm = 60
        a.rrCount = 3
        a.rmssdMs = 5
        var b = m
        b.devices = nil
        m.devices = ["AA": a, "BB": b]
        m.primaryDevice = "BB"
        view.update(.frame(sessionId: "v3", seq: 1, emittedAtMs: 3_500, metrics: m, behavior: nil))
        view.update(BiosignalSample(timestampMs: 3_600, bpm: 61, rrIntervalsMs: [990], deviceId: "AA", source: "ble_hrm"))
        for device in ["AA", "BB"] {
            view.update(.sensorStatus(sessionId: "v3", emittedAtMs: 3_600,
                                      status: SensorStatus(source: "ble_hrm", deviceId: device, state: .streaming)))
        }
        let text = view.render()
        #expect(text.contains("now 150 bpm   window mean 150.0 bpm   (BB)"), "\(text)")
        #expect(text.contains("RR (ms)      400 400 400 400 400 400\n"), "\(text)")
        #expect(text.contains("AA  streaming  mean 60.0 bpm  RMSSD 5.0 ms\n"), "\(text)")
        #expect(text.contains("BB  streaming  mean 150.0 bpm  RMSSD 20.0 ms  [shown above]"), "\(text)")
        #expect(!text.contains("Device       "), "every device has its source line: \(text)")

        // A replayed team session: one `replay` source, several straps; each strap still gets its line, and the
        // window's count says whose it is.
        var replay = PrettyView(sessionId: "v5", mode: "focus")
        replay.update(.started(sessionId: "v5", startedAtMs: 0))
        a.sampleCount = 3
        b.sampleCount = 3
        m.sampleCount = 6
        m.devices = ["AA": a, "BB": b]
        replay.update(.frame(sessionId: "v5", seq: 1, emittedAtMs: 3_500, metrics: m, behavior: nil))
        replay.update(.sensorStatus(sessionId: "v5", emittedAtMs: 3_600,
                                    status: SensorStatus(source: "replay", deviceId: nil, state: .streaming)))
        let shown = replay.render()
        #expect(shown.contains("Device       AA  mean 60.0 bpm  RMSSD 5.0 ms\n"), "\(shown)")
        #expect(shown.contains("Device       BB  mean 150.0 bpm  RMSSD 20.0 ms  [shown above]"), "\(shown)")
        #expect(shown.contains("Window       3 samples of BB   (6 of every device)"), "\(shown)")

        // A strap that sends the heart rate alone has no HRV in its entry (it had rmssd_ms 0.0); the top level keeps
        // the SDK's zeros.
        var hrOnly = SessionMetrics()
        hrOnly.hrMeanBpm = 72
        var top = m
        top.devices = ["AA": a, "CC": hrOnly]
        let json = top.jsonValue
        #expect(json["devices"]?["CC"]?["rmssd_ms"] == nil && json["devices"]?["CC"]?["pnn50"] == nil)
        #expect(json["devices"]?["CC"]?["hr_mean_bpm"] == .double(72))
        #expect(json["devices"]?["AA"]?["rmssd_ms"] == .double(5))
        var empty = SessionMetrics()
        empty.devices = ["CC": hrOnly]
        #expect(empty.jsonValue["rmssd_ms"] == .double(0))
    }

    /// Live DFA alpha1 in the live view: the value against the thresholds, the share corrected and the latest
    /// crossing; or why it is withheld.
    @Test func theLiveViewShowsLiveDFAAndTheLatestCrossing() throws {
        var view = PrettyView(sessionId: "v4", mode: "focus")
        view.update(.started(sessionId: "v4", startedAtMs: 0))
        var random = SplitMix64(seed: 3)
        var x = 0.0
        let rr = (0..<160).map { _ -> Double in
            x = 0.95 * x + 12 * random.gaussian()
            return 800 + x
        }
        let estimate = LiveDFA.estimate(segments: [rr], endS: 128)
        let alpha1 = try #require(estimate.alpha1)
        var m = SessionMetrics()
        m.sampleCount = 120
        m.liveDFA = estimate
        view.update(.frame(sessionId: "v4", seq: 1, emittedAtMs: 130_000, metrics: m, behavior: nil))
        let zone = alpha1 >= 0.75 ? "aerobic" : alpha1 >= 0.5 ? "past the aerobic threshold" : "past the anaerobic threshold"
        #expect(view.render().contains("DFA alpha1   \(String(format: "%.2f", alpha1)) (\(zone))   "
            + "\(String(format: "%.1f", estimate.artifactPercent)) % corrected\n"), "\(view.render())")
        var detector = DFACrossingDetector()
        _ = detector.feed(alpha1: 0.8, atS: 180)
        _ = detector.feed(alpha1: 0.7, atS: 200)
        let crossing = try #require(detector.feed(alpha1: 0.7, atS: 220).first)
        view.update(.dfaThreshold(sessionId: "v4", emittedAtMs: 200_000, crossing: crossing))
        #expect(view.render().contains("% corrected   crossed 0.75 down at 00:03:20\n"), "\(view.render())")
        m.liveDFA = LiveDFA.estimate(segments: [Array(rr.prefix(20))], endS: 220)
        view.update(.frame(sessionId: "v4", seq: 2, emittedAtMs: 220_000, metrics: m, behavior: nil))
        let withheld = try #require(m.liveDFA?.withheldReason)
        #expect(view.render().contains("DFA alpha1   withheld: \(withheld)"), "\(view.render())")
        // No line before the first estimate.
        var early = PrettyView(sessionId: "v5", mode: "focus")
        early.update(.frame(sessionId: "v5", seq: 1, emittedAtMs: 5_000, metrics: SessionMetrics(), behavior: nil))
        #expect(!early.render().contains("DFA alpha1"))
    }

    @Test func theLiveViewSaysHowToStopAndEndsWithItsNote() {
        var view = PrettyView(sessionId: "v2", mode: "focus", endNote: "Recorded as session v2 in /s/sessions.sqlite.")
        view.update(.started(sessionId: "v2", startedAtMs: 0))
        #expect(view.render().contains("Ctrl-C stops the session and shows its summary."))
        #expect(!view.render().contains("Recorded as"))
        // A session that received nothing: its summary's zeros are not shown as values, and the note says why.
        var empty = view
        empty.update(.summary(sessionId: "v2", durationActualSec: 12, metrics: SessionMetrics(), behavior: nil))
        let nothing = empty.render()
        #expect(nothing.contains("window mean —") && nothing.contains("HRV          — (no samples in the window)"))
        #expect(!nothing.contains("0.0 bpm") && !nothing.contains("SDNN"), "\(nothing)")
        #expect(nothing.hasSuffix("session ended after 12 s\n" + PrettyView.nothingMeasuredNote + "\n"), "\(nothing)")
        view.update(BiosignalSample(timestampMs: 1_000, bpm: 61, deviceId: "AA", source: "ble_hrm"))
        var m = SessionMetrics()
        m.hrMeanBpm = 61
        m.sampleCount = 1
        view.update(.summary(sessionId: "v2", durationActualSec: 12, metrics: m, behavior: nil))
        let end = view.render()
        #expect(!end.contains("Ctrl-C"))
        #expect(end.contains("window mean 61.0 bpm"))
        #expect(end.hasSuffix("session ended after 12 s\nRecorded as session v2 in /s/sessions.sqlite.\n"))
    }
}
