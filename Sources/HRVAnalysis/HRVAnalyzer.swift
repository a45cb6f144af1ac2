/// How RR artefacts (missed, extra, ectopic beats) are handled before the metrics are computed.
public enum ArtifactCorrection: String, Sendable, CaseIterable {
    /// Analyse the series as recorded.
    case none
    /// Lipponen & Tarvainen (2019) automatic detection and correction, as in Kubios and neurokit2.
    case kubios
    /// hr-gateway's local-median detector with timing-preserving repair (`ArtifactCorrector`).
    case median
}

/// Settings for one analysis.
public struct HRVOptions: Sendable, Equatable {
    public var correction: ArtifactCorrection
    /// Frequency band searched for the respiratory peak, in Hz (0.15-0.5 Hz; down to 0.05 Hz for paced breathing).
    public var respirationBandHz: ClosedRange<Double>

    /// Spectrum estimate for the frequency-domain metrics.
    public var spectrumMethod: SpectrumMethod
    /// Compute frequency-domain and nonlinear metrics (off: time domain and respiration only).
    public var extendedMetrics: Bool

    public init(
        correction: ArtifactCorrection = .kubios,
        respirationBandHz: ClosedRange<Double> = 0.15...0.5,
        spectrumMethod: SpectrumMethod = .welch,
        extendedMetrics: Bool = true
    ) {
        self.correction = correction
        self.respirationBandHz = respirationBandHz
        self.spectrumMethod = spectrumMethod
        self.extendedMetrics = extendedMetrics
    }

    /// The band used in breathing (paced) mode.
    public static let pacedBreathingBandHz: ClosedRange<Double> = 0.05...0.5
}

/// Time-domain HRV and RR-derived respiration for one stretch of beats. `nil` where the data cannot support a value.
public struct HRVResult: Sendable, Equatable {
    /// RR intervals analysed (after correction).
    public var rrCount: Int
    /// Beats the correction moved, inserted or removed, plus input values dropped as invalid (not finite, not
    /// positive, or over a minute).
    public var artifactCount: Int
    public var meanRRMs: Double?
    /// 60000 / mean RR (the rate of the average interval, not the mean of instantaneous rates).
    public var hrFromRRBpm: Double?
    /// Standard deviation of RR, N-1 denominator.
    public var sdnnMs: Double?
    /// Root mean square of successive differences (within segments only; after the median correction, only those
    /// between two measured intervals: see `successiveDifferences`).
    public var rmssdMs: Double?
    /// Percentage of successive differences strictly greater than 50 ms, over the number of differences.
    public var pnn50: Double?
    public var nn50: Int?
    /// Successive differences RMSSD, NN50 and pNN50 were computed from. Without correction and with the Kubios one,
    /// every difference within a segment (N − 1 for one segment); with the median correction, a difference is left
    /// out when either of its two intervals is an estimate of the corrector (`ArtifactCorrectionResult.estimated`).
    public var successiveDifferences: Int?
    /// Breathing rate from respiratory sinus arrhythmia, in breaths per minute.
    public var respirationRateBpm: Double?
    /// 0...1: how clearly the respiratory peak stands out.
    public var respirationConfidence: Double?
    /// Why there is no breathing rate, when there are intervals but no breathing rate (`analyze` sets it).
    public var respirationRejection: RespirationEstimator.Rejection?

    /// Frequency-domain metrics of the longest uninterrupted segment (nil under `FrequencyDomain.minimumSecondsLF`).
    public var frequency: FrequencyDomainResult?
    /// Poincaré SD1 and SD2 (ms) of the longest segment.
    public var sd1Ms: Double?
    public var sd2Ms: Double?
    /// DFA alpha1 (4-16 beats) and alpha2 (16-64 beats) of the longest segment.
    public var dfaAlpha1: Double?
    public var dfaAlpha2: Double?
    /// Sample entropy (m = 2, r = 0.2 SD) of the longest segment.
    public var sampleEntropy: Double?
    /// Baevsky's stress index of the longest segment.
    public var stressIndex: Double?
    /// The series the frequency-domain and nonlinear metrics come from, when they were computed.
    public var extendedSource: ExtendedSource?

    /// The longest uninterrupted run of a series with breaks: what its frequency-domain and nonlinear metrics see.
    public struct ExtendedSource: Sendable, Equatable {
        public var intervals: Int
        public var seconds: Double
        /// The runs of the whole series (1: no break).
        public var runs: Int
        /// The run holds an interval under 1 ms or over a minute (kept by `.none`): no metric was computed from it.
        public var unusable = false
    }

    /// SD1 / SD2.
    public var sd1sd2: Double? {
        guard let sd1Ms, let sd2Ms, sd2Ms > 0 else { return nil }
        return sd1Ms / sd2Ms
    }

    public init(
        rrCount: Int = 0,
        artifactCount: Int = 0,
        meanRRMs: Double? = nil,
        hrFromRRBpm: Double? = nil,
        sdnnMs: Double? = nil,
        rmssdMs: Double? = nil,
        pnn50: Double? = nil,
        nn50: Int? = nil,
        respirationRateBpm: Double? = nil,
        respirationConfidence: Double? = nil
    ) {
        self.rrCount = rrCount
        self.artifactCount = artifactCount
        self.meanRRMs = meanRRMs
        self.hrFromRRBpm = hrFromRRBpm
        self.sdnnMs = sdnnMs
        self.rmssdMs = rmssdMs
        self.pnn50 = pnn50
        self.nn50 = nn50
        self.respirationRateBpm = respirationRateBpm
        self.respirationConfidence = respirationConfidence
    }
}

/// Entry point for HRV analysis of RR intervals in milliseconds.
///
/// Definitions (N = intervals after correction, differences only between neighbours in the same segment):
/// mean RR; HR = 60000 / mean RR; SDNN = sample standard deviation (N − 1); RMSSD = √(mean of squared successive
/// differences); NN50 = count of |difference| > 50 ms (strict); pNN50 = 100 × NN50 / number of differences. With
/// the median correction the differences are those between two measured intervals (not the corrector's estimates);
/// `HRVResult.successiveDifferences` says how many.
public enum HRVAnalyzer {
    /// Intervals that a correction does not repair but leaves out, breaking the series there as a lost beat does:
    /// shorter than a QRS complex lasts (no heart and no R-peak detector gives one: a value in seconds among
    /// milliseconds, a typo), or a pause of more than 3 s (a signal lost for several beats; 20 bpm). Left to the
    /// correction, they were analysed as beats: 14 values in seconds among 337 intervals took the Kubios-corrected
    /// RMSSD from 98 to 123 ms, 9 values five times too long to 437. Between 100 and 250 ms an interval can be an
    /// extra detection, which the correction merges with its neighbour (breaking there made it worse: 103 instead
    /// of 98 ms).
    public static let beatRangeMs = 100.0...3000.0

    /// Analyses contiguous runs of RR intervals. Successive differences and beat times are never taken across
    /// the boundary between two segments (a link loss or a gap in the recording). Values that are not finite, not
    /// positive or longer than `RRFile.maximumMs` (a minute: a pause, not a beat; and far larger values would
    /// overflow the sums of squares) are dropped and end the segment they are in; so are those outside
    /// `beatRangeMs` under a correction (`.none` analyses them as they are). Each counts as an artefact.
    public static func analyze(segments: [[Double]], options: HRVOptions = HRVOptions()) -> HRVResult {
        var invalid = 0
        var runs: [[Double]] = []
        let kept = options.correction == .none ? Double.leastNonzeroMagnitude...RRFile.maximumMs : beatRangeMs
        for segment in segments {
            var current: [Double] = []
            for v in segment {
                if v.isFinite && kept.contains(v) {
                    current.append(v)
                } else {
                    invalid += 1
                    if !current.isEmpty { runs.append(current) }
                    current = []
                }
            }
            if !current.isEmpty { runs.append(current) }
        }

        var corrected = 0
        // Per run, which intervals are the median corrector's estimates (nil: every interval is measured or the
        // correction does not say).
        var estimated: [[Bool]]?
        var estimateGroups: [[Int]]?
        switch options.correction {
        case .none:
            break
        case .kubios:
            runs = runs.map { run in
                let r = KubiosCorrection.correct(run)
                corrected += r.correctedBeats
                return r.rrMs
            }
        case .median:
            let results = runs.map(ArtifactCorrector.correct)
            corrected = results.reduce(0) { $0 + $1.correctedIntervals }
            runs = results.map(\.rrMs)
            estimated = results.map(\.estimated)
            estimateGroups = results.map(\.estimateGroups)
        }

        var result = timeDomain(segments: runs, estimated: estimated)
        result.artifactCount = invalid + corrected
        switch RespirationEstimator.evaluate(segments: runs, bandHz: options.respirationBandHz) {
        case .estimate(let r):
            result.respirationRateBpm = r.rateBpm
            result.respirationConfidence = r.confidence
        case .rejected(let why):
            if result.rrCount > 0 { result.respirationRejection = why }
        }
        if options.extendedMetrics, let longest = runs.indices.max(by: { runs[$0].count < runs[$1].count }) {
            result.addExtendedMetrics(
                of: runs[longest], method: options.spectrumMethod, estimateGroups: estimateGroups?[longest])
            result.extendedSource?.runs = runs.count
        }
        return result
    }

    /// A single uninterrupted series.
    public static func analyze(_ rr: [Double], options: HRVOptions = HRVOptions()) -> HRVResult {
        analyze(segments: [rr], options: options)
    }

    /// Time-domain metrics of the segments as given (no validation, no correction, no respiration).
    ///
    /// `estimated`, when given, has one flag per interval of `segments`: a successive difference with a flagged
    /// interval on either side is an estimate, not a measurement, and is left out of RMSSD, NN50 and pNN50 (mean RR
    /// and SDNN still use every interval).
    public static func timeDomain(segments: [[Double]], estimated: [[Bool]]? = nil) -> HRVResult {
        var count = 0
        var sum = 0.0
        for s in segments {
            count += s.count
            sum += s.reduce(0, +)
        }
        guard count > 0 else { return HRVResult() }
        var result = HRVResult(rrCount: count)
        let mean = sum / Double(count)
        result.meanRRMs = mean
        result.hrFromRRBpm = 60000 / mean
        if count > 1 {
            var ss = 0.0
            for s in segments {
                for v in s { ss += (v - mean) * (v - mean) }
            }
            result.sdnnMs = (ss / Double(count - 1)).squareRoot()
        }
        var differences = 0
        var sumSquares = 0.0
        var nn50 = 0
        for (k, s) in segments.enumerated() where s.count > 1 {
            let flags = estimated.flatMap { k < $0.count && $0[k].count == s.count ? $0[k] : nil }
            for i in 1..<s.count {
                if let flags, flags[i] || flags[i - 1] { continue }
                let d = s[i] - s[i - 1]
                differences += 1
                sumSquares += d * d
                if abs(d) > 50 { nn50 += 1 }
            }
        }
        result.successiveDifferences = differences
        if differences > 0 {
            result.rmssdMs = (sumSquares / Double(differences)).squareRoot()
            result.nn50 = nn50
            result.pnn50 = 100 * Double(nn50) / Double(differences)
        }
        return result
    }
}

extension HRVResult {
    /// Fills the frequency-domain and nonlinear metrics from one uninterrupted series; each stays nil when the
    /// series is too short for it. A series with an interval outside 1 ms ... 60 s (not a heartbeat) gets none.
    /// `estimateGroups` (the median corrector's, one per interval) makes DFA alpha1 and alpha2 take off the effect of
    /// its repairs (`NonlinearHRV.dfa(_:scales:estimateGroups:)`); the other metrics use the series as it is.
    public mutating func addExtendedMetrics(of rr: [Double], method: SpectrumMethod = .welch, estimateGroups: [Int]? = nil) {
        extendedSource = ExtendedSource(intervals: rr.count, seconds: rr.reduce(0, +) / 1000, runs: 1)
        guard rr.allSatisfy({ $0 >= 1 && $0 <= RRFile.maximumMs }) else {
            extendedSource?.unusable = true
            return
        }
        frequency = FrequencyDomain.analyze(rr, method: method)
        if let p = NonlinearHRV.poincare(rr) {
            sd1Ms = p.sd1
            sd2Ms = p.sd2
        }
        dfaAlpha1 = NonlinearHRV.alpha1(rr, estimateGroups: estimateGroups)
        dfaAlpha2 = NonlinearHRV.alpha2(rr, estimateGroups: estimateGroups)
        sampleEntropy = NonlinearHRV.sampleEntropy(rr)
        stressIndex = NonlinearHRV.stressIndex(rr)
    }

    /// The extended metrics under their wire names (`vlf_ms2` ... `stress_index`), absent ones left out.
    public var extendedMetricValues: [(key: String, value: Double)] {
        var out: [(String, Double)] = []
        func put(_ key: String, _ v: Double?) { if let v, v.isFinite { out.append((key, v)) } }
        put("vlf_ms2", frequency?.vlfMs2)
        put("lf_ms2", frequency?.lfMs2)
        put("hf_ms2", frequency?.hfMs2)
        put("total_power_ms2", frequency?.totalPowerMs2)
        put("lf_hf", frequency?.lfHf)
        put("lf_nu", frequency?.lfNu)
        put("hf_nu", frequency?.hfNu)
        put("lf_peak_hz", frequency?.lfPeakHz)
        put("hf_peak_hz", frequency?.hfPeakHz)
        put("sd1_ms", sd1Ms)
        put("sd2_ms", sd2Ms)
        put("sd1_sd2", sd1sd2)
        put("dfa_alpha1", dfaAlpha1)
        put("dfa_alpha2", dfaAlpha2)
        put("sampen", sampleEntropy)
        put("stress_index", stressIndex)
        return out
    }
}
