#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Settings of the streaming estimator. The defaults follow docs/rppg.md.
public struct RPPGConfiguration: Sendable, Equatable {
    /// Pulse search band in Hz. Default 0.7-3.0 (42-180 bpm); the upper end may be raised to 4.0 (240 bpm).
    public var pulseBandHz: ClosedRange<Double> = 0.7...3.0
    /// Length of the pulse analysis window, seconds.
    public var windowSeconds: Double = 10
    /// Shortest window that may produce a pulse reading (so the first reading comes within this plus one hop).
    public var minimumWindowSeconds: Double = 5
    /// Time between estimates, seconds.
    public var hopSeconds: Double = 1
    /// Rate of the uniform grid the frame means are resampled to, Hz.
    public var sampleRateHz: Double = 30
    /// Length of the POS and CHROM sub-windows, seconds.
    public var projectionWindowSeconds: Double = 1.6
    /// Peak tracking: after a confident reading, the next windows choose their pulse peak from the spectrum
    /// weighted by a Gaussian of this width (Hz) around it, with a floor of 0.3, for up to 5 s without a confident
    /// reading (docs/rppg.md). `nil` (the default) turns tracking off: it helps on a steady face box (0.25 Hz on the
    /// dev set's fixed box) but not yet through the whole video path with the skin-blob ROI; re-judge with
    /// `hr-gateway-bench rppg-eval --curve` when the ROI stage changes.
    public var pulseTrackingSigmaHz: Double? = nil
    /// The colour check, off by default: a pulse whose colour direction (``RPPGEstimate/colourAngleDegrees``) is
    /// within this many degrees of blood volume's keeps its confidence, one twice as far none (linear between). It
    /// withholds most readings that come from something other than blood (a photo, a screen, heavy compression), and
    /// some real ones: measured, 30 (docs/rppg.md, "The pulse's colour direction"). `nil`: not checked.
    public var colourAngleToleranceDegrees: Double?
    /// The tolerance `--colour-check` sets (measured on ubfc-dev and degraded copies of it: docs/rppg.md).
    public static let colourCheckToleranceDegrees = 30.0
    /// Pulse readings below this confidence are withheld (`hrBpm == nil`). Calibrated on real face video,
    /// leave-one-subject-out (docs/rppg.md, "Confidence calibration").
    public var confidenceThreshold: Double = 0.4
    /// Breathing search band in Hz. Default 0.08-0.7 (4.8-42 breaths/min).
    public var breathingBandHz: ClosedRange<Double> = 0.08...0.7
    /// Length of the breathing analysis window, seconds.
    public var breathingWindowSeconds: Double = 30
    /// Shortest window that may produce a breathing reading.
    public var minimumBreathingWindowSeconds: Double = 20
    /// Breathing readings below this confidence are withheld.
    public var breathingConfidenceThreshold: Double = 0.5
    /// A pause between frames longer than this restarts the windows, seconds.
    public var maximumGapSeconds: Double = 1
    /// Skin and face-box settings used when frames are fed.
    public var roi = ROIConfiguration()

    public init() {}

    /// Checks the settings; the error names the offending field.
    public func validate() throws(RPPGConfigurationError) {
        func fail(_ s: String) -> RPPGConfigurationError { RPPGConfigurationError(description: s) }
        guard pulseBandHz.lowerBound >= 0.5, pulseBandHz.upperBound <= 4.0, pulseBandHz.upperBound > pulseBandHz.lowerBound + 0.2 else {
            throw fail("pulseBandHz must lie within 0.5-4.0 Hz and span at least 0.2 Hz, got \(pulseBandHz)")
        }
        guard sampleRateHz >= 2.2 * pulseBandHz.upperBound, sampleRateHz <= 240 else {
            throw fail("sampleRateHz \(sampleRateHz) must be at least 2.2x the top of the pulse band and at most 240")
        }
        guard windowSeconds >= 4, windowSeconds <= 60, minimumWindowSeconds >= 3, minimumWindowSeconds <= windowSeconds else {
            throw fail("windowSeconds must be 4-60 s and minimumWindowSeconds 3 s ... windowSeconds")
        }
        guard hopSeconds > 0, hopSeconds <= windowSeconds else { throw fail("hopSeconds must be in (0, windowSeconds]") }
        guard breathingBandHz.lowerBound >= 0.03, breathingBandHz.upperBound <= 1.5,
              breathingBandHz.upperBound > breathingBandHz.lowerBound else {
            throw fail("breathingBandHz must lie within 0.03-1.5 Hz, got \(breathingBandHz)")
        }
        guard breathingWindowSeconds >= 10, breathingWindowSeconds <= 120,
              minimumBreathingWindowSeconds >= 5, minimumBreathingWindowSeconds <= breathingWindowSeconds else {
            throw fail("breathingWindowSeconds must be 10-120 s and minimumBreathingWindowSeconds 5 s ... breathingWindowSeconds")
        }
        guard (0...1).contains(confidenceThreshold), (0...1).contains(breathingConfidenceThreshold) else {
            throw fail("confidence thresholds must be within 0-1")
        }
        if let sigma = pulseTrackingSigmaHz, !(sigma > 0 && sigma <= 2) {
            throw fail("pulseTrackingSigmaHz must be in (0, 2] Hz or nil, got \(sigma)")
        }
        guard projectionWindowSeconds >= 0.5, projectionWindowSeconds <= 4, maximumGapSeconds > 0 else {
            throw fail("projectionWindowSeconds must be 0.5-4 s and maximumGapSeconds positive")
        }
    }
}

/// Settings the estimator cannot run with.
public struct RPPGConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
}

/// One frame's worth of input when the ROI stage runs elsewhere (or for a recorded RGB trace).
public struct RPPGSample: Sendable, Equatable {
    /// Capture time, seconds, on a monotonic clock.
    public var tSeconds: Double
    /// Mean skin colour, 0-255; `nil` marks a frame without a usable face. Such frames are bridged like dropped
    /// frames; when none is usable for more than `maximumGapSeconds`, the windows restart.
    public var rgb: RGBMean?
    /// Vertical head position in pixels (see ``ROIMeasurement/verticalPosition``), the breathing motion source.
    public var verticalPosition: Double?
    /// Mean colour of the scene beside the face (``ROIMeasurement/background``), when measured.
    public var background: RGBMean?
    /// The face's mean over a skin mask held with the face box (``ROIMeasurement/frozen``), when measured: the
    /// colour direction of the pulse is judged on it.
    public var frozen: RGBMean?

    public init(
        tSeconds: Double, rgb: RGBMean?, verticalPosition: Double? = nil, background: RGBMean? = nil,
        frozen: RGBMean? = nil
    ) {
        self.tSeconds = tSeconds
        self.rgb = rgb
        self.verticalPosition = verticalPosition
        self.background = background
        self.frozen = frozen
    }
}

/// What the estimator says once per hop.
public struct RPPGEstimate: Sendable, Equatable {
    /// Time of the newest sample in the window (end of window), on the input clock.
    public var tSeconds: Double
    /// Length of the pulse window actually analysed (shorter while warming up or after a restart), seconds.
    public var windowSeconds: Double
    /// Pulse rate from POS, bpm; `nil` unless `confidence >= confidenceThreshold`.
    public var hrBpm: Double?
    /// 0-1, see ``RPPGEstimator`` for the rule.
    public var confidence: Double
    /// de Haan SNR of the POS pulse signal, dB (-30 when there is no spectrum yet).
    public var snrDb: Double
    /// SNR of the POS peak alone (no harmonic) against the rest of 0.5-4 Hz, dB: half of the confidence's evidence.
    public var fundamentalSnrDb: Double = -30
    /// The same SNR of the CHROM signal at the POS peak's frequency, dB (`nil` without a CHROM spectrum): the other
    /// half of the confidence's evidence.
    public var chromSnrAtPeakDb: Double?
    /// The background's power at the pulse peak relative to its own strongest component, 0-1, when the scene beside
    /// the face was measured over the whole window (see ``RPPGEstimator``).
    public var backgroundShare: Double?
    /// The angle, degrees, between the pulse's colour direction (on the held skin mask, at the peak) and blood
    /// volume's, in the colour plane; `nil` when the held mask's mean was not measured over the whole window.
    public var colourAngleDegrees: Double?
    /// Whether the colour check withheld a pulse the rest of the confidence would have given.
    public var withheldForColour = false
    /// Breathing rate, breaths per minute; `nil` unless `breathingConfidence >= breathingConfidenceThreshold`.
    public var breathingRateBpm: Double?
    /// 0-1.
    public var breathingConfidence: Double
    /// The POS peak whatever the confidence (diagnostics), bpm.
    public var candidateHrBpm: Double?
    /// The CHROM peak, bpm.
    public var chromHrBpm: Double?
    /// POS peak ratio, 0-1.
    public var peakRatio: Double
    /// The breathing peak whatever the confidence, breaths per minute.
    public var candidateBreathingRateBpm: Double?

    /// The no-reading estimate used while warming up.
    static func empty(t: Double, window: Double) -> RPPGEstimate {
        RPPGEstimate(tSeconds: t, windowSeconds: window, hrBpm: nil, confidence: 0, snrDb: -30, breathingRateBpm: nil,
                     breathingConfidence: 0, candidateHrBpm: nil, chromHrBpm: nil, peakRatio: 0,
                     candidateBreathingRateBpm: nil)
    }
}

/// Streaming rPPG: feed frames (or per-frame mean RGB), get a pulse and breathing estimate once per hop.
///
/// Pipeline: ROI means (``FaceROITracker``) → linear resampling onto a uniform grid from the timestamps (dropped
/// frames and frames without a usable face are bridged; more than `maximumGapSeconds` without a usable frame
/// restarts the windows) → over the last `windowSeconds`, each channel over its mean band-passed to the pulse band
/// (2nd-order Butterworth, forwards and backwards) → POS and CHROM, each band-passed again → zoomed periodogram
/// peak in the pulse band with parabolic refinement.
///
/// Pulse confidence (0-1) = clamp((E + 3.5) / 5) · G, calibrated on real compressed face video (docs/rppg.md,
/// "Confidence calibration"), where
/// - E = the mean of two fundamental SNRs in dB at the POS peak f₀ (power within ±0.1 Hz of f₀ against all other
///   power in 0.5-4 Hz, no credit for a harmonic): the POS spectrum's and the CHROM spectrum's (a pulse is in both
///   projections; noise that one of them lets through counts half), plus 3.5 dB when the peak continues the last
///   reading (within 5 bpm of a reading at most 3 s old);
/// - G = 1 when the POS and CHROM peaks agree within 3 bpm or the peak continues the last reading, else 0.5;
/// - a peak the background shares is distrusted: when the scene beside the face (``ROIMeasurement/background``)
///   was measured over the whole window, the confidence is multiplied by clamp(2·(1 − B)), B being the
///   background green's power at the peak over its strongest component in the band (a flickering lamp or a
///   flashing screen lights the wall too; a pulse does not), or 0 when that power is under a tenth of the face
///   green's at the peak (a quiet wall);
/// - windows shorter than 10 s (warm-up) lose the dB by which flat noise rises around a peak in them
///   (``shortWindowPenaltyDb(_:)``: 1.7 dB at 7 s, 3.3 dB at 5 s).
/// E is measured on the band-passed signals, so little power outside the pulse band counts as noise. With the
/// default threshold 0.4 a new reading needs E ≥ -1.5 dB and POS/CHROM agreement (or E ≥ +0.5 dB without it); a
/// reading that continues the last one needs E ≥ -5 dB. It is 0 while the window is shorter than
/// `minimumWindowSeconds`, when a channel mean is below 1 (of 255), and when the spectral maximum sits on the edge
/// of the band. `hrBpm` is reported only when confidence ≥ `confidenceThreshold`.
///
/// Breathing confidence = 0.8·clamp((peakRatio − 0.2) / 0.5) of the better of two sources (a source whose maximum
/// sits on the band edge is dropped) — the vertical head
/// position and the mean-normalised green trace (respiratory baseline modulation) — plus 0.2 when both sources
/// exist and agree within 2 breaths/min. 0 while the window is shorter than `minimumBreathingWindowSeconds`.
public struct RPPGEstimator: Sendable {
    public let configuration: RPPGConfiguration
    /// The ROI stage used by ``process(_:)``.
    public private(set) var tracker: FaceROITracker
    /// The last frame's ROI measurement (when frames are fed).
    public private(set) var lastMeasurement: ROIMeasurement?

    private var grid = UniformGrid()
    private var firstTime: Double?
    private var lastSeen: Double?
    private var nextTick = 0.0
    /// The last confident pulse reading (Hz) and its time, for peak tracking.
    private var tracked: (hz: Double, t: Double)?
    /// The pulse band-pass: applied to each mean-normalised channel before POS and CHROM, and to their outputs
    /// before the spectra (docs/rppg.md, "Band-limiting").
    private let pulseFilter: Butterworth

    /// `faceDetector` finds the face for ``process(_:)`` (see ``FaceROITracker``); `nil` uses the skin-blob search.
    public init(
        configuration: RPPGConfiguration = RPPGConfiguration(), faceDetector: (any FaceDetector)? = nil
    ) throws(RPPGConfigurationError) {
        try configuration.validate()
        self.configuration = configuration
        self.tracker = FaceROITracker(configuration: configuration.roi, detector: faceDetector)
        self.pulseFilter = Butterworth.bandPass(order2Low: configuration.pulseBandHz.lowerBound,
                                                high: configuration.pulseBandHz.upperBound,
                                                sampleRate: configuration.sampleRateHz)
    }

    /// Runs the ROI stage on a frame and feeds the result. Returns an estimate when a hop boundary was crossed.
    public mutating func process(_ frame: VideoFrame) -> RPPGEstimate? {
        let m = tracker.measure(frame)
        lastMeasurement = m
        return append(m.sample)
    }

    /// Same as ``process(_:)`` for a buffer the caller owns (a V4L2 mmap buffer), without copying it.
    public mutating func process(
        bytes: UnsafeRawBufferPointer, layout: FrameLayout, timestampSeconds: Double
    ) throws(VideoFrameError) -> RPPGEstimate? {
        let m = try tracker.measure(bytes: bytes, layout: layout, timestampSeconds: timestampSeconds)
        lastMeasurement = m
        return append(m.sample)
    }

    /// Feeds one per-frame sample. Samples must come in time order; a sample not later than the previous one is
    /// ignored. Returns an estimate when the sample crosses a hop boundary (at most one per call).
    public mutating func append(_ sample: RPPGSample) -> RPPGEstimate? {
        let t = sample.tSeconds
        guard t.isFinite else { return nil }
        if let last = lastSeen, t <= last { return nil }
        lastSeen = t
        if firstTime == nil {
            firstTime = t
            nextTick = t + configuration.hopSeconds
        }
        // Frames without a usable face are bridged like dropped frames; a gap longer than maximumGapSeconds
        // since the last usable frame restarts the windows.
        if let lastValid = grid.lastTime, t - lastValid > configuration.maximumGapSeconds { grid.reset() }
        if let rgb = sample.rgb, rgb.r.isFinite, rgb.g.isFinite, rgb.b.isFinite {
            let bg = sample.background.flatMap { $0.g.isFinite ? $0.g : nil }
            let frozen = sample.frozen.flatMap { $0.r.isFinite && $0.g.isFinite && $0.b.isFinite ? $0 : nil }
            grid.add(t: t, rgb: rgb, position: sample.verticalPosition.flatMap { $0.isFinite ? $0 : nil },
                     background: bg, frozen: frozen, rate: configuration.sampleRateHz)
            grid.trim(keep: Int((max(configuration.windowSeconds, configuration.breathingWindowSeconds) + 2) * configuration.sampleRateHz))
        }
        guard t >= nextTick - 1e-9, let first = firstTime else { return nil }
        let hop = configuration.hopSeconds
        nextTick = first + hop * (((t - first) / hop + 1e-9).rounded(.down) + 1)
        return estimate(at: t)
    }

    private mutating func estimate(at t: Double) -> RPPGEstimate {
        let cfg = configuration
        let fs = cfg.sampleRateHz
        let available = grid.r.count
        let runSeconds = available > 1 ? Double(available - 1) / fs : 0
        var result = RPPGEstimate.empty(t: t, window: runSeconds)
        guard runSeconds + 1e-6 >= min(cfg.minimumWindowSeconds, cfg.minimumBreathingWindowSeconds) else { return result }

        if runSeconds + 1e-6 >= cfg.minimumWindowSeconds {
            let n = min(available, Int((cfg.windowSeconds * fs).rounded()) + 1)
            let r = Array(grid.r.suffix(n)), g = Array(grid.g.suffix(n)), b = Array(grid.b.suffix(n))
            result.windowSeconds = Double(n - 1) / fs
            if Self.mean(r) >= 1, Self.mean(g) >= 1, Self.mean(b) >= 1 {
                let l = Int((cfg.projectionWindowSeconds * fs).rounded(.up))
                // Band-limited detrending: each channel, normalised by its window mean, is band-passed to the
                // pulse band before the projections, and their outputs once more (docs/rppg.md, "Band-limiting").
                let (rf, gf, bf) = (bandLimited(r), bandLimited(g), bandLimited(b))
                let pos = pulseFilter.filtfilt(PulseProjection.pos(r: rf, g: gf, b: bf, windowLength: l))
                let chrom = pulseFilter.filtfilt(PulseProjection.chrom(r: rf, g: gf, b: bf, windowLength: l))
                var prior: RatePrior?
                if let sigma = cfg.pulseTrackingSigmaHz, let tracked, t - tracked.t <= 5 {
                    prior = RatePrior(centerHz: tracked.hz, sigmaHz: sigma, floor: 0.3)
                }
                let sp = RateSpectrum.pulse(pos, sampleRate: fs, bandHz: cfg.pulseBandHz, prior: prior)
                let (sc, chromSnrAtPeak) = RateSpectrum.pulse(chrom, sampleRate: fs, bandHz: cfg.pulseBandHz,
                                                              snrAtHz: sp?.frequencyHz)
                if let sp {
                    result.candidateHrBpm = sp.perMinute
                    result.chromHrBpm = sc?.perMinute
                    result.chromSnrAtPeakDb = chromSnrAtPeak
                    result.snrDb = sp.snrDb
                    result.peakRatio = sp.peakRatio
                    result.fundamentalSnrDb = sp.fundamentalSnrDb
                    let bgWindow = Array(grid.background.suffix(n))
                    if grid.backgroundMissing.suffix(n).allSatisfy({ !$0 }) {
                        result.backgroundShare = Self.backgroundShare(bgWindow, face: g, atHz: sp.frequencyHz,
                                                                      sampleRate: fs, band: cfg.pulseBandHz)
                    }
                    if grid.frozenMissing.suffix(n).allSatisfy({ !$0 }) {
                        result.colourAngleDegrees = colourAngle(
                            r: Array(grid.fr.suffix(n)), g: Array(grid.fg.suffix(n)), b: Array(grid.fb.suffix(n)),
                            atHz: sp.frequencyHz, sampleRate: fs)
                    }
                    var colourFactor = 1.0
                    if let tolerance = cfg.colourAngleToleranceDegrees, let angle = result.colourAngleDegrees {
                        colourFactor = clamp01((2 * tolerance - abs(angle)) / tolerance)
                    }
                    let unchecked = Self.pulseConfidence(
                        pos: sp, chromBpm: sc?.perMinute, chromSnrAtPeakDb: chromSnrAtPeak,
                        lastReadingBpm: tracked.flatMap { t - $0.t <= Self.continuitySeconds + 1e-9 ? 60 * $0.hz : nil },
                        windowSeconds: result.windowSeconds) * clamp01(2 * (1 - (result.backgroundShare ?? 0)))
                    result.confidence = unchecked * colourFactor
                    result.withheldForColour = unchecked >= cfg.confidenceThreshold && result.confidence < cfg.confidenceThreshold
                    if result.confidence >= cfg.confidenceThreshold {
                        result.hrBpm = sp.perMinute
                        tracked = (sp.frequencyHz, t)
                    }
                }
            }
        }

        if runSeconds + 1e-6 >= cfg.minimumBreathingWindowSeconds {
            let n = min(available, Int((cfg.breathingWindowSeconds * fs).rounded()) + 1)
            var sources: [SpectralRate] = []
            let positions = grid.position.suffix(n)
            if grid.positionMissing.suffix(n).allSatisfy({ !$0 }),
               let s = RateSpectrum.breathing(Array(positions), sampleRate: fs, bandHz: cfg.breathingBandHz), !s.atBandEdge {
                sources.append(s)
            }
            let g = Array(grid.g.suffix(n))
            let gm = Self.mean(g)
            if gm >= 1, let s = RateSpectrum.breathing(g.map { $0 / gm }, sampleRate: fs, bandHz: cfg.breathingBandHz),
               !s.atBandEdge {
                sources.append(s)
            }
            if let best = sources.max(by: { $0.peakRatio < $1.peakRatio }) {
                var c = 0.8 * clamp01((best.peakRatio - 0.2) / 0.5)
                if sources.count == 2, abs(sources[0].perMinute - sources[1].perMinute) <= 2 { c += 0.2 }
                result.breathingConfidence = clamp01(c)
                result.candidateBreathingRateBpm = best.perMinute
                if result.breathingConfidence >= cfg.breathingConfidenceThreshold { result.breathingRateBpm = best.perMinute }
            }
        }
        return result
    }

    /// A peak within this many bpm of the last reading continues it.
    static let continuityBpm = 5.0
    /// ... when that reading is at most this old, seconds.
    static let continuitySeconds = 3.0
    /// POS and CHROM peaks this close (bpm) agree.
    static let agreementBpm = 3.0
    /// Credit to the evidence of a peak that continues the last reading, dB.
    static let continuityCreditDb = 3.5

    /// The evidence E (dB) before the continuity credit and the short-window penalty: the mean of the POS peak's
    /// fundamental SNR and the CHROM signal's SNR at that frequency (-30 dB, no support, without a CHROM spectrum).
    static func projectionEvidenceDb(posSnrDb: Double, chromSnrAtPeakDb: Double?) -> Double {
        0.5 * (posSnrDb + (chromSnrAtPeakDb ?? -30))
    }

    /// The pulse confidence rule (see the type's documentation and docs/rppg.md, "Confidence calibration").
    static func pulseConfidence(
        pos sp: SpectralRate, chromBpm: Double?, chromSnrAtPeakDb: Double?, lastReadingBpm: Double?,
        windowSeconds: Double
    ) -> Double {
        guard !sp.atBandEdge else { return 0 }
        let continues = lastReadingBpm.map { abs(sp.perMinute - $0) <= continuityBpm } ?? false
        let agrees = chromBpm.map { abs(sp.perMinute - $0) <= agreementBpm } ?? false
        let evidence = projectionEvidenceDb(posSnrDb: sp.fundamentalSnrDb, chromSnrAtPeakDb: chromSnrAtPeakDb)
            + (continues ? continuityCreditDb : 0) - shortWindowPenaltyDb(windowSeconds)
        return clamp01((evidence + 3.5) / 5) * (agrees || continues ? 1 : 0.5)
    }

    /// Power of the mean-normalised background green at `hz` (the largest grid point within ±0.02 Hz) over its
    /// largest power in `band`, 0-1; 0 when the background's power there is under a tenth of the face green's (a
    /// quiet wall with sensor noise cannot explain the face's peak); `nil` when the background is flat or missing.
    static func backgroundShare(
        _ bg: [Double], face: [Double], atHz hz: Double, sampleRate: Double, band: ClosedRange<Double>
    ) -> Double? {
        func normalisedSpectrum(_ v: [Double]) -> ZoomSpectrum? {
            let m = mean(v)
            guard v.count >= 4, m >= 1 else { return nil }
            return ZoomSpectrum(signal: v.map { $0 / m }, sampleRate: sampleRate, from: band.lowerBound,
                                to: band.upperBound, step: RateSpectrum.pulseStep)
        }
        guard let b = normalisedSpectrum(bg), let top = b.power.max(), top > 0 else { return nil }
        let k = b.index(of: hz)
        let lo = max(0, k - 2), hi = min(b.power.count - 1, k + 2)
        guard lo <= hi else { return nil }
        let atPeak = b.power[lo...hi].max()!
        if let f = normalisedSpectrum(face), atPeak < 0.1 * f.power[lo...hi].max()! { return 0 }
        return min(1, atPeak / top)
    }

    /// How much more of the 0.5-4 Hz band flat noise puts around a peak in a window shorter than 10 s (the peak
    /// region is ±max(0.1 Hz, 1/window) wide), in dB: a short warm-up window needs that much more SNR, so that
    /// noise is not read as a pulse more often than at the calibrated 10 s.
    static func shortWindowPenaltyDb(_ seconds: Double) -> Double {
        func share(_ d: Double) -> Double {
            let w = max(0.1, 1 / max(d, 1))
            return 2 * w / max(0.1, 3.5 - 2 * w)
        }
        return max(0, 10 * log10(share(seconds) / share(10)))
    }

    /// Blood volume's colour direction in R, G, B (de Haan & van Leest's Pbv for skin under white light).
    static let bloodVolumeDirection = (r: 0.33, g: 0.77, b: 0.53)

    /// The signed angle, degrees, between the principal colour direction of `r`, `g`, `b` (each over its mean,
    /// band-passed) within ±0.1 Hz of `hz` and blood volume's, both in the plane normal to [1, 1, 1] (brightness
    /// left out: Pbv is only 18° from it); the direction's sign is set by brightness. `nil` for a flat window.
    func colourAngle(r: [Double], g: [Double], b: [Double], atHz hz: Double, sampleRate fs: Double) -> Double? {
        let channels = [r, g, b].map { v -> [Double] in
            let m = Self.mean(v)
            return m >= 1 ? pulseFilter.filtfilt(v.map { $0 / m - 1 }) : []
        }
        guard channels.allSatisfy({ $0.count >= 8 }) else { return nil }
        // The cross-spectral matrix (its real part) over the peak's neighbourhood, 0.01 Hz apart.
        var s = [Double](repeating: 0, count: 9)
        var f = hz - 0.1
        while f <= hz + 0.1 + 1e-9 {
            var re = [0.0, 0.0, 0.0], im = [0.0, 0.0, 0.0]
            let w = 2 * Double.pi * f / fs
            for k in channels[0].indices {
                // One cosine and sine per sample, for the three channels.
                let (cs, sn) = (cos(w * Double(k)), sin(w * Double(k)))
                for c in 0..<3 {
                    re[c] += channels[c][k] * cs
                    im[c] -= channels[c][k] * sn
                }
            }
            for i in 0..<3 { for j in 0..<3 { s[3 * i + j] += re[i] * re[j] + im[i] * im[j] } }
            f += 0.01
        }
        // Its principal eigenvector (power iteration; the matrix is symmetric and positive semi-definite).
        var u = [0.33, 0.77, 0.53]
        for _ in 0..<60 {
            let v = (0..<3).map { i in s[3 * i] * u[0] + s[3 * i + 1] * u[1] + s[3 * i + 2] * u[2] }
            let norm = (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).squareRoot()
            guard norm > 0, norm.isFinite else { return nil }
            u = v.map { $0 / norm }
        }
        if u[0] + u[1] + u[2] < 0 { u = u.map { -$0 } }
        func inPlane(_ v: [Double]) -> [Double] {
            let m = (v[0] + v[1] + v[2]) / 3
            return v.map { $0 - m }
        }
        let a = inPlane(u)
        let p = inPlane([Self.bloodVolumeDirection.r, Self.bloodVolumeDirection.g, Self.bloodVolumeDirection.b])
        let dot = a[0] * p[0] + a[1] * p[1] + a[2] * p[2]
        // (p × a) · [1, 1, 1]: the sign of the turn from Pbv to the pulse's direction.
        let cross = (p[1] * a[2] - p[2] * a[1]) + (p[2] * a[0] - p[0] * a[2]) + (p[0] * a[1] - p[1] * a[0])
        guard abs(dot) + abs(cross) > 0 else { return nil }
        return atan2(cross / 3.0.squareRoot(), dot) * 180 / Double.pi
    }

    /// `v` over its mean, band-passed to the pulse band, plus 1 (a channel the projections can normalise again).
    private func bandLimited(_ v: [Double]) -> [Double] {
        let m = Self.mean(v)
        return pulseFilter.filtfilt(v.map { $0 / m }).map { $0 + 1 }
    }

    private static func mean(_ v: [Double]) -> Double {
        guard !v.isEmpty else { return 0 }
        var s = 0.0
        for e in v { s += e }
        return s / Double(v.count)
    }
}

@inline(__always)
func clamp01(_ v: Double) -> Double { max(0, min(1, v)) }

/// Per-frame samples linearly interpolated onto `t0 + k / rate`.
struct UniformGrid {
    var r: [Double] = []
    var g: [Double] = []
    var b: [Double] = []
    var position: [Double] = []
    var positionMissing: [Bool] = []
    var background: [Double] = []
    var backgroundMissing: [Bool] = []
    var fr: [Double] = []
    var fg: [Double] = []
    var fb: [Double] = []
    var frozenMissing: [Bool] = []
    var lastTime: Double?
    private var start = 0.0
    private var produced = 0
    private var last: (t: Double, rgb: RGBMean, pos: Double?, bg: Double?, frozen: RGBMean?)?

    mutating func reset() {
        r.removeAll(keepingCapacity: true)
        g.removeAll(keepingCapacity: true)
        b.removeAll(keepingCapacity: true)
        position.removeAll(keepingCapacity: true)
        positionMissing.removeAll(keepingCapacity: true)
        background.removeAll(keepingCapacity: true)
        backgroundMissing.removeAll(keepingCapacity: true)
        fr.removeAll(keepingCapacity: true)
        fg.removeAll(keepingCapacity: true)
        fb.removeAll(keepingCapacity: true)
        frozenMissing.removeAll(keepingCapacity: true)
        produced = 0
        last = nil
        lastTime = nil
    }

    mutating func add(
        t: Double, rgb: RGBMean, position pos: Double?, background bg: Double? = nil, frozen: RGBMean? = nil, rate: Double
    ) {
        defer {
            last = (t, rgb, pos, bg, frozen)
            lastTime = t
        }
        guard let prev = last else {
            start = t
            produced = 1
            push(rgb, pos, bg, frozen)
            return
        }
        let span = t - prev.t
        while true {
            let gt = start + Double(produced) / rate
            if gt > t + 1e-9 { break }
            let w = max(0, min(1, (gt - prev.t) / span))
            let c = RGBMean(r: prev.rgb.r + w * (rgb.r - prev.rgb.r), g: prev.rgb.g + w * (rgb.g - prev.rgb.g),
                            b: prev.rgb.b + w * (rgb.b - prev.rgb.b))
            var p: Double?
            switch (prev.pos, pos) {
            case let (a?, b?): p = a + w * (b - a)
            case let (a?, nil): p = a
            case let (nil, b?): p = b
            case (nil, nil): p = nil
            }
            var q: Double?
            if let a = prev.bg, let b = bg { q = a + w * (b - a) }
            var z: RGBMean?
            if let a = prev.frozen, let b = frozen {
                z = RGBMean(r: a.r + w * (b.r - a.r), g: a.g + w * (b.g - a.g), b: a.b + w * (b.b - a.b))
            }
            push(c, p, q, z)
            produced += 1
        }
    }

    private mutating func push(_ c: RGBMean, _ p: Double?, _ q: Double?, _ z: RGBMean?) {
        fr.append(z?.r ?? fr.last ?? 0)
        fg.append(z?.g ?? fg.last ?? 0)
        fb.append(z?.b ?? fb.last ?? 0)
        frozenMissing.append(z == nil)
        r.append(c.r)
        g.append(c.g)
        b.append(c.b)
        position.append(p ?? position.last ?? 0)
        positionMissing.append(p == nil)
        background.append(q ?? background.last ?? 0)
        backgroundMissing.append(q == nil)
    }

    /// Drops old samples once the buffers hold twice `keep`.
    mutating func trim(keep: Int) {
        guard r.count > 2 * keep else { return }
        let drop = r.count - keep
        r.removeFirst(drop)
        g.removeFirst(drop)
        b.removeFirst(drop)
        position.removeFirst(drop)
        positionMissing.removeFirst(drop)
        background.removeFirst(drop)
        backgroundMissing.removeFirst(drop)
        fr.removeFirst(drop)
        fg.removeFirst(drop)
        fb.removeFirst(drop)
        frozenMissing.removeFirst(drop)
    }
}
