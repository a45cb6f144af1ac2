/// The rate a waveform sensor really sampled at. A Polar H10 samples its "130 Hz" ECG at 128–131 Hz, steady for a
/// given strap (docs/pmd.md, "Sample rate"): a strap at 130.17 Hz taken as 130 Hz makes every interval 0.13 % long,
/// and its samples' times run 4.7 s behind after an hour. The chunks' times (each its first sample's, mapped from the
/// strap's clock and rounded to the millisecond) say the real rate.
public struct WaveformRate: Sendable, Equatable {
    /// Samples per second.
    public var rateHz: Double
    /// The time of the run's first sample on the fitted line (ms).
    public var startMs: Double

    public init(rateHz: Double, startMs: Double) {
        self.rateHz = rateHz
        self.startMs = startMs
    }

    /// The time of sample `index` of the run (ms).
    public func timeMs(_ index: Int) -> Double { startMs + Double(index) * 1000 / rateHz }

    /// The line through a run's chunk times: each chunk's first-sample time against that sample's index in the run,
    /// by least squares. Nil, so that the nominal rate is kept, when the run spans less than `minimumSpanMs`, when the
    /// fitted rate is within the times' own scatter of `nominalHz` (three standard errors, or 20 ppm: a sensor at its
    /// nominal rate keeps samples exactly 1/rate apart), or when it is more than 5 % off (times that say something
    /// else happened).
    public static func measured(
        chunkStarts: [(index: Int, timeMs: Double)], nominalHz: Double, minimumSpanMs: Double = 5_000
    ) -> WaveformRate? {
        guard chunkStarts.count >= 3, nominalHz > 0, let first = chunkStarts.first, let last = chunkStarts.last,
            last.timeMs - first.timeMs >= minimumSpanMs
        else { return nil }
        let n = Double(chunkStarts.count)
        let mx = chunkStarts.reduce(0) { $0 + Double($1.index) } / n
        let mt = chunkStarts.reduce(0) { $0 + $1.timeMs } / n
        var sxt = 0.0
        var sxx = 0.0
        for c in chunkStarts {
            sxt += (Double(c.index) - mx) * (c.timeMs - mt)
            sxx += (Double(c.index) - mx) * (Double(c.index) - mx)
        }
        guard sxx > 0, sxt > 0 else { return nil }
        let slope = sxt / sxx  // ms per sample
        let residuals = chunkStarts.reduce(0.0) { sum, c in
            let r = c.timeMs - (mt + (Double(c.index) - mx) * slope)
            return sum + r * r
        }
        let standardError = (residuals / (n - 2) / sxx).squareRoot()
        let nominal = 1000 / nominalHz
        guard abs(slope - nominal) > max(3 * standardError, 20e-6 * nominal),
            abs(nominal / slope - 1) <= 0.05
        else { return nil }
        return WaveformRate(rateHz: 1000 / slope, startMs: mt - mx * slope)
    }
}
