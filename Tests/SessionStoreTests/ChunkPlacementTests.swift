import GatewayEngine
import Testing

@testable import SessionStore

/// Where the chunks of a regular stream (raw ECG) go: their segments, their samples' times, and the EDF's fixed grid.
@Suite struct ChunkPlacementTests {
    let t0: Int64 = 1_700_000_000_000

    func chunk(_ ms: Int64, _ values: [Int32], gap: Bool = false) -> BiosignalSample {
        BiosignalSample(timestampMs: ms, bpm: 0, deviceId: "A0:9E", source: "polar_ecg", gapBefore: gap,
                        ecgUv: values, ecgRateHz: 130)
    }

    func placed(_ samples: [BiosignalSample]) -> [SessionExport.PlacedChunk] {
        SessionExport.placeChunks(samples.map { s in
            s.ecgUv.map {
                SessionExport.ChunkHead(device: s.deviceId ?? s.source, timestampMs: s.timestampMs, gapBefore: s.gapBefore,
                                        count: $0.count, rateHz: s.ecgRateHz ?? 0)
            }
        })
    }

    /// 130 Hz chunks of 73 samples whose times wander by up to ±5 ms (more than half a sample) after the millisecond
    /// rounding: each continues the previous one exactly, at the nominal rate from the first chunk's own time.
    @Test func jitteredChunksFollowEachOtherSampleForSample() {
        var samples: [BiosignalSample] = []
        for k in 0..<100 {
            let jitter = Double((k * 37) % 11 - 5)
            let ms: Double = Double(k) * 73 / 130 * 1000 + jitter
            samples.append(chunk(t0 + Int64(ms.rounded()), [Int32](repeating: 0, count: 73)))
        }
        let p = placed(samples)
        let indexes: [Int] = p.map { $0.index }
        #expect(indexes == (0..<100).map { $0 * 73 })
        #expect(p.allSatisfy { $0.measuredHz == nil && $0.line == WaveformRate(rateHz: 130, startMs: Double(t0 - 5)) })
    }

    @Test func aGapOrAJumpStartsASegmentAtItsOwnTime() {
        let v = [Int32](repeating: 0, count: 73)
        let p = placed([
            chunk(t0, v),
            chunk(t0 + 1685, v, gap: true),  // frames lost: flagged
            chunk(t0 + 1685 + 562 + 1000, v),  // unflagged but a second away: a clock reset
            chunk(t0 + 1685 + 562 + 1000 + 562 + 40, v),  // within 50 ms: continues
        ])
        let indexes: [Int] = p.map { $0.index }
        let starts: [Double] = p.map { $0.line.startMs }
        #expect(indexes == [0, 0, 0, 73])
        #expect(starts == [t0, t0 + 1685, t0 + 3247, t0 + 3247].map { Double($0) })
    }

    /// A real H10's "130 Hz" can be 130.17 Hz (a public capture: 73 samples every 560.81 ms) or lower (Polar gives
    /// 128–131 Hz). A minute of it is one segment, and on the EDF's 130 Hz grid each sample lands in the slot nearest
    /// its time: where it runs fast one sample in 770 shares a slot with the next, where it runs slow a slot left
    /// between two samples takes the earlier's value; no 0 inside the stream either way.
    @Test(arguments: [130.17, 128.4])
    func aStrapOffItsNominalRateKeepsItsSamplesAtTheirTimesOnTheGrid(rate: Double) {
        let n = 73 * 107
        let values = (0..<n).map { Int32($0 + 1) }
        let samples = stride(from: 0, to: n, by: 73).map { start in
            chunk(t0 + Int64((Double(start) * 1000 / rate).rounded()), Array(values[start..<(start + 73)]))
        }
        let p = placed(samples)
        #expect(Set(p.map { $0.line.startMs }).count == 1, "one segment")
        #expect(abs((p.first?.measuredHz ?? 0) - rate) < 0.002, "\(p.first?.measuredHz ?? 0)")

        let grid = SessionExport.grid(samples, rateHz: 130, startMs: t0, records: 64, channels: 1) { s in
            s.ecgUv!.map { [Double($0)] }
        }[0]
        let span = grid.prefix { $0 != 0 }
        let expectedSlots = Int((Double(n - 1) * 130 / rate).rounded()) + 1
        #expect(span.count == expectedSlots, "\(span.count) slots for \(n) samples")
        #expect(grid.dropFirst(span.count).allSatisfy { $0 == 0 }, "nothing after the stream")
        // Every slot holds the sample nearest its time (or the one before it, for a slot between two).
        for (slot, v) in span.enumerated() {
            let k = Double(slot) * rate / 130
            #expect(abs(v - 1 - k) <= 1, "slot \(slot): sample \(v - 1), nearest \(k)")
        }
        #expect(zip(span, span.dropFirst()).allSatisfy { $1 >= $0 }, "in order")
    }

    /// An accelerometer at 50 Hz whose first sample falls exactly half a slot (10 ms) after a whole second: every
    /// sample still takes its own slot, in order. (Reckoned per sample from its time, floating-point error rounded
    /// about 7 % of them the other way: two samples in one slot, one left over; edf-check saw it now and then.)
    @Test func aStreamHalfASlotOffTheGridFillsItsSlotsInOrder() {
        let start = t0 + 10
        let n = 36 * 30
        let samples = stride(from: 0, to: n, by: 36).map { (first: Int) -> BiosignalSample in
            let acc: [SIMD3<Double>] = (first..<(first + 36)).map { (i: Int) -> SIMD3<Double> in SIMD3(Double(i + 1), 0, 1) }
            let ms: Int64 = start + Int64(first * 20)
            return BiosignalSample(timestampMs: ms, bpm: 0, deviceId: "A0", source: "polar_acc", accG: acc, accRateHz: 50)
        }
        let x = SessionExport.grid(samples, rateHz: 50, startMs: t0, records: 30, channels: 3) { s in
            s.accG!.map { [$0.x, $0.y, $0.z] }
        }[0]
        let filled: [Double] = x.filter { $0 != 0 }
        let sent: [Double] = (1...n).map { Double($0) }
        let wrong = filled.indices.first { $0 >= sent.count || filled[$0] != sent[$0] }
        #expect(filled.count == sent.count && wrong == nil,
                "each sample once, in order, in consecutive slots: \(filled.count) placed, first wrong at \(String(describing: wrong))")
        let first: Int = x.firstIndex { $0 != 0 } ?? -1
        #expect(first == 0 || first == 1, "the first sample in the slot of its time: \(first)")
    }
}
