#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#elseif canImport(ucrt)
import ucrt
#endif

/// Power of a real signal on a dense, evenly spaced frequency grid (a zoomed DFT, equivalent to a heavily
/// zero-padded periodogram). The signal's linear trend is removed and a Hann window applied first.
struct ZoomSpectrum {
    let start: Double
    let step: Double
    let power: [Double]

    init(signal: [Double], sampleRate: Double, from: Double, to: Double, step: Double) {
        self.start = from
        self.step = step
        let n = signal.count
        let bins = max(0, Int(((to - from) / step).rounded(.down)) + 1)
        guard n >= 4, bins > 0 else {
            power = [Double](repeating: 0, count: bins)
            return
        }
        let x = ZoomSpectrum.detrendedHann(signal)
        var out = [Double](repeating: 0, count: bins)
        for k in 0..<bins {
            let w = 2 * Double.pi * (from + Double(k) * step) / sampleRate
            // Phasor recurrence: one complex multiply per sample, renormalised every 64 samples.
            let cr = cos(w), ci = -sin(w)
            var pr = 1.0, pi = 0.0
            var re = 0.0, im = 0.0
            for i in 0..<n {
                re += x[i] * pr
                im += x[i] * pi
                let nr = pr * cr - pi * ci
                pi = pr * ci + pi * cr
                pr = nr
                if i & 63 == 63 {
                    let mag = (pr * pr + pi * pi).squareRoot()
                    pr /= mag
                    pi /= mag
                }
            }
            out[k] = (re * re + im * im) / Double(n)
        }
        power = out
    }

    static func detrendedHann(_ s: [Double]) -> [Double] {
        let n = s.count
        let nd = Double(n)
        let meanT = (nd - 1) / 2
        var mean = 0.0
        for v in s { mean += v }
        mean /= nd
        var sxy = 0.0, sxx = 0.0
        for i in 0..<n {
            let dt = Double(i) - meanT
            sxy += dt * (s[i] - mean)
            sxx += dt * dt
        }
        let slope = sxx > 0 ? sxy / sxx : 0
        var out = [Double](repeating: 0, count: n)
        for i in 0..<n {
            let hann = 0.5 - 0.5 * cos(2 * Double.pi * Double(i) / (nd - 1))
            out[i] = (s[i] - mean - slope * (Double(i) - meanT)) * hann
        }
        return out
    }

    func index(of f: Double) -> Int { Int(((f - start) / step).rounded()) }
    func frequency(at k: Int) -> Double { start + Double(k) * step }

    /// Sum of power over grid points inside `range`.
    func energy(_ range: ClosedRange<Double>) -> Double {
        let a = max(0, Int(((range.lowerBound - start) / step).rounded(.up)))
        let b = min(power.count - 1, Int(((range.upperBound - start) / step).rounded(.down)))
        guard a <= b else { return 0 }
        var e = 0.0
        for k in a...b { e += power[k] }
        return e
    }

    /// Highest point inside `range`, refined by a parabola through the square roots of the three points around it
    /// (offset clamped to half a grid step).
    func peak(_ range: ClosedRange<Double>, prior: RatePrior? = nil) -> (frequency: Double, atEdge: Bool)? {
        let a = max(0, Int(((range.lowerBound - start) / step).rounded(.up)))
        let b = min(power.count - 1, Int(((range.upperBound - start) / step).rounded(.down)))
        guard a <= b else { return nil }
        var best = a
        if let prior {
            // The maximum of the power weighted by the prior; refinement below uses the unweighted power.
            var bestScore = -1.0
            for k in a...b {
                let score = power[k] * prior.weight(at: frequency(at: k))
                if score > bestScore { bestScore = score; best = k }
            }
        } else {
            for k in a...b where power[k] > power[best] { best = k }
        }
        guard power[best] > 0 else { return nil }
        var offset = 0.0
        if best > 0, best < power.count - 1 {
            let l = power[best - 1].squareRoot(), c = power[best].squareRoot(), r = power[best + 1].squareRoot()
            let den = l - 2 * c + r
            if den < 0 { offset = max(-0.5, min(0.5, 0.5 * (l - r) / den)) }
        }
        return (frequency(at: best) + offset * step, best == a || best == b)
    }
}

/// A rate read from the spectral peak of a waveform, with reference-free quality figures.
public struct SpectralRate: Sendable, Equatable {
    /// Peak frequency in Hz.
    public var frequencyHz: Double
    /// Peak frequency in events per minute (beats or breaths).
    public var perMinute: Double { frequencyHz * 60 }
    /// Energy within ±max(floor, 1/window) of the peak (and of its second harmonic, when that is in the band)
    /// divided by all energy in the band, 0-1 (vitallens-core's confidence, widened for short windows).
    public var peakRatio: Double
    /// de Haan & Jeanne (2013) SNR in dB: power around the peak and its second harmonic against the rest of the
    /// noise band, clamped to -30 ... +40 dB.
    public var snrDb: Double
    /// Power within ±max(snrHalfWidth, 1/window) of the peak alone against all other power in the noise band, dB,
    /// clamped to -30 ... +40 dB. Unlike `snrDb` it gives no credit for a second harmonic, which compressed real
    /// video rarely keeps; it is the pulse confidence's main evidence (docs/rppg.md).
    public var fundamentalSnrDb: Double = -30
    /// The maximum sits on the edge of the band, or closer to it than the window's resolution (1 / duration): a
    /// trend or an out-of-band component, not a rhythm inside the band.
    public var atBandEdge: Bool
}

/// Where the previous confident reading was: the peak is chosen from the power weighted by
/// floor + (1 − floor)·exp(−½((f − center)/sigma)²), so a peak far from the last reading must be clearly stronger to
/// win (no 30 bpm jumps without evidence). The quality figures are computed on the unweighted spectrum.
public struct RatePrior: Sendable, Equatable {
    public var centerHz: Double
    public var sigmaHz: Double
    public var floor: Double

    public init(centerHz: Double, sigmaHz: Double, floor: Double) {
        self.centerHz = centerHz
        self.sigmaHz = sigmaHz
        self.floor = floor
    }

    func weight(at f: Double) -> Double {
        let z = (f - centerHz) / sigmaHz
        return floor + (1 - floor) * exp(-0.5 * z * z)
    }
}

/// Spectral rate estimation on uniformly sampled waveforms: the back end of the rPPG pipeline, also usable on
/// any pulse or respiration trace (contact PPG, camera waveforms).
public enum RateSpectrum {
    /// Grid spacing of the zoomed spectrum for pulse, Hz (0.6 bpm).
    static let pulseStep = 0.01
    /// Grid spacing for breathing, Hz (0.24 breaths/min; the peak is refined between grid points).
    static let breathingStep = 0.004

    /// Pulse rate in `bandHz` (default 0.7-3.0 Hz = 42-180 bpm). SNR noise band: 0.5-4.0 Hz (below Nyquist).
    /// `nil` when the signal is shorter than 2 s or has no energy.
    /// `prior` biases the choice of the peak towards an earlier reading (see ``RatePrior``).
    public static func pulse(
        _ signal: [Double], sampleRate: Double, bandHz: ClosedRange<Double> = 0.7...3.0, prior: RatePrior? = nil
    ) -> SpectralRate? {
        pulse(signal, sampleRate: sampleRate, bandHz: bandHz, prior: prior, snrAtHz: nil).rate
    }

    /// ``pulse(_:sampleRate:bandHz:prior:)``, and the same spectrum's fundamental SNR (dB, as
    /// ``SpectralRate/fundamentalSnrDb``) at `snrAtHz` instead of at its own peak: how strongly this signal carries
    /// another signal's peak (the pulse confidence asks it of CHROM at the POS peak). `nil` without a spectrum.
    static func pulse(
        _ signal: [Double], sampleRate: Double, bandHz: ClosedRange<Double> = 0.7...3.0, prior: RatePrior? = nil,
        snrAtHz: Double?
    ) -> (rate: SpectralRate?, snrAtDb: Double?) {
        analyse(signal, sampleRate: sampleRate, band: bandHz, noiseBand: min(0.5, bandHz.lowerBound)...max(4.0, bandHz.upperBound),
                step: pulseStep, floorHalfWidth: 5.0 / 60, snrHalfWidth: 0.1, prior: prior, snrAtHz: snrAtHz)
    }

    /// Breathing rate in `bandHz` (default 0.08-0.7 Hz = 4.8-42 breaths/min). SNR noise band: 0.05-1.0 Hz.
    public static func breathing(
        _ signal: [Double], sampleRate: Double, bandHz: ClosedRange<Double> = 0.08...0.7
    ) -> SpectralRate? {
        analyse(signal, sampleRate: sampleRate, band: bandHz, noiseBand: min(0.05, bandHz.lowerBound)...max(1.0, bandHz.upperBound),
                step: breathingStep, floorHalfWidth: 1.0 / 60, snrHalfWidth: 0.02, snrAtHz: nil).rate
    }

    static func analyse(
        _ signal: [Double], sampleRate: Double, band: ClosedRange<Double>, noiseBand: ClosedRange<Double>,
        step: Double, floorHalfWidth: Double, snrHalfWidth: Double, prior: RatePrior? = nil, snrAtHz: Double?
    ) -> (rate: SpectralRate?, snrAtDb: Double?) {
        guard sampleRate > 0, signal.count >= 4 else { return (nil, nil) }
        let duration = Double(signal.count) / sampleRate
        guard duration >= 2 else { return (nil, nil) }
        let nyquist = 0.98 * sampleRate / 2
        let hi = min(noiseBand.upperBound, nyquist)
        let bandHi = min(band.upperBound, nyquist)
        guard bandHi > band.lowerBound, hi > noiseBand.lowerBound else { return (nil, nil) }
        let spectrum = ZoomSpectrum(signal: signal, sampleRate: sampleRate, from: noiseBand.lowerBound, to: hi, step: step)
        let noise = noiseBand.lowerBound...hi
        let snrAt = snrAtHz.map {
            fundamentalSnrDb(spectrum, at: $0, halfWidth: max(snrHalfWidth, 1 / duration), noise: noise)
        }
        return (spectralRate(spectrum, band: band.lowerBound...bandHi, noise: noise, duration: duration,
                             floorHalfWidth: floorHalfWidth, snrHalfWidth: snrHalfWidth, prior: prior), snrAt)
    }

    /// Power within ±`halfWidth` of `f0` against all other power in `noise`, dB, clamped to -30 ... +40 dB; -30 when
    /// the spectrum holds no power at all.
    static func fundamentalSnrDb(
        _ spectrum: ZoomSpectrum, at f0: Double, halfWidth w: Double, noise: ClosedRange<Double>
    ) -> Double {
        let total = spectrum.energy(noise)
        guard total > 0 else { return -30 }
        let fundamental = spectrum.energy(max(noise.lowerBound, f0 - w)...min(noise.upperBound, f0 + w))
        return decibels(fundamental, total - fundamental)
    }

    static func decibels(_ signal: Double, _ noise: Double) -> Double {
        if noise <= 0 { return 40 }
        if signal <= 0 { return -30 }
        return max(-30, min(40, 10 * log10(signal / noise)))
    }

    /// The peak of `spectrum` in `searchBand` and its quality figures (``SpectralRate``).
    static func spectralRate(
        _ spectrum: ZoomSpectrum, band searchBand: ClosedRange<Double>, noise: ClosedRange<Double>, duration: Double,
        floorHalfWidth: Double, snrHalfWidth: Double, prior: RatePrior?
    ) -> SpectralRate? {
        let hi = noise.upperBound
        guard let (f0, onEdgePoint) = spectrum.peak(searchBand, prior: prior) else { return nil }
        // A peak closer to the band's edge than the window's resolution (1 / duration) cannot be told from the tail
        // of a component outside the band (a trend, slow motion), so it counts as on the edge.
        let resolution = 1 / duration
        let atEdge = onEdgePoint || f0 - searchBand.lowerBound < resolution || searchBand.upperBound - f0 < resolution

        let half = max(floorHalfWidth, 1 / duration)
        let inBand = spectrum.energy(searchBand)
        guard inBand > 0 else { return nil }
        var around = spectrum.energy(max(searchBand.lowerBound, f0 - half)...min(searchBand.upperBound, f0 + half))
        if 2 * f0 + half <= searchBand.upperBound {
            around += spectrum.energy((2 * f0 - half)...(2 * f0 + half))
        }
        let ratio = min(1, around / inBand)

        let w = max(snrHalfWidth, 1 / duration)
        let total = spectrum.energy(noise)
        var signalPower = spectrum.energy(max(noise.lowerBound, f0 - w)...min(hi, f0 + w))
        let fundamental = signalPower
        if 2 * f0 - 2 * w < hi {
            signalPower += spectrum.energy((2 * f0 - 2 * w)...min(hi, 2 * f0 + 2 * w))
        }
        return SpectralRate(frequencyHz: f0, peakRatio: ratio, snrDb: decibels(signalPower, total - signalPower),
                            fundamentalSnrDb: decibels(fundamental, total - fundamental), atBandEdge: atEdge)
    }
}
