import Foundation

/// Runs the built `hr-gateway` executable, as a user would.
enum CLI {
    /// The executable next to the test bundle (SwiftPM puts products and test bundles in one directory).
    static var executable: URL {
        var dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent("hr-gateway")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        return URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(".build/debug/hr-gateway")
    }

    /// A state directory for the whole test run, so that sessions recorded by tests stay out of the user's. New for
    /// each run (a process id alone is reused, and an earlier run's sessions would then be found there).
    static let stateDir: String = {
        let p = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-cli-state-\(UUID().uuidString)").path
        try? FileManager.default.createDirectory(atPath: p, withIntermediateDirectories: true)
        return p
    }()

    /// An empty configuration file (the defaults), so that one installed on the machine (/etc/hr-gateway, with its
    /// strap source) or the user's does not change what the commands under test do; a test's own `--config` or
    /// `HR_GATEWAY_CONFIG` comes first.
    static let emptyConfig: String = {
        let p = stateDir + "/empty-config.toml"
        _ = FileManager.default.createFile(atPath: p, contents: Data())
        return p
    }()

    /// The environment of a command under test: this process's, with the state directory and configuration above,
    /// then `extra`.
    static func environment(_ extra: [String: String]) -> [String: String] {
        var env = ProcessInfo.processInfo.environment
        env["HR_GATEWAY_STATE_DIR"] = stateDir
        env["HR_GATEWAY_CONFIG"] = emptyConfig
        for (k, v) in extra { env[k] = v }
        return env
    }

    struct Result {
        let status: Int32
        let stdout: String
        let stderr: String
        var lines: [String] { stdout.split(separator: "\n").map(String.init) }
    }

    /// Runs to completion and returns the exit status and both outputs; with `asUser`, as that user id (and group
    /// id), through util-linux's setpriv (which needs root); with `stdoutTo`, standard output goes to that file (such
    /// as /dev/full) and `stdout` comes back empty; with `input`, standard input is a pipe carrying it (else
    /// /dev/null).
    static func run(
        _ arguments: [String], environment: [String: String] = [:], asUser uid: UInt32? = nil, stdoutTo: String? = nil,
        input: Data? = nil
    ) throws -> Result {
        let p = Process()
        if let uid {
            p.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            p.arguments = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", executable.path] + arguments
        } else {
            p.executableURL = executable
            p.arguments = arguments
        }
        p.environment = Self.environment(environment)
        let out = Pipe()
        let err = Pipe()
        if let stdoutTo {
            p.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: stdoutTo))
            try out.fileHandleForWriting.close()
        } else {
            p.standardOutput = out
        }
        p.standardError = err
        let stdin = input.map { _ in Pipe() }
        p.standardInput = stdin ?? FileHandle.nullDevice
        try p.run()
        if let stdin, let input {
            let writer = stdin.fileHandleForWriting
            Thread.detachNewThread {
                try? writer.write(contentsOf: input)
                try? writer.close()
            }
        }
        // Read both pipes to the end before waiting, so a full pipe cannot block the child.
        let errData = Locked(Data())
        let done = DispatchSemaphore(value: 0)
        let errHandle = err.fileHandleForReading
        Thread.detachNewThread {
            let data = errHandle.readDataToEndOfFile()
            errData.withLock { $0 = data }
            done.signal()
        }
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        done.wait()
        p.waitUntilExit()
        return Result(
            status: p.terminationStatus,
            stdout: String(decoding: outData, as: UTF8.self),
            stderr: String(decoding: errData.withLock { $0 }, as: UTF8.self))
    }
}

/// Lines read from a pipe as they come (blocking until one is complete), then what is left at end of file.
final class PipeLines {
    private let handle: FileHandle
    private var buffer = Data()

    init(_ handle: FileHandle) { self.handle = handle }

    func next() -> String? {
        while true {
            if let nl = buffer.firstIndex(of: 0x0A) {
                let line = buffer[buffer.startIndex..<nl]
                buffer.removeSubrange(buffer.startIndex...nl)
                return String(decoding: line, as: UTF8.self)
            }
            let chunk = handle.availableData
            if chunk.isEmpty {
                defer { buffer = Data() }
                return buffer.isEmpty ? nil : String(decoding: buffer, as: UTF8.self)
            }
            buffer.append(chunk)
        }
    }
}

/// A started `hr-gateway` whose output is read line by line while it runs.
final class RunningCLI {
    let process = Process()
    private let out = Pipe()
    private lazy var lines = PipeLines(out.fileHandleForReading)

    /// `under`: a program that runs hr-gateway (such as `nohup`), with its own arguments. `errorTo`: a file for
    /// its standard error (else discarded).
    init(
        _ arguments: [String], environment: [String: String] = [:], under wrapper: [String] = [], errorTo: String? = nil
    ) throws {
        if let program = wrapper.first {
            process.executableURL = URL(fileURLWithPath: program)
            process.arguments = wrapper.dropFirst() + [CLI.executable.path] + arguments
        } else {
            process.executableURL = CLI.executable
            process.arguments = arguments
        }
        process.environment = CLI.environment(environment)
        process.standardOutput = out
        if let errorTo {
            _ = FileManager.default.createFile(atPath: errorTo, contents: nil)
            process.standardError = FileHandle(forWritingAtPath: errorTo)
        } else {
            process.standardError = FileHandle.nullDevice
        }
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    /// The next line of standard output, or nil at end of file.
    func readLine() -> String? { lines.next() }

    func signal(_ sig: Int32) { kill(process.processIdentifier, sig) }

    func wait() -> Int32 {
        process.waitUntilExit()
        return process.terminationStatus
    }

    deinit { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
}

/// `hr-gateway attach URL` as a relay consumer in a process of its own, its standard output read with arrival times;
/// killed when released.
final class RelayConsumer {
    let process = Process()
    let lines: TimedLines

    init(_ url: String, _ arguments: [String]) throws {
        process.executableURL = CLI.executable
        process.arguments = ["attach", url] + arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        lines = TimedLines(out.fileHandleForReading)
    }

    func wait() {
        process.waitUntilExit()
    }

    deinit { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
}

/// A value guarded by a lock (tests only).
// @unchecked Sendable: `value` is only touched inside `withLock`.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<R>(_ body: (inout Value) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}
