import Foundation
import GatewayEngine
import RPPGSynthetic
import Testing

/// Runs the built `hr-gateway analyze` on files written by the tests.
@Suite struct AnalyzeCommandTests {
    /// The directory holding the test bundle also holds the built products.
    static let productsDirectory: URL = {
        #if os(macOS)
        if let bundle = Bundle.allBundles.first(where: { $0.bundlePath.hasSuffix(".xctest") }) {
            return bundle.bundleURL.deletingLastPathComponent()
        }
        #endif
        let exe = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        return exe.deletingLastPathComponent()
    }()

    static var ffmpegAvailable: Bool { which("ffmpeg") != nil }

    static func which(_ name: String) -> String? {
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let p = "\(dir)/\(name)"
            if FileManager.default.isExecutableFile(atPath: p) { return p }
        }
        return nil
    }

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs an executable with stdout/stderr captured in files (no pipe back-pressure).
    static func run(_ executable: URL, _ args: [String], in dir: URL, stdin: Data? = nil) throws -> Result {
        let outURL = dir.appendingPathComponent("stdout-\(UUID().uuidString)")
        let errURL = dir.appendingPathComponent("stderr-\(UUID().uuidString)")
        #expect(FileManager.default.createFile(atPath: outURL.path, contents: nil))
        #expect(FileManager.default.createFile(atPath: errURL.path, contents: nil))
        let out = try FileHandle(forWritingTo: outURL), err = try FileHandle(forWritingTo: errURL)
        let p = Process()
        p.executableURL = executable
        p.arguments = args
        p.standardOutput = out
        p.standardError = err
        let input = Pipe()
        p.standardInput = stdin == nil ? FileHandle.nullDevice : input
        try p.run()
        if let stdin {
            try input.fileHandleForWriting.write(contentsOf: stdin)
            try input.fileHandleForWriting.close()
        }
        p.waitUntilExit()
        try out.close()
        try err.close()
        return Result(status: p.terminationStatus, stdout: try String(contentsOf: outURL, encoding: .utf8),
                      stderr: try String(contentsOf: errURL, encoding: .utf8))
    }

    static func analyze(_ args: [String], in dir: URL) throws -> Result {
        try run(productsDirectory.appendingPathComponent("hr-gateway"), ["analyze"] + args, in: dir)
    }

    static func tempDir() throws -> URL {
        let d = FileManager.default.temporaryDirectory.appendingPathComponent("hr-gateway-analyze-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: d, withIntermediateDirectories: true)
        return d
    }

    /// Deterministic uniform noise in [-1, 1).
    struct LCG {
        var state: UInt64
        mutating func next() -> Double {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Double(state >> 11) / Double(1 << 52) - 1
        }
    }

    /// Mean skin RGB of a face with a 1.1 Hz (66 bpm) pulse, sampled with timing jitter.
    static func traceCSV(seconds: Double, withTime: Bool) -> (String, Int) {
        var rng = LCG(state: 42)
        var lines = [withTime ? "t_s,R,G,B,note" : "frame,R,G,B"]
        var i = 0
        while Double(i) / 30 < seconds {
            let t = Double(i) / 30 + (withTime ? 0.004 * rng.next() : 0)
            let p = sin(2 * Double.pi * 1.1 * t) + 0.3 * sin(4 * Double.pi * 1.1 * t)
            let r = 180 * (1 + 0.0015 * p) + 0.05 * rng.next()
            let g = 130 * (1 + 0.004 * p) + 0.05 * rng.next()
            let b = 100 * (1 + 0.0025 * p) + 0.05 * rng.next()
            // A capture clock that does not start at zero: the output still counts from the start of the file.
            let head = withTime ? String(format: "%.4f", 100 + t) : "\(i)"
            lines.append("\(head),\(String(format: "%.3f,%.3f,%.3f", r, g, b))" + (withTime ? ",x" : ""))
            i += 1
        }
        return (lines.joined(separator: "\n") + "\n", i)
    }

    static func parseLines(_ text: String) throws -> [JSONValue] {
        try text.split(whereSeparator: \.isNewline).map { try JSONValue(parsing: String($0)) }
    }

    @Test func csvTraceWithTimesGivesWindowsAndSummary() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (csv, rows) = Self.traceCSV(seconds: 20, withTime: true)
        let file = dir.appendingPathComponent("trace.csv")
        try csv.write(to: file, atomically: true, encoding: .utf8)
        let r = try Self.analyze([file.path, "--json"], in: dir)
        #expect(r.status == 0, "stderr: \(r.stderr)")
        #expect(!r.stdout.contains("null"))
        let objects = try Self.parseLines(r.stdout)
        let windows = objects.dropLast()
        let summary = try #require(objects.last)
        #expect(summary["type"]?.stringValue == "summary")
        #expect(summary["frames"]?.intValue == Int64(rows))
        #expect(abs((summary["duration_s"]?.doubleValue ?? 0) - 20) < 0.2)
        #expect(abs((summary["mean_hr_bpm"]?.doubleValue ?? 0) - 66) <= 3)
        #expect((summary["confident_fraction"]?.doubleValue ?? 0) > 0.5)
        #expect(windows.count >= 18)
        #expect(windows.contains { $0["snr_db"] == nil }, "the first windows have no spectrum yet")
        let low = try #require(summary["min_hr_bpm"]?.doubleValue)
        let high = try #require(summary["max_hr_bpm"]?.doubleValue)
        #expect(low <= (summary["mean_hr_bpm"]?.doubleValue ?? 0) && high >= low && high - low < 6)
        let firstT = try #require(windows.first?["t_s"]?.doubleValue)
        #expect(firstT >= 0.9 && firstT <= 1.1)
        var lastT = -1.0
        for w in windows {
            #expect(w["type"]?.stringValue == "window")
            let t = try #require(w["t_s"]?.doubleValue)
            #expect(t > lastT)
            lastT = t
            let c = try #require(w["confidence"]?.doubleValue)
            #expect((0...1).contains(c))
            // No SNR before a window has a spectrum (its -30 placeholder read as a measurement); one after.
            if t >= 6 { #expect(w["snr_db"]?.doubleValue != nil) }
            if w["snr_db"] == nil { #expect(w["hr_bpm"] == nil && c == 0) }
            #expect(w["window_s"]?.doubleValue != nil)
            if t >= 10 {
                let hr = try #require(w["hr_bpm"]?.doubleValue, "no hr_bpm at \(t) s")
                #expect(abs(hr - 66) <= 3)
            }
            if w["hr_bpm"] != nil { #expect(c >= 0.5) } else { #expect(c < 0.5) }
        }
        #expect(summary["dropped_frames"]?.intValue == 0)
        #expect(r.stderr.isEmpty)
    }

    /// Real traces repeat a timestamp now and then: the file is analysed, the rows are dropped, counted in the
    /// summary (JSON and table) and warned about once on stderr.
    @Test func repeatedTimestampsAreDroppedAndCounted() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (csv, rows) = Self.traceCSV(seconds: 14, withTime: true)
        var lines = csv.split(separator: "\n").map(String.init)
        // Repeat row 100 (same t_s, other colour) and put an out-of-order row after row 200.
        lines.insert(lines[100].replacingOccurrences(of: ",x", with: ",dup"), at: 101)
        let early = lines[50].split(separator: ",")
        lines.insert(([String(early[0])] + ["1", "2", "3", "back"]).joined(separator: ","), at: 202)
        let file = dir.appendingPathComponent("messy.csv")
        try (lines.joined(separator: "\n") + "\n").write(to: file, atomically: true, encoding: .utf8)
        let r = try Self.analyze([file.path, "--json"], in: dir)
        #expect(r.status == 0, "stderr: \(r.stderr)")
        let summary = try #require(try Self.parseLines(r.stdout).last)
        #expect(summary["dropped_frames"]?.intValue == 2)
        #expect(summary["frames"]?.intValue == Int64(rows))
        #expect(abs((summary["mean_hr_bpm"]?.doubleValue ?? 0) - 66) <= 3)
        let warnings = r.stderr.split(whereSeparator: \.isNewline)
        #expect(warnings.count == 1)
        #expect(warnings.first?.contains("dropped 2 row(s)") == true)
        #expect(warnings.first?.contains("line 102") == true)
        let table = try Self.analyze([file.path], in: dir)
        #expect(table.status == 0)
        #expect(table.stdout.contains("2 dropped"))

        let onlyRepeats = dir.appendingPathComponent("header-only.csv")
        try "t_s,R,G,B\n".write(to: onlyRepeats, atomically: true, encoding: .utf8)
        let e = try Self.analyze([onlyRepeats.path], in: dir)
        #expect(e.status != 0)
        #expect(e.stderr.contains("no data rows"))
    }

    /// Units the trace format does not take are said (t_s in milliseconds, colours scaled 0-1), where the run
    /// gave only "no confident HR"; a clean trace gets no such warning.
    @Test func tracesInOtherUnitsAreSaid() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (csv, _) = Self.traceCSV(seconds: 14, withTime: true)
        let rows = csv.split(separator: "\n").map(String.init)
        func write(_ name: String, _ transform: ([Double]) -> [Double]) throws -> String {
            let body = rows.dropFirst().map { line -> String in
                let f = line.split(separator: ",")
                let v = transform(f[0...3].map { Double($0)! })
                return v.map { String(format: "%.6f", $0) }.joined(separator: ",") + ",x"
            }
            let file = dir.appendingPathComponent(name)
            try ([rows[0]] + body).joined(separator: "\n").appending("\n").write(to: file, atomically: true, encoding: .utf8)
            return file.path
        }
        let ms = try Self.analyze([try write("ms.csv") { [$0[0] * 1000, $0[1], $0[2], $0[3]] }], in: dir)
        #expect(ms.stderr.contains("is t_s in milliseconds?"), "\(ms.stderr)")
        let unit = try Self.analyze([try write("unit.csv") { [$0[0], $0[1] / 255, $0[2] / 255, $0[3] / 255] }], in: dir)
        #expect(unit.stderr.contains("scaled 0-1?"), "\(unit.stderr)")
        let clean = try Self.analyze([try write("clean.csv") { $0 }], in: dir)
        #expect(clean.status == 0 && !clean.stderr.contains("warning"), "\(clean.stderr)")
        // A frame rate the trace's t_s overrides is said to be ignored; an empty video is said to be empty.
        let both = try Self.analyze([dir.appendingPathComponent("clean.csv").path, "--fps", "15"], in: dir)
        #expect(both.stderr.contains("--fps ignored"), "\(both.stderr)")
        let empty = dir.appendingPathComponent("empty.mp4")
        try Data().write(to: empty)
        let none = try Self.analyze([empty.path], in: dir)
        #expect(none.status == 1 && none.stderr.contains("the file is empty"), "\(none.stderr)")
    }

    @Test func csvTraceWithFpsPrintsATable() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (csv, _) = Self.traceCSV(seconds: 12, withTime: false)
        let file = dir.appendingPathComponent("trace.csv")
        try csv.write(to: file, atomically: true, encoding: .utf8)
        let r = try Self.analyze([file.path, "--fps", "30"], in: dir)
        #expect(r.status == 0, "stderr: \(r.stderr)")
        #expect(r.stdout.contains("hr_bpm"))
        #expect(r.stdout.contains("mean HR 6"))
        let noFps = try Self.analyze([file.path], in: dir)
        #expect(noFps.status != 0)
        #expect(noFps.stderr.contains("--fps"))
        // The colour check needs the face's held skin: a trace is analysed without it, said.
        let checked = try Self.analyze([file.path, "--fps", "30", "--colour-check"], in: dir)
        #expect(checked.status == 0 && checked.stdout == r.stdout, "\(checked.stderr)")
        #expect(checked.stderr.contains("--colour-check needs a video"), "\(checked.stderr)")
    }

    /// A trace shorter than a first window is an error saying so, not "no confident HR" with exit status 0.
    @Test func aTraceTooShortForAWindowIsAnError() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (csv, _) = Self.traceCSV(seconds: 3, withTime: true)
        let file = dir.appendingPathComponent("short.csv")
        try csv.write(to: file, atomically: true, encoding: .utf8)
        let r = try Self.analyze([file.path, "--json"], in: dir)
        #expect(r.status == 1)
        #expect(r.stdout.isEmpty, "\(r.stdout)")
        #expect(r.stderr.contains("shorter than the 5 s a first pulse window needs"), "\(r.stderr)")
    }

    /// A missing video was answered with how to install the face detector's library.
    @Test func aMissingVideoIsSaidBeforeTheFaceDetector() throws {
        let r = try CLI.run(["analyze", "/nonexistent/face.mp4"], environment: ["HR_GATEWAY_OPENCV_LIBRARY": "/nonexistent/lib.so"])
        #expect(r.status == 1)
        #expect(r.stderr.contains("cannot read /nonexistent/face.mp4: no such file"), "\(r.stderr)")
    }

    @Test func badCSVNamesTheLine() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("bad.csv")
        try "t_s,R,G,B\n0.0,100,90,80\n0.033,100,90,80\n0.066,100,abc,80\n".write(to: file, atomically: true, encoding: .utf8)
        let r = try Self.analyze([file.path, "--json"], in: dir)
        #expect(r.status != 0)
        #expect(r.stderr.contains("line 4"))
        #expect(r.stderr.contains("abc"))
        #expect(r.stdout.isEmpty)

        let header = dir.appendingPathComponent("header.csv")
        try "time,red,green\n0,1,2\n".write(to: header, atomically: true, encoding: .utf8)
        let h = try Self.analyze([header.path], in: dir)
        #expect(h.status != 0)
        #expect(h.stderr.contains("line 1"))

        let missing = try Self.analyze([dir.appendingPathComponent("nope.csv").path], in: dir)
        #expect(missing.status != 0)
        #expect(missing.stderr.contains("nope.csv"))
    }

    /// 13 s of a face the cascade finds, its pulse at 84 bpm, in front of a wall of the same skin colour (which the
    /// old skin-blob search took for the face), as raw rgb24 frames for ffmpeg.
    static func syntheticFace() -> (SyntheticFaceVideo, Data) {
        var v = SyntheticFaceVideo()
        v.width = 320
        v.height = 240
        v.durationSeconds = 13
        v.heartRateBpm = 84
        v.pulseAmplitude = 0.008
        v.faceStyle = .detailed
        v.background = v.skin
        var raw = Data()
        raw.reserveCapacity(v.width * v.height * 3 * Int(v.durationSeconds * v.framesPerSecond))
        for frame in v.frames(format: .rgb24) { raw.append(contentsOf: frame.bytes) }
        return (v, raw)
    }

    @Test(.enabled(if: AnalyzeCommandTests.ffmpegAvailable, "ffmpeg is not on PATH (apt-get install ffmpeg)"))
    func shortGeneratedVideoThroughFFmpeg() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (v, raw) = Self.syntheticFace()
        let w = v.width, h = v.height, fps = v.framesPerSecond, seconds = v.durationSeconds, hr = 84.0
        let video = dir.appendingPathComponent("face.mkv")
        let ffmpeg = URL(fileURLWithPath: try #require(Self.which("ffmpeg")))
        let enc = try Self.run(ffmpeg, ["-nostats", "-v", "error", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", "\(w)x\(h)",
                                        "-r", "30", "-i", "-", "-c:v", "ffv1", video.path], in: dir, stdin: raw)
        try #require(enc.status == 0, "ffmpeg: \(enc.stderr)")

        let r = try Self.analyze([video.path, "--json"], in: dir)
        #expect(r.status == 0, "stderr: \(r.stderr)")
        let objects = try Self.parseLines(r.stdout)
        let summary = try #require(objects.last)
        #expect(summary["type"]?.stringValue == "summary")
        #expect(summary["source"]?.stringValue == "video")
        #expect(summary["frames"]?.intValue == Int64(seconds * fps))
        #expect(summary["face_detector"]?.stringValue?.hasPrefix("opencv-cascade") == true, "\(summary)")
        let detected = try #require(summary["frames_face_detected"]?.intValue)
        let tracked = try #require(summary["frames_face_tracked"]?.intValue)
        // About 5 detections per second, the box held in between, the face never lost.
        #expect(detected >= 60 && detected <= 66, "\(summary)")
        #expect(detected + tracked == Int64(seconds * fps), "\(summary)")
        #expect(summary["frames_no_face"]?.intValue == 0)
        let late = objects.dropLast().filter { ($0["t_s"]?.doubleValue ?? 0) >= 10 }
        #expect(!late.isEmpty)
        for o in late {
            let v = try #require(o["hr_bpm"]?.doubleValue)
            #expect(abs(v - hr) <= 3)
            // The pulse's colour direction, on the skin the box held, with every window of a video that has a peak.
            #expect(o["colour_angle_deg"]?.doubleValue != nil, "\(o)")
        }
        #expect(summary["colour_withheld_windows"]?.intValue == 0, "\(summary)")
    }

    /// `--frame-times` replaces the file's frame times (a pulse at 84 bpm on frames 1/30 s apart, read on times
    /// 1.25× as far apart, is 84/1.25 bpm); a greyscale video is said to have failed the skin-colour test, a video
    /// without a face ends with status 1 as the greyscale one does, and a 5.0-s clip (last frame at 4.97 s) is said
    /// to be too short, not "no confident HR".
    @Test(.enabled(if: AnalyzeCommandTests.ffmpegAvailable, "ffmpeg is not on PATH (apt-get install ffmpeg)"))
    func frameTimesGreyscaleAndAFiveSecondClipAreSaid() throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (v, raw) = Self.syntheticFace()
        let ffmpeg = URL(fileURLWithPath: try #require(Self.which("ffmpeg")))
        func encode(_ name: String, _ extra: [String]) throws -> String {
            let path = dir.appendingPathComponent(name).path
            let enc = try Self.run(ffmpeg, ["-nostats", "-v", "error", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s",
                                            "\(v.width)x\(v.height)", "-r", "30", "-i", "-"] + extra + ["-c:v", "ffv1", path],
                                   in: dir, stdin: raw)
            try #require(enc.status == 0, "ffmpeg: \(enc.stderr)")
            return path
        }
        let video = try encode("face.mkv", [])
        let frames = Int(v.durationSeconds * v.framesPerSecond)
        let times = "t_s,ppg\n" + (0..<frames).map { "\(Double($0) / 30 * 1.25),0" }.joined(separator: "\n")
        let timesFile = dir.appendingPathComponent("frames.csv")
        try times.write(to: timesFile, atomically: true, encoding: .utf8)
        let stretched = try Self.analyze([video, "--frame-times", timesFile.path, "--json"], in: dir)
        #expect(stretched.status == 0, "\(stretched.stderr)")
        let late = try Self.parseLines(stretched.stdout).dropLast().filter { ($0["t_s"]?.doubleValue ?? 0) >= 12 }
        #expect(!late.isEmpty)
        for o in late {
            let hr = try #require(o["hr_bpm"]?.doubleValue, "\(o)")
            #expect(abs(hr - 84 / 1.25) <= 3, "\(o)")
        }
        // Frames past the end of the times are left out and said, not counted as dropped for their time.
        let fewer = dir.appendingPathComponent("fewer.csv")
        try ("t_s\n" + (0..<(frames - 5)).map { "\(Double($0) / 30)" }.joined(separator: "\n")).write(to: fewer, atomically: true, encoding: .utf8)
        let fewerRun = try Self.analyze([video, "--frame-times", fewer.path, "--json"], in: dir)
        #expect(fewerRun.stderr.contains("the 5 frame(s) past its end were left out"), "\(fewerRun.stderr)")
        #expect(try Self.parseLines(fewerRun.stdout).last?["dropped_frames"]?.intValue == 0, "\(fewerRun.stdout.suffix(400))")
        let short = try Self.analyze([video, "--frame-times", timesFile.path + ".missing"], in: dir)
        #expect(short.status == 1 && short.stderr.contains("cannot read --frame-times"), "\(short.stderr)")

        let grey = try Self.analyze([try encode("grey.mkv", ["-vf", "format=gray", "-pix_fmt", "gray"])], in: dir)
        // No reading: the windows and why, and status 1 (it was 0, so a batch could not tell such a file).
        #expect(grey.status == 1, "\(grey.stderr)")
        #expect(grey.stderr.contains("no pulse or breathing reading (no window was confident): exit status 1"), "\(grey.stderr)")
        #expect(grey.stdout.contains("no confident HR"), "\(grey.stdout)")
        #expect(grey.stdout.contains("skin failed the colour test in 390 of 390 frames"), "\(grey.stdout)")
        // The background alone: no face in any frame.
        let corner = try Self.analyze([try encode("corner.mkv", ["-vf", "crop=iw/4:ih/4:0:0"])], in: dir)
        #expect(corner.status == 1 && corner.stderr.contains("no pulse or breathing reading (no face found)"),
                "\(corner.stderr)\(corner.stdout)")

        // Cut from the file: ffmpeg stopping early on standard input would leave the test a broken pipe.
        let clipPath = dir.appendingPathComponent("clip.mkv").path
        let cut = try Self.run(ffmpeg, ["-nostats", "-v", "error", "-i", video, "-t", "5", "-c:v", "ffv1", clipPath],
                               in: dir)
        try #require(cut.status == 0, "ffmpeg: \(cut.stderr)")
        let clip = try Self.analyze([clipPath], in: dir)
        #expect(clip.status == 1, "\(clip.stdout)")
        #expect(clip.stderr.contains("150 usable frames (4.97 s from the first to the last), shorter than the 5 s"),
                "\(clip.stderr)")
    }
}
