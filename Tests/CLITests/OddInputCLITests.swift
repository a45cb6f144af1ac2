import Foundation
import GatewayEngine
import Testing

/// Inputs a script hands over without thinking: a one-character relative path (`--output -`, `--state-dir q`), which
/// Foundation's path code trapped on (SIGILL, status 132, a backtrace), and a standard input that is closed or a
/// directory, which `hrv -` trapped on.
@Suite struct OddInputCLITests {
    struct Shell {
        let status: Int32
        let stdout: String
        let stderr: String
    }

    /// `script` through /bin/sh in `dir`, with `$HRG` the binary.
    func sh(_ script: String, in dir: String) throws -> Shell {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = ["-c", script]
        p.currentDirectoryURL = URL(fileURLWithPath: dir)
        var env = CLI.environment([:])
        env["HRG"] = CLI.executable.path
        env.removeValue(forKey: "HR_GATEWAY_STATE_DIR")
        p.environment = env
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("odd-\(UUID().uuidString)")
        let err = out.appendingPathExtension("err")
        try #require(FileManager.default.createFile(atPath: out.path, contents: nil))
        try #require(FileManager.default.createFile(atPath: err.path, contents: nil))
        defer {
            try? FileManager.default.removeItem(at: out)
            try? FileManager.default.removeItem(at: err)
        }
        p.standardOutput = try FileHandle(forWritingTo: out)
        p.standardError = try FileHandle(forWritingTo: err)
        p.standardInput = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        return Shell(status: p.terminationStatus, stdout: try String(contentsOf: out, encoding: .utf8),
                     stderr: try String(contentsOf: err, encoding: .utf8))
    }

    @Test func oneCharacterPathsAreNoCrash() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-odd-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let recorded = try sh("\"$HRG\" stream --simulate --model sdk-mock --duration 2 --format events --session-id odd "
            + "--state-dir s", in: dir)
        #expect(recorded.status == 0, "\(recorded.stderr)")
        let file = try sh("\"$HRG\" sessions export odd --output a --state-dir s", in: dir)
        #expect(file.status == 0, "\(file.stderr)")
        #expect(try String(contentsOfFile: dir + "/a", encoding: .utf8).hasPrefix("session_id,device_id,beat_time_ms"))
        // `--output -` is standard output.
        let dash = try sh("\"$HRG\" sessions export odd --output - --state-dir s", in: dir)
        #expect(dash.status == 0 && dash.stdout.hasPrefix("session_id,device_id,beat_time_ms"), "\(dash.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir + "/-"))
        let list = try sh("\"$HRG\" sessions list --state-dir q", in: dir)
        #expect(list.status == 0 && list.stdout.contains("No sessions: q does not exist"), "\(list.status) \(list.stderr)")
        let tokens = try sh("\"$HRG\" token list --state-dir t", in: dir)
        #expect(tokens.status == 0, "\(tokens.status) \(tokens.stderr)")
        // doctor fails here for the missing Bluetooth adapter (1), not on its path (132).
        let doctor = try sh("\"$HRG\" doctor --state-dir d", in: dir)
        #expect(doctor.status <= 2 && doctor.stdout.contains("d"), "\(doctor.status) \(doctor.stderr)")
        for r in [file, dash, list, tokens, doctor] { #expect(!r.stderr.contains("Program crashed"), "\(r.stderr)") }
    }

    /// Standard output closed at start (`>&-`, a cron line): the command runs as with `> /dev/null` (it failed with
    /// "Invalid argument", the runtime's own descriptor in its place), and no file the command opens takes its
    /// number (a recording opened as descriptor 1 would get the JSON lines too).
    @Test func aClosedStandardOutputIsNull() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-closed-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let stream = try sh("\"$HRG\" stream --simulate --model sdk-mock --duration 2 --format jsonl --record r.jsonl "
            + "--session-id closed --state-dir s >&-", in: dir)
        #expect(stream.status == 0, "\(stream.stderr)")
        let recorded = try String(contentsOfFile: dir + "/r.jsonl", encoding: .utf8)
        #expect(!recorded.isEmpty && !recorded.contains("session_started") && !recorded.contains("\"type\""), "\(recorded.prefix(300))")
        let list = try sh("\"$HRG\" sessions list --json --state-dir s >&-", in: dir)
        #expect(list.status == 0, "\(list.stderr)")
        let shown = try sh("\"$HRG\" sessions list --json --state-dir s", in: dir)
        #expect(shown.stdout.contains("\"session_id\":\"closed\""), "\(shown.stdout)")
    }

    @Test func hrvOfAClosedOrDirectoryStandardInputIsAnError() throws {
        let closed = try sh("\"$HRG\" hrv - <&-", in: "/tmp")
        #expect(closed.status == 1 && closed.stderr.contains("standard input: closed (give the input with < FILE or a pipe)"), "\(closed.status) \(closed.stderr)")
        let directory = try sh("\"$HRG\" hrv - < /tmp", in: "/tmp")
        #expect(directory.status == 1 && directory.stderr.contains("standard input: a directory, not an RR file"),
                "\(directory.status) \(directory.stderr)")
        let piped = try sh("printf '800\\n810\\n790\\n805\\n' | \"$HRG\" hrv - --json", in: "/tmp")
        #expect(piped.status == 0 && piped.stdout.contains("\"rr_count\":4"), "\(piped.status) \(piped.stderr)")
    }
}

/// Runs a system tool (mount, umount) to its end; its exit status.
func runTool(_ tool: String, _ args: [String]) throws -> Int32 {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: tool)
    p.arguments = args
    try p.run()
    p.waitUntilExit()
    return p.terminationStatus
}

/// `--record FILE` on a disk that fills mid-line: the file is cut back to its last whole line, as the warning says
/// (it ended in half a sample, which a reader parsing every line failed on). A real full file system: a 16-KB tmpfs.
@Suite struct RecordOnAFullDiskTests {
    @Test(.enabled(if: getuid() == 0, "mounts a tmpfs, which needs root"))
    func aRecordingCutShortByAFullDiskEndsWithAWholeLine() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-full-\(UUID().uuidString)").path
        let tiny = dir + "/tiny"
        try FileManager.default.createDirectory(atPath: tiny, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try #require(try runTool("/bin/mount", ["-t", "tmpfs", "-o", "size=16k", "tmpfs", tiny]) == 0, "mount a tmpfs")
        defer { _ = try? runTool("/bin/umount", [tiny]) }
        // Lines of about 190 bytes: a 16-KB file system fills part-way through one of them.
        var lines = ""
        for i in 0..<600 {
            let s = BiosignalSample(timestampMs: 5_000_000 + Int64(i) * 1000, bpm: 60, rrIntervalsMs: [1000 + Double(i % 7)],
                                    deviceId: "AA:BB:CC:DD:EE:FF", source: "ble_hrm", contact: .contact, sequence: UInt64(i))
            lines += s.jsonValue.jsonString + "\n"
        }
        try lines.write(toFile: dir + "/long.jsonl", atomically: true, encoding: .utf8)
        let r = try CLI.run(["stream", "--replay", dir + "/long.jsonl", "--replay-speed", "1000", "--format", "events",
                             "--record", tiny + "/r.jsonl", "--no-record-db"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("No space left on device; the recording stops here (what it holds is intact, whole lines)"),
                "\(r.stderr)")
        let recorded = try String(contentsOfFile: tiny + "/r.jsonl", encoding: .utf8)
        #expect(recorded.count > 1_000 && recorded.hasSuffix("\n"), "\(recorded.suffix(80))")
        for line in recorded.split(separator: "\n") { #expect((try? JSONValue(parsing: String(line))) != nil, "\(line)") }
    }
}

/// A state directory on a read-only file system (a Pi's SD card remounted read-only after errors): no user may
/// write it, root neither, and the message said the file was root's and to run as root.
@Suite struct ReadOnlyStateDirectoryTests {
    @Test(.enabled(if: getuid() == 0, "bind-mounts a directory read-only, which needs root"))
    func aReadOnlyFileSystemIsSaidSo() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-ro-\(UUID().uuidString)").path
        let state = dir + "/state"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let first = try CLI.run(["stream", "--simulate", "--model", "sdk-mock", "--duration", "1", "--format", "events",
                                 "--session-id", "before", "--state-dir", state])
        #expect(first.status == 0, "\(first.stderr)")
        // An outbox with the summary waiting (nothing listens on port 9): `webhook flush` makes none where none is.
        let outbox = try CLI.run(["webhook", "send", "before", "--url", "http://127.0.0.1:9/hook", "--timeout", "0",
                                  "--state-dir", state])
        #expect(FileManager.default.fileExists(atPath: state + "/outbox.sqlite"), "\(outbox.stderr)")
        try #require(try runTool("/bin/mount", ["--bind", state, state]) == 0, "bind mount")
        defer { _ = try? runTool("/bin/umount", [state]) }
        try #require(try runTool("/bin/mount", ["-o", "remount,bind,ro", state]) == 0, "remount read-only")
        let r = try CLI.run(["webhook", "status", "--state-dir", state])
        #expect(r.status == 1 && r.stderr.contains("outbox.sqlite is on a read-only file system: remount it read-write"),
                "\(r.stderr)")
        #expect(!r.stderr.contains("may not write it"), "\(r.stderr)")
        let stream = try CLI.run(["stream", "--simulate", "--model", "sdk-mock", "--duration", "1", "--format", "events",
                                  "--session-id", "after", "--state-dir", state])
        #expect(stream.stderr.contains("Read-only file system") && !stream.stderr.contains("may not write it"), "\(stream.stderr)")
        // Reading still works.
        let list = try CLI.run(["sessions", "list", "--state-dir", state])
        #expect(list.status == 0 && list.stdout.contains("before"), "\(list.stderr)")
    }
}

/// A stop that comes as the session starts (a service stopped right after it was started, a script's quick
/// `kill`): the session had not begun, so nothing stays behind. The signal came before the handler was installed
/// (after the outputs started) and killed the process by its default action, leaving an empty `interrupted`
/// session for every such stop. Here the outputs are held starting: `--record` names a FIFO, whose opening for
/// writing waits for a reader; SIGTERM is sent once the session's recording exists (its lock file), then the FIFO
/// is opened so the start can go on.
@Suite struct EarlyStopTests {
    @Test func aStopSentAsTheSessionStartsLeavesNothingBehind() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-early-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fifo = dir + "/record.fifo"
        try #require(mkfifo(fifo, 0o600) == 0)
        let p = Process()
        p.executableURL = CLI.executable
        p.arguments = ["stream", "--simulate", "--model", "sdk-mock", "--duration", "30", "--format", "jsonl",
                       "--session-id", "early", "--record", fifo, "--state-dir", dir, "--log-level", "debug"]
        p.environment = CLI.environment([:])
        let err = Pipe()
        p.standardOutput = FileHandle.nullDevice
        p.standardError = err
        p.standardInput = FileHandle.nullDevice
        try p.run()
        defer { if p.isRunning { kill(p.processIdentifier, SIGKILL) } }
        // The recording exists once its lock does (a condition polled, with a deadline).
        let deadline = ContinuousClock.now + .seconds(30)
        func locked() -> Bool {
            ((try? FileManager.default.contentsOfDirectory(atPath: dir + "/locks")) ?? []).contains { $0.hasSuffix(".lock") }
        }
        while !locked(), ContinuousClock.now < deadline, p.isRunning { usleep(10_000) }
        try #require(locked(), "the session's recording was created")
        kill(p.processIdentifier, SIGTERM)
        // Taken (said at debug level) before the start goes on.
        let lines = PipeLines(err.fileHandleForReading)
        var said: [String] = []
        while let line = lines.next() {
            said.append(line)
            if line.contains("SIGTERM taken") { break }
        }
        #expect(said.last?.contains("SIGTERM taken: the session will not start") == true, "\(said)")
        let reader = open(fifo, O_RDONLY)
        defer { if reader >= 0 { close(reader) } }
        var rest: [String] = []
        while let line = lines.next() { rest.append(line) }
        let stderr = rest.joined(separator: "\n")
        p.waitUntilExit()
        #expect(p.terminationReason == .exit && p.terminationStatus == 143, "\(p.terminationReason) \(p.terminationStatus): \(stderr)")
        #expect(stderr.contains("stopped by SIGTERM before the session started: nothing recorded"), "\(stderr)")
        let list = try CLI.run(["sessions", "list", "--json", "--state-dir", dir])
        #expect(list.stdout == "[]\n", "\(list.stdout)")
    }
}

/// The live view on a terminal that takes no cursor movement (TERM=dumb: an editor's shell buffer): screens one
/// after the other, without escape sequences (they came through as `[2J [H [K`).
@Suite struct DumbTerminalTests {
    @Test func theLiveViewOnADumbTerminalHasNoEscapes() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-dumb-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try CLI.run(["stream", "--simulate", "--model", "sdk-mock", "--duration", "3", "--emit-interval", "1",
                             "--format", "pretty", "--state-dir", dir], environment: ["TERM": "dumb"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(!r.stdout.contains("\u{1B}"), "\(r.stdout.prefix(200).debugDescription)")
        #expect(r.stdout.components(separatedBy: "hr-gateway  session ").count >= 4, "a screen per frame: \(r.stdout)")
        let normal = try CLI.run(["stream", "--simulate", "--model", "sdk-mock", "--duration", "2", "--format", "pretty",
                                  "--state-dir", dir], environment: ["TERM": "xterm"])
        #expect(normal.stdout.contains("\u{1B}[H"))
    }
}

/// SIGTERM while standard output's reader has stopped reading (a full pipe: a script that stops reading, then
/// terminates the gateway and waits): the write of the summary blocked for ever, the session recorded already,
/// until a second signal. Now a write blocked for 10 s after the stop ends the process, saying so.
@Suite struct BlockedOutputStopTests {
    @Test func aStopWhileStandardOutputIsNotReadEnds() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-blocked-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var lines = ""
        for i in 0..<3600 {
            let s = BiosignalSample(timestampMs: 5_000_000 + Int64(i) * 1000, bpm: 60, rrIntervalsMs: [1000 + Double(i % 7)],
                                    deviceId: "AA:BB:CC:DD:EE:FF", source: "ble_hrm", contact: .contact, sequence: UInt64(i))
            lines += s.jsonValue.jsonString + "\n"
        }
        try lines.write(toFile: dir + "/long.jsonl", atomically: true, encoding: .utf8)
        let fifo = dir + "/out.fifo"
        try #require(mkfifo(fifo, 0o600) == 0)
        // A reader that never reads.
        let reader = open(fifo, O_RDONLY | O_NONBLOCK)
        try #require(reader >= 0)
        defer { close(reader) }
        let p = Process()
        p.executableURL = CLI.executable
        p.arguments = ["stream", "--replay", dir + "/long.jsonl", "--replay-speed", "100", "--format", "jsonl", "--raw",
                       "--session-id", "blocked", "--state-dir", dir + "/s"]
        p.environment = CLI.environment([:])
        let err = Pipe()
        p.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: fifo))
        p.standardError = err
        p.standardInput = FileHandle.nullDevice
        try p.run()
        let pid = p.processIdentifier
        let killer = DispatchWorkItem { kill(pid, SIGKILL) }
        DispatchQueue.global().asyncAfter(deadline: .now() + 90, execute: killer)
        defer { killer.cancel() }
        // Blocked: a thread of the gateway waits in write(2) on descriptor 1 with the pipe nearly full (a condition
        // polled, with a deadline; /proc/PID/task/*/syscall names the call and its first argument).
        #if arch(arm64)
        let write = "64"
        #else
        let write = "1"
        #endif
        func blocked() -> Bool {
            var unread: Int32 = 0
            _ = ioctl(reader, UInt(FIONREAD), &unread)
            guard unread >= 32_768 else { return false }
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
            return tasks.contains { task in
                ((try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/syscall", encoding: .utf8)) ?? "")
                    .hasPrefix("\(write) 0x1 ")
            }
        }
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline, p.isRunning, !blocked() { usleep(20_000) }
        try #require(blocked(), "the gateway blocked writing to standard output")
        let stopped = ContinuousClock.now
        kill(pid, SIGTERM)
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        let took = stopped.duration(to: .now)
        #expect(p.terminationReason == .exit && p.terminationStatus == 143, "\(p.terminationReason) \(p.terminationStatus): \(stderr)")
        #expect(stderr.contains("standard output has not been read for 10 s"), "\(stderr)")
        #expect(took >= .seconds(9) && took < .seconds(60), "\(took)")
    }
}
