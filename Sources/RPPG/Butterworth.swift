#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An IIR filter in transfer-function form (`b`, `a`, a[0] = 1) with scipy's `filtfilt`.
public struct Butterworth: Sendable {
    public let b: [Double]
    public let a: [Double]

    /// 2nd-order Butterworth band-pass 0.7-3.5 Hz at 30 Hz (scipy `butter(2, [0.7, 3.5], 'band', fs=30)`).
    public static let bandPass2 = Butterworth.bandPass(order2Low: 0.7, high: 3.5, sampleRate: 30)

    /// Designs a 2nd-order (4 poles) Butterworth band-pass the way scipy does: prewarped edges, analog low-pass
    /// prototype, low-pass to band-pass, bilinear transform.
    public static func bandPass(order2Low low: Double, high: Double, sampleRate fs: Double) -> Butterworth {
        let fs2 = 2.0
        let w1 = 2 * fs2 * tan(Double.pi * (low / (fs / 2)) / fs2)
        let w2 = 2 * fs2 * tan(Double.pi * (high / (fs / 2)) / fs2)
        let bw = w2 - w1, wo2 = w1 * w2
        // Analog prototype poles of order 2.
        let proto = [Complex(-0.5.squareRoot(), 0.5.squareRoot()), Complex(-0.5.squareRoot(), -0.5.squareRoot())]
        var poles: [Complex] = []
        for p in proto {
            let h = p * (bw / 2)
            let d = (h * h - Complex(wo2, 0)).sqrt()
            poles.append(h + d)
            poles.append(h - d)
        }
        var gain = bw * bw
        // Bilinear transform: two zeros at s = 0 map to z = 1; the two extra zeros go to z = -1.
        let zeros = [Complex(1, 0), Complex(1, 0), Complex(-1, 0), Complex(-1, 0)]
        var num = Complex(1, 0), den = Complex(1, 0)
        for _ in 0..<2 { num = num * Complex(2 * fs2, 0) }
        for p in poles { den = den * (Complex(2 * fs2, 0) - p) }
        gain *= (num / den).re
        let dPoles = poles.map { (Complex(2 * fs2, 0) + $0) / (Complex(2 * fs2, 0) - $0) }
        return Butterworth(b: poly(zeros).map { $0.re * gain }, a: poly(dPoles).map(\.re))
    }

    static func poly(_ roots: [Complex]) -> [Complex] {
        var c = [Complex(1, 0)]
        for r in roots {
            var next = [Complex](repeating: Complex(0, 0), count: c.count + 1)
            for i in c.indices {
                next[i] = next[i] + c[i]
                next[i + 1] = next[i + 1] - c[i] * r
            }
            c = next
        }
        return c
    }

    /// Zero-phase filtering as scipy `filtfilt(b, a, x)` with its defaults (odd extension of 3·max(len) samples,
    /// `lfilter_zi` initial conditions). Signals not longer than the extension are returned unchanged.
    public func filtfilt(_ x: [Double]) -> [Double] {
        let pad = 3 * max(a.count, b.count)
        guard x.count > pad else { return x }
        var ext: [Double] = []
        ext.reserveCapacity(x.count + 2 * pad)
        for i in stride(from: pad, through: 1, by: -1) { ext.append(2 * x[0] - x[i]) }
        ext.append(contentsOf: x)
        let n = x.count
        for i in 1...pad { ext.append(2 * x[n - 1] - x[n - 1 - i]) }
        let zi = steadyState()
        var y = lfilter(ext, zi: zi.map { $0 * ext[0] })
        y.reverse()
        var z = lfilter(y, zi: zi.map { $0 * y[0] })
        z.reverse()
        return Array(z[pad..<(pad + n)])
    }

    /// Direct form II transposed.
    func lfilter(_ x: [Double], zi: [Double]) -> [Double] {
        var z = zi
        let m = z.count
        var out = [Double](repeating: 0, count: x.count)
        for (i, v) in x.enumerated() {
            let y = b[0] * v + z[0]
            for k in 0..<(m - 1) { z[k] = b[k + 1] * v + z[k + 1] - a[k + 1] * y }
            z[m - 1] = b[m] * v - a[m] * y
            out[i] = y
        }
        return out
    }

    /// scipy `lfilter_zi`: solves (I − companion(a)ᵀ)·zi = b[1:] − a[1:]·b[0].
    func steadyState() -> [Double] {
        let m = a.count - 1
        var mat = [[Double]](repeating: [Double](repeating: 0, count: m + 1), count: m)
        for i in 0..<m {
            for j in 0..<m {
                // companion(a)ᵀ: column 0 is −a[1:], ones on the superdiagonal.
                var c = 0.0
                if j == 0 { c = -a[i + 1] }
                if j == i + 1 { c = 1 }
                mat[i][j] = (i == j ? 1 : 0) - c
            }
            mat[i][m] = b[i + 1] - a[i + 1] * b[0]
        }
        for col in 0..<m {
            var pivot = col
            for r in col..<m where abs(mat[r][col]) > abs(mat[pivot][col]) { pivot = r }
            mat.swapAt(col, pivot)
            for r in 0..<m where r != col {
                let f = mat[r][col] / mat[col][col]
                for c in col...m { mat[r][c] -= f * mat[col][c] }
            }
        }
        return (0..<m).map { mat[$0][m] / mat[$0][$0] }
    }
}

struct Complex: Sendable {
    var re: Double
    var im: Double
    init(_ re: Double, _ im: Double) { self.re = re; self.im = im }
    static func + (l: Complex, r: Complex) -> Complex { Complex(l.re + r.re, l.im + r.im) }
    static func - (l: Complex, r: Complex) -> Complex { Complex(l.re - r.re, l.im - r.im) }
    static func * (l: Complex, r: Complex) -> Complex { Complex(l.re * r.re - l.im * r.im, l.re * r.im + l.im * r.re) }
    static func * (l: Complex, r: Double) -> Complex { Complex(l.re * r, l.im * r) }
    static func / (l: Complex, r: Complex) -> Complex {
        let d = r.re * r.re + r.im * r.im
        return Complex((l.re * r.re + l.im * r.im) / d, (l.im * r.re - l.re * r.im) / d)
    }
    func sqrt() -> Complex {
        let m = (re * re + im * im).squareRoot()
        let r = ((m + re) / 2).squareRoot()
        let i = ((m - re) / 2).squareRoot()
        return Complex(r, im < 0 ? -i : i)
    }
}
