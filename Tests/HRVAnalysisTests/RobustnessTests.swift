import HRVAnalysis
import Testing

/// Hostile input returns a result (possibly empty) and never traps.
@Suite struct RobustnessTests {
    static let inputs: [[[Double]]] = [
        [],
        [[]],
        [[], [800], []],
        [[Double](repeating: 1000, count: 200)],
        [[.nan, .infinity, -.infinity, -800, 0]],
        [[1e-300, 1e-300, 1e-300, 1e-300, 1e-300, 1e-300, 1e-300, 1e-300, 1e-300]],
        [[Double](repeating: 1e300, count: 20)],
        [(0..<300).map { $0 % 2 == 0 ? 300.0 : 2000.0 }],
        [(0..<300).map { $0 == 150 ? 1e9 : 850.0 + Double($0 % 7) }],
        [(0..<100).map { Double($0 % 3) * 400 + 300 }, [700, 700, 700]],
    ]

    @Test(arguments: 0..<inputs.count)
    func analyzeSurvives(_ index: Int) {
        let segments = Self.inputs[index]
        for options in [HRVOptions(correction: .kubios), HRVOptions(correction: .none),
                        HRVOptions(respirationBandHz: HRVOptions.pacedBreathingBandHz)] {
            let r = HRVAnalyzer.analyze(segments: segments, options: options)
            // Counts stay within bounds: the Kubios correction inserts a beat for each missed one and counts every
            // beat it touched, inserted ones included (artefacts include the intervals rejected as invalid).
            let total = segments.reduce(0) { $0 + $1.count }
            #expect(r.rrCount <= 2 * total)
            #expect(r.artifactCount <= 2 * total)
            // Whatever is reported is a real number: hostile input never yields NaN or infinity.
            let values = [r.meanRRMs, r.hrFromRRBpm, r.sdnnMs, r.rmssdMs, r.pnn50, r.respirationRateBpm].compactMap { $0 }
            #expect(values.allSatisfy { $0.isFinite }, "\(values)")
            if let p = r.pnn50 { #expect(p >= 0 && p <= 100) }
            if let c = r.respirationConfidence { #expect(c >= 0 && c <= 1) }
        }
        for s in segments {
            let c = KubiosCorrection.correct(s)
            // Nothing corrected: the series keeps one interval per input interval.
            if c.correctedBeats == 0 { #expect(c.rrMs.count == s.count) }
            _ = KubiosCorrection.correct(s, sampleRateHz: 1024)
        }
        let beats = HRVAnalyzer.beats(fromRR: segments.flatMap { $0 }.filter { $0.isFinite && $0 > 0 && $0 < 1e6 })
        _ = HRVAnalyzer.analyzeWindows(beats, windowS: 30, stepS: 7)
    }

    /// An interval longer than a minute is no beat: it is dropped and counted like NaN (it used to overflow the sums
    /// of squares to infinity at 1e300).
    @Test func intervalsLongerThanAMinuteAreDroppedAndCounted() {
        let r = HRVAnalyzer.analyze(segments: [[800, 810, 1e300, 790, 805, 60_001, 800]], options: HRVOptions(correction: .none))
        #expect(r.rrCount == 5)
        #expect(r.artifactCount == 2)
        #expect(r.meanRRMs.map { abs($0 - 801) < 1e-9 } == true)
    }

    @Test func constantSeriesIsNotCorrected() {
        let r = HRVAnalyzer.analyze(Self.inputs[3][0])
        #expect(r.artifactCount == 0)
        #expect(r.sdnnMs == 0)
        #expect(r.respirationRateBpm == nil)
    }
}
