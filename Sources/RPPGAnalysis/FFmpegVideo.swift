import Foundation
import RPPG

/// A video decoded by an external ffmpeg into RGB24 frames.
public struct FFmpegVideo: Sendable {
    public let path: String
    public let width: Int
    public let height: Int
    /// Average frame rate reported by ffprobe.
    public let framesPerSecond: Double
    let ffmpeg: String
    let ffprobe: String

    public init(path: String) throws {
        guard let ffmpeg = FFmpegVideo.which("ffmpeg"), let ffprobe = FFmpegVideo.which("ffprobe") else {
            throw AnalysisError("ffmpeg/ffprobe not found on PATH: install them (Debian/Ubuntu: apt-get install ffmpeg), or analyse an RGB trace CSV instead")
        }
        self.path = path
        self.ffmpeg = ffmpeg
        self.ffprobe = ffprobe
        let (status, out, err) = try FFmpegVideo.run(ffprobe, [
            "-v", "error", "-select_streams", "v:0", "-show_entries",
            "stream=width,height,avg_frame_rate,r_frame_rate:stream_side_data=rotation:stream_tags=rotate",
            "-of", "default=noprint_wrappers=1", path,
        ])
        guard status == 0 else { throw AnalysisError("ffprobe cannot read \(path): \(err.trimmingCharacters(in: .whitespacesAndNewlines))") }
        var fields: [String: String] = [:]
        for line in out.split(whereSeparator: \.isNewline) {
            let kv = line.split(separator: "=", maxSplits: 1).map(String.init)
            if kv.count == 2 { fields[kv[0]] = kv[1] }
        }
        guard let w = fields["width"].flatMap({ Int($0) }), let h = fields["height"].flatMap({ Int($0) }) else {
            throw AnalysisError("\(path) has no video stream (ffprobe found none)")
        }
        func rate(_ s: String?) -> Double? {
            guard let s else { return nil }
            let p = s.split(separator: "/").compactMap { Double($0) }
            if p.count == 2, p[1] > 0, p[0] > 0 { return p[0] / p[1] }
            if p.count == 1, p[0] > 0 { return p[0] }
            return nil
        }
        guard let fps = rate(fields["avg_frame_rate"]) ?? rate(fields["r_frame_rate"]), fps >= 1, fps <= 1000 else {
            throw AnalysisError("ffprobe reports no usable frame rate for \(path)")
        }
        // A phone's clip is stored sideways with a display rotation (the display matrix's `rotation`, or an older
        // `rotate` tag); ffmpeg turns it upright while decoding, so a quarter turn swaps the frames' sides. Read with
        // the stored sides, every row would be cut at the wrong width: a sheared image in which no pulse is found.
        let turn = (fields["rotation"] ?? fields["TAG:rotate"]).flatMap { Double($0) }.map { Int($0.rounded()) } ?? 0
        let quarter = ((turn % 360) + 360) % 360
        let sideways = quarter == 90 || quarter == 270
        width = sideways ? h : w
        height = sideways ? w : h
        framesPerSecond = fps
    }

    /// Presentation times of the video's frames in seconds from the first, in display order, read from the
    /// container's packets by ffprobe (no decoding). Repeated or missing times are left as they are: the caller
    /// decides what to do with them.
    public func frameTimes() throws -> [Double] {
        let (status, out, err) = try FFmpegVideo.run(ffprobe, [
            "-v", "error", "-select_streams", "v:0", "-show_entries", "packet=pts_time", "-of", "csv=p=0", path,
        ])
        guard status == 0 else { throw AnalysisError("ffprobe cannot list the frames of \(path): \(err.trimmingCharacters(in: .whitespacesAndNewlines))") }
        let times = out.split(whereSeparator: \.isNewline).compactMap { Double($0.trimmingCharacters(in: .whitespaces).split(separator: ",").first ?? "") }
            .filter(\.isFinite).sorted()
        guard let first = times.first else { return [] }
        return times.map { $0 - first }
    }

    /// Streams every decoded frame through `body` (ffmpeg neither duplicates nor drops frames to reach a constant
    /// rate); frame i is stamped `time(i)`. A frame whose time is not finite is skipped and reported to
    /// `dropNonFinite`. Returns what ffmpeg reported while decoding to the end nonetheless (a truncated or damaged
    /// file: frames missing), nil when it reported nothing.
    @discardableResult
    public func decode(
        time: (Int) -> Double, _ body: (VideoFrame) throws -> Void, dropNonFinite: () -> Void = {}
    ) throws -> String? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ffmpeg)
        process.arguments = ["-nostdin", "-v", "error", "-i", path, "-map", "0:v:0", "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"]
        let stdout = Pipe()
        let errURL = FileManager.default.temporaryDirectory.appendingPathComponent("hr-gateway-ffmpeg-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).log")
        guard FileManager.default.createFile(atPath: errURL.path, contents: nil) else {
            throw AnalysisError("cannot create a temporary file in \(FileManager.default.temporaryDirectory.path)")
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
            if buffer.count == size, !time(index).isFinite {
                dropNonFinite()
                index += 1
                buffer.removeAll(keepingCapacity: true)
            } else if buffer.count == size {
                do {
                    let frame = try VideoFrame(width: width, height: height, format: .rgb24, bytes: buffer,
                                               timestampSeconds: time(index))
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
        let err = ((try? String(contentsOf: errURL, encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        if process.terminationStatus != 0 {
            throw AnalysisError("ffmpeg failed on \(path) (exit \(process.terminationStatus)): \(err)")
        }
        return err.isEmpty ? nil : err
    }

    public static func which(_ name: String) -> String? {
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
