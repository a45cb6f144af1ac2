/// R peaks in a raw ECG (docs/hrv.md §14), after Pan & Tompkins (1985): a band-limited slope energy finds each QRS
/// complex with an adaptive threshold, and the R peak is then located on the baseline-free ECG to a fraction of a
/// sample (a parabola through the highest sample and its neighbours). Works at the H10's 130 Hz and above.
public enum ECGRPeaks {
    /// Shortest RR accepted (a beat within 250 ms of the previous one is the same complex): 240 bpm.
    public static let refractorySec = 0.25
    /// A gap longer than this many mean RR is searched again with half the threshold (a missed small beat).
    public static let searchBackFactor = 1.66

    /// Times of the R peaks, in seconds from the first sample, for one uninterrupted run of samples.
    public static func detect(_ ecg: [Double], rateHz fs: Double) -> [Double] {
        let n = ecg.count
        guard fs >= 50, n >= Int(2 * fs) else { return [] }
        // Baseline and slow waves out: the signal minus its centred 200 ms mean.
        let k = max(1, Int((0.1 * fs).rounded()))
        let hp = subtractMovingMean(ecg, halfWidth: k)
        // Slope energy, integrated over 150 ms (centred: no delay to undo).
        var energy = [Double](repeating: 0, count: n)
        for i in 1..<(n - 1) {
            let d = hp[i + 1] - hp[i - 1]
            energy[i] = abs(d)
        }
        let w = max(1, Int((0.075 * fs).rounded()))
        let integrated = movingMean(energy, halfWidth: w)

        // Candidate peaks: local maxima of the integrated energy, at least the refractory period apart.
        let refractory = Int((refractorySec * fs).rounded())
        var candidates: [Int] = []
        for i in 1..<(n - 1) where integrated[i] > 0 && integrated[i] >= integrated[i - 1] && integrated[i] > integrated[i + 1] {
            if let last = candidates.last, i - last < refractory {
                if integrated[i] > integrated[last] { candidates[candidates.count - 1] = i }
            } else {
                candidates.append(i)
            }
        }
        guard !candidates.isEmpty else { return [] }
        // Adaptive threshold between the signal and noise peak levels, learnt from the first two seconds.
        let learn = candidates.filter { $0 < Int(2 * fs) }.map { integrated[$0] }
        var signal = (learn.max() ?? integrated[candidates[0]]) * 0.5
        var noise = learn.isEmpty ? 0 : learn.reduce(0, +) / Double(learn.count) * 0.5
        var accepted: [Int] = []
        func threshold() -> Double { noise + 0.25 * (signal - noise) }
        for c in candidates {
            let v = integrated[c]
            if v > threshold() {
                if let last = accepted.last, c - last < refractory { continue }
                // Search back over a long gap for a beat the threshold missed.
                if accepted.count >= 2, let last = accepted.last {
                    let meanRR = Double(last - accepted[max(0, accepted.count - 9)]) / Double(min(8, accepted.count - 1))
                    if Double(c - last) > searchBackFactor * meanRR {
                        let missed = candidates.filter { $0 > last + refractory && $0 < c - refractory }
                            .max { integrated[$0] < integrated[$1] }
                        if let m = missed, integrated[m] > threshold() / 2 {
                            accepted.append(m)
                            signal = 0.25 * integrated[m] + 0.75 * signal
                        }
                    }
                }
                accepted.append(c)
                signal = 0.125 * v + 0.875 * signal
            } else {
                noise = 0.125 * v + 0.875 * noise
            }
        }
        // The R peak: the highest baseline-free sample within 100 ms of the QRS energy, refined by a parabola.
        let reach = Int((0.1 * fs).rounded())
        var times: [Double] = []
        for c in accepted {
            let lo = max(1, c - reach), hi = min(n - 2, c + reach)
            guard lo <= hi else { continue }
            var best = lo
            for i in lo...hi where hp[i] > hp[best] { best = i }
            let a = hp[best - 1], b = hp[best], d = hp[best + 1]
            let denominator = a - 2 * b + d
            let shift = denominator < 0 ? max(-0.5, min(0.5, 0.5 * (a - d) / denominator)) : 0
            let t = (Double(best) + shift) / fs
            if let last = times.last, t - last < refractorySec { continue }
            times.append(t)
        }
        return times
    }

    static func movingMean(_ x: [Double], halfWidth k: Int) -> [Double] {
        let n = x.count
        var prefix = [Double](repeating: 0, count: n + 1)
        for i in 0..<n { prefix[i + 1] = prefix[i] + x[i] }
        return (0..<n).map { i in
            let lo = max(0, i - k), hi = min(n, i + k + 1)
            return (prefix[hi] - prefix[lo]) / Double(hi - lo)
        }
    }

    static func subtractMovingMean(_ x: [Double], halfWidth k: Int) -> [Double] {
        let m = movingMean(x, halfWidth: k)
        return zip(x, m).map { $0 - $1 }
    }
}

extension ECGRPeaks {
    /// A run of ECG without a break: its samples, the time of the first (ms) and, when its chunks' times say it, the
    /// rate the sensor really sampled at.
    public struct Run: Sendable, Equatable {
        public var startMs: Double
        public var samples: [Double]
        /// The sample rate measured over the run (Hz; `WaveformRate.measured` on its chunks' times), nil when the
        /// nominal one is all there is. A Polar H10's "130 Hz" is 128–131 Hz, depending on the strap.
        public var measuredRateHz: Double?
        public init(startMs: Double, samples: [Double], measuredRateHz: Double? = nil) {
            self.startMs = startMs
            self.samples = samples
            self.measuredRateHz = measuredRateHz
        }
    }

    /// RR intervals (ms) between successive R peaks within each run (none across runs), at each run's measured rate
    /// when it has one (the detector's filters are designed at the nominal rate, a difference of a few per cent at
    /// most that they do not notice; the times are the measured rate's).
    public static func rrIntervals(_ runs: [Run], rateHz: Double) -> [Double] {
        rrRuns(runs, rateHz: rateHz).flatMap(\.rrMs)
    }

    /// The RR intervals of each run that has two R peaks or more, with the time of its last R peak (seconds on the
    /// runs' clock), as `rrIntervals` computes them.
    public static func rrRuns(_ runs: [Run], rateHz: Double) -> [(rrMs: [Double], endS: Double)] {
        runs.compactMap { run in
            let peaks = detect(run.samples, rateHz: rateHz)
            let scale = run.measuredRateHz.map { rateHz / $0 } ?? 1
            guard let last = peaks.last, peaks.count > 1 else { return nil }
            return (zip(peaks, peaks.dropFirst()).map { ($1 - $0) * 1000 * scale }, run.startMs / 1000 + last * scale)
        }
    }

    /// How closely ECG-derived RR follow the strap's own RR (ms): the two sequences are aligned at the shift (±10
    /// beats) where their median absolute difference is smallest, which is then the answer; nil with fewer than 10
    /// aligned beats. (The strap's beat times are its notifications' and lag by up to a second; its RR do not.)
    public static func agreementMs(ecgRR: [Double], strapRR: [Double]) -> Double? {
        var best: Double?
        for shift in -10...10 {
            var diffs: [Double] = []
            for i in ecgRR.indices {
                let j = i + shift
                if j >= 0 && j < strapRR.count { diffs.append(abs(ecgRR[i] - strapRR[j])) }
            }
            guard diffs.count >= 10 else { continue }
            diffs.sort()
            let median = diffs[diffs.count / 2]
            if best == nil || median < best! { best = median }
        }
        return best
    }
}
