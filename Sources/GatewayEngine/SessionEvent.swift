import HRVAnalysis

/// Everything a session emits, in the Synheart SDK's wire shapes (`jsonValue` / `dictionary`), plus
/// `sensor_status` and `dfa_threshold`, additions that SDK consumers can ignore.
public enum SessionEvent: Sendable, Equatable {
    case started(sessionId: String, startedAtMs: Int64)
    case frame(sessionId: String, seq: Int, emittedAtMs: Int64, metrics: SessionMetrics, behavior: BehaviorSnapshot?)
    case biosignalFrame(sessionId: String, seq: Int, emittedAtMs: Int64, samples: [BiosignalSample])
    case summary(sessionId: String, durationActualSec: Int, metrics: SessionMetrics, behavior: BehaviorSnapshot?)
    /// Terminal: nothing follows it.
    case error(sessionId: String, code: SessionErrorCode, message: String)
    /// A provider's link or health changed (not part of the SDK; never terminal).
    case sensorStatus(sessionId: String, emittedAtMs: Int64, status: SensorStatus)
    /// Live DFA alpha1 crossed 0.75 or 0.5 (not part of the SDK; never terminal; docs/hrv.md §10).
    case dfaThreshold(sessionId: String, emittedAtMs: Int64, crossing: DFAThresholdCrossing)
    /// A paced-breathing phase starts at `cue.startsAtMs` (not part of the SDK; never terminal; docs/engine.md).
    case breathingCue(sessionId: String, emittedAtMs: Int64, cue: BreathingCue)

    /// The wire `type`.
    public var type: String {
        switch self {
        case .started: "session_started"
        case .frame: "session_frame"
        case .biosignalFrame: "biosignal_frame"
        case .summary: "session_summary"
        case .error: "session_error"
        case .sensorStatus: "sensor_status"
        case .dfaThreshold: "dfa_threshold"
        case .breathingCue: "breathing_cue"
        }
    }

    public var sessionId: String {
        switch self {
        case .started(let id, _), .frame(let id, _, _, _, _), .biosignalFrame(let id, _, _, _), .summary(let id, _, _, _),
            .error(let id, _, _), .sensorStatus(let id, _, _), .dfaThreshold(let id, _, _), .breathingCue(let id, _, _):
            id
        }
    }

    /// True for the event that ends a session.
    public var isTerminal: Bool {
        switch self {
        case .summary, .error: true
        default: false
        }
    }

    public var jsonValue: JSONValue {
        var o: [String: JSONValue] = ["type": .string(type), "session_id": .string(sessionId)]
        switch self {
        case .started(_, let at):
            o["started_at_ms"] = .int(at)
        case .frame(_, let seq, let at, let metrics, let behavior):
            o["seq"] = .int(Int64(seq))
            o["emitted_at_ms"] = .int(at)
            o["metrics"] = metrics.jsonValue
            if let behavior { o["behavior"] = behavior.jsonValue }
        case .biosignalFrame(_, let seq, let at, let samples):
            o["seq"] = .int(Int64(seq))
            o["emitted_at_ms"] = .int(at)
            o["samples"] = .array(samples.map(\.jsonValue))
        case .summary(_, let duration, let metrics, let behavior):
            o["duration_actual_sec"] = .int(Int64(duration))
            o["metrics"] = metrics.jsonValue
            if let behavior { o["behavior"] = behavior.jsonValue }
        case .error(_, let code, let message):
            // The Swift/Kotlin SDKs read `error_code`, Dart and the watch edge SDK read `code`: carry both.
            o["error_code"] = .string(code.rawValue)
            o["code"] = .string(code.rawValue)
            o["message"] = .string(message)
        case .sensorStatus(_, let at, let status):
            o["emitted_at_ms"] = .int(at)
            o["source"] = .string(status.source)
            o["state"] = .string(status.state.rawValue)
            if let id = status.deviceId { o["device_id"] = .string(id) }
            if let b = status.batteryPercent { o["battery_percent"] = .int(Int64(b)) }
            if let m = status.message { o["message"] = .string(m) }
            if let c = status.errorCode { o["error_code"] = .string(c.rawValue) }
        case .dfaThreshold(_, let at, let c):
            o["emitted_at_ms"] = .int(at)
            o["threshold"] = .double(c.threshold)
            o["direction"] = .string(c.direction.rawValue)
            o["dfa_alpha1"] = .double(c.alpha1)
            o["previous_dfa_alpha1"] = .double(c.previousAlpha1)
            // The first estimate past the threshold; the event comes with the next one, which confirms it.
            o["crossed_at_ms"] = .int(Int64((c.atS * 1000).rounded()))
            if let d = c.deviceId { o["device_id"] = .string(d) }
        case .breathingCue(_, let at, let cue):
            o["emitted_at_ms"] = .int(at)
            o["phase"] = .string(cue.phase.rawValue)
            o["phase_duration_ms"] = .int(cue.phaseDurationMs)
            o["cycle"] = .int(Int64(cue.cycle))
            o["starts_at_ms"] = .int(cue.startsAtMs)
            o["pattern"] = .string(cue.pattern)
            o["paced_rate_bpm"] = .double((cue.rateBpm * 100).rounded() / 100)
            if let step = cue.assessmentStep { o["assessment_step"] = .int(Int64(step)) }
            if let steps = cue.assessmentSteps { o["assessment_steps"] = .int(Int64(steps)) }
        }
        return .object(o)
    }

    /// The SDK's `[String: Any]` form.
    public var dictionary: [String: Any] { jsonValue.anyValue as? [String: Any] ?? [:] }
}
