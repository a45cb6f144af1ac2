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

/// A Polar H10's "130 Hz" ECG is 128–131 Hz depending on the strap (docs/pmd.md, "Sample rate"; a public capture of
/// a real H10 measures 130.17 Hz). Its chunks come at the real rate; the stream's nominal rate stays 130.
@Suite struct RegularStampsRealRateTests {
    let n = 73

    /// 60 s of chunks from a strap at `trueHz`, mapped times in whole milliseconds plus a ±1 ms jitter.
    func run(trueHz: Double, seconds: Double = 60) -> (stamps: [Double], truth: [Double], measured: Double?) {
        var r = RegularStamps()
        var stamps: [Double] = []
        var truth: [Double] = []
        var k = 0
        while Double(k * n) / trueHz < seconds {
            let t = 500 + Double(k * n) / trueHz
            let mapped = (t * 1000).rounded() / 1000 + Double((k * 7919) % 21 - 10) / 10_000
            stamps += r.stamps(first: mapped, count: n, rateHz: 130)
            truth += (0..<n).map { t + Double($0) / trueHz }
            k += 1
        }
        return (stamps, truth, r.measuredRateHz)
    }

    @Test(arguments: [128.0, 128.9, 130.17, 131.0])
    func stampsFollowTheStrapsRealRateWithoutRestarting(trueHz: Double) throws {
        let (stamps, truth, measured) = run(trueHz: trueHz)
        let rate = try #require(measured, "the run's rate is measured")
        #expect(abs(rate / trueHz - 1) < 20e-6, "measured \(rate) Hz for a strap at \(trueHz) Hz")
        // One run throughout: no restart at a mapped time (which would step). Until the rate is measured (three
        // chunks, 1.1 s: the third is stamped at the measured rate) steps are the nominal period's, slewed; from then on the strap's, slewed.
        let steps = zip(stamps, stamps.dropFirst()).map { $1 - $0 }
        let early = steps.prefix(2 * n).map { abs($0 * 130 - 1) }.max() ?? 1
        #expect(early < 0.0025, "steps within 2.5 ‰ of 1/130 s at first (worst \(early))")
        // (2 ‰ of slew, and the first fits' error of a few hundredths of a ‰.)
        let worst = steps.dropFirst(2 * n).map { abs($0 * trueHz - 1) }.max() ?? 1
        #expect(worst < 0.003, "then within 3 ‰ of 1/\(trueHz) s (worst \(worst))")
        // Never far from the samples' real times, and on them once what built up before the rate was known is gone.
        let error = zip(stamps, truth).map { abs($0 - $1) }
        #expect(error.max() ?? 1 < 0.020, "within 20 ms of the real times (worst \(error.max() ?? 1))")
        let late = error[(error.count * 3 / 4)...]
        #expect(late.max() ?? 1 < 0.002, "within 2 ms over the last quarter (worst \(late.max() ?? 1))")
    }

    @Test func aStrapAtTheNominalRateKeepsIt() {
        let (stamps, _, measured) = run(trueHz: 130, seconds: 30)
        #expect(measured == nil, "no rate other than the nominal one: \(String(describing: measured))")
        let steps = zip(stamps, stamps.dropFirst()).map { $1 - $0 }
        #expect(steps.allSatisfy { abs($0 * 130 - 1) < 0.0025 })
    }

    @Test func aNewRunMeasuresAfresh() {
        // 20 s at 128 Hz, then a gap; the next chunk starts a run whose rate is not yet known.
        var r = RegularStamps()
        for k in 0..<40 { _ = r.stamps(first: 10 + Double(k * n) / 128, count: n, rateHz: 130) }
        #expect(r.measuredRateHz != nil)
        let after = r.stamps(first: 40, count: n, rateHz: 130, gapBefore: true)
        #expect(after.first == 40 && r.measuredRateHz == nil)
        #expect(abs((after[1] - after[0]) - 1.0 / 130) < 1e-12, "nominal spacing until the new run is measured")
    }

    /// An accelerometer (36 samples a chunk, 1.44 s at 25 Hz) 2 % off, or an ECG 4.6 % off: more than 50 ms builds
    /// up before the rate can be measured. The run goes on (before, it restarted every other chunk and was never
    /// measured), the stamps step once and then follow the measured rate.
    @Test(arguments: [(25.0, 24.5, 36), (25.0, 25.5, 36), (130.0, 124.0, 73)])
    func aStreamFarOffItsNominalRateStepsOnceThenFollowsIt(nominal: Double, trueHz: Double, perChunk: Int) throws {
        var r = RegularStamps()
        var stamps: [Double] = []
        var truth: [Double] = []
        var k = 0
        while Double(k * perChunk) / trueHz < 60 {
            let t = 100 + Double(k * perChunk) / trueHz
            stamps += r.stamps(first: (t * 1000).rounded() / 1000, count: perChunk, rateHz: nominal)
            truth += (0..<perChunk).map { t + Double($0) / trueHz }
            k += 1
        }
        let rate = try #require(r.measuredRateHz)
        #expect(abs(rate / trueHz - 1) < 50e-6, "measured \(rate) Hz for \(trueHz) Hz")
        // Always forward, by at least half a period.
        let steps = zip(stamps, stamps.dropFirst()).map { $1 - $0 }
        #expect(steps.allSatisfy { $0 >= 0.5 / trueHz }, "the stamps go forward: \(steps.min() ?? 0)")
        // From the fourth chunk on, one run at the measured rate: every step within 3 ‰ of the real period.
        let worst = steps.dropFirst(3 * perChunk).map { abs($0 * trueHz - 1) }.max() ?? 1
        #expect(worst < 0.003, "steps within 3 ‰ of 1/\(trueHz) s after the first chunks (worst \(worst))")
        // On the real times once what was left of the step is slewed out (2 ms per s: some 20 s).
        let error = zip(stamps, truth).dropFirst(stamps.count / 2).map { abs($0 - $1) }
        #expect(error.max() ?? 1 < 0.002, "within 2 ms of the real times over the second half (worst \(error.max() ?? 1))")
    }

    /// The allowance is for a run's first chunks only: a strap at its nominal rate (never measured otherwise) whose
    /// clock is reset by 0.2 s a minute in starts afresh, as before.
    @Test func aClockResetLaterInARunStillStartsAfresh() {
        var r = RegularStamps()
        let chunk = 73.0 / 130
        for k in 0..<107 { _ = r.stamps(first: 10 + Double(k) * chunk, count: 73, rateHz: 130) }
        #expect(r.measuredRateHz == nil)
        let jumped = 10 + 107 * chunk + 0.2
        #expect(r.stamps(first: jumped, count: 73, rateHz: 130).first == jumped)
    }
}
