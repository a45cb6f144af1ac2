import HRVAnalysis

/// One active session as a synchronous state machine in virtual time: the SDK's timers become deadlines, and
/// `fire(nowMs:)` emits what falls due. `SessionEngine` drives it from a clock and serialises access.
struct SessionCore {
    let config: SessionConfig
    let startedAtMs: Int64
    let hrvOptions: HRVOptions
    private(set) var window: SampleWindow
    private(set) var seq = 0
    private(set) var rawSeq = 0
    private(set) var nextFrameMs: Int64
    private(set) var nextRawMs: Int64?
    let endMs: Int64
    var hsi: [String: JSONValue]
    private(set) var liveDFA = LiveDFATracker()

    init(config: SessionConfig, startedAtMs: Int64, hsi: [String: JSONValue], hrvOptions: HRVOptions) {
        self.config = config
        self.startedAtMs = startedAtMs
        self.hsi = hsi
        self.hrvOptions = hrvOptions
        window = SampleWindow(windowSec: config.profile.windowSec)
        nextFrameMs = startedAtMs + Int64(config.profile.emitIntervalSec) * 1000
        if config.includeRawSamples {
            nextRawMs = startedAtMs + Int64(config.profile.rawEmitIntervalSec ?? config.profile.emitIntervalSec) * 1000
        }
        endMs = startedAtMs + Int64(config.durationSec) * 1000
    }

    var started: SessionEvent { .started(sessionId: config.sessionId, startedAtMs: startedAtMs) }

    /// The earliest pending deadline.
    var nextDeadlineMs: Int64 { min(nextFrameMs, nextRawMs ?? .max, endMs) }

    mutating func append(_ sample: BiosignalSample) {
        window.append(sample)
        liveDFA.append(sample)
    }

    /// Emits everything due at or before `nowMs`. At one instant the order is: frame, raw frame, then the summary, so
    /// when the duration is a multiple of the interval the last frame precedes the summary. A repeating timer that
    /// fell behind fires once and resumes on its own grid, like a run-loop timer.
    mutating func fire(nowMs: Int64, behavior: () -> BehaviorSnapshot?) -> (events: [SessionEvent], finished: Bool) {
        var events: [SessionEvent] = []
        while nextDeadlineMs <= nowMs {
            if nextFrameMs <= nowMs, nextFrameMs <= (nextRawMs ?? .max), nextFrameMs <= endMs {
                if let frame = makeFrame(nowMs: nowMs, behavior: behavior) {
                    events.append(frame)
                    events += dfaThresholdEvents(nowMs: nowMs)
                }
                nextFrameMs = Self.nextTick(after: nextFrameMs, now: nowMs, intervalSec: config.profile.emitIntervalSec)
            } else if let raw = nextRawMs, raw <= nowMs, raw <= endMs {
                if let frame = makeRawFrame(nowMs: nowMs) { events.append(frame) }
                nextRawMs = Self.nextTick(
                    after: raw, now: nowMs, intervalSec: config.profile.rawEmitIntervalSec ?? config.profile.emitIntervalSec)
            } else {
                events.append(summary(nowMs: nowMs, behavior: behavior))
                return (events, true)
            }
        }
        return (events, false)
    }

    /// The summary for a stop at `nowMs`.
    func summary(nowMs: Int64, behavior: () -> BehaviorSnapshot?) -> SessionEvent {
        .summary(
            sessionId: config.sessionId,
            durationActualSec: Int(max(0, nowMs - startedAtMs) / 1000),
            metrics: metrics(),
            behavior: behavior()
        )
    }

    func metrics() -> SessionMetrics {
        var m = SessionMetrics.compute(window: window.samples, hsi: hsi, options: hrvOptions)
        m.liveDFA = liveDFA.latest
        return m
    }

    /// Crossings found by the live DFA estimate made for the frame just built.
    private var pendingCrossings: [DFAThresholdCrossing] = []

    private mutating func makeFrame(nowMs: Int64, behavior: () -> BehaviorSnapshot?) -> SessionEvent? {
        guard !window.isEmpty else { return nil }
        seq += 1
        // Live DFA runs on the sample clock (the newest sample's time), every 20 s at the first frame due.
        if let newest = window.samples.last?.timestampMs, let update = liveDFA.update(nowMs: newest) {
            pendingCrossings = update.crossings
        }
        return .frame(sessionId: config.sessionId, seq: seq, emittedAtMs: nowMs, metrics: metrics(), behavior: behavior())
    }

    private mutating func dfaThresholdEvents(nowMs: Int64) -> [SessionEvent] {
        defer { pendingCrossings = [] }
        return pendingCrossings.map { .dfaThreshold(sessionId: config.sessionId, emittedAtMs: nowMs, crossing: $0) }
    }

    private mutating func makeRawFrame(nowMs: Int64) -> SessionEvent? {
        guard !window.isEmpty else { return nil }
        rawSeq += 1
        return .biosignalFrame(sessionId: config.sessionId, seq: rawSeq, emittedAtMs: nowMs, samples: window.samples)
    }

    static func nextTick(after tick: Int64, now: Int64, intervalSec: Int) -> Int64 {
        let step = Int64(intervalSec) * 1000
        var next = tick + step
        if next <= now { next += ((now - next) / step + 1) * step }
        return next
    }
}
