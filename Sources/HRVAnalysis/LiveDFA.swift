/// One live DFA alpha1 estimate: the last `LiveDFA.windowS` seconds of RR before `endS`, corrected with
/// `ArtifactCorrector`.
public struct DFAEstimate: Sendable, Equatable {
    /// End of the window, seconds on the recording (or session) clock.
    public var endS: Double
    /// nil when withheld; `withheldReason` then says why.
    public var alpha1: Double?
    /// Intervals the correction changed, as a percentage of the intervals in the window.
    public var artifactPercent: Double
    /// Intervals in the window before correction.
    public var rrCount: Int
    public var withheldReason: String?
}

/// A crossing of an alpha1 threshold between two published estimates.
public struct DFAThresholdCrossing: Sendable, Equatable {
    public enum Direction: String, Sendable { case down, up }
    public var threshold: Double
    public var direction: Direction
    /// Time of the estimate that crossed.
    public var atS: Double
    public var alpha1: Double
    public var previousAlpha1: Double
    /// The device whose beats crossed, when the caller tells them apart (the session engine: one live DFA per strap).
    public var deviceId: String?
}

/// DFA alpha1 for exercise, as FatMaxxer popularised it: every 20 s over the last 2 minutes of corrected RR.
///
/// Rogers et al. (2021, Front Physiol 11:596567) found alpha1 biased by 1-3 % missed beats and unusable past about
/// 5 %, so an estimate is withheld when more than `artifactLimitPercent` of the window's intervals had to be
/// corrected, when the window has fewer than `NonlinearHRV.minimumAlpha1` intervals, or when a gap cut it so its
/// longest uninterrupted run is under 90 % of the window. Alpha1 has the effect of the corrector's repairs taken off
/// (`NonlinearHRV.dfa(_:scales:estimateGroups:)`), as `HRVAnalyzer` does with the median correction; it is withheld
/// too when the repairs are too dense for that.
public enum LiveDFA {
    public static let windowS = 120.0
    public static let stepS = 20.0
    public static let artifactLimitPercent = 5.0
    /// Aerobic (0.75) and anaerobic (0.5) threshold markers (Rogers et al. 2021).
    public static let thresholds = [0.75, 0.5]

    /// Estimate from the segments of one window (uninterrupted runs, milliseconds).
    public static func estimate(segments: [[Double]], endS: Double) -> DFAEstimate {
        let total = segments.reduce(0) { $0 + $1.count }
        var corrected = 0
        var runs: [ArtifactCorrectionResult] = []
        for s in segments {
            let r = ArtifactCorrector.correct(s)
            corrected += r.correctedIntervals
            runs.append(r)
        }
        let percent = total > 0 ? 100 * Double(corrected) / Double(total) : 0
        var e = DFAEstimate(endS: endS, alpha1: nil, artifactPercent: percent, rrCount: total, withheldReason: nil)
        let longestRun = runs.max(by: { $0.rrMs.count < $1.rrMs.count })
        let longest = longestRun?.rrMs ?? []
        let longestS = longest.reduce(0, +) / 1000
        if total < NonlinearHRV.minimumAlpha1 || longest.count < NonlinearHRV.minimumAlpha1 {
            e.withheldReason = "too few beats (\(longest.count) uninterrupted, \(NonlinearHRV.minimumAlpha1) needed)"
        } else if longestS < 0.9 * windowS {
            e.withheldReason = "gap in the window (longest uninterrupted run \(Int(longestS)) s of \(Int(windowS)) s)"
        } else if percent > artifactLimitPercent {
            let shown = (percent * 10).rounded() / 10
            e.withheldReason = "artifact_percent \(shown) above the \(Int(artifactLimitPercent)) % limit"
        } else {
            e.alpha1 = NonlinearHRV.alpha1(longest, estimateGroups: longestRun?.estimateGroups)
            if e.alpha1 == nil {
                e.withheldReason = NonlinearHRV.alpha1(longest) == nil
                    ? "no fluctuation to analyse" : "repairs too dense to take their effect off the DFA"
            }
        }
        return e
    }

    /// Estimates every `stepS` seconds over a recording, the first when `windowS` seconds are available.
    public static func timeline(_ beats: [RRBeat], gapToleranceS: Double = 0.25) -> [DFAEstimate] {
        guard let first = beats.first, let last = beats.last else { return [] }
        let origin = first.startS
        let epsilon = 1e-9
        var out: [DFAEstimate] = []
        var lo = 0
        var hi = 0
        var end = origin + windowS
        while end <= last.endS + epsilon {
            let start = end - windowS
            while lo < beats.count && beats[lo].startS < start - epsilon { lo += 1 }
            if hi < lo { hi = lo }
            while hi < beats.count && beats[hi].endS <= end + epsilon { hi += 1 }
            let segs = HRVAnalyzer.segments(of: Array(beats[lo..<hi]), gapToleranceS: gapToleranceS)
            out.append(estimate(segments: segs, endS: end))
            end += stepS
        }
        return out
    }

    /// Threshold crossings between consecutive published (not withheld) estimates.
    public static func crossings(_ estimates: [DFAEstimate], thresholds: [Double] = thresholds) -> [DFAThresholdCrossing] {
        var out: [DFAThresholdCrossing] = []
        var previous: Double?
        for e in estimates {
            guard let a = e.alpha1 else { continue }
            if let p = previous { out += crossings(from: p, to: a, at: e.endS, thresholds: thresholds) }
            previous = a
        }
        return out
    }

    /// The thresholds crossed going from `p` to `a`; a value equal to a threshold counts as at or above it.
    public static func crossings(from p: Double, to a: Double, at t: Double, thresholds: [Double] = thresholds)
        -> [DFAThresholdCrossing]
    {
        var out: [DFAThresholdCrossing] = []
        for th in thresholds {
            if p >= th && a < th {
                out.append(DFAThresholdCrossing(threshold: th, direction: .down, atS: t, alpha1: a, previousAlpha1: p))
            } else if p < th && a >= th {
                out.append(DFAThresholdCrossing(threshold: th, direction: .up, atS: t, alpha1: a, previousAlpha1: p))
            }
        }
        return out
    }
}
