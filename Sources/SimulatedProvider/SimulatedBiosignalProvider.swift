import Foundation
import GatewayEngine
import HRVAnalysis

/// A provider that needs no hardware.
///
/// - `sdkMock`: the Synheart SDK's mock, one sample a second (the first at once),
///   `bpm = clamp(72 + 5 sin(2π t / 4) + U(-2, 2), 40...200)`, `rr_intervals_ms = [60000 / bpm]`, source `mock`.
/// - `realistic`: a beat-by-beat heart with a slow rate drift, respiratory sinus arrhythmia at a chosen breathing
///   rate and occasional ectopic beats, delivered as a strap does: one notification a second carrying the RR
///   intervals of the beats completed since the previous one. Source `simulated`, so HRV and breathing are exercised.
/// - `exerciseRamp`: the same delivery, beats from `ExerciseRamp` (HR 100 -> 175 bpm over 20 minutes, beat-to-beat
///   correlation falling so that live DFA alpha1 crosses 0.75 and then 0.5; docs/hrv.md §10), then the same beats in
///   reverse (a 20-minute cool-down, alpha1 rising back through 0.5 and 0.75), repeated.
///
/// Both are deterministic for a given seed and clock.
public final class SimulatedBiosignalProvider: BiosignalProvider {
    public enum Model: String, Sendable, CaseIterable {
        case sdkMock = "sdk-mock"
        case realistic
        case exerciseRamp = "exercise-ramp"
    }

    /// Parameters of the realistic model.
    public struct Physiology: Sendable, Equatable {
        public var meanHeartRateBpm: Double
        public var breathingRateBpm: Double
        /// Peak-to-mean RR modulation by breathing, in ms.
        public var rsaAmplitudeMs: Double
        /// Probability that a beat is premature (followed by a compensatory pause).
        public var ectopicProbability: Double
        /// A body following a pacer that changes rate (a resonance assessment): from each step's start (ms after
        /// the provider starts) it breathes at the step's rate with the step's RSA amplitude, the breathing phase
        /// running on without a jump. Empty: `breathingRateBpm` and `rsaAmplitudeMs` throughout.
        public var pacedSteps: [PacedStep] = []

        public struct PacedStep: Sendable, Equatable {
            public var startMs: Double
            public var rateBpm: Double
            public var rsaAmplitudeMs: Double
            public init(startMs: Double, rateBpm: Double, rsaAmplitudeMs: Double) {
                self.startMs = startMs
                self.rateBpm = rateBpm
                self.rsaAmplitudeMs = rsaAmplitudeMs
            }
        }

        /// A body following a resonance assessment's pacer: breathing at each step's rate from when that step starts
        /// (`offsetsMs`, from the provider's start), with the RSA of `paced(at:resonanceRateBpm:)`.
        public static func assessment(
            rates: [Double], offsetsMs: [Double], resonanceRateBpm: Double = 5.5
        ) -> Physiology {
            var p = paced(at: rates.first ?? 6, resonanceRateBpm: resonanceRateBpm)
            p.pacedSteps = zip(rates, offsetsMs).map { rate, start in
                PacedStep(startMs: start, rateBpm: rate,
                          rsaAmplitudeMs: paced(at: rate, resonanceRateBpm: resonanceRateBpm).rsaAmplitudeMs)
            }
            return p
        }

        /// The body a session's pacer asks for: a resonance assessment's steps, a pattern's rate, or, without a pacer,
        /// `unpaced` (by default 12 breaths/min). Step offsets assume the provider starts with the session (within a
        /// beat).
        public static func following(
            _ config: SessionConfig, resonanceRateBpm: Double = 5.5, unpaced: Physiology = Physiology()
        ) -> Physiology {
            if let plan = config.resonance {
                var offsets: [Double] = []
                var at = Double(BreathingCue.firstBreathAfterMs)
                for step in plan.steps {
                    offsets.append(at)
                    at += Double(step.pattern.cycleMs * Int64(step.breaths))
                }
                return assessment(rates: plan.steps.map(\.pattern.rateBpm), offsetsMs: offsets, resonanceRateBpm: resonanceRateBpm)
            }
            if let p = config.breathingPattern { return paced(at: p.rateBpm, resonanceRateBpm: resonanceRateBpm) }
            return unpaced
        }

        /// Respiratory sinus arrhythmia at `t` ms after the start (ms added to the interval).
        func rsa(atMs t: Double) -> Double {
            guard !pacedSteps.isEmpty else {
                return rsaAmplitudeMs * sin(2 * Double.pi * (breathingRateBpm / 60) * t / 1000)
            }
            var phase = 0.0
            var from = 0.0
            var current = pacedSteps[0]
            for step in pacedSteps.dropFirst() where step.startMs <= t {
                phase += 2 * Double.pi * (current.rateBpm / 60) * (step.startMs - from) / 1000
                from = step.startMs
                current = step
            }
            phase += 2 * Double.pi * (current.rateBpm / 60) * (t - from) / 1000
            return current.rsaAmplitudeMs * sin(phase)
        }

        /// A body breathing at `pacedRateBpm`, as a paced-breathing user does, whose RSA is largest at
        /// `resonanceRateBpm` (about three times the spontaneous amplitude there, falling off over about ±1 /min): the
        /// simulated answer to a pacer, so that coherence and the resonance search can be shown without a strap.
        public static func paced(at pacedRateBpm: Double, resonanceRateBpm: Double = 5.5) -> Physiology {
            let offset = (pacedRateBpm - resonanceRateBpm) / 1.0
            return Physiology(breathingRateBpm: pacedRateBpm, rsaAmplitudeMs: 45 * (1 + 2 * exp(-offset * offset)))
        }

        public init(
            meanHeartRateBpm: Double = 64,
            breathingRateBpm: Double = 12,
            rsaAmplitudeMs: Double = 45,
            ectopicProbability: Double = 0.01
        ) {
            self.meanHeartRateBpm = meanHeartRateBpm
            self.breathingRateBpm = breathingRateBpm
            self.rsaAmplitudeMs = rsaAmplitudeMs
            self.ectopicProbability = ectopicProbability
        }
    }

    public let model: Model
    /// The body of the realistic model; with `followsSessionPacing`, the body of a session without a pacer.
    public let physiology: Physiology
    /// When set, a session with a pacer (a breathing pattern or a resonance assessment, `ProviderSink.session`) gets
    /// the body that pacer asks for, `Physiology.following(_:resonanceRateBpm:)` with this resonance: the provider
    /// follows whichever session the engine starts, as `serve` needs when a phone starts a breathing session.
    public let followsSessionPacing: Double?
    public let deviceId: String?
    private let clock: any SessionClock
    private let seed: UInt64

    private struct Run {
        var timer: (any ScheduledAction)?
        var generator: SplitMix64
        /// Wall clock at the start: sample timestamps are `startMs` plus the tick's offset.
        var startMs: Int64
        /// Monotonic clock at the start: ticks are scheduled from it.
        var startMonoMs: Int64
        var tick: Int64 = 0
        /// Realistic model: time of the last beat and pending compensatory pause, both relative to the start, in ms.
        var lastBeatMs: Double = 0
        var compensation: Double = 0
        /// Realistic model: the interval of the beat in progress, drawn once when the previous beat ends (a beat
        /// spanning a notification is reported by a later one, with the same interval).
        var nextIntervalMs: Double?
        /// Exercise-ramp model: the precomputed beats and the next one to deliver.
        var ramp: [Double] = []
        var rampIndex = 0
        /// The body of this run (`physiology`, or the one the session's pacer asks for).
        var physiology: Physiology
        var sink: ProviderSink
    }

    private let run = Locked<Run?>(nil)

    public var name: String { model == .sdkMock ? "mock" : "simulated" }
    public var isAvailable: Bool { true }

    public init(
        model: Model = .realistic,
        physiology: Physiology = Physiology(),
        followsSessionPacing resonanceRateBpm: Double? = nil,
        seed: UInt64 = 1,
        deviceId: String? = nil,
        clock: any SessionClock = SystemSessionClock()
    ) {
        self.model = model
        self.physiology = physiology
        self.followsSessionPacing = resonanceRateBpm
        self.seed = seed
        self.deviceId = deviceId ?? (model != .sdkMock ? "simulated-strap" : nil)
        self.clock = clock
    }

    public func startStreaming(into sink: ProviderSink) async throws {
        let start = clock.nowMs()
        let ramp = model == .exerciseRamp ? Self.rampBeats(seed: seed) : []
        let startMono = clock.monotonicMs()
        var body = physiology
        if let resonance = followsSessionPacing, let session = sink.session {
            body = .following(session, resonanceRateBpm: resonance, unpaced: physiology)
        }
        run.withLock { [body] in
            $0 = Run(
                generator: SplitMix64(seed: seed), startMs: start, startMonoMs: startMono, ramp: ramp,
                physiology: body, sink: sink)
        }
        sink.status(SensorStatus(source: name, deviceId: deviceId, state: .streaming))
        if model == .sdkMock { emitTick() } else { scheduleNext() }
    }

    public func stopStreaming() async {
        let stopped = run.withLock { r -> (timer: (any ScheduledAction)?, sink: ProviderSink)? in
            defer { r = nil }
            return r.map { ($0.timer, $0.sink) }
        }
        stopped?.timer?.cancel()
        // As a strap does: the last status is not `streaming` (the relay's and MQTT's retained state would keep it).
        stopped?.sink.status(SensorStatus(source: name, deviceId: deviceId, state: .disconnected, message: "stopped"))
    }

    private func scheduleNext() {
        run.withLock { r in
            guard var current = r else { return }
            current.tick += 1
            let due = current.startMonoMs + current.tick * 1000
            current.timer = clock.schedule(atMonotonicMs: due) { [weak self] in self?.emitTick() }
            r = current
        }
    }

    private func emitTick() {
        let delivery = run.withLock { r -> (ProviderSink, BiosignalSample)? in
            guard var current = r else { return nil }
            let now = current.startMs + current.tick * 1000
            let sample: BiosignalSample
            switch model {
            case .sdkMock:
                let t = Double(current.tick)
                let noise = current.generator.uniform(in: -2.0...2.0)
                let bpm = min(200, max(40, 72 + 5 * sin(2 * Double.pi * t / 4) + noise))
                sample = BiosignalSample(timestampMs: now, bpm: bpm, rrIntervalsMs: [60000 / bpm], deviceId: deviceId, source: name)
            case .realistic, .exerciseRamp:
                sample = realisticSample(&current, nowMs: now)
            }
            r = current
            return (current.sink, sample)
        }
        guard let (sink, sample) = delivery else { return }
        sink.send(sample)
        scheduleNext()
    }

    /// The exercise-ramp model's beats, delivered in a loop: the ramp up, then the same beats back down. Repeating
    /// the ramp alone jumped from 175 to 100 bpm in one beat every 20 minutes, and the window holding that step
    /// published an alpha1 of 1.7 with "up" crossings of both thresholds at once.
    static func rampBeats(seed: UInt64) -> [Double] {
        let up = ExerciseRamp(seed: seed).rrMs().map { $0.rounded() }
        return up + up.reversed()
    }

    /// Beats completed since the previous notification, as a strap notifies them: 0, 1 or 2 intervals a second,
    /// adding up to the time that passed (the last one ends at most a second before the notification).
    private func realisticSample(_ r: inout Run, nowMs: Int64) -> BiosignalSample {
        let elapsed = Double(nowMs - r.startMs)
        var rr: [Double] = []
        while true {
            let interval = r.nextIntervalMs ?? drawInterval(&r)
            r.nextIntervalMs = interval
            guard r.lastBeatMs + interval <= elapsed else { break }
            r.lastBeatMs += interval
            r.nextIntervalMs = nil
            rr.append(interval)
        }
        let bpm = rr.isEmpty
            ? r.physiology.meanHeartRateBpm.rounded()
            : (60000 / (rr.reduce(0, +) / Double(rr.count))).rounded()
        return BiosignalSample(
            timestampMs: nowMs,
            bpm: bpm,
            rrIntervalsMs: rr,
            deviceId: deviceId,
            source: name,
            contact: .contact,
            rrRaw1024: rr.map { UInt16(min(65535, ($0 * 1.024).rounded())) },
            sequence: UInt64(r.tick)
        )
    }

    /// The interval of the beat that starts at `r.lastBeatMs`: slow drift, respiratory sinus arrhythmia, noise, and
    /// now and then a premature beat followed by its compensatory pause.
    private func drawInterval(_ r: inout Run) -> Double {
        if !r.ramp.isEmpty {
            defer { r.rampIndex += 1 }
            return r.ramp[r.rampIndex % r.ramp.count]
        }
        let t = r.lastBeatMs
        let drift = 3 * sin(2 * Double.pi * t / 120_000)
        let base = 60000 / (r.physiology.meanHeartRateBpm + drift)
        let rsa = r.physiology.rsa(atMs: t)
        var interval = base + rsa + r.generator.gaussian() * 8
        if r.compensation > 0 {
            interval = r.compensation
            r.compensation = 0
        } else if r.generator.uniform(in: 0...1) < r.physiology.ectopicProbability {
            r.compensation = interval * 1.3
            interval *= 0.7
        }
        return interval.rounded()
    }
}

/// A small, fast, seedable generator (Steele, Lea & Flood 2014), so simulations repeat exactly.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    public mutating func uniform(in range: ClosedRange<Double>) -> Double {
        let unit = Double(next() >> 11) / Double(1 << 53)
        return range.lowerBound + unit * (range.upperBound - range.lowerBound)
    }

    /// Standard normal (Box-Muller).
    public mutating func gaussian() -> Double {
        let u1 = max(uniform(in: 0...1), 1e-12)
        let u2 = uniform(in: 0...1)
        return (-2 * log(u1)).squareRoot() * cos(2 * Double.pi * u2)
    }
}
