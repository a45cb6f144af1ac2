/// How RR artefacts (missed, extra, ectopic beats) are handled before the metrics are computed.
public enum ArtifactCorrection: String, Sendable, CaseIterable {
    /// Analyse the series as recorded.
    case none
    /// Lipponen & Tarvainen (2019) automatic detection and correction, as in Kubios and neurokit2.
    case kubios
}

/// Settings for one analysis.
public struct HRVOptions: Sendable, Equatable {
    public var correction: ArtifactCorrection
    /// Frequency band searched for the respiratory peak, in Hz (0.15-0.5 Hz; down to 0.05 Hz for paced breathing).
    public var respirationBandHz: ClosedRange<Double>

    public init(correction: ArtifactCorrection = .kubios, respirationBandHz: ClosedRange<Double> = 0.15...0.5) {
        self.correction = correction
        self.respirationBandHz = respirationBandHz
    }

    /// The band used in breathing (paced) mode.
    public static let pacedBreathingBandHz: ClosedRange<Double> = 0.05...0.5
}

/// Time-domain HRV and RR-derived respiration for one stretch of beats. `nil` where the data cannot support a value.
public struct HRVResult: Sendable, Equatable {
    /// RR intervals analysed (after correction).
    public var rrCount: Int
    /// Intervals the correction changed, inserted or removed.
    public var artifactCount: Int
    public var meanRRMs: Double?
    /// 60000 / mean RR.
    public var hrFromRRBpm: Double?
    /// Standard deviation of RR, N-1 denominator.
    public var sdnnMs: Double?
    /// Root mean square of successive differences (within segments only).
    public var rmssdMs: Double?
    /// Percentage of successive differences strictly greater than 50 ms, over the number of differences.
    public var pnn50: Double?
    public var nn50: Int?
    /// Breathing rate from respiratory sinus arrhythmia, in breaths per minute.
    public var respirationRateBpm: Double?
    /// 0...1: how clearly the respiratory peak stands out.
    public var respirationConfidence: Double?

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
public enum HRVAnalyzer {
    /// Analyses contiguous runs of RR intervals. Successive differences and beat times are never taken across
    /// the boundary between two segments (a link loss or a gap in the recording).
    public static func analyze(segments: [[Double]], options: HRVOptions = HRVOptions()) -> HRVResult {
        let cleaned = segments.map { $0.filter { $0.isFinite && $0 > 0 } }.filter { !$0.isEmpty }
        let all = cleaned.flatMap { $0 }
        guard !all.isEmpty else { return HRVResult() }
        var result = HRVResult(rrCount: all.count)
        let mean = all.reduce(0, +) / Double(all.count)
        result.meanRRMs = mean
        result.hrFromRRBpm = 60000 / mean
        if all.count > 1 {
            let ss = all.reduce(0) { $0 + ($1 - mean) * ($1 - mean) }
            result.sdnnMs = (ss / Double(all.count - 1)).squareRoot()
        }
        var diffs: [Double] = []
        for segment in cleaned where segment.count > 1 {
            for i in 1..<segment.count { diffs.append(segment[i] - segment[i - 1]) }
        }
        if !diffs.isEmpty {
            result.rmssdMs = (diffs.reduce(0) { $0 + $1 * $1 } / Double(diffs.count)).squareRoot()
            let nn50 = diffs.filter { abs($0) > 50 }.count
            result.nn50 = nn50
            result.pnn50 = 100 * Double(nn50) / Double(diffs.count)
        }
        return result
    }

    /// A single uninterrupted series.
    public static func analyze(_ rr: [Double], options: HRVOptions = HRVOptions()) -> HRVResult {
        analyze(segments: [rr], options: options)
    }
}
