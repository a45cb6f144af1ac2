import Foundation
import GatewayEngine
import Testing

/// Reads a pipe on a thread of its own and keeps every line with the moment it arrived.
// @unchecked Sendable: `lines` is only touched under `lock`; `arrived` is a semaphore.
final class TimedLines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [(at: ContinuousClock.Instant, text: String)] = []
    private let arrived = DispatchSemaphore(value: 0)

    init(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            var buffer = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                buffer.append(chunk)
                while let nl = buffer.firstIndex(of: 0x0A) {
                    let line = String(decoding: buffer[buffer.startIndex..<nl], as: UTF8.self)
                    buffer.removeSubrange(buffer.startIndex...nl)
                    let now = ContinuousClock.now
                    lock.lock()
                    lines.append((now, line))
                    lock.unlock()
                    arrived.signal()
                }
            }
            arrived.signal()
        }
    }

    var all: [(at: ContinuousClock.Instant, text: String)] {
        lock.lock()
        defer { lock.unlock() }
        return lines
    }

    /// Waits (up to `timeout` seconds) for a line that satisfies `match`.
    func wait(timeout: Double = 30, for match: (String) -> Bool) -> String? {
        let deadline = DispatchTime.now() + timeout
        while true {
            if let line = all.first(where: { match($0.text) }) { return line.text }
            if arrived.wait(timeout: deadline) == .timedOut { return nil }
        }
    }
}

/// Another process holds an exclusive lock on sessions.sqlite for 10 s mid-session: frames keep reaching stdout and
/// a relay consumer on time, and afterwards every sample received is in the store.
@Suite(.serialized) struct LockedStoreCLITests {
    @Test func aLockedStoreStallsNeitherStdoutNorTheRelayAndLosesNoSample() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-locked-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let recording = dir + "/samples.jsonl"

        let gateway = Process()
        gateway.executableURL = CLI.executable
        gateway.arguments = [
            "stream", "--simulate", "--model", "sdk-mock", "--format", "jsonl", "--emit-interval", "1",
            "--duration", "16", "--session-id", "locked", "--state-dir", dir, "--record", recording,
            "--listen", "127.0.0.1:0", "--no-auth",
        ]
        let out = Pipe()
        let err = Pipe()
        gateway.standardOutput = out
        gateway.standardError = err
        gateway.standardInput = FileHandle.nullDevice
        try gateway.run()
        let pid = gateway.processIdentifier
        defer { if gateway.isRunning { kill(pid, SIGKILL) } }
        DispatchQueue.global().asyncAfter(deadline: .now() + 60) { kill(pid, SIGKILL) }
        let stdout = TimedLines(out.fileHandleForReading)
        let stderr = TimedLines(err.fileHandleForReading)

        // A consumer of the relay, in a process of its own.
        let announced = try #require(stderr.wait { $0.contains("relay: listening on ") })
        let url = String(announced[announced.range(of: "ws://")!.lowerBound...])
        let consumer = try RelayConsumer(url, ["--until-summary", "--no-heartbeats"])
        let relayed = consumer.lines
        // Connected before the database is taken (frames are not replayed to a consumer that connects later, so
        // the frames it gets are those published after its welcome).
        try #require(relayed.wait { $0.contains("\"type\":\"welcome\"") } != nil, "the consumer got no welcome")

        // Three frames in, another process takes the database for ten seconds.
        try #require(stdout.wait { $0.contains("\"session_frame\"") && $0.contains("\"seq\":3,") } != nil)
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        holder.arguments = ["-c", """
            import sqlite3, sys, time
            db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
            db.execute("BEGIN EXCLUSIVE")
            print("locked", flush=True)
            time.sleep(10)
            db.execute("COMMIT")
            print("released", flush=True)
            """, dir + "/sessions.sqlite"]
        let holderOut = Pipe()
        holder.standardOutput = holderOut
        try holder.run()
        let held = TimedLines(holderOut.fileHandleForReading)
        try #require(held.wait { $0 == "locked" } != nil, "the outside process could not lock the database")
        let lockedAt = try #require(held.all.first?.at)
        holder.waitUntilExit()
        #expect(holder.terminationStatus == 0)
        let releasedAt = try #require(held.all.last?.at)
        #expect(lockedAt.duration(to: releasedAt) >= .seconds(9.5))

        gateway.waitUntilExit()
        consumer.wait()
        #expect(gateway.terminationStatus == 0, "\(stderr.all.map(\.text))")

        // stdout: every frame, one a second, also while the database was held.
        let events = stdout.all.compactMap { line in (try? JSONValue(parsing: line.text)).map { (line.at, $0) } }
        let frames = events.filter { $0.1["type"] == .string("session_frame") }
        #expect(frames.map { $0.1["seq"]?.intValue ?? -1 } == Array(1...16))
        let duringLock = frames.filter { $0.0 > lockedAt && $0.0 < releasedAt }
        #expect(duringLock.count >= 8, "frames on stdout while the database was held: \(duringLock.count)")
        for (a, b) in zip(frames, frames.dropFirst()) {
            let gap = a.0.duration(to: b.0)
            #expect(gap < .milliseconds(1800), "stdout frame gap \(gap)")
        }
        #expect(events.last?.1["type"] == .string("session_summary"))

        // The relay consumer: the same frames, on time.
        let relayedFrames = relayed.all.filter { $0.text.contains("\"type\":\"session_frame\"") }
        // Every frame from its first to the last (it connected while the debug binary was starting, on a loaded
        // machine possibly after frame 1).
        let relayedSeqs = relayedFrames.map { Int((try? JSONValue(parsing: $0.text))?["seq"]?.intValue ?? -1) }
        #expect(relayedSeqs.count >= 8 && relayedSeqs == Array((17 - relayedSeqs.count)...16), "\(relayedSeqs)")
        #expect(relayedFrames.filter { $0.at > lockedAt && $0.at < releasedAt }.count >= 8)
        for (a, b) in zip(relayedFrames, relayedFrames.dropFirst()) {
            let gap = a.at.duration(to: b.at)
            #expect(gap < .milliseconds(1800), "relay frame gap \(gap)")
        }
        #expect(relayed.all.contains { $0.text.contains("\"type\":\"session_summary\"") })

        // Every sample received (the --record file is written on the provider's side) is in the store.
        let received = try String(contentsOfFile: recording, encoding: .utf8).split(separator: "\n")
            .map { try JSONValue(parsing: String($0)) }
        #expect(received.count >= 16)
        let export = try CLI.run(["sessions", "export", "locked", "--format", "jsonl", "--state-dir", dir])
        #expect(export.status == 0, "\(export.stderr)")
        let stored = try export.lines.map { try JSONValue(parsing: $0) }
        // The file may hold one more: a sample that arrived after the summary belongs to no session.
        #expect(stored.count >= 16 && stored.count >= received.count - 1, "stored \(stored.count) of \(received.count)")
        #expect(Array(received.prefix(stored.count)) == stored, "every sample of the session, in order")
        let list = try CLI.run(["sessions", "list", "--json", "--state-dir", dir])
        let session = try #require(try JSONValue(parsing: list.stdout).arrayValue?.first)
        #expect(session["state"] == .string("completed"))
        #expect(session["event_count"]?.intValue == Int64(events.count))
    }

    /// Killed while the database is held: nothing reached SQLite after the lock, but every sample was journaled, and
    /// the next command that opens the store imports the journal.
    @Test func aKillWhileTheStoreIsLockedLosesNoSample() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-locked9-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let cli = try RunningCLI([
            "stream", "--simulate", "--format", "jsonl", "--emit-interval", "1", "--raw", "--window", "3600",
            "--session-id", "k9locked", "--state-dir", dir,
        ])
        var frames = 0
        while frames < 2, let line = cli.readLine() { if line.contains("\"biosignal_frame\"") { frames += 1 } }
        try #require(frames == 2)
        // Held until this test writes to its standard input.
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        holder.arguments = ["-c", """
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
            db.execute("BEGIN EXCLUSIVE")
            print("locked", flush=True)
            sys.stdin.readline()
            db.execute("COMMIT")
            """, dir + "/sessions.sqlite"]
        let holderIn = Pipe()
        let holderOut = Pipe()
        holder.standardInput = holderIn
        holder.standardOutput = holderOut
        try holder.run()
        let held = TimedLines(holderOut.fileHandleForReading)
        try #require(held.wait { $0 == "locked" } != nil)
        // Three more raw frames while the database is held: each lists every sample received so far.
        var reported: [JSONValue] = []
        frames = 0
        while frames < 3, let line = cli.readLine() {
            let e = try JSONValue(parsing: line)
            if e["type"] == .string("biosignal_frame") {
                frames += 1
                reported = e["samples"]?.arrayValue ?? []
            }
        }
        try #require(frames == 3)
        cli.signal(SIGKILL)
        #expect(cli.wait() == SIGKILL)
        holderIn.fileHandleForWriting.write(Data("\n".utf8))
        holder.waitUntilExit()

        let export = try CLI.run(["sessions", "export", "k9locked", "--format", "jsonl", "--state-dir", dir])
        #expect(export.status == 0, "\(export.stderr)")
        let stored = try export.lines.map { try JSONValue(parsing: $0) }
        // Five frames at 1 s hold four or five of the strap's 1 Hz samples, depending on where the first one fell.
        #expect(reported.count >= 3)
        #expect(Array(stored.prefix(reported.count)) == reported, "every sample reported before the kill, in order")
        let list = try CLI.run(["sessions", "list", "--json", "--state-dir", dir])
        #expect(try JSONValue(parsing: list.stdout).arrayValue?.first?["state"] == .string("interrupted"))
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: dir + "/journal")) ?? []).isEmpty,
                "the journal is removed once imported")
    }
}
