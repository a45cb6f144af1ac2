import Foundation
import RPPG
import RPPGSynthetic
import V4L2Capture

/// MJPEG at 640x480, as many webcams deliver it: libv4lconvert decoding to RGB24 (what the capture module does when a
/// camera offers no YUYV), then ROI + estimator. The JPEGs are encoded from the synthetic face by ffmpeg.
/// Returns nil (with the reason printed) when ffmpeg or libv4lconvert is not available.
func mjpegSpeed() -> (decode: Double, full: Double)? {
    var video = SyntheticFaceVideo()
    video.width = 640
    video.height = 480
    video.durationSeconds = 2
    let raw = Array(video.frames(format: .rgb24)).flatMap(\.bytes)
    guard let jpegs = encodeJPEGs(raw, width: 640, height: 480), !jpegs.isEmpty else {
        print("MJPEG: skipped (ffmpeg not found: apt-get install ffmpeg)")
        return nil
    }
    guard let converter = PixelConverter() else {
        print("MJPEG: skipped (libv4lconvert could not be set up)")
        return nil
    }
    let count = 600
    let clock = ContinuousClock()
    var sink = 0
    let decode = clock.measure {
        for i in 0..<count { sink &+= converter.convert(jpegs[i % jpegs.count], fourcc: .mjpeg, width: 640, height: 480)?.count ?? 0 }
    }
    guard var estimator = try? RPPGEstimator() else { return nil }
    let layout = FrameLayout(width: 640, height: 480, format: .rgb24)
    var confidence = 0.0
    let full = clock.measure {
        for i in 0..<count {
            guard let rgb = converter.convert(jpegs[i % jpegs.count], fourcc: .mjpeg, width: 640, height: 480) else { continue }
            let estimate = rgb.withUnsafeBytes { bytes in
                try? estimator.process(bytes: bytes, layout: layout, timestampSeconds: Double(i) / 30)
            }
            if let e = estimate ?? nil { confidence += e.confidence }
        }
    }
    if sink < 0 || confidence.isNaN { print("") }
    return (Double(count) / decode.seconds, Double(count) / full.seconds)
}

/// Encodes packed RGB24 frames to JPEG with ffmpeg and splits its MJPEG stream at the end-of-image markers.
private func encodeJPEGs(_ rgb: [UInt8], width: Int, height: Int) -> [[UInt8]]? {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    p.arguments = ["ffmpeg", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", "\(width)x\(height)",
                   "-i", "-", "-q:v", "5", "-f", "mjpeg", "-"]
    let input = Pipe()
    let output = Pipe()
    p.standardInput = input
    p.standardOutput = output
    p.standardError = FileHandle.nullDevice
    do { try p.run() } catch { return nil }
    let writer = input.fileHandleForWriting
    Thread.detachNewThread {
        writer.write(Data(rgb))
        try? writer.close()
    }
    let data = [UInt8](output.fileHandleForReading.readDataToEndOfFile())
    p.waitUntilExit()
    guard p.terminationStatus == 0 else { return nil }
    var frames: [[UInt8]] = []
    var start = 0
    var i = 2
    while i < data.count - 1 {
        if data[i] == 0xFF && data[i + 1] == 0xD9 {
            frames.append(Array(data[start...(i + 1)]))
            start = i + 2
            i += 4
        } else {
            i += 1
        }
    }
    return frames
}
