import BLEHeartRate
import DBusTestSupport
import Foundation
import GatewayEngine
import Logging

/// Two straps on the fake bluetoothd (Tests/Fixtures/fake_bluez.py on a private dbus-daemon), streaming into a
/// SessionEngine through the real BLE provider:
/// - latency from the moment the fake is asked to notify (a D-Bus call to its control object, then its
///   PropertiesChanged signal on the bus) to the sample reaching the engine, p50 and p99;
/// - CPU and RSS of this process while both straps notify at 1 Hz.
func runStrapBenchmark() async {
    do {
        try await strapBenchmark()
    } catch {
        print("strap benchmark failed: \(error) (needs dbus-daemon and /usr/bin/python3 with python3-dbus, python3-gi)")
    }
}

private func strapBenchmark() async throws {
    let fake = try await FakeBlueZ()
    defer { fake.stop() }
    let addresses = ["A0:9E:1A:00:00:B1", "A0:9E:1A:00:00:B2"]
    let rr: [UInt16] = (0..<2_000).map { 880 + UInt16(60 * (1 + sin(Double($0) / 3)) / 2) }
    for (i, a) in addresses.enumerated() { try await fake.addStrap(a, name: "Polar H10 B\(i)", rr: rr) }

    let (arrivals, arrived) = AsyncStream.makeStream(of: (String, UInt64).self)
    var logger = Logger(label: "bench.strap")
    logger.logLevel = .warning
    let providers: [any BiosignalProvider] = addresses.map { a in
        TappedProvider(BLEHeartRateProvider(spec: .address(a), bus: fake.bus, logger: logger), onSample: { s in
            arrived.yield((s.deviceId ?? "", DispatchTime.now().uptimeNanoseconds))
        })
    }
    let engine = SessionEngine(providers: providers)
    _ = try await engine.startSession(SessionConfig(sessionId: "bench", mode: .focus, durationSec: 3_600))
    var it = arrivals.makeAsyncIterator()

    // Latency, one notification at a time on the first strap. The first packets warm up.
    var latencies: [Double] = []
    for i in 0..<220 {
        let start = DispatchTime.now().uptimeNanoseconds
        try await fake.sendPackets(addresses[0], 1)
        var end: UInt64 = 0
        while let (device, t) = await it.next() { if device == addresses[0] { end = t; break } }
        if i >= 20 { latencies.append(Double(end - start) / 1000) }
    }
    latencies.sort()
    func pct(_ p: Double) -> Double { latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] }
    print(String(format: "strap latency, fake notify request -> engine sink: p50 %.0f µs, p99 %.0f µs, max %.0f µs (%d packets)",
                 pct(0.5), pct(0.99), latencies.last ?? 0, latencies.count))

    // Two straps at 1 Hz for 15 s: CPU and memory of the gateway side.
    let seconds = 15
    let cpuStart = cpuSeconds()
    let wallStart = DispatchTime.now().uptimeNanoseconds
    for _ in 0..<seconds {
        let tick = DispatchTime.now().uptimeNanoseconds
        for a in addresses { try await fake.sendPackets(a, 1) }
        var got = 0
        while got < 2, await it.next() != nil { got += 1 }
        let remaining = Int64(1_000_000_000) - Int64(DispatchTime.now().uptimeNanoseconds - tick)
        if remaining > 0 { try await Task.sleep(for: .nanoseconds(remaining)) }
    }
    let wall = Double(DispatchTime.now().uptimeNanoseconds - wallStart) / 1e9
    let cpu = cpuSeconds() - cpuStart
    print(String(format: "two straps at 1 Hz for %.1f s: CPU %.2f %% of one core, RSS %@",
                 wall, 100 * cpu / wall, residentSetSize()))
    try await engine.stopSession(sessionId: "bench")
}

private func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
        + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

private func residentSetSize() -> String {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
    else { return "unknown" }
    return line.dropFirst("VmRSS:".count).trimmingCharacters(in: .whitespaces)
}
