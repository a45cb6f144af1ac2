import GatewayEngine
import RPPG
import V4L2Capture

/// The per-frame logic of ``CameraRPPGProvider`` without any I/O: captured frames in, samples and status changes
/// out. Runs on one task; not shared.
struct CameraPipeline {
    enum Output: Sendable, Equatable {
        case sample(BiosignalSample)
        case status(SensorStatus)
    }

    let devicePath: String
    private(set) var estimator: RPPGEstimator
    private var clock = MonotonicToEpoch()
    private var tally = ROITally()
    private(set) var quality = SignalQuality.warmingUp
    private var malformedFrameReported = false
    private var pace: FramePace

    /// `framesPerSecond` is the rate the driver reports for the negotiated mode, if any.
    init(devicePath: String, estimator: RPPGEstimator, framesPerSecond: Double? = nil) {
        self.devicePath = devicePath
        self.estimator = estimator
        self.pace = FramePace(reported: framesPerSecond)
    }

    /// Feeds one frame. `receivedAtMs` (epoch ms) is read once, on the first frame, to anchor the driver's monotonic
    /// timestamps to wall-clock time.
    mutating func process(_ frame: CapturedFrame, receivedAtMs: () -> Int64) -> [Output] {
        clock.anchorIfNeeded(monotonicSeconds: frame.timestamp, epochMs: receivedAtMs)
        guard let format = Self.pixelFormat(of: frame.fourcc) else { return [] }
        let layout = FrameLayout(
            width: frame.width, height: frame.height, format: format,
            bytesPerRow: frame.bytesPerLine > 0 ? frame.bytesPerLine : nil
        )
        let result = frame.bytes.withUnsafeBytes { raw in
            Result { () throws(VideoFrameError) in
                try estimator.process(bytes: raw, layout: layout, timestampSeconds: frame.timestamp)
            }
        }
        let estimate: RPPGEstimate?
        switch result {
        case .success(let value):
            estimate = value
        case .failure(let error):
            guard !malformedFrameReported else { return [] }
            malformedFrameReported = true
            return [.status(status(.streaming, "Skipping malformed frames from \(devicePath): \(error)"))]
        }
        if let roi = estimator.lastMeasurement?.status { tally.count(roi) }
        var out: [Output] = []
        if let message = pace.count(timestamp: frame.timestamp, skipped: frame.droppedFrames) {
            out.append(.status(status(.streaming, message)))
        }
        guard let estimate else { return out }

        let assessed = SignalQuality.assess(
            estimate, tally: tally, minimumWindowSeconds: estimator.configuration.minimumWindowSeconds
        )
        tally = ROITally()
        if assessed != quality {
            quality = assessed
            out.append(.status(status(.streaming, assessed.message)))
        }
        if let bpm = estimate.hrBpm {
            out.append(.sample(BiosignalSample(
                timestampMs: clock.epochMs(monotonicSeconds: estimate.tSeconds),
                bpm: bpm,
                deviceId: devicePath,
                source: CameraRPPGProvider.source,
                confidence: estimate.confidence,
                breathingRateBpm: estimate.breathingRateBpm
            )))
        }
        return out
    }

    func status(_ state: SensorStatus.State, _ message: String?, errorCode: SessionErrorCode? = nil) -> SensorStatus {
        SensorStatus(
            source: CameraRPPGProvider.source, deviceId: devicePath, state: state, message: message,
            errorCode: errorCode
        )
    }

    /// The estimator's layout for a V4L2 pixel format; `nil` for formats it cannot read (compressed ones).
    static func pixelFormat(of fourcc: FourCC) -> PixelFormat? {
        switch fourcc {
        case .yuyv: .yuyv
        case .rgb24: .rgb24
        case .yuv420: .i420
        case .nv12: .nv12
        default: nil
        }
    }
}

/// Maps the driver's CLOCK_MONOTONIC frame times to Unix epoch milliseconds, anchored at the first frame.
struct MonotonicToEpoch: Equatable {
    private(set) var anchor: (monotonicSeconds: Double, epochMs: Int64)?

    mutating func anchorIfNeeded(monotonicSeconds: Double, epochMs: () -> Int64) {
        if anchor == nil { anchor = (monotonicSeconds, epochMs()) }
    }

    func epochMs(monotonicSeconds t: Double) -> Int64 {
        guard let anchor else { return 0 }
        return anchor.epochMs + Int64(((t - anchor.monotonicSeconds) * 1000).rounded())
    }

    static func == (a: Self, b: Self) -> Bool {
        a.anchor?.monotonicSeconds == b.anchor?.monotonicSeconds && a.anchor?.epochMs == b.anchor?.epochMs
    }
}

/// The pace of the frames, measured once over the first ``span`` seconds of frame times and said when it matters: a
/// camera delivering well below the rate its driver reports (webcams slow down in dim light, a longer exposure; a
/// loopback device reports a rate its writer need not keep), frames lost before the estimator (numbered by the
/// driver, never arrived: the CPU is too busy for the mode), or too few frames for a pulse. Estimates use each
/// frame's own time, so a slower pace does not bias them; the user learns why readings may be fewer or less sure.
struct FramePace: Equatable {
    static let span = 5.0
    /// Below this, a pulse's waveform has too few points per beat for a confident reading.
    static let slowest = 8.0

    let reported: Double?
    private var first: Double?
    private var frames = 0
    private var skipped = 0
    private var done = false

    init(reported: Double?) { self.reported = reported }

    /// Counts one frame (`skipped`: frames the driver numbered before it that never arrived); returns a status
    /// message once, after ``span`` seconds, when the pace is worth saying.
    mutating func count(timestamp: Double, skipped gap: Int) -> String? {
        guard !done else { return nil }
        guard let first else {
            first = timestamp
            return nil
        }
        frames += 1
        skipped += gap
        let elapsed = timestamp - first
        guard elapsed >= Self.span else { return nil }
        done = true
        return Self.message(
            received: Double(frames) / elapsed, delivered: Double(frames + skipped) / elapsed,
            reported: reported, skipped: skipped, seconds: elapsed
        )
    }

    /// `received`: frames per second that reached the estimator; `delivered`: the driver's pace (received and
    /// skipped); `reported`: the driver's nominal rate.
    static func message(
        received: Double, delivered: Double, reported: Double?, skipped: Int, seconds: Double
    ) -> String? {
        let cameraSlow = reported.map { delivered < 0.9 * $0 } ?? false
        let lost = skipped > 0 && received < 0.9 * delivered
        let tooSlow = received < slowest
        guard cameraSlow || lost || tooSlow else { return nil }
        var parts: [String] = []
        if let reported, cameraSlow {
            parts.append(
                "The camera delivers \(format(delivered)) fps, not the \(format(reported)) fps its driver reports: "
                    + "webcams slow down in dim light (longer exposure), so add steady light in front of you."
            )
        }
        if lost {
            parts.append(
                "Only \(format(received)) of the camera's \(format(delivered)) fps reach the pulse estimator "
                    + "(\(skipped) frames skipped in \(format(seconds)) s): the CPU is too busy for this mode; choose "
                    + "a smaller one (--camera-width, --camera-height)."
            )
        }
        if parts.isEmpty { parts.append("The camera delivers \(format(delivered)) fps.") }
        parts.append(
            tooSlow
                ? "Below \(format(slowest)) fps a pulse cannot be read reliably."
                : "Pulse readings use each frame's own time, so they stay right."
        )
        return parts.joined(separator: " ")
    }

    private static func format(_ value: Double) -> String { String((value * 10).rounded() / 10) }
}

/// ROI statuses of the frames since the last estimate.
struct ROITally: Equatable {
    private(set) var frames = 0
    private(set) var counts: [ROIStatus: Int] = [:]

    mutating func count(_ status: ROIStatus) {
        frames += 1
        counts[status, default: 0] += 1
    }

    /// The most frequent failure when fewer than half of the frames had a usable face.
    var dominantFailure: ROIStatus? {
        guard frames > 0, 2 * (counts[.ok] ?? 0) < frames else { return nil }
        return counts.filter { $0.key != .ok }.max { ($0.value, $0.key.rawValue) < ($1.value, $1.key.rawValue) }?.key
    }
}

/// What the camera's picture allows, reported to the user when it changes (never with a number while unsure).
enum SignalQuality: String, Sendable, Equatable {
    /// Too little signal history for a reading yet.
    case warmingUp
    /// Confident readings.
    case measuring
    case noFace
    case tooDark
    case tooBright
    /// The face box keeps moving.
    case holdStill
    /// A face, but no confident pulse.
    case lowConfidence

    static func assess(_ estimate: RPPGEstimate, tally: ROITally, minimumWindowSeconds: Double) -> SignalQuality {
        switch tally.dominantFailure {
        case .noFace?, .tooFewSkinPixels?: return .noFace
        case .tooDark?: return .tooDark
        case .tooBright?: return .tooBright
        case .moving?: return .holdStill
        case .ok?, nil: break
        }
        if estimate.hrBpm != nil { return .measuring }
        if estimate.windowSeconds + 1e-6 < minimumWindowSeconds { return .warmingUp }
        return .lowConfidence
    }

    var message: String {
        switch self {
        case .warmingUp: "Face found; first pulse reading in about 5 s."
        case .measuring: "Measuring pulse."
        case .noFace: "No face in view: face the camera from about 50 cm with your face filling a third of the picture."
        case .tooDark: "Too dark: add light in front of you (steady light, not behind you)."
        case .tooBright: "Face overexposed: move out of direct sunlight or dim the light behind the camera."
        case .holdStill: "Hold still: your head moved too much for a pulse reading."
        case .lowConfidence: "No confident pulse: keep still and keep the light steady (daylight or non-flickering lamps)."
        }
    }
}

extension ControlLockReport {
    /// One line for a status message: what was locked, what the driver does not offer, and above all what could not
    /// be locked.
    var statusMessage: String {
        var locked: [String] = []
        var absent: [String] = []
        var failed: [String] = []
        for e in entries {
            switch e.outcome {
            case .locked(let detail): locked.append("\(e.control) (\(detail))")
            case .unsupported: absent.append(e.control)
            case .notAllowed(let reason): failed.append("\(e.control) (\(reason))")
            case .failed(let error):
                failed.append("\(e.control) (\(error.errnoDescription.isEmpty ? "\(error.code)" : error.errnoDescription))")
            }
        }
        var parts = [locked.isEmpty ? "nothing locked" : "locked \(locked.joined(separator: ", "))"]
        if !absent.isEmpty { parts.append("not offered by the driver: \(absent.joined(separator: ", "))") }
        if !failed.isEmpty { parts.append("could not lock \(failed.joined(separator: ", "))") }
        var text = "Camera controls after \(afterFrames) frames: \(parts.joined(separator: "; "))."
        if !failed.isEmpty {
            text += " Automatic exposure, gain or white balance left on may add slow drifts that lower the pulse "
                + "confidence."
        }
        return text
    }
}
