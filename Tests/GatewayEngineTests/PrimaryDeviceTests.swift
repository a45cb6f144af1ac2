import Foundation
import HRVAnalysis
import SimulatedProvider
import Testing

@testable import GatewayEngine

/// Which device the top level of a frame speaks for when several send (`PrimaryDevice`, docs/engine.md).
@Suite struct PrimaryDeviceTests {
    /// One notification a second from `device` over `seconds`, carrying `rr` in turn (one array per notification).
    private func strap(_ device: String, _ seconds: ClosedRange<Int>, bpm: Double, rr: [[Double]], offsetMs: Int64 = 0)
        -> [BiosignalSample]
    {
        seconds.map { s in
            BiosignalSample(timestampMs: Int64(s) * 1000 + offsetMs, bpm: bpm, rrIntervalsMs: rr[s % rr.count],
                            deviceId: device, source: "ble_hrm")
        }
    }

    private func groups(_ samples: [BiosignalSample]) -> [SessionMetrics.DeviceGroup] {
        SessionMetrics.groupByDevice(samples.sorted { $0.timestampMs < $1.timestampMs })
    }

    /// A at 60 bpm, B at 150 bpm: B sends two and a half times the beats over the same time. The top level is the
    /// first device's (their beats cover the same time), where the device with the most RR (B) took it before.
    @Test func aFasterHeartDoesNotTakeTheTopLevel() {
        let a = strap("A", 1...30, bpm: 60, rr: [[1000]])
        let b = strap("B", 1...30, bpm: 150, rr: [[400, 400], [400, 400, 400]], offsetMs: 5)
        #expect(PrimaryDevice().choose(groups(a + b)) == "A")
        let m = SessionMetrics.compute(window: (a + b).sorted { $0.timestampMs < $1.timestampMs }, hsi: [:],
                                       options: HRVOptions())
        #expect(m.primaryDevice == "A")
        #expect(m.hrMeanBpm == 60, "the top-level heart rate is A's, not the mean of two people (105)")
        #expect(m.rrCount == 30)
        #expect(m.jsonValue["primary_device"]?.stringValue == "A")
        #expect(SessionMetrics.compute(window: a, hsi: [:], options: HRVOptions()).jsonValue["primary_device"] == nil,
                "one device: no primary_device key")
    }

    /// Two straps that send the heart rate alone (no RR): one device's readings at the top level too, by the time
    /// its readings cover; a strap with beats, once one sends them, before either.
    @Test func withoutBeatsTheReadingsDecide() {
        let a = strap("A", 1...30, bpm: 60, rr: [[]])
        let b = strap("B", 1...30, bpm: 150, rr: [[]], offsetMs: 5)
        let window = (a + b).sorted { $0.timestampMs < $1.timestampMs }
        let m = SessionMetrics.compute(window: window, hsi: [:], options: HRVOptions())
        #expect(m.primaryDevice == "A" && m.hrMeanBpm == 60, "not the two people's mean (105)")
        #expect(m.rrCount == nil)
        let c = strap("C", 20...30, bpm: 70, rr: [[850]])
        #expect(PrimaryDevice().choose(groups(window + c)) == "C")
        // Readings without contact cover nothing.
        let off = strap("A", 1...30, bpm: 60, rr: [[]]).map { s -> BiosignalSample in
            var u = s
            u.contact = .noContact
            return u
        }
        #expect(PrimaryDevice().choose(groups(off + b)) == "B")
    }

    /// Two straps that start together: in the first frame's few seconds a faster heart's beats cover a little more
    /// time (less of its beat in progress is missing), which decided the top level before. Within 80 % of the best,
    /// the first device in the window is chosen.
    @Test func atTheStartTheFirstStrapIsChosenNotTheOneAheadByABeatInProgress() {
        let a = strap("A", 1...8, bpm: 60, rr: [[1000]])
        let b = strap("B", 1...9, bpm: 150, rr: [[400, 400], [400, 400, 400]], offsetMs: 5)
        #expect(PrimaryDevice.beatTimeMs(b) > PrimaryDevice.beatTimeMs(a))
        #expect(PrimaryDevice().choose(groups(a + b)) == "A")
        // Below 80 % of the best, the best.
        #expect(PrimaryDevice().choose(groups(strap("A", 1...6, bpm: 60, rr: [[1000]]) + b)) == "B")
    }

    /// Once chosen, a device keeps the top level while its beats cover at least 80 % of the best device's time, and
    /// loses it below.
    @Test func theChoiceHoldsUntilItsBeatsCoverLessThanFourFifthsOfTheBest() {
        var primary = PrimaryDevice()
        primary.update(groups(strap("A", 1...30, bpm: 60, rr: [[1000]]) + strap("B", 3...30, bpm: 60, rr: [[1000]])))
        #expect(primary.id == "A")
        // B ahead by a beat or two (two straps on one person, a tie broken either way): A stays.
        primary.update(groups(strap("A", 1...30, bpm: 60, rr: [[1000]]) + strap("B", 1...30, bpm: 61, rr: [[1000], [1000, 17]])))
        #expect(primary.id == "A")
        // B first in the window: still A, who covers as much.
        primary.update(groups(strap("B", 1...30, bpm: 60, rr: [[1000]]) + strap("A", 1...30, bpm: 60, rr: [[1000]], offsetMs: 5)))
        #expect(primary.id == "A")
        // A's link lost 5 s ago: 25 s of 30 is 83 %, A stays.
        primary.update(groups(strap("A", 1...25, bpm: 60, rr: [[1000]]) + strap("B", 1...30, bpm: 60, rr: [[1000]])))
        #expect(primary.id == "A")
        // 7 s ago: 77 %, B takes over, and keeps it when A comes back.
        primary.update(groups(strap("A", 1...23, bpm: 60, rr: [[1000]]) + strap("B", 1...30, bpm: 60, rr: [[1000]])))
        #expect(primary.id == "B")
        primary.update(groups(strap("A", 1...30, bpm: 60, rr: [[1000]]) + strap("B", 1...30, bpm: 60, rr: [[1000]])))
        #expect(primary.id == "B")
        // A window without a heart rate keeps the choice; invalid RR cover no time.
        primary.update(groups([BiosignalSample(timestampMs: 1000, bpm: 0, deviceId: "A", source: "ble_hrm")]))
        #expect(primary.id == "B")
        #expect(PrimaryDevice().choose(groups([BiosignalSample(timestampMs: 1000, bpm: 0, deviceId: "A", source: "ble_hrm")])) == nil)
        let invalid = strap("A", 1...30, bpm: 60, rr: [[-5, .nan, .infinity]])
        #expect(PrimaryDevice().choose(groups(invalid + strap("B", 30...30, bpm: 60, rr: [[900]]))) == "B")
    }

    /// In a session: A (60 bpm) and B (150 bpm) from the start, A's link lost at 30 s. Every frame's top level is
    /// A's until A's beats cover less than 80 % of the 20-s window, then B's; the summary is B's.
    @Test func theTopLevelFollowsOneStrapAndMovesWhenItsLinkIsLost() async throws {
        let session = try await ScriptedSession(id: "p1", durationSec: 60, windowSec: 20, emitIntervalSec: 5)
        let (clock, provider, log) = (session.clock, session.provider, session.log)
        for second in 1...59 {
            clock.advance(toMs: Int64(second) * 1000)
            if second <= 30 {
                provider.send(BiosignalSample(timestampMs: Int64(second) * 1000, bpm: 60, rrIntervalsMs: [1000],
                                              deviceId: "A0", source: "ble_hrm"))
            }
            provider.send(BiosignalSample(timestampMs: Int64(second) * 1000 + 5, bpm: 150,
                                          rrIntervalsMs: second % 2 == 0 ? [400, 400] : [400, 400, 400],
                                          deviceId: "B0", source: "ble_hrm"))
        }
        clock.advance(toMs: 60_000)
        await log.ended()
        let frames = log.frames.compactMap { e -> (Int, SessionMetrics)? in
            if case .frame(_, let seq, _, let m, _) = e { (seq * 5, m) } else { nil }
        }
        #expect(frames.count == 12)
        for (t, m) in frames {
            // At 35 s A covers 15 of B's 20 s (75 %); after 50 s A is out of the window, and with one device there is
            // no `primary_device`.
            let expected = t < 35 ? "A0" : t <= 50 ? "B0" : nil
            #expect(m.primaryDevice == expected, "at \(t) s")
            #expect((m.devices != nil) == (t <= 50), "at \(t) s")
            #expect(m.hrMeanBpm == (t < 35 ? 60 : 150), "at \(t) s")
        }
        guard case .summary(_, _, let m, _)? = log.last else { throw ProviderBroke() }
        #expect(m.hrMeanBpm == 150)
    }

    /// Live DFA on two straps: A's rhythm is strongly correlated (alpha1 well above 0.75), B's anti-correlated (well
    /// below 0.5); A's link is lost at 200 s. The estimates follow A, then B, and the change of device is not
    /// reported as alpha1 falling through 0.75 and 0.5: no `dfa_threshold` event. (Before, the device with the most
    /// RR in the DFA's 2 minutes was used, and its change reported both crossings.)
    @Test func aChangeOfDeviceIsNotAThresholdCrossing() async throws {
        let session = try await ScriptedSession(id: "p2", durationSec: 300, windowSec: 60, emitIntervalSec: 5)
        let (clock, provider, log) = (session.clock, session.provider, session.log)
        var random = SplitMix64(seed: 7)
        // AR(1) beat series: phi 0.95 around 860 ms (70 bpm) and -0.7 around 1000 ms (60 bpm).
        func series(phi: Double, mean: Double, sd: Double, until: Double) -> [(endMs: Double, rr: Double)] {
            var beats: [(Double, Double)] = []
            var x = 0.0
            var t = 0.0
            let innovation = sd * (1 - phi * phi).squareRoot()
            while t < until {
                x = phi * x + innovation * random.gaussian()
                t += mean + x
                beats.append((t, mean + x))
            }
            return beats
        }
        let a = series(phi: 0.95, mean: 860, sd: 40, until: 200_000)
        let b = series(phi: -0.7, mean: 1000, sd: 30, until: 300_000)
        for second in 1...299 {
            clock.advance(toMs: Int64(second) * 1000)
            for (device, beats) in [("A0", a), ("B0", b)] where device == "B0" || second <= 200 {
                let mine = beats.filter { $0.endMs > Double(second - 1) * 1000 && $0.endMs <= Double(second) * 1000 }
                provider.send(BiosignalSample(timestampMs: Int64(second) * 1000, bpm: 60, rrIntervalsMs: mine.map(\.rr),
                                              deviceId: device, source: "ble_hrm"))
            }
        }
        clock.advance(toMs: 300_000)
        await log.ended()
        let frames = log.frames.compactMap { e -> (Int, SessionMetrics)? in
            if case .frame(_, let seq, _, let m, _) = e { (seq * 5, m) } else { nil }
        }
        let before = try #require(frames.first { $0.0 == 200 }?.1)
        #expect(before.primaryDevice == "A0")
        #expect((before.liveDFA?.alpha1 ?? 0) > 0.75, "A's alpha1: \(String(describing: before.liveDFA))")
        // Each strap has its own live DFA under `devices`.
        #expect(before.devices?["A0"]?.liveDFA == before.liveDFA)
        #expect((before.devices?["B0"]?.liveDFA?.alpha1 ?? 1) < 0.5, "B's: \(String(describing: before.devices?["B0"]))")
        #expect(before.devices?["B0"]?.jsonValue["live_dfa_alpha1"] != nil)
        #expect(frames.first { $0.0 == 230 }?.1.primaryDevice == "B0")
        // In every frame, the top level's live DFA is the primary device's own, also in the frames between the
        // change of primary and the next estimate (before, A's alpha1 stayed at the top under B's name).
        for (at, m) in frames {
            guard let p = m.primaryDevice else { continue }
            let said = "at \(at) s: top \(String(describing: m.liveDFA?.alpha1)), "
                + "\(p)'s \(String(describing: m.devices?[p]?.liveDFA?.alpha1))"
            #expect(m.liveDFA == m.devices?[p]?.liveDFA, "\(said)")
        }
        let after = try #require(frames.last?.1)
        #expect((after.liveDFA?.alpha1 ?? 1) < 0.5, "B's alpha1: \(String(describing: after.liveDFA))")
        let crossings = log.all.filter { $0.type == "dfa_threshold" }
        #expect(crossings.isEmpty, "\(crossings.map(\.jsonValue))")
    }

    /// A team ramp: rider A (the top level: its strap sent first) stays correlated; rider B's rhythm turns
    /// anti-correlated at 150 s. B's
    /// alpha1 falls through 0.75 and 0.5: `dfa_threshold` events with B's `device_id`, none for A.
    @Test func eachStrapsAlpha1CrossesOnItsOwn() async throws {
        let session = try await ScriptedSession(id: "p3", durationSec: 300, windowSec: 60, emitIntervalSec: 5)
        let (clock, provider, log) = (session.clock, session.provider, session.log)
        var random = SplitMix64(seed: 11)
        func beats(_ phi: (Double) -> Double, mean: Double, sd: Double, until: Double) -> [(endMs: Double, rr: Double)] {
            var out: [(Double, Double)] = []
            var x = 0.0
            var t = 0.0
            while t < until {
                let p = phi(t)
                x = p * x + sd * (1 - p * p).squareRoot() * random.gaussian()
                t += mean + x
                out.append((t, mean + x))
            }
            return out
        }
        let a = beats({ _ in 0.95 }, mean: 860, sd: 40, until: 300_000)
        let b = beats({ $0 < 150_000 ? 0.95 : -0.7 }, mean: 1000, sd: 30, until: 300_000)
        for second in 1...299 {
            clock.advance(toMs: Int64(second) * 1000)
            for (device, series) in [("A0", a), ("B0", b)] where device == "A0" || second >= 3 {
                let mine = series.filter { $0.endMs > Double(second - 1) * 1000 && $0.endMs <= Double(second) * 1000 }
                provider.send(BiosignalSample(timestampMs: Int64(second) * 1000, bpm: 60, rrIntervalsMs: mine.map(\.rr),
                                              deviceId: device, source: "ble_hrm"))
            }
        }
        clock.advance(toMs: 300_000)
        await log.ended()
        let crossings = log.all.compactMap { e -> DFAThresholdCrossing? in
            if case .dfaThreshold(_, _, let c) = e { c } else { nil }
        }
        #expect(crossings.allSatisfy { $0.deviceId == "B0" }, "\(crossings)")
        let down75 = try #require(crossings.first { $0.threshold == 0.75 && $0.direction == .down })
        #expect(crossings.contains { $0.threshold == 0.5 && $0.direction == .down })
        #expect(down75.atS > 150 && down75.atS < 300, "\(down75)")
        let event = try #require(log.all.first { $0.type == "dfa_threshold" })
        #expect(event.jsonValue["device_id"]?.stringValue == "B0")
        // The top level stayed A's throughout.
        let tops = log.frames.compactMap { e -> String? in
            if case .frame(_, _, _, let m, _) = e { m.primaryDevice } else { nil }
        }
        #expect(Set(tops) == ["A0"])
    }
}
