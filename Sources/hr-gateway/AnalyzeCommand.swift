import ArgumentParser
import FaceDetection
import Foundation
import GatewayEngine
import RPPG

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
                          size and frame rate from ffprobe, frame i at i / fps.
                          Needs ffmpeg on PATH (Debian/Ubuntu: apt-get install ffmpeg).
              FILE.csv    mean skin RGB per frame: a header naming R, G, B (0-255)
                          and optionally t_s (seconds); other columns are ignored.
                          Without t_s, give --fps.

            OUTPUT
              One row per window ending at t_s seconds from the start of the file.
              hr_bpm only when confidence (0-1) >= 0.5; below that: no reading.
              First reading after 5 s of usable frames, breathing after 20 s.
              snr_db: de Haan SNR of the pulse (about +5..+10 dB on good webcam
              video, below 0 dB when there is no usable pulse).

              --json prints one object per line:
                {"type":"window","t_s":..,"window_s":..,"hr_bpm":..,"confidence":..,
                 "snr_db":..,"breathing_rate_bpm":..,"breathing_confidence":..}
              (hr_bpm / breathing_rate_bpm absent when not confident), then
                {"type":"summary","mean_hr_bpm":..,"confident_fraction":..,
                 "windows":..,"frames":..,"duration_s":..,"source":..}
              and for a video also "face_detector" (the cascade), "frames_face_detected"
              (detector ran and found the face: about 5 per second),
              "frames_face_tracked" (box held between detections), "frames_no_face".

            FACE
              OpenCV's cascade face detector (Debian package opencv-data) 5 times a
              second on a downscaled grey frame; the box is held steady in between.

            EXAMPLES
              hr-gateway analyze face.mp4
              hr-gateway analyze face.mkv --json > windows.jsonl
              hr-gateway analyze trace.csv --fps 15
              hr-gateway analyze exercise.mp4 --max-hz 4.0
            """
    )

    @Argument(help: "A video file, or an RGB trace ending in .csv.")
    var file: String

    @Option(help: "Frame rate of a CSV trace without a t_s column (frames per second).")
    var fps: Double?

    @Option(name: .customLong("max-hz"), help: "Top of the pulse band in Hz, 3.0 (180 bpm) to 4.0 (240 bpm).")
    var maxHz: Double = 3.0

    @Option(help: ArgumentHelp("OpenCV face cascade file for videos (Debian package opencv-data).", valueName: "xml"))
    var faceCascade: String = CascadeFaceDetector.defaultCascadePath

    @Flag(help: "Print JSON lines instead of a table.")
    var json = false

    func validate() throws {
        guard maxHz >= 2.0, maxHz <= 4.0 else { throw ValidationError("--max-hz must be within 2.0-4.0, got \(maxHz)") }
        if let fps, !(fps >= 5 && fps <= 1000) { throw ValidationError("--fps must be within 5-1000, got \(fps)") }
    }

    func run() throws {
        var config = RPPGConfiguration()
        config.pulseBandHz = 0.7...maxHz
        config.sampleRateHz = max(30, (2.2 * maxHz).rounded(.up))
        let isCSV = file.lowercased().hasSuffix(".csv")
        let detector: CascadeFaceDetector? = isCSV ? nil : try CascadeFaceDetector(cascadePath: faceCascade)
        var estimator = try RPPGEstimator(configuration: config, faceDetector: detector)
        var estimates: [RPPGEstimate] = []
        var frames = 0
        var duration = 0.0
        if isCSV {
            guard let data = FileManager.default.contents(atPath: file) else {
                throw AnalyzeError("cannot read \(file): no such file or not readable")
            }
            let text = String(decoding: data, as: UTF8.self)
            let samples: [RPPGSample]
            do {
                samples = try RGBTrace.parse(text, framesPerSecond: fps)
            } catch {
                throw AnalyzeError("\(file): \(error.description)")
            }
            // Times are reported from the start of the file, whatever clock the t_s column used.
            let t0 = samples.first?.tSeconds ?? 0
            for var s in samples {
                s.tSeconds -= t0
                if let e = estimator.append(s) { estimates.append(e) }
            }
            frames = samples.count
            duration = (samples.last?.tSeconds ?? 0) - (samples.first?.tSeconds ?? 0)
        } else {
            guard FileManager.default.isReadableFile(atPath: file) else {
                throw AnalyzeError("cannot read \(file): no such file or not readable")
            }
            let video = try FFmpegVideo(path: file)
            try video.decode { frame in
                frames += 1
                duration = frame.timestampSeconds
                if let e = estimator.process(frame) { estimates.append(e) }
            }
            guard frames > 0 else { throw AnalyzeError("ffmpeg decoded no frames from \(file)") }
            duration += 1 / video.framesPerSecond
        }
        var report = AnalysisReport(estimates: estimates, frames: frames, durationSeconds: duration,
                                    source: isCSV ? "csv" : "video")
        if !isCSV { report.face = (estimator.tracker.detectorName, estimator.tracker.stats) }
        if json {
            for line in report.jsonLines() { print(line) }
        } else {
            print(report.table())
        }
    }
}

/// Why `analyze` stopped, phrased as what to do about it.
struct AnalyzeError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Estimates plus totals, formatted as JSON lines or a table.
struct AnalysisReport {
    var estimates: [RPPGEstimate]
    var frames: Int
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
            "snr_db": .double(round(e.snrDb, 100)),
            "breathing_confidence": .double(round(e.breathingConfidence, 1000)),
        ]
        if let hr = e.hrBpm { o["hr_bpm"] = .double(round(hr, 100)) }
        if let br = e.breathingRateBpm { o["breathing_rate_bpm"] = .double(round(br, 100)) }
        return .object(o)
    }

    var confident: [Double] { estimates.compactMap(\.hrBpm) }

    func summaryJSON() -> JSONValue {
        var o: [String: JSONValue] = [
            "type": .string("summary"),
            "source": .string(source),
            "windows": .int(Int64(estimates.count)),
            "confident_windows": .int(Int64(confident.count)),
            "confident_fraction": .double(estimates.isEmpty ? 0 : round(Double(confident.count) / Double(estimates.count), 1000)),
            "frames": .int(Int64(frames)),
            "duration_s": .double(round(durationSeconds, 1000)),
        ]
        if let face {
            o["face_detector"] = .string(face.detector)
            o["frames_face_detected"] = .int(Int64(face.stats.framesDetected))
            o["frames_face_tracked"] = .int(Int64(face.stats.framesTracked))
            o["frames_no_face"] = .int(Int64(face.stats.framesNoFace))
        }
        if !confident.isEmpty { o["mean_hr_bpm"] = .double(round(confident.reduce(0, +) / Double(confident.count), 100)) }
        let breaths = estimates.compactMap(\.breathingRateBpm)
        if !breaths.isEmpty {
            o["mean_breathing_rate_bpm"] = .double(round(breaths.reduce(0, +) / Double(breaths.count), 100))
        }
        return .object(o)
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
                       + pad(f(e.confidence, 2), 6) + pad(f(e.snrDb, 1), 8)
                       + pad(e.breathingRateBpm.map { f($0, 1) } ?? "-", 13) + pad(f(e.breathingConfidence, 2), 8))
        }
        let n = confident.count
        let pct = estimates.isEmpty ? 0 : 100 * Double(n) / Double(estimates.count)
        if n > 0 {
            out.append("mean HR \(f(confident.reduce(0, +) / Double(n), 1)) bpm over \(n) of \(estimates.count) windows (\(f(pct, 0)) % confident)")
        } else {
            out.append("no confident HR in \(estimates.count) windows")
        }
        out.append("\(frames) frames, \(f(durationSeconds, 1)) s (\(source))")
        if let face {
            out.append("face (\(face.detector)): \(face.stats.framesDetected) frames detected, "
                       + "\(face.stats.framesTracked) tracked, \(face.stats.framesNoFace) without a face")
        }
        return out.joined(separator: "\n")
    }
}

/// A video decoded by an external ffmpeg into RGB24 frames.
struct FFmpegVideo {
    let path: String
    let width: Int
    let height: Int
    let framesPerSecond: Double
    let ffmpeg: String

    init(path: String) throws {
        guard let ffmpeg = FFmpegVideo.which("ffmpeg"), let ffprobe = FFmpegVideo.which("ffprobe") else {
            throw AnalyzeError("ffmpeg/ffprobe not found on PATH: install them (Debian/Ubuntu: apt-get install ffmpeg), or analyse an RGB trace CSV instead")
        }
        self.path = path
        self.ffmpeg = ffmpeg
        let (status, out, err) = try FFmpegVideo.run(ffprobe, [
            "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=width,height,avg_frame_rate,r_frame_rate",
            "-of", "default=noprint_wrappers=1", path,
        ])
        guard status == 0 else { throw AnalyzeError("ffprobe cannot read \(path): \(err.trimmingCharacters(in: .whitespacesAndNewlines))") }
        var fields: [String: String] = [:]
        for line in out.split(whereSeparator: \.isNewline) {
            let kv = line.split(separator: "=", maxSplits: 1).map(String.init)
            if kv.count == 2 { fields[kv[0]] = kv[1] }
        }
        guard let w = fields["width"].flatMap({ Int($0) }), let h = fields["height"].flatMap({ Int($0) }) else {
            throw AnalyzeError("\(path) has no video stream (ffprobe found none)")
        }
        func rate(_ s: String?) -> Double? {
            guard let s else { return nil }
            let p = s.split(separator: "/").compactMap { Double($0) }
            if p.count == 2, p[1] > 0, p[0] > 0 { return p[0] / p[1] }
            if p.count == 1, p[0] > 0 { return p[0] }
            return nil
        }
        guard let fps = rate(fields["avg_frame_rate"]) ?? rate(fields["r_frame_rate"]), fps >= 1, fps <= 1000 else {
            throw AnalyzeError("ffprobe reports no usable frame rate for \(path)")
        }
        width = w
        height = h
        framesPerSecond = fps
    }

    /// Streams the frames through `body`; frame i is stamped i / fps.
    func decode(_ body: (VideoFrame) throws -> Void) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ffmpeg)
        process.arguments = ["-nostdin", "-v", "error", "-i", path, "-map", "0:v:0", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"]
        let stdout = Pipe()
        let errURL = FileManager.default.temporaryDirectory.appendingPathComponent("hr-gateway-ffmpeg-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).log")
        guard FileManager.default.createFile(atPath: errURL.path, contents: nil) else {
            throw AnalyzeError("cannot create a temporary file in \(FileManager.default.temporaryDirectory.path)")
        }
        defer { try? FileManager.default.removeItem(at: errURL) }
        let errHandle = try FileHandle(forWritingTo: errURL)
        process.standardOutput = stdout
        process.standardError = errHandle
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let size = width * height * 3
        let reader = stdout.fileHandleForReading
        var buffer: [UInt8] = []
        buffer.reserveCapacity(size)
        var index = 0
        var failure: Error?
        while true {
            guard let chunk = try reader.read(upToCount: size - buffer.count), !chunk.isEmpty else { break }
            buffer.append(contentsOf: chunk)
            if buffer.count == size {
                do {
                    let frame = try VideoFrame(width: width, height: height, format: .rgb24, bytes: buffer,
                                               timestampSeconds: Double(index) / framesPerSecond)
                    try body(frame)
                } catch {
                    failure = error
                    process.terminate()
                    break
                }
                index += 1
                buffer.removeAll(keepingCapacity: true)
            }
        }
        process.waitUntilExit()
        try? errHandle.close()
        if let failure { throw failure }
        if process.terminationStatus != 0 {
            let err = (try? String(contentsOf: errURL, encoding: .utf8)) ?? ""
            throw AnalyzeError("ffmpeg failed on \(path) (exit \(process.terminationStatus)): \(err.trimmingCharacters(in: .whitespacesAndNewlines))")
        }
    }

    static func which(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for dir in path.split(separator: ":") {
            let candidate = "\(dir)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    static func run(_ exe: String, _ args: [String]) throws -> (Int32, String, String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = args
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = FileHandle.nullDevice
        try p.run()
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
    }
}
