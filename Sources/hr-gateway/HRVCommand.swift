import ArgumentParser
import Foundation
import SystemCalls
import GatewayEngine
import HRVAnalysis
import ReplayProvider
import StdoutSink

/// `hr-gateway hrv FILE`: HRV and RR-derived respiration of a recorded RR series.
struct HRVCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hrv",
        abstract: "HRV (time, frequency, nonlinear, DFA) and breathing rate from RR intervals or a recording.",
        discussion: """
            FILE is either a CSV whose header names an rr_ms column (milliseconds; also RR, RRI, IBI (ms), RR-interval [ms] \
            and the like; a bare IBI is not read, being seconds in some devices' files), an rr_1024 column (1/1024 s counts, the unit BLE heart-rate straps send) or an rr_s \
            column (seconds); other columns are ignored and may come in any order; columns separated by \
            semicolons or tabs are read too, with decimal commas. A beat_time_ms column (as `sessions export \
            --format csv` writes) gives the beats their times: where the step from one beat to the next is not its \
            interval, or its segment_start is 1, beats were lost and the series breaks there; a device_id column \
            holding several devices needs --device. Or it holds one value per line, in the unit given by --unit. \
            Blank lines and lines starting with # are skipped. Intervals outside 250-3000 ms (a heart rate over \
            240 or under 20 per minute) are read, and said on standard error with their lines; under a correction \
            those below 100 or above 3000 ms are left out and break the series there (as a lost beat does), those \
            of 100-250 ms are left to it (an extra beat). Or it is a \
            recording (JSON lines, as `stream --record` and `sessions export --format jsonl` write them): the RR \
            intervals of its strap, in order (--device picks one when it holds several), broken where the live \
            session breaks them. No successive difference is taken across a break, and windows keep the time it \
            took. Use - to read standard input.

            Metrics (the --json keys are those of the engine's session frames):
              rr_count                 intervals analysed, after correction
              artifact_count           beats the correction moved, inserted or removed
              mean_rr_ms               mean RR interval
              hr_from_rr_bpm           60000 / mean RR
              hr_sdnn_ms               SDNN: standard deviation, N-1 denominator
              rmssd_ms                 root mean square of successive differences
              nn50                     successive differences strictly above 50 ms
              pnn50                    100 * nn50 / number of differences (percent)
              successive_differences   differences rmssd_ms, nn50 and pnn50 use; with
                                       --correct median only those between measured
                                       intervals (a split, moved or replaced one is
                                       an estimate)
              resp_rate_rr_bpm         breaths per minute from sinus arrhythmia
              resp_rate_rr_confidence  0-1: how clearly the breathing peak stands out
              vlf_ms2, lf_ms2, hf_ms2  power in 0.0033-0.04, 0.04-0.15, 0.15-0.4 Hz
                                       (LF, HF: 120 s or more; VLF: 240 s or more)
              total_power_ms2          VLF + LF + HF (240 s or more)
              lf_hf, lf_nu, hf_nu      LF/HF; 100 LF/(LF+HF); 100 HF/(LF+HF)
              lf_peak_hz, hf_peak_hz   spectral peaks in LF and HF
              sd1_ms, sd2_ms, sd1_sd2  Poincare descriptors (20 intervals or more)
              dfa_alpha1, dfa_alpha2   DFA, boxes 4-16 and 16-64 beats
                                       (50 / 256 intervals or more)
              sampen                   sample entropy, m = 2, r = 0.2 SD (100 or more)
              stress_index             Baevsky stress index, 50 ms bins (50 or more)
            Frequency-domain and nonlinear metrics use the longest uninterrupted run; each is left out when it is \
            too short (see docs/hrv.md).

            Respiration is the spectral peak of the RR series resampled at 4 Hz, searched \
            in 0.15-0.5 Hz (0.05-0.5 Hz with --paced-breathing); it is left out with \
            under 30 s of data or without a clear peak.

            --correct kubios (the default) applies the Lipponen & Tarvainen (2019) automatic correction used by \
            Kubios and neurokit2: extra beats merged, missed beats split, ectopic and long/short beats moved to \
            the midpoint of their neighbours. --correct median is hr-gateway's own detector (local median of 10 \
            neighbours, an adaptive threshold, repairs that keep the elapsed time; docs/hrv.md), which finds more \
            injected artefacts with fewer false alarms on real data (hr-gateway-bench hrv).

            --dfa-timeline prints DFA alpha1 every 20 s over the last 120 s of RR corrected with the median method, \
            with artifact_percent; an estimate is withheld, with the reason, above 5 % corrected intervals. \
            Crossings of 0.75 and 0.5 are listed after the table (JSON: one line per estimate, then one per crossing).

            With --window, the series is cut into full windows of that many seconds (every --step seconds, default \
            the window length), times counted from the start of the first interval; one row, or one JSON line, per \
            window with t_start_s and t_end_s.

            Examples:
              hr-gateway hrv session_rr.csv
              hr-gateway hrv --json --correct none session_rr.csv
              hr-gateway hrv --unit 1024 strap_counts.txt
              hr-gateway hrv --unit s kubios_rr.txt
              hr-gateway hrv --window 60 --step 10 --json session_rr.csv
              hr-gateway hrv --dfa-timeline ramp_rr.csv
            """
    )

    enum Correction: String, CaseIterable, ExpressibleByArgument {
        case none, kubios, median

        var artifactCorrection: ArtifactCorrection {
            switch self {
            case .none: .none
            case .kubios: .kubios
            case .median: .median
            }
        }
    }

    enum Unit: String, CaseIterable, ExpressibleByArgument {
        case ms
        case counts1024 = "1024"
        case s

        var rrUnit: RRUnit {
            switch self {
            case .ms: .ms
            case .counts1024: .counts1024
            case .s: .seconds
            }
        }
    }

    @Argument(help: ArgumentHelp(
        "CSV or one-value-per-line file of RR intervals, or a recording (JSON lines); '-' for standard input.",
        valueName: "file"))
    var file: String

    @Option(help: ArgumentHelp("With a recording or a CSV export holding RR from several devices: the device to analyse.",
        valueName: "id"))
    var device: String?

    @Flag(help: ArgumentHelp("With a recording holding raw ECG (stream --ecg): RR from the ECG's R peaks (millisecond "
        + "resolution) instead of the strap's own RR."))
    var fromEcg = false

    @Option(
        help: ArgumentHelp(
            "Unit of headerless values: ms (default), 1024 (1/1024 s) or s (seconds, as Kubios writes them). With a "
                + "header the column name gives the unit; when both rr_ms and rr_1024 are present, this picks the "
                + "column (rr_ms by default).",
            valueName: "unit"
        )
    )
    var unit: Unit?

    @Option(help: ArgumentHelp("Artefact correction: kubios (the default), median (see docs/hrv.md) or none. "
        + "--dfa-timeline always corrects as a live session does (median).", valueName: "method"))
    var correct: Correction?

    @Option(help: ArgumentHelp("Spectrum for the frequency-domain metrics: welch or lomb (Lomb-Scargle, no resampling).", valueName: "method"))
    var spectrum: Spectrum = .welch

    @Flag(help: "Print live-style DFA alpha1 every 20 s over the last 120 s, with artefact share and threshold crossings.")
    var dfaTimeline = false

    enum Spectrum: String, CaseIterable, ExpressibleByArgument {
        case welch, lomb

        var method: SpectrumMethod { self == .welch ? .welch : .lombScargle }
    }

    @Flag(help: "Search the breathing peak in 0.05-0.5 Hz (paced/resonance breathing) instead of 0.15-0.5 Hz.")
    var pacedBreathing = false

    @Option(parsing: .unconditional, help: ArgumentHelp("Analyse full windows of this many seconds instead of the whole series.", valueName: "seconds"))
    var window: Double?

    @Option(parsing: .unconditional, help: ArgumentHelp("Seconds between window starts (default: the window length). Needs --window.", valueName: "seconds"))
    var step: Double?

    @Flag(help: "Print JSON: one object, or one object per line with --window. Absent values are left out.")
    var json = false

    func validate() throws {
        if let window, !(window.isFinite && window > 0) { throw ValidationError("--window must be a positive number of seconds") }
        if let step {
            guard window != nil else { throw ValidationError("--step needs --window") }
            // A window per second at least: a smaller step adds windows that say nothing new, and a tiny one never ends.
            guard step.isFinite && step >= 1 else { throw ValidationError("--step must be at least 1 second") }
        }
        if dfaTimeline && window != nil { throw ValidationError("--dfa-timeline and --window cannot be combined") }
        if dfaTimeline, let correct, correct != .median {
            throw ValidationError("--dfa-timeline corrects as a live session does (median): --correct \(correct.rawValue) "
                + "does not apply to it. Drop --correct, or leave out --dfa-timeline for the other metrics.")
        }
    }

    /// The correction the metrics use (the default when --correct is not given).
    private var correction: Correction { correct ?? .kubios }

    func run() throws {
        let parsed: RRFile
        do {
            let text = try Self.readText(file)
            if Self.isRecording(text) {
                parsed = try Self.recordedRR(text, file: file, device: device, fromECG: fromEcg)
            } else {
                if fromEcg {
                    throw HRVCommandError(message: "\(file): --from-ecg applies to a recording (JSON lines) holding raw "
                        + "ECG; this is an RR file")
                }
                parsed = try RRFile.parse(text, unit: unit?.rrUnit, device: device, choose: "choose one with --device")
                if let note = Self.implausibleNote(parsed.implausible, correction: correction) {
                    StandardStream.error.write(Data("note: \(file): \(note)\n".utf8))
                }
                if let note = Self.lostBeatsNote(parsed.rrMs, correction: correction) {
                    StandardStream.error.write(Data("note: \(file): \(note)\n".utf8))
                }
                if parsed.segments.count > 1 {
                    Self.noteBreaks(parsed.segments.count - 1, file: file, why: "segment_start, or the beat times jump: beats lost")
                }
            }
        } catch let error as RRFileError {
            throw HRVCommandError(message: "\(file): \(error)")
        }
        let options = HRVOptions(
            correction: correction.artifactCorrection,
            respirationBandHz: pacedBreathing ? HRVOptions.pacedBreathingBandHz : HRVOptions().respirationBandHz,
            spectrumMethod: spectrum.method
        )

        if dfaTimeline {
            let beats = parsed.beats
            let estimates = LiveDFA.timeline(beats)
            guard !estimates.isEmpty else {
                throw HRVCommandError(
                    message: "\(file): the series lasts \(Self.fixed(beats.last?.endS ?? 0, 1)) s, shorter than the "
                        + "\(Int(LiveDFA.windowS)) s DFA window"
                )
            }
            let crossings = LiveDFA.crossings(estimates)
            if json {
                for e in estimates { print(JSONValue.object(Self.dfaObject(e)).jsonString) }
                for c in crossings { print(JSONValue.object(Self.crossingObject(c)).jsonString) }
            } else {
                print(Self.header(parsed, file: file, correction: .median))
                print(Self.dfaTable(estimates, crossings: crossings))
            }
            return
        }

        if let window {
            let beats = parsed.beats
            let windows = HRVAnalyzer.analyzeWindows(beats, windowS: window, stepS: step ?? window, options: options)
            let total = beats.last?.endS ?? 0
            guard !windows.isEmpty else {
                throw HRVCommandError(
                    message: "\(file): the series lasts \(Self.fixed(total, 1)) s, shorter than one \(Self.fixed(window, 1)) s window"
                )
            }
            if json {
                for w in windows {
                    var o = Self.metrics(w.result)
                    o["t_start_s"] = .double(w.startS)
                    o["t_end_s"] = .double(w.endS)
                    print(JSONValue.object(o).jsonString)
                }
            } else {
                print(Self.header(parsed, file: file, correction: correction))
                print(Self.windowTable(windows))
            }
            return
        }

        let result = HRVAnalyzer.analyze(segments: parsed.segments, options: options)
        if json {
            print(JSONValue.object(Self.metrics(result)).jsonString)
        } else {
            print(Self.header(parsed, file: file, correction: correction))
            print(Self.table(result, correction: correction, band: options.respirationBandHz, read: parsed.rrMs.count))
        }
    }

    /// A recording's lines are JSON objects; an RR file's first line is a header or a number.
    static func isRecording(_ text: String) -> Bool {
        text.drop { $0.isWhitespace || $0 == "\u{FEFF}" }.first == "{"
    }

    /// The RR intervals of one device of a recording, in the order they arrived (with `fromECG`, those between the R
    /// peaks of its raw ECG, within each unbroken run), in the runs the live session splits them into. The breaks and
    /// the lines the reader skipped are said on standard error.
    static func recordedRR(_ text: String, file: String, device: String?, fromECG: Bool = false) throws -> RRFile {
        let contents: SampleFile.Contents
        do { contents = try SampleFile.parse(Array(text.utf8), path: file) } catch {
            throw HRVCommandError(message: "\(error)")
        }
        let holding = contents.samples.filter {
            fromECG ? ($0.ecgUv?.isEmpty == false && ($0.ecgRateHz ?? 0) > 0) : !($0.rrIntervalsMs ?? []).isEmpty
        }
        let what = fromECG ? "raw ECG" : "RR"
        var devices: [String] = []
        for s in holding where !devices.contains(s.deviceId ?? s.source) { devices.append(s.deviceId ?? s.source) }
        let chosen: String
        if let given = device {
            guard let device = RRFile.matching(given, in: devices) else {
                throw HRVCommandError(message: "\(file): no \(what) from device \(given) in the recording"
                    + (devices.isEmpty ? "" : " (it holds \(what) from \(devices.joined(separator: ", ")))"))
            }
            chosen = device
        } else {
            guard let only = devices.first else {
                throw HRVCommandError(message: fromECG
                    ? "\(file): the recording holds no raw ECG (recorded by `stream --strap … --ecg` from a Polar strap)"
                    : "\(file): the recording holds no RR intervals (a camera's or a strap's heart rate alone has none)")
            }
            guard devices.count == 1 else {
                throw HRVCommandError(message: "\(file): the recording holds \(what) from \(devices.count) devices "
                    + "(\(devices.joined(separator: ", "))): choose one with --device")
            }
            chosen = only
        }
        let samples = holding.filter { ($0.deviceId ?? $0.source) == chosen }
        var notes = contents.notes(replaying: false)
        if fromECG {
            let rate = samples[0].ecgRateHz!
            let runs = ECGRPeaks.runs(samples, rateHz: rate)
            let seconds = Double(runs.reduce(0) { $0 + $1.samples.count }) / rate
            // Said when the strap's real rate differs from the nominal one (a Polar H10's does, by up to 1.5 %).
            let measured = runs.compactMap(\.measuredRateHz)
            let mean = measured.isEmpty ? rate : measured.reduce(0, +) / Double(measured.count)
            let sampled = abs(mean - rate) < 0.005
                ? "" : String(format: " (sampled at %.2f Hz by the chunks' times)", mean)
            notes.append("R peaks in \(String(format: "%.1f", seconds)) s of ECG at \(String(format: "%g", rate)) Hz"
                + sampled
                + (runs.count > 1 ? " in \(runs.count) runs (lost frames split it; no interval is taken across)" : ""))
            for note in notes { StandardStream.error.write(Data("note: \(file): \(note)\n".utf8)) }
            let timed = ECGRPeaks.rrRuns(runs, rateHz: rate)
            guard !timed.isEmpty else {
                throw HRVCommandError(message: "\(file): no two R peaks found in \(chosen)'s ECG (too short, or no "
                    + "heartbeat in it)")
            }
            return RRFile(rrMs: timed.flatMap(\.rrMs), column: "R peaks of \(chosen)'s ECG", unit: .ms,
                segments: timed.map(\.rrMs), runEndsS: timed.map(\.endS), device: chosen)
        }
        // The device's runs of beats as the live session splits them (a lost link, lost notifications, no skin
        // contact): the notifications without RR count too; raw ECG and motion chunks do not (the engine keeps them
        // out of its window: a lost ECG frame is no lost beat).
        let runs = SessionMetrics.rrRuns(contents.samples.filter {
            ($0.deviceId ?? $0.source) == chosen && !$0.isWaveformOnly
        })
        for note in notes { StandardStream.error.write(Data("note: \(file): \(note)\n".utf8)) }
        if runs.count > 1 {
            noteBreaks(runs.count - 1, file: file, why: "a lost link, lost notifications or no skin contact: beats missing")
        }
        let segments = runs.map(\.rrMs)
        return RRFile(rrMs: segments.flatMap { $0 }, column: "rr_intervals_ms of \(chosen)", unit: .ms, segments: segments,
            runEndsS: runs.map { Double($0.endMs) / 1000 }, device: chosen)
    }

    /// What to say of intervals no heart beats at (nil when there are none): how many, the first lines, and what the
    /// correction does with them.
    static func implausibleNote(_ found: [RRFile.Implausible], correction: Correction) -> String? {
        guard !found.isEmpty else { return nil }
        let range = RRFile.plausibleMs
        let shown = found.prefix(5).map { "line \($0.line): \(String(format: "%g", $0.ms)) ms" }.joined(separator: ", ")
        let more = found.count > 5 ? " and \(found.count - 5) more" : ""
        let broken = found.filter { !HRVAnalyzer.beatRangeMs.contains($0.ms) }.count
        let fate = correction == .none
            ? "--correct none analyses them as they are"
            : broken == found.count
            ? "they are left out, and the series breaks at each (no successive difference across it)"
            : broken == 0
            ? "the correction treats them as extra beats where their neighbours say so"
            : "those below 100 or above 3000 ms (\(broken)) are left out, the series breaking at each; the correction "
                + "treats the others as extra beats where their neighbours say so"
        return "\(found.count) interval\(found.count == 1 ? "" : "s") outside \(Int(range.lowerBound))-"
            + "\(Int(range.upperBound)) ms (a heart rate over 240 or under 20 per minute; \(shown)\(more)): a missed or "
            + "extra beat, a typo, or a value in another unit (--unit)? \(fate)"
    }

    /// What to say of intervals two or more lost beats long (2.5 times the median or more, up to the 3000 ms above
    /// which they are left out) under the Kubios correction, which rebuilds one lost beat but not two: nine such
    /// intervals among NSRDB's 337 took its RMSSD from 98 to 232 ms, where the median correction gave 103. Nil
    /// when there are none, or another correction applies.
    static func lostBeatsNote(_ rr: [Double], correction: Correction) -> String? {
        guard correction == .kubios, !rr.isEmpty else { return nil }
        let sorted = rr.sorted()
        let median = sorted[sorted.count / 2]
        let long = rr.filter { $0 >= 2.5 * median && HRVAnalyzer.beatRangeMs.contains($0) }
        guard !long.isEmpty else { return nil }
        let shown = long.prefix(5).map { String(format: "%g ms", $0) }.joined(separator: ", ")
        return "\(long.count) interval\(long.count == 1 ? " is" : "s are") 2.5 times the median (\(String(format: "%g", median)) "
            + "ms) or more (\(shown)\(long.count > 5 ? ", …" : "")): two or more beats lost, which the Kubios correction "
            + "does not rebuild (RMSSD and SDNN then read high); --correct median rebuilds them"
    }

    /// Says on standard error that the beats break, and what that means for the metrics.
    static func noteBreaks(_ count: Int, file: String, why: String) {
        let note = "the beats break \(count) time\(count == 1 ? "" : "s") (\(why)); HRV takes no successive difference "
            + "across a break, as the live session does, and windows keep the time a break took"
        StandardStream.error.write(Data("note: \(file): \(note)\n".utf8))
    }

    static func readText(_ path: String) throws -> String {
        let data: Data
        if path == "-" {
            do { data = Data(try SystemCall.readStandardInput(notA: "an RR file")) } catch {
                throw HRVCommandError(message: error.description)
            }
        } else {
            do { data = Data(try SystemCall.readFile(path, notA: "an RR file")) } catch {
                throw HRVCommandError(message: error.description)
            }
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw HRVCommandError(message: "\(path): not UTF-8 text; expected a CSV or one RR value per line")
        }
        return text
    }

    /// The metric keys a session frame uses, plus `mean_rr_ms` and `nn50`. Absent values are left out.
    static func metrics(_ r: HRVResult) -> [String: JSONValue] {
        var o: [String: JSONValue] = [
            "rr_count": .int(Int64(r.rrCount)),
            "artifact_count": .int(Int64(r.artifactCount)),
        ]
        func put(_ key: String, _ v: Double?) { if let v, v.isFinite { o[key] = .double(v) } }
        put("mean_rr_ms", r.meanRRMs)
        put("hr_from_rr_bpm", r.hrFromRRBpm)
        put("hr_sdnn_ms", r.sdnnMs)
        put("rmssd_ms", r.rmssdMs)
        put("pnn50", r.pnn50)
        if let nn50 = r.nn50 { o["nn50"] = .int(Int64(nn50)) }
        if let d = r.successiveDifferences { o["successive_differences"] = .int(Int64(d)) }
        put("resp_rate_rr_bpm", r.respirationRateBpm)
        put("resp_rate_rr_confidence", r.respirationConfidence)
        for (key, value) in r.extendedMetricValues { o[key] = .double(value) }
        return o
    }

    static func dfaObject(_ e: DFAEstimate) -> [String: JSONValue] {
        var o: [String: JSONValue] = [
            "type": .string("dfa"),
            "t_end_s": .double(e.endS),
            "rr_count": .int(Int64(e.rrCount)),
            "artifact_percent": .double(e.artifactPercent),
        ]
        if let a = e.alpha1 { o["dfa_alpha1"] = .double(a) }
        if let r = e.withheldReason { o["withheld"] = .string(r) }
        return o
    }

    static func crossingObject(_ c: DFAThresholdCrossing) -> [String: JSONValue] {
        [
            "type": .string("dfa_threshold"),
            "t_s": .double(c.atS),
            "threshold": .double(c.threshold),
            "direction": .string(c.direction.rawValue),
            "dfa_alpha1": .double(c.alpha1),
            "previous_dfa_alpha1": .double(c.previousAlpha1),
        ]
    }

    static func dfaTable(_ estimates: [DFAEstimate], crossings: [DFAThresholdCrossing]) -> String {
        var lines = ["   t_end_s  rr  artefacts_%  alpha1"]
        for e in estimates {
            let a = e.alpha1.map { fixed($0, 3) } ?? "-  (\(e.withheldReason ?? "withheld"))"
            lines.append(
                fixed(e.endS, 1).leftPadded(10) + "\(e.rrCount)".leftPadded(4) + fixed(e.artifactPercent, 1).leftPadded(13)
                    + "  " + a)
        }
        if crossings.isEmpty {
            lines.append("no crossing of 0.75 or 0.5")
        } else {
            for c in crossings {
                lines.append(
                    "alpha1 crossed \(fixed(c.threshold, 2)) \(c.direction.rawValue) at \(fixed(c.atS, 1)) s "
                        + "(\(fixed(c.previousAlpha1, 3)) -> \(fixed(c.alpha1, 3)))")
            }
        }
        return lines.joined(separator: "\n")
    }

    static func header(_ f: RRFile, file: String, correction: Correction) -> String {
        let seconds = f.rrMs.reduce(0, +) / 1000
        let source = f.column.map { $0.hasPrefix("R peaks") ? $0 : "column \($0)" }
            ?? "one value per line, unit \(f.unit.spoken)"
        return "\(file): \(f.rrMs.count) RR interval\(f.rrMs.count == 1 ? "" : "s") (\(source)), \(fixed(seconds, 1)) s; correction: \(correction.rawValue)"
    }

    /// The result as a table. `read` is the number of intervals in the file, to explain a different count after
    /// correction.
    static func table(_ r: HRVResult, correction: Correction, band: ClosedRange<Double>, read: Int? = nil) -> String {
        func row(_ name: String, _ value: String) -> String {
            name.padding(toLength: 22, withPad: " ", startingAt: 0) + value
        }
        func opt(_ v: Double?, _ digits: Int, _ unit: String) -> String { v.map { fixed($0, digits) + unit } ?? "-" }
        var lines = [String]()
        let percent = r.rrCount > 0 ? " (\(fixed(100 * Double(r.artifactCount) / Double(r.rrCount), 1)) %)" : ""
        var analysed = "\(r.rrCount)"
        if let read, read != r.rrCount {
            let d = r.rrCount - read
            analysed += d > 0
                ? " (\(read) in the file; the correction added \(d): a long interval with a missed beat is split in two)"
                : " (\(read) in the file; \(-d) fewer: extra beats merged by the correction, or invalid values dropped)"
        }
        lines.append(row("intervals analysed", analysed))
        lines.append(row("artefacts", correction == .none ? "not corrected" : "\(r.artifactCount) beats corrected\(percent)"))
        lines.append(row("mean RR", opt(r.meanRRMs, 2, " ms")))
        lines.append(row("HR from RR", opt(r.hrFromRRBpm, 2, " bpm")))
        lines.append(row("SDNN", opt(r.sdnnMs, 2, " ms")))
        var rmssd = opt(r.rmssdMs, 2, " ms")
        if r.rmssdMs != nil, let used = r.successiveDifferences {
            // With the median correction, differences next to an interval the corrector estimated are left out.
            let differences = "\(used) successive difference\(used == 1 ? "" : "s")"
            rmssd += correction == .median ? " (\(differences) between measured intervals)" : " (\(differences))"
        }
        lines.append(row("RMSSD", rmssd))
        lines.append(row("NN50", r.nn50.map(String.init) ?? "-"))
        lines.append(row("pNN50", opt(r.pnn50, 2, " %")))
        if let rate = r.respirationRateBpm, let confidence = r.respirationConfidence {
            lines.append(row("respiration", "\(fixed(rate, 1)) /min (confidence \(fixed(confidence, 2)))"))
            // A rate twice or three times a stronger slow rhythm may be that rhythm's harmonic: slow breathing.
            if band.lowerBound > HRVOptions.pacedBreathingBandHz.lowerBound, let f = r.frequency, let peak = f.lfPeakHz,
                f.lfMs2 > 5 * f.hfMs2, [2.0, 3.0].contains(where: { abs(rate / 60 - $0 * peak) <= 0.02 })
            {
                lines.append(row("", "the spectrum peaks at \(fixed(peak * 60, 1)) /min, below the band: if the "
                    + "breathing was slow or paced, this may be its harmonic (--paced-breathing searches "
                    + "\(fixed(HRVOptions.pacedBreathingBandHz.lowerBound, 2))-"
                    + "\(fixed(HRVOptions.pacedBreathingBandHz.upperBound, 2)) Hz)"))
            }
        } else {
            let why = r.respirationRejection.map { "\($0)" } ?? "no intervals"
            lines.append(row("respiration", "- (\(why); searched \(fixed(band.lowerBound, 2))-\(fixed(band.upperBound, 2)) Hz)"))
            // A spectrum dominated by a slow rhythm below the band: paced (or slow) breathing, which the default band
            // leaves out; its own search finds it.
            if band.lowerBound > HRVOptions.pacedBreathingBandHz.lowerBound, let f = r.frequency, let peak = f.lfPeakHz,
                f.lfMs2 > 2 * f.hfMs2
            {
                lines.append(row("", "the spectrum peaks at \(fixed(peak * 60, 1)) /min, below the band: slow or paced "
                    + "breathing? --paced-breathing searches \(fixed(HRVOptions.pacedBreathingBandHz.lowerBound, 2))-"
                    + "\(fixed(HRVOptions.pacedBreathingBandHz.upperBound, 2)) Hz"))
            }
        }
        for (key, value) in r.extendedMetricValues { lines.append(row(key, fixed(value, 3))) }
        if let said = extendedNote(r) { lines.append(row("", said)) }
        return lines.joined(separator: "\n")
    }

    /// Where the frequency-domain and nonlinear metrics came from when the series has breaks (the longest run
    /// only: 56 beats of a long file gave DFA and SD1 without a word), and why those absent are: nil when every one
    /// is there from an unbroken series.
    static func extendedNote(_ r: HRVResult) -> String? {
        guard let source = r.extendedSource else { return nil }
        if source.unusable {
            return "frequency and nonlinear metrics left out: the \(source.runs > 1 ? "longest unbroken run" : "series") "
                + "holds an interval under 1 ms or over 60 s, which --correct none analyses as it is (a correction leaves it out)"
        }
        var absent: [String] = []
        let seconds = source.seconds, n = source.intervals
        if let f = r.frequency {
            if f.vlfMs2 == nil { absent.append("VLF and total power (\(Int(FrequencyDomain.minimumSecondsVLF)) s unbroken)") }
            if f.lfHf == nil || f.lfNu == nil { absent.append("LF/HF and normalised units (no power in LF and HF)") }
        } else {
            absent.append(seconds < FrequencyDomain.minimumSecondsLF
                ? "the frequency domain (\(Int(FrequencyDomain.minimumSecondsLF)) s unbroken)" : "the frequency domain")
        }
        for (name, value, minimum) in [
            ("SD1/SD2", r.sd1Ms, NonlinearHRV.minimumPoincare), ("DFA alpha1", r.dfaAlpha1, NonlinearHRV.minimumAlpha1),
            ("DFA alpha2", r.dfaAlpha2, NonlinearHRV.minimumAlpha2), ("sample entropy", r.sampleEntropy, NonlinearHRV.minimumSampleEntropy),
            ("stress index", r.stressIndex, NonlinearHRV.minimumStressIndex),
        ] where value == nil {
            absent.append(n < minimum ? "\(name) (\(minimum) intervals unbroken)" : "\(name) (not defined for this series)")
        }
        guard source.runs > 1 || !absent.isEmpty else { return nil }
        let from = source.runs > 1
            ? "frequency and nonlinear metrics from the longest unbroken run of \(source.runs): \(n) intervals, \(fixed(seconds, 1)) s"
            : "frequency and nonlinear metrics from \(n) intervals, \(fixed(seconds, 1)) s"
        return from + (absent.isEmpty ? "" : "; left out: " + absent.joined(separator: ", "))
    }

    static func windowTable(_ windows: [HRVWindow]) -> String {
        let columns = ["t_start_s", "t_end_s", "rr", "artefacts", "hr_bpm", "sdnn_ms", "rmssd_ms", "pnn50", "resp_bpm", "resp_conf"]
        func opt(_ v: Double?, _ digits: Int) -> String { v.map { fixed($0, digits) } ?? "-" }
        var rows = [columns]
        for w in windows {
            let r = w.result
            rows.append([
                fixed(w.startS, 1), fixed(w.endS, 1), "\(r.rrCount)", "\(r.artifactCount)", opt(r.hrFromRRBpm, 1),
                opt(r.sdnnMs, 2), opt(r.rmssdMs, 2), opt(r.pnn50, 2), opt(r.respirationRateBpm, 1),
                opt(r.respirationConfidence, 2),
            ])
        }
        let widths = columns.indices.map { c in rows.map { $0[c].count }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { String(repeating: " ", count: widths[$0.offset] - $0.element.count) + $0.element }
                .joined(separator: "  ")
        }.joined(separator: "\n")
    }

    static func fixed(_ v: Double, _ digits: Int) -> String { String(format: "%.\(digits)f", v) }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}

/// A failure of `hr-gateway hrv` with a message that says what was wrong with the input.
struct HRVCommandError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
