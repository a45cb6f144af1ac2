import PolarPMD
import Testing

/// SplitMix64: a small seeded generator so the constructed sequences are the same on every run.
struct SeededRNG: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A constructed H10-like ECG stream: 73 samples per frame at 130 Hz; the host receives each frame after a random
/// positive delay (exponential, mean `meanDelayMs`, plus `minDelayMs`).
struct Stream {
    var rng: SeededRNG
    let offsetNs: Int64
    let drift: Double  // host ns per sensor ns − 1
    let sensorStart: UInt64 = 600_000_000_000_000_000  // the H10's clock counts from 2000-01-01: large values
    let minDelayMs: Double = 8
    let meanDelayMs: Double = 25
    static let samples = 73
    static let periodNs = 1e9 / 130

    init(seed: UInt64, offsetNs: Int64, drift: Double) {
        rng = SeededRNG(state: seed)
        self.offsetNs = offsetNs
        self.drift = drift
    }

    /// The host time at which sensor time `s` happens (no transport delay).
    func trueHost(_ s: UInt64) -> Double { Double(offsetNs) + Double(s - sensorStart) * (1 + drift) + 1e12 }

    mutating func arrival(_ s: UInt64) -> UInt64 {
        let u = Double(rng.next() >> 11) / Double(1 << 53)
        let delay = (minDelayMs - meanDelayMs * log1p(-u)) * 1e6
        return UInt64(trueHost(s) + delay)
    }
}

func log1p(_ x: Double) -> Double {
    // ln(1 + x) by the series-free identity through the standard library's Double.log is unavailable without
    // Foundation; use a short Newton iteration on exp instead (x in [-1, 0)).
    var y = x
    for _ in 0..<60 {
        let e = exp(y)
        y -= (e - (1 + x)) / e
    }
    return y
}

func exp(_ x: Double) -> Double {
    // exp by scaling and squaring with a Taylor core; accurate to ~1e-15 relative for the range used here.
    var n = 0
    var r = x
    while abs(r) > 0.5 {
        r /= 2
        n += 1
    }
    var term = 1.0
    var sum = 1.0
    for k in 1..<20 {
        term *= r / Double(k)
        sum += term
    }
    for _ in 0..<n { sum *= sum }
    return sum
}

@Suite struct PMDClockMapperTests {
    @Test func constantOffsetWithRandomDelay() {
        var stream = Stream(seed: 42, offsetNs: -123_456_789_000, drift: 0)
        var mapper = PMDClockMapper()
        #expect(mapper.hostNs(forSensorNs: 1) == nil)
        var s = stream.sensorStart
        var worst = 0.0
        for i in 0..<6_000 {  // about 56 minutes
            s += UInt64(Double(Stream.samples) * Stream.periodNs)
            let event = mapper.observe(sensorNs: s, hostNs: stream.arrival(s), samples: Stream.samples, sampleRateHz: 130)
            #expect(event == nil)
            if i > 100, let h = mapper.hostNs(forSensorNs: s) {
                // Mapped = true time + the smallest delay (8 ms) + what the lower envelope leaves (< 3 ms).
                let error = Double(h) - stream.trueHost(s) - stream.minDelayMs * 1e6
                worst = max(worst, abs(error))
            }
        }
        #expect(worst < 3e6, "worst error \(worst / 1e6) ms")
        #expect(abs(mapper.driftPPM) < 2)
    }

    @Test func fiftyPPMDriftOverSixHours() {
        var stream = Stream(seed: 7, offsetNs: 5_000_000_000, drift: 50e-6)
        var mapper = PMDClockMapper()
        var s = stream.sensorStart
        var worst = 0.0
        let frames = Int(6 * 3600 / (Double(Stream.samples) / 130))
        for i in 0..<frames {
            s += UInt64(Double(Stream.samples) * Stream.periodNs)
            #expect(mapper.observe(sensorNs: s, hostNs: stream.arrival(s), samples: Stream.samples, sampleRateHz: 130) == nil)
            if i > 200, let h = mapper.hostNs(forSensorNs: s) {
                worst = max(worst, abs(Double(h) - stream.trueHost(s) - stream.minDelayMs * 1e6))
            }
        }
        // 50 ppm over 6 h is 1.08 s of drift; the mapping stays within a few ms of the truth all along.
        #expect(worst < 3e6, "worst error \(worst / 1e6) ms")
        #expect(abs(mapper.driftPPM - 50) < 1, "drift \(mapper.driftPPM) ppm")
    }

    @Test func resetIsReportedAndTheFitRestarts() {
        var stream = Stream(seed: 3, offsetNs: 0, drift: 0)
        var mapper = PMDClockMapper()
        var s = stream.sensorStart
        for _ in 0..<500 {
            s += UInt64(Double(Stream.samples) * Stream.periodNs)
            mapper.observe(sensorNs: s, hostNs: stream.arrival(s), samples: Stream.samples, sampleRateHz: 130)
        }
        let before = s
        // The strap restarts: its clock goes back to a small value; the host clock keeps going.
        let host = stream.arrival(s) + 600_000_000
        let restarted: UInt64 = 1_000_000_000
        #expect(
            mapper.observe(sensorNs: restarted, hostNs: host, samples: Stream.samples, sampleRateHz: 130)
                == .reset(previousSensorNs: before, sensorNs: restarted))
        #expect(mapper.resets == 1 && mapper.count == 1)
        // Mapped from the new pair alone.
        #expect(mapper.hostNs(forSensorNs: restarted) == host)
        // A forward jump far beyond the host's elapsed time is a reset too.
        #expect(
            mapper.observe(sensorNs: restarted + 3_600_000_000_000, hostNs: host + 560_000_000)
                == .reset(previousSensorNs: restarted, sensorNs: restarted + 3_600_000_000_000))
    }

    @Test func gapIsReportedAndTheFitKept() {
        var stream = Stream(seed: 11, offsetNs: 42_000_000, drift: 0)
        var mapper = PMDClockMapper()
        var s = stream.sensorStart
        let frameNs = UInt64(Double(Stream.samples) * Stream.periodNs)
        for _ in 0..<300 {
            s += frameNs
            mapper.observe(sensorNs: s, hostNs: stream.arrival(s), samples: Stream.samples, sampleRateHz: 130)
        }
        let from = s
        s += 4 * frameNs  // three frames lost
        let event = mapper.observe(sensorNs: s, hostNs: stream.arrival(s), samples: Stream.samples, sampleRateHz: 130)
        #expect(event == .gap(fromSensorNs: from, toSensorNs: s, missingSamples: 3 * Stream.samples))
        #expect(mapper.gaps == 1 && mapper.resets == 0 && mapper.count == 301)
        let h = mapper.hostNs(forSensorNs: s) ?? 0
        #expect(abs(Double(h) - stream.trueHost(s) - stream.minDelayMs * 1e6) < 3e6)
    }

    @Test func hostileInputNeverTraps() {
        var mapper = PMDClockMapper(configuration: .init(windowNs: 1, maxWindows: 2))
        var rng = SeededRNG(state: 99)
        for _ in 0..<2_000 {
            mapper.observe(sensorNs: rng.next(), hostNs: rng.next(), samples: Int(rng.next() % 300), sampleRateHz: 130)
            _ = mapper.hostNs(forSensorNs: rng.next())
        }
        for (s, h) in [(UInt64.max, UInt64.max), (0, 0), (UInt64.max, 0), (0, UInt64.max)] {
            mapper.observe(sensorNs: s, hostNs: h)
            _ = mapper.hostNs(forSensorNs: s)
            _ = mapper.hostNs(forSensorNs: 0)
            _ = mapper.hostNs(forSensorNs: .max)
        }
    }
}
