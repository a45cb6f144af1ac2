import Foundation

/// A synthetic incremental exercise test, beat by beat, for demonstrating and testing live DFA alpha1 without a
/// strap: heart rate rises linearly from `startBpm` to `endBpm` over `durationS`, and the beat-to-beat fluctuation is
/// an AR(1) process whose coefficient falls from 0.9 (strongly correlated, alpha1 ≈ 1.2, easy effort) to −0.3
/// (anti-correlated, alpha1 ≈ 0.35, above the second threshold), so alpha1 falls through 0.75 and 0.5 on the way.
/// Deterministic for a seed. Synthetic: it proves the arithmetic, not physiology.
public struct ExerciseRamp: Sendable {
    public var durationS: Double
    public var startBpm: Double
    public var endBpm: Double
    public var seed: UInt64

    public init(durationS: Double = 1200, startBpm: Double = 100, endBpm: Double = 175, seed: UInt64 = 1) {
        self.durationS = durationS
        self.startBpm = startBpm
        self.endBpm = endBpm
        self.seed = seed
    }

    /// RR intervals (ms) until `durationS`.
    public func rrMs() -> [Double] {
        var state = seed &* 0x9E37_79B9_7F4A_7C15 &+ 7
        func gaussian() -> Double {
            var s = 0.0
            for _ in 0..<12 {
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                s += Double(state >> 11) / Double(UInt64(1) << 53)
            }
            return s - 6
        }
        var out: [Double] = []
        var t = 0.0
        var x = 0.0
        while t < durationS {
            let p = t / durationS
            let bpm = startBpm + (endBpm - startBpm) * p
            let phi = 0.9 - 1.2 * p
            // Fluctuation amplitude shrinks with effort, as real HRV does.
            let sigma = 12 * (1 - 0.7 * p)
            x = phi * x + sigma * (1 - phi * phi).squareRoot() * gaussian()
            let rr = 60000 / bpm + x
            out.append(rr)
            t += rr / 1000
        }
        return out
    }
}
