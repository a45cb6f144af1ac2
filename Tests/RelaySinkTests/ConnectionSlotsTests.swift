import Foundation
import Testing

@testable import RelayWebServer

@Suite struct ConnectionSlotsTests {
    /// One address may hold `perAddress`, all together `total`; a slot given back is free again.
    @Test func anAddressHoldsItsShareAndTheRelayItsTotal() {
        let slots = ConnectionSlots(perAddress: 2, total: 3, exemptsLoopback: true)
        #expect(slots.take("192.168.1.9") == nil)
        #expect(slots.take("192.168.1.9") == nil)
        #expect(slots.take("192.168.1.9") == .address(open: 2))
        #expect(slots.take("fe80::1") == nil)
        #expect(slots.take("10.0.0.4") == .total(open: 3))
        // Loopback is not counted, at either limit.
        for _ in 0..<10 { #expect(slots.take("127.0.0.1") == nil) }
        #expect(slots.take("::1") == nil)
        slots.release("192.168.1.9")
        #expect(slots.open(from: "192.168.1.9") == 1)
        #expect(slots.take("10.0.0.4") == nil)
        slots.release("10.0.0.4")
        slots.release("10.0.0.4")  // once too often: nothing to give back
        #expect(slots.take("10.0.0.4") == nil)
        #expect(slots.take("10.0.0.5") == .total(open: 3))
        // Unknown peers share one count.
        let counted = ConnectionSlots(perAddress: 1, total: 10, exemptsLoopback: false)
        #expect(counted.take(nil) == nil)
        #expect(counted.take(nil) == .address(open: 1))
        #expect(counted.take("127.0.0.1") == nil)
        #expect(counted.take("127.0.0.1") == .address(open: 1))
    }

    /// The total leaves the process a quarter of its descriptors (at least 64) for its own files.
    @Test func theTotalLeavesDescriptorsForTheGatewaysOwnFiles() {
        #expect(ConnectionSlots.total(configured: 1024, fileLimit: 1024) == 768)
        #expect(ConnectionSlots.total(configured: 1024, fileLimit: 524_288) == 1024)
        #expect(ConnectionSlots.total(configured: 1024, fileLimit: 200) == 136)
        #expect(ConnectionSlots.total(configured: 1024, fileLimit: 50) == 1)
        #expect(ConnectionSlots.total(configured: 1024, fileLimit: nil) == 1024)
    }

    /// Over the relay: a connection past its address's share is closed at once and said in the log once, with the
    /// count of those after it; the connections held are still served, and one given back lets the next in.
    @Test func aConnectionPastTheAddressShareIsClosedAndSaid() async throws {
        let captured = CapturedLog()
        let relay = try await LiveRelay(accessLog: RelayAccessLog(logger: captured.logger), connectionsPerAddress: 3)
        // Four at once: which of them is past the share depends on the order their setups run on the server's
        // event loops, not on the order they connected.
        var four = try (0..<4).map { _ in try connectLoopback(port: relay.port) }
        // Waited for on a thread of its own: blocking one of the pool's threads could stall the server.
        let ended = await withCheckedContinuation { done in
            Thread.detachNewThread { [four] in done.resume(returning: firstEnded(of: four, seconds: 10)) }
        }
        #expect(ended.count == 1, "of four connections from 127.0.0.1, \(ended.count) were closed")
        ended.forEach { close($0) }
        four.removeAll { ended.contains($0) }
        let held = Array(four.prefix(3))
        #expect(await captured.eventually(contains: "closed a connection from 127.0.0.1 as it was accepted: it holds 3 connections already"), "\(captured.all)")
        let again = try connectLoopback(port: relay.port)
        defer { close(again) }
        #expect(await withCheckedContinuation { done in Thread.detachNewThread { done.resume(returning: firstEnded(of: [again], seconds: 10)) } } == [again])
        #expect(captured.all.filter { $0.contains("closed a connection") }.count == 1, "\(captured.all)")

        // The held ones are served (a request and its answer on the first: it then closes, as asked).
        let request = "GET /relay.js HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        _ = request.withCString { send(held[0], $0, strlen($0), 0) }
        let answer = String(decoding: await readToEnd(held[0]), as: UTF8.self)
        #expect(answer.hasPrefix("HTTP/1.1 200 "), "\(answer.prefix(80))")
        close(held[0])
        // Its slot is given back once the server has seen it close, which no clock of ours drives: try for 5 s.
        var served = false
        for _ in 0..<50 where !served {
            let (_, head) = try await httpGet(port: relay.port, path: "/relay.js", timeoutSeconds: 10)
            served = head.hasPrefix("HTTP/1.1 200 ")
            if !served { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(served, "a slot given back did not let the next connection in")
        held.dropFirst().forEach { close($0) }
        await relay.stop()
    }

    /// By default loopback peers are not counted: 40 connections from 127.0.0.1 are all kept.
    @Test func loopbackIsNotCountedByDefault() async throws {
        let relay = try await LiveRelay()
        let fds = try (0..<40).map { _ in try connectLoopback(port: relay.port) }
        defer { fds.forEach { close($0) } }
        let (_, head) = try await httpGet(port: relay.port, path: "/relay.js", timeoutSeconds: 10)
        #expect(head.hasPrefix("HTTP/1.1 200 "))
        // None of the 40 was closed: each still has nothing to read and no end (checked without waiting).
        for fd in fds {
            var byte: UInt8 = 0
            let n = recv(fd, &byte, 1, Int32(MSG_DONTWAIT))
            #expect(n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK), "connection \(fd) ended: \(n)")
        }
        await relay.stop()
    }
}

/// Those of `fds` the peer has ended (end of stream or reset, nothing sent before), once the first has, or after
/// `seconds`.
private func firstEnded(of fds: [Int32], seconds: Int) -> [Int32] {
    var polled = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
    guard poll(&polled, nfds_t(polled.count), Int32(seconds * 1000)) > 0 else { return [] }
    return polled.filter { $0.revents != 0 }.map(\.fd).filter { fd in
        var byte: UInt8 = 0
        let n = recv(fd, &byte, 1, Int32(MSG_DONTWAIT))
        return n == 0 || (n < 0 && errno == ECONNRESET)
    }
}
