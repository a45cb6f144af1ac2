let usage = """
    usage: hr-gateway-bench <name>

      hrv    HRVAnalyzer.analyze (Kubios correction, time domain, respiration) on 5-minute windows

    Build with -c release for representative figures: swift run -c release hr-gateway-bench <name>
    """

switch CommandLine.arguments.dropFirst().first {
case "hrv": runHRVBenchmark()
default: print(usage)
}
