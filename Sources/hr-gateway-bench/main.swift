import Foundation

/// `hr-gateway-bench NAME`: prints speed and cost figures. Build with `-c release` for representative numbers:
/// `swift run -c release hr-gateway-bench NAME`.
let benchmarks: [(name: String, about: String, run: () async -> Void)] = [
    ("engine", "SessionEngine throughput: samples/s through the window and metrics", runEngineBenchmark),
    ("hrv", "every HRV metric of 5-minute windows, --dfa-timeline over 100,000 beats, and the artefact benchmark beside the Kubios method", runHRVBenchmark),
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
    // No name, or one that is not a benchmark: the list, on standard error with exit status 2 for a wrong name.
    var text = "usage: hr-gateway-bench <name>|all\n\n"
    let width = benchmarks.map(\.name.count).max() ?? 0
    for bench in benchmarks { text += "  \(bench.name.padding(toLength: width, withPad: " ", startingAt: 0))  \(bench.about)\n" }
    text += """

        Tools (not part of `all`):
          rppg-eval DIR [--bounds FILE] [--curve] [--face-cascade XML] [--traces OUT] [--threshold C]
              camera pulse accuracy on real videos with a contact PPG (layout of ubfc-dev); fails below the bounds
          artifacts-export DIR
              the HRV artefact benchmark's injected series and hr-gateway's scores, for neurokit2 (scripts/artifact-bench)
          render-face [--bpm N] [--seconds S] [--fps F] [--width W] [--height H]
              a rendered face with a known pulse as raw rgb24 frames on standard output (for ffmpeg; the qemu lane)
          relay-consumers URL COUNT EVENTS
              COUNT WebSocket consumers of a relay, for the relay benchmark

        """
    if let requested {
        FileHandle.standardError.write(Data("hr-gateway-bench: no benchmark named '\(requested)'\n\n\(text)".utf8))
        exit(2)
    }
    print(text, terminator: "")
}
