import GatewayEngine
import HRVAnalysis
import Testing

@Suite struct SessionMetricsTests {
    let none = HRVOptions(correction: .none)

    @Test func meanHeartRateIsRoundedToOneDecimal() {
        let m = SessionMetrics.compute(window: [sample(0, bpm: 60.0), sample(1, bpm: 60.26)], hsi: [:], options: none)
        #expect(m.hrMeanBpm == 60.1)
        #expect(m.sampleCount == 2)
        #expect(m.startMs == 0)
        #expect(m.endMs == 1)
    }

    @Test func hrvComesFromTheRRIntervalsByTheirDefinitions() {
        // RR 800, 850, 820, 900: differences 50, -30, 80 (50 is not > 50).
        let w = [sample(1_000, rr: [800, 850]), sample(2_000, rr: [820, 900])]
        let m = SessionMetrics.compute(window: w, hsi: [:], options: none)
        #expect(m.rrCount == 4)
        #expect(abs(m.rmssdMs - ((2500.0 + 900 + 6400) / 3).squareRoot()) < 1e-9)
        #expect(abs(m.pnn50 - 100.0 / 3) < 1e-9)
        #expect(abs(m.hrSdnnMs - (5675.0 / 3).squareRoot()) < 1e-9)
        #expect(m.hrFromRRBpm == 71.2)
        #expect(m.artifactCount == 0)
    }

    @Test func successiveDifferencesNeverSpanAGap() {
        let contiguous = [sample(1_000, rr: [800, 800]), sample(2_600, rr: [1000, 1000])]
        let flagged = [sample(1_000, rr: [800, 800]),
                       BiosignalSample(timestampMs: 2_600, bpm: 60, rrIntervalsMs: [1000, 1000], source: "t", gapBefore: true)]
        let late = [sample(1_000, rr: [800, 800]), sample(30_000, rr: [1000, 1000])]
        let noContact = [sample(1_000, rr: [800, 800]),
                         BiosignalSample(timestampMs: 2_000, bpm: 0, source: "test", contact: .noContact),
                         sample(3_000, rr: [1000, 1000])]
        let flaggedWithoutRR = [sample(1_000, rr: [800, 800]),
                                BiosignalSample(timestampMs: 2_000, bpm: 60, source: "test", gapBefore: true),
                                sample(3_000, rr: [1000, 1000])]
        #expect(abs(SessionMetrics.compute(window: contiguous, hsi: [:], options: none).rmssdMs - (200.0 * 200 / 3).squareRoot()) < 1e-9)
        // A notification lost (its `notification_seq` skipped), though the time between the others fits: the CSV
        // export starts a segment there, and so does the engine.
        let lost = [BiosignalSample(timestampMs: 1_000, bpm: 60, rrIntervalsMs: [800, 800], source: "t", sequence: 7),
                    BiosignalSample(timestampMs: 2_600, bpm: 60, rrIntervalsMs: [1000, 1000], source: "t", sequence: 9)]
        var kept = lost
        kept[1].sequence = 8
        // A sample without a number between them hides nothing: 7, none, 10 is a jump.
        let hidden = [lost[0], BiosignalSample(timestampMs: 1_800, bpm: 60, source: "t"),
                      BiosignalSample(timestampMs: 2_600, bpm: 60, rrIntervalsMs: [1000, 1000], source: "t", sequence: 10)]
        #expect(abs(SessionMetrics.compute(window: kept, hsi: [:], options: none).rmssdMs - (200.0 * 200 / 3).squareRoot()) < 1e-9)
        for w in [flagged, late, noContact, flaggedWithoutRR, lost, hidden] {
            #expect(SessionMetrics.compute(window: w, hsi: [:], options: none).rmssdMs == 0)
        }
    }

    /// A strap's notification in a second in which no beat ended carries no RR (every few seconds near 60 bpm,
    /// every other one at 40 bpm); the run of beats goes on through it, as `hr-gateway hrv` sees the same series.
    @Test func aNotificationWithoutRRDoesNotSplitTheRun() {
        // beats end at 0.8, 1.85, 3.05 (none in (2, 3]) and 3.95 s; notifications every second
        let withEmpty = [sample(1_000, rr: [800]), sample(2_000, rr: [1050]), sample(3_000, rr: []),
                         sample(4_000, rr: [1200, 900])]
        let m = SessionMetrics.compute(window: withEmpty, hsi: [:], options: none)
        let diffs = [250.0, 150, -300]
        #expect(m.rrCount == 4)
        #expect(abs(m.rmssdMs - (diffs.map { $0 * $0 }.reduce(0, +) / 3).squareRoot()) < 1e-9)
        #expect(abs(m.pnn50 - 100.0 * 3 / 3) < 1e-9)
    }

    @Test func withoutRRTheSDKKeysStandAlone() {
        let m = SessionMetrics.compute(window: [sample(0, bpm: 70)], hsi: [:], options: none)
        #expect(m.jsonValue.objectValue?.keys.sorted()
            == ["end_ms", "hr_mean_bpm", "hr_sdnn_ms", "pnn50", "rmssd_ms", "sample_count", "start_ms"])
    }

    @Test func cameraValuesGoUnderTheirOwnKeysAndNeverIntoTheStrapMean() {
        let strap = sample(1_000, bpm: 60, device: "AA", source: "ble_hrm")
        let cam = BiosignalSample(timestampMs: 1_500, bpm: 90, deviceId: "/dev/video0", source: SessionMetrics.cameraSource,
                                  confidence: 0.7, breathingRateBpm: 14)
        let both = SessionMetrics.compute(window: [strap, cam], hsi: [:], options: none)
        #expect(both.hrMeanBpm == 60)
        #expect(both.cameraHrBpm == 90)
        #expect(both.cameraConfidence == 0.7)
        #expect(both.breathingRateBpm == 14)
        #expect(both.cameraSampleCount == 1)
        #expect(both.sampleCount == 2)
        let cameraOnly = SessionMetrics.compute(window: [cam], hsi: [:], options: none)
        #expect(cameraOnly.hrMeanBpm == 90)
    }

    @Test func severalDevicesAreBrokenDownAndHRVComesFromOne() {
        let a = [sample(1_000, bpm: 60, rr: [1000], device: "A"), sample(2_000, bpm: 60, rr: [1000], device: "A"),
                 sample(3_000, bpm: 60, rr: [1000], device: "A")]
        let b = [sample(1_100, bpm: 80, rr: [750], device: "B"), sample(2_100, bpm: 80, rr: [760], device: "B")]
        let m = SessionMetrics.compute(window: a + b, hsi: [:], options: none)
        #expect(m.devices?.keys.sorted() == ["A", "B"])
        #expect(m.devices?["A"]?.hrMeanBpm == 60)
        #expect(m.devices?["B"]?.hrMeanBpm == 80)
        #expect(m.devices?["B"]?.rmssdMs == 10)
        #expect(m.rrCount == 3, "top-level HRV comes from the device with the most beats, never a mix")
        #expect(m.rmssdMs == 0)
    }

    @Test func samplesWithoutContactDoNotPullTheMeanDown() {
        let w = [sample(0, bpm: 62),
                 BiosignalSample(timestampMs: 1, bpm: 0, source: "ble_hrm", contact: .noContact)]
        #expect(SessionMetrics.compute(window: w, hsi: [:], options: none).hrMeanBpm == 62)
    }
}

@Suite struct SampleWindowTests {
    @Test func evictionMatchesTheDefinitionInAndOutOfOrder() {
        // Reference: after each append, keep every sample at or after (appended - window).
        var rng = SystemRandomNumberGenerator()
        for ordered in [true, false] {
            var window = SampleWindow(windowSec: 3)
            var reference: [BiosignalSample] = []
            var t: Int64 = 0
            for i in 0..<5_000 {
                t += ordered ? Int64.random(in: 0...40, using: &rng) : Int64.random(in: -500...600, using: &rng)
                let s = sample(t, bpm: Double(i))
                window.append(s)
                reference.append(s)
                reference.removeAll { $0.timestampMs < t - 3_000 }
                if i % 97 == 0 || i == 4_999 {
                    #expect(window.samples.map(\.bpm) == reference.map(\.bpm), "ordered \(ordered), step \(i)")
                    #expect(window.count == reference.count)
                }
            }
        }
    }
}
