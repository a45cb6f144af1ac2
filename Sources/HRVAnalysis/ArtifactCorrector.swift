/// What `ArtifactCorrector` decided about one flagged interval.
public enum ArtifactKind: String, Sendable, Equatable {
    /// A beat the detector missed: the interval is a multiple of the local rhythm and is split evenly.
    case missed
    /// A spurious beat: two short intervals that add up to one normal interval are merged (also a fragment under
    /// half the reference, merged with the neighbour that gives a plausible interval).
    case extra
    /// A premature beat and its compensatory pause (short then long, or long then short, adding up to two normal
    /// intervals): the beat between them is moved to the midpoint.
    case ectopic
    /// A lone interval too long or too short (or a spike above both neighbours) with no explanation above: replaced
    /// by the local reference.
    case longShort
}

/// One artefact found and repaired.
public struct ArtifactFinding: Sendable, Equatable {
    /// Index of the (first) interval concerned in the input series.
    public var index: Int
    public var kind: ArtifactKind
}

/// The outcome of `ArtifactCorrector.correct`.
public struct ArtifactCorrectionResult: Sendable, Equatable {
    public var rrMs: [Double]
    public var findings: [ArtifactFinding]
    /// Intervals of the input that were changed, merged, split or replaced.
    public var correctedIntervals: Int
    /// Per interval of `rrMs`: 0 when measured, otherwise the number of the repair that wrote the estimate.
    /// Consecutive intervals with the same number are one repair that kept the elapsed time (the parts of a split
    /// missed beat, the two sides of a moved beat): their true values are unknown but their sum is measured. An
    /// estimate alone under its number (a lone interval replaced by the reference) did not keep it. `NonlinearHRV`'s
    /// DFA uses this to take off the effect of the repairs (`NonlinearHRV.dfa(_:scales:estimateGroups:)`).
    public var estimateGroups: [Int]

    /// Per interval of `rrMs`: true when its value is the corrector's estimate (one of the equal parts of a split
    /// missed beat, a beat moved to the midpoint of an ectopic pair, or the reference put in place of a lone
    /// interval) rather than the time between two detected beats. A merged extra beat is not an estimate: the sum of
    /// the two fragments is the time between the beats either side, as measured. Successive differences that touch
    /// an estimated interval are not measurements; `HRVAnalyzer` leaves them out of RMSSD, NN50 and pNN50.
    public var estimated: [Bool] { estimateGroups.map { $0 != 0 } }

    public init(rrMs: [Double], findings: [ArtifactFinding], correctedIntervals: Int, estimateGroups: [Int]) {
        self.rrMs = rrMs
        self.findings = findings
        self.correctedIntervals = correctedIntervals
        self.estimateGroups = estimateGroups
    }
}

/// hr-gateway's RR artefact detection and correction ("median" in the CLI and configuration).
///
/// 1. Reference: for every interval, the median of its 10 neighbours (5 each side, itself excluded), so up to four
///    bad neighbours cannot move it.
/// 2. Deviation d = RR / reference − 1. Its normal spread σ is 1.4826 · median |d| over about 100 beats around, and
///    an interval is flagged when |d| > T = clamp(5 σ, 0.12, 0.30): wide where the rhythm is naturally irregular,
///    narrow (but never below 12 %) where it is steady, as in exercise.
/// 3. Explanations that keep the sum of intervals (the elapsed time) intact, tried in this order: an ectopic pair
///    (opposite deviations adding up to two references; or, smaller, a premature beat: short then long, a jump of
///    over a quarter of the reference, and moving the beat between them to the midpoint removes over three quarters
///    of the squared successive differences around it), an extra beat (it and a neighbour add up to one reference
///    within T), a missed beat (it is k ≥ 2 references within T each), a fragment (under half the reference: merged
///    with the neighbour that brings the sum closest to the reference, if the sum is a plausible interval). An
///    ectopic pair whose short member makes one reference with its other neighbour is left to the extra-beat rule.
/// 4. Step 3 runs on the result until nothing changes (at most three passes); only then, against a reference
///    computed from the repaired series, lone intervals are judged: beyond +40 % / −30 % of the reference, or more
///    than 35 % longer than the mean of both neighbours, they are replaced by the reference (again at most three
///    passes, the step 3 explanations still first).
/// 5. Every output interval says whether it is an estimate (`ArtifactCorrectionResult.estimated`): split, moved and
///    replaced values are; merged ones are not (the sum is the time between two detected beats). `HRVAnalyzer`
///    computes RMSSD, NN50 and pNN50 of a median-corrected series only over differences between measured intervals;
///    `estimateGroups` says which estimates came from one repair that kept the elapsed time, for the DFA.
public enum ArtifactCorrector {
    static let halfWidth = 5
    static let spreadBlock = 32
    static let floor = 0.12
    static let ceiling = 0.30
    static let spreadFactor = 5.0
    static let pairFraction = 0.6
    static let loneLongLimit = 0.4
    static let loneShortLimit = 0.3
    static let missedTolerance = 0.2
    /// A lone interval this much longer than the mean of its two neighbours is not sinus rhythm.
    static let spikeLimit = 0.35
    /// Premature beat: the jump from the short to the long interval, as a fraction of the reference.
    static let prematureJump = 0.25
    /// Premature beat: moving the beat must leave at most this fraction of the squared successive differences.
    static let prematureResidual = 0.25
    /// Shorter than this fraction of the reference, an interval is a fragment of one (no sinus beat comes that early).
    static let fragmentLimit = 0.5

    public static func correct(_ input: [Double]) -> ArtifactCorrectionResult {
        var rr = input
        // origin[i]: index in the input of the interval now at i (for reporting).
        var origin = Array(input.indices)
        // group[i]: 0 when the value now at i is measured (the time between two detected beats), otherwise the number
        // of the repair that estimated it (see `ArtifactCorrectionResult.estimateGroups`).
        var group = [Int](repeating: 0, count: input.count)
        var nextGroup = 1
        func newGroup() -> Int {
            defer { nextGroup += 1 }
            return nextGroup
        }
        // A merge of two intervals: the sum is an estimate when either part is, and belongs to that part's repair
        // (its total stays measured: the other part is a measured interval). Two estimates of different repairs
        // merging is left to the first one's number (the second repair's remaining parts no longer sum to a
        // measured time; this needs two repairs side by side and a merge across them).
        func merged(_ a: Int, _ b: Int) -> Int { a != 0 ? a : b }
        var findings: [ArtifactFinding] = []
        var touched = Set<Int>()
        guard rr.count >= 2 * halfWidth + 1 else {
            return ArtifactCorrectionResult(rrMs: rr, findings: [], correctedIntervals: 0, estimateGroups: group)
        }
        // One pass over the series; `lone` also replaces lone long/short intervals. Returns whether anything changed.
        func pass(lone: Bool) -> Bool {
            let (reference, threshold) = referenceAndThreshold(rr)
            var out: [Double] = []
            var outOrigin: [Int] = []
            var outGroup: [Int] = []
            out.reserveCapacity(rr.count + 4)
            var changed = false
            var i = 0
            let n = rr.count
            func flagged(_ j: Int) -> Bool {
                j >= 0 && j < n && abs(rr[j] / reference[j] - 1) > threshold[j]
            }
            func note(_ kind: ArtifactKind, _ indices: Int...) {
                findings.append(ArtifactFinding(index: indices[0], kind: kind))
                touched.formUnion(indices)
                changed = true
            }
            while i < n {
                let ref = reference[i]
                let tol = threshold[i] * ref
                let o = origin[i]
                let d = rr[i] / ref - 1
                if i + 1 < n {
                    // Ectopic pair: opposite deviations, each beyond `pairFraction` of the threshold, adding up to two
                    // references (within half the threshold).
                    let d1 = rr[i + 1] / reference[i + 1] - 1
                    let t = pairFraction * threshold[i]
                    var pair = ((d < -t && d1 > t) || (d > t && d1 < -t)) && abs(rr[i] + rr[i + 1] - 2 * ref) < 0.5 * tol
                    if pair {
                        // The short member makes one reference with its other neighbour: an extra beat, not a pair.
                        if d1 < 0, i + 2 < n, abs(rr[i + 1] + rr[i + 2] - reference[i + 1]) < threshold[i + 1] * reference[i + 1] {
                            pair = false
                        }
                        if d < 0, let last = out.last, abs(last + rr[i] - ref) < tol { pair = false }
                    }
                    // A smaller premature beat: short after a longer interval, then long before a shorter one, the
                    // pair adding up to two references, and moving the beat to their midpoint removes most of the
                    // local roughness.
                    if !pair, let a = out.last, i + 2 < n {
                        let x = rr[i]
                        let y = rr[i + 1]
                        let b = rr[i + 2]
                        let h = (x + y) / 2
                        if x < a && y > b && y - x > prematureJump * ref && abs(x + y - 2 * ref) < 0.5 * tol {
                            let before = (x - a) * (x - a) + (y - x) * (y - x) + (b - y) * (b - y)
                            let after = (h - a) * (h - a) + (b - h) * (b - h)
                            pair = after < prematureResidual * before
                        }
                    }
                    if pair {
                        let half = (rr[i] + rr[i + 1]) / 2
                        out.append(half)
                        out.append(half)
                        outOrigin.append(o)
                        outOrigin.append(origin[i + 1])
                        let g = newGroup()
                        outGroup.append(g)
                        outGroup.append(g)
                        note(.ectopic, o, origin[i + 1])
                        i += 2
                        continue
                    }
                }
                // A lone spike: far longer than both neighbours, which real sinus rhythm does not do in one beat.
                var spike = false
                if let a = out.last, i + 1 < n {
                    spike = rr[i] > ref && rr[i] > (1 + spikeLimit) * (a + rr[i + 1]) / 2
                }
                guard flagged(i) || spike else {
                    out.append(rr[i])
                    outOrigin.append(o)
                    outGroup.append(group[i])
                    i += 1
                    continue
                }
                if rr[i] < ref {
                    // Extra beat: merge with the next or the previous interval.
                    if i + 1 < n, abs(rr[i] + rr[i + 1] - ref) < tol {
                        out.append(rr[i] + rr[i + 1])
                        outOrigin.append(o)
                        outGroup.append(merged(group[i], group[i + 1]))
                        note(.extra, o, origin[i + 1])
                        i += 2
                        continue
                    }
                    if let last = out.last, abs(last + rr[i] - ref) < tol {
                        out[out.count - 1] = last + rr[i]
                        outGroup[out.count - 1] = merged(outGroup[out.count - 1], group[i])
                        note(.extra, o)
                        i += 1
                        continue
                    }
                } else {
                    // Missed beat(s): k references within tolerance each.
                    let k = (rr[i] / ref).rounded()
                    if k >= 2, abs(rr[i] / k - ref) < Swift.min(tol, missedTolerance * ref) {
                        let g = newGroup()
                        for _ in 0..<Int(k) {
                            out.append(rr[i] / k)
                            outOrigin.append(o)
                            outGroup.append(g)
                        }
                        note(.missed, o)
                        i += 1
                        continue
                    }
                }
                // A fragment (under half the reference): merged with the neighbour that brings the sum closest to the
                // reference, when that sum is a plausible lone interval.
                if rr[i] < fragmentLimit * ref {
                    let withPrevious = out.last.map { $0 + rr[i] }
                    let withNext = i + 1 < n ? rr[i] + rr[i + 1] : nil
                    var useNext = withNext != nil
                    if let p = withPrevious, let q = withNext { useNext = abs(q - ref) < abs(p - ref) }
                    if let sum = useNext ? withNext : withPrevious, sum / ref - 1 > -loneShortLimit, sum / ref - 1 < loneLongLimit {
                        if useNext {
                            out.append(sum)
                            outOrigin.append(o)
                            outGroup.append(merged(group[i], group[i + 1]))
                            note(.extra, o, origin[i + 1])
                            i += 2
                        } else {
                            out[out.count - 1] = sum
                            outGroup[out.count - 1] = merged(outGroup[out.count - 1], group[i])
                            note(.extra, o)
                            i += 1
                        }
                        continue
                    }
                }
                // A lone interval: real sinus rhythm makes steps of up to about a third, so only larger ones (or a
                // spike above both neighbours) are taken for artefacts and replaced by the reference.
                if lone && (d > loneLongLimit || d < -loneShortLimit || spike) {
                    out.append(ref)
                    outOrigin.append(o)
                    outGroup.append(newGroup())
                    note(.longShort, o)
                } else {
                    out.append(rr[i])
                    outOrigin.append(o)
                    outGroup.append(group[i])
                }
                i += 1
            }
            rr = out
            origin = outOrigin
            group = outGroup
            return changed
        }
        // First only what keeps the elapsed time, so the reference for the lone intervals is computed from a
        // series already rid of extra, missed and ectopic beats (their fragments pull the neighbours' median).
        for lone in [false, true] {
            for _ in 0..<3 {
                if !pass(lone: lone) { break }
            }
        }
        findings.sort { $0.index < $1.index }
        return ArtifactCorrectionResult(
            rrMs: rr, findings: findings, correctedIntervals: touched.count, estimateGroups: group)
    }

    /// The 10-neighbour median reference and the per-interval relative threshold.
    static func referenceAndThreshold(_ rr: [Double]) -> (reference: [Double], threshold: [Double]) {
        let n = rr.count
        var reference = [Double](repeating: 0, count: n)
        var buffer = [Double](repeating: 0, count: 2 * halfWidth)
        for i in 0..<n {
            // Near the ends the window is shifted inwards so it always holds 10 neighbours.
            var lo = i - halfWidth
            var hi = i + halfWidth
            if lo < 0 {
                hi -= lo
                lo = 0
            }
            if hi >= n {
                lo -= hi - (n - 1)
                hi = n - 1
            }
            lo = Swift.max(lo, 0)
            var c = 0
            for j in lo...hi where j != i && c < buffer.count {
                buffer[c] = rr[j]
                c += 1
            }
            reference[i] = median(&buffer, count: c)
        }
        var deviation = [Double](repeating: 0, count: n)
        for i in 0..<n { deviation[i] = abs(rr[i] / reference[i] - 1) }
        let blocks = (n + spreadBlock - 1) / spreadBlock
        var blockThreshold = [Double](repeating: floor, count: blocks)
        var scratch: [Double] = []
        for b in 0..<blocks {
            let lo = Swift.max(0, (b - 1) * spreadBlock)
            let hi = Swift.min(n, (b + 2) * spreadBlock)
            scratch.removeAll(keepingCapacity: true)
            scratch.append(contentsOf: deviation[lo..<hi])
            let sigma = 1.4826 * median(&scratch, count: scratch.count)
            blockThreshold[b] = Swift.min(ceiling, Swift.max(floor, spreadFactor * sigma))
        }
        var threshold = [Double](repeating: floor, count: n)
        for i in 0..<n { threshold[i] = blockThreshold[i / spreadBlock] }
        return (reference, threshold)
    }

    static func median(_ v: inout [Double], count: Int) -> Double {
        guard count > 0 else { return 0 }
        // Insertion sort: the windows are small (10 neighbours, ~100 deviations).
        for i in 1..<Swift.max(count, 1) {
            let x = v[i]
            var j = i - 1
            while j >= 0 && v[j] > x {
                v[j + 1] = v[j]
                j -= 1
            }
            v[j + 1] = x
        }
        return count % 2 == 1 ? v[count / 2] : 0.5 * (v[count / 2 - 1] + v[count / 2])
    }
}
