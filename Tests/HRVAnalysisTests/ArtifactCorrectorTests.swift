import HRVAnalysis
import Testing

/// The rules of `ArtifactCorrector` (docs/hrv.md §11) one by one, each on a case the corrector missed or got wrong
/// without it.
@Suite struct ArtifactCorrectorTests {
    /// A steady rhythm around 1000 ms (±10 ms), so the threshold sits at its 12 % floor.
    static func steady(_ count: Int = 60) -> [Double] {
        (0..<count).map { 1000 + 10 * Double(($0 * 7) % 3 - 1) }
    }

    /// Findings as "kind@index", for comparisons.
    static func labels(_ c: ArtifactCorrectionResult) -> [String] {
        c.findings.map { "\($0.kind.rawValue)@\($0.index)" }
    }

    static func clean() throws -> [Double] {
        try TestData.column("rr_nsrdb_short_pyhrv_raw.csv", "rr_ms")
    }

    /// Spike rule: +28 % over the neighbours' median is inside the ±40 % a lone step may take, but the interval
    /// stands 41 % above the mean of its two (short) neighbours.
    @Test func loneLongAfterShortIntervalsIsReplaced() {
        var rr = Self.steady()
        rr.replaceSubrange(27...31, with: [950, 900, 1280, 910, 950])
        let c = ArtifactCorrector.correct(rr)
        #expect(Self.labels(c) == ["longShort@29"])
        #expect(c.rrMs.count == rr.count)
        #expect(abs(c.rrMs[29] - 1000) < 20, "replaced by \(c.rrMs[29])")
    }

    /// The same +28 % reached along a trend (both neighbours long too) is left alone.
    @Test func longIntervalOnATrendIsKept() {
        var rr = Self.steady()
        rr.replaceSubrange(28...30, with: [1100, 1280, 1150])
        let c = ArtifactCorrector.correct(rr)
        #expect(c.findings.isEmpty, "\(c.findings)")
        #expect(c.rrMs == rr)
    }

    /// Premature-beat rule: a beat 25 % early in the irregular NSRDB excerpt (threshold at its 30 % ceiling) is
    /// below the ectopic-pair rule's 0.6 T on its short side; short-then-long, a jump of over a quarter of the
    /// reference and a near-flat result after moving the beat find it.
    @Test func smallPrematureBeatIsMoved() throws {
        let clean = try Self.clean()
        var rr = clean
        let q = 0.25 * rr[102]
        rr[102] -= q
        rr[103] += q
        let c = ArtifactCorrector.correct(rr)
        #expect(Self.labels(c) == ["ectopic@102"])
        let half = (clean[102] + clean[103]) / 2
        #expect(abs(c.rrMs[102] - half) < 1e-9 && abs(c.rrMs[103] - half) < 1e-9)
        // The moved beat's two intervals are estimates; every other interval is as measured.
        #expect(c.estimated.indices.filter { c.estimated[$0] } == [102, 103])
    }

    /// Extra beat beside a real long interval (NSRDB beat 234, 1172 ms, +36 %): the first fragment and the long
    /// interval once looked like an ectopic pair, and the fragments pulled the reference down so far that the real
    /// interval was replaced. Preferring the extra beat and judging lone intervals after the merge restore the series.
    @Test(arguments: [0.3, 0.5, 0.7])
    func extraBeatBesideARealLongIntervalIsMergedExactly(split: Double) throws {
        let clean = try Self.clean()
        var rr = clean
        rr.replaceSubrange(235...235, with: [split * clean[235], (1 - split) * clean[235]])
        let c = ArtifactCorrector.correct(rr)
        #expect(c.findings.map(\.kind) == [.extra], "\(c.findings)")
        #expect(c.rrMs.count == clean.count)
        #expect(zip(c.rrMs, clean).allSatisfy { abs($0 - $1) < 1e-9 })
    }

    /// Fragment rule: the real long interval itself split 70/30. The 30 % part is under half the reference; merged
    /// with the previous part it gives back the real interval (+36 %, beyond T but a plausible lone step).
    @Test func fragmentOfALongIntervalIsMergedBack() throws {
        let clean = try Self.clean()
        var rr = clean
        rr.replaceSubrange(234...234, with: [0.7 * clean[234], 0.3 * clean[234]])
        let c = ArtifactCorrector.correct(rr)
        #expect(Self.labels(c) == ["extra@235"])
        #expect(c.rrMs.count == clean.count)
        #expect(zip(c.rrMs, clean).allSatisfy { abs($0 - $1) < 1e-9 })
        // A merge gives back the time between two detected beats: a measurement, not an estimate.
        #expect(c.estimated == [Bool](repeating: false, count: clean.count))
    }

    /// RMSSD after the median correction is computed over the successive differences between two measured
    /// intervals only: a missed beat split in two equal halves adds a zero difference and two smoothed ones, which
    /// are estimates and would pull RMSSD down. Here RMSSD equals that of the clean series without the three
    /// differences around the split interval, and the result says how many differences were used.
    @Test func rmssdAfterASplitMissedBeatUsesOnlyMeasuredDifferences() {
        // An irregular rhythm around 1000 ms (steps of 55-95 ms), so the equal halves are visibly smoother.
        let clean: [Double] = (0..<60).map { (i: Int) -> Double in
            let step = Double((i * 7) % 5 - 2)
            let odd = Double(i % 2)
            return 1000 + 30 * step + 5 * odd
        }
        var rr = clean
        rr.replaceSubrange(30...31, with: [clean[30] + clean[31]])
        let c = ArtifactCorrector.correct(rr)
        #expect(Self.labels(c) == ["missed@30"])
        #expect(c.estimated.indices.filter { c.estimated[$0] } == [30, 31])

        // The clean differences that do not touch intervals 30 and 31 (the ones at 30, 31 and 32 are lost).
        let kept = (1..<clean.count).filter { !(30...32).contains($0) }.map { clean[$0] - clean[$0 - 1] }
        let expected = (kept.map { $0 * $0 }.reduce(0, +) / Double(kept.count)).squareRoot()
        let r = HRVAnalyzer.analyze(rr, options: HRVOptions(correction: .median, extendedMetrics: false))
        #expect(r.rrCount == clean.count)
        #expect(r.successiveDifferences == clean.count - 1 - 3)
        #expect(abs((r.rmssdMs ?? 0) - expected) < 1e-9, "\(r.rmssdMs ?? 0) vs \(expected)")
        let nn50 = kept.filter { abs($0) > 50 }.count
        #expect(r.nn50 == nn50)
        let pnn50 = 100 * Double(nn50) / Double(kept.count)
        #expect(abs((r.pnn50 ?? 0) - pnn50) < 1e-9)
        // Over every difference of the corrected series (the halves included) RMSSD is a different number
        // (72.69 against 73.22 ms here).
        let all = HRVAnalyzer.timeDomain(segments: [c.rrMs])
        #expect(abs((all.rmssdMs ?? 0) - expected) > 0.3)
        // Without correction, and with the Kubios one, every difference counts.
        let none = HRVAnalyzer.analyze(clean, options: HRVOptions(correction: .none, extendedMetrics: false))
        #expect(none.successiveDifferences == clean.count - 1)
        let kubios = HRVAnalyzer.analyze(rr, options: HRVOptions(correction: .kubios, extendedMetrics: false))
        #expect(kubios.successiveDifferences == (kubios.rrCount - 1))
    }
}
