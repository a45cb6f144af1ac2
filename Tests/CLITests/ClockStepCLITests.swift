import Foundation
import GatewayEngine
import Testing

/// The real binary under libfaketime with only the wall clock faked (FAKETIME_DONT_FAKE_MONOTONIC=1): the system
/// time is stepped by an hour four seconds into a ten-second session, as NTP does on a board without a real-time
/// clock. Frames keep their one-second rhythm, seq runs 1...10, and the summary comes on time with duration 10.
@Suite(.serialized) struct ClockStepCLITests {
    /// libfaketime from Debian's `faketime` package (scripts/test installs it).
    static var libfaketime: String? {
        let dirs = ["/usr/lib/x86_64-linux-gnu/faketime", "/usr/lib/aarch64-linux-gnu/faketime", "/usr/lib/faketime",
                    "/usr/local/lib/faketime"]
        return dirs.map { "\($0)/libfaketimeMT.so.1" }.first { FileManager.default.fileExists(atPath: $0) }
    }

    /// libfaketime 0.9.10 rewrites every absolute timer it sees (`timer_settime`, `timerfd_settime` with
    /// TFD_TIMER_ABSTIME) by the fake wall-clock offset, whatever the timer's clock and despite
    /// FAKETIME_DONT_FAKE_MONOTONIC (its source says "only CLOCK_REALTIME is handled"). libdispatch, under every
    /// Swift concurrency sleep, arms absolute CLOCK_MONOTONIC / CLOCK_BOOTTIME timerfds, so with the wall clock an
    /// hour back each sleep is pushed an hour late (frames stop), an hour forward it fires at once (the session ends
    /// early), although `ContinuousClock.now` stays right. No FAKETIME setting turns that off, so this shim,
    /// preloaded ahead of libfaketime, hands `timerfd_settime` straight to the kernel. The wall clock
    /// (`clock_gettime(CLOCK_REALTIME)`, `gettimeofday`, `Date()`) is still faked, and so are libfaketime's other
    /// waits (nanosleep, poll, pthread_cond_timedwait on the real-time clock): a wait our code computed from the
    /// wall clock still shows up as a stall or an early fire.
    ///
    /// The shim also answers `adjtimex` (whether an NTP client keeps the clock synchronized, which decides how
    /// keep_days counts) as `HRG_CLOCK_SYNCHRONIZED` says, 1 or 0, so that the rule is tested whatever this machine's
    /// NTP state; unset, the kernel answers.
    static let timerfdShimSource = """
        #define _GNU_SOURCE
        #include <stdlib.h>
        #include <string.h>
        #include <sys/syscall.h>
        #include <sys/timex.h>
        #include <unistd.h>
        struct itimerspec;
        int timerfd_settime(int fd, int flags, const struct itimerspec *new_value, struct itimerspec *old_value) {
            return (int)syscall(SYS_timerfd_settime, fd, flags, new_value, old_value);
        }
        int adjtimex(struct timex *t) {
            const char *v = getenv("HRG_CLOCK_SYNCHRONIZED");
            if (v && (strcmp(v, "1") == 0 || strcmp(v, "0") == 0)) {
                memset(t, 0, sizeof *t);
                return v[0] == '1' ? TIME_OK : TIME_ERROR;
            }
            return (int)syscall(SYS_adjtimex, t);
        }
        """

    /// Builds the shim with the C compiler on PATH (the Swift toolchain brings clang).
    static func buildTimerfdShim(in dir: URL) throws -> String? {
        let source = dir.appendingPathComponent("timerfd-shim.c")
        let library = dir.appendingPathComponent("timerfd-shim.so")
        try timerfdShimSource.write(to: source, atomically: true, encoding: .utf8)
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for compiler in ["clang", "cc", "gcc"] {
            guard let exe = path.split(separator: ":").map({ "\($0)/\(compiler)" })
                .first(where: { FileManager.default.isExecutableFile(atPath: $0) })
            else { continue }
            let p = Process()
            p.executableURL = URL(fileURLWithPath: exe)
            p.arguments = ["-shared", "-fPIC", "-O2", "-o", library.path, source.path]
            try p.run()
            p.waitUntilExit()
            if p.terminationStatus == 0 { return library.path }
        }
        return nil
    }

    struct Line {
        let at: ContinuousClock.Instant
        let json: JSONValue
    }

    @Test(arguments: [-3600, 3600])
    func aWallClockStepMidSessionChangesOnlyTheTimestamps(stepSec: Int) throws {
        let lib = try #require(Self.libfaketime, "libfaketime is missing: apt-get install faketime")
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-faketime-\(UUID().uuidString)-\(stepSec)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let shim = try #require(try Self.buildTimerfdShim(in: dir), "no C compiler (clang, cc) to build the timerfd shim")
        let rc = dir.appendingPathComponent("faketime.rc").path
        try "+0\n".write(toFile: rc, atomically: true, encoding: .utf8)
        // Through env(1), so that only the gateway runs with libfaketime preloaded. libfaketime's constructor edits
        // the environment, which leaves Swift's CommandLine.arguments empty; the gateway then reads
        // /proc/self/cmdline (HRGateway.main).
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "LD_PRELOAD=\(shim):\(lib)", "FAKETIME_TIMESTAMP_FILE=\(rc)", "FAKETIME_NO_CACHE=1",
            "FAKETIME_DONT_FAKE_MONOTONIC=1",
            "HR_GATEWAY_STATE_DIR=\(CLI.stateDir)", CLI.executable.path,
            "stream", "--simulate", "--model", "sdk-mock", "--format", "jsonl", "--emit-interval", "1",
            "--duration", "10", "--state-dir", dir.appendingPathComponent("state").path, "--session-id", "step",
        ]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // A session that never ends (today's fault with a backward step) is killed after 30 s instead of hanging.
        let pid = process.processIdentifier
        let killer = DispatchWorkItem { kill(pid, SIGKILL) }
        DispatchQueue.global().asyncAfter(deadline: .now() + 30, execute: killer)
        let reader = out.fileHandleForReading
        var buffer = Data()
        func readLine() -> String? {
            while true {
                if let nl = buffer.firstIndex(of: 0x0A) {
                    let line = String(decoding: buffer[buffer.startIndex..<nl], as: UTF8.self)
                    buffer.removeSubrange(buffer.startIndex...nl)
                    return line
                }
                let chunk = reader.availableData
                if chunk.isEmpty { return nil }
                buffer.append(chunk)
            }
        }

        var lines: [Line] = []
        while let text = readLine() {
            let line = Line(at: .now, json: try #require(try? JSONValue(parsing: text), "not an event: \(text)"))
            lines.append(line)
            if line.json["type"] == .string("session_frame"), line.json["seq"] == .int(4) {
                try "\(stepSec > 0 ? "+" : "")\(stepSec)\n".write(toFile: rc, atomically: true, encoding: .utf8)
            }
        }
        process.waitUntilExit()
        killer.cancel()  // the pid may be reused once the gateway has exited
        #expect(process.terminationStatus == 0)

        let frames = lines.filter { $0.json["type"] == .string("session_frame") }
        #expect(frames.map { $0.json["seq"]?.intValue ?? -1 } == Array(1...10))
        // The step really reached the process: one frame, written after frame 4 was read (frame 5, or on a loaded
        // machine a later one), is stamped an hour away from the one before it; every other pair a second apart.
        // The gateway's own stamps keep the rhythm whatever the scheduling of this reader.
        let stamps = frames.compactMap { $0.json["emitted_at_ms"]?.intValue }
        let gaps = zip(stamps, stamps.dropFirst()).map { $1 - $0 }
        let stepped = gaps.indices.filter { abs(gaps[$0] - 1000) > abs(Int64(stepSec) * 1000) / 2 }
        #expect(stamps.count == frames.count && stepped.count == 1 && (stepped.first ?? 0) >= 3, "emitted_at_ms \(stamps)")
        for i in gaps.indices {
            let expected = stepped.contains(i) ? 1000 + Int64(stepSec) * 1000 : 1000
            #expect(abs(gaps[i] - expected) < 500, "emitted_at_ms \(stamps[i]) then \(stamps[i + 1])")
        }
        // As read here: no frame waits for the step (a timer on the wall clock would stall an hour, or fire at once).
        for (a, b) in zip(frames, frames.dropFirst()) {
            let gap = a.at.duration(to: b.at)
            #expect(gap < .milliseconds(2500), "frame gap \(gap)")
        }
        let summary = try #require(lines.last)
        #expect(summary.json["type"] == .string("session_summary"))
        #expect(summary.json["duration_actual_sec"] == .int(10))
        if let started = lines.first {
            #expect(started.json["type"] == .string("session_started"))
            let took = started.at.duration(to: summary.at)
            #expect(took > .milliseconds(9_000) && took < .milliseconds(12_500), "session took \(took)")
        }
        // Recorded: its duration is the ten seconds it ran (from the wall clock it showed an hour and ten seconds,
        // or none).
        let list = try CLI.run(["sessions", "list", "--json", "--state-dir", dir.appendingPathComponent("state").path])
        let recorded = try JSONValue(parsing: list.stdout).arrayValue?.first
        let ms = try #require(recorded?["duration_ms"]?.intValue, "\(list.stdout)")
        #expect(ms >= 9_000 && ms <= 12_500, "\(list.stdout)")
    }

    /// A session recorded while the wall clock was two days ahead (a board that booted with a wrong time, set right
    /// by NTP since) starts "in the future": `--keep-days 1` keeps it, and `--all`, every finished session whatever
    /// its age, deletes it.
    @Test func pruneAllDeletesASessionRecordedWithTheClockAhead() throws {
        let lib = try #require(Self.libfaketime, "libfaketime is missing: apt-get install faketime")
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-ahead-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let shim = try #require(try Self.buildTimerfdShim(in: dir), "no C compiler (clang, cc) to build the timerfd shim")
        let recorded = try CLI.run(
            ["stream", "--simulate", "--model", "sdk-mock", "--format", "jsonl", "--duration", "2", "--session-id", "ahead",
             "--state-dir", dir.path],
            environment: ["LD_PRELOAD": "\(shim):\(lib)", "FAKETIME": "+2d", "FAKETIME_DONT_FAKE_MONOTONIC": "1"])
        #expect(recorded.status == 0, "\(recorded.stderr)")
        let started = try JSONValue(parsing: try #require(recorded.lines.first))["started_at_ms"]?.intValue ?? 0
        #expect(started > Int64(Date().timeIntervalSince1970 * 1000) + 86_400_000, "recorded ahead: \(started)")
        let keep = try CLI.run(["sessions", "prune", "--keep-days", "1", "--state-dir", dir.path])
        #expect(keep.stdout.contains("0 sessions deleted"), "\(keep.stdout)")
        let all = try CLI.run(["sessions", "prune", "--all", "--state-dir", dir.path])
        #expect(all.stdout.contains("deleted ahead\n1 session deleted"), "\(all.stdout)")
    }

    /// `sessions prune --keep-days`, the command-line form of keep_days, had none of its guards: it deleted the
    /// sessions recorded before NTP set the clock (stamped 1970), and with the clock a year ahead every session.
    @Test func pruneKeepDaysCountsOnAWrongClockAsKeepDaysDoes() throws {
        let lib = try #require(Self.libfaketime, "libfaketime is missing: apt-get install faketime")
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-prune-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let shim = try #require(try Self.buildTimerfdShim(in: dir), "no C compiler (clang, cc) to build the timerfd shim")
        func fake(_ time: String) -> [String: String] {
            ["LD_PRELOAD": "\(shim):\(lib)", "FAKETIME": time, "FAKETIME_DONT_FAKE_MONOTONIC": "1",
             "HRG_CLOCK_SYNCHRONIZED": "0"]
        }
        let epoch = try CLI.run(
            ["stream", "--simulate", "--model", "sdk-mock", "--format", "jsonl", "--duration", "1", "--session-id",
             "unset-clock", "--state-dir", dir.path], environment: fake("@1970-01-05 10:00:00"))
        #expect(epoch.status == 0, "\(epoch.stderr)")
        let recent = try CLI.run(["stream", "--simulate", "--model", "sdk-mock", "--format", "jsonl", "--duration", "1",
                                  "--session-id", "recent", "--state-dir", dir.path])
        #expect(recent.status == 0, "\(recent.stderr)")
        let keep = try CLI.run(["sessions", "prune", "--keep-days", "30", "--state-dir", dir.path])
        #expect(keep.status == 0 && keep.stdout.contains("0 sessions deleted"), "undated, kept: \(keep.stdout)")
        let ahead = try CLI.run(["sessions", "prune", "--keep-days", "30", "--state-dir", dir.path],
                                environment: fake("+400d"))
        #expect(ahead.status == 0 && ahead.stdout.contains("0 sessions deleted"), "counted from the newest: \(ahead.stdout)")
        let unset = try CLI.run(["sessions", "prune", "--keep-days", "30", "--state-dir", dir.path],
                                environment: fake("@1970-01-02 00:00:00"))
        #expect(unset.status == 1 && unset.stderr.contains("not set yet"), "\(unset.stderr)")
        // A session recorded on the clock a year ahead is the newest: counting from it deleted every real session.
        let stamped = try CLI.run(
            ["stream", "--simulate", "--model", "sdk-mock", "--format", "jsonl", "--duration", "1", "--session-id",
             "stamped-ahead", "--state-dir", dir.path], environment: fake("+400d"))
        #expect(stamped.status == 0, "\(stamped.stderr)")
        let jumped = try CLI.run(["sessions", "prune", "--keep-days", "30", "--state-dir", dir.path],
                                 environment: fake("+400d"))
        #expect(jumped.status == 1 && jumped.stderr.contains("a clock that jumped ahead"), "\(jumped.stderr)")
        #expect(jumped.stderr.contains("--trust-clock") && !jumped.stdout.contains("deleted"), "\(jumped.stdout)")
        let list = try CLI.run(["sessions", "list", "--state-dir", dir.path])
        #expect(list.stdout.contains("unset-clock") && list.stdout.contains("recent"), "\(list.stdout)")
        // The user says the dates are right (a long pause): the old sessions go (--across-gap, the older name of
        // --trust-clock, still works).
        let across = try CLI.run(["sessions", "prune", "--keep-days", "30", "--across-gap", "--state-dir", dir.path],
                                 environment: fake("+400d"))
        #expect(across.status == 0 && across.stdout.contains("deleted recent\n1 session deleted"), "\(across.stdout)")
    }

    /// `--keep-days` (and `keep_days`) before a session says what it deleted: a recording gone without a word is one
    /// the user looks for later.
    @Test func keepDaysSaysWhichSessionsItDeleted() throws {
        let lib = try #require(Self.libfaketime, "libfaketime is missing: apt-get install faketime")
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-behind-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let shim = try #require(try Self.buildTimerfdShim(in: dir), "no C compiler (clang, cc) to build the timerfd shim")
        let old = try CLI.run(
            ["stream", "--simulate", "--model", "sdk-mock", "--format", "jsonl", "--duration", "1", "--session-id", "old",
             "--state-dir", dir.path],
            environment: ["LD_PRELOAD": "\(shim):\(lib)", "FAKETIME": "-3d", "FAKETIME_DONT_FAKE_MONOTONIC": "1"])
        #expect(old.status == 0, "\(old.stderr)")
        // Used every day or so: no jump longer than the days kept (which would hold the prune, as a clock ahead).
        let middle = try CLI.run(
            ["stream", "--simulate", "--model", "sdk-mock", "--format", "jsonl", "--duration", "1", "--session-id",
             "middle", "--state-dir", dir.path],
            environment: ["LD_PRELOAD": "\(shim):\(lib)", "FAKETIME": "-36h", "FAKETIME_DONT_FAKE_MONOTONIC": "1"])
        #expect(middle.status == 0, "\(middle.stderr)")
        let recent = try CLI.run(["stream", "--simulate", "--model", "sdk-mock", "--format", "jsonl", "--duration", "1",
                                  "--session-id", "recent", "--state-dir", dir.path])
        #expect(recent.status == 0, "\(recent.stderr)")
        #expect(!recent.stderr.contains("deleted"), "nothing older than keep_days: \(recent.stderr)")
        let next = try CLI.run(["stream", "--simulate", "--model", "sdk-mock", "--format", "jsonl", "--duration", "1",
                                "--keep-days", "2", "--session-id", "next", "--state-dir", dir.path])
        #expect(next.status == 0, "\(next.stderr)")
        #expect(next.stderr.contains("deleted 1 session started more than 2 days ago (keep_days): old"), "\(next.stderr)")
        let list = try CLI.run(["sessions", "list", "--state-dir", dir.path])
        #expect(!list.stdout.contains("old") && list.stdout.contains("recent"), "\(list.stdout)")
        #expect(list.stdout.contains("middle"), "\(list.stdout)")
    }

    /// keep_days on a clock that is wrong: a Pi without a real-time clock records before NTP sets it (1970), or a
    /// bad time source puts it a year ahead. Both deleted real sessions (every one of the day, for a clock ahead);
    /// now a clock ahead prunes from the newest session's start, a session of unknown date is kept, and a clock not
    /// yet set deletes nothing and says so.
    @Test func keepDaysDeletesNothingOnAWrongClock() throws {
        let lib = try #require(Self.libfaketime, "libfaketime is missing: apt-get install faketime")
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-wrongclock-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let shim = try #require(try Self.buildTimerfdShim(in: dir), "no C compiler (clang, cc) to build the timerfd shim")
        func run(_ id: String, faked: String?, keep: Bool = true) throws -> CLI.Result {
            try CLI.run(
                ["stream", "--simulate", "--model", "sdk-mock", "--format", "jsonl", "--duration", "1", "--session-id", id,
                 "--state-dir", dir.path] + (keep ? ["--keep-days", "2"] : []),
                environment: faked.map {
                    ["LD_PRELOAD": "\(shim):\(lib)", "FAKETIME": $0, "FAKETIME_DONT_FAKE_MONOTONIC": "1",
                     "HRG_CLOCK_SYNCHRONIZED": "0"]
                } ?? [:])
        }
        let epoch = try run("epoch", faked: "@1970-01-02 00:00:00", keep: false)
        #expect(epoch.status == 0, "\(epoch.stderr)")
        #expect(try run("today", faked: nil, keep: false).status == 0)
        let ahead = try run("ahead", faked: "+400d")
        #expect(ahead.status == 0 && !ahead.stderr.contains("deleted"), "\(ahead.stderr)")
        let synced = try run("synced", faked: nil)
        #expect(!synced.stderr.contains("deleted"), "the 1970 session has no known date: \(synced.stderr)")
        // The clock ahead again, with a session already stamped by it: the newest no longer guards the others.
        let again = try run("again", faked: "+400d")
        #expect(again.status == 0 && !again.stderr.contains("deleted"), "\(again.stderr)")
        #expect(again.stderr.contains("a clock that jumped ahead"), "\(again.stderr)")
        let unset = try run("unset", faked: "@1970-01-03 00:00:00")
        #expect(unset.stderr.contains("the clock reads 1970-01-03, so it is not set yet"), "\(unset.stderr)")
        #expect(!unset.stderr.contains("deleted"), "\(unset.stderr)")
        let list = try CLI.run(["sessions", "list", "--state-dir", dir.path])
        for id in ["epoch", "today", "ahead", "synced", "again", "unset"] { #expect(list.stdout.contains(id), "\(id): \(list.stdout)") }
    }

    /// A user who stopped recording: sessions 40 and 45 days old, keep_days 30. With the clock synchronized (an NTP
    /// client keeps it) they are deleted, by `sessions prune` and before the next session; without, they are kept
    /// (the clock may be ahead) and the command says so and how: they were kept for ever without a word ("0 sessions
    /// deleted"), since the days counted from the newest session, and after the next session a warning of a clock
    /// ahead came before every session.
    @Test func keepDaysCountsFromTodayWhenTheClockIsSynchronized() throws {
        let lib = try #require(Self.libfaketime, "libfaketime is missing: apt-get install faketime")
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-pause-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let shim = try #require(try Self.buildTimerfdShim(in: dir), "no C compiler (clang, cc) to build the timerfd shim")
        func stream(_ id: String, _ environment: [String: String], _ more: [String] = []) throws -> CLI.Result {
            try CLI.run(["stream", "--simulate", "--model", "sdk-mock", "--format", "jsonl", "--duration", "1",
                         "--session-id", id, "--state-dir", dir.path] + more, environment: environment)
        }
        func fake(_ time: String) -> [String: String] {
            ["LD_PRELOAD": "\(shim):\(lib)", "FAKETIME": time, "FAKETIME_DONT_FAKE_MONOTONIC": "1", "HRG_CLOCK_SYNCHRONIZED": "0"]
        }
        let synced = ["LD_PRELOAD": shim, "HRG_CLOCK_SYNCHRONIZED": "1"]
        let unsynced = ["LD_PRELOAD": shim, "HRG_CLOCK_SYNCHRONIZED": "0"]
        for (id, ago) in [("first", "-45d"), ("second", "-40d")] {
            let r = try stream(id, fake(ago))
            #expect(r.status == 0, "\(r.stderr)")
        }
        let prune = ["sessions", "prune", "--keep-days", "30", "--state-dir", dir.path]
        let kept = try CLI.run(prune, environment: unsynced)
        #expect(kept.status == 0 && kept.stdout.contains("0 sessions deleted"), "\(kept.stdout)")
        #expect(kept.stderr.contains("warning: kept 2 sessions started more than 30 days before today")
                && kept.stderr.contains("not synchronized") && kept.stderr.contains("--trust-clock"), "\(kept.stderr)")
        // Before a session, on a synchronized clock: deleted, and said.
        let next = try stream("today", synced, ["--keep-days", "30"])
        #expect(next.status == 0, "\(next.stderr)")
        #expect(next.stderr.contains("deleted 2 sessions started more than 30 days ago (keep_days): first, second"),
                "\(next.stderr)")
        #expect(!next.stderr.contains("jumped ahead"), "\(next.stderr)")
        // One more before a long pause (over 90 days), with the session today: without NTP the jump holds the prune
        // and says how.
        let again = try stream("before-pause", fake("-100d"))
        #expect(again.status == 0, "\(again.stderr)")
        let held = try CLI.run(prune, environment: unsynced)
        #expect(held.status == 1 && held.stderr.contains("not synchronized") && held.stderr.contains("--trust-clock"),
                "\(held.stderr)")
        let trusted = try CLI.run(prune + ["--trust-clock"], environment: unsynced)
        #expect(trusted.status == 0 && trusted.stdout.contains("deleted before-pause\n1 session deleted"), "\(trusted.stdout)")
        let list = try CLI.run(["sessions", "list", "--state-dir", dir.path])
        #expect(list.stdout.contains("today") && !list.stdout.contains("first"), "\(list.stdout)")
    }
}
