import HRVAnalysis

/// Live DFA alpha1 for a session (docs/hrv.md §10): keeps the RR-carrying samples of the last
/// `LiveDFA.windowS` seconds (its own buffer, independent of the profile's window length) and, when asked at least
/// `LiveDFA.stepS` after the previous estimate, computes a new one from the session's primary device (`PrimaryDevice`;
/// without one, the device with the most RR) and reports the 0.75 / 0.5 crossings since the last value published for
/// that device. A change of device is not a crossing: two people's alpha1 on either side of 0.75 are not a threshold.
struct LiveDFATracker: Sendable {
    private(set) var samples: [BiosignalSample] = []
    private(set) var latest: DFAEstimate?
    private var lastEstimateMs: Int64?
    private var firstSampleMs: Int64?
    private var lastPublished: Double?
    private var lastDevice: String?

    mutating func append(_ sample: BiosignalSample) {
        guard sample.source != SessionMetrics.cameraSource else { return }
        if firstSampleMs == nil, sample.rrIntervalsMs?.isEmpty == false { firstSampleMs = sample.timestampMs }
        // Gaps and contact changes matter for segmenting, so samples without RR are kept too.
        samples.append(sample)
        let cutoff = sample.timestampMs - Int64(LiveDFA.windowS * 1000)
        if let k = samples.firstIndex(where: { $0.timestampMs >= cutoff }), k > 0 { samples.removeFirst(k) }
    }

    /// A new estimate (and the crossings it makes) when one is due at `nowMs` (sample clock), else nil.
    mutating func update(nowMs: Int64, device: String? = nil) -> (estimate: DFAEstimate, crossings: [DFAThresholdCrossing])? {
        guard let first = firstSampleMs, nowMs - first >= Int64(LiveDFA.windowS * 1000) else { return nil }
        if let last = lastEstimateMs, nowMs - last < Int64(LiveDFA.stepS * 1000) { return nil }
        lastEstimateMs = nowMs
        let groups = SessionMetrics.groupByDevice(samples)
        let best = device.flatMap { d in groups.first { $0.id == d } }
            ?? groups.max(by: { SessionMetrics.rrTotal($0.samples) < SessionMetrics.rrTotal($1.samples) })
        if best?.id != lastDevice {
            lastPublished = nil
            lastDevice = best?.id
        }
        let segments = best.map { SessionMetrics.rrSegments($0.samples) } ?? []
        let estimate = LiveDFA.estimate(segments: segments, endS: Double(nowMs) / 1000)
        latest = estimate
        var crossings: [DFAThresholdCrossing] = []
        if let a = estimate.alpha1 {
            if let p = lastPublished { crossings = LiveDFA.crossings(from: p, to: a, at: estimate.endS) }
            lastPublished = a
        }
        return (estimate, crossings)
    }
}
