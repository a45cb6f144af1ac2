import GatewayEngine
import Testing

@Suite struct SessionConfigTests {
    func parse(_ text: String) throws -> SessionConfig { try SessionConfig(json: try JSONValue(parsing: text)) }

    @Test(arguments: [
        (#"{"mode":"focus","duration_sec":60}"#, "Missing session_id"),
        (#"{"session_id":7,"mode":"focus","duration_sec":60}"#, "Missing session_id"),
        (#"{"session_id":"a","duration_sec":60}"#, "Missing or invalid mode"),
        (#"{"session_id":"a","mode":"sleep","duration_sec":60}"#, "Missing or invalid mode"),
        (#"{"session_id":"a","mode":"focus"}"#, "Missing duration_sec"),
        (#"{"session_id":"a","mode":"focus","duration_sec":"60"}"#, "Missing duration_sec"),
        (#"{"session_id":"a","mode":"focus","duration_sec":1.5}"#, "Missing duration_sec"),
        (#"{"mode":7}"#, "Missing session_id"),
    ])
    func errorsFollowTheSDKOrderAndWords(input: String, message: String) {
        #expect(throws: SessionError.invalidState(message)) { try parse(input) }
    }

    @Test func defaultsMatchTheSDK() throws {
        let c = try parse(#"{"session_id":"a","mode":"breathing","duration_sec":300}"#)
        #expect(c == SessionConfig(sessionId: "a", mode: .breathing, durationSec: 300))
        #expect(c.profile == ComputeProfile(windowSec: 60, emitIntervalSec: 5, rawEmitIntervalSec: nil))
        #expect(c.windowLabel == nil)
        #expect(c.includeRawSamples == false)
    }

    @Test func everyKeyIsRead() throws {
        let c = try parse("""
            {"session_id":"b","mode":"typing","duration_sec":30.0,"window_label":"morning","include_raw_samples":true,
             "profile":{"window_sec":120,"emit_interval_sec":10,"raw_emit_interval_sec":2}}
            """)
        #expect(c.mode == .typing)
        #expect(c.durationSec == 30)
        #expect(c.windowLabel == "morning")
        #expect(c.includeRawSamples)
        #expect(c.profile == ComputeProfile(windowSec: 120, emitIntervalSec: 10, rawEmitIntervalSec: 2))
    }

    /// Values so large the engine's millisecond arithmetic overflowed (the process crashed, the session left
    /// interrupted), and an empty or huge ID, are refused with the limits said.
    @Test func valuesBeyondTheLimitsAreRefused() {
        #expect(throws: SessionError.invalidState("window_sec must be 1 to 86400, got 9223372036854775807")) {
            try parse(#"{"session_id":"a","mode":"focus","duration_sec":5,"profile":{"window_sec":9223372036854775807}}"#)
        }
        #expect(throws: SessionError.invalidState("emit_interval_sec must be 1 to 86400, got 86401")) {
            try parse(#"{"session_id":"a","mode":"focus","duration_sec":5,"profile":{"emit_interval_sec":86401}}"#)
        }
        #expect(throws: SessionError.invalidState("duration_sec must be 1 to 2147483647 seconds, got 2147483648")) {
            try parse(#"{"session_id":"a","mode":"focus","duration_sec":2147483648}"#)
        }
        #expect(throws: SessionError.invalidState("session_id must be 1 to 200 bytes (UTF-8), got 0")) {
            try parse(#"{"session_id":"","mode":"focus","duration_sec":5}"#)
        }
        let long = String(repeating: "x", count: 201)
        #expect(throws: SessionError.invalidState("session_id must be 1 to 200 bytes (UTF-8), got 201")) {
            try parse(#"{"session_id":"\#(long)","mode":"focus","duration_sec":5}"#)
        }
        // One letter with 3 000 combining accents is one character and 6 001 bytes; a right-to-left override turns a
        // download's name around.
        let accents = "a" + String(repeating: "\u{0301}", count: 3000)
        #expect(throws: SessionError.invalidState("session_id must be 1 to 200 bytes (UTF-8), got 6001")) {
            try parse(#"{"session_id":"\#(accents)","mode":"focus","duration_sec":5}"#)
        }
        // The refused character is named, with its place.
        #expect(throws: SessionError.invalidState(
            "session_id must not contain control or format characters (line breaks, tabs, escapes, direction overrides): "
                + "U+202E RIGHT-TO-LEFT OVERRIDE is its 4th code point")) {
            try parse(#"{"session_id":"abc\#u{202E}fdp.exe","mode":"focus","duration_sec":5}"#)
        }
        #expect(SessionConfig.sessionIdProblem("a\u{1B}[2J", named: "id")?.hasSuffix("U+001B (a control character) is its 2nd code point") == true)
        // Spaces alone were recorded, and no command could name the session again.
        #expect(throws: SessionError.invalidState("session_id is only spaces: give it a letter or a digit")) {
            try parse(#"{"session_id":"   ","mode":"focus","duration_sec":5}"#)
        }
        // The joiners that writing needs are format characters too: Persian with a zero-width non-joiner, an emoji
        // family (zero-width joiners), a subdivision flag (tag characters).
        for id in ["جلسه\u{200C}ی-اول", "👩\u{200D}👩\u{200D}👧", "🏴\u{E0067}\u{E0062}\u{E0073}\u{E0063}\u{E0074}\u{E007F}", " a b "] {
            #expect(SessionConfig.sessionIdProblem(id, named: "id") == nil, "\(id.unicodeScalars.map { String($0.value, radix: 16) })")
        }
        for refused in ["a\u{200E}b", "a\u{FEFF}", "\u{2066}x", "a\u{00AD}b", "a\u{2028}b", "a\u{2029}"] {
            #expect(SessionConfig.sessionIdProblem(refused, named: "id") != nil, "\(refused.unicodeScalars.map { String($0.value, radix: 16) })")
        }
        #expect(throws: Never.self) {
            try parse(#"{"session_id":"a","mode":"focus","duration_sec":5,"profile":{"window_sec":86400,"emit_interval_sec":86400}}"#)
        }
    }

    @Test func aMistypedProfileKeyFallsBackToItsDefault() throws {
        let c = try parse(#"{"session_id":"a","mode":"focus","duration_sec":9,"profile":{"window_sec":"x","emit_interval_sec":3}}"#)
        #expect(c.profile == ComputeProfile(windowSec: 60, emitIntervalSec: 3))
        let d = try parse(#"{"session_id":"a","mode":"focus","duration_sec":9,"profile":[1,2]}"#)
        #expect(d.profile == ComputeProfile())
    }

    @Test func nonPositiveValuesAreRefused() {
        #expect(throws: SessionError.invalidState("duration_sec must be 1 to 2147483647 seconds, got 0")) {
            try parse(#"{"session_id":"a","mode":"focus","duration_sec":0}"#)
        }
        #expect(throws: SessionError.invalidState("window_sec must be 1 to 86400, got -5")) {
            try parse(#"{"session_id":"a","mode":"focus","duration_sec":5,"profile":{"window_sec":-5}}"#)
        }
    }

    @Test func theSDKDictionaryFormIsAccepted() throws {
        let map: [String: Any] = ["session_id": "d", "mode": "focus", "duration_sec": 60, "profile": ["window_sec": 30]]
        let c = try SessionConfig(from: map)
        #expect(c.profile.windowSec == 30)
        #expect(c.profile.emitIntervalSec == 5)
    }

    @Test func encodesAsDartsToJson() {
        let c = SessionConfig(sessionId: "e", mode: .focus, durationSec: 60, windowLabel: "w")
        #expect(c.jsonValue.jsonString
            == #"{"duration_sec":60,"include_raw_samples":false,"mode":"focus","profile":{"emit_interval_sec":5,"window_sec":60},"session_id":"e","window_label":"w"}"#)
    }

    @Test func errorDescriptionsUseTheSDKPrefixes() {
        #expect("\(SessionError.invalidState("x"))" == "InvalidState: x")
        #expect("\(SessionError.sensorUnavailable("y"))" == "SensorUnavailable: y")
        #expect("\(SessionError.permissionDenied("z"))" == "PermissionDenied: z")
        #expect("\(SessionError.lowBattery("b"))" == "LowBattery: b")
        #expect("\(SessionError.osTerminated("o"))" == "OsTerminated: o")
        #expect(SessionErrorCode.allCases.map(\.rawValue)
            == ["permission_denied", "sensor_unavailable", "invalid_state", "low_battery", "os_terminated"])
    }
}
