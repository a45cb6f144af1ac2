import Foundation
import GatewayEngine
import GatewaySink
import MQTTSink
import SimulatedProvider
import Synchronization
import WebhookTestSupport

/// `hr-gateway-bench mqtt-fleet [--gateways N] [--straps N] [--seconds S] [--session-sec S]`: many simulated
/// gateways, each with its own engine, simulated straps and MQTT connection (its own gateway ID), publishing into
/// one local mosquitto (Debian's, started here on a free port with persistence), while an independent subscriber
/// (`mosquitto_sub`, persistent session, QoS 1) stamps each event as it arrives. Half-way the broker is restarted
/// (SIGTERM, then started again on the same port and state, as `systemctl restart mosquitto` does).
///
/// Prints: end-to-end latency from the engine's delivery of an event to the subscriber's receipt (p50/p99/max,
/// both stamped with CLOCK_REALTIME on this machine), the gateways' and the broker's CPU, and how many reliable
/// (QoS 1) events were sent and received: the target is none lost.
func runMQTTFleetBenchmark(arguments: [String]) async {
    func option(_ name: String, _ fallback: Int) -> Int {
        guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count, let v = Int(arguments[i + 1]), v > 0
        else { return fallback }
        return v
    }
    let gateways = option("--gateways", 50)
    let straps = option("--straps", 4)
    let seconds = option("--seconds", 60)
    let sessionSec = option("--session-sec", 10)

    guard let mosquitto = ["/usr/sbin/mosquitto", "/usr/bin/mosquitto"].first(where: FileManager.default.isExecutableFile),
        FileManager.default.isExecutableFile(atPath: "/usr/bin/mosquitto_sub")
    else {
        print("mqtt-fleet: needs Debian's mosquitto and mosquitto-clients (apt-get install mosquitto mosquitto-clients)")
        return
    }
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("mqtt-fleet-\(getpid())").path
    try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    _ = chmod(dir, 0o777)  // started as root, mosquitto writes its state as the mosquitto user
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let port = closedPort()
    let config = "\(dir)/mosquitto.conf"
    try? "listener \(port) 127.0.0.1\nallow_anonymous true\npersistence true\npersistence_location \(dir)/\nmax_queued_messages 100000\n"
        .write(toFile: config, atomically: true, encoding: .utf8)

    var brokerCPU = 0.0
    func startBroker() -> Process? {
        unblockTerminationSignals()
        let p = Process()
        p.executableURL = URL(fileURLWithPath: mosquitto)
        p.arguments = ["-c", config]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        do { try p.run() } catch { return nil }
        for _ in 0..<200 {
            if canConnect(port: port) { return p }
            usleep(20_000)
        }
        return p
    }
    func stopBroker(_ p: Process) {
        brokerCPU += processCPUSeconds(p.processIdentifier)
        kill(p.processIdentifier, SIGTERM)
        p.waitUntilExit()
    }
    guard var broker = startBroker() else {
        print("mqtt-fleet: mosquitto did not start")
        return
    }

    // The independent subscriber: a persistent session, so that what arrives while it reconnects is kept for it.
    let subscriber = Process()
    subscriber.executableURL = URL(fileURLWithPath: "/usr/bin/mosquitto_sub")
    subscriber.arguments = ["-p", "\(port)", "-c", "-i", "fleet-bench-sub", "-q", "1", "-t", "hr-gateway/+/event",
                            "-F", "%U %t %p"]
    let out = Pipe()
    subscriber.standardOutput = out
    subscriber.standardError = FileHandle.nullDevice
    let arrivals = Mutex<[String]>([])
    unblockTerminationSignals()
    do { try subscriber.run() } catch {
        print("mqtt-fleet: cannot start mosquitto_sub: \(error)")
        return
    }
    Thread {
        let handle = out.fileHandleForReading
        var buffer = Data()
        while true {
            let chunk = handle.availableData
            if chunk.isEmpty { break }
            buffer.append(chunk)
            var lines: [String] = []
            while let nl = buffer.firstIndex(of: 10) {
                lines.append(String(decoding: buffer[buffer.startIndex..<nl], as: UTF8.self))
                buffer.removeSubrange(buffer.startIndex...nl)
            }
            arrivals.withLock { $0.append(contentsOf: lines) }
        }
    }.start()
    usleep(500_000)

    // The gateways: engine + simulated straps + MQTTSink each, and a sink that stamps each event as delivered.
    let stamps = Stamps()
    let stateRoot = "\(dir)/state"
    var fleet: [(engine: SessionEngine, outputs: SessionOutputs, mqtt: MQTTSink, run: Task<Void, Never>)] = []
    let cpu0 = cpuSeconds()
    for g in 0..<gateways {
        let id = "bench-\(g)"
        let outputs = SessionOutputs()
        let providers: [any BiosignalProvider] = (0..<straps).map { s in
            SimulatedBiosignalProvider(seed: UInt64(g * 100 + s + 1), deviceId: "\(id)-strap\(s)")
        }
        let engine = SessionEngine(providers: providers.map(outputs.tap))
        let mqtt: MQTTSink
        do {
            mqtt = try MQTTSink(
                broker: MQTTBrokerURL(host: "127.0.0.1", port: port), topics: try MQTTTopics(gatewayId: id),
                sources: ["simulated"], graceMs: 30_000, stateDirectory: "\(stateRoot)/\(id)")
        } catch {
            print("mqtt-fleet: \(error)")
            return
        }
        outputs.attach(StampSink(gatewayId: id, stamps: stamps))
        outputs.attach(mqtt)
        outputs.observe(engine)
        fleet.append((engine, outputs, mqtt, Task { try? await mqtt.run() }))
    }
    let profile = ComputeProfile(windowSec: 60, emitIntervalSec: 1, rawEmitIntervalSec: 1)
    let start = Date()
    let restartAtNs = Mutex<Int64>(.max)
    var restarted = false
    var cycle = 0
    print("mqtt-fleet: \(gateways) gateways x \(straps) simulated straps, \(seconds) s, sessions of \(sessionSec) s, "
        + "broker on 127.0.0.1:\(port)")
    while Date().timeIntervalSince(start) < Double(seconds) {
        // Every gateway runs a session of sessionSec seconds; a restart half-way lands inside one.
        await withTaskGroup(of: Void.self) { group in
            for (g, gw) in fleet.enumerated() {
                let engine = gw.engine
                let config = SessionConfig(
                    sessionId: "bench-\(g)-\(cycle)", mode: .focus, durationSec: sessionSec, profile: profile,
                    includeRawSamples: true)
                group.addTask {
                    guard let stream = try? await engine.startSession(config) else { return }
                    for await _ in stream {}
                }
            }
            if !restarted, Date().timeIntervalSince(start) + Double(sessionSec) > Double(seconds) / 2 {
                restarted = true
                try? await Task.sleep(for: .seconds(Double(sessionSec) / 2))
                restartAtNs.withLock { $0 = realtimeNs() }
                print("mqtt-fleet: restarting the broker (SIGTERM, then start) at \(Int(Date().timeIntervalSince(start))) s")
                stopBroker(broker)
                usleep(1_000_000)
                if let b = startBroker() { broker = b }
            }
        }
        cycle += 1
    }
    // Each sink says offline and waits for the broker's acknowledgements.
    for gw in fleet { gw.mqtt.close() }
    for gw in fleet { await gw.run.value }
    let gatewayCPU = cpuSeconds() - cpu0
    let elapsed = Date().timeIntervalSince(start)
    let left = fleet.reduce(0) { $0 + ($1.mqtt.outboxDepth ?? 0) }
    usleep(2_000_000)  // the subscriber's last deliveries
    stopBroker(broker)
    kill(subscriber.processIdentifier, SIGTERM)
    subscriber.waitUntilExit()

    // Match arrivals to what was sent.
    let sentAt = stamps.sent.withLock { $0 }
    var latencies: [Double] = []
    var steady: [Double] = []
    let restartNs = restartAtNs.withLock { $0 }
    var reliableReceived = Set<String>()
    var unknown = 0
    for line in arrivals.withLock({ $0 }) {
        let parts = line.split(separator: " ", maxSplits: 2)
        guard parts.count == 3, let at = Double(parts[0]),
            let event = try? JSONValue(parsing: String(parts[2]))
        else { unknown += 1; continue }
        let gateway = parts[1].split(separator: "/")[1]
        let key = StampSink.key(gatewayId: String(gateway), event: event)
        if let type = event["type"]?.stringValue, ["session_started", "session_summary", "session_error"].contains(type) {
            reliableReceived.insert(key)
        }
        if let t0 = sentAt[key] {
            let ms = (at * 1000) - Double(t0) / 1_000_000
            latencies.append(ms)
            if t0 < restartNs { steady.append(ms) }
        }
    }
    latencies.sort()
    steady.sort()
    func pct(_ p: Double, _ v: [Double]) -> String {
        v.isEmpty ? "-" : String(format: "%.2f", v[min(v.count - 1, Int(Double(v.count) * p))])
    }
    let reliable = stamps.reliable.withLock { $0 }
    print(String(format: "events delivered to the subscriber: %d of %d sent (%.0f/s)", latencies.count, sentAt.count,
                 Double(latencies.count) / elapsed))
    print("latency event -> subscriber (ms), before the restart: p50 \(pct(0.5, steady))  p99 \(pct(0.99, steady))  "
        + "max \(steady.last.map { String(format: "%.2f", $0) } ?? "-")  (\(steady.count) events)")
    print("latency event -> subscriber (ms), whole run: p50 \(pct(0.5, latencies))  p99 \(pct(0.99, latencies))  "
        + "max \(latencies.last.map { String(format: "%.2f", $0) } ?? "-")  (with what waited out the restart)")
    print(String(format: "CPU: gateways %.2f s in %.0f s (%.1f %% of one core, %.3f %% per gateway); broker %.2f s (%.1f %%)",
                 gatewayCPU, elapsed, 100 * gatewayCPU / elapsed, 100 * gatewayCPU / elapsed / Double(gateways),
                 brokerCPU, 100 * brokerCPU / elapsed))
    print("reliable events (session_started/summary, QoS 1): sent \(reliable), received \(reliableReceived.count), "
        + "lost \(reliable - reliableReceived.count); left in outboxes \(left)")
    if unknown > 0 { print("unparsed lines from the subscriber: \(unknown)") }
}

/// When each event was delivered, by key, and how many reliable ones there were.
private final class Stamps: Sendable {
    let sent = Mutex<[String: Int64]>([:])
    let reliable = Mutex(0)
}

/// Stamps each event with CLOCK_REALTIME as the engine delivers it, under a key the subscriber can rebuild.
private final class StampSink: SessionSink {
    let name = "stamp"
    let gatewayId: String
    let stamps: Stamps

    init(gatewayId: String, stamps: Stamps) {
        self.gatewayId = gatewayId
        self.stamps = stamps
    }

    static func key(gatewayId: String, event: JSONValue) -> String {
        [gatewayId, event["type"]?.stringValue ?? "", event["session_id"]?.stringValue ?? "",
         event["seq"]?.intValue.map(String.init) ?? "", event["device_id"]?.stringValue ?? "",
         event["state"]?.stringValue ?? ""].joined(separator: "|")
    }

    func receive(event: EncodedEvent) {
        let ns = realtimeNs()
        let key = Self.key(gatewayId: gatewayId, event: event.value)
        stamps.sent.withLock { $0[key] = ns }
        if MQTTSink.qos(event.event) > 0 { stamps.reliable.withLock { $0 += 1 } }
    }

    func run() async throws { await untilGracefulShutdown() }
}

/// A child inherits the spawning thread's signal mask, and the runtime's threads may block SIGTERM: unblock it so
/// that the broker and the subscriber stop when told to.
private func unblockTerminationSignals() {
    var set = sigset_t()
    sigemptyset(&set)
    sigaddset(&set, SIGTERM)
    sigaddset(&set, SIGINT)
    pthread_sigmask(SIG_UNBLOCK, &set, nil)
}

private func canConnect(port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    addr.sin_port = UInt16(port).bigEndian
    return withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    } == 0
}

/// utime + stime of a child, from /proc/PID/stat (clock ticks).
private func processCPUSeconds(_ pid: Int32) -> Double {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
    else { return 0 }
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 13, let u = Double(fields[11]), let s = Double(fields[12]) else { return 0 }
    return (u + s) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

