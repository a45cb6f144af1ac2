import FaceDetection
import Foundation
import RPPG
import RPPGSynthetic

/// Face detection cost, the per-frame cost with detection amortised at its real rate, and the ROI on the real
/// ubfc-dev videos (`DATA_DIR/ubfc-dev`, read at run time; never part of the repository).
func runFaceBenchmark(dataDir: String) {
    let ubfc = dataDir + "/ubfc-dev"
    print("## Face detector and the per-frame path (640x480 YUYV, one core)")
    print("")
    let detector: CascadeFaceDetector
    do {
        detector = try CascadeFaceDetector()
    } catch {
        print("(skipped: \(error.description))")
        return
    }
    var frames: [VideoFrame] = []
    let sample = ubfc + "/videos/subject3.mp4"
    if FileManager.default.fileExists(atPath: sample), let decoded = try? decodeVideo(sample, format: .yuyv, limit: 90) {
        frames = decoded
        print("Frames: the first 90 of \(sample) (a real face), decoded to YUYV by ffmpeg.")
    } else {
        var v = SyntheticFaceVideo()
        v.width = 640
        v.height = 480
        v.durationSeconds = 3
        v.faceStyle = .detailed
        v.faceScale = 0.75
        frames = Array(v.frames(format: .yuyv))
        print("Frames: \(sample) not found (or no ffmpeg), so the rendered detailed face (SyntheticFaceVideo) instead.")
    }
    print("Detector: \(detector.name), frame shrunk 4x to 160x120 grey; OpenCV limited to one thread.")
    print("")

    // Detection alone, on the shrunk grey frame the tracker hands over.
    let greys = frames.prefix(10).map { shrinkGrey($0, factor: 4) }
    let clock = ContinuousClock()
    var found = 0
    let calls = 40
    let full = clock.measure {
        for i in 0..<calls { found += detector.detectFaces(in: greys[i % greys.count], search: FaceSearch()).isEmpty ? 0 : 1 }
    }
    let face = detector.detectFaces(in: greys[0], search: FaceSearch()).first
    var trackCost = Duration.zero
    if let face {
        let region = PixelBox(x: face.x - 0.5 * face.width, y: face.y - 0.5 * face.height, width: 2 * face.width,
                              height: 2 * face.height)
        let search = FaceSearch(region: region, minimumSize: Int(0.7 * face.width), maximumSize: Int(1.4 * face.width))
        trackCost = clock.measure {
            for i in 0..<calls { found += detector.detectFaces(in: greys[i % greys.count], search: search).isEmpty ? 0 : 1 }
        }
    }
    print("| stage | cost |")
    print("|---|---|")
    print("| detector call, whole 160x120 frame (no face held yet) | \(fmt2(full.seconds / Double(calls) * 1e3)) ms |")
    if face != nil {
        print("| detector call, around the held box (sizes 0.7-1.4x) | \(fmt2(trackCost.seconds / Double(calls) * 1e3)) ms |")
    }

    // The whole per-frame path: shrink + detect at 5 Hz (30 fps frames), ROI means every frame.
    let count = 6000
    var tracker = FaceROITracker(detector: detector)
    var sink = 0.0
    let roi = clock.measure {
        for i in 0..<count {
            let f = frames[i % frames.count]
            let m = f.bytes.withUnsafeBytes { raw in
                try? tracker.measure(bytes: raw, layout: f.layout, timestampSeconds: Double(i) / 30)
            }
            sink += m?.whole?.g ?? 0
        }
    }
    var estimator = try? RPPGEstimator(faceDetector: detector)
    let whole = clock.measure {
        for i in 0..<count {
            let f = frames[i % frames.count]
            let e = f.bytes.withUnsafeBytes { raw in
                try? estimator?.process(bytes: raw, layout: f.layout, timestampSeconds: Double(i) / 30)
            }
            if let e { sink += e.confidence }
        }
    }
    let s = tracker.stats
    print("| ROI per frame incl. detection amortised (\(s.detectorCalls) calls in \(count) frames at 30 fps) | "
          + "\(fmt2(roi.seconds / Double(count) * 1e6)) µs = \(Int(Double(count) / roi.seconds)) frames/s |")
    print("| ROI + estimator per frame (the whole path) | \(fmt2(whole.seconds / Double(count) * 1e6)) µs = "
          + "\(Int(Double(count) / whole.seconds)) frames/s |")
    print("| frames with the face: detected / tracked / none | \(s.framesDetected) / \(s.framesTracked) / \(s.framesNoFace) |")
    if sink.isNaN { print("") }
    print("")
    realVideoROI(ubfc: ubfc, detector: detector)
}

/// Per subject: how often the face was found, correlation of our skin green with the dev set's OpenCV traces
/// (both detrended by a 1 s moving average), and the time of the first confident reading from the start.
private func realVideoROI(ubfc: String, detector: CascadeFaceDetector) {
    print("## Face ROI on real video (ubfc-dev)")
    print("")
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: ubfc + "/videos") else {
        print("(skipped: \(ubfc)/videos not found; pass the shared/data/rppg folder as argument)")
        return
    }
    print("Correlation of the green channel per frame, each trace minus its centred 1 s moving average. ")
    print("fskin: the dev set's fixed box, skin-masked; forehead: its EMA-smoothed Haar box forehead.")
    print("")
    print("| subject | frames | detector calls | detected / tracked / no face | moving | r(fskin_G) | r(forehead_G) | first confident reading |")
    print("|---|---|---|---|---|---|---|---|")
    let subjects = names.filter { $0.hasSuffix(".mp4") }.map { String($0.dropLast(4)) }
        .sorted { Int($0.dropFirst(7)) ?? 0 < Int($1.dropFirst(7)) ?? 0 }
    for subject in subjects {
        guard let csv = try? String(contentsOfFile: "\(ubfc)/frames/\(subject)_frames.csv", encoding: .utf8) else { continue }
        var rows = csv.split(whereSeparator: \.isNewline)
        let header = rows.removeFirst().split(separator: ",").map(String.init)
        func column(_ name: String) -> [Double] {
            guard let c = header.firstIndex(of: name) else { return [] }
            return rows.map { r in
                let f = r.split(separator: ",", omittingEmptySubsequences: false)
                return c < f.count ? Double(f[c]) ?? .nan : .nan
            }
        }
        let times = column("t_s")
        let fskin = column("fskin_G"), forehead = column("forehead_G")
        var ours: [Double] = []
        var estimator = try? RPPGEstimator(faceDetector: detector)
        var firstReading: Double?
        var index = 0
        do {
            try streamVideo("\(ubfc)/videos/\(subject).mp4", format: .rgb24) { frame in
                guard index < times.count else { return }
                let t = times[index]
                index += 1
                let e = frame.bytes.withUnsafeBytes { raw in
                    try? estimator?.process(bytes: raw, layout: frame.layout, timestampSeconds: t)
                }
                let m = estimator?.lastMeasurement
                ours.append(m?.isUsable == true ? m?.whole?.g ?? .nan : .nan)
                if firstReading == nil, let e, e.hrBpm != nil { firstReading = t }
            }
        } catch {
            print("| \(subject) | decode failed: \(error) | | | | | | |")
            continue
        }
        guard let s = estimator?.tracker.stats else { continue }
        let first = firstReading.map { "\(fmt2($0)) s" } ?? "none"
        print("| \(subject) | \(s.frames) | \(s.detectorCalls) | \(s.framesDetected) / \(s.framesTracked) / \(s.framesNoFace) "
              + "| \(s.framesMoving) | \(fmt2(detrendedCorrelation(ours, fskin))) | \(fmt2(detrendedCorrelation(ours, forehead))) "
              + "| \(first) |")
    }
    print("")
}

private func fmt2(_ v: Double) -> String { String(format: "%.2f", v) }

/// Pearson correlation over the frames where both are finite, after removing a centred 30-frame moving average.
func detrendedCorrelation(_ a: [Double], _ b: [Double]) -> Double {
    func detrend(_ x: [Double]) -> [Double] {
        let half = 15
        return x.indices.map { i in
            guard x[i].isFinite else { return .nan }
            let window = x[max(0, i - half)..<min(x.count, i + half + 1)].filter(\.isFinite)
            return x[i] - window.reduce(0, +) / Double(window.count)
        }
    }
    let n = min(a.count, b.count)
    let da = detrend(Array(a.prefix(n))), db = detrend(Array(b.prefix(n)))
    var pairs: [(Double, Double)] = []
    for i in 0..<n where da[i].isFinite && db[i].isFinite { pairs.append((da[i], db[i])) }
    guard pairs.count > 10 else { return .nan }
    let ma = pairs.map(\.0).reduce(0, +) / Double(pairs.count), mb = pairs.map(\.1).reduce(0, +) / Double(pairs.count)
    var sab = 0.0, saa = 0.0, sbb = 0.0
    for (x, y) in pairs {
        sab += (x - ma) * (y - mb)
        saa += (x - ma) * (x - ma)
        sbb += (y - mb) * (y - mb)
    }
    return saa > 0 && sbb > 0 ? sab / (saa * sbb).squareRoot() : .nan
}

/// The luma of a frame averaged over `factor x factor` cells (what the tracker's detection image approximates).
private func shrinkGrey(_ f: VideoFrame, factor: Int) -> GreyImage {
    let w = f.width / factor, h = f.height / factor
    var out = [UInt8](repeating: 0, count: w * h)
    for y in 0..<h {
        for x in 0..<w {
            var sum = 0
            for dy in 0..<factor {
                for dx in 0..<factor {
                    let px = x * factor + dx, py = y * factor + dy
                    switch f.format {
                    case .yuyv: sum += Int(f.bytes[py * f.layout.bytesPerRow + px * 2])
                    case .rgb24:
                        let o = py * f.layout.bytesPerRow + px * 3
                        sum += (77 * Int(f.bytes[o]) + 150 * Int(f.bytes[o + 1]) + 29 * Int(f.bytes[o + 2])) >> 8
                    case .i420, .nv12: sum += Int(f.bytes[py * f.width + px])
                    }
                }
            }
            out[y * w + x] = UInt8(sum / (factor * factor))
        }
    }
    return GreyImage(width: w, height: h, pixels: out)
}

private func decodeVideo(_ path: String, format: PixelFormat, limit: Int) throws -> [VideoFrame] {
    var frames: [VideoFrame] = []
    try streamVideo(path, format: format, limit: limit) { frames.append($0) }
    return frames
}

struct BenchDecodeError: Error, CustomStringConvertible {
    let description: String
}

/// Decodes a 640x480 video through ffmpeg into frames stamped i / 30 (callers restamp them).
func streamVideo(_ path: String, format: PixelFormat, limit: Int = .max, _ body: (VideoFrame) throws -> Void) throws {
    let width = 640, height = 480
    let pixFmt = format == .yuyv ? "yuyv422" : "rgb24"
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["ffmpeg", "-nostdin", "-v", "error", "-i", path, "-map", "0:v:0", "-vf", "scale=\(width):\(height)"]
        + (limit < .max ? ["-frames:v", "\(limit)"] : []) + ["-f", "rawvideo", "-pix_fmt", pixFmt, "-"]
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = FileHandle.nullDevice
    try process.run()
    let layout = FrameLayout(width: width, height: height, format: format)
    let size = layout.byteCount
    var buffer = Data()
    var index = 0
    let reader = pipe.fileHandleForReading
    while index < limit {
        guard let chunk = try reader.read(upToCount: size - buffer.count), !chunk.isEmpty else { break }
        buffer.append(chunk)
        if buffer.count == size {
            try body(try VideoFrame(layout: layout, bytes: [UInt8](buffer), timestampSeconds: Double(index) / 30))
            index += 1
            buffer.removeAll(keepingCapacity: true)
        }
    }
    // Closing our end makes a still-writing ffmpeg stop with EPIPE (it finishes its write before obeying SIGTERM).
    try? reader.close()
    if index >= limit { process.terminate() }
    process.waitUntilExit()
    guard index > 0 else { throw BenchDecodeError(description: "ffmpeg decoded no frames from \(path)") }
}
