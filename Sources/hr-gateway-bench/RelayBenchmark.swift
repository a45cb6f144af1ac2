import Foundation
import GatewayEngine
import RelaySink

/// Delivery latency of the relay to many consumers over loopback WebSockets: publish → consumer parsed the frame.
/// 100 consumers on 127.0.0.1 (no-auth mode), 200 `biosignal_frame` events at 50/s, each with one sample.
func runRelayBenchmark() async {
    let consumers = 100
    let events = 200
    let intervalMs = 20
    let hub = RelayHub(controller: nil)
    var config = RelayServerConfiguration(host: "127.0.0.1", port: 0)
    config.allowAnonymous = true
    config.heartbeat = .seconds(3600)
    let server = RelayServer(hub: hub, tokens: nil, configuration: config)
    let (ports, portsIn) = AsyncStream<Int>.makeStream()
    let serverTask = Task { try await server.run { portsIn.yield($0) } }
    var portIterator = ports.makeAsyncIterator()
    guard let port = await portIterator.next() else {
        print("relay: the server did not start")
        return
    }
    let url = "ws://127.0.0.1:\(port)/v1/relay"

    let sentAt = Locked<[Int64: UInt64]>([:])
    let latenciesNs = Locked<[UInt64]>([])
    let (ready, readyIn) = AsyncStream<Void>.makeStream()
    let clients = (0..<consumers).map { _ in
        Task {
            try await RelayClient(url: url, token: nil).run { m in
                if m["type"] == .string("welcome") { readyIn.yield() }
                guard let seq = m["relay_seq"]?.intValue else { return .continue }
                let now = DispatchTime.now().uptimeNanoseconds
                if let t0 = sentAt.withLock({ $0[seq] }) { latenciesNs.withLock { $0.append(now - t0) } }
                // The newest frame is never the one dropped, so the last one always arrives.
                return seq >= Int64(events) ? .close : .continue
            }
        }
    }
    var readyIterator = ready.makeAsyncIterator()
    for _ in 0..<consumers { await readyIterator.next() }

    let sample = BiosignalSample(timestampMs: 0, bpm: 62, rrIntervalsMs: [968], deviceId: "bench", source: "bench")
    let start = DispatchTime.now().uptimeNanoseconds
    for i in 0..<events {
        let seq = hub.lastSeq + 1
        sentAt.withLock { $0[seq] = DispatchTime.now().uptimeNanoseconds }
        hub.publish(.biosignalFrame(sessionId: "bench", seq: i + 1, emittedAtMs: Int64(i), samples: [sample]))
        try? await Task.sleep(for: .milliseconds(intervalMs))
    }
    for c in clients { _ = try? await c.value }
    let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    serverTask.cancel()
    _ = try? await serverTask.value

    let sorted = latenciesNs.withLock { $0 }.sorted()
    guard !sorted.isEmpty else {
        print("relay: no frame delivered")
        return
    }
    func percentile(_ p: Double) -> Double { Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]) / 1e6 }
    let expected = consumers * events
    print("relay: \(consumers) consumers x \(events) frames at \(1000 / intervalMs)/s over loopback WebSocket, \(String(format: "%.1f", elapsed)) s")
    print("  delivered \(sorted.count)/\(expected) (\(expected - sorted.count) dropped as live frames to slow consumers)")
    print(String(format: "  latency publish -> parsed by consumer: p50 %.2f ms, p99 %.2f ms, max %.2f ms",
                 percentile(0.50), percentile(0.99), Double(sorted.last!) / 1e6))
}
