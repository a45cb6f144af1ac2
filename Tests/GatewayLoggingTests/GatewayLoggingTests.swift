import Foundation
import GatewayLogging
import Logging
import Synchronization
import Testing

@Suite struct GatewayLoggingTests {
    let date = Date(timeIntervalSince1970: 1_763_812_345.678)

    @Test func journalLinesCarryTheSyslogPriorityAndNoEscapes() {
        let warn = LogFormat.line(style: .journal, level: .warning, label: "hr-gateway", message: "disk full",
                                  metadata: ["session": "s1"], date: date)
        #expect(warn == "<4>hr-gateway: disk full session=s1")
        #expect(LogFormat.line(style: .journal, level: .info, label: "l", message: "m", metadata: [:], date: date) == "<6>l: m")
        #expect(LogFormat.line(style: .journal, level: .critical, label: "l", message: "m", metadata: [:], date: date) == "<2>l: m")
        #expect(LogFormat.line(style: .journal, level: .debug, label: "l", message: "a\nb", metadata: [:], date: date) == "<7>l: a\\nb")
    }

    @Test func plainLinesHaveATimestampAndNoColourTerminalLinesHaveColour() {
        let plain = LogFormat.line(style: .plain, level: .error, label: "l", message: "m", metadata: [:], date: date)
        #expect(plain == "2025-11-22T11:52:25.678Z error l: m")
        let tty = LogFormat.line(style: .terminal, level: .error, label: "l", message: "m", metadata: [:], date: date)
        #expect(tty.contains("\u{1B}["))
        #expect(tty.hasSuffix(" l: m"))
    }

    @Test func theJournalIsDetectedOnlyWhenStandardErrorIsItsStream() throws {
        let pipe = Pipe()
        let fd = pipe.fileHandleForWriting.fileDescriptor
        var st = stat()
        try #require(fstat(fd, &st) == 0)
        #expect(LogStyle.detect(environment: ["JOURNAL_STREAM": "\(st.st_dev):\(st.st_ino)"], fd: fd) == .journal)
        #expect(LogStyle.detect(environment: ["JOURNAL_STREAM": "\(st.st_dev):\(st.st_ino + 1)"], fd: fd) == .plain)
        #expect(LogStyle.detect(environment: [:], fd: fd) == .plain)
    }

    @Test func theHandlerFiltersByLevelAndWritesWholeLines() {
        let lines = Mutex<[String]>([])
        var logger = Logger(label: "t") { label in
            GatewayLogHandler(label: label, level: .notice, style: .journal) { text in lines.withLock { $0.append(text) } }
        }
        logger[metadataKey: "device"] = "AA"
        logger.info("hidden")
        logger.warning("shown")
        #expect(lines.withLock { $0 } == ["<4>t: shown device=AA\n"])
    }

    @Test func theCommandLogsInJournalFormatUnderSystemd() throws {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-log-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: state) }
        func run(_ extra: [String]) throws -> String {
            let out = Pipe()
            let err = Pipe()
            var st = stat()
            _ = fstat(err.fileHandleForWriting.fileDescriptor, &st)
            let p = Process()
            p.executableURL = executable()
            p.arguments = ["stream", "--simulate", "--model", "sdk-mock", "--duration", "1", "--format", "jsonl",
                           "--state-dir", state] + extra
            var env = ProcessInfo.processInfo.environment
            env["JOURNAL_STREAM"] = "\(st.st_dev):\(st.st_ino)"
            p.environment = env
            p.standardOutput = out
            p.standardError = err
            try p.run()
            try? err.fileHandleForWriting.close()
            try? out.fileHandleForWriting.close()
            _ = out.fileHandleForReading.readDataToEndOfFile()
            let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            p.waitUntilExit()
            return text
        }
        let debug = try run(["--log-level", "debug"])
        #expect(debug.split(separator: "\n").contains { $0.hasPrefix("<7>hr-gateway: recording session") }, "\(debug)")
        #expect(!debug.contains("\u{1B}"))
        let quiet = try run([])
        #expect(!quiet.contains("recording session"), "info hides debug lines")
    }

    func executable() -> URL {
        var dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent("hr-gateway")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        return URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(".build/debug/hr-gateway")
    }
}
