/// How the heart answers paced breathing (docs/hrv.md §12): RSA amplitude per paced breath, adherence of the
/// RR-derived breathing rate to the paced one, and a coherence score of the heart-rate spectrum.
public enum PacedBreathing {
    /// A beat: the time it ended (ms, the samples' clock) and its RR interval (ms).
    public struct Beat: Sendable, Equatable {
        public var endMs: Double
        public var rrMs: Double
        public init(endMs: Double, rrMs: Double) {
            self.endMs = endMs
            self.rrMs = rrMs
        }
    }

    /// RSA amplitude: for each whole paced breath in the beats' span (breaths start at `originMs` + k·`cycleMs`),
    /// the instantaneous heart rate's maximum minus its minimum (bpm, 60000/RR at each beat), averaged over the
    /// breaths. A breath counts with at least 3 beats in it. Nil without one such breath. Ectopic beats and
    /// artefacts (an RR more than 20 % away from the median of the 5 beats around it) are left out: one premature
    /// beat would otherwise add some 30 bpm to its breath.
    ///
    /// With `breaths` (the breaths k = lower..<upper of a pacing that is over, such as a resonance step's judged
    /// ones) exactly those are measured: the first even though no beat ends before it starts, the last even though
    /// the beat running at its end is cut off by the step's end (when less than one and a half RR intervals of the
    /// breath are left uncovered).
    public static func rsaAmplitude(
        beats all: [Beat], originMs: Double, cycleMs: Double, breaths: Range<Int>? = nil
    ) -> (meanBpm: Double, breaths: Int)? {
        let beats = withoutEctopics(all)
        guard cycleMs > 0, let first = beats.first?.endMs, let lastBeat = beats.last else { return nil }
        let last = lastBeat.endMs
        // Breaths before the origin were not paced.
        var k = breaths?.lowerBound ?? Swift.max(0, Int(((first - originMs) / cycleMs).rounded(.up)))
        var amplitudes: [Double] = []
        var index = 0
        while true {
            let start = originMs + Double(k) * cycleMs
            let end = start + cycleMs
            if let breaths {
                if k >= breaths.upperBound || end - last >= 1.5 * lastBeat.rrMs { break }
            } else if end > last {
                break
            }
            while index < beats.count && beats[index].endMs < start { index += 1 }
            var lo = Double.infinity
            var hi = -Double.infinity
            var n = 0
            var j = index
            while j < beats.count && beats[j].endMs < end {
                let hr = 60000 / beats[j].rrMs
                if hr.isFinite {
                    lo = Swift.min(lo, hr)
                    hi = Swift.max(hi, hr)
                    n += 1
                }
                j += 1
            }
            if n >= 3 { amplitudes.append(hi - lo) }
            k += 1
        }
        guard !amplitudes.isEmpty else { return nil }
        return (amplitudes.reduce(0, +) / Double(amplitudes.count), amplitudes.count)
    }

    /// Tolerance of `withoutEctopics`: respiratory sinus arrhythmia moves RR smoothly, so that the median of five
    /// neighbouring beats stays within a few per cent of each of them; a premature beat and its pause are 20-30 % off.
    public static let ectopicTolerance = 0.2

    static func withoutEctopics(_ beats: [Beat]) -> [Beat] {
        guard beats.count >= 5 else { return beats }
        return beats.indices.compactMap { i in
            let lo = Swift.max(0, Swift.min(i - 2, beats.count - 5))
            let around = beats[lo..<(lo + 5)].map(\.rrMs).sorted()
            let median = around[2]
            return abs(beats[i].rrMs - median) <= ectopicTolerance * median ? beats[i] : nil
        }
    }

    /// Adherence of the measured breathing rate to the paced one: 1 − |measured − paced| / paced, floored at 0.
    public static func adherence(measuredBpm: Double, pacedBpm: Double) -> Double? {
        guard pacedBpm > 0, measuredBpm.isFinite, measuredBpm > 0 else { return nil }
        return Swift.max(0, 1 - abs(measuredBpm - pacedBpm) / pacedBpm)
    }

    /// The band in which the coherence peak is looked for, and the peak window's half-width (HeartMath's 0.030 Hz
    /// window).
    public static let coherenceSearchHz = 0.04...0.26
    public static let coherencePeakHalfWidthHz = 0.015
    /// Coherence needs this much uninterrupted data (a frequency resolution of about 0.017 Hz with Welch's
    /// half-length segments).
    public static let minimumSecondsCoherence = 60.0

    /// Coherence: the power within ±0.015 Hz of the highest peak in 0.04–0.26 Hz over the power in 0.0033–0.4 Hz
    /// (Welch PSD of the 4 Hz tachogram, as for LF and HF), in 0…1. Nil under a minute of data.
    ///
    /// With `pacedHz` (the pacer's rate), none until the beats span more than four of its breaths: below that the
    /// spectrum (§9 keeps no frequency under 4 / duration) cannot hold the paced peak, and the score was that of
    /// the lowest frequency kept (a 4-7-8 pattern, 3.2 /min, scored 0.06-0.13 in its first 80 s).
    public static func coherence(_ rr: [Double], pacedHz: Double? = nil) -> (score: Double, peakHz: Double)? {
        let seconds = rr.reduce(0, +) / 1000
        guard rr.count >= 8, seconds >= minimumSecondsCoherence else { return nil }
        if let pacedHz, seconds * pacedHz <= 4 { return nil }
        let psd = FrequencyDomain.welch(rr)
        guard psd.f.count > 2 else { return nil }
        var peak: Int?
        for i in psd.f.indices where coherenceSearchHz.contains(psd.f[i]) {
            if peak == nil || psd.p[i] > psd.p[peak!] { peak = i }
        }
        guard let p = peak else { return nil }
        let peakHz = psd.f[p]
        // The peak window covers at least the peak's neighbouring bins, however coarse the resolution. Bin edges are
        // compared with a millionth of a bin to spare: a neighbour exactly one bin away (k·Δf computed two ways) fell
        // out for some lengths and not others, and a steady 6 /min pacer's coherence flipped between 0.27 and 0.58
        // from one frame to the next.
        let bin = psd.f[1] - psd.f[0]
        let slack = bin * 1e-6
        func power(_ lo: Double, _ hi: Double) -> Double {
            var total = 0.0
            for i in 1..<psd.f.count where psd.f[i - 1] >= lo - slack && psd.f[i] <= hi + slack {
                total += 0.5 * (psd.p[i - 1] + psd.p[i]) * (psd.f[i] - psd.f[i - 1])
            }
            return total
        }
        let half = Swift.max(coherencePeakHalfWidthHz, bin)
        let total = power(FrequencyDomain.vlfBand.lowerBound, FrequencyDomain.hfBand.upperBound)
        guard total > 0 else { return nil }
        return (Swift.min(1, power(peakHz - half, peakHz + half) / total), peakHz)
    }
}
