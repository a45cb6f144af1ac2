/// `hr-gateway-bench NAME`: prints speed and cost figures. Build with `-c release` for representative numbers:
/// `swift run -c release hr-gateway-bench NAME`.
let benchmarks: [(name: String, about: String, run: () async -> Void)] = [
    ("engine", "SessionEngine throughput: samples/s through the window and metrics", runEngineBenchmark),
    ("hrv", "HRVAnalyzer.analyze (Kubios correction, time domain, respiration) on 5-minute windows", runHRVBenchmark),
    ("dbus", "D-Bus round trips and signal delivery over a private dbus-daemon", runDBusBenchmark),
    ("strap", "BLE notification latency into the engine, CPU, RSS of `stream --strap` (fake bluetoothd) [--peer bleak] [--rounds R] [--binary PATH] [--warm-cache] [--count N]", {
        await runStrapBenchmark(arguments: Array(CommandLine.arguments.dropFirst(2)))
    }),
    ("relay", "relay delivery latency (p50/p99) to 100 WebSocket consumers on loopback, and the gateway's CPU", runRelayBenchmark),
    ("mqtt-fleet", "50 simulated gateways x 4 straps into one mosquitto: latency to a subscriber, CPU, reliable events across a broker restart", {
        await runMQTTFleetBenchmark(arguments: Array(CommandLine.arguments.dropFirst(2)))
    }),
    ("rppg", "rPPG ROI + POS/CHROM frames/s at 640x480, accuracy on synthetic and real data [DATA_DIR]", {
        runRPPGBenchmark(arguments: Array(CommandLine.arguments.dropFirst(2)))
    }),
]

let requested = CommandLine.arguments.dropFirst().first
if requested == "rppg-eval" {
    // Not part of `all`: it needs a data folder and fails when the figures fall below the recorded bounds.
    runRPPGEval(arguments: Array(CommandLine.arguments.dropFirst(2)))
} else if requested == "artifacts-export" {
    runArtifactExport(arguments: Array(CommandLine.arguments.dropFirst(2)))
} else if requested == "render-face" {
    runRenderFace(arguments: Array(CommandLine.arguments.dropFirst(2)))
} else if requested == "relay-consumers" {
    await runRelayConsumers(arguments: Array(CommandLine.arguments.dropFirst(2)))
} else if let requested, requested != "all", let bench = benchmarks.first(where: { $0.name == requested }) {
    await bench.run()
} else if requested == "all" {
    for bench in benchmarks {
        print("== \(bench.name)")
        await bench.run()
    }
} else {
    print("usage: hr-gateway-bench <name>|all\n")
    for bench in benchmarks { print("  \(bench.name.padding(toLength: 8, withPad: " ", startingAt: 0)) \(bench.about)") }
    print("  rppg-eval DIR [--bounds FILE] [--curve]\n           camera pulse accuracy on real videos with a contact PPG (layout of ubfc-dev); fails below the bounds")
}
