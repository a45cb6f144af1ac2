import FaceDetection
import Foundation
import RPPG

/// Why an offline analysis stopped, phrased as what to do about it.
public struct AnalysisError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// What an offline run over a whole file produced.
public struct OfflineAnalysisResult: Sendable {
    /// One estimate per hop, in time order.
    public var estimates: [RPPGEstimate]
    /// Frames (or trace rows) fed to the estimator.
    public var frames: Int
    /// Frames or rows dropped because their time was not later than the previous one (repeated or out of order
    /// timestamps), or because no time was known for them.
    public var droppedFrames: Int
    /// Time from the first to the last frame plus one frame interval, seconds.
    public var durationSeconds: Double
    /// Time from the first to the last frame, seconds: what the estimator's windows can cover.
    public var spanSeconds: Double
    /// The ROI stage as the run left it (video runs), for its statistics.
    public var tracker: FaceROITracker?
    /// A video that decoded with errors (truncated, damaged): what ffmpeg said, and how many frames the container
    /// lists against those decoded. Nil when the decoder reported nothing.
    public var decoderProblem: (message: String, listedFrames: Int, decodedFrames: Int)?
}

/// The offline rPPG path shared by `hr-gateway analyze` and `hr-gateway-bench rppg-eval`, so that the accuracy
/// harness measures exactly what users run: decode → ``FaceROITracker`` → ``RPPGEstimator`` (POS/CHROM, confidence).
public enum OfflineAnalysis {
    /// The estimator of a trace run (RGB means computed elsewhere: no ROI stage).
    public static func makeEstimator(configuration: RPPGConfiguration) throws(RPPGConfigurationError) -> RPPGEstimator {
        try RPPGEstimator(configuration: configuration)
    }

    /// The one place where the offline path builds a video estimator (and with it the ROI tracker): OpenCV's cascade
    /// face detector loaded from `faceCascade` (the Debian opencv-data file by default).
    public static func makeVideoEstimator(
        configuration: RPPGConfiguration, faceCascade: String = CascadeFaceDetector.defaultCascadePath
    ) throws -> RPPGEstimator {
        let detector = try CascadeFaceDetector(cascadePath: faceCascade)
        return try RPPGEstimator(configuration: configuration, faceDetector: detector)
    }

    /// Feeds trace rows (already parsed, strictly increasing) to a new estimator. Times are reported from the
    /// first row.
    public static func analyze(trace rows: RGBTraceRows, configuration: RPPGConfiguration) throws -> OfflineAnalysisResult {
        var estimator = try makeEstimator(configuration: configuration)
        var estimates: [RPPGEstimate] = []
        let t0 = rows.samples.first?.tSeconds ?? 0
        for var s in rows.samples {
            s.tSeconds -= t0
            if let e = estimator.append(s) { estimates.append(e) }
        }
        let duration = (rows.samples.last?.tSeconds ?? 0) - t0
        return OfflineAnalysisResult(estimates: estimates, frames: rows.samples.count, droppedFrames: rows.droppedRows,
                                     durationSeconds: duration, spanSeconds: duration)
    }

    /// Decodes a video with ffmpeg and runs every frame through a new estimator.
    ///
    /// Frame times come from `frameTimes` when given (for example a dataset's per-frame clock; frames beyond its
    /// end are dropped), otherwise from the container's presentation times (``FFmpegVideo/frameTimes()``), or
    /// i / fps when the container has none for a frame. `estimator` replaces the one ``makeVideoEstimator(configuration:faceCascade:)``
    /// would build (a caller that configures the ROI stage itself). Frames whose times are out of order with the most
    /// of the others (`FrameOrder.inOrder`), and any whose time is not later than the previous kept frame's, are dropped and counted; missing frames are bridged by the estimator. `onMeasurement` sees the ROI
    /// result of every kept frame.
    public static func analyze(
        video path: String, configuration: RPPGConfiguration, frameTimes: [Double]? = nil,
        estimator prebuilt: RPPGEstimator? = nil, onMeasurement: (ROIMeasurement) -> Void = { _ in }
    ) throws -> OfflineAnalysisResult {
        guard FileManager.default.isReadableFile(atPath: path) else {
            throw AnalysisError("cannot read \(path): no such file or not readable")
        }
        let video = try FFmpegVideo(path: path)
        var estimator = try prebuilt ?? makeVideoEstimator(configuration: configuration)
        let fps = video.framesPerSecond
        let times: [Double]
        let fromCaller = frameTimes != nil
        if let frameTimes {
            times = frameTimes
        } else {
            times = (try? video.frameTimes()) ?? []
        }
        let inOrder = FrameOrder.inOrder(times)
        var estimates: [RPPGEstimate] = []
        var decoded = 0, kept = 0, dropped = 0
        var first: Double?, last: Double?
        let log = try video.decode(time: { i in
            if i < times.count { return inOrder[i] ? times[i] : .nan }
            return fromCaller ? .nan : (times.last ?? -1 / fps) + Double(i - times.count + 1) / fps
        }, { frame in
            decoded += 1
            let t = frame.timestampSeconds
            if let l = last, !(t > l) {
                dropped += 1
                return
            }
            first = first ?? t
            last = t
            kept += 1
            if let e = estimator.process(frame) { estimates.append(e) }
            if let m = estimator.lastMeasurement { onMeasurement(m) }
        }, dropNonFinite: { dropped += 1 })
        guard decoded + dropped > 0 else { throw AnalysisError("ffmpeg decoded no frames from \(path)") }
        guard kept > 0 else { throw AnalysisError("\(path): no frame has a usable time") }
        let duration = (last ?? 0) - (first ?? 0) + 1 / fps
        return OfflineAnalysisResult(estimates: estimates, frames: kept, droppedFrames: dropped, durationSeconds: duration,
                                     spanSeconds: (last ?? 0) - (first ?? 0),
                                     tracker: estimator.tracker,
                                     decoderProblem: log.map { ($0, fromCaller ? 0 : times.count, decoded + dropped) })
    }
}
