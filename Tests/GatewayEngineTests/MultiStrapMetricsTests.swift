import Foundation
import Testing

@testable import GatewayEngine

/// Two straps with `--ecg` / `--acc` in one session (a team, a lab comparing placements): each device's ECG and
/// motion metrics stay its own.
@Suite struct MultiStrapMetricsTests {
    /// Strap A sends the MIT-BIH 208 ECG excerpt and the beats a strap would derive from it; strap B the same ECG but
    /// a steady 1000 ms as its own RR, from its second second (so A's beats are the first and its HRV is the top
    /// level's, and stays there: both straps' beats cover the window).
    @Test func eachStrapsECGIsMeasuredAgainstItsOwnRR() async throws {
        let ecg = try MITBIH208.ecg()
        let beats = try MITBIH208.beats(before: 29.5)
        let session = try await ScriptedSession(id: "two", durationSec: 30, windowSec: 60, emitIntervalSec: 5)
        let (clock, provider, log) = (session.clock, session.provider, session.log)
        var next = 0
        for second in 1...30 {
            clock.advance(toMs: Int64(second) * 1000 - 10)
            while next < ecg.count && Double(next) / 130 < Double(second) {
                let chunk = Array(ecg[next..<min(ecg.count, next + 73)])
                let t = Int64((Double(next) * 1000 / 130).rounded())
                // B's chunk first in some seconds, A's in others: neither has more chunks for long.
                for device in (second % 2 == 0 ? ["A0", "B0"] : ["B0", "A0"]) {
                    provider.send(BiosignalSample(
                        timestampMs: t, bpm: 0, deviceId: device, source: "polar_ecg", ecgUv: chunk, ecgRateHz: 130))
                }
                next += chunk.count
            }
            let mine = beats.filter { $0.t >= Double(second - 1) && $0.t < Double(second) }
            provider.send(BiosignalSample(
                timestampMs: Int64(second) * 1000 - 10, bpm: 100, rrIntervalsMs: mine.map { Double($0.rr) / 1.024 },
                deviceId: "A0", source: "ble_hrm", rrRaw1024: mine.map(\.rr)))
            if second >= 2 {
                provider.send(BiosignalSample(
                    timestampMs: Int64(second) * 1000 - 5, bpm: 60, rrIntervalsMs: [1000], deviceId: "B0", source: "ble_hrm"))
            }
        }
        clock.advance(toMs: 30_000)
        await log.ended()
        let frames = log.all.compactMap { e -> SessionMetrics? in
            if case .frame(_, _, _, let m, _) = e { return m } else { return nil }
        }
        #expect(frames.count >= 4)
        for m in frames.dropFirst() {
            // The top level: strap A's (its HRV is there), every frame.
            #expect((m.ecgRRAgreementMs ?? 99) <= 2, "top-level agreement \(String(describing: m.ecgRRAgreementMs))")
            let a = try #require(m.devices?["A0"])
            let b = try #require(m.devices?["B0"])
            #expect(a.ecgHrBpm == m.ecgHrBpm && a.ecgRRAgreementMs == m.ecgRRAgreementMs)
            // B's R peaks are the same heart's; its own RR (1000 ms) is not.
            #expect(b.ecgHrBpm == a.ecgHrBpm)
            if (b.rrCount ?? 0) >= 10 {  // the agreement needs ten intervals side by side
                #expect((b.ecgRRAgreementMs ?? 0) > 100, "B against its own RR: \(String(describing: b.ecgRRAgreementMs))")
            }
        }
        #expect(frames.filter { ($0.devices?["B0"]?.ecgRRAgreementMs ?? 0) > 100 }.count >= 4)
    }

    /// Strap A lies flat (gravity on z), strap B upright (gravity on x); each moves ±0.1 g. Each one's motion is
    /// 0.1 g, and so is the session's: the straps' different angles are not motion.
    @Test func motionIsEachStrapsAboutItsOwnMean() async throws {
        let session = try await ScriptedSession(id: "m2", durationSec: 4, windowSec: 60, emitIntervalSec: 4)
        let (clock, provider, log) = (session.clock, session.provider, session.log)
        clock.advance(toMs: 500)
        for device in ["A0", "B0"] {
            provider.send(BiosignalSample(timestampMs: 500, bpm: 60, rrIntervalsMs: [1000], deviceId: device, source: "ble_hrm"))
        }
        let flat: [SIMD3<Double>] = [SIMD3(0.1, 0, 1), SIMD3(-0.1, 0, 1), SIMD3(0.1, 0, 1), SIMD3(-0.1, 0, 1)]
        let upright: [SIMD3<Double>] = [SIMD3(1, 0.1, 0), SIMD3(1, -0.1, 0), SIMD3(1, 0.1, 0), SIMD3(1, -0.1, 0),
                                        SIMD3(1, 0.1, 0), SIMD3(1, -0.1, 0)]
        provider.send(BiosignalSample(timestampMs: 600, bpm: 0, deviceId: "A0", source: "polar_acc", accG: flat, accRateHz: 50))
        provider.send(BiosignalSample(timestampMs: 610, bpm: 0, deviceId: "B0", source: "polar_acc", accG: upright, accRateHz: 50))
        clock.advance(toMs: 4000)
        await log.ended()
        guard case .summary(_, _, let m, _)? = log.last else { throw ProviderBroke() }
        #expect(m.motionSampleCount == 10)
        #expect(abs((m.motionRmsG ?? 0) - 0.1) < 1e-9, "\(String(describing: m.motionRmsG))")
        #expect(m.devices?["A0"]?.motionRmsG == 0.1 && m.devices?["A0"]?.motionSampleCount == 4)
        #expect(m.devices?["B0"]?.motionRmsG == 0.1 && m.devices?["B0"]?.motionSampleCount == 6)
        #expect(m.devices?["A0"]?.jsonValue["motion_rms_g"]?.doubleValue == 0.1)
    }

    /// A strap that stops sending (its link lost) leaves the motion metrics once its samples are older than the
    /// window, as when all straps shared one window: it does not count for the rest of the session.
    @Test func aStrapThatStoppedAgesOutOfTheMotionMetrics() async throws {
        let session = try await ScriptedSession(id: "m3", durationSec: 30, windowSec: 10, emitIntervalSec: 30)
        let (clock, provider, log) = (session.clock, session.provider, session.log)
        let still: [SIMD3<Double>] = [SIMD3(0.1, 0, 1), SIMD3(-0.1, 0, 1)]
        let shaken: [SIMD3<Double>] = [SIMD3(1, 0, 0), SIMD3(-1, 0, 0)]
        for second in 1...29 {
            clock.advance(toMs: Int64(second) * 1000)
            for device in second <= 5 ? ["A0", "B0"] : ["A0"] {
                provider.send(BiosignalSample(timestampMs: Int64(second) * 1000, bpm: 60, rrIntervalsMs: [1000],
                                              deviceId: device, source: "ble_hrm"))
                provider.send(BiosignalSample(timestampMs: Int64(second) * 1000 + 10, bpm: 0, deviceId: device,
                                              source: "polar_acc", accG: device == "A0" ? still : shaken, accRateHz: 50))
            }
        }
        clock.advance(toMs: 30_000)
        await log.ended()
        guard case .summary(_, _, let m, _)? = log.last else { throw ProviderBroke() }
        // B's shaking (1 g) ended 24 s ago, beyond the 10 s window: only A's 0.1 g is left.
        #expect(m.motionSampleCount == 2 * 10, "\(String(describing: m.motionSampleCount))")
        #expect(abs((m.motionRmsG ?? 0) - 0.1) < 1e-9, "\(String(describing: m.motionRmsG))")
    }

    /// A strap that stops sending ECG and motion while its heart rate goes on (the only strap: no other chunk comes
    /// to age them out): its ECG and motion metrics leave the frames a window after its last chunk, and are not in
    /// the summary. They stayed for the rest of the session, the summary's ECG heart rate a minute from its start.
    @Test func waveformMetricsAgeOutWhenAllWaveformsStop() async throws {
        let ecg = try MITBIH208.ecg()
        let session = try await ScriptedSession(id: "w1", durationSec: 40, windowSec: 10, emitIntervalSec: 5)
        let (clock, provider, log) = (session.clock, session.provider, session.log)
        var next = 0
        for second in 1...39 {
            clock.advance(toMs: Int64(second) * 1000)
            if second <= 15 {
                while next < ecg.count && Double(next) / 130 < Double(second) {
                    provider.send(BiosignalSample(
                        timestampMs: Int64((Double(next) * 1000 / 130).rounded()), bpm: 0, deviceId: "A0",
                        source: "polar_ecg", ecgUv: Array(ecg[next..<min(ecg.count, next + 73)]), ecgRateHz: 130))
                    next += 73
                }
                provider.send(BiosignalSample(timestampMs: Int64(second) * 1000 + 10, bpm: 0, deviceId: "A0",
                                              source: "polar_acc", accG: [SIMD3(0.1, 0, 1), SIMD3(-0.1, 0, 1)], accRateHz: 50))
            }
            provider.send(BiosignalSample(timestampMs: Int64(second) * 1000, bpm: 60, rrIntervalsMs: [1000],
                                          deviceId: "A0", source: "ble_hrm"))
        }
        clock.advance(toMs: 40_000)
        await log.ended()
        var frames: [(end: Int64, m: SessionMetrics)] = []
        for e in log.all {
            if case .frame(_, _, let at, let m, _) = e { frames.append((at, m)) }
        }
        let early = try #require(frames.first { $0.end == 10_000 }?.m)
        #expect(early.ecgHrBpm != nil && early.motionRmsG != nil, "while the chunks come")
        let late = frames.filter { $0.end >= 30_000 }
        #expect(!late.isEmpty)
        for f in late { #expect(f.m.ecgHrBpm == nil && f.m.ecgRRCount == nil && f.m.motionRmsG == nil, "at \(f.end)") }
        guard case .summary(_, _, let m, _)? = log.last else { throw ProviderBroke() }
        #expect(m.ecgHrBpm == nil && m.ecgRRAgreementMs == nil && m.motionSampleCount == nil)
    }
}
