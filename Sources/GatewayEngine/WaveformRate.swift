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
        var fit = Fit()
        for c in chunkStarts { fit.add(index: c.index, timeMs: c.timeMs) }
        return fit.measured(nominalHz: nominalHz, minimumSpanMs: minimumSpanMs)
    }

    /// `measured`, kept up to date chunk by chunk (a live stream's run: LSL's `RegularStamps`): constant work per
    /// chunk, sums updated in the numerically stable (Welford) way, so hours of chunks lose no precision.
    public struct Fit: Sendable {
        public private(set) var count = 0
        private var firstMs = 0.0
        private var lastMs = 0.0
        private var meanIndex = 0.0
        private var meanMs = 0.0
        private var sxx = 0.0
        private var sxt = 0.0
        private var stt = 0.0

        public init() {}

        /// From the first chunk's time to the last one's (ms).
        public var spanMs: Double { count == 0 ? 0 : lastMs - firstMs }

        public mutating func add(index: Int, timeMs: Double) {
            if count == 0 { firstMs = timeMs }
            lastMs = timeMs
            count += 1
            let x = Double(index)
            let dx = x - meanIndex
            let dt = timeMs - meanMs
            meanIndex += dx / Double(count)
            meanMs += dt / Double(count)
            sxx += dx * (x - meanIndex)
            sxt += dx * (timeMs - meanMs)
            stt += dt * (timeMs - meanMs)
        }

        /// The fitted line, on `measured`'s terms.
        public func measured(nominalHz: Double, minimumSpanMs: Double = 5_000) -> WaveformRate? {
            guard count >= 3, nominalHz > 0, lastMs - firstMs >= minimumSpanMs, sxx > 0, sxt > 0 else { return nil }
            let slope = sxt / sxx  // ms per sample
            let residuals = max(stt - sxt * slope, 0)
            let standardError = (residuals / Double(count - 2) / sxx).squareRoot()
            let nominal = 1000 / nominalHz
            guard abs(slope - nominal) > max(3 * standardError, 20e-6 * nominal),
                abs(nominal / slope - 1) <= 0.05
            else { return nil }
            return WaveformRate(rateHz: 1000 / slope, startMs: meanMs - meanIndex * slope)
        }
    }
}
