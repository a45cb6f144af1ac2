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
    /// In a resonance assessment: the step this breath belongs to (from 1) and how many steps there are.
    public var assessmentStep: Int?
    public var assessmentSteps: Int?

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

/// The resonance frequency assessment's protocol (docs/engine.md, "Resonance assessment"): paced steps at each of
/// `rates` (breaths/min, inhale as long as exhale), each about `stepSec` long in whole breaths, one after the other
/// from the session's first breath. The `resonance_assessment` key of the session dictionary.
public struct ResonancePlan: Sendable, Equatable {
    public var rates: [Double]
    public var stepSec: Int

    /// Lehrer's protocol: 6.5, 6, 5.5, 5 and 4.5 breaths/min, two minutes each.
    public static let defaultRates: [Double] = [6.5, 6.0, 5.5, 5.0, 4.5]
    public static let defaultStepSec = 120

    public init(rates: [Double] = ResonancePlan.defaultRates, stepSec: Int = ResonancePlan.defaultStepSec) {
        self.rates = rates
        self.stepSec = stepSec
    }

    /// Refuses a plan that cannot be paced or judged: 1 to 12 rates of 3 to 10 breaths/min, steps of 60 to 600 s
    /// (a step needs a minute for its spectrum).
    public func validate() throws(SessionError) {
        guard (1...12).contains(rates.count) else {
            throw .invalidState("A resonance assessment needs 1 to 12 rates, got \(rates.count)")
        }
        for r in rates where !(r.isFinite && r >= 3 && r <= 10) {
            throw .invalidState("Resonance assessment rates must be 3 to 10 breaths/min, got \(r)")
        }
        if let twice = rates.enumerated().first(where: { i, r in rates[..<i].contains(r) })?.element {
            let rate = twice == twice.rounded() ? String(Int(twice)) : String(twice)
            throw .invalidState("A resonance assessment paces each rate once, got \(rate) twice")
        }
        guard (60...600).contains(stepSec) else {
            throw .invalidState("A resonance assessment step must last 60 to 600 s, got \(stepSec)")
        }
    }

    /// The fewest breaths a step paces, whatever `stepSec` says: one to settle and five judged, as the spectrum of a
    /// step (halves of its judged part, docs/hrv.md §9) resolves the paced rate only over more than four of its
    /// cycles. It lengthens only slow rates in short steps (4.5 /min in 60 s: 6 breaths, 80 s).
    public static let minimumStepBreaths = 6

    /// The steps: each rate's pattern (inhale as long as exhale, no holds) and its number of whole breaths.
    public var steps: [(pattern: BreathingPattern, breaths: Int)] {
        rates.map { rate in
            let half = 30 / rate
            let name = "resonance-step-" + (rate == rate.rounded() ? String(Int(rate)) : String(rate))
            let pattern = BreathingPattern(inhaleSec: half, holdSec: 0, exhaleSec: half, holdOutSec: 0, name: name)
            return (pattern, Swift.max(Self.minimumStepBreaths, Int((Double(stepSec) * rate / 60).rounded())))
        }
    }

    /// From the first breath to the end of the last step, in ms.
    public var pacedMs: Int64 { steps.reduce(0) { $0 + $1.pattern.cycleMs * Int64($1.breaths) } }

    /// The session length that holds the whole assessment: the first breath's delay, every step, and a second to
    /// spare for the last beat to arrive.
    public var sessionDurationSec: Int {
        Int((BreathingCue.firstBreathAfterMs + pacedMs + 999) / 1000) + 1
    }

    public init(json: JSONValue) throws(SessionError) {
        guard case .object = json else {
            throw .invalidState("resonance_assessment must be an object such as {\"rates\": [6.5, 6, 5.5], \"step_sec\": 120}")
        }
        var plan = ResonancePlan()
        if let r = json["rates"] {
            guard case .array(let values) = r else { throw .invalidState("resonance_assessment.rates must be an array of numbers") }
            var rates: [Double] = []
            for v in values {
                guard let d = v.doubleValue else { throw .invalidState("resonance_assessment.rates must be an array of numbers") }
                rates.append(d)
            }
            plan.rates = rates
        }
        if let s = json["step_sec"] {
            guard let i = s.intValue, i <= Int64(Int32.max), i >= Int64(Int32.min) else {
                throw .invalidState("resonance_assessment.step_sec must be a whole number of seconds")
            }
            plan.stepSec = Int(i)
        }
        try plan.validate()
        self = plan
    }

    public var jsonValue: JSONValue {
        .object(["rates": .array(rates.map { .double($0) }), "step_sec": .int(Int64(stepSec))])
    }
}

/// The pacer of a breathing session: one step for a pattern (breathing on until the session ends), or the steps of a
/// resonance assessment, one after the other (after the last, the pacer is silent). Times are monotonic ms.
struct PacerSchedule {
    struct Segment {
        let pattern: BreathingPattern
        let phases: [(phase: BreathingCue.Phase, durationMs: Int64)]
        /// When its first breath starts.
        let originMs: Int64
        /// How many breaths it paces; nil paces on.
        let breaths: Int?
        /// The index of its first cue, and its first breath's number, over the whole schedule.
        let firstCue: Int
        let firstCycle: Int
    }

    let segments: [Segment]

    /// Nil when the configuration paces nothing.
    init?(config: SessionConfig, originMs: Int64) {
        let steps: [(BreathingPattern, Int?)]
        if let plan = config.resonance {
            steps = plan.steps.map { ($0.pattern, $0.breaths) }
        } else if let p = config.breathingPattern {
            steps = [(p, nil)]
        } else {
            return nil
        }
        var segments: [Segment] = []
        var origin = originMs
        var cue = 0
        var cycle = 1
        for (pattern, breaths) in steps where !pattern.phases.isEmpty {
            segments.append(Segment(
                pattern: pattern, phases: pattern.phases, originMs: origin, breaths: breaths, firstCue: cue, firstCycle: cycle))
            guard let breaths else { break }
            origin += pattern.cycleMs * Int64(breaths)
            cue += pattern.phases.count * breaths
            cycle += breaths
        }
        guard !segments.isEmpty else { return nil }
        self.segments = segments
    }

    /// Cue `index` over the whole schedule: when its phase starts, which phase, how long, its breath and its step.
    /// Nil past the last step.
    func cue(_ index: Int) -> (startMs: Int64, phase: BreathingCue.Phase, durationMs: Int64, cycle: Int, step: Int)? {
        guard index >= 0, let s = segments.lastIndex(where: { $0.firstCue <= index }) else { return nil }
        let segment = segments[s]
        let local = index - segment.firstCue
        let count = segment.phases.count
        let breath = local / count
        if let breaths = segment.breaths, breath >= breaths { return nil }
        let within = segment.phases.prefix(local % count).reduce(0) { $0 + $1.durationMs }
        let (phase, duration) = segment.phases[local % count]
        return (segment.originMs + Int64(breath) * segment.pattern.cycleMs + within, phase, duration,
                segment.firstCycle + breath, s)
    }

    /// The step under way at `ms` (the first before it starts, the last after the end).
    func step(atMs ms: Int64) -> Int {
        segments.lastIndex(where: { $0.originMs <= ms }) ?? 0
    }
}
