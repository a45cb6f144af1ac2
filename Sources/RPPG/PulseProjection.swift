#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#elseif canImport(ucrt)
import ucrt
#endif

/// The two unsupervised projections from per-frame mean RGB to a pulse signal. Inputs are uniformly sampled,
/// equal-length channel traces; the output has the same length.
public enum PulseProjection {
    /// POS (Wang et al. 2017): for every start `n`, the `windowLength` frames from `n` are divided by their channel
    /// means, projected onto S1 = G - B and S2 = -2R + G + B, combined as h = S1 + (σ1/σ2)·S2, made zero-mean and
    /// added into the output (overlap-add, hop one frame). Segments with a channel mean at or below 0 are skipped.
    public static func pos(r: [Double], g: [Double], b: [Double], windowLength: Int) -> [Double] {
        let n = min(r.count, g.count, b.count)
        var out = [Double](repeating: 0, count: n)
        let l = max(2, windowLength)
        guard n >= l else { return out }
        var s1 = [Double](repeating: 0, count: l)
        var s2 = [Double](repeating: 0, count: l)
        for start in 0...(n - l) {
            var mr = 0.0, mg = 0.0, mb = 0.0
            for i in start..<(start + l) {
                mr += r[i]; mg += g[i]; mb += b[i]
            }
            guard mr > 0, mg > 0, mb > 0 else { continue }
            let ir = Double(l) / mr, ig = Double(l) / mg, ib = Double(l) / mb
            var a1 = 0.0, a2 = 0.0
            for j in 0..<l {
                let rn = r[start + j] * ir, gn = g[start + j] * ig, bn = b[start + j] * ib
                s1[j] = gn - bn
                s2[j] = -2 * rn + gn + bn
                a1 += s1[j]; a2 += s2[j]
            }
            a1 /= Double(l); a2 /= Double(l)
            var v1 = 0.0, v2 = 0.0
            for j in 0..<l {
                v1 += (s1[j] - a1) * (s1[j] - a1)
                v2 += (s2[j] - a2) * (s2[j] - a2)
            }
            let alpha = v2 > 0 ? (v1 / v2).squareRoot() : 0
            var hm = 0.0
            for j in 0..<l {
                s1[j] += alpha * s2[j]
                hm += s1[j]
            }
            hm /= Double(l)
            for j in 0..<l { out[start + j] += s1[j] - hm }
        }
        return out
    }

    /// CHROM (de Haan & Jeanne 2013), windowed: Hann-weighted segments of `windowLength` frames at 50 % overlap.
    /// In each segment the channels are divided by their means, X = 3R - 2G and Y = 1.5R + G - 1.5B are linearly
    /// detrended (standing in for the band-pass), α = σX/σY, and S = X - αY is overlap-added.
    public static func chrom(r: [Double], g: [Double], b: [Double], windowLength: Int) -> [Double] {
        let n = min(r.count, g.count, b.count)
        var out = [Double](repeating: 0, count: n)
        var l = max(4, windowLength)
        if l % 2 == 1 { l += 1 }
        guard n >= l else { return out }
        let hop = l / 2
        var x = [Double](repeating: 0, count: l)
        var y = [Double](repeating: 0, count: l)
        var hann = [Double](repeating: 0, count: l)
        for j in 0..<l { hann[j] = 0.5 - 0.5 * cos(2 * Double.pi * Double(j) / Double(l)) }
        var start = 0
        while start + l <= n {
            defer { start += hop }
            var mr = 0.0, mg = 0.0, mb = 0.0
            for i in start..<(start + l) {
                mr += r[i]; mg += g[i]; mb += b[i]
            }
            guard mr > 0, mg > 0, mb > 0 else { continue }
            let ir = Double(l) / mr, ig = Double(l) / mg, ib = Double(l) / mb
            for j in 0..<l {
                let rn = r[start + j] * ir, gn = g[start + j] * ig, bn = b[start + j] * ib
                x[j] = 3 * rn - 2 * gn
                y[j] = 1.5 * rn + gn - 1.5 * bn
            }
            detrend(&x)
            detrend(&y)
            var vx = 0.0, vy = 0.0
            for j in 0..<l {
                vx += x[j] * x[j]
                vy += y[j] * y[j]
            }
            let alpha = vy > 0 ? (vx / vy).squareRoot() : 0
            var sm = 0.0
            for j in 0..<l { sm += x[j] - alpha * y[j] }
            sm /= Double(l)
            for j in 0..<l { out[start + j] += hann[j] * (x[j] - alpha * y[j] - sm) }
        }
        return out
    }

    /// Removes the least-squares line.
    static func detrend(_ v: inout [Double]) {
        let n = v.count
        guard n > 1 else { return }
        let meanT = Double(n - 1) / 2
        var mean = 0.0
        for e in v { mean += e }
        mean /= Double(n)
        var sxy = 0.0, sxx = 0.0
        for i in 0..<n {
            let dt = Double(i) - meanT
            sxy += dt * (v[i] - mean)
            sxx += dt * dt
        }
        let slope = sxy / sxx
        for i in 0..<n { v[i] -= mean + slope * (Double(i) - meanT) }
    }
}
