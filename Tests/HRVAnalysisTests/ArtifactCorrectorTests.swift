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
    }
}
