import FaceDetection
import Foundation
import RPPG

/// Window scores of one estimator: MAE over the windows it answered, the share of those within 5 bpm, coverage.
public struct WindowScore: Sendable, Equatable {
    /// Absolute errors of the answered windows, bpm.
    public var errors: [Double] = []
    /// Windows with a reference (the answered ones among them are in `errors`).
    public var windows = 0

    public init() {}

    public var answered: Int { errors.count }
    public var maeBpm: Double? { errors.isEmpty ? nil : errors.reduce(0, +) / Double(errors.count) }
    public var within5: Double? { errors.isEmpty ? nil : Double(errors.filter { $0 <= 5 }.count) / Double(errors.count) }
    public var coverage: Double { windows == 0 ? 0 : Double(errors.count) / Double(windows) }

    public static func + (l: WindowScore, r: WindowScore) -> WindowScore {
        var s = WindowScore()
        s.errors = l.errors + r.errors
        s.windows = l.windows + r.windows
        return s
    }
}

/// One recording scored against its contact PPG.
public struct SubjectEvaluation: Sendable {
    public var name: String
    /// The estimator as users run it (confidence threshold applied).
    public var ours = WindowScore()
    /// Plain POS on the same ROI means, answering every window (the peer).
    public var plainPOS = WindowScore()
    /// Windows of the recording, with and without a reference.
    public var allWindows = 0
    /// Video frames dropped (no frame time, or a time that does not increase).
    public var droppedFrames = 0
    /// Per answered window: (confidence, absolute error), and for every scored window the confidence and error of
    /// the candidate whatever the confidence (calibration curves).
    public var candidates: [(confidence: Double, error: Double)] = []
    /// Every scored window: its start (seconds from the first frame), the reference, and the estimator's estimate
    /// for it (`nil` when it made none).
    public var scored: [(startSeconds: Double, referenceBpm: Double, estimate: RPPGEstimate?)] = []
}

/// The accuracy harness behind `hr-gateway-bench rppg-eval DIR`: runs the whole video path on every subject of a
/// folder laid out like ubfc-dev (`videos/NAME.mp4`, `frames/NAME_frames.csv` with `t_s` and `ppg`) and scores
/// 10 s windows at a 1 s step against ``PPGReference``.
public enum AccuracyEvaluation {
    public static let windowSeconds = 10.0
    public static let stepSeconds = 1.0

    /// Subjects found in `dir`: names of `videos/*.mp4` that have a `frames/NAME_frames.csv`, in natural order.
    public static func subjects(in dir: String) throws -> [String] {
        let videos = (dir as NSString).appendingPathComponent("videos")
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: videos) else {
            throw AnalysisError("\(dir) has no videos/ folder: expected videos/NAME.mp4 and frames/NAME_frames.csv")
        }
        let subjects = names.filter { $0.hasSuffix(".mp4") }.map { String($0.dropLast(4)) }
            .filter { FileManager.default.fileExists(atPath: framesPath(dir: dir, subject: $0)) }
        return subjects.sorted { $0.localizedStandardCompare($1) == .orderedAscending }
    }

    static func framesPath(dir: String, subject: String) -> String {
        ((dir as NSString).appendingPathComponent("frames") as NSString).appendingPathComponent("\(subject)_frames.csv")
    }

    /// Reads `t_s` and `ppg` of a frames CSV. Rows whose `t_s` does not increase are dropped and counted; such a
    /// row's frame gets no time (the caller drops the frame).
    public static func readFrames(_ path: String) throws -> (times: [Double], ppg: [Double], frameTimes: [Double], dropped: Int) {
        guard let data = FileManager.default.contents(atPath: path) else { throw AnalysisError("cannot read \(path)") }
        let lines = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline)
        guard let headerLine = lines.first else { throw AnalysisError("\(path) is empty") }
        let header = headerLine.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        guard let ti = header.firstIndex(of: "t_s"), let pi = header.firstIndex(of: "ppg") else {
            throw AnalysisError("\(path): the header must name t_s and ppg columns")
        }
        var times: [Double] = [], ppg: [Double] = [], frameTimes: [Double] = []
        var dropped = 0
        for line in lines.dropFirst() {
            let f = line.split(separator: ",", omittingEmptySubsequences: false)
            guard f.count > max(ti, pi), let t = Double(f[ti].trimmingCharacters(in: .whitespaces)), t.isFinite,
                  let p = Double(f[pi].trimmingCharacters(in: .whitespaces)), p.isFinite,
                  t > (times.last ?? -.infinity) else {
                dropped += 1
                frameTimes.append(.nan)
                continue
            }
            times.append(t)
            ppg.append(p)
            frameTimes.append(t)
        }
        guard times.count >= 2 else { throw AnalysisError("\(path): no usable rows with t_s and ppg") }
        return (times, ppg, frameTimes, dropped)
    }

    /// Scores one subject: the video through ``OfflineAnalysis`` with the frames CSV's clock (an extra trailing
    /// video frame has no time and is dropped), the plain POS peer on the same per-frame ROI means. `onMeasurement`
    /// sees every frame's ROI measurement (the harness's `--traces`).
    public static func evaluate(
        dir: String, subject: String, configuration: RPPGConfiguration,
        faceCascade: String = CascadeFaceDetector.defaultCascadePath,
        onMeasurement: ((ROIMeasurement) -> Void)? = nil
    ) throws -> SubjectEvaluation {
        let frames = try readFrames(framesPath(dir: dir, subject: subject))
        let video = ((dir as NSString).appendingPathComponent("videos") as NSString).appendingPathComponent("\(subject).mp4")
        var roi: [(t: Double, rgb: RGBMean)] = []
        let estimator = try OfflineAnalysis.makeVideoEstimator(configuration: configuration, faceCascade: faceCascade)
        let run = try OfflineAnalysis.analyze(video: video, configuration: configuration, frameTimes: frames.frameTimes,
                                              estimator: estimator) { m in
            onMeasurement?(m)
            if m.status == .ok || m.status == .moving, let w = m.whole { roi.append((m.timestampSeconds, w)) }
        }
        var result = SubjectEvaluation(name: subject)
        result.droppedFrames = run.droppedFrames
        var byStart: [Int: RPPGEstimate] = [:]
        for e in run.estimates where e.windowSeconds >= windowSeconds - 0.05 {
            byStart[Int((e.tSeconds - windowSeconds).rounded())] = e
        }
        let t0 = frames.times[0], tEnd = frames.times[frames.times.count - 1]
        var k = 0
        while t0 + Double(k) * stepSeconds + windowSeconds <= tEnd + 1e-9 {
            defer { k += 1 }
            let start = t0 + Double(k) * stepSeconds
            result.allWindows += 1
            guard let ref = PPGReference.window(times: frames.times, ppg: frames.ppg, start: start, length: windowSeconds)?
                .referenceBpm else { continue }
            result.ours.windows += 1
            result.plainPOS.windows += 1
            result.scored.append((start - t0, ref, byStart[Int((start - t0).rounded())]))
            if let e = byStart[Int((start - t0).rounded())] {
                if let hr = e.hrBpm { result.ours.errors.append(abs(hr - ref)) }
                if let c = e.candidateHrBpm { result.candidates.append((e.confidence, abs(c - ref))) }
            }
            if let pos = plainPOS(roi, start: start, length: windowSeconds, band: configuration.pulseBandHz) {
                result.plainPOS.errors.append(abs(pos - ref))
            }
        }
        return result
    }

    /// Plain POS (1.6 s sub-windows) on per-frame ROI means in [start, start + length), linearly resampled to
    /// 30 Hz; the spectral peak in `band`, whatever its quality.
    public static func plainPOS(_ roi: [(t: Double, rgb: RGBMean)], start: Double, length: Double,
                                band: ClosedRange<Double>) -> Double? {
        let fs = 30.0
        let inside = roi.filter { $0.t >= start - 0.1 && $0.t <= start + length + 0.1 }
        guard inside.count >= 2 else { return nil }
        let n = Int((length * fs).rounded())
        var r = [Double](), g = [Double](), b = [Double]()
        var j = 0
        for k in 0..<n {
            let t = start + Double(k) / fs
            while j + 1 < inside.count - 1, inside[j + 1].t <= t { j += 1 }
            let a = inside[j], c = inside[j + 1]
            let w = c.t > a.t ? min(1, max(0, (t - a.t) / (c.t - a.t))) : 0
            r.append(a.rgb.r + w * (c.rgb.r - a.rgb.r))
            g.append(a.rgb.g + w * (c.rgb.g - a.rgb.g))
            b.append(a.rgb.b + w * (c.rgb.b - a.rgb.b))
        }
        let pos = PulseProjection.pos(r: r, g: g, b: b, windowLength: Int((1.6 * fs).rounded(.up)))
        return RateSpectrum.pulse(pos, sampleRate: fs, bandHz: band)?.perMinute
    }

    /// The dataset's own reference column (`eval_windows_10s.csv`: subject, t0_s, ref_ppg_fft_bpm), when present,
    /// against our (a) FFT peak: the largest difference in bpm and the number of windows compared.
    public static func checkReference(dir: String, subject: String) throws -> (maxDifference: Double, windows: Int)? {
        let path = (dir as NSString).appendingPathComponent("eval_windows_10s.csv")
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        let lines = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline)
        guard let header = lines.first?.split(separator: ",").map(String.init),
              let si = header.firstIndex(of: "subject"), let ti = header.firstIndex(of: "t0_s"),
              let ri = header.firstIndex(of: "ref_ppg_fft_bpm") else { return nil }
        let id = subject.hasPrefix("subject") ? String(subject.dropFirst(7)) : subject
        let frames = try readFrames(framesPath(dir: dir, subject: subject))
        var worst = 0.0, count = 0
        for line in lines.dropFirst() {
            let f = line.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            guard f.count > max(si, ti, ri), f[si] == id, let t0 = Double(f[ti]), let ref = Double(f[ri]),
                  let w = PPGReference.window(times: frames.times, ppg: frames.ppg, start: frames.times[0] + t0, length: windowSeconds)
            else { continue }
            worst = max(worst, abs(w.fftBpm - ref))
            count += 1
        }
        return count > 0 ? (worst, count) : nil
    }
}
