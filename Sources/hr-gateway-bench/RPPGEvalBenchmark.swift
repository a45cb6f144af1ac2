import FaceDetection
import Foundation
import RPPG
import RPPGAnalysis

/// `hr-gateway-bench rppg-eval DIR [--bounds FILE] [--curve] [--face-cascade XML] [--traces OUT] [--threshold C] [--colour-angle DEG|none]`:
/// camera pulse accuracy on real recordings. `--threshold` replaces the pulse confidence threshold (calibration). `--traces OUT` also writes every frame's ROI measurement to `OUT/NAME_roi.csv`
/// (time, status, box source, face and background means, forehead row), so the signal processing can be studied
/// apart from decoding and detection, and every scored window's reference and estimate to `OUT/NAME_windows.csv`.
/// Exit 0 when the figures hold the bounds, 1 when they fall below them, 2 when DIR or the bounds cannot be read.
func runRPPGEval(arguments: [String]) {
    var dir: String?
    var boundsPath: String?
    var curve = false
    var faceCascade = CascadeFaceDetector.defaultCascadePath
    var tracesDir: String?
    var threshold: Double?
    var colourAngle: Double??
    var it = arguments.makeIterator()
    while let a = it.next() {
        switch a {
        case "--bounds": boundsPath = it.next()
        case "--curve": curve = true
        case "--face-cascade": faceCascade = it.next() ?? faceCascade
        case "--traces": tracesDir = it.next()
        case "--threshold": threshold = it.next().flatMap(Double.init)
        case "--colour-angle":
            // The colour check's tolerance, degrees, or "none" (the default; calibration).
            let v = it.next() ?? ""
            colourAngle = v == "none" ? .some(nil) : Double(v).map { .some($0) }
        default: dir = a
        }
    }
    func fail(_ message: String, code: Int32 = 2) -> Never {
        FileHandle.standardError.write(Data("rppg-eval: FAILED: \(message)\n".utf8))
        exit(code)
    }
    guard let dir else { fail("usage: hr-gateway-bench rppg-eval DIR [--bounds FILE] [--curve] [--face-cascade XML] [--traces OUT] [--threshold C] [--colour-angle DEG|none]") }
    var isDir: ObjCBool = false
    guard FileManager.default.fileExists(atPath: dir, isDirectory: &isDir), isDir.boolValue else {
        fail("data folder \(dir) is missing: nothing was evaluated (ubfc-dev lives in ../shared/data/rppg/ubfc-dev)")
    }
    let defaultBounds = "Tests/rppg-eval-bounds.json"
    let bounds: EvalBounds?
    do {
        if let boundsPath {
            bounds = try EvalBounds(path: boundsPath)
        } else if FileManager.default.fileExists(atPath: defaultBounds) {
            bounds = try EvalBounds(path: defaultBounds)
        } else {
            bounds = nil
        }
    } catch {
        fail("\(error)")
    }
    let subjects: [String]
    do { subjects = try AccuracyEvaluation.subjects(in: dir) } catch { fail("\(error)") }
    guard !subjects.isEmpty else { fail("\(dir) holds no videos/NAME.mp4 with a frames/NAME_frames.csv") }

    var config = RPPGConfiguration()
    if let threshold {
        guard (0...1).contains(threshold) else { fail("--threshold must be a confidence within 0-1") }
        config.confidenceThreshold = threshold
    }
    if let colourAngle { config.colourAngleToleranceDegrees = colourAngle }
    let started = Date()
    func pct(_ v: Double?) -> String { v.map { String(format: "%5.1f %%", 100 * $0) } ?? "    - " }
    func bpm(_ v: Double?) -> String { v.map { String(format: "%5.2f", $0) } ?? "    -" }
    func pad(_ s: String, _ n: Int) -> String { s.padding(toLength: max(n, s.count), withPad: " ", startingAt: 0) }
    print("rppg-eval \(dir): 10 s windows, 1 s step, reference = contact PPG (FFT peak and peak intervals agreeing within 3 bpm)")
    print("\(pad("subject", 11)) windows  scored |   ours: MAE   <=5bpm  coverage | plain POS: MAE   <=5bpm  coverage | dropped")
    var results: [SubjectEvaluation] = []
    var ours = WindowScore(), peer = WindowScore()
    for subject in subjects {
        let r: SubjectEvaluation
        var trace = "t_s,status,box,r,g,b,bg_r,bg_g,bg_b,position\n"
        do {
            r = try AccuracyEvaluation.evaluate(
                dir: dir, subject: subject, configuration: config, faceCascade: faceCascade,
                onMeasurement: tracesDir == nil ? nil : { m in trace += roiTraceRow(m) })
        } catch {
            fail("\(subject): \(error)")
        }
        if let tracesDir {
            var windows = "start_s,reference_bpm,candidate_bpm,chrom_bpm,hr_bpm,confidence,fundamental_snr_db,snr_db,peak_ratio,background_share,chrom_snr_at_peak_db,colour_angle_deg\n"
            for w in r.scored {
                func f(_ v: Double?) -> String { v.map { String(format: "%.4f", $0) } ?? "" }
                let e = w.estimate
                windows += [f(w.startSeconds), f(w.referenceBpm), f(e?.candidateHrBpm), f(e?.chromHrBpm), f(e?.hrBpm),
                            f(e?.confidence), f(e?.fundamentalSnrDb), f(e?.snrDb), f(e?.peakRatio),
                            f(e?.backgroundShare), f(e?.chromSnrAtPeakDb), f(e?.colourAngleDegrees)].joined(separator: ",") + "\n"
            }
            for (name, text) in [("roi", trace), ("windows", windows)] {
                let path = (tracesDir as NSString).appendingPathComponent("\(subject)_\(name).csv")
                do {
                    try FileManager.default.createDirectory(atPath: tracesDir, withIntermediateDirectories: true)
                    try Data(text.utf8).write(to: URL(fileURLWithPath: path))
                } catch {
                    fail("cannot write \(path): \(error)")
                }
            }
        }
        results.append(r)
        ours = ours + r.ours
        peer = peer + r.plainPOS
        print("\(pad(subject, 11)) \(String(format: "%7d %7d", r.allWindows, r.ours.windows)) |      \(bpm(r.ours.maeBpm))  \(pct(r.ours.within5))  \(pct(r.ours.coverage)) |           \(bpm(r.plainPOS.maeBpm))  \(pct(r.plainPOS.within5))  \(pct(r.plainPOS.coverage)) | \(r.droppedFrames)")
    }
    print("\(pad("overall", 11)) \(String(format: "%7d %7d", results.reduce(0) { $0 + $1.allWindows }, ours.windows)) |      \(bpm(ours.maeBpm))  \(pct(ours.within5))  \(pct(ours.coverage)) |           \(bpm(peer.maeBpm))  \(pct(peer.within5))  \(pct(peer.coverage)) |")
    for subject in subjects {
        if let check = try? AccuracyEvaluation.checkReference(dir: dir, subject: subject) {
            print("reference check \(subject): FFT peak within \(String(format: "%.2f", check.maxDifference)) bpm of eval_windows_10s.csv over \(check.windows) windows")
        }
    }
    if curve {
        print("confidence threshold curve (all subjects; candidate = the estimator's POS peak whatever its confidence):")
        print("  threshold  coverage    MAE  <=5bpm")
        let all = results.flatMap(\.candidates)
        for step in 0...20 {
            let th = Double(step) * 0.05
            let kept = all.filter { $0.confidence >= th }
            guard !kept.isEmpty else { continue }
            let mae = kept.map(\.error).reduce(0, +) / Double(kept.count)
            let w5 = Double(kept.filter { $0.error <= 5 }.count) / Double(kept.count)
            print(String(format: "  %9.2f  %7.1f %%  %5.2f  %5.1f %%", th, 100 * Double(kept.count) / Double(max(1, ours.windows)), mae, 100 * w5))
        }
        print("per subject (coverage / MAE / <=5bpm of the candidates at or above each threshold):")
        let thresholds = [0.3, 0.4, 0.5, 0.6, 0.7]
        print("  \(pad("subject", 11))" + thresholds.map { String(format: " | %-22@", "threshold \($0)" as NSString) }.joined())
        for r in results {
            var line = "  \(pad(r.name, 11))"
            for th in thresholds {
                let kept = r.candidates.filter { $0.confidence >= th }
                let cov = Double(kept.count) / Double(max(1, r.ours.windows))
                let mae = kept.isEmpty ? nil : kept.map(\.error).reduce(0, +) / Double(kept.count)
                let w5 = kept.isEmpty ? nil : Double(kept.filter { $0.error <= 5 }.count) / Double(kept.count)
                line += " | \(pct(cov)) \(bpm(mae)) \(pct(w5))"
            }
            print(line)
        }
        print("  (a reading that continues the last one gets 3.5 dB of credit, so these curves are read off the run at the")
        print("   configured threshold; a run at another threshold answers slightly differently)")
    }
    print(String(format: "rppg-eval took %.1f s", Date().timeIntervalSince(started)))

    guard let bounds else {
        print("no bounds file (\(defaultBounds) not found, no --bounds): figures not checked")
        return
    }
    var problems: [String] = []
    if let m = bounds.maxMAE, (ours.maeBpm ?? .infinity) > m {
        problems.append("overall MAE \(bpm(ours.maeBpm)) bpm is above \(m)")
    }
    if let w = bounds.minWithin5, (ours.within5 ?? 0) < w {
        problems.append("overall share within 5 bpm \(pct(ours.within5)) is below \(100 * w) %")
    }
    if let c = bounds.minCoverage, ours.coverage < c {
        problems.append("overall coverage \(pct(ours.coverage)) is below \(100 * c) %")
    }
    for (name, maxCoverage) in bounds.maxCoverageBySubject.sorted(by: { $0.key < $1.key }) {
        if let r = results.first(where: { $0.name == name }), r.ours.coverage > maxCoverage {
            problems.append("\(name) answers \(pct(r.ours.coverage)) of its windows, more than \(100 * maxCoverage) % (its pulse is not visible)")
        }
    }
    if problems.isEmpty {
        print("rppg-eval: figures hold the bounds in \(bounds.path)")
    } else {
        for p in problems { FileHandle.standardError.write(Data("rppg-eval: FAILED: \(p) (bounds: \(bounds.path))\n".utf8)) }
        exit(1)
    }
}

/// One `--traces` row: empty fields where a value was not measured.
private func roiTraceRow(_ m: ROIMeasurement) -> String {
    func f(_ v: Double?) -> String { v.map { String(format: "%.4f", $0) } ?? "" }
    return [String(format: "%.6f", m.timestampSeconds), m.status.rawValue, m.boxSource.rawValue,
            f(m.whole?.r), f(m.whole?.g), f(m.whole?.b), f(m.background?.r), f(m.background?.g), f(m.background?.b),
            f(m.verticalPosition)].joined(separator: ",") + "\n"
}

/// Bounds the harness enforces, from a JSON file:
/// `{"overall": {"max_mae_bpm": 4, "min_within_5_bpm": 0.85, "min_coverage": 0.5},
///   "max_coverage_by_subject": {"subject11": 0.3}}` (every key optional).
struct EvalBounds {
    var path: String
    var maxMAE: Double?
    var minWithin5: Double?
    var minCoverage: Double?
    var maxCoverageBySubject: [String: Double] = [:]

    init(path: String) throws {
        self.path = path
        guard let data = FileManager.default.contents(atPath: path) else { throw AnalysisError("cannot read bounds file \(path)") }
        guard let root = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
            throw AnalysisError("bounds file \(path) is not a JSON object")
        }
        let overall = root["overall"] as? [String: Any] ?? [:]
        maxMAE = (overall["max_mae_bpm"] as? NSNumber)?.doubleValue
        minWithin5 = (overall["min_within_5_bpm"] as? NSNumber)?.doubleValue
        minCoverage = (overall["min_coverage"] as? NSNumber)?.doubleValue
        for (k, v) in root["max_coverage_by_subject"] as? [String: Any] ?? [:] {
            if let n = v as? NSNumber { maxCoverageBySubject[k] = n.doubleValue }
        }
    }
}
