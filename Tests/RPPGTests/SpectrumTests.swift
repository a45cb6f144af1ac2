import Foundation
import RPPG
import RPPGSynthetic
import Testing

@Suite struct SpectrumTests {
    static func sine(_ hz: Double, fs: Double, seconds: Double, phase: Double = 0.3) -> [Double] {
        (0..<Int(fs * seconds)).map { sin(2 * Double.pi * hz * Double($0) / fs + phase) }
    }

    @Test(arguments: [0.8, 1.234, 2.5, 2.85])
    func sinusoidRateIsRecovered(_ hz: Double) throws {
        let r = try #require(RateSpectrum.pulse(Self.sine(hz, fs: 30, seconds: 10), sampleRate: 30))
        #expect(abs(r.perMinute - hz * 60) <= 0.3)
        #expect(r.peakRatio > 0.9)
        #expect(r.snrDb > 10)
        #expect(!r.atBandEdge)
    }

    /// A peak closer to the band edge than the window's resolution (0.1 Hz at 10 s) cannot be told from an
    /// out-of-band component's tail: it is flagged, at both ends; one resolution further in, it is not.
    @Test(arguments: [(0.74, true), (2.95, true), (0.85, false), (2.85, false)])
    func peaksWithinTheResolutionOfTheEdgeAreFlagged(_ c: (hz: Double, flagged: Bool)) throws {
        let r = try #require(RateSpectrum.pulse(Self.sine(c.hz, fs: 30, seconds: 10), sampleRate: 30))
        #expect(abs(r.perMinute - c.hz * 60) <= 0.3)
        #expect(r.atBandEdge == c.flagged)
    }

    @Test func noiseHasLowPeakRatioAndSNR() throws {
        var rng = SplitMix(seed: 7)
        var ratios: [Double] = []
        for _ in 0..<20 {
            let noise = (0..<300).map { _ in rng.gaussian() }
            let r = try #require(RateSpectrum.pulse(noise, sampleRate: 30))
            ratios.append(r.peakRatio)
            #expect(r.snrDb < 0)
        }
        #expect(ratios.max()! < 0.5)
    }

    @Test func trendPeaksAreFlaggedAsBandEdge() throws {
        let ramp = (0..<900).map { Double($0) * 0.01 + 0.2 * sin(Double($0) * 0.001) }
        let r = try #require(RateSpectrum.breathing(ramp, sampleRate: 30))
        #expect(r.atBandEdge)
    }

    @Test func resamplingCopesWithJitterAndGaps() throws {
        // A pure 1.3 Hz colour pulse sampled at irregular times with dropped frames.
        var rng = SplitMix(seed: 3)
        var estimator = try RPPGEstimator()
        var last: RPPGEstimate?
        var t = 0.0
        while t < 12 {
            t += 1.0 / 30 * (0.6 + 0.8 * rng.uniform()) + (rng.uniform() < 0.1 ? 1.0 / 30 : 0)
            let p = sin(2 * Double.pi * 1.3 * t)
            let s = RPPGSample(tSeconds: t, rgb: RGBMean(r: 180 * (1 + 0.0017 * p), g: 130 * (1 + 0.004 * p), b: 100 * (1 + 0.0028 * p)))
            if let e = estimator.append(s) { last = e }
        }
        let e = try #require(last)
        #expect(abs(try #require(e.hrBpm) - 78) <= 1)
    }

    @Test func outOfOrderAndNonFiniteSamplesAreIgnored() throws {
        var estimator = try RPPGEstimator()
        #expect(estimator.append(RPPGSample(tSeconds: .nan, rgb: RGBMean(r: 1, g: 1, b: 1))) == nil)
        _ = estimator.append(RPPGSample(tSeconds: 1, rgb: RGBMean(r: 100, g: 100, b: 100)))
        #expect(estimator.append(RPPGSample(tSeconds: 0.5, rgb: RGBMean(r: 100, g: 100, b: 100))) == nil)
    }

    @Test func configurationIsValidated() {
        var c = RPPGConfiguration()
        c.pulseBandHz = 0.7...5.0
        #expect(throws: RPPGConfigurationError.self) { try RPPGEstimator(configuration: c) }
        c = RPPGConfiguration()
        c.pulseBandHz = 0.7...4.0
        #expect(throws: Never.self) { try RPPGEstimator(configuration: c) }
    }

    @Test func traceCSVErrorsNameTheLine() {
        #expect(throws: RGBTraceError(line: 3, reason: "G is not a number: 'x'")) {
            try RGBTrace.parse("t_s,R,G,B\n0,1,2,3\n0.1,1,x,3\n", framesPerSecond: nil)
        }
        #expect(throws: RGBTraceError.self) { try RGBTrace.parse("frame,R,G,B\n0,1,2,3\n", framesPerSecond: nil) }
        #expect(throws: RGBTraceError.self) { try RGBTrace.parse("a,b,c\n1,2,3\n", framesPerSecond: 30) }
        let ok = try? RGBTrace.parse("\u{FEFF}frame, R ,G,B,extra\n0,1,2,3,9\n\n1,4,5,6,9\n", framesPerSecond: 10)
        #expect(ok?.samples.count == 2)
        #expect(ok?.droppedRows == 0)
        #expect(ok?.samples.last?.tSeconds == 0.1)
        #expect(ok?.samples.last?.rgb == RGBMean(r: 4, g: 5, b: 6))
    }

    /// A frame without a face (nan or an empty cell) is left out and counted, the rest read, its time kept for a
    /// trace without t_s (it rejected the whole file); lone-CR line endings split; a header that did not split is
    /// not echoed whole.
    @Test func blankFramesAreLeftOutAndCountedAndLoneCREndsALine() throws {
        let rows = try RGBTrace.parse("R,G,B\n1,2,3\nnan,2,3\n4,,6\n7,8,9\n", framesPerSecond: 10)
        #expect(rows.samples.map(\.tSeconds) == [0, 0.3])
        #expect(rows.blankRows == 2 && rows.firstBlankLine == 3)
        #expect(try RGBTrace.parse("t_s,R,G,B\r0,1,2,3\r0.1,4,5,6\r", framesPerSecond: nil).samples.count == 2)
        let wide = "x," + (0..<2000).map { "\($0)" }.joined(separator: ",")
        let error = #expect(throws: RGBTraceError.self) { try RGBTrace.parse(wide + "\n1\n", framesPerSecond: 30) }
        #expect((error?.reason.count ?? .max) < 300, "\(String(describing: error?.reason))")
        #expect(throws: RGBTraceError.self) { try RGBTrace.parse("R,G,B\nnan,nan,nan\n", framesPerSecond: 30) }
    }

    /// Peak tracking: a slightly weaker peak near the last reading wins over a stronger one far away; without the
    /// prior the stronger one is taken; a much stronger far peak still wins with the prior (evidence beats habit).
    @Test func priorPrefersThePeakNearTheLastReading() throws {
        func signal(_ far: Double) -> [Double] {
            (0..<300).map { i in
                let t = Double(i) / 30
                return far * sin(2 * Double.pi * 1.0 * t) + 0.8 * sin(2 * Double.pi * 2.0 * t)
            }
        }
        let prior = RatePrior(centerHz: 2.0, sigmaHz: 0.25, floor: 0.3)
        let plain = try #require(RateSpectrum.pulse(signal(1.0), sampleRate: 30))
        #expect(abs(plain.perMinute - 60) < 1)
        let tracked = try #require(RateSpectrum.pulse(signal(1.0), sampleRate: 30, prior: prior))
        #expect(abs(tracked.perMinute - 120) < 1)
        let overruled = try #require(RateSpectrum.pulse(signal(3.0), sampleRate: 30, prior: prior))
        #expect(abs(overruled.perMinute - 60) < 1)
    }

    /// The pulse signals are band-limited to the pulse band before their spectra (docs/rppg.md): a slow colour
    /// wander many times the pulse's size, just below the band, leaks through the window into its low edge, and
    /// without the band-pass that leakage is the largest in-band value; with it, the pulse is found.
    @Test func slowWanderBelowTheBandDoesNotHideThePulse() throws {
        let e = try #require(try lastEstimate(seconds: 12) { t in
            let p = 0.002 * sin(2 * Double.pi * 1.9 * t)
            let w = 0.03 * sin(2 * Double.pi * 0.45 * t + 0.4)
            return RGBMean(r: 180 * (1 + 0.4 * p + w), g: 130 * (1 + p - 0.6 * w), b: 100 * (1 + 0.7 * p + 0.3 * w))
        })
        #expect(abs(try #require(e.candidateHrBpm) - 114) <= 1.5)
    }

    /// Real recordings repeat a timestamp now and then (one in 2,024 rows of a UBFC trace): such rows are dropped
    /// and counted, the rest is kept.
    @Test func repeatedOrBackwardTimestampsAreDroppedAndCounted() throws {
        let rows = try RGBTrace.parse(
            "t_s,R,G,B\n0.0,1,2,3\n0.1,1,2,3\n0.1,9,9,9\n0.05,9,9,9\n0.2,4,5,6\n0.2,9,9,9\n0.3,7,8,9\n",
            framesPerSecond: nil)
        #expect(rows.samples.map(\.tSeconds) == [0.0, 0.1, 0.2, 0.3])
        #expect(rows.samples.allSatisfy { $0.rgb != RGBMean(r: 9, g: 9, b: 9) })
        #expect(rows.droppedRows == 3)
        #expect(rows.firstDroppedLine == 4)
        // One row 100 s late is dropped alone (kept, it took every later row with it).
        let late = try RGBTrace.parse(
            "t_s,R,G,B\n0.0,1,2,3\n0.1,1,2,3\n100.2,9,9,9\n0.3,4,5,6\n0.4,7,8,9\n", framesPerSecond: nil)
        #expect(late.samples.map(\.tSeconds) == [0.0, 0.1, 0.3, 0.4])
        #expect(late.droppedRows == 1 && late.firstDroppedLine == 4)
        // A file whose only rows are data rows still needs one: a header alone is an error.
        #expect(throws: RGBTraceError(line: 1, reason: "no data rows after the header")) {
            try RGBTrace.parse("t_s,R,G,B\n", framesPerSecond: nil)
        }
    }
}

/// The last estimate of a default `RPPGEstimator` fed `seconds` of a synthetic 30 fps trace whose colour at time t is
/// `rgb(t)`.
func lastEstimate(seconds: Int, _ rgb: (Double) -> RGBMean) throws -> RPPGEstimate? {
    var estimator = try RPPGEstimator()
    var last: RPPGEstimate?
    for i in 0..<(seconds * 30) {
        let t = Double(i) / 30
        if let e = estimator.append(RPPGSample(tSeconds: t, rgb: rgb(t))) { last = e }
    }
    return last
}
