#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#elseif canImport(ucrt)
import ucrt
#endif
import RPPG

/// A rendered face video with a known pulse and breathing rate, for tests and benchmarks.
///
/// Scene: a blue-grey gradient background, an elliptical skin-toned face with black hair above it, dark eyes,
/// a skin neck and a blue shirt, plus a fixed skin texture that moves with the face. Every skin pixel is
/// `skin · light(t) · (1 + pulseAmplitude · signature_c · p(t))` with the blood-volume signature
/// (0.33, 0.77, 0.53) / 0.77, so `pulseAmplitude` is the relative green modulation; background pixels are
/// `colour · light(t)`. `light(t)` carries illumination steps and mains flicker sampled at the frame times
/// (so 100/120 Hz aliases exactly as a camera without exposure locking would see it). The head (face, hair,
/// eyes, neck) moves vertically by `breathingMotionPixels · sin(2π f_b t)` and sideways by
/// `swayPixels · sin(2π swayHz t)`. Gaussian sensor noise of `noiseSigma` (0-255 scale) is added per pixel
/// and channel before 8-bit rounding.
///
/// The pulse waveform is `sin φ + 0.35 sin(2φ + 0.8)` with φ' = 2π·HR/60·(1 + 0.03 sin(2π f_b t)) (respiratory
/// sinus arrhythmia), so the mean rate over whole breathing cycles is `heartRateBpm`.
public struct SyntheticFaceVideo: Sendable {
    public var width = 320
    public var height = 240
    public var framesPerSecond = 30.0
    public var durationSeconds = 30.0
    /// `nil` renders a pulse-free video.
    public var heartRateBpm: Double? = 72
    /// `nil` renders no breathing motion.
    public var breathingRateBpm: Double? = 15
    /// Relative modulation of the green channel of skin by the pulse (0.006 = 0.6 %).
    public var pulseAmplitude = 0.006
    public var breathingMotionPixels = 1.5
    public var noiseSigma = 2.0
    public var swayPixels = 0.0
    public var swayHz = 0.2
    /// (time in seconds, factor): from that time on, all light is multiplied by the factor.
    public var illuminationSteps: [(seconds: Double, factor: Double)] = []
    /// Relative amplitude of mains flicker (0.01 = 1 %).
    public var flickerAmplitude = 0.0
    /// Flicker frequency of the light (twice the mains frequency: 100 or 120 Hz).
    public var flickerHz = 100.0
    /// Uniform timestamp jitter, ± seconds (keep below 0.4 / framesPerSecond).
    public var timestampJitterSeconds = 0.0
    /// Probability that a frame is dropped.
    public var dropProbability = 0.0
    public var skin = RGBMean(r: 200, g: 150, b: 120)
    public var seed: UInt64 = 1
    /// `plain`: the ellipse face with eyes (what the skin-blob tests use). `detailed`: adds shading towards the
    /// edge, brows, eye sockets, nose sides, nostrils and a mouth, enough for OpenCV's frontal-face cascades to
    /// find it (checked by the FaceDetection tests).
    public var faceStyle = FaceStyle.plain
    /// A flat background colour (before light and noise) instead of the blue-grey gradient, e.g. a skin-coloured
    /// wall.
    public var background: RGBMean?
    /// Face centre as fractions of the frame (x, y) at rest.
    public var faceCentre = (x: 0.5, y: 0.45)
    /// Face size relative to the default (semi-axes 0.16 of the width, 0.28 of the height).
    public var faceScale = 1.0

    public enum FaceStyle: Sendable, Equatable {
        case plain
        case detailed
    }

    public init() {}

    /// The frames in time order, in the requested pixel format.
    public func frames(format: PixelFormat) -> SyntheticFrames { SyntheticFrames(video: self, format: format) }

    /// Number of frame slots (including the ones that will be dropped).
    public var frameSlots: Int { Int((durationSeconds * framesPerSecond).rounded(.down)) }

    func pulse(at t: Double) -> Double {
        guard let hr = heartRateBpm else { return 0 }
        let f = hr / 60
        var phase = 2 * Double.pi * f * t
        if let br = breathingRateBpm {
            let fb = br / 60
            // ∫ 0.03 f sin(2π fb t) dt
            phase += 2 * Double.pi * 0.03 * f * (1 - cos(2 * Double.pi * fb * t)) / (2 * Double.pi * fb)
        }
        var amp = 1.0
        if let br = breathingRateBpm { amp += 0.1 * sin(2 * Double.pi * br / 60 * t) }
        return amp * (sin(phase) + 0.35 * sin(2 * phase + 0.8)) / 1.06
    }

    func light(at t: Double) -> Double {
        var l = 1.0
        for s in illuminationSteps where t >= s.seconds { l *= s.factor }
        if flickerAmplitude != 0 { l *= 1 + flickerAmplitude * sin(2 * Double.pi * flickerHz * t) }
        return l
    }

    /// Renders one frame at time `t` as packed RGB24.
    func renderRGB(t: Double, rng: inout SplitMix) -> [UInt8] {
        let w = width, h = height
        var out = [UInt8](repeating: 0, count: w * h * 3)
        let light = light(at: t)
        let p = pulse(at: t)
        let sig = (0.33 / 0.77, 1.0, 0.53 / 0.77)
        let skinR = skin.r * light * (1 + pulseAmplitude * sig.0 * p)
        let skinG = skin.g * light * (1 + pulseAmplitude * sig.1 * p)
        let skinB = skin.b * light * (1 + pulseAmplitude * sig.2 * p)
        var dy = 0.0
        if let br = breathingRateBpm { dy = breathingMotionPixels * sin(2 * Double.pi * br / 60 * t) }
        let dx = swayPixels * sin(2 * Double.pi * swayHz * t)
        let cx = faceCentre.x * Double(w) + dx
        let cy = faceCentre.y * Double(h) + dy
        let ax = 0.16 * Double(w) * faceScale
        let ay = 0.28 * Double(h) * faceScale
        let detailed = faceStyle == .detailed
        let wall = background
        let sigma = noiseSigma
        out.withUnsafeMutableBufferPointer { buf in
            for y in 0..<h {
                let fy = Double(y) + 0.5
                let ny = (fy - cy) / ay
                for x in 0..<w {
                    let fx = Double(x) + 0.5
                    let nx = (fx - cx) / ax
                    var r: Double, g: Double, b: Double
                    let r2 = nx * nx + ny * ny
                    let inFace = r2 <= 1
                    let hx = nx / 1.12, hy = (ny + 0.08) / 1.12
                    let inHair = !inFace && hx * hx + hy * hy <= 1 && ny < -0.2
                    let inHairline = inFace && ny < -0.78
                    let ex = (abs(nx) - (detailed ? 0.38 : 0.4)) / (detailed ? 0.17 : 0.18)
                    let ey = (ny + (detailed ? 0.22 : 0.15)) / (detailed ? 0.07 : 0.08)
                    let inEye = inFace && ex * ex + ey * ey <= 1
                    // Detailed features, each a darkening factor on the skin or a colour of its own.
                    var shade = 1.0
                    var feature: (Double, Double, Double)?
                    if detailed && inFace && !inHairline && !inEye {
                        shade = 1 - 0.25 * r2 * r2
                        let sx = (abs(nx) - 0.38) / 0.28, sy = (ny + 0.22) / 0.16
                        if sx * sx + sy * sy <= 1 { shade *= 0.8 }
                        if ny > -0.15 && ny < 0.25 && abs(abs(nx) - 0.14) < 0.04 { shade *= 0.85 }
                        let mx = nx / 0.32, my = (ny - 0.52) / 0.06
                        let qx = (abs(nx) - 0.09) / 0.06, qy = (ny - 0.27) / 0.04
                        if abs(ny + 0.42) < 0.05 && abs(abs(nx) - 0.40) < 0.2 {
                            feature = (45, 35, 30)
                        } else if mx * mx + my * my <= 1 {
                            feature = (110, 50, 50)
                        } else if qx * qx + qy * qy <= 1 {
                            feature = (80, 50, 40)
                        }
                    }
                    let inNeck = !inFace && abs(fx - cx) < 0.55 * ax && fy > cy && fy < cy + 1.9 * ay
                    let inShirt = !inFace && !inNeck && fy > cy + 1.45 * ay && abs(fx - cx) < 2.6 * ax
                    if inHair || inHairline {
                        r = 25 * light; g = 22 * light; b = 20 * light
                    } else if inEye {
                        r = 40 * light; g = 40 * light; b = 50 * light
                    } else if let f = feature {
                        r = f.0 * light; g = f.1 * light; b = f.2 * light
                    } else if inFace || inNeck {
                        // Fixed texture attached to the face: a hash of the face-relative cell.
                        let tx = Int((fx - cx + 1000).rounded(.down)) >> 1
                        let ty = Int((fy - cy + 1000).rounded(.down)) >> 1
                        var hsh = UInt32(truncatingIfNeeded: tx &* 73_856_093 ^ ty &* 19_349_663)
                        hsh = (hsh ^ (hsh >> 13)) &* 0x5bd1_e995
                        let tex = 1 + 0.04 * (Double(hsh & 0xff) / 255 - 0.5)
                        let k = tex * (inFace ? shade : 1)
                        r = skinR * k; g = skinG * k; b = skinB * k
                    } else if inShirt {
                        r = 40 * light; g = 60 * light; b = 120 * light
                    } else if let wall {
                        r = wall.r * light; g = wall.g * light; b = wall.b * light
                    } else {
                        r = (80 + 0.08 * fx) * light
                        g = 105 * light
                        b = (150 - 0.05 * fy) * light
                    }
                    let o = (y * w + x) * 3
                    buf[o] = quantise(r + sigma * rng.gaussian())
                    buf[o + 1] = quantise(g + sigma * rng.gaussian())
                    buf[o + 2] = quantise(b + sigma * rng.gaussian())
                }
            }
        }
        return out
    }
}

@inline(__always)
func quantise(_ v: Double) -> UInt8 {
    UInt8(max(0, min(255, v.rounded())))
}

/// Converts packed RGB24 to another layout (BT.601 limited range for the YUV layouts, as webcams send).
public func convertRGB24(_ rgb: [UInt8], width: Int, height: Int, to format: PixelFormat) -> [UInt8] {
    func ycc(_ o: Int) -> (Double, Double, Double) {
        let r = Double(rgb[o]), g = Double(rgb[o + 1]), b = Double(rgb[o + 2])
        return (16 + 0.256788 * r + 0.504129 * g + 0.097906 * b,
                128 - 0.148223 * r - 0.290993 * g + 0.439216 * b,
                128 + 0.439216 * r - 0.367788 * g - 0.071427 * b)
    }
    switch format {
    case .rgb24:
        return rgb
    case .yuyv:
        var out = [UInt8](repeating: 0, count: width * height * 2)
        for y in 0..<height {
            for x in stride(from: 0, to: width, by: 2) {
                let a = ycc((y * width + x) * 3), c = ycc((y * width + x + 1) * 3)
                let o = (y * width + x) * 2
                out[o] = quantise(a.0)
                out[o + 1] = quantise((a.1 + c.1) / 2)
                out[o + 2] = quantise(c.0)
                out[o + 3] = quantise((a.2 + c.2) / 2)
            }
        }
        return out
    case .i420, .nv12:
        let cw = width / 2, ch = height / 2
        var out = [UInt8](repeating: 0, count: width * height + 2 * cw * ch)
        for y in 0..<height {
            for x in 0..<width { out[y * width + x] = quantise(ycc((y * width + x) * 3).0) }
        }
        for cy in 0..<ch {
            for cx in 0..<cw {
                var u = 0.0, v = 0.0
                for k in 0..<4 {
                    let p = ycc(((2 * cy + k / 2) * width + 2 * cx + k % 2) * 3)
                    u += p.1 / 4
                    v += p.2 / 4
                }
                if format == .i420 {
                    out[width * height + cy * cw + cx] = quantise(u)
                    out[width * height + cw * ch + cy * cw + cx] = quantise(v)
                } else {
                    out[width * height + cy * width + 2 * cx] = quantise(u)
                    out[width * height + cy * width + 2 * cx + 1] = quantise(v)
                }
            }
        }
        return out
    }
}

/// The frames of a ``SyntheticFaceVideo``, rendered lazily.
public struct SyntheticFrames: Sequence, IteratorProtocol, Sendable {
    let video: SyntheticFaceVideo
    let format: PixelFormat
    var index = 0
    var rng: SplitMix

    init(video: SyntheticFaceVideo, format: PixelFormat) {
        self.video = video
        self.format = format
        self.rng = SplitMix(seed: video.seed)
    }

    public mutating func next() -> VideoFrame? {
        while index < video.frameSlots {
            let i = index
            index += 1
            var t = Double(i) / video.framesPerSecond
            if video.timestampJitterSeconds > 0 { t += video.timestampJitterSeconds * (2 * rng.uniform() - 1) }
            if video.dropProbability > 0, rng.uniform() < video.dropProbability { continue }
            let tc = Swift.max(0, t)
            let rgb = video.renderRGB(t: tc, rng: &rng)
            let bytes = convertRGB24(rgb, width: video.width, height: video.height, to: format)
            return try? VideoFrame(width: video.width, height: video.height, format: format, bytes: bytes,
                                   timestampSeconds: tc)
        }
        return nil
    }
}

/// SplitMix64 with a Gaussian helper: deterministic noise for reproducible tests.
public struct SplitMix: Sendable {
    var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    public mutating func uniform() -> Double { Double(next() >> 11) * (1.0 / 9_007_199_254_740_992.0) }

    /// Approximately standard normal (Irwin-Hall of four uniforms, unit variance).
    public mutating func gaussian() -> Double {
        let v = next()
        var s = 0.0
        for k in 0..<4 { s += Double((v >> (16 * UInt64(k))) & 0xffff) / 65536 }
        return (s - 2) * 1.7320508075688772
    }
}
