import Foundation
import GatewayEngine
import HRVAnalysis
import SimulatedProvider
import StdoutSink
import Testing

/// The resonance frequency assessment: the plan, its cues in virtual time, and the rate it finds in the summary.
@Suite struct ResonanceAssessmentTests {
    @Test func thePlanTravelsInTheDictionaryAndRefusesWhatCannotRun() throws {
        let json = try JSONValue(parsing:
            #"{"session_id":"r","mode":"breathing","duration_sec":700,"resonance_assessment":{"rates":[6,5.5,5],"step_sec":90}}"#)
        let config = try SessionConfig(json: json)
        #expect(config.resonance == ResonancePlan(rates: [6, 5.5, 5], stepSec: 90))
        #expect(try SessionConfig(json: config.jsonValue) == config)
        let defaults = try SessionConfig(json: JSONValue(parsing:
            #"{"session_id":"r","mode":"breathing","duration_sec":700,"resonance_assessment":{}}"#))
        #expect(defaults.resonance?.rates == [6.5, 6, 5.5, 5, 4.5] && defaults.resonance?.stepSec == 120)
        for bad in [
            #""mode":"focus","resonance_assessment":{}"#,
            #""mode":"breathing","pattern":"box","resonance_assessment":{}"#,
            #""mode":"breathing","resonance_assessment":{"rates":[]}"#,
            #""mode":"breathing","resonance_assessment":{"rates":[6,"5"]}"#,
            #""mode":"breathing","resonance_assessment":{"rates":[12]}"#,
            #""mode":"breathing","resonance_assessment":{"rates":[6,5.5,6]}"#,
            #""mode":"breathing","resonance_assessment":{"step_sec":30}"#,
            #""mode":"breathing","resonance_assessment":{"step_sec":1.5}"#,
            #""mode":"breathing","resonance_assessment":[6]"#,
        ] {
            let text = #"{"session_id":"r","duration_sec":700,"# + bad + "}"
            #expect(throws: SessionError.self, "\(bad)") { try SessionConfig(json: JSONValue(parsing: text)) }
        }
    }

    @Test func stepsAreWholeBreathsOfAboutTheStepLength() {
        let plan = ResonancePlan()
        #expect(plan.steps.map(\.breaths) == [13, 12, 11, 10, 9])
        for (rate, step) in zip(plan.rates, plan.steps) {
            #expect(abs(step.pattern.rateBpm - rate) < 0.01)
            #expect(step.pattern.inhaleSec == step.pattern.exhaleSec && step.pattern.holdSec == 0)
            #expect(abs(Double(step.pattern.cycleMs * Int64(step.breaths)) - 120_000) < 100)
        }
        #expect(plan.sessionDurationSec >= 601 && plan.sessionDurationSec <= 603)
    }

    /// Runs the whole default protocol in virtual time over a simulated body whose RSA is largest at `resonance`.
    private func assess(resonance: Double, seed: UInt64) async throws -> (events: [SessionEvent], metrics: SessionMetrics) {
        let plan = ResonancePlan()
        let config = SessionConfig(
            sessionId: "r", mode: .breathing, durationSec: plan.sessionDurationSec,
            profile: ComputeProfile(windowSec: 120, emitIntervalSec: 10), resonance: plan)
        let clock = ManualSessionClock(startMs: 1_000_000)
        let sim = SimulatedBiosignalProvider(
            physiology: .following(config, resonanceRateBpm: resonance), seed: seed, clock: clock)
        let engine = SessionEngine(providers: [sim], clock: clock)
        let log = EventLog(engine)
        _ = try await engine.startSession(config)
        clock.advance(toMs: 1_000_000 + Int64(plan.sessionDurationSec) * 1000)
        await log.ended()
        guard case .summary(_, _, let m, _)? = log.last else { throw ProviderBroke() }
        return (log.all, m)
    }

    @Test func cuesPaceEachStepInTurnAndTheSessionEndsAfterTheLast() async throws {
        let plan = ResonancePlan()
        let (events, _) = try await assess(resonance: 5.5, seed: 1)
        let cues = events.compactMap { e -> BreathingCue? in if case .breathingCue(_, _, let c) = e { c } else { nil } }
        #expect(cues.count == 2 * plan.steps.reduce(0) { $0 + $1.breaths })
        var start: Int64 = 1_000_000 + BreathingCue.firstBreathAfterMs
        var i = 0
        for (s, step) in plan.steps.enumerated() {
            for _ in 0..<(2 * step.breaths) {
                let c = cues[i]
                #expect(c.assessmentStep == s + 1 && c.assessmentSteps == plan.rates.count)
                #expect(abs(c.rateBpm - plan.rates[s]) < 0.01)
                #expect(c.phase == (i % 2 == 0 ? .inhale : .exhale))
                #expect(c.startsAtMs == start, "cue \(i) at \(c.startsAtMs), plan says \(start)")
                start += c.phaseDurationMs
                i += 1
            }
        }
        #expect(cues.map(\.cycle) == (0..<cues.count).map { $0 / 2 + 1 })
        // Frames say which step is under way and at what rate.
        let steps = events.compactMap { e -> (Int?, Double?)? in
            if case .frame(_, _, _, let m, _) = e { (m.assessmentStep, m.pacedBreathingRateBpm) } else { nil }
        }
        #expect(steps.first?.0 == 1 && steps.last?.0 == 5)
        #expect(steps.allSatisfy { step, rate in step.map { abs((rate ?? 0) - plan.rates[$0 - 1]) < 0.01 } ?? false })
        #expect(events.last?.type == "session_summary")
    }

    /// Synthetic RR: this proves that the ranking finds the rate where the simulated heart answers most, wherever
    /// that rate is in the protocol, not that real hearts answer this way.
    @Test(arguments: [(5.5, UInt64(1)), (4.5, 2), (6.5, 3), (5.0, 4)])
    func theAssessmentFindsTheSimulatedResonance(resonance: Double, seed: UInt64) async throws {
        let (_, m) = try await assess(resonance: resonance, seed: seed)
        let result = try #require(m.resonance)
        #expect(result.resonanceRateBpm == resonance, "\(result.steps.map { ($0.rateBpm, $0.score ?? -1) })")
        #expect(result.steps.count == 5 && result.steps.allSatisfy { $0.coverage > 0.95 && $0.score != nil })
        let best = try #require(result.steps.first { $0.rateBpm == resonance })
        #expect(abs((best.lfPeakHz ?? 0) - resonance / 60) < 0.01, "peak \(String(describing: best.lfPeakHz))")
        let json = try #require(m.jsonValue["resonance_assessment"])
        #expect(json["resonance_rate_bpm"]?.doubleValue == resonance)
        if case .array(let steps)? = json["steps"] {
            #expect(steps.count == 5 && steps.allSatisfy { $0["lf_peak_power_ms2"] != nil && $0["rsa_amplitude_bpm"] != nil })
        } else {
            Issue.record("no steps in \(json)")
        }
    }

    /// Two people in one assessment (synthetic RR: the bookkeeping only). A at 64 bpm answers most at 5 /min, B at
    /// 150 bpm at 6.5 /min and sends more than twice the beats. The result is the top-level device's (A, first, its
    /// beats covering the same time as B's), named in `device_id`; counting RR judged B's heart.
    @Test func withTwoStrapsTheTopLevelDevicesBeatsAreJudged() async throws {
        let plan = ResonancePlan()
        let config = SessionConfig(
            sessionId: "r2", mode: .breathing, durationSec: plan.sessionDurationSec,
            profile: ComputeProfile(windowSec: 120, emitIntervalSec: 10), resonance: plan)
        let clock = ManualSessionClock(startMs: 1_000_000)
        var fast = SimulatedBiosignalProvider.Physiology.following(config, resonanceRateBpm: 6.5)
        fast.meanHeartRateBpm = 150
        let a = SimulatedBiosignalProvider(
            physiology: .following(config, resonanceRateBpm: 5), seed: 7, deviceId: "A", clock: clock)
        let b = SimulatedBiosignalProvider(physiology: fast, seed: 8, deviceId: "B", clock: clock)
        let engine = SessionEngine(providers: [a, b], clock: clock)
        let log = EventLog(engine)
        _ = try await engine.startSession(config)
        clock.advance(toMs: 1_000_000 + Int64(plan.sessionDurationSec) * 1000)
        await log.ended()
        guard case .summary(_, _, let m, _)? = log.last else { throw ProviderBroke() }
        try #require(m.primaryDevice == "A", "the top level is A's (the first device, same beat time)")
        #expect((m.devices?["B"]?.rrCount ?? 0) > 2 * (m.devices?["A"]?.rrCount ?? 0))
        let result = try #require(m.resonance)
        #expect(result.resonanceRateBpm == 5, "\(result.steps.map { ($0.rateBpm, $0.score ?? -1) })")
        #expect(m.jsonValue["resonance_assessment"]?["device_id"]?.stringValue == "A")
        #expect(ResonanceReport.lines(m.jsonValue["resonance_assessment"]!).first?.contains("(A's beats)") == true)
    }

    /// The live view names the step under way and, at the end, prints the table with the resonance rate marked.
    @Test func theLiveViewShowsTheStepAndTheResult() async throws {
        let (events, _) = try await assess(resonance: 6, seed: 5)
        var view = PrettyView(sessionId: "r", mode: "breathing")
        var sawStep3 = false
        for e in events {
            view.update(e)
            if case .breathingCue(_, _, let c) = e, c.assessmentStep == 3 {
                sawStep3 = sawStep3 || view.render().contains("resonance assessment step 3 of 5, 5.50 /min")
            }
        }
        #expect(sawStep3)
        let screen = view.render()
        #expect(screen.contains("your resonance rate is 6 breaths/min"), "\(screen)")
        let marked = screen.split(separator: "\n").filter { $0.hasSuffix("<- resonance") }
        #expect(marked.count == 1 && marked.first?.hasPrefix("  6 ") == true, "\(screen)")
    }

    /// A step the strap lost beats in is not judged, however strong the rest of it looks.
    @Test func aStepWithLostBeatsIsNotJudged() {
        let steps = [60_000.0, 180_000].enumerated().map { i, origin in
            ResonanceAssessment.Step(rateBpm: [6, 5][i], originMs: origin, cycleMs: [10_000, 12_000][i], breaths: 10)
        }
        var beats: [PacedBreathing.Beat] = []
        var t = 60_000.0
        var phase = 0.0
        while t < 300_000 {
            let rate = t < 180_000 ? 6.0 : 5.0
            let rr = 1000 + 100 * sin(phase)
            t += rr
            phase += 2 * Double.pi * rate / 60 * rr / 1000
            // Beats between 200 and 240 s are lost (no skin contact): a third of the second step.
            if t < 200_000 || t > 240_000 { beats.append(PacedBreathing.Beat(endMs: t, rrMs: rr)) }
        }
        let result = ResonanceAssessment.assess(steps: steps, beats: beats)
        #expect(result.steps[0].score != nil && result.steps[0].coverage > 0.95)
        #expect(result.steps[1].score == nil && result.steps[1].coverage < ResonanceAssessment.minimumCoverage)
        // A step not scored may be the resonance one: no verdict, the best of the scored steps said as such.
        #expect(result.resonanceRateBpm == nil && result.bestScoredRateBpm == 6 && !result.isComplete)
        #expect(result.scoredSteps == 1)
        let json = SessionMetrics.json(result, deviceId: nil)
        #expect(json["resonance_rate_bpm"] == nil && json["complete"] == .bool(false))
        #expect(json["best_scored_rate_bpm"] == .double(6) && json["scored_steps"] == .int(1))
        let table = ResonanceReport.lines(json)
        #expect(table.first?.contains("incomplete, 1 of 2 steps scored") == true, "\(table)")
        #expect(table.contains { $0.hasSuffix("<- best scored") } && !table.contains { $0.contains("<- resonance") })
        #expect(ResonanceAssessment.assess(steps: steps, beats: []).resonanceRateBpm == nil)
        // Every step scored: the verdict.
        let whole = ResonanceAssessment.assess(steps: [steps[0]], beats: beats)
        #expect(whole.resonanceRateBpm == 6 && whole.isComplete)
        #expect(SessionMetrics.json(whole, deviceId: nil)["complete"] == nil)
    }

    /// A step's RSA is over every judged breath, its first and its last included (both were left out: the first
    /// because no kept beat ends before it starts, the last because no beat of the step ends after the step), and a
    /// step with few breaths was not judged at all.
    @Test func rsaCountsEveryJudgedBreath() {
        for breaths in [4, 6, 9] {
            let cycle = 12_000.0
            let step = ResonanceAssessment.Step(rateBpm: 5, originMs: 0, cycleMs: cycle, breaths: breaths)
            var beats: [PacedBreathing.Beat] = []
            var t = 0.0
            var phase = 0.0
            // The session ends with the step, as the last step of an assessment does.
            while true {
                let rr = 900 + 90 * sin(phase)
                guard t + rr <= step.endMs else { break }
                t += rr
                phase += 2 * Double.pi * rr / cycle
                beats.append(PacedBreathing.Beat(endMs: t, rrMs: rr))
            }
            let r = ResonanceAssessment.measure(step, beats: beats)
            #expect(r.rsaBreaths == breaths - 1, "\(breaths) breaths: \(r.rsaBreaths) judged")
        }
    }

    /// A fast step's peak lies above the LF band (10 /min is 0.167 Hz): it is searched up to the paced frequency.
    @Test func aFastStepIsJudgedOnItsOwnPeak() {
        let cycle = 6_000.0
        let step = ResonanceAssessment.Step(rateBpm: 10, originMs: 0, cycleMs: cycle, breaths: 20)
        var beats: [PacedBreathing.Beat] = []
        var t = 0.0
        while t < step.endMs + 2_000 {
            let rr = 850 + 60 * sin(2 * Double.pi * t / cycle)
            t += rr
            beats.append(PacedBreathing.Beat(endMs: t, rrMs: rr))
        }
        let r = ResonanceAssessment.measure(step, beats: beats)
        #expect(abs((r.lfPeakHz ?? 0) - 10.0 / 60) < 0.01, "peak at \(String(describing: r.lfPeakHz)) Hz")
    }

    /// A slow rate in a short step is lengthened to six breaths, so that the spectrum of its judged part resolves it.
    @Test func slowRatesInShortStepsAreLengthened() {
        let plan = ResonancePlan(rates: [3, 4.5, 6.5], stepSec: 60)
        #expect(plan.steps.map(\.breaths) == [6, 6, 7])
    }

    /// One premature beat and its pause swing instantaneous heart rate by some 30 bpm; RSA leaves them out.
    @Test func rsaLeavesOutAnEctopicBeat() throws {
        var beats: [PacedBreathing.Beat] = []
        var t = 0.0
        for i in 0..<60 {
            var rr = 1000 + 50 * sin(2 * Double.pi * Double(i) / 10)
            if i == 25 { rr *= 0.7 } else if i == 26 { rr *= 1.3 }
            t += rr
            beats.append(PacedBreathing.Beat(endMs: t, rrMs: rr))
        }
        let rsa = try #require(PacedBreathing.rsaAmplitude(beats: beats, originMs: 0, cycleMs: 10_000))
        // 1000 ± 50 ms is 57.1 to 63.2 bpm: about 6 bpm per breath, with or without the ectopic breath.
        #expect(rsa.meanBpm > 4 && rsa.meanBpm < 7, "RSA \(rsa.meanBpm)")
    }
}

/// Raw ECG chunks beside a strap's readings: the metrics are those of the readings alone, and each chunk goes out
/// once, in the next raw frame.
@Suite struct WaveformSampleTests {
    @Test func ecgChunksStayOutOfTheMetricsAndGoOutOnceInRawFrames() async throws {
        func run(withECG: Bool) async throws -> [SessionEvent] {
            let clock = ManualSessionClock(startMs: 0)
            let provider = ScriptedProvider(name: "strap")
            let engine = SessionEngine(providers: [provider], clock: clock)
            let log = EventLog(engine)
            _ = try await engine.startSession(SessionConfig(
                sessionId: "w", mode: .focus, durationSec: 10, profile: ComputeProfile(windowSec: 60, emitIntervalSec: 2),
                includeRawSamples: true))
            for second in 0..<10 {
                clock.advance(toMs: Int64(second) * 1000 + 500)
                provider.send(BiosignalSample(
                    timestampMs: clock.nowMs(), bpm: 60 + Double(second % 3), rrIntervalsMs: [1000], deviceId: "A0",
                    source: "ble_hrm"))
                if withECG {
                    provider.send(BiosignalSample(
                        timestampMs: clock.nowMs(), bpm: 0, deviceId: "A0", source: "polar_ecg",
                        ecgUv: (0..<65).map { Int32(second * 100 + $0) }, ecgRateHz: 130))
                }
            }
            clock.advance(toMs: 10_000)
            await log.ended()
            return log.all
        }
        let plain = try await run(withECG: false)
        let ecg = try await run(withECG: true)
        func metrics(_ events: [SessionEvent]) -> [JSONValue] {
            events.compactMap { e in
                switch e {
                case .frame(_, _, _, let m, _), .summary(_, _, let m, _): m.jsonValue
                default: nil
                }
            }
        }
        #expect(metrics(plain) == metrics(ecg) && !metrics(plain).isEmpty, "the chunks changed the metrics")
        let sent = ecg.flatMap { e -> [Int32] in
            if case .biosignalFrame(_, _, _, let samples) = e { samples.flatMap { $0.ecgUv ?? [] } } else { [] }
        }
        var expected: [Int32] = []
        for second in 0..<10 { for k in 0..<65 { expected.append(Int32(second * 100 + k)) } }
        #expect(sent == expected, "every ECG value once, in order")
    }
}

/// Accelerometer chunks give the frames `motion_rms_g` and `motion_sample_count` over the window.
@Suite struct MotionMetricsTests {
    @Test func motionIsTheRMSAroundTheWindowMean() async throws {
        let session = try await ScriptedSession(id: "m", durationSec: 4, windowSec: 60, emitIntervalSec: 4)
        let (clock, provider, log) = (session.clock, session.provider, session.log)
        clock.advance(toMs: 500)
        provider.send(BiosignalSample(timestampMs: 500, bpm: 60, rrIntervalsMs: [1000], deviceId: "A0", source: "ble_hrm"))
        // Four samples: gravity on z, ±0.1 g on x: 0.1 g from their mean each.
        let acc: [SIMD3<Double>] = [SIMD3(0.1, 0, 1), SIMD3(-0.1, 0, 1), SIMD3(0.1, 0, 1), SIMD3(-0.1, 0, 1)]
        provider.send(BiosignalSample(timestampMs: 600, bpm: 0, deviceId: "A0", source: "polar_acc", accG: acc, accRateHz: 50))
        clock.advance(toMs: 4000)
        await log.ended()
        guard case .summary(_, _, let m, _)? = log.last else { throw ProviderBroke() }
        #expect(m.motionSampleCount == 4)
        #expect(abs((m.motionRmsG ?? 0) - 0.1) < 1e-9, "\(String(describing: m.motionRmsG))")
        #expect(m.sampleCount == 1, "the chunk is not a reading")
        #expect(m.jsonValue["motion_rms_g"]?.doubleValue == 0.1 && m.jsonValue["motion_sample_count"] == .int(4))
    }
}

/// Raw ECG beside the strap's readings of the same recording (MIT-BIH 208: Tests/Fixtures, and the RR the strap
/// would send, from Tests/HRVAnalysisTests/Data): the frames carry the ECG's RR and their agreement with the strap's.
@Suite struct ECGAgreementTests {
    @Test func framesSayHowTheECGsRRAgreeWithTheStraps() async throws {
        let ecg = try MITBIH208.ecg()
        let beats = try MITBIH208.beats(before: 59.5)
        let session = try await ScriptedSession(id: "e", durationSec: 60, windowSec: 60, emitIntervalSec: 60)
        let (clock, provider, log) = (session.clock, session.provider, session.log)
        var next = 0
        for second in 1...60 {
            clock.advance(toMs: Int64(second) * 1000 - 10)
            // The chunks of this second (73 samples each), then the strap's notification with its beats.
            while next < ecg.count && Double(next) / 130 < Double(second) {
                let chunk = Array(ecg[next..<min(ecg.count, next + 73)])
                provider.send(BiosignalSample(
                    timestampMs: Int64((Double(next) * 1000 / 130).rounded()), bpm: 0, deviceId: "A0", source: "polar_ecg",
                    ecgUv: chunk, ecgRateHz: 130))
                next += chunk.count
            }
            let mine = beats.filter { $0.t >= Double(second - 1) && $0.t < Double(second) }
            provider.send(BiosignalSample(
                timestampMs: Int64(second) * 1000 - 10, bpm: 100, rrIntervalsMs: mine.map { Double($0.rr) / 1.024 },
                deviceId: "A0", source: "ble_hrm", rrRaw1024: mine.map(\.rr)))
        }
        clock.advance(toMs: 60_000)
        await log.ended()
        guard case .summary(_, _, let m, _)? = log.last else { throw ProviderBroke() }
        let agreement = try #require(m.ecgRRAgreementMs)
        #expect(agreement <= 2, "agreement \(agreement) ms")
        #expect((m.ecgRRCount ?? 0) >= 100 && abs((m.ecgHrBpm ?? 0) - 109.5) < 5, "\(String(describing: m.ecgRRCount)) \(String(describing: m.ecgHrBpm))")
    }
}
