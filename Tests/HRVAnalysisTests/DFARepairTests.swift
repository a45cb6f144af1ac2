import Foundation
@testable import HRVAnalysis
import Testing

/// DFA of a median-corrected series with the effect of the repairs taken off (`NonlinearHRV.dfa(_:scales:
/// estimateGroups:)`, docs/hrv.md §11), and the repair numbers it needs from `ArtifactCorrector`.
@Suite struct DFARepairTests {
    static func clean() throws -> [Double] {
        try TestData.column("rr_nsrdb_short_pyhrv_raw.csv", "rr_ms")
    }

    /// The parts of a split missed beat share one number (their sum is measured); a lone interval replaced by the
    /// reference has a number of its own; measured intervals have 0, and `estimated` agrees.
    @Test func eachRepairHasItsOwnNumber() {
        var rr = ArtifactCorrectorTests.steady(80)
        rr.replaceSubrange(27...31, with: [950, 900, 1280, 910, 950])  // lone long at 29 (see ArtifactCorrectorTests)
        rr.replaceSubrange(55...56, with: [rr[55] + rr[56]])  // missed beat at 55
        let c = ArtifactCorrector.correct(rr)
        #expect(ArtifactCorrectorTests.labels(c) == ["longShort@29", "missed@55"])
        #expect(c.estimateGroups.count == c.rrMs.count)
        #expect(c.estimateGroups.map { $0 != 0 } == c.estimated)
        let numbered = c.estimateGroups.indices.filter { c.estimateGroups[$0] != 0 }
        #expect(numbered == [29, 55, 56])
        #expect(c.estimateGroups[55] == c.estimateGroups[56])
        #expect(c.estimateGroups[29] != c.estimateGroups[55])
        let runs = NonlinearHRV.estimateRuns(c.estimateGroups)
        #expect(runs == [NonlinearHRV.EstimateRun(first: 29, last: 29), NonlinearHRV.EstimateRun(first: 55, last: 56)])
        #expect(runs.map(\.keepsSum) == [false, true])
    }

    /// Without an estimate the DFA is the plain one, bit for bit (the neurokit2 references keep holding), through
    /// `NonlinearHRV` and through `HRVAnalyzer` with the median correction.
    @Test func withoutEstimatesTheDFAIsThePlainOne() throws {
        let rr = try Self.clean()
        let none = [Int](repeating: 0, count: rr.count)
        let plain1 = try #require(NonlinearHRV.alpha1(rr))
        let plain2 = try #require(NonlinearHRV.alpha2(rr))
        #expect(NonlinearHRV.alpha1(rr, estimateGroups: none) == plain1)
        #expect(NonlinearHRV.alpha2(rr, estimateGroups: none) == plain2)
        let r = HRVAnalyzer.analyze(rr, options: HRVOptions(correction: .median))
        #expect(r.artifactCount == 0)
        #expect(r.dfaAlpha1 == plain1)
        #expect(r.dfaAlpha2 == plain2)
    }

    /// The copies of the repairs: a kept-sum run becomes its mean, a lone estimate the median of its 10 neighbours,
    /// `shift` beats away; nothing else changes, and a copy that would touch an estimate (or the copy placed just
    /// before it) is not placed.
    @Test func repairsAreRepeatedOnMeasuredIntervalsOnly() {
        // Distinct values, so a copy always changes the interval it lands on.
        let rr = (0..<120).map { 850 + 60 * sin(1.7 * Double($0)) + 0.1 * Double($0) }
        var groups = [Int](repeating: 0, count: rr.count)
        groups[30] = 1  // lone estimate
        groups[60] = 2
        groups[61] = 2  // a repair that kept the elapsed time
        groups[90] = 3
        groups[91] = 3
        groups[96] = 4  // the copy of 90...91 at shift 5 (95...96) would touch this one: not placed
        let runs = NonlinearHRV.estimateRuns(groups)
        let again = NonlinearHRV.repairedAgain(rr, estimateGroups: groups, runs: runs, shift: 5)
        #expect(again.copies == 3)
        func neighbourMedian(_ i: Int) -> Double {
            let v = ((i - 5)...(i + 5)).filter { $0 != i }.map { rr[$0] }.sorted()
            return (v[4] + v[5]) / 2
        }
        #expect(again.rrMs[35] == neighbourMedian(35))
        let mean = (rr[65] + rr[66]) / 2
        #expect(again.rrMs[65] == mean && again.rrMs[66] == mean)
        #expect(again.rrMs[101] == neighbourMedian(101))
        let changed = rr.indices.filter { again.rrMs[$0] != rr[$0] }
        #expect(changed == [35, 65, 66, 101])
    }

    /// With perfect knowledge of the artefacts (the clean NSRDB excerpt repaired at the true places, as the corrector
    /// would), taking off the effect of the repairs brings alpha1 closer to the clean value than the DFA of the
    /// repaired series as it is, which the smooth estimates push up.
    @Test func takingOffTheRepairsBringsAlpha1BackWithPerfectKnowledge() throws {
        let clean = try Self.clean()
        let reference = try #require(NonlinearHRV.alpha1(clean))
        var plain: [Double] = []
        var taken: [Double] = []
        for seed in UInt64(1)...10 {
            let c = ArtifactBenchmark.inject(into: clean, seed: seed)
            let o = ArtifactBenchmark.oracleRepair(clean, artifacts: c.artifacts)
            plain.append(try #require(NonlinearHRV.alpha1(o.rrMs)) - reference)
            taken.append(try #require(NonlinearHRV.alpha1(o.rrMs, estimateGroups: o.estimateGroups)) - reference)
        }
        func mean(_ v: [Double]) -> Double { v.reduce(0, +) / Double(v.count) }
        // Measured: bias +0.019 as it is, +0.002 taken off; mean |error| 0.019 and 0.008.
        #expect(mean(plain) > 0)
        #expect(abs(mean(taken)) < mean(plain) / 3)
        #expect(mean(taken.map(abs)) < mean(plain.map(abs)))
    }

    /// `hrv --correct median`, the live DFA and the engine (through `HRVAnalyzer`) report the same alpha1 for a
    /// window with a few missed beats, and it is not the DFA of the corrected series as it is; the Kubios correction
    /// keeps the plain DFA.
    @Test func everyPathUsesTheSameTreatment() throws {
        let clean = Array(try Self.clean().prefix(150))
        var rr = clean
        for i in [100, 70, 40] { rr.replaceSubrange(i...(i + 1), with: [rr[i] + rr[i + 1]]) }
        let c = ArtifactCorrector.correct(rr)
        #expect(c.findings.map(\.kind) == [.missed, .missed, .missed])
        let expected = try #require(NonlinearHRV.alpha1(c.rrMs, estimateGroups: c.estimateGroups))
        #expect(expected != NonlinearHRV.alpha1(c.rrMs))
        let analysed = HRVAnalyzer.analyze(rr, options: HRVOptions(correction: .median))
        #expect(analysed.dfaAlpha1 == expected)
        let live = LiveDFA.estimate(segments: [rr], endS: 120)
        #expect(live.artifactPercent <= LiveDFA.artifactLimitPercent)
        #expect(live.alpha1 == expected)
        let kubios = HRVAnalyzer.analyze(rr, options: HRVOptions(correction: .kubios))
        #expect(kubios.dfaAlpha1 == NonlinearHRV.alpha1(KubiosCorrection.correct(rr).rrMs))
    }

    /// Estimates so dense that no shift can place copies of half the repairs: the effect cannot be measured and
    /// alpha1 is withheld (the plain DFA of the same series exists).
    @Test func tooDenseRepairsWithholdAlpha1() throws {
        let rr = Array(try Self.clean().prefix(120))
        // A lone estimate every third interval: every copy would sit next to one.
        let groups = rr.indices.map { $0 % 3 == 0 ? $0 / 3 + 1 : 0 }
        #expect(NonlinearHRV.alpha1(rr) != nil)
        #expect(NonlinearHRV.alpha1(rr, estimateGroups: groups) == nil)
    }
}
