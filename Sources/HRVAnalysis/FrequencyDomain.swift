import Foundation

/// How the power spectrum of the RR series is estimated.
public enum SpectrumMethod: String, Sendable, CaseIterable {
    /// Welch's method on RR resampled at 4 Hz with a natural cubic spline (as neurokit2 `hrv_frequency` with
    /// `psd_method="welch", interpolation_rate=4`): mean removed, Hann segments of half the series (at most
    /// 2 / lowest band edge seconds), 50 % overlap, zero-padded to twice the segment, one-sided density; bins below
    /// 4 / duration (two cycles in half the series) left out, as neurokit2 does.
    case welch
    /// Lomb-Scargle periodogram on the beat times themselves (no resampling), scaled to a one-sided density.
    case lombScargle = "lomb"
}

/// Frequency-domain HRV. Powers in ms², bands VLF 0.0033-0.04 Hz, LF 0.04-0.15 Hz, HF 0.15-0.4 Hz (Task Force 1996).
public struct FrequencyDomainResult: Sendable, Equatable {
    /// nil when the series is shorter than `FrequencyDomain.minimumSecondsVLF`.
    public var vlfMs2: Double?
    public var lfMs2: Double
    public var hfMs2: Double
    /// VLF + LF + HF; nil with VLF.
    public var totalPowerMs2: Double?
    public var lfHf: Double?
    /// 100 · LF / (LF + HF).
    public var lfNu: Double?
    /// 100 · HF / (LF + HF).
    public var hfNu: Double?
    public var lfPeakHz: Double?
    public var hfPeakHz: Double?
}

public enum FrequencyDomain {
    public static let vlfBand = 0.0033..<0.04
    public static let lfBand = 0.04..<0.15
    public static let hfBand = 0.15..<0.4
    /// LF, HF and their ratios need this much uninterrupted data (two cycles at 0.04 Hz is 50 s; 2 minutes is the
    /// Task Force's minimum for LF).
    public static let minimumSecondsLF = 120.0
    /// VLF and total power need this much (Task Force: 5 minutes; 4 allow a window of ~5 minutes of corrected data).
    public static let minimumSecondsVLF = 240.0
    /// Band power (ms²) below which a band is taken as empty: a constant series gave LF/HF 0.135 and peaks from
    /// powers of 1e-20 ms². Real LF and HF powers are tens to thousands of ms².
    public static let noPowerMs2 = 1e-6

    /// Frequency-domain metrics of one uninterrupted series, or nil when it lasts under `minimumSecondsLF`.
    public static func analyze(_ rr: [Double], method: SpectrumMethod = .welch) -> FrequencyDomainResult? {
        guard rr.count >= 8 else { return nil }
        let duration = rr.reduce(0, +) / 1000
        guard duration >= minimumSecondsLF else { return nil }
        let psd: (f: [Double], p: [Double])
        switch method {
        case .welch: psd = welch(rr)
        case .lombScargle: psd = lombScargle(rr)
        }
        func band(_ b: Range<Double>) -> (power: Double, peak: Double?) {
            var power = 0.0
            var peak: Double?
            var peakValue = -1.0
            var previous: (f: Double, p: Double)?
            for i in psd.f.indices where b.contains(psd.f[i]) {
                if let q = previous { power += 0.5 * (q.p + psd.p[i]) * (psd.f[i] - q.f) }
                previous = (psd.f[i], psd.p[i])
                if psd.p[i] > peakValue {
                    peakValue = psd.p[i]
                    peak = psd.f[i]
                }
            }
            return (power, peak)
        }
        let lf = band(lfBand)
        let hf = band(hfBand)
        // Below this a band holds rounding error, not variability (a constant series): no peak, no ratio of noise.
        let none = Self.noPowerMs2
        var r = FrequencyDomainResult(
            lfMs2: lf.power, hfMs2: hf.power, lfPeakHz: lf.power > none ? lf.peak : nil,
            hfPeakHz: hf.power > none ? hf.peak : nil)
        if hf.power > none { r.lfHf = lf.power / hf.power }
        if lf.power + hf.power > none {
            r.lfNu = 100 * lf.power / (lf.power + hf.power)
            r.hfNu = 100 * hf.power / (lf.power + hf.power)
        }
        if duration >= minimumSecondsVLF {
            let vlf = band(vlfBand).power
            r.vlfMs2 = vlf
            r.totalPowerMs2 = vlf + lf.power + hf.power
        }
        return r
    }

    /// Welch PSD (ms²/Hz) of the 4 Hz cubic-spline tachogram, frequencies up to 0.5 Hz.
    static func welch(_ rr: [Double], rate: Double = 4) -> (f: [Double], p: [Double]) {
        var t = [Double](repeating: 0, count: rr.count)
        var acc = 0.0
        for i in rr.indices {
            acc += rr[i] / 1000
            t[i] = acc
        }
        var y = Spectrum.resampleCubic(x: t, y: rr, rate: rate)
        let n = y.count
        let mean = y.reduce(0, +) / Double(n)
        for i in 0..<n { y[i] -= mean }
        // Segment: long enough for two cycles of the lowest band edge, at most half the series.
        var nperseg = Int((2 / vlfBand.lowerBound) * rate)
        if Double(nperseg) > Double(n) / 2 { nperseg = n / 2 }
        nperseg = Swift.max(nperseg, 4)
        let nfft = 2 * nperseg
        // Segments overlapping by half (scipy's default), spread evenly from the first sample to the last: as many
        // as that overlap needs to reach the end, each start rounded. scipy (and neurokit2) step by exactly half a
        // segment from the start and leave out whatever the last whole segment does not reach: with a segment of
        // half the series and an odd length, the newest quarter of the series (docs/hrv.md §9).
        let step = nperseg - nperseg / 2
        let count = n <= nperseg ? 1 : (n - nperseg + step - 1) / step + 1
        let starts = (0..<count).map { i in
            count == 1 ? 0 : Int((Double(i) * Double(n - nperseg) / Double(count - 1)).rounded())
        }
        let window = (0..<nperseg).map { 0.5 - 0.5 * cos(2 * Double.pi * Double($0) / Double(nperseg)) }
        let windowPower = window.reduce(0) { $0 + $1 * $1 }
        let maxBin = Swift.min(nfft / 2, Int((0.5 * Double(nfft) / rate).rounded(.up)))
        var cosTable = [Double](repeating: 0, count: nfft)
        var sinTable = [Double](repeating: 0, count: nfft)
        for k in 0..<nfft {
            let a = 2 * Double.pi * Double(k) / Double(nfft)
            cosTable[k] = cos(a)
            sinTable[k] = sin(a)
        }
        var power = [Double](repeating: 0, count: maxBin + 1)
        var segments = 0
        var segment = [Double](repeating: 0, count: nperseg)
        for start in starts where start + nperseg <= n {
            for i in 0..<nperseg { segment[i] = y[start + i] * window[i] }
            for k in 0...maxBin {
                var re = 0.0
                var im = 0.0
                var idx = 0
                for i in 0..<nperseg {
                    re += segment[i] * cosTable[idx]
                    im -= segment[i] * sinTable[idx]
                    idx += k
                    if idx >= nfft { idx -= nfft }
                }
                power[k] += re * re + im * im
            }
            segments += 1
        }
        let scale = 1 / (rate * windowPower * Double(Swift.max(segments, 1)))
        var f = [Double](repeating: 0, count: maxBin + 1)
        for k in 0...maxBin {
            f[k] = Double(k) * rate / Double(nfft)
            power[k] *= scale
            if k != 0 && !(nfft % 2 == 0 && k == nfft / 2) { power[k] *= 2 }
        }
        // Frequencies below two cycles in half the series (4 / duration) are not resolved by the segments and carry
        // the window's leakage of the lowest components; they are left out, as neurokit2 leaves them out (its
        // default `min_frequency`). This is what VLF rests on with short series: 0.0133 Hz at 5 minutes.
        let lowest = 4 * rate / Double(n)
        let keep = f.indices.filter { f[$0] >= lowest - 1e-12 }
        return (keep.map { f[$0] }, keep.map { power[$0] })
    }

    /// Lomb-Scargle periodogram (ms²/Hz, one-sided) of RR against beat time, 0.001 Hz steps up to 0.5 Hz. The
    /// classic periodogram P is scaled by 2·T/N so that its integral is the variance of the series.
    static func lombScargle(_ rr: [Double], step df: Double = 0.001, maxHz: Double = 0.5) -> (f: [Double], p: [Double]) {
        let n = rr.count
        var t = [Double](repeating: 0, count: n)
        var acc = 0.0
        for i in 0..<n {
            acc += rr[i] / 1000
            t[i] = acc
        }
        let duration = t[n - 1] - t[0]
        let mean = rr.reduce(0, +) / Double(n)
        let y = rr.map { $0 - mean }
        let bins = Int(maxHz / df)
        // cos/sin(ω t_i) advanced from one frequency to the next by rotation: two trig calls per beat in total.
        var c = [Double](repeating: 1, count: n)
        var s = [Double](repeating: 0, count: n)
        var dc = [Double](repeating: 0, count: n)
        var ds = [Double](repeating: 0, count: n)
        for i in 0..<n {
            let a = 2 * Double.pi * df * (t[i] - t[0])
            dc[i] = cos(a)
            ds[i] = sin(a)
        }
        var f = [Double](repeating: 0, count: bins)
        var p = [Double](repeating: 0, count: bins)
        for k in 1...bins {
            for i in 0..<n {
                let nc = c[i] * dc[i] - s[i] * ds[i]
                s[i] = s[i] * dc[i] + c[i] * ds[i]
                c[i] = nc
            }
            var s2 = 0.0
            var c2 = 0.0
            for i in 0..<n {
                s2 += 2 * s[i] * c[i]
                c2 += c[i] * c[i] - s[i] * s[i]
            }
            let wtau = 0.5 * atan2(s2, c2)
            let ct = cos(wtau)
            let st = sin(wtau)
            var yc = 0.0
            var ys = 0.0
            var cc = 0.0
            var ss = 0.0
            for i in 0..<n {
                let cs = c[i] * ct + s[i] * st  // cos(ω t − ωτ)
                let sn = s[i] * ct - c[i] * st  // sin(ω t − ωτ)
                yc += y[i] * cs
                ys += y[i] * sn
                cc += cs * cs
                ss += sn * sn
            }
            var value = 0.0
            if cc > 0 { value += yc * yc / cc }
            if ss > 0 { value += ys * ys / ss }
            f[k - 1] = Double(k) * df
            p[k - 1] = 0.5 * value * 2 * duration / Double(n)
        }
        return (f, p)
    }
}
