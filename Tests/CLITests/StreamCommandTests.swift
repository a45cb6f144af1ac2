import Foundation
import GatewayEngine
import Testing

@Suite struct StreamCommandTests {
    func temp(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("hrg-cli-\(UUID().uuidString)-\(name)").path
    }

    func events(_ r: CLI.Result) throws -> [JSONValue] { try r.lines.map { try JSONValue(parsing: $0) } }

    /// --replay-speed without --replay was ignored; it is refused, saying what it belongs to.
    @Test func aReplaySpeedWithoutAReplayIsRefused() throws {
        let r = try CLI.run(["stream", "--simulate", "--replay-speed", "10"])
        #expect(r.status == 64)
        #expect(r.stderr.contains("--replay-speed sets the speed of --replay"), "\(r.stderr)")
    }

    /// Options for an output that is not there ran without a word (as --replay-speed without --replay is refused).
    @Test func anOptionForAnOutputThatIsNotThereIsRefused() throws {
        for (option, message) in [
            (["--tls"], "--tls is for the relay, and there is none"),
            (["--mqtt-grace", "3"], "--mqtt-grace is for --mqtt URL"),
            (["--webhook-samples"], "--webhook-samples is for --webhook URL"),
        ] {
            let r = try CLI.run(["stream", "--simulate", "--duration", "1", "--no-record-db"] + option)
            #expect(r.status == 64 && r.stderr.contains(message), "\(option): \(r.stderr)")
        }
        // serve too (a relay it may not have: a gateway steered over MQTT alone); the message names every way to
        // give the output.
        for (option, message) in [
            (["--tls"], "--tls is for the relay, and there is none"),
            (["--mqtt-grace", "3"], "there is no --mqtt (nor HR_GATEWAY_MQTT, nor [mqtt] url"),
        ] {
            let r = try CLI.run(["serve", "--simulate"] + option)
            #expect(r.status == 64 && r.stderr.contains(message), "serve \(option): \(r.stderr)")
        }
    }

    @Test func withoutASourceItSaysWhatToChoose() throws {
        let r = try CLI.run(["stream"])
        #expect(r.status == 64)
        #expect(r.stderr.contains("Choose a source: --strap auto, --camera DEVICE"))
        // This command's help, not the top level's.
        #expect(r.stderr.contains("See 'hr-gateway stream --help'"), "\(r.stderr)")
        let serve = try CLI.run(["serve", "--simulate"])
        #expect(serve.status == 64 && serve.stderr.contains("See 'hr-gateway serve --help'"), "\(serve.stderr)")
    }

    /// `--format events` (the service's): the session's start, sensor changes and summary, none of the frames that
    /// `--format jsonl` writes every second (a frame a second went to the journal on an SD card).
    @Test func theEventsFormatLeavesOutTheFrames() throws {
        func types(_ format: String) throws -> [String] {
            let r = try CLI.run(["stream", "--simulate", "--duration", "3", "--emit-interval", "1", "--raw",
                                 "--no-record-db", "--format", format])
            #expect(r.status == 0, "\(r.stderr)")
            return try events(r).compactMap { event -> String? in
                if case .string(let type)? = event["type"] { return type }
                return nil
            }
        }
        let all = try types("jsonl")
        #expect(all.contains("session_frame") && all.contains("biosignal_frame"), "\(all)")
        let kept = try types("events")
        #expect(kept.first == "session_started" && kept.last == "session_summary", "\(kept)")
        #expect(kept.contains("sensor_status"), "\(kept)")
        #expect(!kept.contains("session_frame") && !kept.contains("biosignal_frame"), "\(kept)")
        #expect(kept == all.filter { !["session_frame", "biosignal_frame", "breathing_cue"].contains($0) })
    }

    /// A directory where a file is expected, or a file in a missing directory, is named with what is wrong.
    @Test func recordingPathsThatAreNotFilesSayWhy() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-paths-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let replay = try CLI.run(["stream", "--replay", dir, "--format", "jsonl"])
        #expect(replay.status == 64)
        #expect(replay.stderr.contains("--replay \(dir) is a directory"), "\(replay.stderr)")
        let record = try CLI.run(["stream", "--simulate", "--duration", "1", "--no-record-db", "--format", "jsonl",
                                  "--record", dir])
        #expect(record.status == 1)
        #expect(record.stderr.contains("\(dir): a directory: give a file name"), "\(record.stderr)")
        let missing = try CLI.run(["stream", "--simulate", "--duration", "1", "--no-record-db", "--format", "jsonl",
                                   "--record", dir + "/no/x.jsonl"])
        #expect(missing.stderr.contains("the directory \(dir)/no does not exist"), "\(missing.stderr)")
        #expect(!missing.stderr.contains("line 0"), "\(missing.stderr)")
    }

    /// --record naming the file --replay reads (by another spelling too) is refused before anything is written: it
    /// used to truncate the recording and then fail with "no samples". Recording over another file that holds data
    /// needs --overwrite, and says so.
    @Test func recordingIntoTheReplayedFileIsRefused() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-same-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/a.jsonl"
        let text = "{\"timestamp_ms\":1,\"bpm\":60}\n{\"timestamp_ms\":2,\"bpm\":61}\n"
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        let same = try CLI.run(["stream", "--replay", file, "--record", dir + "/../" + (dir as NSString).lastPathComponent
                                + "/a.jsonl", "--format", "jsonl", "--no-record-db"])
        #expect(same.status == 64)
        #expect(same.stderr.contains("is the file --replay reads"), "\(same.stderr)")
        #expect(try String(contentsOfFile: file, encoding: .utf8) == text, "the recording is untouched")

        let other = dir + "/b.jsonl"
        try "x\n".write(toFile: other, atomically: true, encoding: .utf8)
        let refused = try CLI.run(["stream", "--replay", file, "--record", other, "--format", "jsonl", "--no-record-db"])
        #expect(refused.status == 64)
        #expect(refused.stderr.contains("--record \(other) already holds 2 bytes"), "\(refused.stderr)")
        #expect(refused.stderr.contains("--overwrite"), "\(refused.stderr)")
        #expect(refused.stdout.isEmpty)
        #expect(try String(contentsOfFile: other, encoding: .utf8) == "x\n", "the file is untouched")

        let over = try CLI.run(["stream", "--replay", file, "--record", other, "--overwrite", "--format", "jsonl",
                                "--no-record-db"])
        #expect(over.status == 0, "\(over.stderr)")
        #expect(over.stderr.contains("--record \(other): replacing the 2 bytes it held"), "\(over.stderr)")
        #expect(try String(contentsOfFile: other, encoding: .utf8).split(separator: "\n").count == 2)
    }

    @Test func ecgNeedsAStrap() throws {
        let r = try CLI.run(["stream", "--simulate", "--ecg"])
        #expect(r.status != 0)
        #expect(r.stderr.contains("--ecg streams a Polar strap's ECG: use it with --strap"), "\(r.stderr)")
    }

    @Test func aReplayRunsToTheEndAndTheSummaryMatchesTheRecordedBeats() throws {
        // Two minutes of beats: RR alternating 1000 / 1040 ms, one notification a second.
        let path = temp("beats.jsonl")
        defer { try? FileManager.default.removeItem(atPath: path) }
        var lines: [String] = []
        var rr: [Double] = []
        for i in 0..<120 {
            let interval: Double = i % 2 == 0 ? 1000 : 1040
            rr.append(interval)
            lines.append(BiosignalSample(timestampMs: 5_000_000 + Int64(i) * 1020, bpm: 60000 / interval,
                                         rrIntervalsMs: [interval], deviceId: "AA", source: "ble_hrm").jsonValue.jsonString)
        }
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)

        let r = try CLI.run(["stream", "--replay", path, "--replay-speed", "1000", "--window", "300",
                             "--correct", "none", "--format", "jsonl", "--session-id", "replay-1"])
        #expect(r.status == 0, "\(r.stderr)")
        let evs = try events(r)
        #expect(evs.first?["type"] == .string("session_started"))
        let summary = try #require(evs.last)
        #expect(summary["type"] == .string("session_summary"))
        #expect(summary["session_id"] == .string("replay-1"))
        let m = try #require(summary["metrics"])
        #expect(m["sample_count"] == .int(120))
        #expect(m["rr_count"] == .int(120))
        // Every successive difference is 40 ms: RMSSD 40, pNN50 0.
        #expect(m["rmssd_ms"]?.doubleValue.map { abs($0 - 40) < 1e-9 } == true, "\(m.jsonString)")
        #expect(m["pnn50"] == .double(0))
        #expect(m["hr_from_rr_bpm"] == .double(58.8))
        for e in evs { #expect(!e.jsonString.contains("null")) }
        // On the recording's time: its duration, not the fraction of a second the replay took, and a frame every 5 s
        // of it (24 for its two minutes; at 1000x a millisecond of the machine's is a second of the session's, so a
        // busy machine adds a few seconds at the start and end and may skip a tick, never renumbering).
        let duration = summary["duration_actual_sec"]?.intValue ?? 0
        #expect(duration >= 121, "\(summary.jsonString)")
        let seqs = evs.filter { $0["type"] == .string("session_frame") }.compactMap { $0["seq"]?.intValue }
        #expect(seqs.count >= 12 && seqs.count <= duration / 5, "\(seqs), \(duration) s")
        #expect(seqs == Array(1...Int64(max(1, seqs.count))), "\(seqs)")
    }

    /// A faster replay runs the session on the recording's time, which live sources and serve's sessions (started
    /// whenever a phone asks) cannot follow: refused, saying what to do.
    @Test func aFasterReplayBesideALiveSourceOrInServeIsRefused() throws {
        let path = temp("one.jsonl")
        defer { try? FileManager.default.removeItem(atPath: path) }
        try "{\"timestamp_ms\":1700000000000,\"bpm\":60}\n".write(toFile: path, atomically: true, encoding: .utf8)
        let camera = try CLI.run(["stream", "--replay", path, "--replay-speed", "10", "--camera", "/dev/null"])
        #expect(camera.status == 64)
        #expect(camera.stderr.contains("--replay-speed 10 runs the session on the recording's time"), "\(camera.stderr)")
        let serve = try CLI.run(["serve", "--replay", path, "--replay-speed", "2.5", "--listen", "127.0.0.1:0"])
        #expect(serve.status == 64)
        #expect(serve.stderr.contains("--replay-speed 2.5: serve replays in real time"), "\(serve.stderr)")
        let realTime = try CLI.run(["stream", "--replay", path, "--replay-speed", "1", "--no-record-db", "--format", "jsonl"])
        #expect(realTime.status == 0, "speed 1 is real time, allowed: \(realTime.stderr)")
    }

    @Test func recordThenReplayKeepsEveryBeat() throws {
        let rec = temp("rec.jsonl")
        defer { try? FileManager.default.removeItem(atPath: rec) }
        let cli = try RunningCLI(["stream", "--simulate", "--format", "jsonl", "--emit-interval", "1", "--record", rec])
        // Wait for two frames: by then at least two samples were recorded.
        var frames = 0
        while frames < 2, let line = cli.readLine() {
            if line.contains("\"session_frame\"") { frames += 1 }
        }
        cli.signal(SIGINT)
        var last = ""
        while let line = cli.readLine() { last = line }
        #expect(cli.wait() == 0)
        let summary = try JSONValue(parsing: last)
        #expect(summary["type"] == .string("session_summary"), "Ctrl-C ends with the summary")

        let recorded = try String(contentsOfFile: rec, encoding: .utf8).split(separator: "\n")
        #expect(recorded.count >= 2)
        let replay = try CLI.run(["stream", "--replay", rec, "--replay-speed", "1000", "--format", "jsonl", "--correct", "none"])
        let replayed = try #require(try events(replay).last)
        let recordedRR = try recorded.flatMap { try BiosignalSample(json: JSONValue(parsing: String($0))).rrIntervalsMs ?? [] }
        #expect(replayed["metrics"]?["rr_count"] == .int(Int64(recordedRR.count)))
    }

    /// SIGHUP is the terminal going away (an ssh connection dropped): a clean end too, not a kill.
    @Test(arguments: [SIGTERM, SIGHUP])
    func aTerminationSignalStopsCleanlyWithASummary(signal: Int32) throws {
        let cli = try RunningCLI(["stream", "--simulate", "--model", "sdk-mock", "--format", "jsonl"])
        let first = try #require(cli.readLine())
        #expect(try JSONValue(parsing: first)["type"] == .string("session_started"))
        try expectCleanEnd(cli, on: signal)
    }

    /// A second signal during the shutdown (here, while the webhook's grace waits on a server that is not there)
    /// exits at once, 128 + the signal, and says what stays where (it exited without a word).
    @Test func aSecondSignalExitsAtOnceSayingWhatStays() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-second-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let stderr = dir + "/stderr"
        let cli = try RunningCLI(["stream", "--simulate", "--model", "sdk-mock", "--format", "jsonl", "--state-dir", dir,
                                  "--webhook", "http://127.0.0.1:9/hook", "--webhook-grace", "30"], errorTo: stderr)
        #expect(try JSONValue(parsing: try #require(cli.readLine()))["type"] == .string("session_started"))
        cli.signal(SIGTERM)
        // The summary is out: the shutdown now waits on the webhook's grace.
        var last = ""
        while !last.contains("session_summary"), let line = cli.readLine() { last = line }
        cli.signal(SIGINT)
        #expect(cli.wait() == 128 + SIGINT)
        let said = try String(contentsOfFile: stderr, encoding: .utf8)
        #expect(said.contains("second signal: exiting now"), "\(said)")
    }

    /// Sends `signal`; the session must end with its summary last and the process with status 0.    /// Sends `signal`; the session must end with its summary last and the process with status 0.
    private func expectCleanEnd(_ cli: RunningCLI, on signal: Int32) throws {
        cli.signal(signal)
        var last = ""
        while let line = cli.readLine() { last = line }
        #expect(cli.wait() == 0)
        #expect(try JSONValue(parsing: last)["type"] == .string("session_summary"))
    }

    /// One request delivered twice at once (`timeout`, a shell or a service manager signalling the process and its
    /// group) ends the session cleanly with its summary: it used to be taken as a second Ctrl-C (exit 130, no summary,
    /// the session left `interrupted`).
    @Test func aSignalDeliveredTwiceAtOnceIsOneRequest() throws {
        let cli = try RunningCLI(["stream", "--simulate", "--model", "sdk-mock", "--format", "jsonl", "--emit-interval", "1"])
        #expect(try JSONValue(parsing: try #require(cli.readLine()))["type"] == .string("session_started"))
        cli.signal(SIGINT)
        // Two kills in a row would merge while the first is pending; the second is sent once the kernel no longer holds
        // the first for the process (/proc's SigPnd and ShdPnd), as `timeout`'s second one arrives.
        let bit = UInt64(1) << UInt64(SIGINT - 1)
        func pending() -> Bool {
            let status = (try? String(contentsOfFile: "/proc/\(cli.process.processIdentifier)/status", encoding: .utf8)) ?? ""
            return status.split(separator: "\n").contains { line in
                (line.hasPrefix("SigPnd:") || line.hasPrefix("ShdPnd:"))
                    && (UInt64(line.split(separator: "\t").last ?? "", radix: 16) ?? 0) & bit != 0
            }
        }
        while pending() {}
        try expectCleanEnd(cli, on: SIGINT)
    }

    @Test func underNohupAHangUpIsIgnored() throws {
        let cli = try RunningCLI(
            ["stream", "--simulate", "--model", "sdk-mock", "--format", "jsonl", "--emit-interval", "1"],
            under: ["/usr/bin/nohup"])
        #expect(try JSONValue(parsing: try #require(cli.readLine()))["type"] == .string("session_started"))
        cli.signal(SIGHUP)
        var after: [String] = []
        while after.filter({ $0.contains("\"type\":\"session_frame\"") }).count < 2, let line = cli.readLine() {
            after.append(line)
        }
        #expect(!after.contains { $0.contains("session_summary") }, "the session went on after SIGHUP: \(after)")
        #expect(after.count >= 2)
        try expectCleanEnd(cli, on: SIGTERM)
    }

    /// A bad line in a recording is skipped, counted and named (the rest of the recording plays); a file with no
    /// sample at all is refused naming its first bad line, before anything starts: no session, nothing stored, the
    /// --record file not made.
    @Test func aBadLineInARecordingIsSkippedAndNamed() throws {
        let path = temp("bad.jsonl")
        let worse = temp("worse.jsonl")
        defer {
            try? FileManager.default.removeItem(atPath: path)
            try? FileManager.default.removeItem(atPath: worse)
        }
        try "{\"timestamp_ms\":1,\"bpm\":60}\nnot json\n{\"timestamp_ms\":2,\"bpm\":61}\n".write(toFile: path, atomically: true, encoding: .utf8)
        let r = try CLI.run(["stream", "--replay", path, "--format", "jsonl", "--no-record-db"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("1 unreadable line skipped (first: line 2, invalid JSON"), "\(r.stderr)")
        let summary = try #require(r.lines.last.map { try JSONValue(parsing: $0) })
        #expect(summary["type"] == .string("session_summary"))
        #expect(summary["metrics"]?["sample_count"] == .int(2), "\(summary)")

        try "not json\n{\"bpm\":60}\n".write(toFile: worse, atomically: true, encoding: .utf8)
        let stateDir = temp("state")
        let record = temp("record.jsonl")
        defer { try? FileManager.default.removeItem(atPath: stateDir) }
        let w = try CLI.run(["stream", "--replay", worse, "--format", "jsonl", "--state-dir", stateDir, "--record", record])
        #expect(w.status == 1)
        #expect(w.stderr.contains("Error: --replay \(worse) line 1: invalid JSON"), "\(w.stderr)")
        #expect(w.lines.isEmpty, "no session started: \(w.lines)")
        #expect(!FileManager.default.fileExists(atPath: record))
        let listed = try CLI.run(["sessions", "list", "--state-dir", stateDir, "--json"])
        #expect(listed.status == 0 && listed.lines == ["[]"], "\(listed.stdout)\(listed.stderr)")
    }

    @Test func helpTeachesWithExamples() throws {
        let r = try CLI.run(["stream", "--help"])
        #expect(r.status == 0)
        #expect(r.stdout.contains("hr-gateway stream --simulate"))
        #expect(r.stdout.contains("--emit-interval"))
    }
}
