import HRVAnalysis

/// One active session as a synchronous state machine in virtual time: the SDK's timers become deadlines, and
/// `fire(at:)` emits what falls due. `SessionEngine` drives it from a clock and serialises access.
///
/// Deadlines and the duration are on the monotonic clock (`startedMonoMs` onwards); the wall clock only stamps
/// `started_at_ms` and `emitted_at_ms`, so stepping the system time neither stops frames nor ends the session.
struct SessionCore {
    /// Both clocks read at one instant.
    struct Instant {
        let monotonicMs: Int64
        let wallMs: Int64
        init(monotonicMs: Int64, wallMs: Int64) {
            self.monotonicMs = monotonicMs
            self.wallMs = wallMs
        }
        init(_ clock: any SessionClock) { self.init(monotonicMs: clock.monotonicMs(), wallMs: clock.nowMs()) }
    }

    let config: SessionConfig
    /// Wall clock at the start (`started_at_ms`).
    let startedAtMs: Int64
    /// Monotonic clock at the start: the origin of every deadline.
    let startedMonoMs: Int64
    let hrvOptions: HRVOptions
    private(set) var window: SampleWindow
    private(set) var seq = 0
    private(set) var rawSeq = 0
    private(set) var nextFrameMs: Int64
    private(set) var nextRawMs: Int64?
    let endMs: Int64
    var hsi: [String: JSONValue]
    private(set) var liveDFA = LiveDFATracker()
    /// Paced breathing: the pattern's phases, when the first breath starts (monotonic), and the next cue to emit.
    private let pacer: (phases: [(phase: BreathingCue.Phase, durationMs: Int64)], originMs: Int64)?
    private(set) var cueIndex = 0

    init(config: SessionConfig, startedAt: Instant, hsi: [String: JSONValue], hrvOptions: HRVOptions) {
        self.config = config
        self.startedAtMs = startedAt.wallMs
        let startedMonoMs = startedAt.monotonicMs
        self.startedMonoMs = startedMonoMs
        self.hsi = hsi
        self.hrvOptions = hrvOptions
        window = SampleWindow(windowSec: config.profile.windowSec)
        nextFrameMs = startedMonoMs + Int64(config.profile.emitIntervalSec) * 1000
        if config.includeRawSamples {
            nextRawMs = startedMonoMs + Int64(config.profile.rawEmitIntervalSec ?? config.profile.emitIntervalSec) * 1000
        }
        endMs = startedMonoMs + Int64(config.durationSec) * 1000
        if let p = config.breathingPattern, !p.phases.isEmpty {
            pacer = (p.phases, startedMonoMs + BreathingCue.firstBreathAfterMs)
        } else {
            pacer = nil
        }
    }

    /// When cue `index` is emitted (monotonic): its phase's start less the lead.
    private func cueDeadline(_ index: Int) -> Int64? {
        guard let pacer else { return nil }
        return phaseStart(index, pacer) - BreathingCue.cueLeadMs
    }

    private func phaseStart(_ index: Int, _ pacer: (phases: [(phase: BreathingCue.Phase, durationMs: Int64)], originMs: Int64)) -> Int64 {
        let count = pacer.phases.count
        let cycleMs = pacer.phases.reduce(0) { $0 + $1.durationMs }
        let within = pacer.phases.prefix(index % count).reduce(0) { $0 + $1.durationMs }
        return pacer.originMs + Int64(index / count) * cycleMs + within
    }

    /// The paced breaths on the samples' clock, for the metrics.
    private var pacing: SessionMetrics.Pacing? {
        guard let p = config.breathingPattern, pacer != nil else { return nil }
        return SessionMetrics.Pacing(
            rateBpm: p.rateBpm, originMs: startedAtMs + BreathingCue.firstBreathAfterMs, cycleMs: p.cycleMs)
    }

    var started: SessionEvent { .started(sessionId: config.sessionId, startedAtMs: startedAtMs) }

    /// The earliest pending deadline (monotonic).
    var nextDeadlineMs: Int64 { min(nextFrameMs, nextRawMs ?? .max, endMs, cueDeadline(cueIndex) ?? .max) }

    mutating func append(_ sample: BiosignalSample) {
        window.append(sample)
        liveDFA.append(sample)
    }

    /// Emits everything due at or before `now` (monotonic). At one instant the order is: frame, raw frame, then the summary, so
    /// when the duration is a multiple of the interval the last frame precedes the summary. A repeating timer that
    /// fell behind fires once and resumes on its own grid, like a run-loop timer.
    mutating func fire(at now: Instant, behavior: () -> BehaviorSnapshot?) -> (events: [SessionEvent], finished: Bool) {
        let nowMs = now.monotonicMs
        var events: [SessionEvent] = []
        while nextDeadlineMs <= nowMs {
            if let cue = cueDeadline(cueIndex), cue <= nowMs, cue < endMs, let pacer, let pattern = config.breathingPattern {
                // A cue that fell behind (a stalled clock) is skipped rather than sent late: it would mislead.
                let start = phaseStart(cueIndex, pacer)
                if start >= nowMs {
                    let (phase, duration) = pacer.phases[cueIndex % pacer.phases.count]
                    let cue = BreathingCue(
                        phase: phase, phaseDurationMs: duration, cycle: cueIndex / pacer.phases.count + 1,
                        startsAtMs: now.wallMs + (start - nowMs), pattern: pattern.name, rateBpm: pattern.rateBpm)
                    events.append(.breathingCue(sessionId: config.sessionId, emittedAtMs: now.wallMs, cue: cue))
                }
                cueIndex += 1
            } else if nextFrameMs <= nowMs, nextFrameMs <= (nextRawMs ?? .max), nextFrameMs <= endMs {
                if let frame = makeFrame(wallMs: now.wallMs, behavior: behavior) {
                    events.append(frame)
                    events += dfaThresholdEvents(wallMs: now.wallMs)
                }
                nextFrameMs = Self.nextTick(after: nextFrameMs, now: nowMs, intervalSec: config.profile.emitIntervalSec)
            } else if let raw = nextRawMs, raw <= nowMs, raw <= endMs {
                if let frame = makeRawFrame(wallMs: now.wallMs) { events.append(frame) }
                nextRawMs = Self.nextTick(
                    after: raw, now: nowMs, intervalSec: config.profile.rawEmitIntervalSec ?? config.profile.emitIntervalSec)
            } else {
                events.append(summary(at: now, behavior: behavior))
                return (events, true)
            }
        }
        return (events, false)
    }

    /// The summary for a stop at `now`; the duration is measured on the monotonic clock.
    func summary(at now: Instant, behavior: () -> BehaviorSnapshot?) -> SessionEvent {
        .summary(
            sessionId: config.sessionId,
            durationActualSec: Int(max(0, now.monotonicMs - startedMonoMs) / 1000),
            metrics: metrics(),
            behavior: behavior()
        )
    }

    func metrics() -> SessionMetrics {
        var m = SessionMetrics.compute(window: window.samples, hsi: hsi, options: hrvOptions, pacing: pacing)
        m.liveDFA = liveDFA.latest
        return m
    }

    /// Crossings found by the live DFA estimate made for the frame just built.
    private var pendingCrossings: [DFAThresholdCrossing] = []

    private mutating func makeFrame(wallMs: Int64, behavior: () -> BehaviorSnapshot?) -> SessionEvent? {
        guard !window.isEmpty else { return nil }
        seq += 1
        // Live DFA runs on the sample clock (the newest sample's time), every 20 s at the first frame due.
        if let newest = window.samples.last?.timestampMs, let update = liveDFA.update(nowMs: newest) {
            pendingCrossings = update.crossings
        }
        return .frame(sessionId: config.sessionId, seq: seq, emittedAtMs: wallMs, metrics: metrics(), behavior: behavior())
    }

    private mutating func dfaThresholdEvents(wallMs: Int64) -> [SessionEvent] {
        defer { pendingCrossings = [] }
        return pendingCrossings.map { .dfaThreshold(sessionId: config.sessionId, emittedAtMs: wallMs, crossing: $0) }
    }

    private mutating func makeRawFrame(wallMs: Int64) -> SessionEvent? {
        guard !window.isEmpty else { return nil }
        rawSeq += 1
        return .biosignalFrame(sessionId: config.sessionId, seq: rawSeq, emittedAtMs: wallMs, samples: window.samples)
    }

    static func nextTick(after tick: Int64, now: Int64, intervalSec: Int) -> Int64 {
        let step = Int64(intervalSec) * 1000
        var next = tick + step
        if next <= now { next += ((now - next) / step + 1) * step }
        return next
    }
}
