/// Injects known artefacts into a clean RR series and scores a detector/corrector against the clean values.
///
/// Artefacts (cycled in this order, 30 by default, one at a random place in each of `count` equal stretches,
/// away from both ends): a missed beat (two intervals merged), an extra beat (one interval split at 20-80 %), an ectopic
/// pair (an interval shortened by 20-35 % and the next lengthened by the same amount), a lone long interval (× 1.5)
/// and a lone short interval (× 0.55).
public enum ArtifactBenchmark {
    public struct Injected: Sendable, Equatable {
        public var kind: ArtifactKind
        /// First and last index of the affected intervals in the corrupted series.
        public var first: Int
        public var last: Int
        /// Index in the clean series of the (first) interval it corrupted.
        public var cleanIndex: Int
    }

    public struct Corrupted: Sendable, Equatable {
        public var rrMs: [Double]
        public var artifacts: [Injected]
    }

    /// The clean series with `count` artefacts injected; `seed` picks the positions and sizes.
    public static func inject(into clean: [Double], count: Int = 30, seed: UInt64, spacing: Int = 9) -> Corrupted {
        var state = seed &* 0x9E37_79B9_7F4A_7C15 &+ 1
        func uniform() -> Double {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Double(state >> 11) / Double(UInt64(1) << 53)
        }
        // Positions: one in each of `count` equal slots, at a random offset that keeps `spacing` to the next slot.
        let margin = 8
        let slot = Double(clean.count - 2 * margin - 2) / Double(count)
        var positions: [Int] = []
        for k in 0..<count {
            let room = Swift.max(1, Int(slot) - spacing / 3)
            positions.append(margin + Int(Double(k) * slot) + Int(uniform() * Double(room)))
        }
        positions.sort()
        let kinds: [ArtifactKind] = [.missed, .extra, .ectopic, .longShort, .longShort]
        var kindOf: [Int: (ArtifactKind, Bool)] = [:]
        for (n, p) in positions.enumerated() {
            let k = kinds[n % kinds.count]
            kindOf[p] = (k, n % kinds.count == 3)  // true: long, false: short (for longShort)
        }
        var out: [Double] = []
        var artifacts: [Injected] = []
        var i = 0
        while i < clean.count {
            guard let (kind, long) = kindOf[i] else {
                out.append(clean[i])
                i += 1
                continue
            }
            let at = out.count
            switch kind {
            case .missed:
                out.append(clean[i] + clean[i + 1])
                artifacts.append(Injected(kind: kind, first: at, last: at, cleanIndex: i))
                i += 2
                continue
            case .extra:
                let f = 0.2 + 0.6 * uniform()
                out.append(f * clean[i])
                out.append((1 - f) * clean[i])
                artifacts.append(Injected(kind: kind, first: at, last: at + 1, cleanIndex: i))
            case .ectopic:
                let q = (0.2 + 0.15 * uniform()) * clean[i]
                out.append(clean[i] - q)
                out.append(clean[i + 1] + q)
                artifacts.append(Injected(kind: kind, first: at, last: at + 1, cleanIndex: i))
                i += 2
                continue
            case .longShort:
                out.append(clean[i] * (long ? 1.5 : 0.55))
                artifacts.append(Injected(kind: kind, first: at, last: at, cleanIndex: i))
            }
            i += 1
        }
        return Corrupted(rrMs: out, artifacts: artifacts)
    }

    public struct Score: Sendable, Equatable {
        public var injected: Int
        public var found: Int
        /// Flagged intervals not within one interval of an injected artefact.
        public var falseAlarms: Int
    }

    /// Scores flagged interval indices (of the corrupted series) against the injected artefacts; a flag within one
    /// interval of an artefact's span finds it.
    public static func score(flagged: [Int], artifacts: [Injected]) -> Score {
        var found = 0
        var used = Set<Int>()
        for a in artifacts {
            let hits = flagged.filter { $0 >= a.first - 1 && $0 <= a.last + 1 }
            if !hits.isEmpty { found += 1 }
            used.formUnion(hits)
        }
        let falseAlarms = Set(flagged).subtracting(used).count
        return Score(injected: artifacts.count, found: found, falseAlarms: falseAlarms)
    }

    /// RMSSD of one series (ms).
    public static func rmssd(_ rr: [Double]) -> Double {
        HRVAnalyzer.timeDomain(segments: [rr]).rmssdMs ?? 0
    }

    /// RMSSD of the clean series over the successive differences no artefact destroyed: the best a corrector that
    /// leaves out estimated differences can do. A missed beat, an ectopic pair and a lone long or short interval
    /// take away the differences on both sides of the clean intervals they corrupt; an extra beat takes none (merging
    /// its two parts gives back the clean interval). Returns the RMSSD (ms) and the number of differences.
    public static func rmssdOfUntouched(_ clean: [Double], artifacts: [Injected]) -> (rmssdMs: Double, differences: Int) {
        var touched = Set<Int>()
        for a in artifacts {
            switch a.kind {
            case .extra: break
            case .missed, .ectopic: touched.formUnion([a.cleanIndex, a.cleanIndex + 1])
            case .longShort: touched.insert(a.cleanIndex)
            }
        }
        let flags = clean.indices.map { touched.contains($0) }
        let r = HRVAnalyzer.timeDomain(segments: [clean], estimated: [flags])
        return (r.rmssdMs ?? 0, r.successiveDifferences ?? 0)
    }

    /// The clean series repaired as the median corrector would with perfect knowledge of the artefacts: a missed beat
    /// and an ectopic pair become two equal halves of their clean sum (one repair that kept the elapsed time), a lone
    /// long or short interval becomes the median of its 10 clean neighbours (`ArtifactCorrector`'s reference), an
    /// extra beat nothing (merging its parts gives back the clean interval). With `estimateGroups` as the corrector
    /// gives them, so a DFA of it is the floor of a DFA of the corrected series: only the smoothing of exact repairs.
    public static func oracleRepair(_ clean: [Double], artifacts: [Injected]) -> (rrMs: [Double], estimateGroups: [Int]) {
        var rr = clean
        var groups = [Int](repeating: 0, count: clean.count)
        let reference = ArtifactCorrector.referenceAndThreshold(clean).reference
        var next = 1
        for a in artifacts {
            let k = a.cleanIndex
            switch a.kind {
            case .extra: continue
            case .missed, .ectopic:
                let half = (clean[k] + clean[k + 1]) / 2
                rr[k] = half
                rr[k + 1] = half
                groups[k] = next
                groups[k + 1] = next
            case .longShort:
                rr[k] = reference[k]
                groups[k] = next
            }
            next += 1
        }
        return (rr, groups)
    }

    /// RMSSD of a median-corrected series as `HRVAnalyzer` reports it: only differences between two measured
    /// intervals (ms).
    public static func rmssd(_ corrected: ArtifactCorrectionResult) -> Double {
        HRVAnalyzer.timeDomain(segments: [corrected.rrMs], estimated: [corrected.estimated]).rmssdMs ?? 0
    }
}
