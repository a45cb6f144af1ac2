/// What the session is for. The wire value is the raw value.
public enum SessionMode: String, Sendable, CaseIterable, Codable {
    case focus
    case breathing
    case typing

    public init?(from string: String) { self.init(rawValue: string) }
}

/// How often the engine computes and emits, and over how much history.
public struct ComputeProfile: Sendable, Equatable {
    /// Length of the sliding window in seconds (`window_sec`, default 60).
    public var windowSec: Int
    /// Seconds between `session_frame` events (`emit_interval_sec`, default 5).
    public var emitIntervalSec: Int
    /// Seconds between `biosignal_frame` events (`raw_emit_interval_sec`); `nil` means `emitIntervalSec`.
    public var rawEmitIntervalSec: Int?

    public init(windowSec: Int = 60, emitIntervalSec: Int = 5, rawEmitIntervalSec: Int? = nil) {
        self.windowSec = windowSec
        self.emitIntervalSec = emitIntervalSec
        self.rawEmitIntervalSec = rawEmitIntervalSec
    }

    /// Reads the SDK's keys; a missing or mistyped key takes its default, as the SDK does.
    public init(json: JSONValue) {
        let d = ComputeProfile()
        windowSec = json["window_sec"]?.intValue.map { Int($0) } ?? d.windowSec
        emitIntervalSec = json["emit_interval_sec"]?.intValue.map { Int($0) } ?? d.emitIntervalSec
        rawEmitIntervalSec = json["raw_emit_interval_sec"]?.intValue.map { Int($0) }
    }

    public var jsonValue: JSONValue {
        var o: [String: JSONValue] = [
            "window_sec": .int(Int64(windowSec)),
            "emit_interval_sec": .int(Int64(emitIntervalSec)),
        ]
        if let raw = rawEmitIntervalSec { o["raw_emit_interval_sec"] = .int(Int64(raw)) }
        return .object(o)
    }
}

/// A session request, memberwise or from the SDK's dictionary.
public struct SessionConfig: Sendable, Equatable {
    /// The `durationSec` of a session that runs until it is stopped (the SDK requires a duration; its timer is then
    /// set about 68 years out). Displays show "until stopped" instead of the number.
    public static let untilStopped = Int(Int32.max)

    public var sessionId: String
    public var mode: SessionMode
    public var durationSec: Int
    public var profile: ComputeProfile
    /// Stored and forwarded, never interpreted (as in the SDK).
    public var windowLabel: String?
    /// Emit `biosignal_frame` events.
    public var includeRawSamples: Bool
    /// Paced breathing (mode `breathing` only): `breathing_cue` events and the heart's answer in the metrics. The
    /// `pattern` key of the dictionary, an addition SDK consumers may ignore.
    public var breathingPattern: BreathingPattern?
    /// The resonance frequency assessment (mode `breathing`, instead of a pattern): paced steps at several rates and,
    /// in the summary, the rate the heart answers most. The `resonance_assessment` key of the dictionary.
    public var resonance: ResonancePlan?

    public init(
        sessionId: String,
        mode: SessionMode,
        durationSec: Int,
        profile: ComputeProfile = ComputeProfile(),
        windowLabel: String? = nil,
        includeRawSamples: Bool = false,
        breathingPattern: BreathingPattern? = nil,
        resonance: ResonancePlan? = nil
    ) {
        self.sessionId = sessionId
        self.mode = mode
        self.durationSec = durationSec
        self.profile = profile
        self.windowLabel = windowLabel
        self.includeRawSamples = includeRawSamples
        self.breathingPattern = breathingPattern
        self.resonance = resonance
    }

    /// Decodes the SDK dictionary. Errors, in the SDK's order and words: "Missing session_id",
    /// "Missing or invalid mode", "Missing duration_sec" (all `invalid_state`). Beyond the SDK, non-positive
    /// durations and intervals are refused, since they would make a timer spin.
    public init(json: JSONValue) throws(SessionError) {
        guard let id = json["session_id"]?.stringValue else { throw .invalidState("Missing session_id") }
        // Beyond the SDK: an ID names the session in the store, exports and file names.
        if let problem = Self.sessionIdProblem(id, named: "session_id") { throw .invalidState(problem) }
        guard let modeString = json["mode"]?.stringValue, let mode = SessionMode(rawValue: modeString) else {
            throw .invalidState("Missing or invalid mode")
        }
        guard let duration = json["duration_sec"]?.intValue else { throw .invalidState("Missing duration_sec") }
        guard duration > 0, duration <= Int64(Self.maxDurationSec) else {
            throw .invalidState("duration_sec must be 1 to \(Self.maxDurationSec) seconds, got \(duration)")
        }
        let profile: ComputeProfile
        if let p = json["profile"], case .object = p { profile = ComputeProfile(json: p) } else { profile = ComputeProfile() }
        self.init(
            sessionId: id,
            mode: mode,
            durationSec: Int(duration),
            profile: profile,
            windowLabel: json["window_label"]?.stringValue,
            includeRawSamples: json["include_raw_samples"]?.boolValue ?? false
        )
        if let p = json["pattern"] {
            guard let text = p.stringValue else {
                throw .invalidState("pattern must be a string such as \"box\", \"4-7-8\" or \"4-2-6-0\"")
            }
            breathingPattern = try BreathingPattern(parsing: text)
        }
        if let r = json["resonance_assessment"] { resonance = try ResonancePlan(json: r) }
        try validate()
    }

    /// The SDK's `SessionConfig(from: [String: Any])`.
    public init(from map: [String: Any]) throws(SessionError) {
        guard let json = JSONValue(any: map) else { throw .invalidState("Configuration holds a value that is not JSON") }
        try self.init(json: json)
    }

    /// The longest window and interval between frames a session takes, in seconds (a day), and its longest duration
    /// (the SDK's 32-bit seconds, the duration of a session that runs until stopped): beyond them the engine's
    /// millisecond arithmetic would overflow.
    public static let maxWindowSec = 86_400
    /// The longest session ID taken (characters).
    public static let maxSessionIdLength = 200

    /// Why `id` cannot name a session, or nil: it is printed in tables and terminals, file names and download
    /// headers, and repeated in every frame. 1 to `maxSessionIdLength` bytes of UTF-8 (counted in characters, one
    /// letter with 30 000 combining accents passed as one: 60 KB in every frame); not spaces alone (such a session
    /// was recorded, and no command could name it again); no control characters (a line break or an escape sequence
    /// reached the operator's terminal as it was) and no format characters (a right-to-left override turned a
    /// download's name around) but those that writing needs: the zero-width joiner and non-joiner (Persian, Indic
    /// scripts, emoji sequences such as 👩‍👩‍👧) and the tag characters of subdivision flags. The refused character is
    /// named. One rule for the relay, MQTT and the command line.
    public static func sessionIdProblem(_ id: String, named name: String) -> String? {
        let bytes = id.utf8.count
        guard bytes > 0, bytes <= maxSessionIdLength else {
            return "\(name) must be 1 to \(maxSessionIdLength) bytes (UTF-8), got \(bytes)"
        }
        guard !id.unicodeScalars.allSatisfy(\.properties.isWhitespace) else {
            return "\(name) is only spaces: give it a letter or a digit"
        }
        let refused = id.unicodeScalars.enumerated().first { _, scalar in
            switch scalar.properties.generalCategory {
            case .control, .lineSeparator, .paragraphSeparator: true
            case .format: !(scalar.value == 0x200C || scalar.value == 0x200D || (0xE0020...0xE007F).contains(scalar.value))
            default: false
            }
        }
        guard let (index, scalar) = refused else { return nil }
        let hex = String(scalar.value, radix: 16, uppercase: true)
        let code = "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
        let what = scalar.properties.name.map { " \($0)" } ?? (scalar.properties.generalCategory == .control ? " (a control character)" : "")
        return "\(name) must not contain control or format characters (line breaks, tabs, escapes, direction "
            + "overrides): \(code)\(what) is its \(Self.ordinal(index + 1)) code point"
    }

    private static func ordinal(_ n: Int) -> String {
        let suffix = (11...13).contains(n % 100) ? "th" : [1: "st", 2: "nd", 3: "rd"][n % 10] ?? "th"
        return "\(n)\(suffix)"
    }

    public static let maxDurationSec = Int(Int32.max)

    /// Refuses values that cannot run: a duration, window or interval that is not positive or over its limit.
    public func validate() throws(SessionError) {
        guard durationSec > 0, durationSec <= Self.maxDurationSec else {
            throw .invalidState("duration_sec must be 1 to \(Self.maxDurationSec), got \(durationSec)")
        }
        guard profile.windowSec > 0, profile.windowSec <= Self.maxWindowSec else {
            throw .invalidState("window_sec must be 1 to \(Self.maxWindowSec), got \(profile.windowSec)")
        }
        guard profile.emitIntervalSec > 0, profile.emitIntervalSec <= Self.maxWindowSec else {
            throw .invalidState("emit_interval_sec must be 1 to \(Self.maxWindowSec), got \(profile.emitIntervalSec)")
        }
        if let raw = profile.rawEmitIntervalSec, raw <= 0 || raw > Self.maxWindowSec {
            throw .invalidState("raw_emit_interval_sec must be 1 to \(Self.maxWindowSec), got \(raw)")
        }
        if let p = breathingPattern, mode != .breathing {
            throw .invalidState("A breathing pattern (\(p.name)) needs mode breathing, not \(mode.rawValue)")
        }
        if let r = resonance {
            guard mode == .breathing else {
                throw .invalidState("A resonance assessment needs mode breathing, not \(mode.rawValue)")
            }
            guard breathingPattern == nil else {
                throw .invalidState("A resonance assessment paces its own rates: leave out pattern")
            }
            try r.validate()
        }
    }

    /// The SDK dictionary (as Dart's `toJson` writes it).
    public var jsonValue: JSONValue {
        var o: [String: JSONValue] = [
            "session_id": .string(sessionId),
            "mode": .string(mode.rawValue),
            "duration_sec": .int(Int64(durationSec)),
            "profile": profile.jsonValue,
            "include_raw_samples": .bool(includeRawSamples),
        ]
        if let label = windowLabel { o["window_label"] = .string(label) }
        if let p = breathingPattern { o["pattern"] = .string(p.name) }
        if let r = resonance { o["resonance_assessment"] = r.jsonValue }
        return .object(o)
    }
}
