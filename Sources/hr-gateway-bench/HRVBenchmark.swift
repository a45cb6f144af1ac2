import HRVAnalysis

/// Cost of `HRVAnalyzer.analyze` on a 5-minute window (what the session engine pays per frame at most).
///
/// Input: a synthetic 5-minute series of about 350 beats (0.25 Hz sinus arrhythmia plus noise) with an ectopic
/// pair every 50 beats and one missed beat, so the Kubios correction has real work to do.
func runHRVBenchmark() {
    let rr = syntheticFiveMinutes()
    let iterations = 300
    print("HRV benchmark: \(rr.count) RR intervals, \(Int(rr.reduce(0, +) / 1000)) s per window, \(iterations) runs each")

    var checksum = 0.0
    func measure(_ name: String, _ body: () -> Double) {
        checksum += body()  // warm-up
        let clock = ContinuousClock()
        let elapsed = clock.measure {
            for _ in 0..<iterations { checksum += body() }
        }
        let micros = Double(elapsed.components.seconds) * 1e6 + Double(elapsed.components.attoseconds) / 1e12
        let perRun = micros / Double(iterations)
        let name = name + String(repeating: " ", count: max(0, 44 - name.count))
        print("  \(name) \(format(perRun)) µs/window  \(format(1e6 / perRun)) windows/s")
    }

    measure("analyze, kubios correction (engine default)") {
        HRVAnalyzer.analyze(rr, options: HRVOptions(correction: .kubios)).rmssdMs ?? 0
    }
    measure("analyze, no correction") {
        HRVAnalyzer.analyze(rr, options: HRVOptions(correction: .none)).rmssdMs ?? 0
    }
    measure("KubiosCorrection.correct alone") {
        Double(KubiosCorrection.correct(rr).correctedBeats)
    }
    measure("RespirationEstimator.estimate alone") {
        RespirationEstimator.estimate(segments: [rr], bandHz: 0.15...0.5)?.frequencyHz ?? 0
    }
    measure("time domain alone") {
        HRVAnalyzer.timeDomain(segments: [rr]).sdnnMs ?? 0
    }
    let r = HRVAnalyzer.analyze(rr)
    print("  result: \(r.rrCount) intervals, \(r.artifactCount) beats corrected, respiration "
        + "\(r.respirationRateBpm.map { format($0) } ?? "-") /min (checksum \(format(checksum)))")
    #if DEBUG
    print("  (debug build: use `swift run -c release hr-gateway-bench hrv` for representative figures)")
    #endif
}

private func syntheticFiveMinutes() -> [Double] {
    var state: UInt64 = 42
    func gaussian() -> Double {
        // Sum of 12 uniforms minus 6: close enough to N(0, 1) for a benchmark input.
        var s = 0.0
        for _ in 0..<12 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            s += Double(state >> 11) / Double(1 << 53)
        }
        return s - 6
    }
    var rr: [Double] = []
    var t = 0.0
    while t < 300 {
        let phase = 2 * Double.pi * 0.25 * t
        // sin via a short series around 0 after reducing the phase: keeps the benchmark free of platform maths.
        let x = phase.remainder(dividingBy: 2 * Double.pi)
        var term = x
        var sine = x
        for k in 1..<12 {
            term *= -x * x / Double((2 * k) * (2 * k + 1))
            sine += term
        }
        let v = 857 + 30 * sine + 10 * gaussian()
        rr.append(v)
        t += v / 1000
    }
    for k in stride(from: 25, to: rr.count - 1, by: 50) {
        rr[k] -= 230
        rr[k + 1] += 230
    }
    rr[180] += rr[181]
    rr.remove(at: 181)
    return rr
}

private func format(_ v: Double) -> String {
    let rounded = (v * 10).rounded() / 10
    return "\(rounded)"
}
