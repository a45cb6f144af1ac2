import HRVAnalysis

/// Live DFA alpha1 for a session (docs/hrv.md §10): keeps the RR-carrying samples of the last `LiveDFA.windowS`
/// seconds (its own buffer, independent of the profile's window length) and, when asked at least `LiveDFA.stepS` after
/// the previous estimate, computes a new one for every device with beats in it (a team's riders each have their own
/// alpha1) and reports each device's 0.75 / 0.5 crossings once its own next estimate confirms them
/// (`DFACrossingDetector`): a crossing is one heart's, never one person's alpha1 against another's. The top level's
/// estimate is the session's primary device's (`PrimaryDevice`; without one, the device with the most RR).
struct LiveDFATracker: Sendable {
    private(set) var samples: [BiosignalSample] = []
    /// The top level's estimate.
    private(set) var latest: DFAEstimate?
    /// Every device's latest estimate, by device id; a device whose beats left the buffer drops out.
    private(set) var latestByDevice: [String: DFAEstimate] = [:]
    private var lastEstimateMs: Int64?
    private var firstSampleMs: Int64?
    private var detectors: [String: DFACrossingDetector] = [:]

    mutating func append(_ sample: BiosignalSample) {
        guard sample.source != SessionMetrics.cameraSource else { return }
        if firstSampleMs == nil, sample.rrIntervalsMs?.isEmpty == false { firstSampleMs = sample.timestampMs }
        // Gaps and contact changes matter for segmenting, so samples without RR are kept too.
        samples.append(sample)
        let cutoff = sample.timestampMs - Int64(LiveDFA.windowS * 1000)
        if let k = samples.firstIndex(where: { $0.timestampMs >= cutoff }), k > 0 { samples.removeFirst(k) }
    }

    /// New estimates (the top level's, and the crossings of every device) when due at `nowMs` (sample clock), else
    /// nil. `device` is the session's primary device.
    mutating func update(nowMs: Int64, device: String? = nil) -> (estimate: DFAEstimate, crossings: [DFAThresholdCrossing])? {
        guard let first = firstSampleMs, nowMs - first >= Int64(LiveDFA.windowS * 1000) else { return nil }
        if let last = lastEstimateMs, nowMs - last < Int64(LiveDFA.stepS * 1000) { return nil }
        lastEstimateMs = nowMs
        let groups = SessionMetrics.groupByDevice(samples)
        let top = device.flatMap { d in groups.first { $0.id == d } }
            ?? groups.max(by: { SessionMetrics.rrTotal($0.samples) < SessionMetrics.rrTotal($1.samples) })
        var estimates: [String: DFAEstimate] = [:]
        var crossings: [DFAThresholdCrossing] = []
        for g in groups where g.id == top?.id || SessionMetrics.rrTotal(g.samples) > 0 {
            let estimate = LiveDFA.estimate(segments: SessionMetrics.rrSegments(g.samples), endS: Double(nowMs) / 1000)
            estimates[g.id] = estimate
            guard let a = estimate.alpha1 else { continue }
            var detector = detectors[g.id] ?? DFACrossingDetector()
            crossings += detector.feed(alpha1: a, atS: estimate.endS).map { c in
                var c = c
                c.deviceId = g.id
                return c
            }
            detectors[g.id] = detector
        }
        let estimate = top.flatMap { estimates[$0.id] }
            ?? LiveDFA.estimate(segments: [], endS: Double(nowMs) / 1000)
        latest = estimate
        latestByDevice = estimates
        return (estimate, crossings)
    }
}
