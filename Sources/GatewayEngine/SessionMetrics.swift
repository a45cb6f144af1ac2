import HRVAnalysis

/// The `metrics` dictionary of `session_frame` and `session_summary`.
///
/// The first seven keys are the SDK's. The others are computed locally and present only when their inputs are:
/// RR-derived HRV and respiration when samples carry RR intervals, camera estimates when a camera contributes,
/// and a per-device breakdown when more than one device contributes.
public struct SessionMetrics: Sendable, Equatable {
    public var hrMeanBpm: Double = 0
    public var hrSdnnMs: Double = 0
    public var rmssdMs: Double = 0
    public var pnn50: Double = 0
    public var sampleCount: Int = 0
    public var startMs: Int64?
    public var endMs: Int64?

    public var rrCount: Int?
    public var hrFromRRBpm: Double?
    public var artifactCount: Int?
    /// Successive differences `rmssd_ms` and `pnn50` were computed from (after the median correction, only those
    /// between two measured intervals; docs/hrv.md §2). Absent when an ingested `hrv.*` value overrides them.
    public var successiveDifferences: Int?
    public var respRateRRBpm: Double?
    public var respRateRRConfidence: Double?
    /// Frequency-domain and nonlinear HRV (`vlf_ms2` ... `stress_index`), each present only when the window is long
    /// enough for it (see docs/hrv.md).
    public var extendedHRV: [String: Double] = [:]
    /// The latest live DFA alpha1 estimate (every 20 s over the last 120 s of RR; docs/hrv.md §10).
    public var liveDFA: DFAEstimate?

    /// Paced breathing (docs/hrv.md §12): the paced rate, RSA amplitude averaged over the whole paced breaths in the
    /// window, how many, adherence of the RR-derived breathing rate to the paced one, and coherence.
    public var pacedBreathingRateBpm: Double?
    public var rsaAmplitudeBpm: Double?
    public var rsaBreaths: Int?
    public var breathingAdherence: Double?
    public var coherence: Double?
    public var coherencePeakHz: Double?
    /// In a resonance assessment: the step under way (from 1), and in the summary the assessment's result
    /// (docs/hrv.md §13).
    public var assessmentStep: Int?
    public var resonance: ResonanceAssessment.Result?
    /// With several devices: whose beats the resonance assessment judged (`resonance_assessment.device_id`).
    public var resonanceDeviceId: String?

    /// Motion from accelerometer samples in the window (Synheart's names): the RMS of each sample's distance from
    /// the window's mean vector (gravity and posture removed), in g, and how many samples.
    public var motionRmsG: Double?
    public var motionSampleCount: Int?
    /// From the raw ECG in the window (docs/hrv.md §14): R-to-R intervals found, the heart rate they give, and the
    /// median difference from the strap's own RR once aligned (ms).
    public var ecgRRCount: Int?
    public var ecgHrBpm: Double?
    public var ecgRRAgreementMs: Double?

    public var cameraHrBpm: Double?
    public var cameraConfidence: Double?
    public var breathingRateBpm: Double?
    public var cameraSampleCount: Int?

    /// Per device id, when several devices contribute.
    public var devices: [String: SessionMetrics]?
    /// With several devices, the one whose values the top level carries (`PrimaryDevice`); absent when none sent a
    /// heart rate.
    public var primaryDevice: String?

    public init() {}

    public var jsonValue: JSONValue {
        var o: [String: JSONValue] = [
            "hr_mean_bpm": .double(hrMeanBpm),
            "hr_sdnn_ms": .double(hrSdnnMs),
            "rmssd_ms": .double(rmssdMs),
            "pnn50": .double(pnn50),
            "sample_count": .int(Int64(sampleCount)),
        ]
        func put(_ key: String, _ v: Double?) { if let v, v.isFinite { o[key] = .double(v) } }
        func put(_ key: String, _ v: Int?) { if let v { o[key] = .int(Int64(v)) } }
        if let s = startMs { o["start_ms"] = .int(s) }
        if let e = endMs { o["end_ms"] = .int(e) }
        put("rr_count", rrCount)
        put("hr_from_rr_bpm", hrFromRRBpm)
        put("artifact_count", artifactCount)
        put("successive_differences", successiveDifferences)
        put("resp_rate_rr_bpm", respRateRRBpm)
        put("resp_rate_rr_confidence", respRateRRConfidence)
        for (key, value) in extendedHRV where value.isFinite { o[key] = .double(value) }
        if let d = liveDFA {
            put("live_dfa_alpha1", d.alpha1)
            put("live_dfa_artifact_percent", d.artifactPercent)
            put("live_dfa_rr_count", d.rrCount)
            if let r = d.withheldReason { o["live_dfa_withheld"] = .string(r) }
        }
        put("paced_breathing_rate_bpm", pacedBreathingRateBpm)
        put("rsa_amplitude_bpm", rsaAmplitudeBpm)
        put("rsa_breaths", rsaBreaths)
        put("breathing_adherence", breathingAdherence)
        put("coherence", coherence)
        put("coherence_peak_hz", coherencePeakHz)
        put("assessment_step", assessmentStep)
        if let r = resonance { o["resonance_assessment"] = Self.json(r, deviceId: resonanceDeviceId) }
        put("ecg_rr_count", ecgRRCount)
        put("ecg_hr_bpm", ecgHrBpm)
        put("ecg_rr_agreement_ms", ecgRRAgreementMs)
        put("motion_rms_g", motionRmsG)
        put("motion_sample_count", motionSampleCount)
        put("camera_hr_bpm", cameraHrBpm)
        put("camera_confidence", cameraConfidence)
        put("breathing_rate_bpm", breathingRateBpm)
        put("camera_sample_count", cameraSampleCount)
        if let devices {
            // The top level keeps the SDK's zeros for a window without beats; a device entry is this gateway's own,
            // and a strap that sends the heart rate alone has no HRV rather than an RMSSD of 0 ms.
            o["devices"] = .object(devices.mapValues { d in
                guard (d.rrCount ?? 0) == 0, case .object(var e) = d.jsonValue else { return d.jsonValue }
                for key in ["rmssd_ms", "hr_sdnn_ms", "pnn50"] { e[key] = nil }
                return .object(e)
            })
        }
        if let primaryDevice { o["primary_device"] = .string(primaryDevice) }
        return .object(o)
    }
}

extension SessionMetrics {
    /// Source name of camera samples; their values go under the `camera_*` keys, never into `hr_mean_bpm`
    /// when another source is present.
    public static let cameraSource = "camera_rppg"

    /// Gap between two notifications, beyond the RR they carry, that breaks an RR segment.
    static let segmentGapToleranceMs: Double = 2500

    /// The ingested HSI keys the metrics read (the SDK's flat keys); every other key is ignored.
    public static let hsiKeys = ["hrv.sdnn_ms", "hrv.rmssd_ms", "hrv.pnn50"]

    /// `metrics` with nested objects flattened into the SDK's dotted keys (`{"hrv":{"rmssd_ms":42}}` is
    /// `{"hrv.rmssd_ms":42}`), as an HSI document nests them; a flat key given too wins.
    public static func hsiFlattened(_ metrics: [String: JSONValue]) -> [String: JSONValue] {
        var flat = metrics.filter { $0.value.objectValue == nil }
        func add(_ prefix: String, _ o: [String: JSONValue]) {
            for (k, v) in o {
                if let inner = v.objectValue { add(prefix + "." + k, inner) } else if flat[prefix + "." + k] == nil {
                    flat[prefix + "." + k] = v
                }
            }
        }
        for (k, v) in metrics { if let inner = v.objectValue { add(k, inner) } }
        return flat
    }

    /// Why the HSI values the metrics would use cannot be heart-rate variability (a negative RMSSD, a pNN50 over
    /// 100: they went into frames and the recorded summary as given), or nil.
    public static func hsiOutOfRange(_ metrics: [String: JSONValue]) -> String? {
        let limits: [(String, ClosedRange<Double>)] = [
            ("hrv.sdnn_ms", 0...10_000), ("hrv.rmssd_ms", 0...10_000), ("hrv.pnn50", 0...100),
        ]
        for (key, range) in limits {
            guard let v = metrics[key]?.doubleValue, !range.contains(v) else { continue }
            return "\(key) must be \(Int(range.lowerBound)) to \(Int(range.upperBound)), got \(metrics[key]!.jsonString.prefix(40))"
        }
        return nil
    }

    /// The keys of `hsiKeys` that `metrics` (flattened) gives a number for.
    public static func hsiUsedKeys(_ metrics: [String: JSONValue]) -> [String] {
        hsiKeys.filter { metrics[$0]?.doubleValue != nil }
    }

    /// Computes the metrics over `window`. `hsi` holds the last ingested HSI metrics; its `hrv.sdnn_ms`,
    /// `hrv.rmssd_ms` and `hrv.pnn50` override the local values (the SDK's contract).
    /// The paced breaths of a breathing session: breath k starts at `originMs` + k·`cycleMs` (wall clock, the
    /// samples' clock).
    public struct Pacing: Sendable, Equatable {
        public var rateBpm: Double
        public var originMs: Int64
        public var cycleMs: Int64
        /// The resonance assessment's step (from 1); nil for a pattern.
        public var step: Int?
        public init(rateBpm: Double, originMs: Int64, cycleMs: Int64, step: Int? = nil) {
            self.rateBpm = rateBpm
            self.originMs = originMs
            self.cycleMs = cycleMs
            self.step = step
        }
    }

    public static func compute(
        window: [BiosignalSample],
        hsi: [String: JSONValue],
        options: HRVOptions,
        pacing: Pacing? = nil
    ) -> SessionMetrics {
        compute(window: window, hsi: hsi, options: options, pacing: pacing, primary: PrimaryDevice())
    }

    /// The same with a session's choice of top-level device so far (`PrimaryDevice`).
    static func compute(
        window: [BiosignalSample],
        hsi: [String: JSONValue],
        options: HRVOptions,
        pacing: Pacing?,
        primary: PrimaryDevice
    ) -> SessionMetrics {
        var m = SessionMetrics()
        m.sampleCount = window.count
        // Empty window: zeros, no start/end, ingested HRV ignored (the SDK forces zeros here).
        guard let first = window.first, let last = window.last else { return m }
        m.startMs = first.timestampMs
        m.endMs = last.timestampMs

        let camera = window.filter { $0.source == cameraSource }
        let others = window.filter { $0.source != cameraSource }
        let contributing = others.isEmpty ? window : others

        let groups = groupByDevice(contributing)
        // Top-level values are one device's (`PrimaryDevice`); with no heart rate from any device, every sample's.
        let top = primary.choose(groups).flatMap { id in groups.first { $0.id == id } }
        m.hrMeanBpm = meanHR(top?.samples ?? contributing)
        if let top, rrTotal(top.samples) > 0 { m.applyHRV(of: top.samples, options: options) }
        if groups.count > 1 {
            m.primaryDevice = top?.id
            var devices: [String: SessionMetrics] = [:]
            for g in groups {
                var d = SessionMetrics()
                d.sampleCount = g.samples.count
                d.startMs = g.samples.first?.timestampMs
                d.endMs = g.samples.last?.timestampMs
                d.hrMeanBpm = meanHR(g.samples)
                if rrTotal(g.samples) > 0 { d.applyHRV(of: g.samples, options: options) }
                devices[g.id] = d
            }
            m.devices = devices
        }

        if !camera.isEmpty {
            m.cameraSampleCount = camera.count
            if let lastCamera = camera.last {
                m.cameraHrBpm = round1(lastCamera.bpm)
                m.cameraConfidence = lastCamera.confidence
            }
            m.breathingRateBpm = camera.last(where: { $0.breathingRateBpm != nil })?.breathingRateBpm
        }

        if let pacing {
            m.pacedBreathingRateBpm = (pacing.rateBpm * 100).rounded() / 100
            m.assessmentStep = pacing.step
            if let top, rrTotal(top.samples) > 0 { m.applyPacedBreathing(of: top.samples, pacing: pacing) }
        }

        if let v = hsi["hrv.sdnn_ms"]?.doubleValue { m.hrSdnnMs = v }
        if let v = hsi["hrv.rmssd_ms"]?.doubleValue {
            m.rmssdMs = v
            m.successiveDifferences = nil
        }
        if let v = hsi["hrv.pnn50"]?.doubleValue {
            m.pnn50 = v
            m.successiveDifferences = nil
        }
        return m
    }

    mutating func applyHRV(of samples: [BiosignalSample], options: HRVOptions) {
        let result = HRVAnalyzer.analyze(segments: Self.rrSegments(samples), options: options)
        rrCount = result.rrCount
        artifactCount = result.artifactCount
        successiveDifferences = result.successiveDifferences
        hrFromRRBpm = result.hrFromRRBpm.map(Self.round1)
        if let v = result.sdnnMs { hrSdnnMs = v }
        if let v = result.rmssdMs { rmssdMs = v }
        if let v = result.pnn50 { pnn50 = v }
        respRateRRBpm = result.respirationRateBpm
        respRateRRConfidence = result.respirationConfidence
        extendedHRV = Dictionary(result.extendedMetricValues.map { ($0.key, $0.value) }, uniquingKeysWith: { a, _ in a })
    }

    /// RSA per paced breath, adherence and coherence (docs/hrv.md §12), from one device's beats.
    mutating func applyPacedBreathing(of samples: [BiosignalSample], pacing: Pacing) {
        let beats = Self.beats(of: samples)
        if let rsa = PacedBreathing.rsaAmplitude(
            beats: beats, originMs: Double(pacing.originMs), cycleMs: Double(pacing.cycleMs))
        {
            rsaAmplitudeBpm = Self.round1(rsa.meanBpm)
            rsaBreaths = rsa.breaths
        }
        if let measured = respRateRRBpm {
            breathingAdherence = PacedBreathing.adherence(measuredBpm: measured, pacedBpm: pacing.rateBpm)
                .map { ($0 * 1000).rounded() / 1000 }
        }
        if let longest = Self.rrSegments(samples).max(by: { $0.count < $1.count }),
            let c = PacedBreathing.coherence(longest, pacedHz: pacing.rateBpm / 60)
        {
            coherence = (c.score * 1000).rounded() / 1000
            coherencePeakHz = (c.peakHz * 10000).rounded() / 10000
        }
    }

    /// `motion_rms_g`: sqrt(mean |a_i − ā|²) over the accelerometer samples `a_i` (g), ā their mean.
    public static func motionRMS(_ a: [SIMD3<Double>]) -> Double? {
        guard !a.isEmpty else { return nil }
        let n = Double(a.count)
        let mean = a.reduce(SIMD3<Double>(0, 0, 0), +) / n
        let sum = a.reduce(0.0) { acc, v in
            let d = v - mean
            return acc + (d * d).sum()
        }
        return (sum / n).squareRoot()
    }

    /// One device's beats in time: each notification's last interval ends at its timestamp, earlier ones before it.
    static func beats(of samples: [BiosignalSample]) -> [PacedBreathing.Beat] {
        var beats: [PacedBreathing.Beat] = []
        for s in samples {
            let rr = (s.rrIntervalsMs ?? []).filter { $0.isFinite && $0 > 0 }
            var end = Double(s.timestampMs)
            var own: [PacedBreathing.Beat] = []
            for r in rr.reversed() {
                own.append(PacedBreathing.Beat(endMs: end, rrMs: r))
                end -= r
            }
            beats += own.reversed()
        }
        return beats
    }

    /// The `resonance_assessment` object of a summary; `deviceId` names the device judged when there were several.
    public static func json(_ r: ResonanceAssessment.Result, deviceId: String?) -> JSONValue {
        var o: [String: JSONValue] = [
            "steps": .array(r.steps.map { step in
                var s: [String: JSONValue] = [
                    "rate_bpm": .double(step.rateBpm), "beats": .int(Int64(step.beats)), "coverage": .double(step.coverage),
                    "rsa_breaths": .int(Int64(step.rsaBreaths)),
                ]
                if let v = step.lfPeakPowerMs2 { s["lf_peak_power_ms2"] = .double(v) }
                if let v = step.lfPeakHz { s["lf_peak_hz"] = .double(v) }
                if let v = step.rsaAmplitudeBpm { s["rsa_amplitude_bpm"] = .double(v) }
                if let v = step.score { s["score"] = .double((v * 1000).rounded() / 1000) }
                return .object(s)
            }),
        ]
        if let rate = r.resonanceRateBpm { o["resonance_rate_bpm"] = .double(rate) }
        // An assessment stopped early, or with a step whose beats were lost, names no resonance rate: it says how
        // far it got and which of the steps it could score did best.
        if !r.isComplete {
            o["complete"] = .bool(false)
            o["scored_steps"] = .int(Int64(r.scoredSteps))
            if let best = r.bestScoredRateBpm { o["best_scored_rate_bpm"] = .double(best) }
        }
        if let deviceId { o["device_id"] = .string(deviceId) }
        return .object(o)
    }

    /// Splits the RR intervals of one device into uninterrupted runs. A run ends at a flagged gap, a sample without
    /// skin contact, a jump in `notification_seq` (a notification lost, as the exports' `segment_start` says), or when
    /// the time since the previous sample with RR exceeds the RR the later one carries by more than the tolerance. A
    /// notification without RR but with contact does not end a run: a strap sends one every second and no beat ended
    /// in that second whenever an interval spans it (normal below about 60 bpm); lost beats show up in the time check.
    public static func rrSegments(_ samples: [BiosignalSample]) -> [[Double]] {
        rrRuns(samples).map(\.rrMs)
    }

    /// The runs of `rrSegments`, each with the time of the notification that reported its last beat (epoch ms).
    public static func rrRuns(_ samples: [BiosignalSample]) -> [(rrMs: [Double], endMs: Int64)] {
        var segments: [(rrMs: [Double], endMs: Int64)] = []
        var current: [Double] = []
        var previous: BiosignalSample?
        var pendingBreak = false
        var lastSequence: UInt64?
        for s in samples {
            let rr = (s.rrIntervalsMs ?? []).filter { $0.isFinite && $0 > 0 }
            // A sample without a number (hand-made, or another source's) neither breaks nor hides a jump.
            let lost = lastSequence.map { last in s.sequence.map { $0 != last &+ 1 } ?? false } ?? false
            if let q = s.sequence { lastSequence = q }
            pendingBreak = pendingBreak || s.gapBefore || s.contact == .noContact || lost
            guard !rr.isEmpty else { continue }
            var breaks = pendingBreak
            if let p = previous, !breaks {
                let elapsed = Double(s.timestampMs - p.timestampMs)
                if elapsed - rr.reduce(0, +) > segmentGapToleranceMs { breaks = true }
            }
            if breaks, !current.isEmpty, let p = previous {
                segments.append((current, p.timestampMs))
                current = []
            }
            current.append(contentsOf: rr)
            previous = s
            pendingBreak = false
        }
        if !current.isEmpty, let p = previous { segments.append((current, p.timestampMs)) }
        return segments
    }

    static func rrTotal(_ samples: [BiosignalSample]) -> Int {
        samples.reduce(0) { $0 + ($1.rrIntervalsMs?.count ?? 0) }
    }

    /// Mean bpm rounded to 0.1 with ties away from zero, as the SDK does. Samples that report no skin contact or a
    /// non-positive rate carry no heart rate and are left out; if that leaves none, all samples count.
    static func meanHR(_ samples: [BiosignalSample]) -> Double {
        let valid = samples.filter(carriesHeartRate)
        let use = valid.isEmpty ? samples.filter { $0.bpm.isFinite } : valid
        guard !use.isEmpty else { return 0 }
        return round1(use.reduce(0) { $0 + $1.bpm } / Double(use.count))
    }

    /// A reading `hr_mean_bpm` counts: a finite rate above zero, skin contact not denied.
    static func carriesHeartRate(_ s: BiosignalSample) -> Bool { s.bpm > 0 && s.bpm.isFinite && s.contact != .noContact }

    static func round1(_ x: Double) -> Double { (x * 10).rounded() / 10 }

    struct DeviceGroup {
        let id: String
        var samples: [BiosignalSample]
    }

    static func groupByDevice(_ samples: [BiosignalSample]) -> [DeviceGroup] {
        var order: [String] = []
        var groups: [String: [BiosignalSample]] = [:]
        for s in samples {
            let id = s.deviceId ?? s.source
            if groups[id] == nil { order.append(id) }
            groups[id, default: []].append(s)
        }
        return order.map { DeviceGroup(id: $0, samples: groups[$0]!) }
    }
}
