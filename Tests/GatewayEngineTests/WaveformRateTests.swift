import Testing

import GatewayEngine

/// The rate a strap really samples at, from its chunks' times (whole milliseconds, as the store keeps them).
struct WaveformRateTests {
    /// Chunks of 73 samples whose first-sample times follow `rateHz`, rounded to the ms, plus `jitterMs[k % count]`.
    func starts(rateHz: Double, seconds: Double, jitterMs: [Double] = [0]) -> [(index: Int, timeMs: Double)] {
        let t0 = 1_700_000_000_000.0
        return stride(from: 0, to: Int(seconds * rateHz), by: 73).enumerated().map { k, index in
            (index, (t0 + Double(index) * 1000 / rateHz).rounded() + jitterMs[k % jitterMs.count])
        }
    }

    /// A Polar H10 like the one in a public capture: 73 samples every 560.81 ms of its clock (130.17 Hz).
    @Test func aStrapAtItsOwnRateIsMeasured() throws {
        let fit = try #require(WaveformRate.measured(chunkStarts: starts(rateHz: 130.17, seconds: 60), nominalHz: 130))
        #expect(abs(fit.rateHz - 130.17) < 0.002, "\(fit.rateHz)")
        #expect(abs(fit.startMs - 1_700_000_000_000) < 1, "\(fit.startMs)")
        // The line holds every chunk's time within its rounding.
        for s in starts(rateHz: 130.17, seconds: 60) { #expect(abs(fit.timeMs(s.index) - s.timeMs) < 0.6) }
        // Slower than nominal too (Polar gives 128–131 Hz).
        #expect(abs((WaveformRate.measured(chunkStarts: starts(rateHz: 128.4, seconds: 20), nominalHz: 130)?.rateHz ?? 0)
            - 128.4) < 0.005)
    }

    /// A sensor at its nominal rate keeps it, however its chunk times wander by the mapping and the rounding.
    @Test func theNominalRateIsKeptWithinTheTimesScatter() {
        #expect(WaveformRate.measured(chunkStarts: starts(rateHz: 130, seconds: 60), nominalHz: 130) == nil)
        #expect(WaveformRate.measured(
            chunkStarts: starts(rateHz: 130, seconds: 15, jitterMs: [0, 4, -3, 2, -2, 1]), nominalHz: 130) == nil)
        #expect(WaveformRate.measured(
            chunkStarts: starts(rateHz: 130, seconds: 60, jitterMs: [2, -2, 0, 1, -1]), nominalHz: 130) == nil)
    }

    @Test func tooShortOrImplausibleRunsKeepTheNominalRate() {
        #expect(WaveformRate.measured(chunkStarts: starts(rateHz: 130.17, seconds: 4), nominalHz: 130) == nil,
                "under 5 s the whole-ms times cannot tell")
        #expect(WaveformRate.measured(chunkStarts: starts(rateHz: 138, seconds: 60), nominalHz: 130) == nil,
                "6 % off: not a sensor's rate")
        #expect(WaveformRate.measured(chunkStarts: [], nominalHz: 130) == nil)
    }
}
