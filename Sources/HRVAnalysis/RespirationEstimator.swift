/// A breathing rate read from respiratory sinus arrhythmia in RR intervals.
public struct RespirationEstimate: Sendable, Equatable {
    /// Frequency of the respiratory peak, Hz.
    public var frequencyHz: Double
    /// Breaths per minute (60 × `frequencyHz`).
    public var rateBpm: Double { frequencyHz * 60 }
    /// 0...1: share of the in-band power near the peak, rescaled so that 0 is what a flat spectrum gives and 1 is
    /// all power at the peak.
    public var confidence: Double

    public init(frequencyHz: Double, confidence: Double) {
        self.frequencyHz = frequencyHz
        self.confidence = confidence
    }
}

/// Respiration rate from RR intervals (RSA), by the spectral peak of the resampled tachogram.
///
/// Method, per uninterrupted segment of `minimumSegmentSeconds` to `maximumSegmentSeconds`:
/// 1. beat times are the running sum of the intervals; the tachogram (each RR at the time of the beat ending it)
///    is resampled at 4 Hz with a natural cubic spline;
/// 2. a least-squares line is removed, a Hann window applied, and the power spectrum taken with zero padding to a
///    common FFT size (at least 2048 points, 0.002 Hz bins);
/// 3. segment spectra are averaged, weighted by their length.
///
/// The peak is the largest bin inside the band (upper edge lowered to 0.45 × the mean beat rate, the Nyquist
/// limit of beat-to-beat sampling). It is refined by parabolic interpolation of the magnitude. No estimate is
/// returned when: the segments used cover less than `minimumSeconds`; the maximum sits on a band edge (leakage
/// from a stronger peak outside the band, typically the ~0.1 Hz Mayer wave in the 0.15-0.5 Hz band); the longest
/// segment holds fewer than two cycles of the peak frequency; or the confidence is below `detectionThreshold`.
///
/// Confidence: c = power within ±h of the peak / power in the band, where h = max(0.015 Hz, 2 / T) (T = longest
/// segment, 2/T = half-width of the Hann main lobe); with p0 = the share of band bins within ±h (what a flat
/// spectrum gives), confidence = (c − p0) / (1 − p0), clamped to 0...1.
public enum RespirationEstimator {
    /// Below the band, where a stronger rhythm whose harmonic the band's peak is may lie (Hz).
    public static let harmonicSearchLowHz = 0.03
    /// How much stronger (peak bin power) that rhythm must be for the band's peak to count as its harmonic: above what
    /// Mayer waves at 0.1 Hz give next to breathing at 12 /min at rest, below what slow breathing's own harmonic
    /// leaves (RSA with a 20 % second harmonic in heart rate, and 60000/bpm's own curvature: about 18).
    public static let harmonicPowerRatio = 10.0
    public static let resampleRateHz = 4.0
    public static let minimumSeconds = 30.0
    public static let minimumSegmentSeconds = 15.0
    /// Longer segments are not used (a single rate over hours means little, and it bounds the FFT size).
    public static let maximumSegmentSeconds = 6 * 3600.0

    /// The confidence a peak needs to be reported: 2.5 / √K clamped to 0.35...0.8, with K = band width × T the
    /// number of independent frequency bins. White RR noise gives a confidence above this in about 2 % of windows
    /// or fewer (measured on synthetic series of 40 to 300 s; chance concentration grows as K shrinks).
    public static func detectionThreshold(bandwidthHz: Double, seconds: Double) -> Double {
        let k = max(1, bandwidthHz * seconds)
        return min(0.8, max(0.35, 2.5 / k.squareRoot()))
    }

    static let minimumFFTSize = 2048

    /// Estimates the breathing rate from segments of RR intervals (milliseconds), searching `bandHz`.
    /// `minimumConfidence` replaces `detectionThreshold` when given. Invalid values (not finite, not positive) are
    /// skipped; callers should split segments at them, as `HRVAnalyzer.analyze` does.
    public static func estimate(
        segments: [[Double]],
        bandHz: ClosedRange<Double>,
        minimumConfidence: Double? = nil
    ) -> RespirationEstimate? {
        if case .estimate(let e) = evaluate(segments: segments, bandHz: bandHz, minimumConfidence: minimumConfidence) {
            return e
        }
        return nil
    }

    /// Why no breathing rate was given.
    public enum Rejection: Sendable, Equatable, CustomStringConvertible {
        /// The uninterrupted stretches of at least `minimumSegmentSeconds` add up to less than `minimumSeconds`.
        case tooShort(usableSeconds: Double)
        /// The heart beats too slowly to sample breathing in the band (its upper edge is lowered to 0.45 × the
        /// beat rate).
        case beatRateTooLow(beatRateHz: Double)
        /// The strongest frequency sits on an edge of the band: leakage from a stronger rhythm outside it.
        case peakAtBandEdge(frequencyHz: Double)
        /// The longest stretch holds fewer than two cycles of the peak frequency.
        case tooFewCycles(frequencyHz: Double, longestSeconds: Double)
        /// The band searched is barely wider than a peak at this resolution (short stretches, a low beat rate).
        case bandTooNarrow
        /// A peak, but not clear enough above the rest of the band.
        case weakPeak(frequencyHz: Double, confidence: Double, threshold: Double)
        /// The band's peak is a harmonic (twice or three times the frequency) of a far stronger rhythm below the
        /// band: slow or paced breathing, whose own rate the band leaves out.
        case harmonic(frequencyHz: Double, fundamentalHz: Double)

        public var description: String {
            func f(_ v: Double, _ digits: Int) -> String {
                let scale = Double([1, 10, 100, 1000][min(3, digits)])
                let r = (v * scale).rounded() / scale
                var s = "\(r)"
                if digits == 0, s.hasSuffix(".0") { s.removeLast(2) }
                return s
            }
            switch self {
            case .tooShort(let seconds):
                return "under \(f(RespirationEstimator.minimumSeconds, 0)) s of uninterrupted data (\(f(seconds, 1)) s usable; stretches "
                    + "shorter than \(f(RespirationEstimator.minimumSegmentSeconds, 0)) s between gaps do not count)"
            case .beatRateTooLow(let rate):
                return "the heart rate (\(f(rate * 60, 0)) bpm) is too low to sample breathing in the band"
            case .peakAtBandEdge(let hz):
                return "no clear peak: the strongest rhythm is at the band's edge (\(f(hz, 2)) Hz, "
                    + "\(f(hz * 60, 1)) /min), leakage from a rhythm outside the band"
            case let .tooFewCycles(hz, seconds):
                return "no clear peak: \(f(hz * 60, 1)) /min needs two cycles in one stretch, the longest is "
                    + "\(f(seconds, 0)) s"
            case .bandTooNarrow:
                return "no clear peak: the band searched is too narrow for stretches this short"
            case let .weakPeak(hz, confidence, threshold):
                return "no clear peak: the strongest, \(f(hz * 60, 1)) /min, has confidence \(f(confidence, 2)), "
                    + "under the \(f(threshold, 2)) needed"
            case let .harmonic(hz, fundamental):
                return "the band's peak, \(f(hz * 60, 1)) /min, is a harmonic of a far stronger rhythm at "
                    + "\(f(fundamental * 60, 1)) /min below the band (slow or paced breathing)"
            }
        }
    }

    /// The outcome of `estimate`: the breathing rate, or why there is none.
    public enum Outcome: Sendable, Equatable {
        case estimate(RespirationEstimate)
        case rejected(Rejection)
    }

    /// `estimate`, saying why when there is no estimate.
    public static func evaluate(
        segments: [[Double]],
        bandHz: ClosedRange<Double>,
        minimumConfidence: Double? = nil
    ) -> Outcome {
        let fs = resampleRateHz
        var series: [[Double]] = []
        var longest = 0.0
        var totalSeconds = 0.0
        var beats = 0
        var beatSeconds = 0.0
        for segment in segments {
            let rr = segment.filter { $0.isFinite && $0 > 0 }
            guard rr.count >= 8 else { continue }
            var times: [Double] = []
            times.reserveCapacity(rr.count)
            var t = 0.0
            for v in rr {
                t += v / 1000
                times.append(t)
            }
            let duration = times[times.count - 1] - times[0]
            guard duration >= minimumSegmentSeconds, duration <= maximumSegmentSeconds else { continue }
            var samples = Spectrum.resampleCubic(x: times, y: rr, rate: fs)
            Spectrum.detrend(&samples)
            series.append(samples)
            longest = max(longest, duration)
            totalSeconds += duration
            beats += rr.count
            beatSeconds += t
        }
        guard !series.isEmpty, totalSeconds >= minimumSeconds else { return .rejected(.tooShort(usableSeconds: totalSeconds)) }

        let size = Spectrum.nextPowerOfTwo(max(minimumFFTSize, series.map(\.count).max() ?? 0))
        var power = [Double](repeating: 0, count: size / 2 + 1)
        var weightSum = 0.0
        for samples in series {
            let window = Spectrum.hann(samples.count)
            let windowed = zip(samples, window).map { $0 * $1 }
            let norm = window.reduce(0) { $0 + $1 * $1 }
            let p = Spectrum.powerSpectrum(windowed, size: size)
            let weight = Double(samples.count)
            for k in power.indices { power[k] += weight * p[k] / norm }
            weightSum += weight
        }
        for k in power.indices { power[k] /= weightSum }
        let binHz = fs / Double(size)

        let beatRateHz = Double(beats) / beatSeconds
        let upper = min(bandHz.upperBound, 0.45 * beatRateHz)
        let lowBin = Int((bandHz.lowerBound / binHz).rounded(.up))
        let highBin = min(Int((upper / binHz).rounded(.down)), power.count - 2)
        guard lowBin >= 1, highBin - lowBin >= 2 else { return .rejected(.beatRateTooLow(beatRateHz: beatRateHz)) }

        var peak = lowBin
        for k in lowBin...highBin where power[k] > power[peak] { peak = k }
        guard peak > lowBin, peak < highBin, power[peak] > 0 else {
            return .rejected(.peakAtBandEdge(frequencyHz: Double(peak) * binHz))
        }

        // The strongest rhythm below the band (down to 0.03 Hz): when the band's peak sits on its second or third
        // harmonic and is far weaker, the breathing is that slower rhythm (a 6 /min pacer read as 12 /min).
        let slowLow = max(1, Int((harmonicSearchLowHz / binHz).rounded(.up)))
        if slowLow < lowBin - 1 {
            var slow = slowLow
            for k in slowLow..<lowBin where power[k] > power[slow] { slow = k }
            let ratio = power[slow] / power[peak]
            if slow > slowLow, ratio >= harmonicPowerRatio,
                [2, 3].contains(where: { abs(Double(peak) - Double($0 * slow)) <= Double($0) })
            {
                return .rejected(.harmonic(frequencyHz: Double(peak) * binHz, fundamentalHz: Double(slow) * binHz))
            }
        }

        let a = power[peak - 1].squareRoot()
        let b = power[peak].squareRoot()
        let c = power[peak + 1].squareRoot()
        let curvature = a - 2 * b + c
        let delta = curvature < 0 ? max(-0.5, min(0.5, 0.5 * (a - c) / curvature)) : 0
        let frequency = (Double(peak) + delta) * binHz
        guard frequency * longest >= 2 else {
            return .rejected(.tooFewCycles(frequencyHz: frequency, longestSeconds: longest))
        }

        let halfWidth = max(0.015, 2 / longest)
        var near = 0.0
        var total = 0.0
        var nearBins = 0
        for k in lowBin...highBin {
            total += power[k]
            if abs(Double(k) * binHz - frequency) <= halfWidth {
                near += power[k]
                nearBins += 1
            }
        }
        let p0 = Double(nearBins) / Double(highBin - lowBin + 1)
        guard total > 0, p0 < 0.8 else { return .rejected(.bandTooNarrow) }
        let confidence = min(1, max(0, (near / total - p0) / (1 - p0)))
        let threshold = minimumConfidence
            ?? detectionThreshold(bandwidthHz: Double(highBin - lowBin) * binHz, seconds: longest)
        guard confidence >= threshold else {
            return .rejected(.weakPeak(frequencyHz: frequency, confidence: confidence, threshold: threshold))
        }
        return .estimate(RespirationEstimate(frequencyHz: frequency, confidence: confidence))
    }
}
