import Foundation

/// `Tests/Fixtures/flaky_webhook.py` running on 127.0.0.1: refuses the first `failing` requests (and every request
/// while `failWhile` exists), then accepts and records the bodies it accepted. Killed when released.
public final class FlakyServer {
    public enum Mode: String { case status, drop }

    let process = Process()
    public let port: Int
    let acceptedPath: String

    static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Tests/Fixtures/flaky_webhook.py").path
    }

    static var python: String {
        FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : "/usr/bin/env"
    }

    public init(failing: Int, mode: Mode = .status, failWhile: String? = nil) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("flaky-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        acceptedPath = dir + "/accepted.jsonl"
        process.executableURL = URL(fileURLWithPath: Self.python)
        let args = [Self.script, "--fail", String(failing), "--mode", mode.rawValue, "--accepted", acceptedPath]
            + (failWhile.map { ["--fail-while", $0] } ?? [])
        process.arguments = Self.python == "/usr/bin/env" ? ["python3"] + args : args
        let out = Pipe()
        process.standardOutput = out
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // The first line is the port: the server is listening once it has been printed.
        var line = Data()
        let handle = out.fileHandleForReading
        while true {
            let byte = handle.readData(ofLength: 1)
            if byte.isEmpty || byte == Data("\n".utf8) { break }
            line.append(byte)
        }
        guard let port = Int(String(decoding: line, as: UTF8.self)) else {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw ServerFailure(message: "flaky_webhook.py did not print its port")
        }
        self.port = port
    }

    public var url: URL { URL(string: "http://127.0.0.1:\(port)/hook")! }

    /// Bodies accepted with a 2xx, in order, with their `Content-Type` and `Idempotency-Key` headers.
    public func accepted() -> [(contentType: String?, body: String, idempotencyKey: String?)] {
        lines(acceptedPath).compactMap { obj in
            guard let body = obj["body"] as? String else { return nil }
            return (obj["content_type"] as? String, body, obj["idempotency_key"] as? String)
        }
    }

    /// Every request seen (accepted or refused).
    public func requestCount() -> Int { lines(acceptedPath + ".all").count }

    private func lines(_ path: String) -> [[String: Any]] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    deinit {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

public struct ServerFailure: Error { public let message: String }

/// A free port with nothing listening (bound then closed), for connection-refused tests.
public func closedPort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    addr.sin_port = 0
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) }
    }
    _ = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
    }
    return Int(UInt16(bigEndian: addr.sin_port))
}
