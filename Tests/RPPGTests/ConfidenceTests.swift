import Foundation
import Testing
@testable import RPPG

/// The pulse confidence's evidence is the mean of two SNRs at the POS peak: the POS spectrum's and the CHROM
/// spectrum's (docs/rppg.md, "Confidence calibration"). A pulse is in both projections; a peak only one of them
/// lets through counts half.
@Suite struct ConfidenceTests {
    static func posPeak(bpm: Double, snrDb: Double) -> SpectralRate {
        SpectralRate(frequencyHz: bpm / 60, peakRatio: 0.5, snrDb: snrDb, fundamentalSnrDb: snrDb, atBandEdge: false)
    }

    /// The SNR at another signal's peak is read off the same spectrum as the signal's own figures: at its own peak
    /// it equals `fundamentalSnrDb`; at a component with a quarter of the power it is about 11 dB lower (power 1
    /// against 0.25 at 1.2 Hz, 0.25 against 1 at 2.0 Hz: ±6 dB, less the part of each Hann peak outside ±0.1 Hz,
    /// which counts as noise: +4.7 and -6.4 dB).
    @Test func snrAtAnotherPeakIsMeasuredOnTheSameSpectrum() throws {
        let signal = (0..<300).map { i -> Double in
            let t = Double(i) / 30
            return sin(2 * Double.pi * 1.2 * t + 0.3) + 0.5 * sin(2 * Double.pi * 2.0 * t + 1.1)
        }
        let own = RateSpectrum.pulse(signal, sampleRate: 30, snrAtHz: 1.2)
        let rate = try #require(own.rate)
        #expect(abs(rate.frequencyHz - 1.2) < 0.01)
        let atOwnPeak = RateSpectrum.pulse(signal, sampleRate: 30, snrAtHz: rate.frequencyHz)
        #expect(abs(try #require(atOwnPeak.snrAtDb) - rate.fundamentalSnrDb) < 1e-9)
        #expect(abs(try #require(own.snrAtDb) - 4.7) < 0.5)
        let weaker = try #require(RateSpectrum.pulse(signal, sampleRate: 30, snrAtHz: 2.0).snrAtDb)
        #expect(abs(weaker + 6.4) < 0.5)
        #expect(RateSpectrum.pulse(signal, sampleRate: 30, snrAtHz: nil).snrAtDb == nil)
        // The public entry point gives the same rate.
        #expect(RateSpectrum.pulse(signal, sampleRate: 30) == rate)
    }

    /// The arithmetic of the rule at a 10 s window (no short-window penalty), threshold 0.4.
    @Test func evidenceIsTheMeanOfPOSAndCHROMAtThePOSPeak() {
        let peak = Self.posPeak(bpm: 90, snrDb: 0)
        // CHROM carries the peak as strongly as POS: E = 0 dB, (0 + 3.5) / 5.
        let both = RPPGEstimator.pulseConfidence(pos: peak, chromBpm: 90.5, chromSnrAtPeakDb: 0, lastReadingBpm: nil,
                                                 windowSeconds: 10)
        #expect(abs(both - 0.7) < 1e-9)
        // CHROM barely sees it (-5 dB): E = -2.5 dB, below the threshold although the two peaks agree. POS alone
        // (the earlier rule) would have given 0.7.
        let posOnly = RPPGEstimator.pulseConfidence(pos: peak, chromBpm: 90.5, chromSnrAtPeakDb: -5,
                                                    lastReadingBpm: nil, windowSeconds: 10)
        #expect(abs(posOnly - 0.2) < 1e-9)
        // The same peak continuing a reading 1 bpm away gets 3.5 dB: E = +1 dB.
        let continuing = RPPGEstimator.pulseConfidence(pos: peak, chromBpm: 70, chromSnrAtPeakDb: -5,
                                                       lastReadingBpm: 91, windowSeconds: 10)
        #expect(abs(continuing - 0.9) < 1e-9)
        // A continuing reading needs E >= -5 dB at 0.4: -4 and -6 dB on the two sides of it.
        let justAbove = RPPGEstimator.pulseConfidence(pos: Self.posPeak(bpm: 90, snrDb: -4), chromBpm: nil,
                                                      chromSnrAtPeakDb: -4, lastReadingBpm: 92, windowSeconds: 10)
        let justBelow = RPPGEstimator.pulseConfidence(pos: Self.posPeak(bpm: 90, snrDb: -6), chromBpm: nil,
                                                      chromSnrAtPeakDb: -6, lastReadingBpm: 92, windowSeconds: 10)
        #expect(justAbove >= 0.4 && justBelow < 0.4)
        // Without a CHROM spectrum there is no support: E = (10 - 30) / 2 even for a strong POS peak.
        #expect(RPPGEstimator.projectionEvidenceDb(posSnrDb: 10, chromSnrAtPeakDb: nil) == -10)
        let unsupported = RPPGEstimator.pulseConfidence(pos: Self.posPeak(bpm: 90, snrDb: 10), chromBpm: nil,
                                                        chromSnrAtPeakDb: nil, lastReadingBpm: 90, windowSeconds: 10)
        #expect(unsupported == 0)
    }

    /// On a clean trace (the pulse in both projections) the estimator reports CHROM's SNR at the POS peak, close
    /// to POS's own, and reads the pulse.
    @Test func cleanPulseIsSupportedByBothProjections() throws {
        let e = try #require(try lastEstimate(seconds: 12) { t in
            let p = 0.003 * sin(2 * Double.pi * 1.3 * t)
            return RGBMean(r: 170 * (1 + 0.3 * p), g: 120 * (1 + p), b: 100 * (1 + 0.5 * p))
        })
        let chrom = try #require(e.chromSnrAtPeakDb)
        #expect(chrom > 10 && abs(chrom - e.fundamentalSnrDb) < 6)
        #expect(abs(try #require(e.hrBpm) - 78) <= 1)
    }
}
