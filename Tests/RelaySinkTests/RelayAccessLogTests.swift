import Foundation
import Logging
import NIOCore
import Synchronization
import Testing

@testable import RelayCore
@testable import RelayWebServer

/// Log lines kept in memory, for the tests to read.
final class CapturedLog: Sendable {
    private let lines = Mutex([String]())

    var all: [String] { lines.withLock { $0 } }

    var logger: Logger {
        Logger(label: "test.relay") { _ in Handler(log: self) }
    }

    struct Handler: LogHandler {
        let log: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            log.lines.withLock { $0.append("\(event.level) \(event.message)") }
        }
    }

    /// Whether a line containing `text` is logged within 5 s, looked for every 10 ms: the line of a connection that
    /// ended is written on the server's task after the peer has gone, which no clock of ours drives.
    func eventually(contains text: String) async -> Bool {
        for _ in 0..<500 {
            if all.contains(where: { $0.contains(text) }) { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return all.contains { $0.contains(text) }
    }
}

@Suite struct RelayAccessLogTests {
    /// Refusals from one address are said once a minute with how many were not; another address is said at once.
    @Test func refusalsAreSaidOnceAMinutePerAddressWithTheCount() throws {
        let captured = CapturedLog()
        let clock = Mutex(ContinuousClock.now)
        let log = RelayAccessLog(logger: captured.logger, now: { clock.withLock { $0 } })
        let phone = try SocketAddress(ipAddress: "192.168.1.20", port: 50000)
        let other = try SocketAddress(ipAddress: "192.168.1.21", port: 50001)
        for _ in 0..<6 {
            log.refused(path: "/v1/relay", tokenGiven: true, from: phone)
            clock.withLock { $0 = $0.advanced(by: .seconds(5)) }
        }
        #expect(captured.all.count == 1)
        #expect(captured.all[0].hasPrefix("warning refused /v1/relay from 192.168.1.20: a token this gateway does not have"))
        log.refused(path: "/metrics", tokenGiven: false, from: other)
        #expect(captured.all.count == 2 && captured.all[1].contains("192.168.1.21: no token"), "\(captured.all)")
        clock.withLock { $0 = $0.advanced(by: .seconds(31)) }  // 61 s after the first line
        log.refused(path: "/v1/relay", tokenGiven: true, from: phone)
        #expect(captured.all.count == 3)
        #expect(captured.all[2].hasSuffix("; since its line 61 s ago, 5 with a token it does not have not logged"), "\(captured.all)")
        log.refused(path: "/v1/relay", tokenGiven: true, from: phone)
        #expect(captured.all.count == 3)
        // Counted by kind, and since the last line however long ago (they were said as "in the last 60 s").
        log.refused(path: "/v1/relay", tokenGiven: false, from: phone)
        clock.withLock { $0 = $0.advanced(by: .seconds(150)) }
        log.refused(path: "/metrics", tokenGiven: false, from: phone)
        #expect(captured.all.count == 4)
        #expect(captured.all[3].contains("192.168.1.20: no token")
                && captured.all[3].hasSuffix("; since its line 2 min ago, 1 with a token it does not have, 1 without a token not logged"),
                "\(captured.all)")
    }

    /// A consumer's connection and its end are logged with its token's name, scope and address; a wrong token's
    /// upgrade and session list are logged as refused, and no token is ever written.
    @Test func aRealServerLogsConsumersAndRefusals() async throws {
        let captured = CapturedLog()
        let relay = try await LiveRelay(accessLog: RelayAccessLog(logger: captured.logger))
        let (token, record) = try relay.tokens.create(name: "kitchen tablet", scope: .read, nowMs: 0)
        #expect(try upgradeStatus(port: relay.port, headers: ["Authorization: Bearer \(token)"]).contains(" 101 "))
        let who = "token \"kitchen tablet\" (read-only, consumer \(record.id)) from 127.0.0.1"
        #expect(await captured.eventually(contains: "info consumer connected: \(who)"), "\(captured.all)")
        #expect(await captured.eventually(contains: "info consumer left: \(who) after "), "\(captured.all)")
        #expect(try upgradeStatus(port: relay.port, headers: ["Authorization: Bearer hrg_mistyped"]).contains(" 401 "))
        #expect(await captured.eventually(contains: "warning refused /v1/relay from 127.0.0.1: a token this gateway"))
        #expect(!captured.all.contains { $0.contains(token) || $0.contains("hrg_mistyped") }, "\(captured.all)")
        await relay.stop()
    }
}

/// Connects with `token` and completes the WebSocket upgrade; the caller closes the socket.
private func upgradedSocket(port: Int, token: String) throws -> Int32 {
    let fd = try connectLoopback(port: port)
    let request = ["GET /v1/relay HTTP/1.1", "Host: 127.0.0.1:\(port)", "Upgrade: websocket", "Connection: Upgrade",
                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version: 13",
                   "Authorization: Bearer \(token)", "", ""].joined(separator: "\r\n")
    _ = request.withCString { send(fd, $0, strlen($0), 0) }
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var got: [UInt8] = []
    var byte: UInt8 = 0
    // Up to the end of the response head, byte by byte: what follows is the relay's first frame.
    while !(got.count >= 4 && got.suffix(4) == [13, 10, 13, 10]) {
        guard recv(fd, &byte, 1, 0) == 1 else { break }
        got.append(byte)
    }
    return fd
}

@Suite(.serialized) struct RelayAbnormalCloseTests {
    /// A consumer whose connection ends without a close frame (reset mid-frame: a phone losing its network, a TLS
    /// peer vanishing) is let go at once: it was kept connected on an idle gateway, its writer waiting for a frame
    /// that never came, and every such consumer held a socket and its memory for good.
    @Test func aConsumerResetMidFrameIsLetGo() async throws {
        let captured = CapturedLog()
        let relay = try await LiveRelay(accessLog: RelayAccessLog(logger: captured.logger))
        let (token, _) = try relay.tokens.create(name: "phone", scope: .read, nowMs: 0)
        let fd = try upgradedSocket(port: relay.port, token: token)
        #expect(await captured.eventually(contains: "info consumer connected"), "\(captured.all)")
        #expect(relay.hub.connectionCount == 1)
        // The first bytes of a masked 100-byte text frame, then a reset (SO_LINGER 0).
        let half: [UInt8] = [0x81, 0x80 | 100, 1, 2, 3, 4, 0x41, 0x42]
        _ = half.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        close(fd)
        #expect(await captured.eventually(contains: "info consumer left"), "\(captured.all)")
        #expect(relay.hub.connectionCount == 0)
        await relay.stop()
    }
}

/// The close code of the first close frame the server sends on `fd`, reading (and skipping) the frames before it.
private func closeCode(on fd: Int32) -> Int? {
    func read(_ count: Int) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = out.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + got, count - got, 0) }
            if n <= 0 { return nil }
            got += n
        }
        return out
    }
    while let head = read(2) {
        var length = Int(head[1] & 0x7F)
        if length == 126 { guard let l = read(2) else { return nil }; length = Int(l[0]) << 8 | Int(l[1]) }
        if length == 127 { guard let l = read(8) else { return nil }; length = l.reduce(0) { $0 << 8 | Int($1) } }
        guard let payload = read(length) else { return nil }
        if head[0] & 0x0F == 0x8 { return payload.count >= 2 ? Int(payload[0]) << 8 | Int(payload[1]) : nil }
    }
    return nil
}

@Suite(.serialized) struct RelayTextFrameTests {
    /// A text frame that is not UTF-8 is a protocol error the peer is told of (close 1007), not a command read
    /// with U+FFFD in place of its bytes.
    @Test func aTextFrameThatIsNotUTF8ClosesWith1007() async throws {
        let captured = CapturedLog()
        let relay = try await LiveRelay(accessLog: RelayAccessLog(logger: captured.logger))
        let (token, _) = try relay.tokens.create(name: "phone", scope: .control, nowMs: 0)
        let fd = try upgradedSocket(port: relay.port, token: token)
        defer { close(fd) }
        let payload: [UInt8] = Array(#"{"command":"hello","x":""#.utf8) + [0xFF, 0xFE] + Array(#""}"#.utf8)
        let mask: [UInt8] = [9, 8, 7, 6]
        let frame = [0x81, 0x80 | UInt8(payload.count)] + mask + payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        _ = frame.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        // Read on a thread of its own: blocking one of the pool's threads (as many as cores) could stall the server.
        let code = await withCheckedContinuation { done in Thread.detachNewThread { done.resume(returning: closeCode(on: fd)) } }
        #expect(code == 1007)
        #expect(await captured.eventually(contains: "info consumer left"), "\(captured.all)")
        await relay.stop()
    }
}
