import Foundation
import RPPG
import RPPGSynthetic

/// Speed of the rPPG front end and accuracy on the synthetic set, and on real traces when a folder of them is given.
func runRPPGBenchmark() { runRPPGBenchmark(arguments: []) }

/// Same, with a folder of real traces (holding `bias-eval-rppg/`) as the first argument. Without one, the project's
/// own copy is used when it sits beside the checkout (`../shared/data/rppg`); otherwise the real traces are skipped.
func runRPPGBenchmark(arguments: [String]) {
    let dataDir = arguments.first ?? "../shared/data/rppg"
    let given = !arguments.isEmpty
    print("# rPPG benchmark (single thread)")
    print("")
    print("## Speed at 640x480 (ROI + resampling + POS/CHROM/spectra once per second of video)")
    print("MJPEG rows include decoding with libv4lconvert, as the capture module does for MJPEG-only cameras.")
    print("")
    print("| format | ROI only (frames/s) | ROI + estimator (frames/s) | µs per frame |")
    print("|---|---|---|---|")
    for format in [PixelFormat.yuyv, .rgb24, .i420, .nv12] {
        let (roi, full) = speed(format: format)
        print("| \(format.rawValue) | \(Int(roi)) | \(Int(full)) | \(fmt(1e6 / full, 1)) |")
    }
    if let mjpeg = mjpegSpeed() {
        print("| mjpeg (decode only) | \(Int(mjpeg.decode)) | - | \(fmt(1e6 / mjpeg.decode, 1)) |")
        print("| mjpeg (decode + ROI + estimator) | - | \(Int(mjpeg.full)) | \(fmt(1e6 / mjpeg.full, 1)) |")
    }
    print("(ROI here is the skin-blob search on the rendered face; the face detector path is measured below.)")
    print("")
    runFaceBenchmark(dataDir: dataDir)
    print("## Accuracy on synthetic face videos (320x240, 30 fps, 40 s, HR windows from t >= 10 s, breathing from t >= 30 s)")
    print("")
    print("| scenario | truth HR | confident windows | HR MAE (bpm) | max error | truth BR | BR windows | BR MAE (/min) |")
    print("|---|---|---|---|---|---|---|---|")
    for scenario in syntheticScenarios() {
        let r = evaluate(scenario.video)
        let truth = scenario.video.heartRateBpm.map { fmt($0, 0) } ?? "none"
        let br = scenario.video.breathingRateBpm.map { fmt($0, 0) } ?? "none"
        print("| \(scenario.name) | \(truth) | \(fmt(r.confidentFraction * 100, 0)) % | \(r.hrMAE.map { fmt($0, 2) } ?? "-") | \(r.hrMax.map { fmt($0, 2) } ?? "-") | \(br) | \(fmt(r.brFraction * 100, 0)) % | \(r.brMAE.map { fmt($0, 2) } ?? "-") |")
    }
    print("")
    realTraces(dataDir: dataDir, given: given)
}

private func fmt(_ v: Double, _ digits: Int) -> String { String(format: "%.\(digits)f", v) }

private func speed(format: PixelFormat) -> (Double, Double) {
    var video = SyntheticFaceVideo()
    video.width = 640
    video.height = 480
    video.durationSeconds = 2
    let frames = Array(video.frames(format: format))
    let count = 6000
    let clock = ContinuousClock()
    var tracker = FaceROITracker()
    var sink = 0.0
    let roi = clock.measure {
        for i in 0..<count {
            let m = tracker.measure(frames[i % frames.count])
            sink += m.whole?.g ?? 0
        }
    }
    guard var estimator = try? RPPGEstimator() else { return (0, 0) }
    let full = clock.measure {
        for i in 0..<count {
            let f = frames[i % frames.count]
            let frame = try? VideoFrame(layout: f.layout, bytes: f.bytes, timestampSeconds: Double(i) / 30)
            if let frame, let e = estimator.process(frame) { sink += e.confidence }
        }
    }
    if sink.isNaN { print("") }
    return (Double(count) / roi.seconds, Double(count) / full.seconds)
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) * 1e-18 }
}

struct Scenario {
    var name: String
    var video: SyntheticFaceVideo
}

/// The synthetic accuracy set (also what the tests check, with fewer seconds).
func syntheticScenarios() -> [Scenario] {
    func base(_ hr: Double?, _ br: Double?) -> SyntheticFaceVideo {
        var v = SyntheticFaceVideo()
        v.durationSeconds = 40
        v.heartRateBpm = hr
        v.breathingRateBpm = br
        return v
    }
    var list: [Scenario] = []
    list.append(Scenario(name: "clean", video: base(72, 15)))
    var v = base(54, 9); v.pulseAmplitude = 0.004; list.append(Scenario(name: "low HR, weak pulse", video: v))
    v = base(150, 24); list.append(Scenario(name: "high HR", video: v))
    v = base(84, 12); v.skin = RGBMean(r: 120, g: 80, b: 60); v.noiseSigma = 3; list.append(Scenario(name: "dark skin, noisier", video: v))
    v = base(66, 15); v.swayPixels = 6; v.swayHz = 0.3; list.append(Scenario(name: "sideways motion 6 px", video: v))
    v = base(78, 18); v.illuminationSteps = [(12, 0.85), (22, 1.15), (31, 0.9)]; list.append(Scenario(name: "illumination steps", video: v))
    v = base(96, 15); v.framesPerSecond = 29.5; v.flickerHz = 120; v.flickerAmplitude = 0.01
    list.append(Scenario(name: "120 Hz flicker aliased to 2 Hz", video: v))
    v = base(70, 14); v.timestampJitterSeconds = 0.008; v.dropProbability = 0.1; list.append(Scenario(name: "jitter 8 ms, 10 % drops", video: v))
    v = base(75, 15); v.pulseAmplitude = 0.0015; v.noiseSigma = 4; list.append(Scenario(name: "very weak pulse 0.15 %, noise 4", video: v))
    v = base(88, 16); v.pulseAmplitude = 0.003; v.noiseSigma = 4; v.swayPixels = 8; v.swayHz = 0.4
    v.illuminationSteps = [(12, 0.8), (20, 1.2), (28, 0.9)]; v.framesPerSecond = 29.5; v.flickerHz = 120
    v.flickerAmplitude = 0.02; v.timestampJitterSeconds = 0.008; v.dropProbability = 0.1
    list.append(Scenario(name: "all impairments, 0.3 % pulse", video: v))
    v = base(nil, 15); list.append(Scenario(name: "pulse-free", video: v))
    v = base(nil, nil); v.swayPixels = 4; v.illuminationSteps = [(15, 0.9)]; list.append(Scenario(name: "pulse-free, motion, step", video: v))
    return list
}

struct Evaluation {
    var confidentFraction: Double
    var hrMAE: Double?
    var hrMax: Double?
    var brFraction: Double
    var brMAE: Double?
}

func evaluate(_ video: SyntheticFaceVideo) -> Evaluation {
    guard var estimator = try? RPPGEstimator() else { return Evaluation(confidentFraction: 0, brFraction: 0) }
    var windows = 0, confident = 0, brWindows = 0, brConfident = 0
    var errors: [Double] = [], brErrors: [Double] = []
    for frame in video.frames(format: .yuyv) {
        guard let e = estimator.process(frame) else { continue }
        if e.tSeconds >= 10 {
            windows += 1
            if let hr = e.hrBpm {
                confident += 1
                if let truth = video.heartRateBpm { errors.append(abs(hr - truth)) } else { errors.append(.nan) }
            }
        }
        if e.tSeconds >= 30 {
            brWindows += 1
            if let br = e.breathingRateBpm {
                brConfident += 1
                if let truth = video.breathingRateBpm { brErrors.append(abs(br - truth)) }
            }
        }
    }
    let valid = errors.filter { !$0.isNaN }
    return Evaluation(
        confidentFraction: windows > 0 ? Double(confident) / Double(windows) : 0,
        hrMAE: valid.isEmpty ? nil : valid.reduce(0, +) / Double(valid.count),
        hrMax: valid.max(),
        brFraction: brWindows > 0 ? Double(brConfident) / Double(brWindows) : 0,
        brMAE: brErrors.isEmpty ? nil : brErrors.reduce(0, +) / Double(brErrors.count))
}

private func realTraces(dataDir: String, given: Bool) {
    let results = dataDir + "/bias-eval-rppg/pos_chrom_green_results.csv"
    guard let table = try? String(contentsOfFile: results, encoding: .utf8) else {
        print(given
            ? "(real traces skipped: \(results) not found; the folder must hold bias-eval-rppg/pos_chrom_green_results.csv)"
            : "(real traces not scored: pass a folder of real traces to also score them: hr-gateway-bench rppg DIR)")
        return
    }
    print("## Real data: bias-eval-rppg RGB traces (61 skin crops, 15 fps, one mean-HR reference per video)")
    print("")
    var lines = table.split(whereSeparator: \.isNewline).map(String.init)
    let header = lines.removeFirst().split(separator: ",").map(String.init)
    func col(_ name: String) -> Int { header.firstIndex(of: name) ?? 0 }
    var medianErr: [Double] = [], gatedErr: [Double] = [], refPOS: [Double] = [], refCHROM: [Double] = []
    var narrowErr: [Double] = []
    var allWindows = 0, confidentWindows = 0, constErr: [Double] = []
    var inBand = 0, candidates = 0
    var narrow = RPPGConfiguration()
    narrow.pulseBandHz = 0.75...2.5
    for line in lines {
        let f = line.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        let name = "\(f[col("region")])_\(f[col("video")])_\(f[col("roi")]).csv"
        guard let gt = Double(f[col("gt_mean_hr")]),
              let text = try? String(contentsOfFile: dataDir + "/bias-eval-rppg/rgb_traces/" + name, encoding: .utf8),
              var estimator = try? RPPGEstimator(), var narrowEstimator = try? RPPGEstimator(configuration: narrow)
        else { continue }
        var hrs: [Double] = [], gated: [Double] = [], narrowHRs: [Double] = []
        for (i, row) in text.split(whereSeparator: \.isNewline).dropFirst().enumerated() {
            let v = row.split(separator: ",").compactMap { Double($0) }
            guard v.count == 4 else { continue }
            let s = RPPGSample(tSeconds: Double(i) / 15, rgb: RGBMean(r: v[1], g: v[2], b: v[3]))
            if let e = narrowEstimator.append(s), e.windowSeconds >= 9.9, let c = e.candidateHrBpm { narrowHRs.append(c) }
            guard let e = estimator.append(s), e.windowSeconds >= 9.9 else { continue }
            allWindows += 1
            if let c = e.candidateHrBpm {
                hrs.append(c)
                candidates += 1
                if c >= 41.5 && c <= 180.5 { inBand += 1 }
            }
            if let h = e.hrBpm { gated.append(h); confidentWindows += 1 }
        }
        guard !hrs.isEmpty else { continue }
        medianErr.append(abs(median(hrs) - gt))
        if !narrowHRs.isEmpty { narrowErr.append(abs(median(narrowHRs) - gt)) }
        if !gated.isEmpty { gatedErr.append(abs(median(gated) - gt)) }
        if let p = Double(f[col("POS_win10_median_hr")]) { refPOS.append(abs(p - gt)) }
        if let c = Double(f[col("CHROM_win10_median_hr")]) { refCHROM.append(abs(c - gt)) }
        constErr.append(abs(77 - gt))
    }
    func mae(_ v: [Double]) -> String { v.isEmpty ? "-" : fmt(v.reduce(0, +) / Double(v.count), 1) }
    print("| measure | value |")
    print("|---|---|")
    print("| videos | \(medianErr.count) |")
    print("| 10 s windows | \(allWindows) (candidate HR in 42-180 bpm: \(inBand) of \(candidates)) |")
    print("| windows with a confident HR | \(confidentWindows) (\(fmt(Double(confidentWindows) / Double(max(1, allWindows)) * 100, 1)) %) |")
    print("| MAE of per-video median candidate HR (ours, POS) | \(mae(medianErr)) bpm |")
    print("| same with the curator's band 0.75-2.5 Hz | \(mae(narrowErr)) bpm |")
    print("| MAE of per-video median confident HR (ours, \(gatedErr.count) videos with one) | \(mae(gatedErr)) bpm |")
    print("| reference POS / CHROM 10 s median (pos_chrom_green_results.csv) | \(mae(refPOS)) / \(mae(refCHROM)) bpm |")
    print("| constant 77 bpm | \(mae(constErr)) bpm |")
    print("")
    vitallens(dataDir: dataDir)
}

private func vitallens(dataDir: String) {
    print("## Real data: vitallens contact waveforms (back end: spectral rate on the reference waveforms)")
    print("")
    print("| file | column | fs | rate (/min) | peak ratio | SNR dB | reference |")
    print("|---|---|---|---|---|---|---|")
    let cases: [(String, String, Double, String)] = [
        ("sample_vitals_1.csv", "ppg", 30.1, "FFT 75.6-75.8 bpm, device HR settles at ~75"),
        ("sample_vitals_1.csv", "resp", 30.1, "device RR 8.45 -> 8.31 /min"),
        ("sample_vitals_2.csv", "ppg", 30.0, "FFT 60.2 bpm, fixture 60.5"),
    ]
    for (file, column, fs, reference) in cases {
        guard let text = try? String(contentsOfFile: dataDir + "/vitallens/" + file, encoding: .utf8) else { continue }
        var lines = text.split(whereSeparator: \.isNewline)
        let header = lines.removeFirst().split(separator: ",").map(String.init)
        guard let c = header.firstIndex(of: column) else { continue }
        let values = lines.compactMap { line -> Double? in
            let f = line.split(separator: ",", omittingEmptySubsequences: false)
            return c < f.count ? Double(f[c]) : nil
        }
        let rate = column == "resp" ? RateSpectrum.breathing(values, sampleRate: fs) : RateSpectrum.pulse(values, sampleRate: fs)
        if let rate {
            print("| \(file) | \(column) | \(fs) | \(fmt(rate.perMinute, 2)) | \(fmt(rate.peakRatio, 2)) | \(fmt(rate.snrDb, 1)) | \(reference) |")
        }
    }
}

private func median(_ v: [Double]) -> Double {
    let s = v.sorted()
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}
