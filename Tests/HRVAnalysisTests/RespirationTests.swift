import Foundation
import HRVAnalysis
import Testing

/// Respiration rate from synthetic RR series with a known modulation frequency.
@Suite struct RespirationTests {
    static let normal = HRVOptions().respirationBandHz
    static let paced = HRVOptions.pacedBreathingBandHz

    @Test(arguments: [60.0, 120.0, 300.0])
    func spontaneousBreathingAt15PerMinute(seconds: Double) throws {
        for seed in UInt64(1)...5 {
            let rr = synthesiseRSA(baseMs: 900, amplitudeMs: 30, frequencyHz: 0.25, seconds: seconds, noiseMs: 10, seed: seed)
            let e = try #require(RespirationEstimator.estimate(segments: [rr], bandHz: Self.normal))
            #expect(abs(e.rateBpm - 15) < 0.5)
            #expect(e.confidence > 0.6 && e.confidence <= 1)
        }
    }

    @Test(arguments: [0.18, 0.33, 0.42])
    func otherRatesInTheBand(frequencyHz: Double) throws {
        let rr = synthesiseRSA(baseMs: 800, amplitudeMs: 25, frequencyHz: frequencyHz, seconds: 120, noiseMs: 8, seed: 3)
        let e = try #require(RespirationEstimator.estimate(segments: [rr], bandHz: Self.normal))
        #expect(abs(e.frequencyHz - frequencyHz) < 0.01)
    }

    /// Paced breathing at 6 /min (0.1 Hz): found in the breathing-mode band, not reported in the normal band
    /// (the maximum there is leakage at the band edge).
    @Test func pacedBreathingAt6PerMinute() throws {
        let rr = synthesiseRSA(baseMs: 950, amplitudeMs: 60, frequencyHz: 0.1, seconds: 120, noiseMs: 10, seed: 11)
        let e = try #require(RespirationEstimator.estimate(segments: [rr], bandHz: Self.paced))
        #expect(abs(e.rateBpm - 6) < 0.3)
        #expect(e.confidence > 0.6)
        #expect(RespirationEstimator.estimate(segments: [rr], bandHz: Self.normal) == nil)
    }

    /// A strong 0.1 Hz (Mayer wave) oscillation next to weaker breathing at 0.3 Hz: the normal band keeps the
    /// breathing peak.
    @Test func mayerWaveDoesNotCaptureTheNormalBand() throws {
        var random = SeededRandom(state: 5)
        var t = 0.0
        var rr: [Double] = []
        while t < 180 {
            let v = 850 + 40 * sin(2 * Double.pi * 0.1 * t) + 20 * sin(2 * Double.pi * 0.3 * t) + 8 * random.gaussian()
            rr.append(v)
            t += v / 1000
        }
        let e = try #require(RespirationEstimator.estimate(segments: [rr], bandHz: Self.normal))
        #expect(abs(e.rateBpm - 18) < 0.5)
    }

    @Test(arguments: [60.0, 300.0])
    func whiteNoiseGivesNoEstimate(seconds: Double) {
        // The detection threshold is set for about 2 % false alarms on short windows; allow one in twenty.
        var found = 0
        for seed in UInt64(100)..<120 {
            let rr = synthesiseRSA(baseMs: 900, amplitudeMs: 0, frequencyHz: 0.25, seconds: seconds, noiseMs: 40, seed: seed)
            if RespirationEstimator.estimate(segments: [rr], bandHz: Self.normal) != nil { found += 1 }
            if RespirationEstimator.estimate(segments: [rr], bandHz: Self.paced) != nil { found += 1 }
        }
        #expect(found <= (seconds >= 300 ? 0 : 2))
    }

    @Test func tooLittleData() {
        let rr = synthesiseRSA(baseMs: 900, amplitudeMs: 40, frequencyHz: 0.25, seconds: 25, noiseMs: 5, seed: 1)
        #expect(RespirationEstimator.estimate(segments: [rr], bandHz: Self.normal) == nil)
        // Two 20 s pieces of a clear signal are enough together; three 10 s pieces are each too short to use.
        let long = synthesiseRSA(baseMs: 900, amplitudeMs: 40, frequencyHz: 0.25, seconds: 40, noiseMs: 5, seed: 2)
        let half = long.count / 2
        #expect(RespirationEstimator.estimate(segments: [Array(long[..<half]), Array(long[half...])], bandHz: Self.normal) != nil)
        let third = long.count / 4
        let pieces = [Array(long[..<third]), Array(long[third..<(2 * third)]), Array(long[(2 * third)..<(3 * third)])]
        #expect(RespirationEstimator.estimate(segments: pieces, bandHz: Self.normal) == nil)
    }

    @Test func analyzerFillsRespirationFromCorrectedSeries() throws {
        var rr = synthesiseRSA(baseMs: 900, amplitudeMs: 30, frequencyHz: 0.25, seconds: 120, noiseMs: 8, seed: 4)
        rr[60] += rr[61]  // a missed beat
        rr.remove(at: 61)
        let r = HRVAnalyzer.analyze(rr)
        #expect(r.artifactCount >= 1)
        #expect(abs(try #require(r.respirationRateBpm) - 15) < 0.5)
        #expect(r.respirationConfidence != nil)
        let paced = HRVAnalyzer.analyze(rr, options: HRVOptions(respirationBandHz: HRVOptions.pacedBreathingBandHz))
        #expect(paced.respirationRateBpm != nil)
    }
}
