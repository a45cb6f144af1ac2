import Testing

@testable import LSLSink

/// The chunks of a 130 Hz ECG (73 samples) whose mapped first-sample times carry what the gateway's do: whole
/// milliseconds, and a mapping that moves by a millisecond or two while it settles.
@Suite struct RegularStampsTests {
    let rate = 130.0
    let n = 73
    var chunk: Double { Double(n) / rate }

    /// A deterministic jitter of up to ±1.5 ms.
    func jitter(_ k: Int) -> Double { Double((k * 7919) % 31 - 15) / 10_000 }

    @Test func chunksJoinOnePeriodApartDespiteJitteredMappedTimes() {
        var r = RegularStamps()
        var all: [Double] = []
        for k in 0..<200 {
            // Whole milliseconds, then the mapping's jitter.
            let mapped = ((100 + Double(k) * chunk) * 1000).rounded() / 1000 + jitter(k)
            all += r.stamps(first: mapped, count: n, rateHz: rate)
        }
        let steps = zip(all, all.dropFirst()).map { $1 - $0 }
        let worst = steps.map { abs($0 - 1 / rate) }.max() ?? 1
        #expect(worst < 0.00005, "every step within 0.05 ms of the period, chunk joins included (worst \(worst))")
        // And the stamps stay near the mapped times: within the jitter.
        for k in stride(from: 0, to: 200, by: 10) {
            #expect(abs(all[k * n] - (100 + Double(k) * chunk)) < 0.002)
        }
    }

    @Test func aLateFirstMappingIsSlewedOutWithoutAStep() {
        // The first chunk is mapped 10 ms late (a delayed first notification); later ones are right.
        var r = RegularStamps()
        var all: [Double] = []
        for k in 0..<40 {
            all += r.stamps(first: 50 + Double(k) * chunk + (k == 0 ? 0.010 : 0), count: n, rateHz: rate)
        }
        let steps = zip(all, all.dropFirst()).map { $1 - $0 }
        #expect(steps.allSatisfy { abs($0 - 1 / rate) < RegularStamps.maxSlew / rate + 1e-9 })
        let lastStart = all[39 * n]
        #expect(abs(lastStart - (50 + 39 * chunk)) < 1e-6, "the 10 ms are gone after \(39 * chunk) s of signal")
        #expect(abs(all[n] - (50 + chunk + 0.010)) < 0.0011, "and went gradually: at most 2 ms per s")
    }

    @Test func aGapOrAClockResetStartsAfresh() {
        var r = RegularStamps()
        _ = r.stamps(first: 10, count: n, rateHz: rate)
        // A lost frame: the next chunk comes one chunk later, flagged.
        let afterGap = r.stamps(first: 10 + 2 * chunk, count: n, rateHz: rate, gapBefore: true)
        #expect(afterGap.first == 10 + 2 * chunk)
        // A jump of a second without a flag (a reset): taken as it is, not slewed.
        let afterJump = r.stamps(first: 11 + 3 * chunk, count: n, rateHz: rate)
        #expect(afterJump.first == 11 + 3 * chunk)
        #expect(r.stamps(first: 0, count: 0, rateHz: rate).isEmpty)
        #expect(r.stamps(first: .nan, count: n, rateHz: rate).isEmpty)
    }
}
