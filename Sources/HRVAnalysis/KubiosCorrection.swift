/// Beat indices that one pass of the Lipponen & Tarvainen (2019) classification flagged.
///
/// Indices refer to beats (the interval `i` ends at beat `i`; beat 0 starts the series), as in neurokit2's
/// `signal_fixpeaks(method="Kubios")`.
public struct KubiosArtifacts: Sendable, Equatable {
    public var ectopic: [Int] = []
    public var missed: [Int] = []
    public var extra: [Int] = []
    public var longShort: [Int] = []

    public init(ectopic: [Int] = [], missed: [Int] = [], extra: [Int] = [], longShort: [Int] = []) {
        self.ectopic = ectopic
        self.missed = missed
        self.extra = extra
        self.longShort = longShort
    }

    /// All flagged beats of the pass.
    public var total: Int { ectopic.count + missed.count + extra.count + longShort.count }
}

/// The outcome of `KubiosCorrection.correct`.
public struct KubiosCorrectionResult: Sendable, Equatable {
    /// The corrected intervals in milliseconds. Extra beats are merged and missed beats split, so the count can
    /// change; the sum of the intervals stays the elapsed time (up to the sample grid when one is used).
    public var rrMs: [Double]
    /// Beats that the correction moved, inserted or removed, each counted once over all passes.
    public var correctedBeats: Int
    /// Classification of the first pass, on the series as given.
    public var firstPass: KubiosArtifacts
    /// Classification of the last pass that was applied (what neurokit2 returns).
    public var lastPass: KubiosArtifacts
    /// Passes applied (1 when nothing was found).
    public var passes: Int
}

/// Lipponen & Tarvainen (2019) automatic RR artefact detection and correction (the Kubios "automatic" method),
/// following neurokit2 0.2.x `signal_fixpeaks(method="Kubios", iterative=True)` step by step:
///
/// - dRR (successive differences) normalised by Th1 = 5.2 × (Q3 − Q1)/2 of |dRR| over a centred 91-beat window,
///   the quartile deviation taken as at least 1 ms (`minimumDeviationMs`; neurokit2 has no floor);
/// - mRR (RR minus its centred 11-beat median, negative values doubled) normalised by Th2, the same rule on |mRR|;
/// - beats classified as ectopic, missed, extra or long/short with c1 = 0.13, c2 = 0.17;
/// - extra beats deleted, missed beats inserted midway, ectopic and long/short beats moved to the midpoint of their
///   neighbours; repeated while the number of flagged beats decreases.
///
/// Reference: Lipponen, J. A., & Tarvainen, M. P. (2019). J Med Eng Technol 43(3):173-181,
/// doi:10.1080/03091902.2019.1640306.
public enum KubiosCorrection {
    static let c1 = 0.13
    static let c2 = 0.17
    static let alpha = 5.2
    static let thresholdWindow = 91
    static let medianWindow = 11
    /// The least quartile deviation a threshold is built on, in ms: a strap's RR resolution (1/1024 s) rounded up.
    /// A rhythm steadier than that (a fixed-rate pacemaker, say) has a quartile deviation of 0, which made every
    /// one-count step infinitely large and an artefact: 32 of 300 beats of a paced series at one count of jitter.
    /// On real series the deviation is tens of ms (NSRDB, MIT-BIH 208), far above it: the neurokit2 parity holds.
    public static let minimumDeviationMs = 1.0

    /// Series shorter than this many intervals are returned unchanged.
    public static let minimumIntervals = 3

    /// Corrects one uninterrupted RR series (milliseconds).
    ///
    /// - Parameters:
    ///   - iterative: repeat classification and correction while the number of flagged beats decreases.
    ///   - sampleRateHz: when given, beat times are kept on that sample grid and moved or inserted beats are
    ///     truncated to a whole sample, exactly as neurokit2 does with peak indices; `nil` keeps exact times.
    public static func correct(
        _ rrMs: [Double],
        iterative: Bool = true,
        sampleRateHz: Double? = nil
    ) -> KubiosCorrectionResult {
        guard rrMs.count >= minimumIntervals else {
            return KubiosCorrectionResult(rrMs: rrMs, correctedBeats: 0, firstPass: .init(), lastPass: .init(), passes: 0)
        }
        let unit = sampleRateHz.map { 1000 / $0 } ?? 1
        var peaks = [Beat(time: 0)]
        peaks.reserveCapacity(rrMs.count + 8)
        var sum = 0.0
        for rr in rrMs {
            sum += rr
            peaks.append(Beat(time: sampleRateHz == nil ? sum : (sum / unit).rounded()))
        }
        var removed = 0

        let floor = minimumDeviationMs / unit
        let first = findArtifacts(beatTimes: peaks.map(\.time), minimumDeviation: floor)
        apply(first, to: &peaks, removed: &removed, truncate: sampleRateHz != nil)
        var last = first
        var passes = 1
        if iterative {
            var current = first.total
            while true {
                let next = findArtifacts(beatTimes: peaks.map(\.time), minimumDeviation: floor)
                let previous = current
                current = next.total
                if current >= previous { break }
                last = next
                apply(next, to: &peaks, removed: &removed, truncate: sampleRateHz != nil)
                passes += 1
            }
        }

        var out: [Double] = []
        out.reserveCapacity(peaks.count - 1)
        for k in 1..<peaks.count { out.append((peaks[k].time - peaks[k - 1].time) * unit) }
        let touched = peaks.reduce(0) { $0 + ($1.touched ? 1 : 0) }
        return KubiosCorrectionResult(
            rrMs: out, correctedBeats: touched + removed, firstPass: first, lastPass: last, passes: passes
        )
    }

    struct Beat {
        var time: Double
        var touched = false
    }

    /// One classification pass over beat times (any unit; the first beat starts the first interval).
    /// `minimumDeviation` (in that unit) is the least quartile deviation a threshold is built on.
    public static func findArtifacts(beatTimes peaks: [Double], minimumDeviation: Double = 0) -> KubiosArtifacts {
        let n = peaks.count
        guard n >= minimumIntervals + 1 else { return KubiosArtifacts() }

        // Period series with as many elements as beats; the first is the mean of the others.
        var rr = [Double](repeating: 0, count: n)
        for k in 1..<n { rr[k] = peaks[k] - peaks[k - 1] }
        rr[0] = (peaks[n - 1] - peaks[0]) / Double(n - 1)

        var drrs = [Double](repeating: 0, count: n)
        for k in 1..<n { drrs[k] = rr[k] - rr[k - 1] }
        drrs[0] = (rr[n - 1] - rr[0]) / Double(n - 1)
        let th1 = threshold(drrs, minimumDeviation: minimumDeviation)
        for k in 0..<n { drrs[k] /= th1[k] }

        // Subspaces, with the series reflected (without repeating the edge) two beats beyond each end.
        func padded(_ j: Int) -> Double {
            var m = j
            if m < 0 { m = -m }
            if m > n - 1 { m = 2 * (n - 1) - m }
            return drrs[m]
        }
        var s12 = [Double](repeating: 0, count: n)
        var s22 = [Double](repeating: 0, count: n)
        for d in 0..<n {
            let v = drrs[d]
            if v > 0 {
                s12[d] = Swift.max(padded(d - 1), padded(d + 1))
            } else if v < 0 {
                s12[d] = Swift.min(padded(d - 1), padded(d + 1))
            }
            if v >= 0 {
                s22[d] = Swift.min(padded(d + 1), padded(d + 2))
            } else if v < 0 {
                s22[d] = Swift.max(padded(d + 1), padded(d + 2))
            }
        }

        let medrr = RollingWindow.centredQuantiles(rr, width: medianWindow, quantiles: [0.5])[0]
        var mrrs = [Double](repeating: 0, count: n)
        for k in 0..<n {
            let m = rr[k] - medrr[k]
            mrrs[k] = m < 0 ? 2 * m : m
        }
        let th2 = threshold(mrrs, minimumDeviation: minimumDeviation)
        for k in 0..<n { mrrs[k] /= th2[k] }

        var result = KubiosArtifacts()
        var i = 0
        while i < n - 2 {
            if abs(drrs[i]) <= 1 {
                i += 1
                continue
            }
            let eq1 = drrs[i] > 1 && s12[i] < (-c1 * drrs[i] - c2)
            let eq2 = drrs[i] < -1 && s12[i] > (-c1 * drrs[i] + c2)
            if eq1 || eq2 {
                result.ectopic.append(i)
                i += 1
                continue
            }
            if !(abs(drrs[i]) > 1 || abs(mrrs[i]) > 3) {
                i += 1
                continue
            }
            var candidates = [i]
            if abs(drrs[i + 1]) < abs(drrs[i + 2]) { candidates.append(i + 1) }
            for j in candidates {
                let eq3 = drrs[j] > 1 && s22[j] < -1
                let eq4 = abs(mrrs[j]) > 3
                let eq5 = drrs[j] < -1 && s22[j] > 1
                if !(eq3 || eq4 || eq5) {
                    i += 1
                    continue
                }
                let eq6 = abs(rr[j] / 2 - medrr[j]) < th2[j]
                let eq7 = abs(rr[j] + rr[j + 1] - medrr[j]) < th2[j]
                if eq5 && eq7 {
                    result.extra.append(j)
                } else if eq3 && eq6 {
                    result.missed.append(j)
                } else {
                    result.longShort.append(j)
                }
                i += 1
            }
        }
        return result
    }

    /// α × quartile deviation of |x| over the centred window (shorter at the ends), the deviation at least
    /// `minimumDeviation`.
    static func threshold(_ x: [Double], minimumDeviation: Double = 0) -> [Double] {
        let q = RollingWindow.centredQuantiles(x.map { abs($0) }, width: thresholdWindow, quantiles: [0.25, 0.75])
        return zip(q[0], q[1]).map { alpha * Swift.max(($1 - $0) / 2, minimumDeviation) }
    }

    static func apply(_ artifacts: KubiosArtifacts, to peaks: inout [Beat], removed: inout Int, truncate: Bool) {
        var missed = artifacts.missed
        var ectopic = artifacts.ectopic
        var longShort = artifacts.longShort
        if !artifacts.extra.isEmpty {
            let drop = Set(artifacts.extra)
            removed += drop.count
            peaks = peaks.enumerated().filter { !drop.contains($0.offset) }.map(\.element)
            missed = shifted(missed, by: artifacts.extra, -1)
            ectopic = shifted(ectopic, by: artifacts.extra, -1)
            longShort = shifted(longShort, by: artifacts.extra, -1)
        }
        if !missed.isEmpty {
            insertMissed(missed, into: &peaks, truncate: truncate)
            ectopic = shifted(ectopic, by: missed, 1)
            longShort = shifted(longShort, by: missed, 1)
        }
        if !ectopic.isEmpty { moveToMidpoint(ectopic, in: &peaks, truncate: truncate) }
        if !longShort.isEmpty { moveToMidpoint(longShort, in: &peaks, truncate: truncate) }
    }

    /// neurokit2 `_update_indices`: for each source index in turn, shift the indices above it; then sort and dedupe.
    static func shifted(_ indices: [Int], by sources: [Int], _ delta: Int) -> [Int] {
        guard !indices.isEmpty else { return indices }
        var u = indices
        for s in sources {
            for k in u.indices where u[k] > s { u[k] += delta }
        }
        return Array(Set(u)).sorted()
    }

    static func insertMissed(_ indices: [Int], into peaks: inout [Beat], truncate: Bool) {
        let valid = indices.filter { $0 > 1 && $0 < peaks.count }
        guard !valid.isEmpty else { return }
        var added: [Int: [Beat]] = [:]
        for j in valid {
            let prev = peaks[j - 1].time
            var t = prev + (peaks[j].time - prev) / 2
            if truncate { t.round(.towardZero) }
            added[j, default: []].append(Beat(time: t, touched: true))
        }
        var out: [Beat] = []
        out.reserveCapacity(peaks.count + valid.count)
        for (k, beat) in peaks.enumerated() {
            if let new = added[k] { out.append(contentsOf: new) }
            out.append(beat)
        }
        peaks = out
    }

    static func moveToMidpoint(_ indices: [Int], in peaks: inout [Beat], truncate: Bool) {
        let valid = indices.filter { $0 > 1 && $0 < peaks.count - 1 }
        guard !valid.isEmpty else { return }
        var moved: [Beat] = []
        for j in valid {
            let prev = peaks[j - 1].time
            var t = prev + (peaks[j + 1].time - prev) / 2
            if truncate { t.round(.towardZero) }
            moved.append(Beat(time: t, touched: true))
        }
        let drop = Set(valid)
        var out = peaks.enumerated().filter { !drop.contains($0.offset) }.map(\.element)
        out.append(contentsOf: moved)
        // Stable, like numpy's mergesort: a moved beat stays after an unmoved one at the same time.
        out = out.enumerated().sorted { a, b in
            a.element.time != b.element.time ? a.element.time < b.element.time : a.offset < b.offset
        }.map(\.element)
        peaks = out
    }
}

/// Centred rolling quantiles with pandas semantics (`rolling(width, center=True, min_periods=1)`, linear
/// interpolation between order statistics), using a sorted sliding window.
enum RollingWindow {
    static func centredQuantiles(_ x: [Double], width: Int, quantiles: [Double]) -> [[Double]] {
        let n = x.count
        var out = quantiles.map { _ in [Double](repeating: 0, count: n) }
        guard n > 0 else { return out }
        let half = width / 2
        var sorted: [Double] = []
        sorted.reserveCapacity(width)
        var lo = 0
        var hi = -1
        for i in 0..<n {
            let newLo = Swift.max(0, i - half)
            let newHi = Swift.min(n - 1, i + half)
            while hi < newHi {
                hi += 1
                insert(x[hi], into: &sorted)
            }
            while lo < newLo {
                remove(x[lo], from: &sorted)
                lo += 1
            }
            for (q, p) in quantiles.enumerated() {
                out[q][i] = quantile(sorted, p)
            }
        }
        return out
    }

    static func quantile(_ sorted: [Double], _ p: Double) -> Double {
        let position = p * Double(sorted.count - 1)
        let below = Int(position.rounded(.down))
        let above = Swift.min(below + 1, sorted.count - 1)
        let fraction = position - Double(below)
        return sorted[below] + (sorted[above] - sorted[below]) * fraction
    }

    static func insert(_ v: Double, into sorted: inout [Double]) {
        var lo = 0
        var hi = sorted.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if sorted[mid] < v { lo = mid + 1 } else { hi = mid }
        }
        sorted.insert(v, at: lo)
    }

    static func remove(_ v: Double, from sorted: inout [Double]) {
        var lo = 0
        var hi = sorted.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if sorted[mid] < v { lo = mid + 1 } else { hi = mid }
        }
        if lo < sorted.count, sorted[lo] == v {
            sorted.remove(at: lo)
        } else if let k = sorted.firstIndex(where: { $0 == v || ($0.isNaN && v.isNaN) }) {
            sorted.remove(at: k)
        }
    }
}
