/// The resonance frequency assessment (Lehrer, Vaschillo & Vaschillo 2000; docs/hrv.md §13): the user breathes at a
/// series of paced rates for a couple of minutes each, and the rate at which the heart answers most (the largest
/// low-frequency peak and the largest RSA) is their resonance rate.
public enum ResonanceAssessment {
    /// One paced step: its rate, when its first breath starts and how long one breath lasts (ms, the beats' clock),
    /// and how many breaths it paces.
    public struct Step: Sendable, Equatable {
        public var rateBpm: Double
        public var originMs: Double
        public var cycleMs: Double
        public var breaths: Int
        public init(rateBpm: Double, originMs: Double, cycleMs: Double, breaths: Int) {
            self.rateBpm = rateBpm
            self.originMs = originMs
            self.cycleMs = cycleMs
            self.breaths = breaths
        }
        public var endMs: Double { originMs + cycleMs * Double(breaths) }
    }

    /// What one step measured. `lfPeakPowerMs2` and `rsaAmplitudeBpm` are nil when the step had too few beats.
    public struct StepResult: Sendable, Equatable {
        public var rateBpm: Double
        /// Beats that ended in the analysed part of the step (after its first breath).
        public var beats: Int
        /// Share of the analysed time covered by RR intervals (1 without a lost beat).
        public var coverage: Double
        /// Power within ±0.015 Hz of the highest peak in 0.04–0.15 Hz, or up to the paced frequency + 0.015 Hz for a
        /// faster rate (ms²), and where that peak is (Hz).
        public var lfPeakPowerMs2: Double?
        public var lfPeakHz: Double?
        /// Mean over the analysed breaths of max − min instantaneous heart rate (bpm), and how many breaths.
        public var rsaAmplitudeBpm: Double?
        public var rsaBreaths: Int
        /// 0…1: the mean of the step's LF peak power and RSA amplitude, each over its largest value among the
        /// steps (the two maxima may be different steps'). Nil when a measure is missing.
        public var score: Double?
    }

    public struct Result: Sendable, Equatable {
        public var steps: [StepResult]
        /// The rate of the step with the highest score, when every step was scored; nil otherwise (a stopped
        /// assessment, a step with lost beats): a rate not measured may be the resonance one.
        public var resonanceRateBpm: Double?
        /// The rate of the step with the highest score among those scored; nil when none was.
        public var bestScoredRateBpm: Double?
        public var scoredSteps: Int { steps.filter { $0.score != nil }.count }
        public var isComplete: Bool { !steps.isEmpty && scoredSteps == steps.count }
    }

    /// A step is scored only if RR intervals cover this share of its analysed time (a strap that lost contact for a
    /// while would otherwise look like a weak answer).
    public static let minimumCoverage = 0.8
    /// Steps are judged without their first breath, while the user settles on the new pace.
    public static let settlingBreaths = 1
    public static let peakHalfWidthHz = PacedBreathing.coherencePeakHalfWidthHz

    /// Measures each step from `beats` (sorted by end time) and picks the resonance rate.
    public static func assess(steps: [Step], beats: [PacedBreathing.Beat]) -> Result {
        var results = steps.map { measure($0, beats: beats) }
        let maxLF = results.compactMap(\.lfPeakPowerMs2).max() ?? 0
        let maxRSA = results.compactMap(\.rsaAmplitudeBpm).max() ?? 0
        for i in results.indices {
            guard let lf = results[i].lfPeakPowerMs2, let rsa = results[i].rsaAmplitudeBpm, maxLF > 0, maxRSA > 0
            else { continue }
            results[i].score = 0.5 * lf / maxLF + 0.5 * rsa / maxRSA
        }
        // Ties (equal scores) go to the larger LF peak, then to the slower rate, as in Lehrer's protocol.
        let best = results.filter { $0.score != nil }.max { a, b in
            if a.score! != b.score! { return a.score! < b.score! }
            if a.lfPeakPowerMs2! != b.lfPeakPowerMs2! { return a.lfPeakPowerMs2! < b.lfPeakPowerMs2! }
            return a.rateBpm > b.rateBpm
        }
        var result = Result(steps: results, resonanceRateBpm: nil, bestScoredRateBpm: best?.rateBpm)
        if result.isComplete { result.resonanceRateBpm = best?.rateBpm }
        return result
    }

    public static func measure(_ step: Step, beats: [PacedBreathing.Beat]) -> StepResult {
        let settling = min(settlingBreaths, max(0, step.breaths - 1))
        let start = step.originMs + step.cycleMs * Double(settling)
        let end = step.endMs
        let inStep = beats.filter { $0.endMs > start && $0.endMs <= end }
        let rr = inStep.map(\.rrMs)
        let covered = rr.reduce(0, +)
        let coverage = end > start ? min(1, covered / (end - start)) : 0
        var result = StepResult(
            rateBpm: step.rateBpm, beats: inStep.count, coverage: (coverage * 1000).rounded() / 1000,
            lfPeakPowerMs2: nil, lfPeakHz: nil, rsaAmplitudeBpm: nil, rsaBreaths: 0, score: nil)
        guard coverage >= minimumCoverage, rr.count >= 16 else { return result }
        if let peak = lfPeak(rr, pacedHz: step.rateBpm / 60) {
            result.lfPeakPowerMs2 = (peak.powerMs2 * 10).rounded() / 10
            result.lfPeakHz = (peak.hz * 10000).rounded() / 10000
        }
        if let rsa = PacedBreathing.rsaAmplitude(
            beats: inStep, originMs: step.originMs, cycleMs: step.cycleMs, breaths: settling..<step.breaths)
        {
            result.rsaAmplitudeBpm = (rsa.meanBpm * 10).rounded() / 10
            result.rsaBreaths = rsa.breaths
        }
        return result
    }

    /// The highest peak of the Welch PSD in the LF band and the power within ±0.015 Hz of it (ms²). The band
    /// reaches up to the paced frequency and the peak's half width past it, so that a fast step (9 and 10 /min are
    /// 0.15 and 0.167 Hz, past the LF band's 0.15 Hz) is judged on its own peak, not the band's edge.
    static func lfPeak(_ rr: [Double], pacedHz: Double = 0) -> (hz: Double, powerMs2: Double)? {
        let psd = FrequencyDomain.welch(rr)
        guard psd.f.count > 2 else { return nil }
        let band = FrequencyDomain.lfBand.lowerBound...max(FrequencyDomain.lfBand.upperBound, pacedHz + peakHalfWidthHz)
        var peak: Int?
        for i in psd.f.indices where band.contains(psd.f[i]) {
            if peak == nil || psd.p[i] > psd.p[peak!] { peak = i }
        }
        guard let p = peak else { return nil }
        let bin = psd.f[1] - psd.f[0]
        let half = max(peakHalfWidthHz, bin)
        // A millionth of a bin to spare: a neighbour exactly one bin away fell out for some lengths (as in
        // `PacedBreathing.coherence`).
        let slack = bin * 1e-6
        var total = 0.0
        for i in 1..<psd.f.count where psd.f[i - 1] >= psd.f[p] - half - slack && psd.f[i] <= psd.f[p] + half + slack {
            total += 0.5 * (psd.p[i - 1] + psd.p[i]) * (psd.f[i] - psd.f[i - 1])
        }
        return (psd.f[p], total)
    }
}
