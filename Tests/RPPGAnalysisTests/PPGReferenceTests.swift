import Foundation
import RPPG
import RPPGAnalysis
import Testing

/// The reference computation of the accuracy harness, checked against scipy (coefficients and filtfilt output
/// printed by scipy 1.17 for the same inputs) and on a waveform with a known rate.
@Suite struct PPGReferenceTests {
    @Test func butterworthMatchesScipy() {
        let f = Butterworth.bandPass2
        let b = [0.06004382, 0, -0.12008764, 0, 0.06004382]
        let a = [1, -3.02200416, 3.55111471, -1.95868597, 0.43749735]
        for (x, y) in zip(f.b, b) { #expect(abs(x - y) < 1e-7) }
        for (x, y) in zip(f.a, a) { #expect(abs(x - y) < 1e-7) }
    }

    @Test func filtfiltMatchesScipy() {
        let x = (0..<300).map { i -> Double in
            let t = Double(i) / 30
            return sin(2 * Double.pi * 1.2 * t) + 0.3 * sin(2 * Double.pi * 0.2 * t)
        }
        let y = Butterworth.bandPass2.filtfilt(x)
        #expect(y.count == 300)
        for (i, v) in [(0, 0.07490561), (1, 0.3149107), (2, 0.53874731), (298, -0.51491292), (299, -0.28524268)] {
            #expect(abs(y[i] - v) < 1e-6, "y[\(i)] = \(y[i])")
        }
    }

    /// A pulse-like waveform at 78 bpm sampled at an uneven ~29.5 fps: both estimates agree and give the rate.
    @Test func knownRateOnUnevenClock() throws {
        var times: [Double] = [], ppg: [Double] = []
        var t = 0.0
        var k = 0
        while t < 20 {
            times.append(t)
            let phase = 2 * Double.pi * 1.3 * t
            ppg.append(sin(phase) + 0.4 * sin(2 * phase + 0.5))
            k += 1
            t += (k % 7 == 0) ? 0.040 : 0.033
        }
        let w = try #require(PPGReference.window(times: times, ppg: ppg, start: 3, length: 10))
        #expect(abs(w.fftBpm - 78) < 0.6)
        #expect(abs((w.peakIntervalBpm ?? 0) - 78) < 2.5)
        #expect(abs((w.referenceBpm ?? 0) - 78) < 1.5)
        // Windows not covered by the recording have no reference.
        #expect(PPGReference.window(times: times, ppg: ppg, start: 15, length: 10) == nil)
    }
}
