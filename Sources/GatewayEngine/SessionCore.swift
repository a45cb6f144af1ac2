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
    /// With several devices, the one the top level speaks for; decided at each frame.
    private(set) var primary = PrimaryDevice()
    /// Paced breathing: the pacer's steps (one for a pattern, several for a resonance assessment), and the next cue
    /// to emit.
    private let pacer: PacerSchedule?
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
        pacer = PacerSchedule(config: config, originMs: startedMonoMs + BreathingCue.firstBreathAfterMs)
    }

    /// When cue `index` is emitted (monotonic): its phase's start less the lead.
    private func cueDeadline(_ index: Int) -> Int64? {
        pacer?.cue(index).map { $0.startMs - BreathingCue.cueLeadMs }
    }

    /// The paced breaths on the samples' clock at `monotonicMs`, for the metrics: the step under way (or the last one).
    private func pacing(atMonotonicMs now: Int64) -> SessionMetrics.Pacing? {
        guard let pacer else { return nil }
        let step = pacer.step(atMs: now)
        let segment = pacer.segments[step]
        return SessionMetrics.Pacing(
            rateBpm: segment.pattern.rateBpm, originMs: startedAtMs + (segment.originMs - startedMonoMs),
            cycleMs: segment.pattern.cycleMs, step: config.resonance == nil ? nil : step + 1)
    }

    /// The assessment's steps on the samples' clock.
    private var assessmentSteps: [ResonanceAssessment.Step]? {
        guard let plan = config.resonance, let pacer else { return nil }
        // The plan's rates as asked (6.5, not the 6.50054 of a breath rounded to whole ms).
        return zip(plan.rates, pacer.segments).map { rate, segment in
            ResonanceAssessment.Step(
                rateBpm: rate, originMs: Double(startedAtMs + (segment.originMs - startedMonoMs)),
                cycleMs: Double(segment.pattern.cycleMs), breaths: segment.breaths ?? 0)
        }
    }

    var started: SessionEvent { .started(sessionId: config.sessionId, startedAtMs: startedAtMs) }

    /// The earliest pending deadline (monotonic).
    var nextDeadlineMs: Int64 { min(nextFrameMs, nextRawMs ?? .max, endMs, cueDeadline(cueIndex) ?? .max) }

    mutating func append(_ sample: BiosignalSample) {
        newestTimeMs = max(newestTimeMs ?? Double(sample.timestampMs), Double(sample.timestampMs))
        // Raw waveform chunks (ECG) carry no heart rate: they skip the metrics and go out once, in the next raw frame.
        if sample.isWaveformOnly {
            if config.includeRawSamples { pendingWaveform.append(sample) }
            if let acc = sample.accG, !acc.isEmpty { appendMotion(sample, acc) }
            if sample.ecgUv?.isEmpty == false { appendECG(sample) }
        } else {
            window.append(sample)
            liveDFA.append(sample)
            if config.resonance != nil, sample.rrIntervalsMs?.isEmpty == false { assessmentSamples.append(sample) }
        }
        pruneWaveforms()
    }

    /// The newest time a sample holds (its own, or an accelerometer sample's within a chunk), of any source and kind:
    /// the ECG and motion windows end there, as the sample window does, so a strap that stopped sending ECG (or every
    /// strap, while a heart rate goes on) ages out of them.
    private var newestTimeMs: Double?

    /// Drops the ECG chunks and accelerometer samples older than the window before the newest sample. (They were cut
    /// from the newest chunk of their own kind: when all ECG stopped, its last minute stayed in every frame and the
    /// summary for the rest of the session.)
    private mutating func pruneWaveforms() {
        guard let newest = newestTimeMs else { return }
        let cutoff = newest - Double(config.profile.windowSec) * 1000
        for (d, chunks) in ecg {
            guard let first = chunks.first, Double(first.timestampMs) <= cutoff else { continue }
            let kept = chunks.drop { Double($0.timestampMs) <= cutoff }
            ecg[d] = kept.isEmpty ? nil : Array(kept)
        }
        for (d, samples) in motion {
            guard let first = samples.first, first.timeMs <= cutoff else { continue }
            let kept = samples.drop { $0.timeMs <= cutoff }
            motion[d] = kept.isEmpty ? nil : Array(kept)
        }
    }

    /// Accelerometer samples of the last `windowSec` per device (before the newest sample), for the motion metrics.
    private(set) var motion: [String: [(timeMs: Double, g: SIMD3<Double>)]] = [:]

    private mutating func appendMotion(_ sample: BiosignalSample, _ acc: [SIMD3<Double>]) {
        let device = sample.deviceId ?? sample.source
        let rate = sample.accRateHz ?? 0
        var own = motion[device, default: []]
        for (k, g) in acc.enumerated() {
            own.append((Double(sample.timestampMs) + (rate > 0 ? Double(k) * 1000 / rate : 0), g))
        }
        motion[device] = own
        if let last = own.last?.timeMs { newestTimeMs = max(newestTimeMs ?? last, last) }
    }

    /// ECG chunks of the last `windowSec` per device, for R peaks.
    private(set) var ecg: [String: [BiosignalSample]] = [:]
    /// The devices that sent ECG, in the order they first did.
    private var ecgDevices: [String] = []

    private mutating func appendECG(_ sample: BiosignalSample) {
        let device = sample.deviceId ?? sample.source
        if !ecgDevices.contains(device) { ecgDevices.append(device) }
        ecg[device, default: []].append(sample)
    }

    /// The window's samples by device, the camera's left out (the devices `PrimaryDevice` chooses from).
    private var deviceGroups: [SessionMetrics.DeviceGroup] {
        SessionMetrics.groupByDevice(window.samples.filter { $0.source != SessionMetrics.cameraSource })
    }

    /// R peaks of each device's ECG against that device's own RR in the window. With several devices each has its
    /// own in `devices`; the top level has those of the device whose HRV is there (`primary`), or, when that one
    /// sent no ECG, of the first device that did. (Before, the device with the most chunks in the window: with two
    /// straps that changed from frame to frame, and with it the top-level ECG heart rate.)
    private func applyECG(to m: inout SessionMetrics, groups: [SessionMetrics.DeviceGroup], primary: String?) {
        let top = primary.flatMap { ecg[$0] == nil ? nil : $0 } ?? ecgDevices.first { ecg[$0]?.isEmpty == false }
        for device in ecgDevices {
            guard let chunks = ecg[device], let rate = chunks.first?.ecgRateHz, rate > 0 else { continue }
            let rr = ECGRPeaks.rrIntervals(ECGRPeaks.runs(chunks, rateHz: rate), rateHz: rate)
            guard !rr.isEmpty else { continue }
            let strapRR = groups.first { $0.id == device }?.samples.flatMap { $0.rrIntervalsMs ?? [] } ?? []
            func apply(_ d: inout SessionMetrics) {
                d.ecgRRCount = rr.count
                d.ecgHrBpm = SessionMetrics.round1(60000 / (rr.reduce(0, +) / Double(rr.count)))
                d.ecgRRAgreementMs = ECGRPeaks.agreementMs(ecgRR: rr, strapRR: strapRR).map { ($0 * 10).rounded() / 10 }
            }
            if device == top { apply(&m) }
            if m.devices?[device] != nil { apply(&m.devices![device]!) }
        }
    }

    /// `motion_rms_g` per device (in `devices` when several contribute), and at the top level over every device's
    /// samples, each about its own device's mean: two straps sit at different angles, so their samples have
    /// different means (gravity), which is orientation, not motion.
    private func applyMotion(to m: inout SessionMetrics) {
        var squares = 0.0
        var count = 0
        for (device, own) in motion where !own.isEmpty {
            guard let rms = SessionMetrics.motionRMS(own.map(\.g)) else { continue }
            squares += rms * rms * Double(own.count)
            count += own.count
            if m.devices?[device] != nil {
                m.devices![device]!.motionRmsG = (rms * 10000).rounded() / 10000
                m.devices![device]!.motionSampleCount = own.count
            }
        }
        guard count > 0 else { return }
        m.motionRmsG = ((squares / Double(count)).squareRoot() * 10000).rounded() / 10000
        m.motionSampleCount = count
    }

    /// Waveform chunks received since the last raw frame.
    private(set) var pendingWaveform: [BiosignalSample] = []

    /// A resonance assessment's samples with RR, kept for the summary (some 700 beats for the default protocol).
    private(set) var assessmentSamples: [BiosignalSample] = []

    /// Emits everything due at or before `now` (monotonic). At one instant the order is: frame, raw frame, then the summary, so
    /// when the duration is a multiple of the interval the last frame precedes the summary. A repeating timer that
    /// fell behind fires once and resumes on its own grid, like a run-loop timer.
    mutating func fire(at now: Instant, behavior: () -> BehaviorSnapshot?) -> (events: [SessionEvent], finished: Bool) {
        let nowMs = now.monotonicMs
        var events: [SessionEvent] = []
        while nextDeadlineMs <= nowMs {
            if let deadline = cueDeadline(cueIndex), deadline <= nowMs, deadline < endMs, let next = pacer?.cue(cueIndex) {
                // A cue that fell behind (a loaded machine, a stalled process) is still sent while its phase lasts,
                // with the phase's true start (already past), so a display can show the rest of the phase rather
                // than the one before; a cue whose phase has ended is skipped: it would mislead.
                if next.startMs + next.durationMs > nowMs {
                    let pattern = pacer!.segments[next.step].pattern
                    var cue = BreathingCue(
                        phase: next.phase, phaseDurationMs: next.durationMs, cycle: next.cycle,
                        startsAtMs: now.wallMs + (next.startMs - nowMs), pattern: pattern.name, rateBpm: pattern.rateBpm)
                    if config.resonance != nil {
                        cue.assessmentStep = next.step + 1
                        cue.assessmentSteps = pacer!.segments.count
                    }
                    events.append(.breathingCue(sessionId: config.sessionId, emittedAtMs: now.wallMs, cue: cue))
                }
                cueIndex += 1
            } else if nextFrameMs <= nowMs, nextFrameMs <= (nextRawMs ?? .max), nextFrameMs <= endMs {
                if let frame = makeFrame(at: now, behavior: behavior) {
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
            metrics: metrics(atMonotonicMs: now.monotonicMs, summary: true),
            behavior: behavior()
        )
    }

    /// The metrics at `monotonicMs`; a summary's carry the resonance assessment's result.
    func metrics(atMonotonicMs now: Int64, summary: Bool = false) -> SessionMetrics {
        let groups = deviceGroups
        var m = SessionMetrics.compute(
            window: window.samples, hsi: hsi, options: hrvOptions, pacing: pacing(atMonotonicMs: now), primary: primary)
        // The top level's live DFA is the primary device's own, even when the primary changed since the last
        // estimate (a strap taken off): another heart's alpha1 under this one's name would mislead, so until the new
        // primary's first estimate there is none.
        if let id = primary.id, !liveDFA.latestByDevice.isEmpty {
            m.liveDFA = liveDFA.latestByDevice[id]
        } else {
            m.liveDFA = liveDFA.latest
        }
        for (device, estimate) in liveDFA.latestByDevice where m.devices?[device] != nil {
            m.devices![device]!.liveDFA = estimate
        }
        applyECG(to: &m, groups: groups, primary: primary.choose(groups))
        applyMotion(to: &m)
        if summary, let steps = assessmentSteps {
            // One person's beats: the session's primary device while its beats cover at least the share the top
            // level keeps it by over the whole assessment, else the device whose beats cover the most (a count of
            // RR would pick the faster heart).
            let groups = SessionMetrics.groupByDevice(assessmentSamples)
            let judged = primary.choose(groups)
            let beats = groups.first { $0.id == judged }?.samples ?? []
            m.resonance = ResonanceAssessment.assess(steps: steps, beats: SessionMetrics.beats(of: beats))
            if groups.count > 1 { m.resonanceDeviceId = judged }
        }
        return m
    }

    /// Crossings found by the live DFA estimate made for the frame just built.
    private var pendingCrossings: [DFAThresholdCrossing] = []

    private mutating func makeFrame(at now: Instant, behavior: () -> BehaviorSnapshot?) -> SessionEvent? {
        guard !window.isEmpty else { return nil }
        seq += 1
        primary.update(deviceGroups)
        // Live DFA runs on the sample clock (the newest sample's time), every 20 s at the first frame due, for every
        // device; the top level's is the primary device's.
        if let newest = window.samples.last?.timestampMs, let update = liveDFA.update(nowMs: newest, device: primary.id) {
            pendingCrossings = update.crossings
        }
        return .frame(
            sessionId: config.sessionId, seq: seq, emittedAtMs: now.wallMs, metrics: metrics(atMonotonicMs: now.monotonicMs),
            behavior: behavior())
    }

    private mutating func dfaThresholdEvents(wallMs: Int64) -> [SessionEvent] {
        defer { pendingCrossings = [] }
        return pendingCrossings.map { .dfaThreshold(sessionId: config.sessionId, emittedAtMs: wallMs, crossing: $0) }
    }

    private mutating func makeRawFrame(wallMs: Int64) -> SessionEvent? {
        guard !window.isEmpty || !pendingWaveform.isEmpty else { return nil }
        rawSeq += 1
        defer { pendingWaveform = [] }
        return .biosignalFrame(
            sessionId: config.sessionId, seq: rawSeq, emittedAtMs: wallMs, samples: window.samples + pendingWaveform)
    }

    static func nextTick(after tick: Int64, now: Int64, intervalSec: Int) -> Int64 {
        let step = Int64(intervalSec) * 1000
        var next = tick + step
        if next <= now { next += ((now - next) / step + 1) * step }
        return next
    }
}

extension ECGRPeaks {
    /// The runs of ECG in `chunks` (one device's, in order) at `rateHz`: chunks that follow each other by their sample
    /// count (within 20 ms) with no gap flagged make one run; chunks at another rate are left out.
    /// Each run carries the rate its chunks' times measure (`WaveformRate.measured`), so that R-peak intervals are
    /// in the sensor's real time, not the nominal rate's.
    public static func runs(_ chunks: [BiosignalSample], rateHz rate: Double) -> [Run] {
        var runs: [Run] = []
        var starts: [[(index: Int, timeMs: Double)]] = []
        var expectedNext: Double?
        for c in chunks where c.ecgRateHz == rate {
            let values = (c.ecgUv ?? []).map(Double.init)
            let t = Double(c.timestampMs)
            if let e = expectedNext, !c.gapBefore, abs(t - e) <= 20, !runs.isEmpty {
                starts[starts.count - 1].append((runs[runs.count - 1].samples.count, t))
                runs[runs.count - 1].samples += values
            } else {
                runs.append(Run(startMs: t, samples: values))
                starts.append([(0, t)])
            }
            expectedNext = t + Double(values.count) * 1000 / rate
        }
        for i in runs.indices {
            runs[i].measuredRateHz = WaveformRate.measured(chunkStarts: starts[i], nominalHz: rate)?.rateHz
        }
        return runs
    }
}
