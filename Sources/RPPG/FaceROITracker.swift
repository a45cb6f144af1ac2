/// Mean colour of a region on the 0-255 scale.
public struct RGBMean: Sendable, Equatable {
    public var r: Double
    public var g: Double
    public var b: Double

    public init(r: Double, g: Double, b: Double) {
        self.r = r
        self.g = g
        self.b = b
    }
}

/// A rectangle in pixel coordinates (origin top-left).
public struct PixelBox: Sendable, Equatable {
    public var x: Double
    public var y: Double
    public var width: Double
    public var height: Double

    public init(x: Double, y: Double, width: Double, height: Double) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }

    func intersectionOverUnion(_ other: PixelBox) -> Double {
        let ix = max(0, min(x + width, other.x + other.width) - max(x, other.x))
        let iy = max(0, min(y + height, other.y + other.height) - max(y, other.y))
        let inter = ix * iy
        let union = width * height + other.width * other.height - inter
        return union > 0 ? inter / union : 0
    }
}

/// Why a frame's measurement should not be used for pulse estimation.
public enum ROIStatus: String, Sendable, Equatable {
    case ok
    /// No face: the detector found none (for longer than `faceLostSeconds`), or, without a detector, no skin region
    /// large enough to be a face.
    case noFace
    /// A face box exists but too few of its forehead/cheek samples passed the skin test.
    case tooFewSkinPixels
    /// Mean luma of the skin samples below the configured minimum.
    case tooDark
    /// Too many clipped samples in the face box.
    case tooBright
    /// The face box moved by more than `movingFraction` of its width between two detections. Advisory: the frame's
    /// means are still used (``ROIMeasurement/sample``), but a user who keeps moving should be asked to hold still.
    case moving
}

/// Skin segmentation and ROI settings. Chroma limits are Chai & Ngan (1999) on 0-255 Cb/Cr.
public struct ROIConfiguration: Sendable, Equatable {
    public var cbRange: ClosedRange<Int> = 77...127
    public var crRange: ClosedRange<Int> = 133...173
    /// Luma outside this range is treated as too dark or clipped and never counted as skin.
    public var lumaRange: ClosedRange<Int> = 30...235
    /// Exponential smoothing factor of the face box per frame (1 = no smoothing).
    public var boxSmoothing: Double = 0.2
    /// Smallest face width as a fraction of the frame width.
    public var minimumFaceWidthFraction: Double = 0.08
    /// Fewest skin samples (after subsampling) in the measured region for a usable frame.
    public var minimumSkinSamples: Int = 40
    /// Skin samples with luma below this make the frame `tooDark`.
    public var minimumMeanLuma: Double = 40

    // MARK: With a face detector

    /// Time between detector calls, seconds (0.2: 5 Hz). The box is held in between.
    public var detectionIntervalSeconds: Double = 0.2
    /// Width the frame is shrunk to (by an integer factor, grey, box-averaged) before detection, pixels. With a
    /// 24 px cascade window and 640 px frames (factor 4) the smallest face found is 96 px wide.
    public var detectionWidth: Int = 160
    /// The held box moves only when the averaged detection is further than this fraction of the box width from it
    /// (centre) or its size differs by more than twice this fraction, so detector jitter never moves the ROI.
    public var stillnessFraction: Double = 0.05
    /// Exponential smoothing factor of the detections per detector call (the box follows this average).
    public var detectionSmoothing: Double = 0.3
    /// A detection whose centre moved more than this fraction of the box width since the previous detection marks
    /// the frames until the next detection as `moving`.
    public var movingFraction: Double = 0.1
    /// The box is held over detector misses this long, seconds; after that the frames are `noFace`.
    public var faceLostSeconds: Double = 0.6

    public init() {}
}

/// Per-frame result of the ROI stage: region means and the geometry they came from.
public struct ROIMeasurement: Sendable, Equatable {
    public var timestampSeconds: Double
    public var status: ROIStatus
    /// Skin mean of the measured region (the central face with a detector, forehead and cheeks without);
    /// `nil` when no skin sample was found.
    public var whole: RGBMean?
    public var forehead: RGBMean?
    public var leftCheek: RGBMean?
    public var rightCheek: RGBMean?
    /// Mean of the scene beside the face (two strips left and right of the box, as wide as half the box, clipped
    /// to the frame; no skin test), with a detector only: a light that flickers or a screen that flashes changes
    /// it as well as the face, and the estimator distrusts a pulse peak the background shares.
    public var background: RGBMean?
    /// With a detector: the mean of the central face's samples that passed the skin test on the first frame measured
    /// with the held box, kept while the box is held (scaled like `whole` across box moves). Pixels at the skin test's
    /// limits, dropping in and out from frame to frame, move `whole` along the chroma axis the test cuts (a still
    /// photo with sensor noise got a "pulse" from it); this mean has no such motion, only the pixels' own.
    public var frozen: RGBMean?
    /// Skin samples behind `whole` (after subsampling: one sample per 2x2 pixels).
    public var skinSamples: Int
    /// The smoothed face box, when a face is tracked.
    public var faceBox: PixelBox?
    /// Sub-pixel row of the top edge of the forehead skin (pixels, down is positive); moves with the head
    /// and is the breathing motion source.
    public var verticalPosition: Double?
    /// How the box of this frame came about.
    public var boxSource: BoxSource = .none

    /// Where a frame's face box came from.
    public enum BoxSource: String, Sendable, Equatable {
        /// No box.
        case none
        /// The face detector ran on this frame and found the face.
        case detected
        /// Held from an earlier detection.
        case tracked
        /// The skin-colour blob search (no face detector configured).
        case skinBlob
    }

    /// Whether the frame's means may be used for the pulse (`ok`, or `moving`, which is advisory).
    public var isUsable: Bool { status == .ok || status == .moving }

    /// The input the pulse estimator takes from this frame (`rgb` is `nil` unless ``isUsable``).
    public var sample: RPPGSample {
        RPPGSample(tSeconds: timestampSeconds, rgb: isUsable ? whole : nil,
                   verticalPosition: isUsable ? verticalPosition : nil, background: isUsable ? background : nil,
                   frozen: isUsable ? frozen : nil)
    }
}

/// Finds the face, holds a steady box on it, and measures its skin mean in raw frames.
///
/// With a ``FaceDetector`` (the normal case; the `FaceDetection` target wraps OpenCV's cascade classifier):
/// 1. Every `detectionIntervalSeconds` (default 0.2 s, 5 Hz) the frame is shrunk by an integer factor to about
///    `detectionWidth` pixels (grey: luma averaged over 2x2 samples per cell) and handed to the detector: first
///    around the held box (1.5x its size each way, sizes 0.7-1.4x), then, if that misses, over the whole frame.
/// 2. Box stabilisation: detections are averaged (EMA, `detectionSmoothing`); the held box moves to that average
///    only when it is more than `stillnessFraction` (5 %) of the box width away or differs in size by more than
///    twice that, so detector jitter never moves the ROI. A detection far from the box (no overlap) replaces it
///    at once. Detector misses hold the box for `faceLostSeconds`, then the frames are `noFace`.
/// 3. Between detections nothing is searched: the held box is measured as is.
/// 4. Fine pass inside the box: one sample per 2x2 pixels over the central face (x 20-80 %, y 10-95 % of the
///    box); only samples passing the skin test (Cb/Cr/Y) are summed, in the camera's own channels (YCbCr,
///    converted to RGB once per region, or RGB), into `whole`; the forehead (x 30-70 %, y 8-25 %) and cheek
///    (x 18-38 % and 62-82 %, y 50-70 %) samples among them also into their own means. Skin outside the box is
///    never looked at.
/// 5. Status: `noFace`, `tooFewSkinPixels`, `tooDark`, `tooBright` from the samples, and `moving` when the
///    detection moved by more than `movingFraction` of the box width since the previous detection.
///
/// Without a detector (`detector: nil`, kept for pure-Swift use and signal tests on synthetic video) the face is
/// the largest 4-connected group of skin blocks on every frame (height capped at 1.35x width), exponentially
/// smoothed (`boxSmoothing`), and `whole` is the forehead (y 8-25 %) and cheeks (x 15-40 % / 60-85 %, y 45-70 %). A
/// skin-coloured wall, hand or desk can become that "face"; use a detector for real scenes.
///
/// Forehead top edge (breathing motion, both modes): skin fraction of the central columns on every second row
/// around the top of the box; the edge row is recovered with sub-pixel resolution from the sum of the fractions.
public struct FaceROITracker: Sendable {
    public var configuration: ROIConfiguration
    /// The face detector; `nil` selects the skin-blob search.
    public let detector: (any FaceDetector)?
    /// Counts of detected, tracked and face-less frames so far.
    public private(set) var stats = FaceTrackingStats()
    private var smoothed: PixelBox?
    private var mismatchRun = 0
    private var missingRun = 0
    private var labels: [Int32] = []
    private var blockCounts: [Int32] = []
    private var stack: [Int32] = []
    // Detector mode.
    private var lastDetectionTime: Double?
    private var lastFaceTime: Double?
    private var averaged: PixelBox?
    private var previousDetection: PixelBox?
    private var moving = false
    private var grey: [UInt8] = []
    /// The box the previous frame was measured with, and the per-channel gain that keeps `whole` continuous
    /// across box moves.
    private var measuredBox: PixelBox?
    private var continuityGain = RGBMean(r: 1, g: 1, b: 1)
    /// The skin test per sample of the central face on the first frame measured with `frozenBox` (`frozen`).
    private var frozenMask: [Bool] = []
    private var frozenBox: PixelBox?
    private var frozenGain = RGBMean(r: 1, g: 1, b: 1)

    public init(configuration: ROIConfiguration = ROIConfiguration(), detector: (any FaceDetector)? = nil) {
        self.configuration = configuration
        self.detector = detector
    }

    /// The detector's name, or `skin-blob` without one.
    public var detectorName: String { detector?.name ?? "skin-blob" }

    /// Measures one owned frame.
    public mutating func measure(_ frame: VideoFrame) -> ROIMeasurement {
        frame.bytes.withUnsafeBytes { raw in
            measureUnchecked(raw, layout: frame.layout, timestampSeconds: frame.timestampSeconds)
        }
    }

    /// Measures a frame in a buffer the caller owns (for example a V4L2 mmap buffer), without copying it.
    public mutating func measure(
        bytes: UnsafeRawBufferPointer, layout: FrameLayout, timestampSeconds: Double
    ) throws(VideoFrameError) -> ROIMeasurement {
        try layout.validate(bufferCount: bytes.count)
        return measureUnchecked(bytes, layout: layout, timestampSeconds: timestampSeconds)
    }

    mutating func measureUnchecked(
        _ bytes: UnsafeRawBufferPointer, layout: FrameLayout, timestampSeconds: Double
    ) -> ROIMeasurement {
        let m: ROIMeasurement
        switch layout.format {
        case .yuyv: m = run(YUYVReader(bytes, layout), layout: layout, t: timestampSeconds)
        case .rgb24: m = run(RGB24Reader(bytes, layout), layout: layout, t: timestampSeconds)
        case .i420: m = run(PlanarReader(bytes, layout, interleaved: false), layout: layout, t: timestampSeconds)
        case .nv12: m = run(PlanarReader(bytes, layout, interleaved: true), layout: layout, t: timestampSeconds)
        }
        stats.frames += 1
        switch m.boxSource {
        case .detected, .skinBlob: stats.framesDetected += 1
        case .tracked: stats.framesTracked += 1
        case .none: stats.framesNoFace += 1
        }
        switch m.status {
        case .moving: stats.framesMoving += 1
        case .tooFewSkinPixels: stats.framesTooFewSkinPixels += 1
        case .tooDark: stats.framesTooDark += 1
        case .tooBright: stats.framesTooBright += 1
        case .ok, .noFace: break
        }
        return m
    }

    /// Forgets the tracked box (for example after the camera was reopened).
    public mutating func reset() {
        smoothed = nil
        mismatchRun = 0
        missingRun = 0
        lastDetectionTime = nil
        lastFaceTime = nil
        averaged = nil
        previousDetection = nil
        moving = false
        measuredBox = nil
        continuityGain = RGBMean(r: 1, g: 1, b: 1)
        frozenBox = nil
        frozenGain = RGBMean(r: 1, g: 1, b: 1)
    }

    private mutating func run<R: PixelReader>(_ reader: R, layout: FrameLayout, t: Double) -> ROIMeasurement {
        let cfg = configuration
        var source = ROIMeasurement.BoxSource.none
        if let detector {
            let due = lastDetectionTime.map { t - $0 >= cfg.detectionIntervalSeconds - 1e-9 || t < $0 } ?? true
            if due {
                lastDetectionTime = t
                let found = detect(reader, layout: layout, detector: detector)
                stabilise(found, t: t)
                if found != nil { source = .detected }
            }
            if smoothed != nil, source == .none { source = .tracked }
        } else {
            track(detectFace(reader, width: layout.width, height: layout.height))
            if smoothed != nil { source = .skinBlob }
        }
        var m = ROIMeasurement(timestampSeconds: t, status: .noFace, whole: nil, forehead: nil, leftCheek: nil,
                               rightCheek: nil, skinSamples: 0, faceBox: smoothed, verticalPosition: nil,
                               boxSource: source)
        guard let box = smoothed else {
            measuredBox = nil
            continuityGain = RGBMean(r: 1, g: 1, b: 1)
            frozenBox = nil
            frozenGain = RGBMean(r: 1, g: 1, b: 1)
            return m
        }

        // Continuity across box moves: the frame is measured with the previous box too (and its held mask), and the
        // means are scaled so that the trace does not step where the region changed (a step is broadband and swamps
        // the pulse). The held mask follows the box (`frozenBox` is the previous frame's box, as `measuredBox` is).
        var before: (whole: RGBMean?, held: RGBMean?)
        if detector != nil, let previous = measuredBox, previous != box {
            let old = self.scan(reader, box: previous, layout: layout, frozenMask: frozenBox == previous ? frozenMask : nil)
            before = (old.total.mean(R.nativeIsRGB), old.frozen.mean(R.nativeIsRGB))
        }
        if detector != nil, frozenBox != box {
            frozenMask = heldSkinMask(reader, box: box, layout: layout)
            frozenBox = box
        }
        let scan = self.scan(reader, box: box, layout: layout, frozenMask: detector != nil ? frozenMask : nil)
        func scaled(_ gain: RGBMean, _ old: RGBMean?, _ new: RGBMean?) -> RGBMean {
            guard let old, let new, new.r > 0, new.g > 0, new.b > 0 else { return gain }
            return RGBMean(r: gain.r * old.r / new.r, g: gain.g * old.g / new.g, b: gain.b * old.b / new.b)
        }
        continuityGain = scaled(continuityGain, before.whole, scan.total.mean(R.nativeIsRGB))
        frozenGain = scaled(frozenGain, before.held, scan.frozen.mean(R.nativeIsRGB))
        let (sums, clipped, visited) = (scan.sums, scan.clipped, scan.visited)
        let total = scan.total
        measuredBox = box
        m.forehead = sums[0].mean(R.nativeIsRGB)
        m.leftCheek = sums[1].mean(R.nativeIsRGB)
        m.rightCheek = sums[2].mean(R.nativeIsRGB)
        if detector != nil { m.background = backgroundMean(reader, box: box, layout: layout) }
        m.whole = total.mean(R.nativeIsRGB).map {
            RGBMean(r: $0.r * continuityGain.r, g: $0.g * continuityGain.g, b: $0.b * continuityGain.b)
        }
        if detector != nil {
            m.frozen = scan.frozen.mean(R.nativeIsRGB).map {
                RGBMean(r: $0.r * frozenGain.r, g: $0.g * frozenGain.g, b: $0.b * frozenGain.b)
            }
        }
        m.skinSamples = total.count
        m.verticalPosition = foreheadEdge(reader, box: box, layout: layout)

        if total.count < cfg.minimumSkinSamples {
            m.status = visited > 0 && clipped * 4 > visited ? .tooBright : .tooFewSkinPixels
        } else if Double(total.luma) / Double(total.count) < cfg.minimumMeanLuma {
            m.status = .tooDark
        } else if clipped * 4 > visited {
            m.status = .tooBright
        } else {
            m.status = moving && detector != nil ? .moving : .ok
        }
        return m
    }

    /// Mean of the strips beside the box (x -60..-10 % and 110..160 % of the box width, the box's rows), one
    /// sample per 4x4 pixels; `nil` when fewer than 64 samples fall inside the frame.
    private func backgroundMean<R: PixelReader>(_ reader: R, box: PixelBox, layout: FrameLayout) -> RGBMean? {
        var sums = RegionSums()
        let y0 = evenFloor(box.y, limit: layout.height), y1 = evenFloor(box.y + box.height, limit: layout.height)
        for (a, b) in [(-0.6, -0.1), (1.1, 1.6)] {
            let x0 = evenFloor(box.x + a * box.width, limit: layout.width)
            let x1 = evenFloor(box.x + b * box.width, limit: layout.width)
            var y = y0
            while y < y1 {
                var x = x0
                while x < x1 {
                    sums.add(reader.read(x, y))
                    x += 4
                }
                y += 4
            }
        }
        return sums.count >= 64 ? sums.mean(R.nativeIsRGB) : nil
    }

    /// The samples of the central face (as `scan` visits them) that pass the skin test now and whose neighbours
    /// within `frozenMaskMargin` samples (each way) do too: skin away from the face's edges, so that a head moving a
    /// few pixels inside the held box brings no hair, eye or background into the held mask's mean.
    private func heldSkinMask<R: PixelReader>(_ reader: R, box: PixelBox, layout: FrameLayout) -> [Bool] {
        let x0 = evenFloor(box.x + 0.20 * box.width, limit: layout.width), x1 = evenFloor(box.x + 0.80 * box.width, limit: layout.width)
        let y0 = evenFloor(box.y + 0.10 * box.height, limit: layout.height), y1 = evenFloor(box.y + 0.95 * box.height, limit: layout.height)
        let columns = max(0, (x1 - x0 + 1) / 2), rows = max(0, (y1 - y0 + 1) / 2)
        let rule = skinRule
        var skin = [Bool](repeating: false, count: columns * rows)
        for j in 0..<rows {
            for i in 0..<columns { skin[j * columns + i] = rule.test(reader.read(x0 + 2 * i, y0 + 2 * j)) }
        }
        let k = Self.frozenMaskMargin
        var held = [Bool](repeating: false, count: skin.count)
        for j in 0..<rows {
            for i in 0..<columns where skin[j * columns + i] {
                var all = true
                for dj in -k...k where all {
                    let jj = j + dj
                    for di in -k...k {
                        let ii = i + di
                        if jj < 0 || jj >= rows || ii < 0 || ii >= columns || !skin[jj * columns + ii] { all = false; break }
                    }
                }
                held[j * columns + i] = all
            }
        }
        return held
    }

    /// How far (samples, 2 pixels each) from non-skin a sample of the held mask lies.
    static let frozenMaskMargin = 2

    /// Sums of the skin samples in the measured regions of `box` (see the type's documentation). With a detector
    /// also `frozen`, the sums of the samples `frozenMask` marks (it has one entry per sample of the same box).
    private func scan<R: PixelReader>(
        _ reader: R, box: PixelBox, layout: FrameLayout, frozenMask: [Bool]? = nil
    ) -> (sums: [RegionSums], total: RegionSums, clipped: Int, visited: Int, frozen: RegionSums) {
        let cfg = configuration
        // Regions as fractions of the box. With a detector the whole central face (x 20-80 %, y 10-95 %) is
        // measured: on compressed real video its skin mean carries the pulse far better than forehead and cheeks
        // alone (docs/rppg.md, "The measured region"); forehead and cheek means are kept for diagnostics. Without a
        // detector the box is a skin blob, and only forehead and cheeks are measured.
        typealias Region = (x0: Double, x1: Double, y0: Double, y1: Double)
        let named: [Region] = detector == nil
            ? [(0.30, 0.70, 0.08, 0.25), (0.15, 0.40, 0.45, 0.70), (0.60, 0.85, 0.45, 0.70)]
            : [(0.30, 0.70, 0.08, 0.25), (0.18, 0.38, 0.50, 0.70), (0.62, 0.82, 0.50, 0.70)]
        let scanned: [Region] = detector == nil ? named : [(0.20, 0.80, 0.10, 0.95)]
        func pixels(_ reg: Region) -> (x0: Int, x1: Int, y0: Int, y1: Int) {
            (evenFloor(box.x + reg.x0 * box.width, limit: layout.width), evenFloor(box.x + reg.x1 * box.width, limit: layout.width),
             evenFloor(box.y + reg.y0 * box.height, limit: layout.height), evenFloor(box.y + reg.y1 * box.height, limit: layout.height))
        }
        let namedPixels = named.map(pixels)
        let rule = skinRule
        var sums = [RegionSums](repeating: RegionSums(), count: named.count)
        var total = RegionSums()
        var clipped = 0
        var visited = 0
        var frozen = RegionSums()
        let given = scanned.count == 1 ? frozenMask : nil
        for (i, reg) in scanned.enumerated() {
            let (x0, x1, y0, y1) = pixels(reg)
            var y = y0
            while y < y1 {
                var x = x0
                while x < x1 {
                    let p = reader.read(x, y)
                    let skin = rule.test(p)
                    if let given, visited < given.count, given[visited] { frozen.add(p) }
                    visited += 1
                    if p.luma > cfg.lumaRange.upperBound { clipped += 1 }
                    if skin {
                        total.add(p)
                        if scanned.count == named.count {
                            sums[i].add(p)
                        } else {
                            for (j, n) in namedPixels.enumerated() where x >= n.x0 && x < n.x1 && y >= n.y0 && y < n.y1 {
                                sums[j].add(p)
                            }
                        }
                    }
                    x += 2
                }
                y += 2
            }
        }
        if let given, given.count != visited {
            // Another box after all (it cannot be: the same box visits the same samples): no frozen mean.
            frozen = RegionSums()
        }
        return (sums, total, clipped, visited, frozen)
    }

    /// Shrinks the frame to grey at about `detectionWidth` and asks the detector: around the held box first, then
    /// over the whole frame. Returns the chosen face in frame pixels.
    private mutating func detect<R: PixelReader>(
        _ reader: R, layout: FrameLayout, detector: any FaceDetector
    ) -> PixelBox? {
        let factor = max(1, Int((Double(layout.width) / Double(max(16, configuration.detectionWidth))).rounded()))
        let gw = layout.width / factor, gh = layout.height / factor
        guard gw >= 16, gh >= 16 else { return nil }
        if grey.count != gw * gh { grey = [UInt8](repeating: 0, count: gw * gh) }
        // Mean of 2x2 samples per cell (at 1/4 and 3/4 of the cell), enough against aliasing at these factors.
        let a = factor / 4, b = (3 * factor) / 4
        grey.withUnsafeMutableBufferPointer { g in
            for gy in 0..<gh {
                let y0 = gy * factor + a, y1 = gy * factor + b
                for gx in 0..<gw {
                    let x0 = gx * factor + a, x1 = gx * factor + b
                    let sum = reader.read(x0, y0).luma + reader.read(x1, y0).luma + reader.read(x0, y1).luma
                        + reader.read(x1, y1).luma
                    g[gy * gw + gx] = UInt8(truncatingIfNeeded: (sum + 2) >> 2)
                }
            }
        }
        let image = GreyImage(width: gw, height: gh, pixels: grey)
        let scale = Double(factor)
        var faces: [PixelBox] = []
        if let held = smoothed {
            let s = PixelBox(x: held.x / scale, y: held.y / scale, width: held.width / scale, height: held.height / scale)
            let region = PixelBox(x: s.x - 0.5 * s.width, y: s.y - 0.5 * s.height, width: 2 * s.width, height: 2 * s.height)
            stats.detectorCalls += 1
            faces = detector.detectFaces(in: image, search: FaceSearch(
                region: region, minimumSize: Int(0.7 * s.width), maximumSize: Int((1.4 * s.width).rounded(.up))))
        }
        if faces.isEmpty {
            stats.detectorCalls += 1
            faces = detector.detectFaces(in: image, search: FaceSearch())
        }
        guard !faces.isEmpty else { return nil }
        let scaled = faces.map { PixelBox(x: $0.x * scale, y: $0.y * scale, width: $0.width * scale, height: $0.height * scale) }
        if let held = smoothed, let best = scaled.max(by: { held.intersectionOverUnion($0) < held.intersectionOverUnion($1) }),
           held.intersectionOverUnion(best) > 0 {
            return best
        }
        return scaled.max { $0.width * $0.height < $1.width * $1.height }
    }

    /// Box stabilisation over detections (see the type's documentation).
    private mutating func stabilise(_ detection: PixelBox?, t: Double) {
        let cfg = configuration
        guard let d = detection else {
            moving = false
            if let last = lastFaceTime, t - last <= cfg.faceLostSeconds + 1e-9, t >= last { return }
            smoothed = nil
            averaged = nil
            previousDetection = nil
            return
        }
        lastFaceTime = t
        if let p = previousDetection {
            moving = Self.centreShift(p, d) > cfg.movingFraction
        } else {
            moving = false
        }
        previousDetection = d
        guard let held = smoothed, let avg = averaged, held.intersectionOverUnion(d) > 0 else {
            smoothed = d
            averaged = d
            return
        }
        let k = cfg.detectionSmoothing
        let next = PixelBox(x: avg.x + k * (d.x - avg.x), y: avg.y + k * (d.y - avg.y),
                            width: avg.width + k * (d.width - avg.width), height: avg.height + k * (d.height - avg.height))
        averaged = next
        let sizeChange = abs(next.width - held.width) / held.width
        if Self.centreShift(held, next) > cfg.stillnessFraction || sizeChange > 2 * cfg.stillnessFraction {
            smoothed = next
        }
    }

    /// Largest centre displacement (x or y) between two boxes, as a fraction of the first box's width.
    static func centreShift(_ a: PixelBox, _ b: PixelBox) -> Double {
        let dx = abs((a.x + a.width / 2) - (b.x + b.width / 2))
        let dy = abs((a.y + a.height / 2) - (b.y + b.height / 2))
        return max(dx, dy) / max(1, a.width)
    }

    private var skinRule: SkinRule { SkinRule(configuration) }

    /// Coarse skin blocks, then the largest connected group of them as the raw face box.
    private mutating func detectFace<R: PixelReader>(_ reader: R, width: Int, height: Int) -> PixelBox? {
        let block = max(4, min(32, (min(width, height) / 30) & ~3))
        let step = block / 4
        let gw = width / block
        let gh = height / block
        guard gw >= 2, gh >= 2 else { return nil }
        let cells = gw * gh
        if blockCounts.count != cells {
            blockCounts = [Int32](repeating: 0, count: cells)
            labels = [Int32](repeating: 0, count: cells)
        } else {
            for i in 0..<cells { blockCounts[i] = 0 }
        }
        let half = step / 2
        let rule = skinRule
        blockCounts.withUnsafeMutableBufferPointer { counts in
            for by in 0..<gh {
                for sy in 0..<4 {
                    let y = by * block + sy * step + half
                    for bx in 0..<gw {
                        var n: Int32 = 0
                        var x = bx * block + half
                        for _ in 0..<4 {
                            if rule.test(reader.read(x, y)) { n += 1 }
                            x += step
                        }
                        counts[by * gw + bx] += n
                    }
                }
            }
        }
        // Connected components of blocks at least half skin.
        for i in 0..<cells { labels[i] = 0 }
        var best: (area: Int, x0: Int, y0: Int, x1: Int, y1: Int) = (0, 0, 0, 0, 0)
        var label: Int32 = 0
        for start in 0..<cells where blockCounts[start] >= 8 && labels[start] == 0 {
            label += 1
            labels[start] = label
            stack.removeAll(keepingCapacity: true)
            stack.append(Int32(start))
            var area = 0
            var bx0 = gw, by0 = gh, bx1 = -1, by1 = -1
            while let c = stack.popLast() {
                let ci = Int(c)
                let cx = ci % gw
                let cy = ci / gw
                area += 1
                bx0 = min(bx0, cx); bx1 = max(bx1, cx)
                by0 = min(by0, cy); by1 = max(by1, cy)
                for k in 0..<4 {
                    let nx = k == 0 ? cx - 1 : (k == 1 ? cx + 1 : cx)
                    let ny = k == 2 ? cy - 1 : (k == 3 ? cy + 1 : cy)
                    guard nx >= 0, nx < gw, ny >= 0, ny < gh else { continue }
                    let ni = ny * gw + nx
                    if labels[ni] == 0 && blockCounts[ni] >= 8 {
                        labels[ni] = label
                        stack.append(Int32(ni))
                    }
                }
            }
            if area > best.area { best = (area, bx0, by0, bx1, by1) }
        }
        guard best.area > 0 else { return nil }
        let w = Double((best.x1 - best.x0 + 1) * block)
        var h = Double((best.y1 - best.y0 + 1) * block)
        guard w >= configuration.minimumFaceWidthFraction * Double(width), best.area >= 4 else { return nil }
        h = min(h, 1.35 * w)
        return PixelBox(x: Double(best.x0 * block), y: Double(best.y0 * block), width: w, height: h)
    }

    private mutating func track(_ detected: PixelBox?) {
        guard let d = detected else {
            missingRun += 1
            if missingRun >= 10 { smoothed = nil }
            return
        }
        missingRun = 0
        guard let s = smoothed else {
            smoothed = d
            return
        }
        if s.intersectionOverUnion(d) < 0.3 {
            mismatchRun += 1
            if mismatchRun >= 3 {
                smoothed = d
                mismatchRun = 0
            }
            return
        }
        mismatchRun = 0
        let a = configuration.boxSmoothing
        smoothed = PixelBox(x: s.x + a * (d.x - s.x), y: s.y + a * (d.y - s.y),
                            width: s.width + a * (d.width - s.width), height: s.height + a * (d.height - s.height))
    }

    /// Row of the top skin edge over the central 40 % of the box, from row skin fractions on even rows.
    private func foreheadEdge<R: PixelReader>(_ reader: R, box: PixelBox, layout: FrameLayout) -> Double? {
        let x0 = evenFloor(box.x + 0.3 * box.width, limit: layout.width)
        let x1 = evenFloor(box.x + 0.7 * box.width, limit: layout.width)
        let yStart = evenFloor(box.y - 0.25 * box.height, limit: layout.height)
        let yEnd = evenFloor(box.y + 0.2 * box.height, limit: layout.height)
        guard x1 > x0, yEnd > yStart else { return nil }
        let rule = skinRule
        let columns = Double((x1 - x0 + 1) / 2)
        var skinRows = 0.0
        var y = yStart
        while y < yEnd {
            var n = 0
            var x = x0
            while x < x1 {
                if rule.test(reader.read(x, y)) { n += 1 }
                x += 2
            }
            skinRows += Double(n) / columns
            y += 2
        }
        return Double(yEnd) - 2 * skinRows
    }

    private func evenFloor(_ v: Double, limit: Int) -> Int {
        let i = Int(max(0, min(Double(limit), v.rounded(.down))))
        return i & ~1
    }
}

struct SkinRule {
    let cbLo: Int, cbHi: Int, crLo: Int, crHi: Int, yLo: Int, yHi: Int

    init(_ c: ROIConfiguration) {
        cbLo = c.cbRange.lowerBound; cbHi = c.cbRange.upperBound
        crLo = c.crRange.lowerBound; crHi = c.crRange.upperBound
        yLo = c.lumaRange.lowerBound; yHi = c.lumaRange.upperBound
    }

    @inline(__always)
    func test(_ p: Pixel) -> Bool {
        p.cb >= cbLo && p.cb <= cbHi && p.cr >= crLo && p.cr <= crHi && p.luma >= yLo && p.luma <= yHi
    }
}

struct Pixel {
    var luma: Int
    var cb: Int
    var cr: Int
    /// Channels summed for means: Y, Cb, Cr for YUV layouts; R, G, B for RGB.
    var c0: Int
    var c1: Int
    var c2: Int
}

struct RegionSums {
    var count = 0
    var luma = 0
    var c0 = 0
    var c1 = 0
    var c2 = 0

    @inline(__always)
    mutating func add(_ p: Pixel) {
        count += 1
        luma += p.luma
        c0 += p.c0
        c1 += p.c1
        c2 += p.c2
    }

    mutating func merge(_ o: RegionSums) {
        count += o.count
        luma += o.luma
        c0 += o.c0
        c1 += o.c1
        c2 += o.c2
    }

    func mean(_ isRGB: Bool) -> RGBMean? {
        guard count > 0 else { return nil }
        let n = Double(count)
        let a = Double(c0) / n, b = Double(c1) / n, c = Double(c2) / n
        if isRGB { return RGBMean(r: a, g: b, b: c) }
        return YCbCr.toRGB(y: a, cb: b, cr: c)
    }
}

enum YCbCr {
    /// BT.601 limited-range YCbCr (what webcams send in YUYV) to RGB on 0-255.
    static func toRGB(y: Double, cb: Double, cr: Double) -> RGBMean {
        let yy = 1.164383 * (y - 16)
        let u = cb - 128, v = cr - 128
        return RGBMean(r: yy + 1.596027 * v, g: yy - 0.391762 * u - 0.812968 * v, b: yy + 2.017232 * u)
    }
}

protocol PixelReader {
    static var nativeIsRGB: Bool { get }
    func read(_ x: Int, _ y: Int) -> Pixel
}

struct YUYVReader: PixelReader {
    static var nativeIsRGB: Bool { false }
    let base: UnsafeRawBufferPointer
    let stride: Int

    init(_ base: UnsafeRawBufferPointer, _ layout: FrameLayout) {
        self.base = base
        self.stride = layout.bytesPerRow
    }

    @inline(__always)
    func read(_ x: Int, _ y: Int) -> Pixel {
        let o = y * stride + (x & ~1) * 2
        let l = Int(base[o + (x & 1) * 2])
        let u = Int(base[o + 1])
        let v = Int(base[o + 3])
        return Pixel(luma: l, cb: u, cr: v, c0: l, c1: u, c2: v)
    }
}

struct RGB24Reader: PixelReader {
    static var nativeIsRGB: Bool { true }
    let base: UnsafeRawBufferPointer
    let stride: Int

    init(_ base: UnsafeRawBufferPointer, _ layout: FrameLayout) {
        self.base = base
        self.stride = layout.bytesPerRow
    }

    @inline(__always)
    func read(_ x: Int, _ y: Int) -> Pixel {
        let o = y * stride + x * 3
        let r = Int(base[o]), g = Int(base[o + 1]), b = Int(base[o + 2])
        // JPEG (full-range BT.601) YCbCr in 8.8 fixed point.
        let l = (77 * r + 150 * g + 29 * b) >> 8
        let cb = 128 + ((-43 * r - 85 * g + 128 * b) >> 8)
        let cr = 128 + ((128 * r - 107 * g - 21 * b) >> 8)
        return Pixel(luma: l, cb: cb, cr: cr, c0: r, c1: g, c2: b)
    }
}

struct PlanarReader: PixelReader {
    static var nativeIsRGB: Bool { false }
    let base: UnsafeRawBufferPointer
    let width: Int
    let chromaOffset: Int
    let chromaPlane: Int
    let interleaved: Bool

    init(_ base: UnsafeRawBufferPointer, _ layout: FrameLayout, interleaved: Bool) {
        self.base = base
        self.width = layout.width
        self.chromaOffset = layout.width * layout.height
        self.chromaPlane = (layout.width / 2) * (layout.height / 2)
        self.interleaved = interleaved
    }

    @inline(__always)
    func read(_ x: Int, _ y: Int) -> Pixel {
        let l = Int(base[y * width + x])
        let u: Int, v: Int
        if interleaved {
            let o = chromaOffset + (y >> 1) * width + (x & ~1)
            u = Int(base[o])
            v = Int(base[o + 1])
        } else {
            let o = (y >> 1) * (width >> 1) + (x >> 1)
            u = Int(base[chromaOffset + o])
            v = Int(base[chromaOffset + chromaPlane + o])
        }
        return Pixel(luma: l, cb: u, cr: v, c0: l, c1: u, c2: v)
    }
}
