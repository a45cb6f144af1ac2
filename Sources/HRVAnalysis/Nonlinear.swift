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

    /// DFA alpha1: box sizes 4...16 beats.
    public static func alpha1(_ rr: [Double]) -> Double? {
        guard rr.count >= minimumAlpha1 else { return nil }
        return dfa(rr, scales: Array(4...16))
    }

    /// DFA alpha2: box sizes 16...64 beats.
    public static func alpha2(_ rr: [Double]) -> Double? {
        guard rr.count >= minimumAlpha2 else { return nil }
        return dfa(rr, scales: Array(16...64))
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
        guard rr.count >= minimumSampleEntropy else { return nil }
        let r = rFactor * variance(rr).squareRoot()
        let n = rr.count
        let templates = n - m
        var a = 0
        var b = 0
        for i in 0..<(templates - 1) {
            for j in (i + 1)..<templates {
                var match = true
                for k in 0..<m where abs(rr[i + k] - rr[j + k]) > r {
                    match = false
                    break
                }
                guard match else { continue }
                b += 1
                if abs(rr[i + m] - rr[j + m]) <= r { a += 1 }
            }
        }
        guard a > 0, b > 0 else { return nil }
        return -Foundation.log(Double(a) / Double(b))
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
