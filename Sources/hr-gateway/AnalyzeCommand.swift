import ArgumentParser
import FaceDetection
import Foundation
import SystemCalls
import GatewayEngine
import RPPG
import RPPGAnalysis
import StdoutSink

struct AnalyzeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "analyze",
        abstract: "Estimate pulse and breathing rate offline from a face video or a mean-RGB trace.",
        discussion: """
            Runs the same rPPG estimator as the live camera provider: skin/face ROI,
            POS (primary) and CHROM (second opinion) on 10 s windows re-estimated
            every second. Pulse band 0.7-3.0 Hz = 42-180 bpm (--max-hz up to 4.0);
            breathing 0.08-0.7 Hz = 4.8-42 breaths/min on 30 s windows.

            INPUT
              video file  anything ffmpeg reads, decoded to rgb24 through a pipe;
                          size from ffprobe, frame times from the container, or
                          from --frame-times when the camera's clock was kept
                          (frames whose time is out of order, repeated or far
                          from the frames around it, are dropped and counted;
                          after a clock reset in --frame-times the frames go on
                          from those before it; each is said with its line).
                          Needs ffmpeg on PATH (Debian/Ubuntu: apt-get install ffmpeg).
              FILE.csv    mean skin RGB per frame: a header naming R, G, B (0-255)
                          and optionally t_s (seconds); other columns are ignored.
                          Without t_s, give --fps. Rows whose t_s does not
                          increase are dropped, counted, and warned about.

            OUTPUT
              One row per window ending at t_s seconds from the start of the file.
              hr_bpm only when confidence (0-1) >= 0.4; below that: no reading
              (calibrated on real compressed webcam video: docs/rppg.md). A
              confident window is not always a right one: on hard video (motion,
              dim light, heavy compression) some read tens of bpm off. The summary
              gives the range of the confident windows; a wide one is said.
              First reading after 5 s of usable frames, breathing after 20 s.
              snr_db (absent before a window has enough frames): de Haan's SNR of
              the pulse, its harmonic included (about
              +5..+10 dB on good uncompressed webcam video). For study only: the
              confidence comes from the fundamental alone, in two projections, so
              compressed video often gives confident, right readings below 0 dB.

              --json prints one object per line:
                {"type":"window","t_s":..,"window_s":..,"hr_bpm":..,"confidence":..,
                 "snr_db":..,"breathing_rate_bpm":..,"breathing_confidence":..,
                 "colour_angle_deg":..}
              (hr_bpm / breathing_rate_bpm absent when not confident;
              colour_angle_deg for a video, see COLOUR CHECK), then
                {"type":"summary","mean_hr_bpm":..,"min_hr_bpm":..,"max_hr_bpm":..,
                 "confident_fraction":..,
                 "confident_windows":..,"colour_withheld_windows":..,"windows":..,
                 "mean_breathing_rate_bpm":..,
                 "frames":..,"dropped_frames":..,"duration_s":..,"source":..}
              (the means absent when no window gave one)
              and for a video also "face_detector" (the cascade), "frames_face_detected"
              (detector ran and found the face: about 5 per second),
              "frames_face_tracked" (box held between detections), "frames_no_face",
              "frames_skin_colour_failed", "frames_too_dark", "frames_too_bright"
              (the table says these with what to change when a fifth or more).

            COLOUR CHECK
              Blood changes the skin's red, green and blue in a fixed proportion.
              colour_angle_deg (signed, -180 to 180) is how far the pulse's
              colour change turns from that proportion, measured on the skin the
              face box held (a video only). --colour-check scales the pulse's
              confidence down from 1 at 30 degrees either way to 0 at 60: a fully
              confident reading is withheld beyond 48 degrees, a weaker one sooner
              (pulse only; breathing is not checked). On the development videos,
              wrong readings 10 -> 2
              and readings 50.6 -> 43.0 % of the windows; on the same re-encoded
              harder, wrong 32 -> 8; on a photo of a face, 10 -> 0 (docs/rppg.md).

            FACE
              OpenCV's cascade face detector (Debian package opencv-data) 5 times a
              second on a downscaled grey frame; the box is held steady in between.

            EXIT STATUS
              0 with at least one reading (pulse or breathing); 1 when no window
              gave one (no face, or never confident: the table says why; the
              windows are printed all the same) or the file could not be read;
              64 a usage error.

            EXAMPLES
              hr-gateway analyze face.mp4
              hr-gateway analyze face.mkv --json > windows.jsonl
              hr-gateway analyze trace.csv --fps 15
              hr-gateway analyze exercise.mp4 --max-hz 4.0
              hr-gateway analyze subject8.mp4 --frame-times subject8_frames.csv
            """
    )

    @Argument(help: "A video file, or an RGB trace ending in .csv.")
    var file: String

    @Option(parsing: .unconditional, help: "Frame rate of a CSV trace without a t_s column (frames per second).")
    var fps: Double?

    @Option(name: .customLong("max-hz"), parsing: .unconditional, help: "Top of the pulse band in Hz, 2.0 (120 bpm) to 4.0 (240 bpm).")
    var maxHz: Double = 3.0

    @Option(help: ArgumentHelp("OpenCV face cascade file for videos (Debian package opencv-data).", valueName: "xml"))
    var faceCascade: String = CascadeFaceDetector.defaultCascadePath

    @Option(help: ArgumentHelp(
        "The capture time of each frame of a video, in seconds, one per frame: a CSV with a t_s column (a dataset's per-frame file) or one number per line. A video file's own frame times are often evenly spaced where the camera's were not, which shifts the pulse.",
        valueName: "file"))
    var frameTimes: String?

    @Flag(help: ArgumentHelp(
        "Withhold pulse readings whose colour change does not look like blood's: fewer wrong readings from a photo, a "
            + "screen or heavily compressed video, and fewer readings (see COLOUR CHECK)."))
    var colourCheck = false

    @Flag(help: "Print JSON lines instead of a table.")
    var json = false

    func validate() throws {
        guard maxHz >= 2.0, maxHz <= 4.0 else { throw ValidationError("--max-hz must be within 2.0-4.0, got \(maxHz)") }
        if let fps, !(fps >= 5 && fps <= 1000) { throw ValidationError("--fps must be within 5-1000, got \(fps)") }
        if frameTimes != nil, file.lowercased().hasSuffix(".csv") {
            throw ValidationError("--frame-times is for a video: a trace gives its times in its t_s column")
        }
    }

    func run() throws {
        var config = RPPGConfiguration()
        config.pulseBandHz = 0.7...maxHz
        config.sampleRateHz = max(30, (2.2 * maxHz).rounded(.up))
        if colourCheck { config.colourAngleToleranceDegrees = RPPGConfiguration.colourCheckToleranceDegrees }
        let isCSV = file.lowercased().hasSuffix(".csv")
        let result: OfflineAnalysisResult
        // Frames past the end of --frame-times: left out (said), not "dropped (time out of order)".
        var pastEndOfTimes = 0
        if isCSV {
            let data: [UInt8]
            do { data = try SystemCall.readFile(file, notA: "a trace (CSV)") } catch {
                throw AnalyzeError("cannot read \(file): \(error.reason)")
            }
            let rows: RGBTraceRows
            do {
                rows = try RGBTrace.parse(String(decoding: data, as: UTF8.self), framesPerSecond: fps)
            } catch {
                throw AnalyzeError("\(file): \(error.description)")
            }
            if colourCheck {
                StandardStream.error.write(Data(("warning: \(file): --colour-check needs a video (it judges the colour on "
                    + "the skin the face box held): a trace is analysed without it\n").utf8))
            }
            if rows.timed, fps != nil {
                StandardStream.error.write(Data("warning: \(file): --fps ignored: the trace's t_s column gives the times\n".utf8))
            }
            if rows.droppedRows > 0 {
                StandardStream.error.write(Data(
                    "warning: \(file): dropped \(rows.droppedRows) row(s) whose t_s does not increase (first on line \(rows.firstDroppedLine ?? 0))\n".utf8))
            }
            // Units the format does not take, which would only give silent "no confident HR".
            let times = rows.samples.map(\.tSeconds)
            let gaps = zip(times.dropFirst(), times).map { $0 - $1 }.sorted()
            if !gaps.isEmpty, gaps[gaps.count / 2] > 1 {
                StandardStream.error.write(Data(("warning: \(file): the rows are \(String(format: "%g", gaps[gaps.count / 2])) s "
                    + "apart (median): is t_s in milliseconds? It is read as seconds\n").utf8))
            }
            if rows.samples.allSatisfy({ s in s.rgb.map { max($0.r, $0.g, $0.b) <= 1 } ?? true }) {
                StandardStream.error.write(Data(("warning: \(file): every R, G and B value is at most 1: scaled 0-1? They "
                    + "are read as 0-255 (multiply by 255)\n").utf8))
            }
            if rows.blankRows > 0 {
                StandardStream.error.write(Data(("warning: \(file): left out \(rows.blankRows) row(s) without an R, G or B "
                    + "value (first on line \(rows.firstBlankLine ?? 0); no face in those frames?), bridged like dropped "
                    + "frames\n").utf8))
            }
            result = try OfflineAnalysis.analyze(trace: rows, configuration: config)
        } else {
            if fps != nil {
                StandardStream.error.write(Data(
                    "warning: \(file): --fps ignored: a video's frame times come from the file (--fps is for a trace without t_s)\n".utf8))
            }
            // The file before the face detector: a missing video was answered with how to install OpenCV.
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory) else {
                throw AnalyzeError("cannot read \(file): no such file")
            }
            guard !isDirectory.boolValue, FileManager.default.isReadableFile(atPath: file) else {
                throw AnalyzeError("cannot read \(file): \(isDirectory.boolValue ? "a directory, not a video" : "permission denied")")
            }
            if ((try? FileManager.default.attributesOfItem(atPath: file))?[.size] as? NSNumber)?.intValue == 0 {
                throw AnalyzeError("\(file): the file is empty")
            }
            let times = try frameTimes.map {
                try FrameTimesFile.read($0) { StandardStream.error.write(Data("warning: \(file): \($0)\n".utf8)) }
            }
            result = try OfflineAnalysis.analyze(
                video: file, configuration: config, frameTimes: times,
                estimator: OfflineAnalysis.makeVideoEstimator(configuration: config, faceCascade: faceCascade))
            let total = result.frames + result.droppedFrames
            let pastEnd = times.map { max(0, total - $0.count) } ?? 0
            pastEndOfTimes = pastEnd
            if let times, pastEnd > 0 {
                StandardStream.error.write(Data(("warning: \(file): --frame-times has \(times.count) times for "
                    + "\(total) frames; the \(pastEnd) frame(s) past its end were left out\n").utf8))
            } else if let times, times.count > total + 1 {
                StandardStream.error.write(Data(("warning: \(file): --frame-times has \(times.count) times for "
                    + "\(total) frames: is it this video's?\n").utf8))
            }
            if result.droppedFrames > pastEnd {
                StandardStream.error.write(Data(
                    "warning: \(file): dropped \(result.droppedFrames - pastEnd) frame(s) whose time is out of order (repeated, or before or after the frames around it)\n".utf8))
            }
            if let problem = result.decoderProblem {
                // ffmpeg decodes what it can of a truncated or damaged file and exits 0: the analysis covers less.
                let count = problem.listedFrames > problem.decodedFrames + 5
                    ? "decoded \(problem.decodedFrames) of the \(problem.listedFrames) frames the file lists"
                    : "decoded \(problem.decodedFrames) frames"
                let said = problem.message.split(whereSeparator: \.isNewline).prefix(3).joined(separator: "; ")
                StandardStream.error.write(Data(
                    "warning: \(file): the file is damaged or truncated (\(count)); the analysis covers what decoded. ffmpeg: \(said)\n".utf8))
            }
        }
        // The span from the first frame to the last is what a window can cover (a 5.0-s clip's last frame is at 4.97 s).
        guard result.spanSeconds + 1e-6 >= config.minimumWindowSeconds, !result.estimates.isEmpty else {
            // Not "no confident HR": there was nothing to estimate from.
            throw AnalyzeError("\(file): \(result.frames) usable frame\(result.frames == 1 ? "" : "s") "
                + "(\(String(format: "%.2f", result.spanSeconds)) s from the first to the last), shorter than the "
                + "\(Int(config.minimumWindowSeconds)) s a first pulse window needs: nothing to estimate. Record longer "
                + "(30 s or more gives steady readings).")
        }
        var report = AnalysisReport(estimates: result.estimates, frames: result.frames,
                                    droppedFrames: result.droppedFrames - pastEndOfTimes,
                                    durationSeconds: result.durationSeconds, source: isCSV ? "csv" : "video")
        if let tracker = result.tracker { report.face = (tracker.detectorName, tracker.stats) }
        if json {
            for line in report.jsonLines() { print(line) }
        } else {
            print(report.table())
        }
        // A batch of files tells the ones that gave nothing by the status (it was 0 with no face at all).
        if report.confident.isEmpty, !report.estimates.contains(where: { $0.breathingRateBpm != nil }) {
            let noFace = report.face.map { $0.stats.framesDetected == 0 } ?? false
            StandardStream.error.write(Data(("note: \(file): no pulse or breathing reading ("
                + (noFace ? "no face found" : "no window was confident") + "): exit status 1\n").utf8))
            throw ExitCode.failure
        }
    }
}

/// Why `analyze` stopped, phrased as what to do about it.
typealias AnalyzeError = AnalysisError

/// Estimates plus totals, formatted as JSON lines or a table.
struct AnalysisReport {
    var estimates: [RPPGEstimate]
    var frames: Int
    /// Rows or frames dropped because their time did not increase.
    var droppedFrames: Int = 0
    var durationSeconds: Double
    var source: String
    /// The face detector's name and what it found (videos only).
    var face: (detector: String, stats: FaceTrackingStats)?

    private func round(_ v: Double, _ digits: Double) -> Double { (v * digits).rounded() / digits }

    func windowJSON(_ e: RPPGEstimate) -> JSONValue {
        var o: [String: JSONValue] = [
            "type": .string("window"),
            "t_s": .double(round(e.tSeconds, 1000)),
            "window_s": .double(round(e.windowSeconds, 100)),
            "confidence": .double(round(e.confidence, 1000)),
            "breathing_confidence": .double(round(e.breathingConfidence, 1000)),
        ]
        // A window without a spectrum (too few usable frames yet) has no SNR: its -30 was a placeholder that read as
        // a measurement.
        if e.candidateHrBpm != nil { o["snr_db"] = .double(round(e.snrDb, 100)) }
        if let hr = e.hrBpm { o["hr_bpm"] = .double(round(hr, 100)) }
        if let br = e.breathingRateBpm { o["breathing_rate_bpm"] = .double(round(br, 100)) }
        if let angle = e.colourAngleDegrees { o["colour_angle_deg"] = .double(round(angle, 10)) }
        return .object(o)
    }

    var confident: [Double] { estimates.compactMap(\.hrBpm) }

    /// Confident windows further apart than this (bpm) are said to disagree, or the pulse to have changed.
    static let spreadNoteBpm = 15.0

    func summaryJSON() -> JSONValue {
        var o: [String: JSONValue] = [
            "type": .string("summary"),
            "source": .string(source),
            "windows": .int(Int64(estimates.count)),
            "confident_windows": .int(Int64(confident.count)),
            "colour_withheld_windows": .int(Int64(estimates.filter(\.withheldForColour).count)),
            "confident_fraction": .double(estimates.isEmpty ? 0 : round(Double(confident.count) / Double(estimates.count), 1000)),
            "frames": .int(Int64(frames)),
            "dropped_frames": .int(Int64(droppedFrames)),
            "duration_s": .double(round(durationSeconds, 1000)),
        ]
        if let face {
            o["face_detector"] = .string(face.detector)
            o["frames_face_detected"] = .int(Int64(face.stats.framesDetected))
            o["frames_face_tracked"] = .int(Int64(face.stats.framesTracked))
            o["frames_no_face"] = .int(Int64(face.stats.framesNoFace))
            o["frames_skin_colour_failed"] = .int(Int64(face.stats.framesTooFewSkinPixels))
            o["frames_too_dark"] = .int(Int64(face.stats.framesTooDark))
            o["frames_too_bright"] = .int(Int64(face.stats.framesTooBright))
        }
        if !confident.isEmpty {
            o["mean_hr_bpm"] = .double(round(confident.reduce(0, +) / Double(confident.count), 100))
            o["min_hr_bpm"] = .double(round(confident.min()!, 100))
            o["max_hr_bpm"] = .double(round(confident.max()!, 100))
        }
        let breaths = estimates.compactMap(\.breathingRateBpm)
        if !breaths.isEmpty {
            o["mean_breathing_rate_bpm"] = .double(round(breaths.reduce(0, +) / Double(breaths.count), 100))
        }
        return .object(o)
    }

    /// Why the face gave little or nothing, with what to change: said when a reason held for a fifth of the frames
    /// or more (a greyscale video, a dark room and a face out of frame all gave "no confident HR" alone).
    func faceNotes(_ stats: FaceTrackingStats) -> [String] {
        var notes: [String] = []
        let frames = max(1, stats.frames)
        func share(_ n: Int) -> String { "\(n) of \(stats.frames) frames" }
        if stats.framesDetected == 0 {
            notes.append("no face found: the face must be upright, whole in the frame, lit from the front and at "
                + "least a tenth of the frame's width (the detector finds frontal faces). A video of skin without a "
                + "face (a cropped forehead, a finger) is read as a mean-RGB trace (FILE.csv with R, G, B and t_s)")
        } else if stats.framesNoFace * 5 >= frames {
            notes.append("the face was lost in \(share(stats.framesNoFace)): keep it whole in the frame, facing the camera")
        }
        if stats.framesTooFewSkinPixels * 5 >= frames {
            notes.append("the face's skin failed the colour test in \(share(stats.framesTooFewSkinPixels)): the pulse is read "
                + "from skin colour, so a greyscale video, a strong colour cast or coloured light gives nothing")
        }
        if stats.framesTooDark * 5 >= frames {
            notes.append("the face was too dark in \(share(stats.framesTooDark)): add steady light in front of the face")
        }
        if stats.framesTooBright * 5 >= frames {
            notes.append("the face was overexposed in \(share(stats.framesTooBright)): less light on it, or lower the exposure")
        }
        return notes
    }

    func jsonLines() -> [String] {
        estimates.map { windowJSON($0).jsonString } + [summaryJSON().jsonString]
    }

    func table() -> String {
        func pad(_ s: String, _ n: Int) -> String { String(repeating: " ", count: max(0, n - s.count)) + s }
        func f(_ v: Double, _ d: Int) -> String { String(format: "%.\(d)f", v) }
        var out = [pad("t_s", 8) + pad("window_s", 10) + pad("hr_bpm", 8) + pad("conf", 6) + pad("snr_db", 8)
                   + pad("breaths/min", 13) + pad("b_conf", 8)]
        for e in estimates {
            out.append(pad(f(e.tSeconds, 1), 8) + pad(f(e.windowSeconds, 1), 10) + pad(e.hrBpm.map { f($0, 1) } ?? "-", 8)
                       + pad(f(e.confidence, 2), 6) + pad(e.candidateHrBpm == nil ? "-" : f(e.snrDb, 1), 8)
                       + pad(e.breathingRateBpm.map { f($0, 1) } ?? "-", 13) + pad(f(e.breathingConfidence, 2), 8))
        }
        let n = confident.count
        let pct = estimates.isEmpty ? 0 : 100 * Double(n) / Double(estimates.count)
        if n > 0 {
            out.append("mean HR \(f(confident.reduce(0, +) / Double(n), 1)) bpm over \(n) of \(estimates.count) windows (\(f(pct, 0)) % confident)")
            let (low, high) = (confident.min()!, confident.max()!)
            if high - low > Self.spreadNoteBpm {
                out.append("the confident windows read \(f(low, 1)) to \(f(high, 1)) bpm: a pulse that changed, or "
                    + "confident readings that are wrong (compressed video gives some: docs/rppg.md); the mean is no "
                    + "one rate, read the windows")
            }
        } else {
            out.append("no confident HR in \(estimates.count) windows")
        }
        let withheld = estimates.filter(\.withheldForColour).count
        if withheld > 0 {
            out.append("\(withheld) window\(withheld == 1 ? "" : "s") withheld by --colour-check: a rhythm whose colour change "
                + "is not blood's (colour_angle_deg in --json)")
        }
        let droppedNote = droppedFrames > 0 ? ", \(droppedFrames) dropped (time out of order)" : ""
        out.append("\(frames) frames\(droppedNote), \(f(durationSeconds, 1)) s (\(source))")
        if let face {
            out.append("face (\(face.detector)): \(face.stats.framesDetected) frames detected, "
                       + "\(face.stats.framesTracked) tracked, \(face.stats.framesNoFace) without a face")
            out.append(contentsOf: faceNotes(face.stats))
        }
        return out.joined(separator: "\n")
    }
}
