import Foundation

/// Another process (Python's sqlite3) holding the write lock of a database until `release()`, or for at most a minute
/// if the test never asks: for the tests of every store that must not wait for another process (the webhook and relay
/// outboxes).
public final class OutsideLock {
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()

    public init(path: String) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", """
            import signal, sqlite3, sys
            db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
            db.execute("BEGIN EXCLUSIVE")
            print("locked", flush=True)
            signal.signal(signal.SIGALRM, lambda *_: (db.execute("COMMIT"), print("released after a minute", flush=True), sys.exit(0)))
            signal.alarm(60)
            sys.stdin.readline()
            db.execute("COMMIT")
            print("released on request", flush=True)
            """, path]
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        guard readLine() == "locked" else { throw CocoaError(.fileLocking) }
    }

    /// Ends the lock; returns what the holder said.
    public func release() throws -> String? {
        try input.fileHandleForWriting.write(contentsOf: Data("go\n".utf8))
        let said = readLine()
        process.waitUntilExit()
        return said
    }

    private func readLine() -> String? {
        var line = Data()
        while true {
            let byte = try? output.fileHandleForReading.read(upToCount: 1)
            guard let byte, let b = byte.first else { return line.isEmpty ? nil : String(decoding: line, as: UTF8.self) }
            if b == 0x0A { return String(decoding: line, as: UTF8.self) }
            line.append(b)
        }
    }

    deinit { if process.isRunning { process.terminate() } }
}
