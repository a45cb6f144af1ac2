/// What `ArtifactCorrector` decided about one flagged interval.
public enum ArtifactKind: String, Sendable, Equatable {
    /// A beat the detector missed: the interval is a multiple of the local rhythm and is split evenly.
    case missed
    /// A spurious beat: two short intervals that add up to one normal interval are merged.
    case extra
    /// A premature beat and its compensatory pause (short then long, or long then short, adding up to two normal
    /// intervals): the beat between them is moved to the midpoint.
    case ectopic
    /// A lone interval too long or too short with no explanation above: replaced by the local reference.
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
}

/// hr-gateway's RR artefact detection and correction ("median" in the CLI and configuration).
///
/// 1. Reference: for every interval, the median of its 10 neighbours (5 each side, itself excluded), so up to four
///    bad neighbours cannot move it.
/// 2. Deviation d = RR / reference − 1. Its normal spread σ is 1.4826 · median |d| over about 100 beats around, and
///    an interval is flagged when |d| > T = clamp(5 σ, 0.12, 0.30): wide where the rhythm is naturally irregular,
///    narrow (but never below 12 %) where it is steady, as in exercise.
/// 3. Each flagged interval is explained, in this order, by what keeps the sum of intervals (the elapsed time)
///    intact: an extra beat (it and a neighbour add up to one reference within T), a missed beat (it is k ≥ 2
///    references within T each), an ectopic pair (it and an opposite neighbour add up to two references within T:
///    both become half the sum). What remains is a lone long/short interval and is replaced by the reference.
/// 4. Steps 1-3 run again on the result until nothing is flagged (at most three passes).
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

    public static func correct(_ input: [Double]) -> ArtifactCorrectionResult {
        var rr = input
        // origin[i]: index in the input of the interval now at i (for reporting).
        var origin = Array(input.indices)
        var findings: [ArtifactFinding] = []
        var touched = Set<Int>()
        guard rr.count >= 2 * halfWidth + 1 else { return ArtifactCorrectionResult(rrMs: rr, findings: [], correctedIntervals: 0) }
        for _ in 0..<3 {
            let (reference, threshold) = referenceAndThreshold(rr)
            var out: [Double] = []
            var outOrigin: [Int] = []
            out.reserveCapacity(rr.count + 4)
            var changed = false
            var i = 0
            let n = rr.count
            func flagged(_ j: Int) -> Bool {
                j >= 0 && j < n && abs(rr[j] / reference[j] - 1) > threshold[j]
            }
            while i < n {
                let ref = reference[i]
                let tol = threshold[i] * ref
                let o = origin[i]
                let d = rr[i] / ref - 1
                // Ectopic pair: opposite deviations, each beyond `pairFraction` of the threshold, adding up to two
                // references (within half the threshold): the beat between them is moved to the midpoint.
                if i + 1 < n {
                    let d1 = rr[i + 1] / reference[i + 1] - 1
                    let t = pairFraction * threshold[i]
                    if (d < -t && d1 > t) || (d > t && d1 < -t),
                        abs(rr[i] + rr[i + 1] - 2 * ref) < 0.5 * tol
                    {
                        let half = (rr[i] + rr[i + 1]) / 2
                        out.append(half)
                        out.append(half)
                        outOrigin.append(o)
                        outOrigin.append(origin[i + 1])
                        findings.append(ArtifactFinding(index: o, kind: .ectopic))
                        touched.insert(o)
                        touched.insert(origin[i + 1])
                        changed = true
                        i += 2
                        continue
                    }
                }
                guard flagged(i) else {
                    out.append(rr[i])
                    outOrigin.append(o)
                    i += 1
                    continue
                }
                if rr[i] < ref {
                    // Extra beat: merge with the next or the previous interval.
                    if i + 1 < n, abs(rr[i] + rr[i + 1] - ref) < tol {
                        out.append(rr[i] + rr[i + 1])
                        outOrigin.append(o)
                        findings.append(ArtifactFinding(index: o, kind: .extra))
                        touched.insert(o)
                        touched.insert(origin[i + 1])
                        changed = true
                        i += 2
                        continue
                    }
                    if let last = out.last, i > 0, abs(last + rr[i] - ref) < tol {
                        out[out.count - 1] = last + rr[i]
                        findings.append(ArtifactFinding(index: o, kind: .extra))
                        touched.insert(o)
                        changed = true
                        i += 1
                        continue
                    }
                } else {
                    // Missed beat(s): k references within tolerance each.
                    let k = (rr[i] / ref).rounded()
                    if k >= 2, abs(rr[i] / k - ref) < Swift.min(tol, missedTolerance * ref) {
                        for _ in 0..<Int(k) {
                            out.append(rr[i] / k)
                            outOrigin.append(o)
                        }
                        findings.append(ArtifactFinding(index: o, kind: .missed))
                        touched.insert(o)
                        changed = true
                        i += 1
                        continue
                    }
                }
                // A lone interval: real sinus rhythm makes steps of up to about a third, so only larger ones are
                // taken for artefacts and replaced by the reference.
                if d > loneLongLimit || d < -loneShortLimit {
                    out.append(ref)
                    outOrigin.append(o)
                    findings.append(ArtifactFinding(index: o, kind: .longShort))
                    touched.insert(o)
                    changed = true
                } else {
                    out.append(rr[i])
                    outOrigin.append(o)
                }
                i += 1
            }
            rr = out
            origin = outOrigin
            if !changed { break }
        }
        findings.sort { $0.index < $1.index }
        return ArtifactCorrectionResult(rrMs: rr, findings: findings, correctedIntervals: touched.count)
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
