import Foundation

/// Nonlinear HRV metrics of one uninterrupted RR series (milliseconds): Poincaré SD1/SD2, detrended fluctuation
/// analysis, sample entropy and Baevsky's stress index. Each returns nil when the series is too short for it (the
/// minimum lengths are the `minimum…` constants and are listed in docs/hrv.md).
public enum NonlinearHRV {
    /// SD1/SD2 need this many intervals.
    public static let minimumPoincare = 20
    /// DFA alpha1 (box sizes 4-16 beats) needs this many intervals.
    public static let minimumAlpha1 = 50
    /// DFA alpha2 (box sizes 16-64 beats) needs this many intervals (four of the largest boxes).
    public static let minimumAlpha2 = 256
    /// Sample entropy needs this many intervals.
    public static let minimumSampleEntropy = 100
    /// The stress index needs this many intervals (the histogram mode is meaningless below).
    public static let minimumStressIndex = 50

    /// Poincaré descriptors: SD1 = √(½·Var(ΔRR)), SD2 = √(2·Var(RR) − ½·Var(ΔRR)), sample variances (N − 1), as
    /// neurokit2 `hrv_nonlinear`.
    public static func poincare(_ rr: [Double]) -> (sd1: Double, sd2: Double)? {
        guard rr.count >= minimumPoincare else { return nil }
        let varRR = variance(rr)
        var diffs = [Double](repeating: 0, count: rr.count - 1)
        for i in 1..<rr.count { diffs[i - 1] = rr[i] - rr[i - 1] }
        let varD = variance(diffs)
        let sd1 = (0.5 * varD).squareRoot()
        let s2 = 2 * varRR - 0.5 * varD
        guard s2 >= 0 else { return nil }
        return (sd1, s2.squareRoot())
    }

    /// DFA alpha1: box sizes 4...16 beats. With `estimateGroups` (the median corrector's
    /// `ArtifactCorrectionResult.estimateGroups`, one per interval), the effect of its repairs is taken off:
    /// `dfa(_:scales:estimateGroups:)`.
    public static func alpha1(_ rr: [Double], estimateGroups: [Int]? = nil) -> Double? {
        guard rr.count >= minimumAlpha1 else { return nil }
        return dfa(rr, scales: Array(4...16), estimateGroups: estimateGroups)
    }

    /// DFA alpha2: box sizes 16...64 beats (`estimateGroups` as for `alpha1`).
    public static func alpha2(_ rr: [Double], estimateGroups: [Int]? = nil) -> Double? {
        guard rr.count >= minimumAlpha2 else { return nil }
        return dfa(rr, scales: Array(16...64), estimateGroups: estimateGroups)
    }

    /// Shifts (beats) at which `dfa(_:scales:estimateGroups:)` repeats the corrector's repairs.
    static let repeatShifts = [3, 4, 5, 6, 7, 8, -3, -4, -5, -6, -7, -8]

    /// DFA of a series repaired by `ArtifactCorrector`, with the effect of the repairs taken off by simulation and
    /// extrapolation (SIMEX, Cook & Stefanski 1994). Every repair writes a smooth estimate (an even split, a midpoint,
    /// the median of the neighbours) that lacks the beat-to-beat variation of the true intervals, which pulls F(n)
    /// down at the small boxes and alpha up; how much depends on the series (its correlation, the repairs' number and
    /// kinds). So the same repairs are applied a second time to measured intervals nearby — each repair's copy shifted
    /// by `repeatShifts` beats, where the copy and one interval either side are all measured: the intervals of a repair
    /// that kept the elapsed time become their mean, a lone estimate becomes the median of its 10 neighbours — and
    /// the change of alpha from once to twice repaired, scaled to a full set of copies, is taken off once:
    /// alpha = alpha₁ − mean over the shifts of (alpha₂ − alpha₁) · repairs / copies placed. A shift that places
    /// copies of fewer than half of the repairs is not used; nil when no shift is usable (estimates so dense that the
    /// effect cannot be measured). Without an estimate the result is the plain DFA, bit for bit.
    public static func dfa(_ rr: [Double], scales: [Int], estimateGroups: [Int]?) -> Double? {
        guard let once = dfa(rr, scales: scales) else { return nil }
        guard let estimateGroups, estimateGroups.count == rr.count else { return once }
        let runs = estimateRuns(estimateGroups)
        guard !runs.isEmpty else { return once }
        var total = 0.0
        var usable = 0
        for shift in repeatShifts {
            let again = repairedAgain(rr, estimateGroups: estimateGroups, runs: runs, shift: shift)
            guard 2 * again.copies >= runs.count, let twice = dfa(again.rrMs, scales: scales) else { continue }
            total += (twice - once) * Double(runs.count) / Double(again.copies)
            usable += 1
        }
        guard usable > 0 else { return nil }
        return once - total / Double(usable)
    }

    /// One repair's estimates: intervals `first...last`; `keepsSum`: their sum is measured (a split missed beat, a
    /// moved beat), otherwise a lone estimate.
    struct EstimateRun: Equatable {
        var first: Int
        var last: Int
        var keepsSum: Bool { last > first }
    }

    /// Runs of equal non-zero numbers in `estimateGroups` (`ArtifactCorrectionResult.estimateGroups`).
    static func estimateRuns(_ groups: [Int]) -> [EstimateRun] {
        var runs: [EstimateRun] = []
        var i = 0
        while i < groups.count {
            guard groups[i] != 0 else {
                i += 1
                continue
            }
            var j = i
            while j + 1 < groups.count && groups[j + 1] == groups[i] { j += 1 }
            runs.append(EstimateRun(first: i, last: j))
            i = j + 1
        }
        return runs
    }

    /// `rr` with each run's repair applied again `shift` beats away, where the copy and one interval either side are
    /// measured and inside the series (copies placed earlier in the same pass count as estimates). `copies`: how many.
    static func repairedAgain(_ rr: [Double], estimateGroups: [Int], runs: [EstimateRun], shift: Int)
        -> (rrMs: [Double], copies: Int)
    {
        var out = rr
        var estimate = estimateGroups.map { $0 != 0 }
        var copies = 0
        var buffer = [Double](repeating: 0, count: 2 * ArtifactCorrector.halfWidth)
        for run in runs {
            let first = run.first + shift
            let last = run.last + shift
            guard first >= 1, last + 1 < rr.count, !estimate[(first - 1)...(last + 1)].contains(true) else { continue }
            if run.keepsSum {
                let mean = out[first...last].reduce(0, +) / Double(last - first + 1)
                for k in first...last { out[k] = mean }
            } else {
                var c = 0
                for j in Swift.max(0, first - ArtifactCorrector.halfWidth)...Swift.min(rr.count - 1, first + ArtifactCorrector.halfWidth)
                where j != first {
                    buffer[c] = out[j]
                    c += 1
                }
                out[first] = ArtifactCorrector.median(&buffer, count: c)
            }
            for k in first...last { estimate[k] = true }
            copies += 1
        }
        return (out, copies)
    }

    /// Detrended fluctuation analysis (Peng et al. 1995) as neurokit2 `fractal_dfa` (order 1, overlapping boxes
    /// advanced by half their size): the profile y = cumsum(RR − mean) is cut into boxes of n beats, a straight line
    /// is fitted in each, F(n) = √(mean over boxes of the mean squared residual), and alpha is the least-squares
    /// slope of log F(n) against log n.
    public static func dfa(_ rr: [Double], scales: [Int]) -> Double? {
        let n = rr.count
        guard n >= 4 else { return nil }
        let mean = rr.reduce(0, +) / Double(n)
        var profile = [Double](repeating: 0, count: n)
        var acc = 0.0
        for i in 0..<n {
            acc += rr[i] - mean
            profile[i] = acc
        }
        // Prefix sums of y and i·y make each box's straight-line fit O(1); the residual sum of squares needs Σy² too.
        var sy = [Double](repeating: 0, count: n + 1)
        var sxy = [Double](repeating: 0, count: n + 1)
        var syy = [Double](repeating: 0, count: n + 1)
        for i in 0..<n {
            let y = profile[i]
            sy[i + 1] = sy[i] + y
            sxy[i + 1] = sxy[i] + Double(i) * y
            syy[i + 1] = syy[i] + y * y
        }
        var logN: [Double] = []
        var logF: [Double] = []
        for s in scales where s >= 3 && s <= n {
            let step = Swift.max(1, s / 2)
            let m = Double(s)
            // x = 0...s-1 inside the box: Σx, Σx², their centred sums.
            let meanX = (m - 1) / 2
            let sxxC = m * (m * m - 1) / 12
            var total = 0.0
            var boxes = 0
            var start = 0
            while start + s <= n {
                let end = start + s
                let b = sy[end] - sy[start]
                let bxyRaw = sxy[end] - sxy[start] - Double(start) * b  // Σ (i - start) y_i
                let byy = syy[end] - syy[start]
                let meanY = b / m
                let sxyC = bxyRaw - meanX * b
                let syyC = byy - m * meanY * meanY
                let rss = Swift.max(0, syyC - sxyC * sxyC / sxxC)
                total += rss / m
                boxes += 1
                start += step
            }
            guard boxes > 0 else { continue }
            let f = (total / Double(boxes)).squareRoot()
            guard f > 0 else { continue }
            logN.append(Foundation.log(m))
            logF.append(Foundation.log(f))
        }
        guard logN.count >= 2 else { return nil }
        return slope(x: logN, y: logF)
    }

    /// Sample entropy (Richman & Moorman 2000), m = 2, r = 0.2·SD (N − 1), Chebyshev distance, self-matches excluded:
    /// −ln(A/B) where B counts template pairs of length m and A of length m + 1 over the same N − m templates.
    public static func sampleEntropy(_ rr: [Double], m: Int = 2, rFactor: Double = 0.2) -> Double? {
        guard let counts = sampleEntropyCounts(rr, m: m, rFactor: rFactor), counts.a > 0, counts.b > 0 else {
            return nil
        }
        // Every match of length m still matching at m + 1 (a perfectly regular series) is 0, not −0.
        return counts.a == counts.b ? 0 : -Foundation.log(Double(counts.a) / Double(counts.b))
    }

    /// The counts A and B of `sampleEntropy`, and how many pairs of template groups were compared to find them.
    ///
    /// Every pair of templates is counted as in the plain double loop, with two shortcuts that leave the counts
    /// exactly the double loop's. Templates whose m + 1 values are identical form one group: every pair inside it
    /// matches at m and at m + 1, and a pair of groups matches for all its template pairs at once. A strap's RR come in
    /// steps (1/1024 s), so a steady rhythm (a pacemaker, a resting athlete) is a few hundred groups however long it
    /// is, where comparing its templates one by one was quadratic (a day of paced beats took minutes). And only groups
    /// whose first values are within r can match: in order of their first value, each group is compared with those
    /// that follow it until the first value is more than r larger (about a tenth of the pairs at r = 0.2·SD).
    static func sampleEntropyCounts(_ rr: [Double], m: Int, rFactor: Double) -> (a: Int, b: Int, comparisons: Int)? {
        guard rr.count >= minimumSampleEntropy, m >= 1 else { return nil }
        let r = rFactor * variance(rr).squareRoot()
        let templates = rr.count - m
        // Lexicographic order of the m + 1 values: identical templates are neighbours, and first values ascend.
        let order = (0..<templates).sorted { i, j in
            for k in 0...m where rr[i + k] != rr[j + k] { return rr[i + k] < rr[j + k] }
            return false
        }
        var groupStart: [Int] = []  // a template of each group
        var groupSize: [Int] = []
        for i in order {
            if let last = groupStart.last, (0...m).allSatisfy({ rr[last + $0] == rr[i + $0] }) {
                groupSize[groupSize.count - 1] += 1
            } else {
                groupStart.append(i)
                groupSize.append(1)
            }
        }
        var a = 0
        var b = 0
        var comparisons = 0
        for p in groupStart.indices {
            let i = groupStart[p]
            let pairsInside = groupSize[p] * (groupSize[p] - 1) / 2
            a += pairsInside
            b += pairsInside
            var q = p + 1
            // rr[j] ≥ rr[i] here, so rr[j] − rr[i] is |rr[i] − rr[j]| to the last bit.
            while q < groupStart.count, rr[groupStart[q]] - rr[i] <= r {
                let j = groupStart[q]
                let pairs = groupSize[p] * groupSize[q]
                q += 1
                comparisons += 1
                var match = true
                for k in 1..<m where abs(rr[i + k] - rr[j + k]) > r {
                    match = false
                    break
                }
                guard match else { continue }
                b += pairs
                if abs(rr[i + m] - rr[j + m]) <= r { a += pairs }
            }
        }
        return (a, b, comparisons)
    }

    /// Baevsky's stress index SI = AMo / (2 · Mo · MxDMn): a histogram of RR in 50 ms bins, Mo = the modal bin's
    /// centre (s), AMo = the share of intervals in it (%), MxDMn = max − min RR (s). Kubios reports √SI.
    public static func stressIndex(_ rr: [Double], binMs: Double = 50) -> Double? {
        guard rr.count >= minimumStressIndex, let lo = rr.min(), let hi = rr.max(), hi > lo else { return nil }
        var counts: [Int: Int] = [:]
        for v in rr { counts[Int((v / binMs).rounded(.down)), default: 0] += 1 }
        guard let mode = counts.max(by: { $0.value < $1.value || ($0.value == $1.value && $0.key > $1.key) }) else {
            return nil
        }
        let mo = (Double(mode.key) + 0.5) * binMs / 1000
        let amo = 100 * Double(mode.value) / Double(rr.count)
        return amo / (2 * mo * (hi - lo) / 1000)
    }

    static func variance(_ x: [Double]) -> Double {
        guard x.count > 1 else { return 0 }
        let mean = x.reduce(0, +) / Double(x.count)
        var ss = 0.0
        for v in x { ss += (v - mean) * (v - mean) }
        return ss / Double(x.count - 1)
    }

    static func slope(x: [Double], y: [Double]) -> Double {
        let n = Double(x.count)
        let mx = x.reduce(0, +) / n
        let my = y.reduce(0, +) / n
        var sxy = 0.0
        var sxx = 0.0
        for i in x.indices {
            sxy += (x[i] - mx) * (y[i] - my)
            sxx += (x[i] - mx) * (x[i] - mx)
        }
        return sxy / sxx
    }
}
