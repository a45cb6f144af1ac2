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

/// A crossing of an alpha1 threshold by the published estimates (`DFACrossingDetector`).
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

    /// Threshold crossings of the published (not withheld) estimates, each confirmed by the next one
    /// (`DFACrossingDetector`).
    public static func crossings(_ estimates: [DFAEstimate], thresholds: [Double] = thresholds) -> [DFAThresholdCrossing] {
        var detector = DFACrossingDetector(thresholds: thresholds)
        return estimates.flatMap { e in e.alpha1.map { detector.feed(alpha1: $0, atS: e.endS) } ?? [] }
    }
}

/// Threshold crossings that hold: alpha1 past a threshold in `confirmations` published estimates in a row (40 s of
/// them at one every 20 s), the crossing dated at the first of them, with its value and the estimate before it.
///
/// Consecutive estimates share 100 of their 120 s of beats, yet alpha1 from 2 minutes of beats moves by a few
/// hundredths from one to the next; while it hovers at a threshold, every estimate either side of it was a crossing
/// (0.75 crossed 7 times in 4 minutes of the simulated ramp), each one an event for the phone and an EDF annotation.
/// One estimate past the threshold and back is not a crossing; a value equal to a threshold counts as at or above it.
/// Withheld estimates are not fed, so they neither confirm nor cancel one.
public struct DFACrossingDetector: Sendable {
    public static let confirmations = 2
    public let thresholds: [Double]
    /// The side of each threshold alpha1 was last confirmed on (true: at or above).
    private var above: [Double: Bool] = [:]
    /// A crossing waiting for its confirmation, and the estimates past the threshold so far.
    private var pending: [Double: (crossing: DFAThresholdCrossing, count: Int)] = [:]
    private var previous: Double?

    public init(thresholds: [Double] = LiveDFA.thresholds) {
        self.thresholds = thresholds
    }

    /// The crossings confirmed by the estimate `alpha1` ending at `atS`.
    public mutating func feed(alpha1 a: Double, atS t: Double) -> [DFAThresholdCrossing] {
        defer { previous = a }
        var out: [DFAThresholdCrossing] = []
        for th in thresholds {
            let nowAbove = a >= th
            guard let side = above[th], let before = previous else {
                above[th] = nowAbove
                continue
            }
            guard nowAbove != side else {
                pending[th] = nil
                continue
            }
            var p = pending[th] ?? (DFAThresholdCrossing(
                threshold: th, direction: nowAbove ? .up : .down, atS: t, alpha1: a, previousAlpha1: before), 0)
            p.count += 1
            if p.count >= Self.confirmations {
                out.append(p.crossing)
                above[th] = nowAbove
                pending[th] = nil
            } else {
                pending[th] = p
            }
        }
        return out
    }
}
