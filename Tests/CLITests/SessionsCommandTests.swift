import Foundation
import GatewayEngine
import Testing

@Suite struct SessionsCommandTests {
    func tempDir() -> String {
        let p = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-sessions-\(UUID().uuidString)").path
        try? FileManager.default.createDirectory(atPath: p, withIntermediateDirectories: true)
        return p
    }

    /// Two minutes of beats, RR alternating 1000 / 1040 ms, one notification a second, with raw 1/1024 s values.
    /// Records the 120 beats of `writeBeats` as a session in the store of `dir` (replayed at 1000x).
    func recordBeats(as id: String? = nil, in dir: String) throws {
        let beats = dir + "/beats.jsonl"
        _ = try writeBeats(beats)
        let run = try CLI.run(["stream", "--replay", beats, "--replay-speed", "1000", "--format", "jsonl", "--state-dir", dir]
            + (id.map { ["--session-id", $0] } ?? []))
        #expect(run.status == 0, "\(run.stderr)")
    }

    func writeBeats(_ path: String) throws -> [BiosignalSample] {
        var samples: [BiosignalSample] = []
        for i in 0..<120 {
            let rr: Double = i % 2 == 0 ? 1000 : 1040
            samples.append(BiosignalSample(
                timestampMs: 5_000_000 + Int64(i) * 1020, bpm: (60000 / rr).rounded(), rrIntervalsMs: [rr],
                deviceId: "AA:BB", source: "ble_hrm", contact: .contact, rrRaw1024: [UInt16((rr * 1.024).rounded())],
                sequence: UInt64(i)))
        }
        try samples.map { $0.jsonValue.jsonString + "\n" }.joined().write(toFile: path, atomically: true, encoding: .utf8)
        return samples
    }

    func json(_ text: String) throws -> JSONValue { try JSONValue(parsing: text) }

    /// A recorded session replayed by its ID has its frames and its duration: the replay starts where the session
    /// started (the simulated strap's first notification a second in) and ends where it ended. It began at the first
    /// sample and ended at the last, one frame and a second or two short.
    @Test func aStoredSessionReplaysWithItsFramesAndDuration() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let live = try CLI.run(["stream", "--simulate", "--duration", "6", "--emit-interval", "2", "--format", "jsonl",
                                "--session-id", "span-1", "--state-dir", dir])
        #expect(live.status == 0, "\(live.stderr)")
        let replay = try CLI.run(["stream", "--replay", "span-1", "--replay-speed", "100", "--format", "jsonl",
                                  "--emit-interval", "2", "--state-dir", dir, "--no-record-db"])
        #expect(replay.status == 0, "\(replay.stderr)")
        func shape(_ lines: [String]) throws -> (frames: Int, duration: Int64?) {
            let events = try lines.map(json)
            return (events.filter { $0["type"] == .string("session_frame") }.count,
                    events.last { $0["type"] == .string("session_summary") }?["duration_actual_sec"]?.intValue)
        }
        let (a, b) = (try shape(live.lines), try shape(replay.lines))
        #expect(a.frames == 3 && a.duration == 6, "the live session: \(a)")
        #expect(b.frames == a.frames && b.duration == a.duration, "replayed \(b), recorded \(a)")
    }

    @Test func aReplayedSessionIsRecordedListedShownExportedReplayedAndDeleted() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let beats = dir + "/beats.jsonl"
        let samples = try writeBeats(beats)
        let run = try CLI.run(["stream", "--replay", beats, "--replay-speed", "1000", "--format", "jsonl",
                               "--session-id", "rec-1", "--state-dir", dir, "--correct", "none", "--window", "300"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.isEmpty, "\(run.stderr)")

        let list = try CLI.run(["sessions", "list", "--json", "--state-dir", dir])
        #expect(list.status == 0, "\(list.stderr)")
        let sessions = try #require(try json(list.stdout).arrayValue)
        #expect(sessions.count == 1)
        let s = try #require(sessions.first)
        #expect(s["session_id"] == .string("rec-1"))
        #expect(s["state"] == .string("completed"))
        #expect(s["sample_count"] == .int(120))
        #expect(s["rr_count"] == .int(120))
        #expect(s["devices"] == .array([.string("AA:BB")]))
        #expect(s["event_count"]?.intValue == Int64(run.lines.count), "every printed event is recorded")
        // A fast replay runs on the recording's time: stored as the two minutes it holds, not the instant it took.
        let span = (s["ended_at_ms"]?.intValue ?? 0) - (s["started_at_ms"]?.intValue ?? 0)
        #expect(span >= 121_000 && span < 300_000, "\(s.jsonString)")
        // The table's duration and pacing columns are in the JSON too (none for a focus session).
        #expect(s["duration_ms"]?.intValue == span && s["pacing"] == nil, "\(s.jsonString)")

        let table = try CLI.run(["sessions", "list", "--state-dir", dir])
        #expect(table.lines.count == 2)
        let columns = table.lines.last?.split(separator: " ").map(String.init) ?? []
        // Date, time and offset from UTC in STARTED.
        #expect(columns.count == 11, "\(table.stdout)")
        #expect(columns.prefix(3) == ["rec-1", "completed", "focus"])
        #expect(columns.suffix(4) == ["120", "120", "AA:BB", "-"], "no pacing for a focus session")

        let show = try CLI.run(["sessions", "show", "rec-1", "--json", "--state-dir", dir])
        #expect(show.status == 0, "\(show.stderr)")
        let shown = try json(show.stdout)
        #expect(shown["end"]?["type"] == .string("session_summary"))
        #expect(shown["end"] == (try json(try #require(run.lines.last))))
        #expect(shown["config"]?["session_id"] == .string("rec-1"))

        // CSV: one row per beat with its raw value and contact as 1; beats are their RR apart (1000 and 1040 ms
        // alternately, while the notifications come every 1020 ms).
        let csv = try CLI.run(["sessions", "export", "rec-1", "--format", "csv", "--state-dir", dir])
        let rows = csv.lines
        #expect(rows.first == "session_id,device_id,beat_time_ms,rr_ms,rr_1024,hr_bpm,contact,segment_start")
        #expect(rows.count == 121)
        let expectedRows = samples.enumerated().map { k, s in
            "rec-1,AA:BB,\(s.timestampMs),\(Int(s.rrIntervalsMs![0])),\(s.rrRaw1024![0]),\(Int(s.bpm)),1,\(k == 0 ? 1 : 0)"
        }
        // Replay shifts timestamps to the replay's start: compare the columns that do not move, and the spacing.
        #expect(rows.dropFirst().map { $0.split(separator: ",").enumerated().filter { $0.offset != 2 }.map(\.element) }
                == expectedRows.map { $0.split(separator: ",").enumerated().filter { $0.offset != 2 }.map(\.element) })
        let times = rows.dropFirst().compactMap { Int64($0.split(separator: ",")[2]) }
        #expect(times.count == 120)
        #expect(zip(times.indices, times.indices.dropFirst()).allSatisfy { times[$1] - times[$0] == Int64(samples[$1].rrIntervalsMs![0]) })

        let full = try CLI.run(["sessions", "export", "rec-1", "--format", "json", "--state-dir", dir])
        let doc = try json(full.stdout)
        #expect(doc["samples"]?.arrayValue?.count == 120)
        #expect(doc["events"]?.arrayValue?.count == run.lines.count)
        #expect(doc["session"]?["state"] == .string("completed"))

        // JSON lines export replays, and so does the session id itself.
        let exported = dir + "/export.jsonl"
        let jsonl = try CLI.run(["sessions", "export", "rec-1", "--format", "jsonl", "--output", exported, "--state-dir", dir])
        #expect(jsonl.status == 0, "\(jsonl.stderr)")
        let original = try #require(try run.lines.last.map(json))
        for source in [exported, "rec-1"] {
            let again = try CLI.run(["stream", "--replay", source, "--replay-speed", "1000", "--format", "jsonl",
                                     "--correct", "none", "--window", "300", "--state-dir", dir, "--no-record-db"])
            #expect(again.status == 0, "\(again.stderr)")
            let summary = try #require(try again.lines.last.map(json))
            #expect(summary["metrics"]?["rr_count"] == original["metrics"]?["rr_count"])
            #expect(summary["metrics"]?["rmssd_ms"] == original["metrics"]?["rmssd_ms"])
        }
        let afterNoRecord = try CLI.run(["sessions", "list", "--json", "--state-dir", dir])
        #expect(try json(afterNoRecord.stdout).arrayValue?.count == 1, "--no-record-db records nothing")

        let unknown = try CLI.run(["stream", "--replay", "no-such-session", "--state-dir", dir])
        #expect(unknown.status != 0)
        #expect(unknown.stderr.contains("neither a file nor a session"))

        let del = try CLI.run(["sessions", "delete", "rec-1", "--state-dir", dir])
        #expect(del.status == 0, "\(del.stderr)")
        let gone = try CLI.run(["sessions", "show", "rec-1", "--state-dir", dir])
        #expect(gone.status != 0)
        #expect(gone.stderr.contains("no session rec-1"))
        #expect(try json(CLI.run(["sessions", "list", "--json", "--state-dir", dir]).stdout).arrayValue == [])
    }

    /// Two straps: `sessions show` puts each one's summary values on its own line, not as one JSON blob in the
    /// summary line, and the summary names the strap at its top level.
    @Test func showPutsEachStrapOnItsOwnLine() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var samples: [BiosignalSample] = []
        for second in 0..<40 {
            samples.append(BiosignalSample(timestampMs: 1_000_000 + Int64(second) * 1000, bpm: 60,
                                           rrIntervalsMs: [second % 2 == 0 ? 990 : 1010], deviceId: "AA", source: "ble_hrm"))
            if second >= 3 {
                samples.append(BiosignalSample(timestampMs: 1_000_500 + Int64(second) * 1000, bpm: 80,
                                               rrIntervalsMs: [second % 2 == 0 ? 740 : 760], deviceId: "BB", source: "ble_hrm"))
            }
        }
        try samples.map { $0.jsonValue.jsonString + "\n" }.joined().write(toFile: dir + "/two.jsonl", atomically: true, encoding: .utf8)
        let replay = try CLI.run(["stream", "--replay", dir + "/two.jsonl", "--replay-speed", "1000", "--format", "jsonl",
                                  "--session-id", "two-1", "--correct", "none", "--state-dir", dir])
        #expect(replay.status == 0, "\(replay.stderr)")
        let show = try CLI.run(["sessions", "show", "two-1", "--state-dir", dir])
        #expect(show.status == 0, "\(show.stderr)")
        let summary = try #require(show.lines.first { $0.hasPrefix("summary   ") })
        #expect(!summary.contains("devices="), "\(summary)")
        #expect(summary.contains("hr_mean_bpm=60.0") && summary.contains(#"primary_device="AA""#), "\(summary)")
        let a = try #require(show.lines.first { $0.hasPrefix("  AA  ") }, "\(show.stdout)")
        let b = try #require(show.lines.first { $0.hasPrefix("  BB  ") }, "\(show.stdout)")
        #expect(a.contains("hr_mean_bpm=60.0") && a.contains("rmssd_ms=20.0"), "\(a)")
        #expect(b.contains("hr_mean_bpm=80.0") && b.contains("rmssd_ms=20.0"), "\(b)")
    }

    /// A summary's values are its last window's (the SDK's rule), which `show` printed as "summary" with nothing to
    /// say so: it names the window, and gives beside it the HRV of every recorded beat, equal to `hrv` on the CSV
    /// export: broken where the export's `segment_start` breaks the beats (a notification lost at 90 s: the
    /// `notification_seq` jumps, which the engine's runs do not see).
    @Test func showSaysTheSummaryIsTheLastWindowAndGivesEveryBeatsHRV() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // Two minutes: a variable first minute, a steady second one.
        var samples: [BiosignalSample] = []
        for second in 0..<120 {
            // A breathing rhythm (5 s), wide in the first minute, narrow in the second.
            let swing: Double = second < 60 ? 60 : 5
            let rr = 1000 + swing * sin(2 * Double.pi * Double(second) / 5)
            samples.append(BiosignalSample(timestampMs: 1_000_000 + Int64(second) * 1000, bpm: 60, rrIntervalsMs: [rr],
                                           deviceId: "AA", source: "ble_hrm", sequence: UInt64(second < 90 ? second : second + 1)))
        }
        try samples.map { $0.jsonValue.jsonString + "\n" }.joined().write(toFile: dir + "/b.jsonl", atomically: true, encoding: .utf8)
        let replay = try CLI.run(["stream", "--replay", dir + "/b.jsonl", "--replay-speed", "1000", "--format", "jsonl",
                                  "--session-id", "win-1", "--window", "30", "--state-dir", dir])
        #expect(replay.status == 0, "\(replay.stderr)")
        let show = try CLI.run(["sessions", "show", "win-1", "--state-dir", dir])
        let summary = try #require(show.lines.first { $0.hasPrefix("summary   ") }, "\(show.stdout)")
        #expect(summary.hasPrefix("summary   (the last 30 s window, as the SDK's) "), "\(summary)")
        let recorded = try #require(show.lines.first { $0.hasPrefix("recorded  ") }, "\(show.stdout)")
        #expect(recorded.contains("rr_count=120 artifact_count=0"), "\(recorded)")

        let csv = dir + "/win.csv"
        #expect(try CLI.run(["sessions", "export", "win-1", "--format", "csv", "--output", csv, "--state-dir", dir]).status == 0)
        let hrv = try json(try CLI.run(["hrv", "--json", csv]).stdout)
        let shown = try json(try CLI.run(["sessions", "show", "win-1", "--json", "--state-dir", dir]).stdout)
        let whole = try #require(shown["recorded_hrv"]?["AA"])
        #expect(hrv["successive_differences"] == .int(118), "a break at the lost notification: \(hrv)")
        for key in ["rr_count", "successive_differences", "rmssd_ms", "hr_sdnn_ms", "pnn50", "artifact_count"] {
            #expect(whole[key] == hrv[key], "\(key): \(whole) vs \(hrv)")
        }
        let last = try #require(shown["end"]?["metrics"]?["rmssd_ms"]?.doubleValue)
        #expect(last < 10 && (whole["rmssd_ms"]?.doubleValue ?? 0) > 30, "the whole session's, not the last window's: \(whole)")
    }

    @Test func killDashNineLeavesAnInterruptedSessionWithEverySampleReported() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // Raw frames every second over an hour-long window: each lists every sample received so far.
        let cli = try RunningCLI(["stream", "--simulate", "--format", "jsonl", "--state-dir", dir, "--session-id", "k9",
                                  "--emit-interval", "1", "--raw", "--window", "3600"])
        var reported: [JSONValue] = []
        var frames = 0
        while frames < 3, let line = cli.readLine() {
            let e = try json(line)
            if e["type"] == .string("biosignal_frame") {
                frames += 1
                for sample in e["samples"]?.arrayValue ?? [] where !reported.contains(sample) { reported.append(sample) }
            }
        }
        try #require(frames == 3)
        cli.signal(SIGKILL)
        #expect(cli.wait() == SIGKILL)

        let list = try CLI.run(["sessions", "list", "--json", "--state-dir", dir])
        let s = try #require(try json(list.stdout).arrayValue?.first)
        #expect(s["session_id"] == .string("k9"))
        #expect(s["state"] == .string("interrupted"))
        #expect(s["ended_at_ms"] == nil)

        let export = try CLI.run(["sessions", "export", "k9", "--format", "jsonl", "--state-dir", dir])
        let stored = try export.lines.map(json)
        #expect(reported.count >= 2)
        #expect(stored.count >= reported.count)
        for sample in reported { #expect(stored.contains(sample), "reported before the kill, so stored: \(sample.jsonString)") }
        #expect(Array(stored.prefix(reported.count)) == reported, "in the order they arrived")
        let reportedRR = reported.flatMap { $0["rr_intervals_ms"]?.arrayValue ?? [] }
        #expect(!reportedRR.isEmpty)
        // No summary, and still the HRV of every beat kept (it was shown only after a summary).
        let show = try CLI.run(["sessions", "show", "k9", "--state-dir", dir])
        let storedRR = stored.reduce(0) { $0 + ($1["rr_intervals_ms"]?.arrayValue?.count ?? 0) }
        #expect(show.lines.contains { $0.hasPrefix("recorded  (every beat, Kubios-corrected") && $0.contains("rr_count=\(storedRR) ") },
                "\(storedRR) RR stored: \(show.stdout)")
    }

    @Test func aRecordingFailureIsReportedOnceAndTheSessionRuns() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/file"
        _ = FileManager.default.createFile(atPath: file, contents: Data("x".utf8))
        let beats = dir + "/beats.jsonl"
        _ = try writeBeats(beats)
        let r = try CLI.run(["stream", "--replay", beats, "--replay-speed", "1000", "--format", "jsonl",
                             "--state-dir", file + "/state"])
        #expect(r.status == 0)
        #expect(r.lines.last.map { $0.contains("session_summary") } == true)
        let warnings = r.stderr.split(separator: "\n")
        #expect(warnings.count == 1, "\(r.stderr)")
        #expect(warnings.first?.contains("not recording this session") == true)
    }

    /// A damaged sessions.sqlite ran every session unrecorded (exit 0, a warning a headless service's operator may
    /// not read for weeks). The session now goes to its journal alone, and once the damaged file is moved aside (as
    /// `doctor` says), the next command that reads the store imports it as a session of its own.
    @Test func aSessionRecordedWhileTheDatabaseIsDamagedIsImportedOnceItIsMovedAside() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let beats = dir + "/beats.jsonl"
        let written = try writeBeats(beats)
        try FileManager.default.createDirectory(atPath: dir + "/state", withIntermediateDirectories: true)
        try String(repeating: "not a database, ", count: 300).write(
            toFile: dir + "/state/sessions.sqlite", atomically: true, encoding: .utf8)
        let r = try CLI.run(["stream", "--replay", beats, "--replay-speed", "1000", "--format", "jsonl",
                             "--session-id", "kept", "--state-dir", dir + "/state"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.lines.last.map { $0.contains("session_summary") } == true)
        #expect(r.stderr.contains("recording this session into its journal"), "\(r.stderr)")
        #expect(r.stderr.contains("only, imported into the database"), "the end says what waits: \(r.stderr)")
        // Still damaged: the reading commands say so, and the journal waits.
        let refused = try CLI.run(["sessions", "list", "--state-dir", dir + "/state"])
        #expect(refused.status != 0 && refused.stderr.contains("not a database"), "\(refused.stderr)")
        // The same id again: refused as a healthy store refuses it (it ran unrecorded, its journal taken).
        let again = try CLI.run(["stream", "--replay", beats, "--replay-speed", "1000", "--format", "jsonl",
                                 "--session-id", "kept", "--state-dir", dir + "/state"])
        #expect(again.status != 0 && again.stderr.contains("session kept is already recorded, in its journal"),
                "\(again.stderr)")
        #expect(again.stdout.isEmpty, "no session ran: \(again.stdout)")
        try FileManager.default.moveItem(atPath: dir + "/state/sessions.sqlite", toPath: dir + "/state/damaged-sessions.sqlite")
        let list = try CLI.run(["sessions", "list", "--json", "--state-dir", dir + "/state"])
        #expect(list.status == 0, "\(list.stderr)")
        let sessions = try #require(try JSONValue(parsing: list.stdout).arrayValue)
        #expect(sessions.count == 1 && sessions.first?["session_id"]?.stringValue == "kept", "\(list.stdout)")
        #expect(sessions.first?["state"]?.stringValue == "completed", "\(list.stdout)")
        let samples = try CLI.run(["sessions", "export", "kept", "--format", "jsonl", "--state-dir", dir + "/state"])
        #expect(samples.status == 0 && samples.lines.count == written.count, "every beat of the file: \(samples.lines.count)")
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: dir + "/state/journal")) ?? []).isEmpty,
                "imported, the journal is gone")
    }

    @Test func anEDFExportIsWrittenToTheFileAsked() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try recordBeats(as: "edf-1", in: dir)
        let run = try CLI.run(["sessions", "export", "edf-1", "--format", "edf", "--output", dir + "/s.edf", "--state-dir", dir])
        #expect(run.status == 0, "\(run.stderr)")
        let bytes = try #require(FileManager.default.contents(atPath: dir + "/s.edf"))
        #expect(String(decoding: bytes.prefix(8), as: UTF8.self) == "0       ")
        #expect(String(decoding: bytes[192..<197], as: UTF8.self) == "EDF+C")
        // 120 beats: each a "beat" annotation.
        #expect(bytes.split(separator: 0x14).filter { $0.elementsEqual("beat".utf8) }.count == 120)
    }

    /// A real ECG excerpt (Tests/Fixtures/ecg_mitbih208_130hz.csv) recorded as `stream --ecg` records a Polar strap's
    /// chunks (73 samples, times off by a few ms), replayed into the store: `--format ecg-csv` has every sample once,
    /// in order, 1/130 s apart; the session has no accelerometer, and acc-csv says so.
    @Test func theECGExportHasEverySampleAtItsTime() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/ecg_mitbih208_130hz.csv").path
        let ecg = try String(contentsOfFile: fixture, encoding: .utf8).split(separator: "\n").dropFirst()
            .prefix(130 * 15).map { try #require(Int32($0.trimmingCharacters(in: .whitespaces))) }
        var samples: [BiosignalSample] = []
        for start in stride(from: 0, to: ecg.count, by: 73) {
            let ms = 5_000_000 + Int64((Double(start) * 1000 / 130).rounded()) + Int64(start % 5) - 2
            samples.append(BiosignalSample(
                timestampMs: ms, bpm: 0, deviceId: "A0:9E:1A:00:00:02", source: "polar_ecg",
                ecgUv: Array(ecg[start..<min(start + 73, ecg.count)]), ecgRateHz: 130))
        }
        for i in 0..<15 {
            samples.append(BiosignalSample(timestampMs: 5_000_900 + Int64(i) * 1000, bpm: 60, rrIntervalsMs: [1000],
                                           deviceId: "A0:9E:1A:00:00:02", source: "ble_hrm"))
        }
        samples.sort { $0.timestampMs < $1.timestampMs }
        try samples.map { $0.jsonValue.jsonString + "\n" }.joined().write(toFile: dir + "/ecg.jsonl", atomically: true, encoding: .utf8)
        let replay = try CLI.run(["stream", "--replay", dir + "/ecg.jsonl", "--replay-speed", "1000", "--format", "jsonl",
                                  "--session-id", "ecg-1", "--state-dir", dir])
        #expect(replay.status == 0, "\(replay.stderr)")

        let export = try CLI.run(["sessions", "export", "ecg-1", "--format", "ecg-csv", "--state-dir", dir])
        #expect(export.status == 0, "\(export.stderr)")
        #expect(export.lines.first == "session_id,device_id,time_ms,ecg_uv,segment_start")
        let rows = export.lines.dropFirst().map { $0.split(separator: ",").map(String.init) }
        #expect(rows.map { Int32($0[3]) ?? 0 } == ecg)
        #expect(rows.filter { $0[4] == "1" }.count == 1, "one segment")
        let times = rows.compactMap { Double($0[2]) }
        #expect(times.count == ecg.count)
        #expect(zip(times, times.dropFirst()).allSatisfy { abs(($1 - $0) - 1000 / 130) < 0.0011 })

        let show = try CLI.run(["sessions", "show", "ecg-1", "--state-dir", dir])
        #expect(show.stdout.contains("ecg       1950 samples at 130 Hz over 15.0 s, 1 segment (A0:9E:1A:00:00:02)"),
                "\(show.stdout)")
        #expect(!show.stdout.contains("motion"))
        let list = try CLI.run(["sessions", "list", "--json", "--state-dir", dir])
        let listed = try JSONValue(parsing: list.stdout).arrayValue?.first { $0["session_id"] == .string("ecg-1") }
        #expect(listed?["waveforms"] == .array([.string("ecg")]), "\(list.stdout)")

        let acc = try CLI.run(["sessions", "export", "ecg-1", "--format", "acc-csv", "--state-dir", dir])
        #expect(acc.status == 1)
        #expect(acc.stderr.contains("session ecg-1 holds no accelerometer samples"), "\(acc.stderr)")
        #expect(acc.stdout.isEmpty)
        // Written as it is made, to the file asked, the same bytes; a refused export leaves a file it would have
        // replaced as it was (the file is opened at the export's first part).
        let toFile = try CLI.run(["sessions", "export", "ecg-1", "--format", "ecg-csv", "-o", dir + "/ecg.csv", "--state-dir", dir])
        #expect(toFile.status == 0, "\(toFile.stderr)")
        #expect(FileManager.default.contents(atPath: dir + "/ecg.csv") == Data(export.stdout.utf8))
        let kept = try CLI.run(["sessions", "export", "ecg-1", "--format", "acc-csv", "--output", dir + "/ecg.csv", "--overwrite",
                                "--state-dir", dir])
        #expect(kept.status == 1)
        #expect(FileManager.default.contents(atPath: dir + "/ecg.csv") == Data(export.stdout.utf8), "the refused export emptied the file")
    }

    /// A --session-id already in the store is refused before the session starts (it used to run unrecorded, status
    /// 0, with a warning); the stored session is untouched.
    @Test func aSessionIdAlreadyInTheStoreIsRefused() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try recordBeats(as: "dup-1", in: dir)
        let again = try CLI.run(["stream", "--replay", dir + "/beats.jsonl", "--replay-speed", "1000", "--format", "jsonl",
                                 "--session-id", "dup-1", "--state-dir", dir])
        #expect(again.status == 1)
        #expect(again.stderr.contains("session dup-1 is already in the store"), "\(again.stderr)")
        #expect(again.stderr.contains("hr-gateway sessions delete dup-1"), "\(again.stderr)")
        #expect(!again.stdout.contains("session_started"), "nothing started: \(again.stdout)")
        let csv = try CLI.run(["sessions", "export", "dup-1", "--format", "csv", "--state-dir", dir])
        #expect(csv.lines.count == 121, "the first recording is whole")
    }

    /// An export onto a file that holds data is refused without --overwrite, and onto the store's own files always:
    /// it replaced any file in silence, the store's database too (every recorded session lost, exit 0).
    @Test func anExportReplacesNoFileInSilence() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try recordBeats(as: "ow-1", in: dir)
        let mine = dir + "/mine.csv"
        try "precious\n".write(toFile: mine, atomically: true, encoding: .utf8)
        let refused = try CLI.run(["sessions", "export", "ow-1", "--output", mine, "--state-dir", dir])
        #expect(refused.status == 64, "\(refused.stderr)")
        #expect(refused.stderr.contains("--output \(mine) already holds 9 bytes"), "\(refused.stderr)")
        #expect(try String(contentsOfFile: mine, encoding: .utf8) == "precious\n")
        let replaced = try CLI.run(["sessions", "export", "ow-1", "--output", mine, "--overwrite", "--state-dir", dir])
        #expect(replaced.status == 0, "\(replaced.stderr)")
        #expect(try String(contentsOfFile: mine, encoding: .utf8).hasPrefix("session_id,"))

        // The other state files too: the tokens file was replaced with CSV.
        try #"{"tokens":[]}"#.write(toFile: dir + "/tokens.json", atomically: true, encoding: .utf8)
        for file in ["sessions.sqlite", "sessions.sqlite-wal", "tokens.json"] where FileManager.default.fileExists(atPath: dir + "/" + file) {
            let onStore = try CLI.run(["sessions", "export", "ow-1", "--format", "edf", "--output", dir + "/" + file,
                                       "--overwrite", "--state-dir", dir])
            #expect(onStore.status == 1, "\(file): \(onStore.stderr)")
            #expect(onStore.stderr.contains("is a file of the gateway's state"), "\(onStore.stderr)")
        }
        #expect(try String(contentsOfFile: dir + "/tokens.json", encoding: .utf8) == #"{"tokens":[]}"#)
        let show = try CLI.run(["sessions", "show", "ow-1", "--state-dir", dir])
        #expect(show.status == 0 && show.stdout.contains("completed"), "the store is whole: \(show.stderr)")
    }

    /// Exporting a session while it is recorded gives what was recorded so far, and says so (it said nothing: a
    /// partial file taken for the session).
    @Test func anExportOfARunningSessionSaysItIsPartial() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let cli = try RunningCLI(["stream", "--simulate", "--format", "jsonl", "--state-dir", dir, "--session-id", "run-1",
                                  "--emit-interval", "1", "--raw"])
        while let line = cli.readLine(), !line.contains("biosignal_frame") {}
        let export = try CLI.run(["sessions", "export", "run-1", "--format", "csv", "--state-dir", dir])
        cli.signal(SIGTERM)
        _ = cli.wait()
        #expect(export.status == 0, "\(export.stderr)")
        #expect(export.stderr.contains("session run-1 is being recorded now"), "\(export.stderr)")
        let after = try CLI.run(["sessions", "export", "run-1", "--format", "csv", "--state-dir", dir])
        #expect(after.status == 0 && !after.stderr.contains("being recorded"), "\(after.stderr)")
    }

    /// A long session id (up to 200 characters are taken) is cut in the table, not widening every row; --json and
    /// its first characters still name it whole.
    @Test func aLongSessionIdIsCutInTheList() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let id = String(repeating: "S", count: 150)
        _ = try CLI.run(["stream", "--simulate", "--duration", "2", "--format", "jsonl", "--state-dir", dir, "--session-id", id])
        let list = try CLI.run(["sessions", "list", "--state-dir", dir])
        let row = try #require(list.lines.dropFirst().first)
        #expect(row.hasPrefix(String(repeating: "S", count: 35) + "…  completed"), "\(row)")
        #expect(try CLI.run(["sessions", "list", "--json", "--state-dir", dir]).stdout.contains(id))
    }

    /// A journal no import takes (its first line lost, or of an older version for a session not in the database)
    /// was kept for ever without a word: every command showed an empty, healthy store. Now each command that opens
    /// the store says it, with what it holds.
    @Test func aJournalThatCannotBeImportedIsSaid() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let ran = try CLI.run(["stream", "--simulate", "--duration", "1", "--format", "jsonl", "--state-dir", dir,
                               "--session-id", "present"])
        #expect(ran.status == 0 || ran.status == 1, "\(ran.stderr)")
        let sample = #"{"kind":"sample","sample":{"timestamp_ms":1796000000000,"bpm":60,"rr_intervals_ms":[1000],"source":"ble_hrm","device_id":"A0:9E:1A:00:00:01"}}"#
        try FileManager.default.createDirectory(atPath: dir + "/journal", withIntermediateDirectories: true)
        try (sample + "\n" + sample + "\n").write(toFile: dir + "/journal/headless.jsonl", atomically: true, encoding: .utf8)
        let list = try CLI.run(["sessions", "list", "--state-dir", dir])
        #expect(list.status == 0 && list.stdout.contains("present"), "\(list.stdout)")
        #expect(list.stderr.contains("journal/headless.jsonl holds 2 samples and 0 events but no line naming its session"),
                "\(list.stderr)")
        #expect(FileManager.default.fileExists(atPath: dir + "/journal/headless.jsonl"), "kept, not deleted")
        // An empty journal holds nothing to say (it was warned about on every command for ever).
        #expect(FileManager.default.createFile(atPath: dir + "/journal/empty.jsonl", contents: Data()))
        let again = try CLI.run(["sessions", "list", "--state-dir", dir])
        #expect(again.stderr.contains("headless.jsonl") && !again.stderr.contains("empty.jsonl"), "\(again.stderr)")
        // doctor says it on the state directory's line (it said the store was fine).
        let doctor = try CLI.run(["doctor", "--state-dir", dir])
        #expect(doctor.stdout.contains("1 journal no command imports, to read or move aside by hand:")
                && doctor.stdout.contains("journal/headless.jsonl"), "\(doctor.stdout)")
    }

    /// `sessions list --last N` lists the N that started last, oldest first (a lab's store of thousands had no way to
    /// show fewer); the relay's `?limit=` reads only those too.
    @Test func listLastShowsTheNewestSessions() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for id in ["first", "second", "third"] {
            let r = try CLI.run(["stream", "--simulate", "--duration", "1", "--format", "jsonl", "--state-dir", dir,
                                 "--session-id", id])
            #expect(r.status == 0 || r.status == 1, "\(r.stderr)")
        }
        let last = try CLI.run(["sessions", "list", "--last", "2", "--json", "--state-dir", dir])
        let ids = try #require(try JSONValue(parsing: last.stdout).arrayValue).compactMap { $0["session_id"]?.stringValue }
        #expect(ids == ["second", "third"], "\(last.stdout)")
        let table = try CLI.run(["sessions", "list", "--last", "1", "--state-dir", dir])
        #expect(table.lines.count == 2 && table.lines[1].hasPrefix("third"), "\(table.stdout)")
        #expect(try CLI.run(["sessions", "list", "--last", "0", "--state-dir", dir]).status == 64)
        // A negative count is said to be one (the parser read -1 as an option: "Missing value").
        let negative = try CLI.run(["sessions", "list", "--last", "-1", "--state-dir", dir])
        #expect(negative.status == 64 && negative.stderr.contains("--last must be 1 or more, got -1"), "\(negative.stderr)")
    }

    /// `--session-id` takes what the relay takes: a line break, an escape, a direction override or 201 bytes were
    /// recorded from the command line, and printed into `sessions list` as they were.
    @Test func aSessionIdTheRelayRefusesIsRefusedOnTheCommandLine() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for (id, says) in [("a\nb", "control or format"), ("a\u{1B}[31mb", "control or format"),
                           ("abc\u{202E}fdp", "control or format"), (String(repeating: "é", count: 101), "got 202")] {
            for command in ["stream", "breathe"] {
                let r = try CLI.run([command, "--simulate", "--duration", "1", "--state-dir", dir, "--session-id", id])
                #expect(r.status == 64 && r.stderr.contains("--session-id must") && r.stderr.contains(says),
                        "\(command) \(id.debugDescription): \(r.stderr)")
            }
        }
        let list = try CLI.run(["sessions", "list", "--json", "--state-dir", dir])
        #expect(!list.stdout.contains("session_id"), "nothing recorded: \(list.stdout)")
    }

    /// A recording whose samples span more than a session can last (one mistyped timestamp_ms, years ahead) was
    /// replayed into a "completed" session of 68 years that never replayed the samples after the jump, exit 0.
    @Test func aReplaySpanningYearsIsRefused() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/wild.jsonl"
        try [1_700_000_000_000, 1_700_000_001_000, 11_700_000_002_000, 1_700_000_003_000].map {
            BiosignalSample(timestampMs: $0, bpm: 60, rrIntervalsMs: [1000], deviceId: "A0", source: "ble_hrm").jsonValue.jsonString
        }.joined(separator: "\n").appending("\n").write(toFile: path, atomically: true, encoding: .utf8)
        let run = try CLI.run(["stream", "--replay", path, "--replay-speed", "1000000", "--format", "jsonl",
                               "--state-dir", dir])
        #expect(run.status == 1, "\(run.stderr)")
        #expect(run.stderr.contains("longer than a session can last"), "\(run.stderr)")
        #expect(run.stderr.contains("(the jump is before line 3)"), "\(run.stderr)")
        #expect(!run.stdout.contains("session_started"))
    }

    /// A full disk, behind --output or behind standard output (/dev/full answers every write with ENOSPC): the
    /// export fails saying so (it used to exit 0 with its output lost, or blame the directory's permissions), leaves
    /// no half-written file, and writes into a device rather than replacing it.
    @Test func anExportOnAFullDiskFailsSayingWhy() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try recordBeats(as: "full-1", in: dir)
        let fine = try CLI.run(["sessions", "export", "full-1", "--format", "csv", "--state-dir", dir])
        #expect(fine.status == 0 && fine.lines.count == 121, "\(fine.stderr)")
        for format in ["csv", "jsonl"] {
            let run = try CLI.run(["sessions", "export", "full-1", "--format", format, "--state-dir", dir],
                                  stdoutTo: "/dev/full")
            #expect(run.status == 1, "\(format): \(run.stderr)")
            #expect(run.stderr.contains("standard output did not take everything written to it: No space left on device"),
                    "\(run.stderr)")
        }
        let toDevice = try CLI.run(["sessions", "export", "full-1", "--format", "edf", "--output", "/dev/full",
                                    "--state-dir", dir])
        #expect(toDevice.status == 1)
        #expect(toDevice.stderr.contains("cannot write /dev/full: No space left on device"), "\(toDevice.stderr)")
        var st = stat()
        #expect(stat("/dev/full", &st) == 0 && (st.st_mode & S_IFMT) == S_IFCHR, "/dev/full is still the device")
        let intoDir = try CLI.run(["sessions", "export", "full-1", "--output", dir, "--state-dir", dir])
        #expect(intoDir.status == 1)
        #expect(intoDir.stderr.contains("a directory: give a file name inside it"), "\(intoDir.stderr)")
    }

    /// A stream whose output cannot start (a --record path it cannot create, a port in use) fails before its
    /// session starts: nothing of it stays in the store (it used to stay as an "interrupted" session with nothing in it).
    @Test func aStreamThatFailsBeforeItsSessionLeavesNoSession() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let recordFail = try CLI.run(["stream", "--simulate", "--duration", "3", "--format", "jsonl",
                                      "--record", dir + "/missing/x.jsonl", "--state-dir", dir])
        #expect(recordFail.status != 0)
        #expect(recordFail.stderr.contains(dir + "/missing/x.jsonl"), "\(recordFail.stderr)")
        let holder = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(holder) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { p in
                bind(holder, p, length) == 0 && listen(holder, 1) == 0 && getsockname(holder, p, &length) == 0
            }
        }
        try #require(bound)
        let port = Int(UInt16(bigEndian: address.sin_port))
        let bindFail = try CLI.run(["stream", "--simulate", "--duration", "3", "--format", "jsonl", "--no-auth",
                                    "--listen", "127.0.0.1:\(port)", "--state-dir", dir])
        #expect(bindFail.status == 1)
        #expect(bindFail.stderr.contains("Relay cannot listen on 127.0.0.1:\(port): another program already listens on "
            + "127.0.0.1:\(port)"), "\(bindFail.stderr)")
        #expect(!bindFail.stderr.contains("Usage:"), "\(bindFail.stderr)")
        // The metrics port taken: the relay's "listening" line is not printed first (a supervisor waiting for it
        // took the gateway for up), from serve nor from stream.
        for command in [["serve", "--simulate"], ["stream", "--simulate", "--duration", "3", "--format", "jsonl"]] {
            let metricsFail = try CLI.run(command + ["--no-auth", "--listen", "127.0.0.1:0", "--metrics-listen",
                                                    "127.0.0.1:\(port)", "--state-dir", dir])
            #expect(metricsFail.status == 1, "\(command): \(metricsFail.stderr)")
            #expect(metricsFail.stderr.contains("--metrics-listen cannot listen on 127.0.0.1:\(port)"), "\(metricsFail.stderr)")
            #expect(!(metricsFail.stdout + metricsFail.stderr).contains("listening on"), "\(command): \(metricsFail.stdout)")
        }
        // The relay's own port named for the metrics too: said as such, not as "another program".
        for command in [["serve", "--simulate"], ["stream", "--simulate", "--duration", "3", "--format", "jsonl"]] {
            let same = try CLI.run(command + ["--no-auth", "--listen", "127.0.0.1:18766", "--metrics-listen",
                                              "0.0.0.0:18766", "--state-dir", dir])
            #expect(same.status == 64, "\(command): \(same.stderr)")
            #expect(same.stderr.contains("--metrics-listen and --listen both name port 18766"), "\(same.stderr)")
        }
        let list = try CLI.run(["sessions", "list", "--state-dir", dir])
        #expect(list.stdout.contains("No sessions"), "\(list.stdout)")
        // A session that ran is still recorded.
        _ = try CLI.run(["stream", "--simulate", "--duration", "2", "--format", "jsonl", "--state-dir", dir,
                         "--session-id", "ran"])
        #expect(try CLI.run(["sessions", "list", "--state-dir", dir]).stdout.contains("ran"))
    }

    /// Reading commands create nothing: a mistyped --state-dir is not made into a new, empty store.
    /// A state directory under a file cannot exist: reading commands say so (exit 1) instead of "no sessions yet"
    /// or "no tokens", which would send the user looking for recordings that were never made there.
    @Test func aStateDirectoryUnderAFileIsNamedNotReportedEmpty() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/file"
        _ = FileManager.default.createFile(atPath: file, contents: Data("x".utf8))
        for args in [["sessions", "list"], ["token", "list"]] {
            let r = try CLI.run(args + ["--state-dir", file + "/state"])
            #expect(r.status == 1, "\(args): \(r.stdout)")
            #expect(r.stderr.contains("\(file)/state cannot be a directory: \(file) is a file"), "\(r.stderr)")
        }
        let missing = try CLI.run(["sessions", "list", "--state-dir", dir + "/not-yet"])
        #expect(missing.status == 0 && missing.stdout.contains("No sessions"), "a directory that may yet exist is empty")
    }

    @Test func readingANonexistentStoreCreatesNothing() throws {
        let dir = tempDir() + "/typo"
        defer { try? FileManager.default.removeItem(atPath: (dir as NSString).deletingLastPathComponent) }
        let list = try CLI.run(["sessions", "list", "--state-dir", dir])
        #expect(list.status == 0)
        // A directory that does not exist is said to be missing (a mistyped --state-dir read as "nothing recorded
        // yet"); an existing one without a store has nothing recorded yet.
        #expect(list.stdout.contains("No sessions: \(dir) does not exist (stream and breathe create it"), "\(list.stdout)")
        let listed = try CLI.run(["sessions", "list", "--json", "--state-dir", dir])
        #expect(listed.stdout == "[]\n")
        #expect(listed.stderr.contains("warning: \(dir) does not exist: no session store there"), "\(listed.stderr)")
        let show = try CLI.run(["sessions", "show", "abc", "--state-dir", dir])
        #expect(show.status == 1)
        #expect(show.stderr.contains("No session store in \(dir), which does not exist: nothing has been recorded"), "\(show.stderr)")
        let webhook = try CLI.run(["webhook", "status", "--state-dir", dir])
        #expect(webhook.stdout.contains("No webhook outbox in \(dir)"), "\(webhook.stdout)")
        let trend = try CLI.run(["sessions", "trend", "--metric", "rsa", "--state-dir", dir])
        #expect(trend.status == 0, "no sessions yet, as list says: \(trend.stderr)")
        // The directory named, as list names it (a mistyped --state-dir read as "no value for rsa").
        #expect(trend.stdout.contains("No sessions: \(dir) does not exist"), "\(trend.stdout)")
        let empty = try CLI.run(["sessions", "show", "", "--state-dir", dir])
        #expect(empty.status == 64 && empty.stderr.contains("A session id is empty"), "\(empty.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir))
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let existing = try CLI.run(["sessions", "list", "--state-dir", dir])
        #expect(existing.stdout.contains("No sessions: nothing has been recorded in \(dir) yet."), "\(existing.stdout)")
        let existingJSON = try CLI.run(["sessions", "list", "--json", "--state-dir", dir])
        #expect(existingJSON.stdout == "[]\n" && existingJSON.stderr.isEmpty, "\(existingJSON.stderr)")
    }

    /// A user who cannot look into the state directory (the service's, mode 0750) is told so, exit 1, by the
    /// reading commands: they said "No sessions" and "no tokens … create one", exit 0.
    @Test(.enabled(if: getuid() == 0, "runs the binary as user nobody with setpriv, which needs root"))
    func aStateDirectoryThisUserCannotReadIsNotReportedEmpty() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let ran = try CLI.run(["stream", "--simulate", "--duration", "2", "--format", "jsonl", "--state-dir", dir])
        #expect(ran.status == 0, "\(ran.stderr)")
        #expect(chmod(dir, 0o750) == 0)
        for command in [["sessions", "list"], ["token", "list"], ["webhook", "status"], ["sessions", "show", "0"]] {
            let r = try CLI.run(command + ["--state-dir", dir], asUser: 65534)
            #expect(r.status == 1, "\(command): \(r.stdout) \(r.stderr)")
            #expect(r.stderr.contains("cannot read \(dir) (Permission denied): it is root's; run the command as root"),
                    "\(command): \(r.stderr)")
        }
    }

    /// On a full disk the reading commands work (they failed with "disk I/O error", so an operator could not see
    /// what to delete), and a writing one says the disk is full.
    @Test(.enabled(if: getuid() == 0, "mounts a small tmpfs, which needs root"))
    func aFullDiskStillListsAndSaysItIsFull() throws {
        let mount = tempDir()
        defer { try? FileManager.default.removeItem(atPath: mount) }
        let m = Process()
        m.executableURL = URL(fileURLWithPath: "/bin/mount")
        m.arguments = ["-t", "tmpfs", "-o", "size=600k", "tmpfs", mount]
        try m.run()
        m.waitUntilExit()
        try #require(m.terminationStatus == 0, "mount -t tmpfs")
        defer {
            let u = Process()
            u.executableURL = URL(fileURLWithPath: "/bin/umount")
            u.arguments = [mount]
            try? u.run()
            u.waitUntilExit()
        }
        let dir = mount + "/state"
        let ran = try CLI.run(["stream", "--simulate", "--duration", "2", "--format", "jsonl", "--state-dir", dir,
                               "--session-id", "full-1"])
        #expect(ran.status == 0, "\(ran.stderr)")
        // Fill the disk.
        #expect(FileManager.default.createFile(atPath: mount + "/filler", contents: nil))
        let filler = FileHandle(forWritingAtPath: mount + "/filler")
        let block = Data(count: 4096)
        while (try? filler?.write(contentsOf: block)) != nil {}
        try? filler?.close()
        let list = try CLI.run(["sessions", "list", "--state-dir", dir])
        #expect(list.status == 0 && list.stdout.contains("full-1"), "\(list.stdout) \(list.stderr)")
        let export = try CLI.run(["sessions", "export", "full-1", "--format", "csv", "--state-dir", dir])
        #expect(export.status == 0 && export.stdout.hasPrefix("session_id,"), "\(export.stderr)")
        let prune = try CLI.run(["sessions", "prune", "--all", "--state-dir", dir])
        #expect(prune.status == 1 && prune.stderr.contains("the disk holding it is full"), "\(prune.stderr)")
    }

    /// A configuration file with an error (being edited) does not keep an operator who names the state directory
    /// from revoking a token or listing sessions.
    @Test func aBrokenConfigurationFileDoesNotBlockTheStateDirectorysCommands() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let config = dir + "-broken.toml"
        defer { try? FileManager.default.removeItem(atPath: config) }
        try "[relay]\nlisten = 0.0.0.0:8765\n".write(toFile: config, atomically: true, encoding: .utf8)
        let env = ["HR_GATEWAY_CONFIG": config]
        #expect(try CLI.run(["token", "create", "--name", "lost", "--state-dir", dir], environment: env).status == 0)
        let revoke = try CLI.run(["token", "revoke", "lost", "--state-dir", dir], environment: env)
        #expect(revoke.status == 0 && revoke.stdout.contains("revoked"), "\(revoke.stderr)")
        #expect(try CLI.run(["sessions", "list", "--state-dir", dir], environment: env).status == 0)
        // Without a state directory named, the file decides where it is: its error is said.
        let unnamed = try CLI.run(["token", "list"], environment: env.merging(["HR_GATEWAY_STATE_DIR": ""]) { $1 })
        #expect(unnamed.status == 1 && unnamed.stderr.contains(config), "\(unnamed.stderr)")
    }

    /// Another user (a member of the service's group, say) reads a store it may not write: listed and exported as
    /// it is, nothing written or created; deleting is refused with whose the store is.
    @Test(.enabled(if: getuid() == 0, "runs the binary as user nobody with setpriv, which needs root"))
    func anotherUserReadsTheStoreWithoutWritingIt() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let ran = try CLI.run(["stream", "--simulate", "--duration", "2", "--format", "jsonl", "--state-dir", dir,
                               "--session-id", "ro-1"])
        #expect(ran.status == 0, "\(ran.stderr)")
        // The service's group (nobody's, here) may read; others may not (state files are 0640).
        #expect(chmod(dir, 0o750) == 0)
        for name in try FileManager.default.contentsOfDirectory(atPath: dir) + [""] {
            #expect(chown(dir + "/" + name, 0, 65534) == 0, "\(name)")
        }
        // Outside the group: said whose the store is, and how to be let in (SQLite said "unable to open database file").
        #expect(chown(dir + "/sessions.sqlite", 0, 0) == 0)
        let outsider = try CLI.run(["sessions", "list", "--state-dir", dir], asUser: 65534)
        #expect(outsider.status == 1 && outsider.stderr.contains("sessions.sqlite: it is root's, readable by the group root (mode 640), "
            + "and this user (nobody) is not in it: run the command as root, or add nobody to the group"), "\(outsider.stderr)")
        #expect(chown(dir + "/sessions.sqlite", 0, 65534) == 0)
        let before = try FileManager.default.contentsOfDirectory(atPath: dir).sorted()
        let list = try CLI.run(["sessions", "list", "--state-dir", dir], asUser: 65534)
        #expect(list.status == 0, "\(list.stderr)")
        #expect(list.stdout.contains("ro-1") && list.stdout.contains("completed"), "\(list.stdout)")
        let export = try CLI.run(["sessions", "export", "ro-1", "--format", "csv", "--state-dir", dir], asUser: 65534)
        #expect(export.status == 0, "\(export.stderr)")
        #expect(export.stdout.contains("ro-1,simulated-strap,"), "\(export.stdout)")
        // A writing command says whose the store is and how to run as them (it said SQLite's "attempt to write a
        // readonly database").
        let delete = try CLI.run(["sessions", "delete", "ro-1", "--state-dir", dir], asUser: 65534)
        #expect(delete.status == 1, "\(delete.stderr)")
        #expect(delete.stderr.contains("is root's and this user (nobody) may not write it: run the command as root"),
                "\(delete.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).sorted() == before)
        // A session being recorded is shown running, though its lock is in locks/ (0750), where this user may not
        // look (it was shown interrupted).
        let live = try RunningCLI(["stream", "--simulate", "--format", "jsonl", "--state-dir", dir, "--session-id", "ro-live"])
        #expect(live.readLine()?.contains("session_started") == true)
        let running = try CLI.run(["sessions", "list", "--json", "--state-dir", dir], asUser: 65534)
        let states = (try json(running.stdout).arrayValue ?? []).map {
            ($0["session_id"]?.stringValue ?? "", $0["state"]?.stringValue ?? "")
        }
        #expect(states.contains { $0 == ("ro-live", "running") }, "\(running.stdout)")
        live.signal(SIGINT)
        _ = live.wait()
        let ended = try CLI.run(["sessions", "show", "ro-live", "--state-dir", dir], asUser: 65534)
        #expect(ended.stdout.contains("state     stopped") || ended.stdout.contains("state     completed"), "\(ended.stdout)")
        // Killed, its lock file left where this user may not look: its writer is gone, so it is interrupted (it was
        // shown running for ever).
        let killed = try RunningCLI(["stream", "--simulate", "--format", "jsonl", "--state-dir", dir, "--session-id", "ro-killed"])
        #expect(killed.readLine()?.contains("session_started") == true)
        killed.signal(SIGKILL)
        _ = killed.wait()
        let after = try CLI.run(["sessions", "list", "--json", "--state-dir", dir], asUser: 65534)
        let afterStates = (try json(after.stdout).arrayValue ?? []).map {
            ($0["session_id"]?.stringValue ?? "", $0["state"]?.stringValue ?? "")
        }
        #expect(afterStates.contains { $0 == ("ro-killed", "interrupted") }, "\(after.stdout)")
    }

    /// A damaged webhook (or relay, or MQTT) outbox was not seen by doctor ("ok state directory"), and nothing
    /// said how to get it back: every session then went without its webhook.
    @Test func doctorNamesADamagedOutboxAndHowToReplaceIt() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try String(repeating: "x", count: 4096).write(toFile: dir + "/outbox.sqlite", atomically: true, encoding: .utf8)
        let doctor = try CLI.run(["doctor", "--state-dir", dir])
        #expect(doctor.stdout.contains("outbox.sqlite there is damaged"), "\(doctor.stdout)")
        #expect(doctor.stdout.contains("mv \"$f\" \"damaged-$f\""), "\(doctor.stdout)")
        // Sessions are still recorded (it said "into journal files only"), and every damaged outbox is named.
        #expect(doctor.stdout.contains("sessions are recorded; what that outbox keeps"), "\(doctor.stdout)")
        try String(repeating: "y", count: 4096).write(toFile: dir + "/relay.sqlite", atomically: true, encoding: .utf8)
        let both = try CLI.run(["doctor", "--state-dir", dir])
        #expect(both.stdout.contains("outbox.sqlite and relay.sqlite there are damaged"), "\(both.stdout)")
        #expect(both.stdout.contains("for f in outbox.sqlite* relay.sqlite*;"), "\(both.stdout)")
    }

    /// Root typing commands in the service's state directory (owned by the service user) left its files root's: the
    /// service's next webhook session failed on a read-only outbox, and root's session killed with -9 stayed
    /// "being recorded" to the service user for ever. Every file root makes there is now the directory owner's.
    @Test(.enabled(if: getuid() == 0, "runs commands as root in a directory of user nobody, then as nobody (setpriv)"))
    func rootsFilesInTheServicesDirectoryAreTheServices() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(chown(dir, 65534, 65534) == 0 && chmod(dir, 0o750) == 0)
        let hook = ["--webhook", "http://127.0.0.1:9/hook", "--webhook-grace", "0"]
        let ran = try CLI.run(["stream", "--simulate", "--duration", "2", "--format", "jsonl", "--state-dir", dir,
                               "--session-id", "root-1"] + hook)
        #expect(ran.status == 0, "\(ran.stderr)")
        let killed = try RunningCLI(["stream", "--simulate", "--format", "jsonl", "--state-dir", dir, "--session-id", "root-2"])
        #expect(killed.readLine()?.contains("session_started") == true)
        killed.signal(SIGKILL)
        _ = killed.wait()
        var rootOwned: [String] = []
        let all = (FileManager.default.enumerator(atPath: dir)?.allObjects as? [String]) ?? []
        for name in all {
            var st = stat()
            if stat(dir + "/" + name, &st) == 0, st.st_uid != 65534 { rootOwned.append(name) }
        }
        #expect(!all.isEmpty && rootOwned.isEmpty, "left to root: \(rootOwned)")
        let service = try CLI.run(["stream", "--simulate", "--duration", "2", "--format", "jsonl", "--state-dir", dir,
                                   "--session-id", "svc-1"] + hook, asUser: 65534)
        #expect(service.status == 0, "\(service.stderr)")
        let list = try CLI.run(["sessions", "list", "--json", "--state-dir", dir], asUser: 65534)
        let states = Dictionary(uniqueKeysWithValues: (try json(list.stdout).arrayValue ?? []).compactMap { s in
            s["session_id"]?.stringValue.map { ($0, s["state"]?.stringValue ?? "") }
        })
        #expect(states == ["root-1": "completed", "root-2": "interrupted", "svc-1": "completed"], "\(list.stdout)")
        #expect(try CLI.run(["sessions", "delete", "root-2", "--state-dir", dir], asUser: 65534).status == 0)
        // A file of root's there (made by an older version, or by hand) is named by doctor, with the chown to run.
        #expect(FileManager.default.createFile(atPath: dir + "/relay.sqlite", contents: Data()))
        let doctor = try CLI.run(["doctor", "--state-dir", dir], asUser: 65534)
        #expect(doctor.stdout.contains("relay.sqlite there is root's, not writable by this user"), "\(doctor.stdout)")
        #expect(doctor.stdout.contains("sudo chown -R nobody: \(dir)"), "\(doctor.stdout)")
        // Its directories too: a locks/ of root's left every session unrecorded while doctor said "writable".
        try FileManager.default.removeItem(atPath: dir + "/relay.sqlite")
        #expect(chown(dir + "/locks", 0, 0) == 0 && chmod(dir + "/locks", 0o750) == 0)
        let locks = try CLI.run(["doctor", "--state-dir", dir], asUser: 65534)
        #expect(locks.stdout.contains("locks there is root's, not writable by this user"), "\(locks.stdout)")
    }

    /// A team's sessions: two straps, whichever sent first at the top level.    /// A team's sessions: two straps, whichever sent first at the top level. The trend said one number that mixed
    /// the two people; it now says so, and --device keeps one strap's values.
    @Test func trendKeepsOneStrapWithDevice() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // Strap A: RR alternating 1020/980 (RMSSD 40 ms); strap B: 510/490 (RMSSD 20 ms); 90 s each.
        func recording(first: String, bUntil: Int = 90) throws -> String {
            var lines: [String] = []
            let t0: Int64 = 1_700_000_000_000
            for second in 1...90 {
                for device in first == "A0:9E:1A:00:00:0A" ? ["A0:9E:1A:00:00:0A", "A0:9E:1A:00:00:0B"]
                    : ["A0:9E:1A:00:00:0B", "A0:9E:1A:00:00:0A"] where device.hasSuffix("0A") || second <= bUntil
                {
                    let rr: [Double] = device.hasSuffix("0A") ? [second % 2 == 0 ? 1020 : 980]
                        : [510, 490]
                    lines.append(BiosignalSample(timestampMs: t0 + Int64(second) * 1000, bpm: 60_000 / rr[0],
                                                 rrIntervalsMs: rr, deviceId: device, source: "ble_hrm").jsonValue.jsonString)
                }
            }
            let path = dir + "/team-\(first.suffix(2))-\(bUntil).jsonl"
            try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        for (id, first) in [("team-1", "A0:9E:1A:00:00:0A"), ("team-2", "A0:9E:1A:00:00:0B")] {
            let ran = try CLI.run(["stream", "--replay", try recording(first: first), "--replay-speed", "30", "--format",
                                   "jsonl", "--session-id", id, "--state-dir", dir])
            #expect(ran.status == 0, "\(ran.stderr)")
        }
        // B taken off after 10 s: the summary's last window holds A alone, at the top level with no `devices`.
        let early = try CLI.run(["stream", "--replay", try recording(first: "A0:9E:1A:00:00:0B", bUntil: 10),
                                 "--replay-speed", "30", "--format", "jsonl", "--session-id", "team-3", "--state-dir", dir])
        #expect(early.status == 0, "\(early.stderr)")
        func value(_ extra: [String]) throws -> (Double?, String) {
            let r = try CLI.run(["sessions", "trend", "--metric", "rmssd", "--min-duration", "0", "--json",
                                 "--state-dir", dir] + extra)
            #expect(r.status == 0, "\(r.stderr)")
            return (try JSONValue(parsing: r.stdout).arrayValue?.first?["value"]?.doubleValue, r.stderr)
        }
        let (mixed, said) = try value([])
        #expect(said.contains("3 sessions had several straps"), "\(said)")
        let (a, quiet) = try value(["--device", "a0:9e:1a:00:00:0a"])
        #expect(abs((a ?? 0) - 40) < 2, "A's own: \(String(describing: a))")
        #expect(!quiet.contains("several straps"), "\(quiet)")
        let (b, _) = try value(["--device", "A0:9E:1A:00:00:0B"])
        #expect(abs((b ?? 0) - 20) < 2, "B's own: \(String(describing: b))")
        // Without --device, the sessions' top levels averaged: A, B and A (team-3, where B left early).
        #expect(abs((mixed ?? 0) - (2 * (a ?? 0) + (b ?? 0)) / 3) < 1, "\(String(describing: mixed))")
        // team-3 counts for neither strap: its summary's top level (A's) does not say whose it is.
        let bSessions = try JSONValue(parsing: try CLI.run(
            ["sessions", "trend", "--metric", "rmssd", "--min-duration", "0", "--json", "--device", "A0:9E:1A:00:00:0B",
             "--state-dir", dir]).stdout).arrayValue?.first?["sessions"]?.intValue
        #expect(bSessions == 2)
        // A device no session recorded is said to be unknown, with those the store has (it was a trend without values).
        let none = try CLI.run(["sessions", "trend", "--device", "C0:FF", "--state-dir", dir])
        #expect(none.status == 1 && none.stderr.contains("no recorded session has device C0:FF (the store's devices: A0:9E:1A:00:00:0A"),
                "\(none.stderr)")
        let empty = try CLI.run(["sessions", "trend", "--device", "", "--state-dir", dir])
        #expect(empty.status == 64 && empty.stderr.contains("--device needs a device id"), "\(empty.stderr)")
    }

    /// Start and end times carry their offset from UTC: without it, the hour repeated when summer time ends showed
    /// two sessions out of order and one ending before it started.
    @Test func timesCarryTheirOffsetFromUTC() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try recordBeats(as: "zoned", in: dir)
        let show = try CLI.run(["sessions", "show", "zoned", "--state-dir", dir], environment: ["TZ": "Asia/Kolkata"])
        let started = try #require(show.stdout.split(separator: "\n").first { $0.hasPrefix("started ") }, "\(show.stdout)")
        #expect(started.hasSuffix(" +05:30"), "\(started)")
        let list = try CLI.run(["sessions", "list", "--state-dir", dir], environment: ["TZ": "UTC"])
        #expect(list.stdout.contains(" +00:00 "), "\(list.stdout)")
    }

    @Test func pruneKeepsRecentSessions() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try recordBeats(in: dir)
        let keep = try CLI.run(["sessions", "prune", "--keep-days", "1", "--state-dir", dir])
        #expect(keep.stdout.contains("0 sessions deleted"), "\(keep.stdout)")
        // 0 means "keep every session" for stream --keep-days and keep_days: here it is refused, deleting nothing.
        let zero = try CLI.run(["sessions", "prune", "--keep-days", "0", "--state-dir", dir])
        #expect(zero.status == 64)
        #expect(zero.stderr.contains("Use --all"), "\(zero.stderr)")
        let negative = try CLI.run(["sessions", "prune", "--keep-days", "-1", "--state-dir", dir])
        #expect(negative.stderr.contains("must be 1 or more (got -1)"), "\(negative.stderr)")
        // Any number of days, however large, keeps everything younger (10^12 and more crashed, exit 132).
        for huge in ["1000000000000", String(Int64.max)] {
            let far = try CLI.run(["sessions", "prune", "--keep-days", huge, "--state-dir", dir])
            #expect(far.status == 0 && far.stdout.contains("0 sessions deleted"), "\(huge): \(far.stderr)")
            let trend = try CLI.run(["sessions", "trend", "--days", huge, "--min-duration", "0", "--json", "--state-dir", dir])
            #expect(trend.status == 0, "\(huge): \(trend.stderr)")
        }
        let all = try CLI.run(["sessions", "prune", "--all", "--state-dir", dir])
        #expect(all.stdout.contains("1 session deleted"), "\(all.stdout)")
    }
}
