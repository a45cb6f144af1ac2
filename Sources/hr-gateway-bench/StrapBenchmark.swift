import BLEHeartRate
import DBus
import DBusTestSupport
import Foundation
import GatewayEngine
import Logging

/// `hr-gateway-bench strap [--peer bleak] [--rounds R] [--binary PATH] [--count N] [--interval-ms MS]`: straps on the
/// fake bluetoothd (Tests/Fixtures/fake_bluez.py on a private dbus-daemon), in one run:
/// - hr-gateway's notification-to-engine latency: from the fake's CLOCK_MONOTONIC just before it emits the
///   `PropertiesChanged(Value)` signal to CLOCK_MONOTONIC when the real BLE provider hands the sample to the
///   `SessionEngine` (p50/p99/max), and this process's CPU time per notification;
/// - with `--peer bleak`: the same for bleak (Python) through `scripts/strap-bleak-peer`, notification to bleak's
///   callback, with its RSS and CPU per notification;
/// - with `--rounds R`: the two consumers take turns R times (hr-gateway, then bleak, then hr-gateway…), so a change in
///   the machine's state (this VM's speed moves by a factor of two over minutes) weighs on both alike; each round is
///   printed, then the figures over all rounds' notifications together;
/// - the real `hr-gateway stream --strap` process (`--binary`, default: next to this executable) streaming one
///   strap against the same fake: its RSS and CPU per notification (the binary's pages dropped from the page cache
///   first, as after a reboot).
func runStrapBenchmark(arguments: [String]) async {
    do {
        try await strapBenchmark(StrapBenchOptions(arguments))
    } catch {
        print("strap benchmark failed: \(error) (needs dbus-daemon and /usr/bin/python3 with python3-dbus, python3-gi)")
    }
}

struct StrapBenchOptions {
    var peer: String?
    var binary: String?
    var count = 400
    var intervalMs = 25
    /// Start the binary with its file wholly in the page cache (as just after a build, a copy or an install) instead
    /// of outside it (as after a reboot).
    var warmCache = false
    /// Turns of hr-gateway then bleak (with `--peer bleak`), each `count` notifications.
    var rounds = 1

    init(_ arguments: [String]) {
        var it = arguments.makeIterator()
        while let a = it.next() {
            switch a {
            case "--peer": peer = it.next()
            case "--binary": binary = it.next()
            case "--count": count = it.next().flatMap(Int.init) ?? count
            case "--interval-ms": intervalMs = it.next().flatMap(Int.init) ?? intervalMs
            case "--warm-cache": warmCache = true
            case "--rounds": rounds = max(1, it.next().flatMap(Int.init) ?? rounds)
            default: print("strap: ignoring argument \(a)")
            }
        }
    }
}

private let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

private struct Figures {
    var p50: Double, p99: Double, max: Double, n: Int

    init(_ microseconds: [Double]) {
        let s = microseconds.sorted()
        n = s.count
        p50 = s.isEmpty ? .nan : s[s.count / 2]
        p99 = s.isEmpty ? .nan : s[min(s.count - 1, s.count * 99 / 100)]
        max = s.last ?? .nan
    }

    var text: String { String(format: "p50 %.0f µs, p99 %.0f µs, max %.0f µs (n=%d)", p50, p99, max, n) }
}

private func strapBenchmark(_ options: StrapBenchOptions) async throws {
    let fake = try await FakeBlueZ()
    defer { fake.stop() }
    let ours = "A0:9E:1A:00:00:B1", theirs = "A0:9E:1A:00:00:B2", binaryStrap = "A0:9E:1A:00:00:B3"
    let rr: [UInt16] = (0..<4_000).map { 880 + UInt16(60 * (1 + sin(Double($0) / 3)) / 2) }
    try await fake.addStrap(ours, name: "Polar H10 B1", rr: rr)
    try await fake.addStrap(theirs, name: "Polar H10 B2", rr: rr)
    try await fake.addStrap(binaryStrap, name: "Polar H10 B3", rr: rr)
    let warmup = 20
    print("strap: \(options.count) notifications every \(options.intervalMs) ms per consumer after \(warmup) warm-up; "
        + "latency from the fake emitting PropertiesChanged to the consumer, CLOCK_MONOTONIC on both sides")

    // hr-gateway in process: the BLE provider into a SessionEngine.
    let (arrivals, arrived) = AsyncStream.makeStream(of: UInt64.self)
    var logger = Logger(label: "bench.strap")
    logger.logLevel = .warning
    let provider = BLEHeartRateProvider(spec: .address(ours), bus: fake.bus, logger: logger)
    let engine = SessionEngine(providers: [
        TappedProvider(provider, onSample: { _ in arrived.yield(BLEHeartRateProvider.systemMonotonicNs()) })
    ])
    _ = try await engine.startSession(SessionConfig(sessionId: "bench", mode: .focus, durationSec: 3_600))
    var it = arrivals.makeAsyncIterator()
    try await waitForNotifySession(fake, ours)
    try await stream(fake, ours, warmup, options.intervalMs)
    for _ in 0..<warmup { _ = await it.next() }
    _ = try await sentTimes(fake)
    var cpu0 = cpuSeconds()
    try await stream(fake, ours, options.count, options.intervalMs)
    var ourLatencies: [Double] = [], theirLatencies: [Double] = []
    var oursNoWorse = 0, bleakRounds = 0
    for round in 1...options.rounds {
        if round > 1 {
            cpu0 = cpuSeconds()
            _ = try await sentTimes(fake)
            try await stream(fake, ours, options.count, options.intervalMs)
        }
        var received: [UInt64] = []
        for _ in 0..<options.count { if let t = await it.next() { received.append(t) } }
        let cpu = cpuSeconds() - cpu0
        let sent = try await sentTimes(fake)
        guard sent.count == received.count else {
            throw BenchError("sent \(sent.count) notifications, the engine got \(received.count)")
        }
        let latencies = zip(sent, received).map { Double(Int64($1) - Int64($0)) / 1000 }
        ourLatencies += latencies
        let gateway = Figures(latencies)
        let flow = provider.flow
        let label = options.rounds > 1 ? "round \(round), " : ""
        print("  \(label)hr-gateway, notification -> engine (in process): \(gateway.text); "
            + String(format: "CPU %.0f µs per notification (whole process)", cpu * 1e6 / Double(options.count))
            + "; queue high water \(flow.queueHighWater), dropped \(flow.droppedEvents)")

        if options.peer == "bleak" {
            let bleak = runBleak(fake, theirs, options)
            print("  \(label)" + bleak.text)
            if let theirs = bleak.latencies {
                theirLatencies += theirs
                bleakRounds += 1
                if gateway.p99 <= Figures(theirs).p99 { oursNoWorse += 1 }
            }
        } else if let peer = options.peer {
            print("  unknown peer \(peer) (known: bleak)")
        }
    }
    try await engine.stopSession(sessionId: "bench")
    if options.rounds > 1 {
        print("  all \(options.rounds) rounds: hr-gateway \(Figures(ourLatencies).text)")
        if bleakRounds > 0 {
            print("  all \(options.rounds) rounds: bleak \(Figures(theirLatencies).text); hr-gateway's p99 no worse "
                + "than bleak's in \(oursNoWorse) of \(bleakRounds) rounds")
        }
    }

    print("  " + (try await measureBinary(fake, binaryStrap, options)))
}

private struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

private func stream(_ fake: FakeBlueZ, _ address: String, _ count: Int, _ intervalMs: Int) async throws {
    try await fake.ctl("StreamPackets", [.string(address), .uint32(UInt32(count)), .uint32(UInt32(intervalMs))])
}

private func sentTimes(_ fake: FakeBlueZ) async throws -> [UInt64] {
    (try await fake.ctl("SentTimes").first?.arrayElements ?? []).compactMap(\.uint64)
}

/// Polls the fake until the strap has a notify session (a benchmark, not a test: polling is fine here).
private func waitForNotifySession(_ fake: FakeBlueZ, _ address: String) async throws {
    for _ in 0..<600 {
        let sessions = try await fake.ctl("NotifySessions", [.string(address)]).first
        if (sessions?.uint32 ?? UInt32(sessions?.arrayElements?.count ?? 0)) > 0 { return }
        try await Task.sleep(for: .milliseconds(50))
    }
    throw BenchError("\(address) never got a notify session")
}

/// bleak's line for the report, and its latencies (µs) when it ran.
private func runBleak(_ fake: FakeBlueZ, _ address: String, _ options: StrapBenchOptions)
    -> (text: String, latencies: [Double]?)
{
    let p = Process()
    p.executableURL = repository.appendingPathComponent("scripts/strap-bleak-peer")
    p.arguments = ["--address", fake.daemon.address, "--strap", address, "--count", "\(options.count)",
                   "--interval-ms", "\(options.intervalMs)"]
    let out = Pipe()
    p.standardOutput = out
    do { try p.run() } catch { return ("bleak: cannot run \(p.executableURL!.path): \(error)", nil) }
    let data = out.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    let line = String(decoding: data, as: UTF8.self).split(separator: "\n").last.map(String.init) ?? ""
    guard let json = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
        return ("bleak: no result (\(line))", nil)
    }
    if let error = json["error"] as? String { return ("bleak: failed: \(error)", nil) }
    func d(_ k: String) -> Double { (json[k] as? NSNumber)?.doubleValue ?? .nan }
    let text = String(
        format: "bleak, notification -> callback: p50 %.0f µs, p99 %.0f µs, max %.0f µs (n=%d); CPU %.0f µs per "
            + "notification, RSS %.1f MB",
        d("p50_us"), d("p99_us"), d("max_us"), (json["n"] as? Int) ?? 0, d("cpu_us_per_notification"),
        d("rss_kb") / 1024)
    return (text, (json["latencies_us"] as? [NSNumber])?.map(\.doubleValue))
}

private func measureBinary(_ fake: FakeBlueZ, _ address: String, _ options: StrapBenchOptions) async throws -> String {
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    let binary = options.binary ?? URL(fileURLWithPath: exe).deletingLastPathComponent().appendingPathComponent("hr-gateway").path
    guard FileManager.default.isExecutableFile(atPath: binary) else {
        return "hr-gateway stream --strap: \(binary) not found (build it, or pass --binary)"
    }
    let state = FileManager.default.temporaryDirectory.appendingPathComponent("strap-bench-\(getpid())")
    try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: state) }
    // By default, as after a reboot, the binary's pages start outside the page cache. With --warm-cache the file is
    // read whole first, as just after a build, a copy or an install: the kernel then maps the cached pages around each
    // page used (fault-around, 64 KB; whole large folios on recent kernels), which reads higher.
    let fd = open(binary, O_RDONLY)
    if fd >= 0 {
        if options.warmCache {
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            while buffer.withUnsafeMutableBytes({ read(fd, $0.baseAddress, $0.count) }) > 0 {}
        } else {
            _ = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)
        }
        close(fd)
    }
    let p = Process()
    p.executableURL = URL(fileURLWithPath: binary)
    p.arguments = ["stream", "--strap", address, "--format", "jsonl", "--session-id", "strap-bench"]
    var env = ProcessInfo.processInfo.environment
    env["DBUS_SYSTEM_BUS_ADDRESS"] = fake.daemon.address
    env["HR_GATEWAY_STATE_DIR"] = state.path
    p.environment = env
    p.standardOutput = FileHandle.nullDevice
    p.standardError = FileHandle.nullDevice
    try p.run()
    defer {
        if p.isRunning { kill(p.processIdentifier, SIGKILL) }
        p.waitUntilExit()
    }
    try await waitForNotifySession(fake, address)
    try await stream(fake, address, 20, options.intervalMs)
    try await Task.sleep(for: .milliseconds(20 * options.intervalMs + 500))
    let cpu0 = processCPUSeconds(p.processIdentifier)
    let rssStart = processMemory(p.processIdentifier, "VmRSS:")
    try await stream(fake, address, options.count, options.intervalMs)
    try await Task.sleep(for: .milliseconds(options.count * options.intervalMs + 1_000))
    let cpu = processCPUSeconds(p.processIdentifier) - cpu0
    let rss = processMemory(p.processIdentifier, "VmRSS:")
    let peak = processMemory(p.processIdentifier, "VmHWM:")
    // A graceful stop, as a user's Ctrl-C: the summary is written and the process exits (given 10 s; a profiler
    // wrapping the binary writes its data at exit too). The deferred SIGKILL only ends a process that hangs.
    kill(p.processIdentifier, SIGINT)
    let stopDeadline = ContinuousClock.now + .seconds(10)
    while p.isRunning && ContinuousClock.now < stopDeadline { try await Task.sleep(for: .milliseconds(20)) }
    let stopped = p.isRunning ? "did not stop within 10 s of SIGINT" : "exit status \(p.terminationStatus) after SIGINT"
    return "hr-gateway stream --strap (\(binary), recording on, \(options.warmCache ? "warm" : "cold") page cache): "
        + String(
            format: "RSS %.1f MB streaming (%.1f MB before the measured packets, peak %.1f MB); CPU %.0f µs per notification",
            rss / 1024, rssStart / 1024, peak / 1024, cpu * 1e6 / Double(options.count)) + "; \(stopped)"
}

/// utime + stime of a process, in seconds.
private func processCPUSeconds(_ pid: Int32) -> Double {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
    else { return .nan }
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    // After the command: state is field 3 of the file, utime 14 and stime 15.
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return .nan }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// A `/proc/PID/status` memory line in kB.
private func processMemory(_ pid: Int32, _ key: String) -> Double {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix(key) })
    else { return .nan }
    return line.dropFirst(key.count).split(whereSeparator: \.isWhitespace).first.flatMap { Double($0) } ?? .nan
}


