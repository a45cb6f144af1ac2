import Foundation
import GatewayEngine
import Testing

/// The program reading `stream`'s standard output goes away (`| head`, a viewer that quit): the session ends as on
/// Ctrl-C, recorded with its summary, when standard output was its only live output, and goes on for the others
/// otherwise. Before, the first write after that killed the gateway (SIGPIPE, status 141) and left the session
/// `interrupted`.
@Suite(.serialized) struct StdoutClosedCLITests {
    /// Starts `stream` with its standard output on a pipe this test reads and then closes.
    private final class Gateway {
        let process = Process()
        let out = Pipe()
        let stderr: TimedLines
        private var buffer = Data()

        init(_ arguments: [String]) throws {
            process.executableURL = CLI.executable
            process.arguments = arguments
            let err = Pipe()
            process.standardOutput = out
            process.standardError = err
            process.standardInput = FileHandle.nullDevice
            try process.run()
            stderr = TimedLines(err.fileHandleForReading)
            let pid = process.processIdentifier
            DispatchQueue.global().asyncAfter(deadline: .now() + 60) { kill(pid, SIGKILL) }
        }

        /// Reads standard output until `count` session frames have come; the lines read.
        func readFrames(_ count: Int) -> [String] {
            var lines: [String] = []
            var frames = 0
            while frames < count {
                if let nl = buffer.firstIndex(of: 0x0A) {
                    let line = String(decoding: buffer[buffer.startIndex..<nl], as: UTF8.self)
                    buffer.removeSubrange(buffer.startIndex...nl)
                    lines.append(line)
                    if line.contains("\"type\":\"session_frame\"") { frames += 1 }
                    continue
                }
                let chunk = out.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                buffer.append(chunk)
            }
            return lines
        }

        /// Reads what `--format pretty` drew first (the screen is cleared and drawn at once).
        func readScreen() -> String { String(decoding: out.fileHandleForReading.availableData, as: UTF8.self) }

        /// The reader goes away: no process has the pipe's read end open any more.
        func closeStdout() { try? out.fileHandleForReading.close() }

        func wait() -> Int32 {
            process.waitUntilExit()
            return process.terminationStatus
        }

        deinit { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
    }

    private func tempDir() throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-stdout-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    private func session(_ id: String, in dir: String) throws -> JSONValue? {
        let list = try CLI.run(["sessions", "list", "--json", "--state-dir", dir])
        return try JSONValue(parsing: list.stdout).arrayValue?.first { $0["session_id"] == .string(id) }
    }

    @Test(arguments: ["jsonl", "pretty"])
    func aClosedStandardOutputEndsTheSessionRecordedWithItsSummary(format: String) throws {
        let dir = try tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let gateway = try Gateway([
            "stream", "--simulate", "--format", format, "--emit-interval", "1", "--duration", "600",
            "--session-id", "headed", "--state-dir", dir,
        ])
        if format == "jsonl" {
            #expect(gateway.readFrames(2).first?.contains("\"session_started\"") == true)
        } else {
            var screen = gateway.readScreen()
            #expect(screen.contains("\u{1B}[2J"), "the live view clears the screen first")
            // Until the first frame (a session stopped before any sample fails).
            while !screen.contains("frame #1") {
                let more = gateway.readScreen()
                if more.isEmpty { break }
                screen += more
            }
        }
        gateway.closeStdout()
        #expect(gateway.wait() == 0, "\(gateway.stderr.all.map(\.text))")
        let note = gateway.stderr.all.map(\.text).first { $0.contains("standard output was closed") }
        #expect(note?.contains("ending the session as on Ctrl-C") == true, "\(gateway.stderr.all.map(\.text))")
        #expect(note?.contains("hr-gateway sessions export headed") == true)
        let recorded = try #require(try session("headed", in: dir))
        #expect(recorded["state"] == .string("completed"), "\(recorded)")
        let export = try CLI.run(["sessions", "export", "headed", "--format", "json", "--state-dir", dir])
        let events = try JSONValue(parsing: export.stdout)["events"]?.arrayValue ?? []
        #expect(events.last?["type"] == .string("session_summary"), "\(export.stderr)")
    }

    @Test func withAnotherLiveOutputTheSessionGoesOnForIt() throws {
        let dir = try tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let gateway = try Gateway([
            "stream", "--simulate", "--format", "jsonl", "--emit-interval", "1", "--duration", "600",
            "--session-id", "relayed", "--state-dir", dir, "--listen", "127.0.0.1:0", "--no-auth",
        ])
        let announced = try #require(gateway.stderr.wait { $0.contains("relay: listening on ") })
        let url = String(announced[announced.range(of: "ws://")!.lowerBound...])
        _ = gateway.readFrames(1)
        gateway.closeStdout()
        let note = try #require(gateway.stderr.wait { $0.contains("standard output was closed") })
        #expect(note.contains("the session goes on for the relay"), "\(note)")

        // A relay consumer started after that still gets frames: the session runs on.
        let consumer = try RelayConsumer(url, ["--no-heartbeats"])
        let relayed = consumer.lines
        let live = { (line: String) in line.contains("\"type\":\"session_frame\"") && !line.contains("\"replayed\"") }
        #expect(relayed.wait { _ in relayed.all.filter { live($0.text) }.count >= 2 } != nil,
                "live frames on the relay after standard output closed")
        #expect(gateway.process.isRunning)

        kill(gateway.process.processIdentifier, SIGINT)
        #expect(gateway.wait() == 0, "\(gateway.stderr.all.map(\.text))")
        #expect(try session("relayed", in: dir)?["state"] == .string("completed"))
    }

    /// Standard output on a full disk (/dev/full): the session ends as when the reader goes away, recorded, but the
    /// note says why and the command fails (status 1) rather than reporting success with its output lost.
    @Test func aFullStandardOutputEndsTheSessionSayingWhyAndFails() throws {
        let dir = try tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let run = try CLI.run(["stream", "--simulate", "--format", "jsonl", "--duration", "600", "--session-id", "full",
                               "--state-dir", dir], stdoutTo: "/dev/full")
        #expect(run.status == 1, "\(run.stderr)")
        #expect(run.stderr.contains("note: standard output cannot be written (No space left on device): ending the session"),
                "\(run.stderr)")
        #expect(run.stderr.contains("standard output did not take everything written to it"), "\(run.stderr)")
        #expect(try session("full", in: dir)?["state"] == .string("completed"))
    }
}
