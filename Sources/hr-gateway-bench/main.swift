let benchmarks: [String: () async -> Void] = [
    "dbus": runDBusBenchmark
]

let name = CommandLine.arguments.dropFirst().first
if let name, let run = benchmarks[name] {
    await run()
} else {
    print("usage: hr-gateway-bench <benchmark>\nbenchmarks: \(benchmarks.keys.sorted().joined(separator: ", "))")
}
