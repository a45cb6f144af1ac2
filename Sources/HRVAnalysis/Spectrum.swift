/// Small numeric helpers for the respiration estimate: natural cubic spline resampling, linear detrending and a
/// radix-2 FFT. Pure Swift, no platform libraries.
enum Spectrum {
    /// Natural cubic spline through (x, y) (x strictly increasing), evaluated at `x0 + k / rate` up to `x.last`.
    static func resampleCubic(x: [Double], y: [Double], rate: Double) -> [Double] {
        let n = x.count
        guard n >= 2 else { return y }
        // Second derivatives m with m0 = m(n-1) = 0 (Thomas algorithm).
        var m = [Double](repeating: 0, count: n)
        if n > 2 {
            var c = [Double](repeating: 0, count: n)
            var d = [Double](repeating: 0, count: n)
            for i in 1..<(n - 1) {
                let h0 = x[i] - x[i - 1]
                let h1 = x[i + 1] - x[i]
                let a = h0
                let b = 2 * (h0 + h1)
                let cc = h1
                let r = 6 * ((y[i + 1] - y[i]) / h1 - (y[i] - y[i - 1]) / h0)
                let denom = b - a * c[i - 1]
                c[i] = cc / denom
                d[i] = (r - a * d[i - 1]) / denom
            }
            for i in stride(from: n - 2, through: 1, by: -1) {
                m[i] = d[i] - c[i] * m[i + 1]
            }
        }
        let count = Int(((x[n - 1] - x[0]) * rate).rounded(.down)) + 1
        var out = [Double](repeating: 0, count: count)
        var seg = 0
        for k in 0..<count {
            let t = x[0] + Double(k) / rate
            while seg < n - 2 && t > x[seg + 1] { seg += 1 }
            let h = x[seg + 1] - x[seg]
            let a = (x[seg + 1] - t) / h
            let b = (t - x[seg]) / h
            out[k] = a * y[seg] + b * y[seg + 1] + ((a * a * a - a) * m[seg] + (b * b * b - b) * m[seg + 1]) * h * h / 6
        }
        return out
    }

    /// Removes the least-squares straight line.
    static func detrend(_ y: inout [Double]) {
        let n = Double(y.count)
        guard y.count >= 2 else { return }
        let meanX = (n - 1) / 2
        let meanY = y.reduce(0, +) / n
        var sxy = 0.0
        var sxx = 0.0
        for (i, v) in y.enumerated() {
            let dx = Double(i) - meanX
            sxy += dx * (v - meanY)
            sxx += dx * dx
        }
        let slope = sxy / sxx
        for i in y.indices { y[i] -= meanY + slope * (Double(i) - meanX) }
    }

    /// |FFT|² of the real input zero-padded to `size` (a power of two), bins 0 ... size/2.
    static func powerSpectrum(_ input: [Double], size: Int) -> [Double] {
        var re = [Double](repeating: 0, count: size)
        var im = [Double](repeating: 0, count: size)
        for i in 0..<Swift.min(input.count, size) { re[i] = input[i] }
        fft(&re, &im)
        return (0...(size / 2)).map { re[$0] * re[$0] + im[$0] * im[$0] }
    }

    /// In-place iterative radix-2 FFT; `re.count` must be a power of two.
    static func fft(_ re: inout [Double], _ im: inout [Double]) {
        let n = re.count
        guard n > 1 else { return }
        var j = 0
        for i in 1..<n {
            var bit = n >> 1
            while j & bit != 0 {
                j ^= bit
                bit >>= 1
            }
            j |= bit
            if i < j {
                re.swapAt(i, j)
                im.swapAt(i, j)
            }
        }
        var length = 2
        while length <= n {
            let angle = -2 * Double.pi / Double(length)
            let wr = cosine(angle)
            let wi = sine(angle)
            var start = 0
            while start < n {
                var cr = 1.0
                var ci = 0.0
                for k in 0..<(length / 2) {
                    let a = start + k
                    let b = a + length / 2
                    let tr = re[b] * cr - im[b] * ci
                    let ti = re[b] * ci + im[b] * cr
                    re[b] = re[a] - tr
                    im[b] = im[a] - ti
                    re[a] += tr
                    im[a] += ti
                    let next = cr * wr - ci * wi
                    ci = cr * wi + ci * wr
                    cr = next
                }
                start += length
            }
            length <<= 1
        }
    }

    static func nextPowerOfTwo(_ n: Int) -> Int {
        var p = 1
        while p < n { p <<= 1 }
        return p
    }

    /// Periodic Hann window of length n.
    static func hann(_ n: Int) -> [Double] {
        (0..<n).map { 0.5 - 0.5 * cosine(2 * Double.pi * Double($0) / Double(n)) }
    }

    /// Sine without a platform maths library: reduced to [-π/2, π/2], then a Taylor series (error < 1e-16).
    static func sine(_ x: Double) -> Double {
        var r = x.remainder(dividingBy: 2 * Double.pi)
        // Use symmetry to bring r into [-π/2, π/2].
        if r > Double.pi / 2 { r = Double.pi - r } else if r < -Double.pi / 2 { r = -Double.pi - r }
        let r2 = r * r
        var term = r
        var sum = r
        var k = 1.0
        for _ in 0..<12 {
            term *= -r2 / ((2 * k) * (2 * k + 1))
            sum += term
            k += 1
        }
        return sum
    }

    static func cosine(_ x: Double) -> Double { sine(x + Double.pi / 2) }
}
