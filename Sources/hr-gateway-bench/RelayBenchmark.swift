import Foundation
import GatewayEngine
import RelayCore
import RelayWebServer
import RelayWSClient

/// Delivery latency of the relay to many consumers over loopback WebSockets (publish → consumer parsed the frame),
/// and the gateway's CPU while it serves them. 100 consumers on 127.0.0.1 (no-auth mode), 200 `biosignal_frame`
/// events at 50/s, each with one sample. The consumers run in a child process (`relay-consumers`), so that the CPU
/// figure is the gateway's alone; both processes stamp with CLOCK_MONOTONIC.
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
    defer { serverTask.cancel() }
    let url = "ws://127.0.0.1:\(port)/v1/relay"

    let child = Process()
    child.executableURL = URL(fileURLWithPath: "/proc/self/exe")
    child.arguments = ["relay-consumers", url, String(consumers), String(events)]
    let out = Pipe()
    child.standardOutput = out
    do { try child.run() } catch {
        print("relay: cannot start the consumer process: \(error)")
        return
    }
    let lines = AsyncStream<String> { continuation in
        Thread {
            let handle = out.fileHandleForReading
            var buffer = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                buffer.append(chunk)
                while let nl = buffer.firstIndex(of: 10) {
                    continuation.yield(String(decoding: buffer[buffer.startIndex..<nl], as: UTF8.self))
                    buffer.removeSubrange(buffer.startIndex...nl)
                }
            }
            continuation.finish()
        }.start()
    }
    var lineIterator = lines.makeAsyncIterator()
    guard await lineIterator.next() == "ready" else {
        print("relay: the consumers did not connect")
        return
    }

    let sample = BiosignalSample(timestampMs: 0, bpm: 62, rrIntervalsMs: [968], deviceId: "bench", source: "bench")
    var sentAt: [Int64: UInt64] = [:]
    let cpu0 = cpuSeconds()
    let start = monotonicNs()
    for i in 0..<events {
        let seq = hub.lastSeq + 1
        sentAt[seq] = monotonicNs()
        hub.publish(.biosignalFrame(sessionId: "bench", seq: i + 1, emittedAtMs: Int64(i), samples: [sample]))
        try? await Task.sleep(for: .milliseconds(intervalMs))
    }
    var latenciesNs: [UInt64] = []
    while let line = await lineIterator.next() {
        let parts = line.split(separator: " ")
        guard parts.count == 2, let seq = Int64(parts[0]), let at = UInt64(parts[1]), let t0 = sentAt[seq] else { continue }
        latenciesNs.append(at > t0 ? at - t0 : 0)
    }
    let elapsed = Double(monotonicNs() - start) / 1e9
    let cpu = cpuSeconds() - cpu0
    child.waitUntilExit()

    let sorted = latenciesNs.sorted()
    guard !sorted.isEmpty else {
        print("relay: no frame delivered")
        return
    }
    func percentile(_ p: Double) -> Double { Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]) / 1e6 }
    let expected = consumers * events
    print("relay: \(consumers) consumers (another process) x \(events) frames at \(1000 / intervalMs)/s over loopback WebSocket, \(String(format: "%.1f", elapsed)) s")
    print("  delivered \(sorted.count)/\(expected) (\(expected - sorted.count) dropped as live frames to slow consumers)")
    print(String(format: "  latency publish -> parsed by consumer: p50 %.2f ms, p99 %.2f ms, max %.2f ms",
                 percentile(0.50), percentile(0.99), Double(sorted.last!) / 1e6))
    print(String(format: "  gateway CPU: %.2f s in %.1f s = %.1f %% of one core (%.0f µs per frame delivered)",
                 cpu, elapsed, 100 * cpu / elapsed, cpu * 1e6 / Double(sorted.count)))
}

/// The consumer side of the relay benchmark (its own process): connects `count` consumers to `url`, prints `ready`
/// once all are welcomed, and after `events` frames each, one `RELAY_SEQ MONOTONIC_NS` line per frame received.
func runRelayConsumers(arguments: [String]) async {
    guard arguments.count == 3, let consumers = Int(arguments[1]), let events = Int64(arguments[2]) else {
        print("usage: hr-gateway-bench relay-consumers URL COUNT EVENTS")
        return
    }
    let url = arguments[0]
    let arrivals = Locked<[(Int64, UInt64)]>([])
    let (ready, readyIn) = AsyncStream<Void>.makeStream()
    let clients = (0..<consumers).map { _ in
        Task {
            try await RelayClient(url: url, token: nil).run { m in
                if m["type"] == .string("welcome") { readyIn.yield() }
                guard let seq = m["relay_seq"]?.intValue else { return .continue }
                let now = monotonicNs()
                arrivals.withLock { $0.append((seq, now)) }
                // The newest frame is never the one dropped, so the last one always arrives.
                return seq >= events ? .close : .continue
            }
        }
    }
    var readyIterator = ready.makeAsyncIterator()
    for _ in 0..<consumers { await readyIterator.next() }
    FileHandle.standardOutput.write(Data("ready\n".utf8))
    for c in clients { _ = try? await c.value }
    var text = ""
    for (seq, at) in arrivals.withLock({ $0 }) { text += "\(seq) \(at)\n" }
    FileHandle.standardOutput.write(Data(text.utf8))
}


