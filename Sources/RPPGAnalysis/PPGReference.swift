import Foundation
import RPPG

/// The contact-PPG reference heart rate of one window, computed the way the ubfc-dev README describes:
/// the PPG is linearly resampled onto a uniform 30 Hz grid from the frame times (this is how the dataset's own
/// `eval_windows_10s.csv` reference was made: it matches within 0.11 bpm), band-passed 0.7-3.5 Hz by a 2nd-order
/// Butterworth filter run forwards and backwards (scipy `filtfilt`: odd extension of 15 samples, steady-state
/// initial conditions), then
/// (a) the peak of a Hann-windowed FFT zero-padded to 16384 points within 0.7-3.5 Hz, and
/// (b) 60 / median interval between systolic peaks (local maxima at least 1/3.5 s apart, the higher one kept;
///     at least 4 peaks).
/// The window has a reference only where (a) and (b) agree within 3 bpm; the reference is their mean.
public enum PPGReference {
    public static let sampleRateHz = 30.0
    public static let bandHz = 0.7...3.5
    public static let fftLength = 16384
    public static let agreementBpm = 3.0

    public struct Window: Sendable, Equatable {
        /// (a): FFT peak, bpm.
        public var fftBpm: Double
        /// (b): from the median peak interval, bpm; `nil` with fewer than 4 peaks.
        public var peakIntervalBpm: Double?
        /// The mean of (a) and (b) where they agree within 3 bpm; `nil` otherwise (the window is not scored).
        public var referenceBpm: Double? {
            guard let b = peakIntervalBpm, abs(b - fftBpm) <= PPGReference.agreementBpm else { return nil }
            return (fftBpm + b) / 2
        }
    }

    /// The reference for the window [t0, t0 + length) of a PPG sampled at `times` (strictly increasing).
    /// `nil` when the window is not covered by the recording.
    public static func window(times: [Double], ppg: [Double], start t0: Double, length: Double) -> Window? {
        let n = Int((length * sampleRateHz).rounded())
        guard n >= 32, let first = times.first, let last = times.last, t0 >= first, t0 + length <= last + 1e-9 else { return nil }
        var x = [Double](repeating: 0, count: n)
        var j = 0
        for k in 0..<n {
            let t = t0 + Double(k) / sampleRateHz
            while j + 1 < times.count - 1, times[j + 1] <= t { j += 1 }
            let ta = times[j], tb = times[j + 1]
            let w = tb > ta ? min(1, max(0, (t - ta) / (tb - ta))) : 0
            x[k] = ppg[j] + w * (ppg[j + 1] - ppg[j])
        }
        let y = Butterworth.bandPass2.filtfilt(x)
        let fft = fftPeakBpm(y)
        return Window(fftBpm: fft, peakIntervalBpm: peakIntervalBpm(y))
    }

    /// (a): Hann window (numpy `hanning`: symmetric), zero-padded DFT on the 16384-point grid within the band.
    static func fftPeakBpm(_ y: [Double]) -> Double {
        let n = y.count
        var w = y
        if n > 1 { for i in 0..<n { w[i] *= 0.5 - 0.5 * cos(2 * Double.pi * Double(i) / Double(n - 1)) } }
        let df = sampleRateHz / Double(fftLength)
        let kLo = Int((bandHz.lowerBound / df).rounded(.up)), kHi = Int((bandHz.upperBound / df).rounded(.down))
        var best = kLo, bestPower = -1.0
        for k in kLo...kHi {
            let step = 2 * Double.pi * Double(k) / Double(fftLength)
            // Rotating phasor instead of one cos/sin per sample.
            let cs = cos(step), sn = sin(step)
            var c = 1.0, s = 0.0, re = 0.0, im = 0.0
            for i in 0..<n {
                re += w[i] * c
                im -= w[i] * s
                let c2 = c * cs - s * sn
                s = s * cs + c * sn
                c = c2
            }
            let p = re * re + im * im
            if p > bestPower { bestPower = p; best = k }
        }
        return Double(best) * df * 60
    }

    /// (b): local maxima, thinned to at least `sampleRate / 3.5` samples apart keeping the higher (scipy
    /// `find_peaks(distance=)`); 60 / median interval with at least 4 peaks.
    static func peakIntervalBpm(_ y: [Double]) -> Double? {
        let distance = Int(sampleRateHz / bandHz.upperBound)
        var candidates: [Int] = []
        if y.count >= 3 {
            for i in 1..<(y.count - 1) where y[i] > y[i - 1] && y[i] > y[i + 1] { candidates.append(i) }
        }
        var keep = [Bool](repeating: true, count: candidates.count)
        for idx in candidates.indices.sorted(by: { y[candidates[$0]] > y[candidates[$1]] }) where keep[idx] {
            var k = idx - 1
            while k >= 0, candidates[idx] - candidates[k] < distance { keep[k] = false; k -= 1 }
            k = idx + 1
            while k < candidates.count, candidates[k] - candidates[idx] < distance { keep[k] = false; k += 1 }
        }
        let peaks = candidates.indices.filter { keep[$0] }.map { candidates[$0] }
        guard peaks.count >= 4 else { return nil }
        let intervals = zip(peaks.dropFirst(), peaks).map { Double($0 - $1) }.sorted()
        let m = intervals.count
        let median = m % 2 == 1 ? intervals[m / 2] : (intervals[m / 2 - 1] + intervals[m / 2]) / 2
        return 60 * sampleRateHz / median
    }
}
