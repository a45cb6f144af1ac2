/// A paced-breathing pattern: seconds of inhale, hold, exhale and hold after the exhale (docs/engine.md, "Paced
/// breathing").
public struct BreathingPattern: Sendable, Equatable, CustomStringConvertible {
    public var inhaleSec: Double
    public var holdSec: Double
    public var exhaleSec: Double
    public var holdOutSec: Double
    /// What the user typed, for display and the wire (`box`, `4-7-8`, `5-0-5-0`, …).
    public var name: String

    public init(inhaleSec: Double, holdSec: Double, exhaleSec: Double, holdOutSec: Double, name: String? = nil) {
        self.inhaleSec = inhaleSec
        self.holdSec = holdSec
        self.exhaleSec = exhaleSec
        self.holdOutSec = holdOutSec
        self.name = name ?? [inhaleSec, holdSec, exhaleSec, holdOutSec].map(Self.seconds).joined(separator: "-")
    }

    /// The named patterns: box (4-4-4-4), 4-7-8, coherent (6 breaths/min: 5-0-5-0), resonance (5.5 breaths/min).
    public static let named: [(name: String, pattern: BreathingPattern)] = [
        ("box", BreathingPattern(inhaleSec: 4, holdSec: 4, exhaleSec: 4, holdOutSec: 4, name: "box")),
        ("4-7-8", BreathingPattern(inhaleSec: 4, holdSec: 7, exhaleSec: 8, holdOutSec: 0, name: "4-7-8")),
        ("coherent", BreathingPattern(inhaleSec: 5, holdSec: 0, exhaleSec: 5, holdOutSec: 0, name: "coherent")),
        ("resonance", BreathingPattern(inhaleSec: 60 / 5.5 / 2, holdSec: 0, exhaleSec: 60 / 5.5 / 2, holdOutSec: 0,
                                       name: "resonance")),
    ]

    /// Parses a name above or `IN-HOLD-OUT[-HOLD]` in seconds (decimals allowed, holds may be 0).
    public init(parsing text: String) throws(SessionError) {
        let t = text.filter { !$0.isWhitespace }.lowercased()
        if let known = Self.named.first(where: { $0.name == t }) {
            self = known.pattern
            return
        }
        let parts = t.split(separator: "-", omittingEmptySubsequences: false).map { Double($0) }
        let form = "a pattern is box, 4-7-8, coherent, resonance, or IN-HOLD-OUT[-HOLD] in seconds (such as 4-2-6-0)"
        guard (3...4).contains(parts.count), parts.allSatisfy({ $0 != nil }) else {
            throw .invalidState("Invalid breathing pattern \"\(text.prefix(40))\": \(form)")
        }
        let v = parts.map { $0! }
        guard v.allSatisfy({ $0.isFinite && $0 >= 0 && $0 <= 60 }), v[0] >= 1, v[2] >= 1 else {
            throw .invalidState(
                "Invalid breathing pattern \"\(text.prefix(40))\": inhale and exhale need 1 to 60 s, holds 0 to 60 s")
        }
        self.init(inhaleSec: v[0], holdSec: v[1], exhaleSec: v[2], holdOutSec: v.count == 4 ? v[3] : 0, name: t)
    }

    /// One breath, in ms.
    public var cycleMs: Int64 { phases.reduce(0) { $0 + $1.durationMs } }
    /// Breaths per minute.
    public var rateBpm: Double { 60_000 / Double(cycleMs) }

    /// The phases of one breath that last (holds of 0 s are left out), in order, with their durations (ms).
    public var phases: [(phase: BreathingCue.Phase, durationMs: Int64)] {
        [(BreathingCue.Phase.inhale, inhaleSec), (.hold, holdSec), (.exhale, exhaleSec), (.holdOut, holdOutSec)]
            .map { ($0.0, Int64(($0.1 * 1000).rounded())) }.filter { $0.1 > 0 }
    }

    public var description: String { name }

    private static func seconds(_ v: Double) -> String {
        v == v.rounded() ? String(Int(v)) : String(v)
    }
}

/// A `breathing_cue` event's content: which phase starts, when (a little ahead of time, so that a display can
/// animate in sync), how long it lasts and which breath it belongs to.
public struct BreathingCue: Sendable, Equatable {
    public enum Phase: String, Sendable, Equatable, CaseIterable {
        case inhale
        case hold
        case exhale
        case holdOut = "hold_out"
    }

    public var phase: Phase
    public var phaseDurationMs: Int64
    /// The breath, from 1.
    public var cycle: Int
    /// When the phase starts (wall clock, epoch ms): `cueLeadMs` after the event is emitted.
    public var startsAtMs: Int64
    public var pattern: String
    public var rateBpm: Double

    public init(phase: Phase, phaseDurationMs: Int64, cycle: Int, startsAtMs: Int64, pattern: String, rateBpm: Double) {
        self.phase = phase
        self.phaseDurationMs = phaseDurationMs
        self.cycle = cycle
        self.startsAtMs = startsAtMs
        self.pattern = pattern
        self.rateBpm = rateBpm
    }

    /// How far ahead of its phase a cue is emitted.
    public static let cueLeadMs: Int64 = 300
    /// The first breath starts this long after the session.
    public static let firstBreathAfterMs: Int64 = 1000
}
