import Foundation
import RPPG
import RPPGAnalysis
import Testing

/// The offline video path with messy frame clocks: repeated, backwards and missing frame times are dropped and
/// counted, and the rest is analysed.
@Suite struct OfflineAnalysisTests {
    static var ffmpeg: String? { FFmpegVideo.which("ffmpeg") }

    /// Writes a small lossless video (a skin-coloured ellipse with a 90 bpm pulse on a blue background).
    static func writeVideo(frames: Int, to url: URL) throws {
        let w = 160, h = 120
        var raw = Data()
        raw.reserveCapacity(w * h * 3 * frames)
        for i in 0..<frames {
            let p = sin(2 * Double.pi * 1.5 * Double(i) / 30)
            let skin = (190 * (1 + 0.004 * p), 140 * (1 + 0.009 * p), 110 * (1 + 0.006 * p))
            for y in 0..<h {
                for x in 0..<w {
                    let nx = (Double(x) - 80) / 28, ny = (Double(y) - 56) / 38
                    let c = nx * nx + ny * ny <= 1 ? skin : (70.0, 100.0, 160.0)
                    raw.append(UInt8(c.0.rounded()))
                    raw.append(UInt8(c.1.rounded()))
                    raw.append(UInt8(c.2.rounded()))
                }
            }
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: try #require(ffmpeg))
        p.arguments = ["-nostats", "-v", "error", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", "\(w)x\(h)", "-r", "30",
                       "-i", "-", "-c:v", "ffv1", url.path]
        let input = Pipe()
        p.standardInput = input
        try p.run()
        try input.fileHandleForWriting.write(contentsOf: raw)
        try input.fileHandleForWriting.close()
        p.waitUntilExit()
        try #require(p.terminationStatus == 0)
    }

    @Test(.enabled(if: OfflineAnalysisTests.ffmpeg != nil, "ffmpeg is not on PATH (apt-get install ffmpeg)"))
    func repeatedAndMissingFrameTimesAreDroppedAndCounted() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("rppg-offline-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let video = dir.appendingPathComponent("face.mkv")
        try Self.writeVideo(frames: 420, to: video)

        // The container's own clock: every frame kept.
        let plain = try OfflineAnalysis.analyze(video: video.path, configuration: RPPGConfiguration())
        #expect(plain.frames == 420)
        #expect(plain.droppedFrames == 0)
        #expect(abs(plain.durationSeconds - 14) < 0.05)

        // A caller's clock with a repeated time, a backwards time, a time 100 s late (every later frame was dropped
        // as not later than it), and one frame too few (the last frame has none).
        var times = (0..<419).map { Double($0) / 30 }
        times[100] = times[99]
        times[200] = times[150]
        times[300] += 100
        var seen: [Double] = []
        let messy = try OfflineAnalysis.analyze(video: video.path, configuration: RPPGConfiguration(), frameTimes: times) {
            seen.append($0.timestampSeconds)
        }
        #expect(messy.droppedFrames == 4)
        #expect(messy.frames == 416)
        #expect(seen.count == 416 && seen.last == times[418])
        #expect(zip(seen.dropFirst(), seen).allSatisfy { $0 > $1 })
        // One estimate per second of kept frames, in time order (whether a pulse is read depends on the ROI stage).
        #expect(messy.estimates.count == 13)
        #expect(zip(messy.estimates.dropFirst(), messy.estimates).allSatisfy { $0.tSeconds > $1.tSeconds })
    }

    /// The frames kept are the most whose times increase: a repeated time keeps its first frame, and a time far
    /// off (late or early) is left out alone.
    @Test func theFramesKeptAreTheMostInOrder() {
        #expect(FrameOrder.inOrder([0, 1, 1, 2, 100, 3, 4, 2.5, 5]) == [true, true, false, true, false, true, true, false, true])
        #expect(FrameOrder.inOrder([5, 0.1, 0.2, 0.3]) == [false, true, true, true])
        #expect(FrameOrder.inOrder([0, .nan, 1]) == [true, false, true])
        #expect(FrameOrder.inOrder([]) == [])
    }

    /// A phone's clip: stored sideways with a display rotation, which ffmpeg applies while decoding. The frames are
    /// read upright, the same pixels as the upright original (the stored sides before: every row cut at the wrong
    /// width, a sheared image).
    @Test(.enabled(if: OfflineAnalysisTests.ffmpeg != nil, "ffmpeg is not on PATH (apt-get install ffmpeg)"))
    func aRotatedPhoneClipIsReadUpright() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("rppg-rotated-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let upright = dir.appendingPathComponent("face.mkv")
        try Self.writeVideo(frames: 30, to: upright)
        let sideways = dir.appendingPathComponent("sideways.mp4"), phone = dir.appendingPathComponent("phone.mp4")
        for args in [
            ["-i", upright.path, "-vf", "transpose=2", "-c:v", "libx264", "-pix_fmt", "yuv444p", "-qp", "0", sideways.path],
            ["-i", sideways.path, "-c", "copy", "-metadata:s:v:0", "rotate=270", phone.path],
        ] {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: try #require(Self.ffmpeg))
            p.arguments = ["-nostats", "-v", "error", "-y"] + args
            try p.run()
            p.waitUntilExit()
            try #require(p.terminationStatus == 0)
        }
        let video = try FFmpegVideo(path: phone.path)
        #expect(video.width == 160 && video.height == 120, "\(video.width)x\(video.height)")
        func firstFrame(_ v: FFmpegVideo) throws -> [UInt8] {
            var bytes: [UInt8] = []
            try v.decode(time: { Double($0) / 30 }, { f in if bytes.isEmpty { bytes = f.bytes } })
            return bytes
        }
        let want = try firstFrame(FFmpegVideo(path: upright.path)), got = try firstFrame(video)
        try #require(want.count == got.count)
        let meanDifference = zip(want, got).reduce(0.0) { $0 + abs(Double($1.0) - Double($1.1)) } / Double(want.count)
        #expect(meanDifference < 3, "mean difference \(meanDifference) per channel from the upright frame")
    }
}

/// `analyze --frame-times`: times written with decimal commas are read (`0,036` was read as 0 and every later frame
/// dropped, giving a confident wrong pulse); milliseconds are refused with the unit named; a field quoted in an
/// error is cut and escaped.
@Suite struct FrameTimesFileTests {
    func file(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("frames-\(UUID().uuidString).csv").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test func decimalCommasAreRead() throws {
        let plain = try file("0,000\n0,033\n0,067\n0,100\n")
        defer { try? FileManager.default.removeItem(atPath: plain) }
        #expect(try FrameTimesFile.read(plain) == [0, 0.033, 0.067, 0.1])
        let semicolons = try file("frame;t_s;ppg\n0;0,000;1,5\n1;0,033;1,6\n2;0,067;1,4\n")
        defer { try? FileManager.default.removeItem(atPath: semicolons) }
        #expect(try FrameTimesFile.read(semicolons) == [0, 0.033, 0.067])
        let points = try file("t_s,ppg\n0.0,1\n0.033,2\n")
        defer { try? FileManager.default.removeItem(atPath: points) }
        #expect(try FrameTimesFile.read(points) == [0, 0.033])
    }

    @Test func millisecondsAndBadFieldsAreSaid() throws {
        let ms = try file((0..<90).map { String(Double($0) * 33.3) }.joined(separator: "\n"))
        defer { try? FileManager.default.removeItem(atPath: ms) }
        #expect(throws: AnalysisError.self) { try FrameTimesFile.read(ms) }
        do { _ = try FrameTimesFile.read(ms) } catch {
            #expect("\(error)".contains("are they milliseconds? Give seconds"), "\(error)")
        }
        let us = try file((0..<90).map { String(Double($0) * 33_333) }.joined(separator: "\n"))
        defer { try? FileManager.default.removeItem(atPath: us) }
        do { _ = try FrameTimesFile.read(us) } catch {
            #expect("\(error)".contains("are they microseconds? Give seconds (divide by 1000000)"), "\(error)")
        }
        let bidi = try file("0.0\nabc\u{202E}" + String(repeating: "x", count: 100) + "\n")
        defer { try? FileManager.default.removeItem(atPath: bidi) }
        do {
            _ = try FrameTimesFile.read(bidi)
            Issue.record("read a field that is no number")
        } catch {
            let said = "\(error)"
            #expect(said.contains("line 2: \"abc\\u{202E}xxx") && said.contains("…\" is not a time in seconds"), "\(said)")
            #expect(!said.unicodeScalars.contains("\u{202E}") && said.count < 200, "\(said)")
        }
    }

    /// Times that do not increase are refused (every frame but one was dropped, then "record longer"); a time far
    /// from its neighbours is kept and said with its line (a first time 100 s early made an 8-s clip 108 s long
    /// without a word; a clock reset dropped the frames on one side of it with a warning naming none).
    @Test func timesThatDoNotIncreaseAreRefusedAndFarOffTimesSaid() throws {
        func frames(_ n: Int, from start: Double = 0) -> [String] { (0..<n).map { String(format: "%.4f", start + Double($0) / 30) } }
        for (name, lines, expected) in [
            ("equal", Array(repeating: "1.5", count: 60), "the median step is 0"),
            ("descending", frames(60).reversed(), "they decrease"),
        ] {
            let path = try file(lines.joined(separator: "\n"))
            defer { try? FileManager.default.removeItem(atPath: path) }
            do {
                _ = try FrameTimesFile.read(path)
                Issue.record("\(name): read")
            } catch { #expect("\(error)".contains(expected) && "\(error)".contains("in frame order"), "\(name): \(error)") }
        }
        func warnings(_ lines: [String]) throws -> ([Double], [String]) {
            let path = try file("t_s\n" + lines.joined(separator: "\n"))
            defer { try? FileManager.default.removeItem(atPath: path) }
            var said: [String] = []
            let times = try FrameTimesFile.read(path) { said.append($0) }
            return (times, said)
        }
        let clean = try warnings(frames(240))
        #expect(clean.0.count == 240 && clean.1.isEmpty, "\(clean.1)")
        // A real capture's gap under 2 s (UBFC has one of 0.9 s) is not said.
        #expect(try warnings(frames(120) + frames(120, from: 4.9)).1.isEmpty)
        // A far-off first or last time is dropped (it stretched the recording), said with its line.
        let early = try warnings(["-100"] + frames(240).dropFirst())
        #expect(early.0.count == 240 && early.0[0].isNaN && early.0[1...].allSatisfy { $0.isFinite } && early.1.count == 1, "\(early.1)")
        #expect(early.1.first?.contains("line 2: the first time (-100.000 s) is 100.033 s before the next") == true
                && early.1.first?.contains("That frame is dropped") == true, "\(early.1)")
        let late = try warnings(frames(239) + ["108"])
        #expect(late.0.last?.isNaN == true && late.1.first?.contains("line 241: the last time (108.000 s)") == true, "\(late.1)")
        // A clock reset: the frames after it follow the ones before, 2 s later (half the recording was dropped).
        let reset = try warnings(frames(170) + frames(70, from: 0.5))
        #expect(reset.1.first?.contains("line 172: the time goes back 5.133 s (5.633 to 0.500): a clock reset?") == true, "\(reset.1)")
        #expect(abs(reset.0[170] - (reset.0[169] + 2)) < 1e-9 && zip(reset.0.dropFirst(), reset.0).allSatisfy { $0 > $1 }, "\(reset.0[168...172])")
        // One wrong time in the middle, out and back: that frame alone is dropped (it was taken as a reset or a gap).
        var lone = frames(240)
        lone[100] = "0.2"
        let dropped = try warnings(lone)
        #expect(dropped.1.count == 1 && dropped.1[0].contains("line 102: 0.200 s between 3.300 and 3.367 s: a wrong time?"), "\(dropped.1)")
        #expect(dropped.0.filter { $0.isNaN }.count == 1 && dropped.0[100].isNaN)
        lone[100] = "300"
        let far = try warnings(lone)
        #expect(far.0.filter { $0.isNaN }.count == 1, "\(far.1)")
        let gaps = try warnings((0..<6).flatMap { frames(40, from: Double($0) * 10) })
        #expect(gaps.1.count == 4 && gaps.1[0].contains("line 42: 8.700 s after the frame before") && gaps.1[3].hasSuffix(": and 2 more such steps"), "\(gaps.1)")
        #expect(gaps.0.allSatisfy { $0.isFinite })
        // A decimal comma among points is two fields run together, not a time (it was read as 1.2 s).
        let mixed = try file((frames(100) + ["1,2"] + frames(100, from: 3.5)).joined(separator: "\n"))
        defer { try? FileManager.default.removeItem(atPath: mixed) }
        do {
            _ = try FrameTimesFile.read(mixed)
            Issue.record("read a decimal comma among points")
        } catch { #expect("\(error)".contains("line 101: \"1,2\" has a decimal comma where line 1 has a point"), "\(error)") }
    }
}
