import Foundation
import GatewayEngine
import SimulatedProvider
import Testing

@testable import RelayCore

/// A hub driving a real engine on a manual clock, with a simulated strap.
struct Rig {
    let clock: ManualSessionClock
    let engine: SessionEngine
    let hub: RelayHub
    let token: ObservationToken

    init(clock: ManualSessionClock, engine: SessionEngine, hub: RelayHub, token: ObservationToken) {
        self.clock = clock
        self.engine = engine
        self.hub = hub
        self.token = token
    }

    init(configuration: RelayHubConfiguration = RelayHubConfiguration()) {
        let clock = ManualSessionClock(startMs: 1_000_000)
        self.clock = clock
        engine = SessionEngine(providers: [SimulatedBiosignalProvider(seed: 3, clock: clock)], clock: clock)
        hub = RelayHub(controller: EngineRelayController(engine: engine), configuration: configuration, clock: clock)
        token = hub.attach(to: engine)
    }

    static let phone = RelayPrincipal(consumerId: "phone", name: "phone", scope: .control)
    static let viewer = RelayPrincipal(consumerId: "viewer", name: "viewer", scope: .read)

    /// The command's result, once the events it caused are visible (written to the hub's store, when it has one).
    func send(_ json: String, _ c: RelayConnection) async -> [String: JSONValue]? {
        let result = await hub.response(to: json, from: c)?.objectValue
        await hub.settled()
        return result
    }
}

func messages(_ q: ConsumerQueue) throws -> [[String: JSONValue]] {
    try q.drain().map { try #require(JSONValue(parsing: $0).objectValue) }
}

func types(_ m: [[String: JSONValue]]) -> [String] { m.compactMap { $0["type"]?.stringValue } }

@Suite struct RelayHubTests {
    let start = #"{"command":"start_session","session_id":"s1","mode":"focus","duration_sec":600,"profile":{"window_sec":30,"emit_interval_sec":5},"window_label":"desk","id":"c1"}"#

    @Test func startSessionAsAPhoneSendsItThenFramesArriveWithEnvelope() async throws {
        let rig = Rig()
        let c = rig.hub.connect(Rig.phone)
        let r = try #require(await rig.send(start, c))
        #expect(r["ok"] == .bool(true))
        #expect(r["session_id"] == .string("s1"))
        #expect(r["id"] == .string("c1"))
        rig.clock.advance(byMs: 20_000)
        let got = try messages(c.queue)
        #expect(Array(types(got).prefix(3)) == ["welcome", "gateway_status", "session_started"])
        let frames = got.filter { $0["type"] == .string("session_frame") }
        #expect(frames.count == 4)
        #expect(got.contains { $0["type"] == .string("biosignal_frame") }, "raw samples on by default for phones")
        // The engine's own keys are untouched (its `seq` counts frames), the envelope adds relay_seq and delivery.
        #expect(frames.map { $0["seq"] } == [.int(1), .int(2), .int(3), .int(4)])
        #expect(frames.allSatisfy { $0["delivery"] == .string("live") })
        let seqs = got.compactMap { $0["relay_seq"]?.intValue }
        #expect(seqs == Array(1...Int64(seqs.count)), "every numbered event, in order, none missing")
        #expect(got.first { $0["type"] == .string("session_started") }?["delivery"] == .string("reliable"))
        let status = got.filter { $0["type"] == .string("gateway_status") }.last
        #expect(status?["session"]?["session_id"] == .string("s1"))
        #expect(status?["sensors"]?.arrayValue?.first?["state"] == .string("streaming"))
    }

    @Test func aRetriedCommandIdIsAnsweredWithoutRunningTwice() async throws {
        let rig = Rig()
        let c = rig.hub.connect(Rig.phone)
        let first = try #require(await rig.send(start, c))
        let second = try #require(await rig.send(start, c))
        #expect(first == second)
        #expect(first["ok"] == .bool(true))
        // A new id for the same session is a second start: the engine refuses it.
        let other = try #require(await rig.send(start.replacingOccurrences(of: "\"c1\"", with: "\"c2\""), c))
        #expect(other["ok"] == .bool(false))
        #expect(other["error_code"] == .string("invalid_state"))
        let reused = try #require(await rig.send(#"{"command":"get_status","id":"c1"}"#, c))
        #expect(reused["error_code"] == .string("id_reused"), "not the start's answer to a different command")
        let stop = #"{"command":"stop_session","session_id":"s1","id":"c3"}"#
        #expect(try #require(await rig.send(stop, c))["ok"] == .bool(true))
        let again = try #require(await rig.send(stop.replacingOccurrences(of: "c3", with: "c4"), c))
        #expect(again["ok"] == .bool(true))
        #expect(again["already_ended"] == .bool(true))
        let summaries = try messages(c.queue).filter { $0["type"] == .string("session_summary") }
        #expect(summaries.count == 1)
    }

    @Test func readOnlyTokensCannotControlButCanAskStatus() async throws {
        let rig = Rig()
        let c = rig.hub.connect(Rig.viewer)
        let r = try #require(await rig.send(start, c))
        #expect(r["ok"] == .bool(false))
        #expect(r["error_code"] == .string("forbidden"))
        #expect(rig.engine.getStatus() == nil)
        let s = try #require(await rig.send(#"{"command":"get_status","id":7}"#, c))
        #expect(s["ok"] == .bool(true))
        #expect(s["active"] == .bool(false))
        #expect(s["id"] == .int(7))
        let i = try #require(await rig.send(#"{"command":"ingest_hsi_metrics","metrics":{"a":1},"id":8}"#, c))
        #expect(i["error_code"] == .string("forbidden"))
    }

    /// An HSI document's nested keys are read as the SDK's flat ones, and the reply says which keys the metrics use
    /// (the documented example was answered `accepted` and changed nothing).
    @Test func ingestedMetricsNestedOrFlatAreUsedAndSaidSo() async throws {
        let rig = Rig()
        let phone = rig.hub.connect(Rig.phone)
        _ = await rig.send(start, phone)
        let nested = try #require(await rig.send(
            #"{"command":"ingest_hsi_metrics","metrics":{"hrv":{"rmssd_ms":77.5,"mood":"ok"}},"session_id":"s1","id":"n"}"#, phone))
        #expect(nested["accepted"] == .bool(true))
        #expect(nested["used"] == .array([.string("hrv.rmssd_ms")]))
        rig.clock.advance(byMs: 6_000)
        let frame = try #require(try messages(phone.queue).last { $0["type"] == .string("session_frame") })
        #expect(frame["metrics"]?["rmssd_ms"] == .double(77.5))
        let flat = try #require(await rig.send(
            #"{"command":"ingest_hsi_metrics","metrics":{"hrv.pnn50":12,"hrv":{"pnn50":99}},"session_id":"s1","id":"f"}"#, phone))
        #expect(flat["used"] == .array([.string("hrv.pnn50")]))
        rig.clock.advance(byMs: 5_000)
        let next = try #require(try messages(phone.queue).last { $0["type"] == .string("session_frame") })
        #expect(next["metrics"]?["pnn50"] == .double(12), "a flat key wins over the same key nested")
        let none = try #require(await rig.send(
            #"{"command":"ingest_hsi_metrics","metrics":{"stress":0.4},"session_id":"s1","id":"x"}"#, phone))
        #expect(none["accepted"] == .bool(true))
        #expect(none["used"] == .array([]))
        // A value no heart gives went into frames and the recorded summary as it was: refused, naming the key.
        for (n, (metrics, message)) in [
            (#"{"hrv":{"rmssd_ms":-42}}"#, "hrv.rmssd_ms must be 0 to 10000, got -42"),
            (#"{"hrv.pnn50":1e300}"#, "hrv.pnn50 must be 0 to 100, got 1e+300"),
        ].enumerated() {
            let r = try #require(await rig.send(
                #"{"command":"ingest_hsi_metrics","metrics":\#(metrics),"session_id":"s1","id":"r\#(n)"}"#, phone))
            #expect(r["error_code"] == .string("bad_request") && r["message"] == .string(message), "\(r)")
        }
        rig.clock.advance(byMs: 5_000)
        let after = try #require(try messages(phone.queue).last { $0["type"] == .string("session_frame") })
        #expect(after["metrics"]?["rmssd_ms"]?.doubleValue.map { $0 >= 0 } == true, "\(after)")
        #expect(after["metrics"]?["pnn50"]?.doubleValue.map { $0 <= 100 } == true, "the refused values changed nothing")
    }

    /// A mistyped `profile` key started a session with the default in its place (frames every 5 s for 2.5), and a
    /// mistyped `duration_sec` was said to be missing: each is `bad_request` naming the key and what it got.
    @Test func mistypedStartKeysAreRefusedByName() async throws {
        let base = #""command":"start_session","session_id":"m","mode":"focus""#
        for (fields, message) in [
            (#""duration_sec":60,"profile":{"emit_interval_sec":2.5}"#, "profile.emit_interval_sec must be a whole number of seconds, got 2.5"),
            (#""duration_sec":60,"profile":{"window_sec":"60"}"#, #"profile.window_sec must be a whole number of seconds, got "60""#),
            (#""duration_sec":60,"profile":"fast""#, "profile must be an object"),
            (#""duration_sec":10.5"#, "duration_sec must be a whole number of seconds, got 10.5"),
            (#""duration_sec":1e30"#, "duration_sec is out of range, got 1e+30"),
        ] {
            let rig = Rig()
            let c = rig.hub.connect(Rig.phone)
            let r = try #require(await rig.send("{\(base),\(fields),\"id\":\"x\"}", c))
            #expect(r["error_code"] == .string("bad_request"), "\(fields)")
            #expect(r["message"]?.stringValue?.contains(message) == true, "\(r)")
            #expect(rig.engine.getStatus() == nil)
        }
        let rig = Rig()
        let r = try #require(await rig.send(
            #"{"command":"start_session","session_id":"m","mode":"sleep","duration_sec":60,"id":"x"}"#, rig.hub.connect(Rig.phone)))
        #expect(r["message"] == .string(#"mode must be one of focus, breathing, typing, got "sleep""#))
        // A misspelt profile key took its default without a word: the reply names it.
        let other = Rig()
        let misspelt = try #require(await other.send(
            #"{"command":"start_session","session_id":"p","mode":"focus","duration_sec":60,"profile":{"window_secs":30,"emit_interval_sec":5},"id":"w"}"#,
            other.hub.connect(Rig.phone)))
        #expect(misspelt["ok"] == .bool(true) && misspelt["ignored"] == .array([.string("profile.window_secs")]), "\(misspelt)")
        // A number for the id was "Missing session_id"; a line break in it reached terminals and download names.
        let number = try #require(await rig.send(
            #"{"command":"start_session","session_id":7,"mode":"focus","duration_sec":60,"id":"y"}"#, rig.hub.connect(Rig.phone)))
        #expect(number["message"] == .string("session_id must be a string, got 7"))
        let control = try #require(await rig.send(
            #"{"command":"start_session","session_id":"a\"\r\nX-Evil: 1","mode":"focus","duration_sec":60,"id":"z"}"#,
            rig.hub.connect(Rig.phone)))
        #expect(control["error_code"] == .string("bad_request"))
        #expect(control["message"]?.stringValue?.contains("control or format characters") == true, "\(control)")
        // An id is remembered with its result for ten minutes: a long one is refused.
        let long = try #require(await rig.send(
            #"{"command":"get_status","id":"\#(String(repeating: "i", count: 201))"}"#, rig.hub.connect(Rig.phone)))
        #expect(long["message"] == .string("\"id\" must be at most 200 bytes, got 201."))
    }

    @Test func reliableEventsMissedWhileAwayAreRedeliveredInOrderUntilAcknowledged() async throws {
        let rig = Rig()
        let phone = rig.hub.connect(Rig.phone)
        _ = await rig.send(start, phone)
        rig.clock.advance(byMs: 6_000)
        rig.hub.disconnect(phone)
        let laptop = RelayPrincipal(consumerId: "laptop", name: "laptop", scope: .control)
        _ = await rig.send(#"{"command":"stop_session","session_id":"s1"}"#, rig.hub.connect(laptop))
        // Back without a hello: started (never acknowledged) and the summary it missed, in order.
        let back = rig.hub.connect(Rig.phone)
        let got = try messages(back.queue)
        let reliable = got.filter { $0["delivery"] == .string("reliable") }
        #expect(types(reliable) == ["session_started", "session_summary"])
        #expect(got.allSatisfy { $0["type"] != .string("session_frame") }, "live frames are not redelivered without hello")
        let lastReliable = try #require(reliable.last?["relay_seq"]?.intValue)
        #expect(await rig.send(#"{"command":"ack","relay_seq":\#(lastReliable)}"#, back) == nil)
        rig.hub.disconnect(back)
        let third = try messages(rig.hub.connect(Rig.phone).queue)
        #expect(types(third) == ["welcome", "gateway_status"], "acknowledged events are not sent again")
    }

    @Test func helloResumesLiveEventsWithNoneLostOrRepeated() async throws {
        let rig = Rig()
        let first = rig.hub.connect(Rig.phone)
        _ = await rig.send(start, first)
        rig.clock.advance(byMs: 30_000)
        var seen = try messages(first.queue).filter { $0["relay_seq"] != nil }
        _ = await rig.send(#"{"command":"ack","relay_seq":\#(try #require(seen.last?["relay_seq"]?.intValue))}"#, first)
        // The link drops; a few received frames are lost in flight (the client only saw up to some seq).
        seen.removeLast(2)
        let lastSeen = try #require(seen.last?["relay_seq"]?.intValue)
        rig.hub.disconnect(first)
        rig.clock.advance(byMs: 300_000)  // five minutes away
        let second = rig.hub.connect(Rig.phone)
        rig.clock.advance(byMs: 10_000)  // live again before the hello arrives
        let hello = try #require(await rig.send(
            #"{"command":"hello","resume":{"epoch":"\#(rig.hub.epoch)","last_seq":\#(lastSeen)}}"#, second))
        #expect(hello["ok"] == .bool(true))
        #expect(hello["complete"] == .bool(true))
        rig.clock.advance(byMs: 10_000)
        seen += try messages(second.queue).filter { $0["relay_seq"] != nil }
        let seqs = seen.compactMap { $0["relay_seq"]?.intValue }
        #expect(Set(seqs).count == seqs.count, "nothing repeated")
        let live = Set(seen.filter { $0["delivery"] == .string("live") }.compactMap { $0["relay_seq"]?.intValue })
        #expect(live.count > 70)
        let all = Set(seqs)
        #expect(all == Set(1...rig.hub.lastSeq), "nothing lost, reliable and live together")
        let samples = seen.filter { $0["type"] == .string("biosignal_frame") }
        #expect(samples.count == 70, "one biosignal_frame every 5 s over 350 s")
    }

    /// A page just loaded has no `relay_seq` to resume from: `hello{recent_frames_ms}` gives it the session frames and
    /// sample frames of that span from before it connected (only those, in order, marked replayed), once per
    /// connection.
    @Test func helloRecentFramesGivesAFreshConsumerTheFramesOfTheSpan() async throws {
        let rig = Rig()
        let phone = rig.hub.connect(Rig.phone)
        _ = await rig.send(start, phone)
        rig.clock.advance(byMs: 120_000)   // a session frame and a biosignal frame every 5 s: 24 of each
        let isFrame = { (m: [String: JSONValue]) in ["session_frame", "biosignal_frame"].contains(m["type"]?.stringValue ?? "") }
        let published = try messages(phone.queue).filter(isFrame)
        #expect(published.count == 48)
        let page = rig.hub.connect(Rig.viewer)
        _ = try messages(page.queue)   // welcome, status, the unacknowledged session_started
        let r = try #require(await rig.send(#"{"command":"hello","recent_frames_ms":60000}"#, page))
        #expect(r["ok"] == .bool(true))
        let got = try messages(page.queue)
        #expect(got.allSatisfy { isFrame($0) && $0["replayed"] == .bool(true) })
        #expect(got.filter { $0["type"] == .string("biosignal_frame") }.count == 12)
        let seqs = got.compactMap { $0["relay_seq"]?.intValue }
        #expect(seqs == published.suffix(24).compactMap { $0["relay_seq"]?.intValue }, "the last 60 s, in order")
        #expect(r["replayed"]?.intValue == 24)
        let again = try #require(await rig.send(#"{"command":"hello","recent_frames_ms":60000}"#, page))
        #expect(again["error_code"] == .string("bad_request"))
        let other = rig.hub.connect(Rig.viewer)
        let both = try #require(await rig.send(
            #"{"command":"hello","recent_frames_ms":1000,"resume":{"epoch":"\#(rig.hub.epoch)","last_seq":1}}"#, other))
        #expect(both["error_code"] == .string("bad_request"))
        let zero = try #require(await rig.send(#"{"command":"hello","recent_frames_ms":0}"#, other))
        #expect(zero["error_code"] == .string("bad_request"))
    }

    @Test func helloFromAnotherEpochAsksForResync() async throws {
        let rig = Rig()
        let c = rig.hub.connect(Rig.phone)
        let r = try #require(await rig.send(#"{"command":"hello","resume":{"epoch":"old","last_seq":3}}"#, c))
        #expect(r["error_code"] == .string("resync_required"))
        // This epoch, but past what the gateway has sent: it was answered complete, and the next events dropped.
        let ahead = try #require(await rig.send(
            #"{"command":"hello","resume":{"epoch":"\#(rig.hub.epoch)","last_seq":1000}}"#, rig.hub.connect(Rig.phone)))
        #expect(ahead["error_code"] == .string("resync_required"), "\(ahead)")
    }

    @Test func theResumeBufferKeepsAtLeastTenMinutes() async throws {
        let rig = Rig()
        let first = rig.hub.connect(Rig.phone)
        _ = await rig.send(start.replacingOccurrences(of: "600", with: "3600"), first)
        rig.clock.advance(byMs: 1000)
        let lastSeen = try #require(try messages(first.queue).compactMap { $0["relay_seq"]?.intValue }.max())
        rig.hub.disconnect(first)
        rig.clock.advance(byMs: 600_000)
        let second = rig.hub.connect(Rig.phone)
        let hello = try #require(await rig.send(
            #"{"command":"hello","resume":{"epoch":"\#(rig.hub.epoch)","last_seq":\#(lastSeen)},"id":"h"}"#, second))
        #expect(hello["complete"] == .bool(true))
        // A session_frame and a biosignal_frame every 5 s over the 600 s away.
        #expect(hello["replayed"]?.intValue == 240)
        let replayed = try messages(second.queue).filter { $0["replayed"] == .bool(true) }
        #expect(replayed.first?["relay_seq"]?.intValue == lastSeen + 1)
    }

    /// The live ring keeps events for a retention measured on the monotonic clock: an NTP step of the wall clock by
    /// an hour forward empties nothing, and one back keeps nothing longer.
    @Test func aWallClockStepNeitherEmptiesNorPinsTheResumeBuffer() async throws {
        var configuration = RelayHubConfiguration()
        configuration.liveRetentionMs = 60_000
        let rig = Rig(configuration: configuration)
        let c = rig.hub.connect(Rig.phone)
        _ = await rig.send(start.replacingOccurrences(of: "600", with: "3600"), c)
        for _ in 0..<30 {
            rig.clock.advance(byMs: 1000)
            _ = c.queue.drain()
        }
        let before = rig.hub.resumeBufferLive
        #expect(before > 0)
        rig.clock.stepWallClock(byMs: 3_600_000)
        rig.clock.advance(byMs: 1000)
        _ = c.queue.drain()
        #expect(rig.hub.resumeBufferLive >= before, "a step forward drops nothing: \(rig.hub.resumeBufferLive) < \(before)")
        rig.clock.stepWallClock(byMs: -7_200_000)
        // Two minutes later (monotonic) everything from before the steps is past the 60 s retention.
        for _ in 0..<120 {
            rig.clock.advance(byMs: 1000)
            _ = c.queue.drain()
        }
        let live = rig.hub.resumeBufferLive
        #expect(live > 0 && live <= 30, "a minute of frames, not the frames from before the step back: \(live)")
    }

    @Test func eventsLeavingTheResumeBufferAreReleasedAtOnce() async throws {
        var configuration = RelayHubConfiguration()
        configuration.liveRetentionMs = 60_000
        let rig = Rig(configuration: configuration)
        let c = rig.hub.connect(Rig.phone)
        _ = await rig.send(start.replacingOccurrences(of: "600", with: "3600"), c)
        // 20 minutes: two frames every 5 s, far fewer than the 1024 trimmed slots that trigger a compaction.
        for _ in 0..<(20 * 60) {
            rig.clock.advance(byMs: 1000)
            _ = c.queue.drain()
        }
        let held = rig.hub.resumeBufferHeld
        let live = rig.hub.resumeBufferLive
        #expect(held.slots > live, "trimmed slots are still in the buffer (no compaction yet)")
        #expect(live > 0 && live <= 30, "about a minute of frames (two every 5 s): \(live)")
        #expect(held.withText == live, "only the events still replayable keep their text")
    }

    @Test(arguments: [
        ("{", "bad_json"),
        ("[1,2]", "bad_request"),
        ("null", "bad_request"),
        ("\"start_session\"", "bad_request"),
        (#"{"id":"x"}"#, "bad_request"),
        (#"{"command":42}"#, "bad_request"),
        (#"{"command":"launch_rocket","id":"r"}"#, "unknown_command"),
        (#"{"command":"start_session","id":true}"#, "bad_request"),
        (#"{"command":"start_session","session_id":5,"mode":"focus","duration_sec":60,"id":"a"}"#, "bad_request"),
        (#"{"command":"start_session","session_id":"x","mode":"sleep","duration_sec":60,"id":"b"}"#, "bad_request"),
        (#"{"command":"start_session","session_id":"x","mode":"focus","duration_sec":"60","id":"c"}"#, "bad_request"),
        (#"{"command":"start_session","session_id":"x","mode":"focus","duration_sec":-1,"id":"d"}"#, "bad_request"),
        (#"{"command":"start_session","session_id":"","mode":"focus","duration_sec":60,"id":"d2"}"#, "bad_request"),
        (#"{"command":"stop_session","id":"e"}"#, "bad_request"),
        (#"{"command":"stop_session","session_id":"other","id":"f"}"#, "invalid_state"),
        (#"{"command":"ingest_hsi_metrics","metrics":[1],"id":"g"}"#, "bad_request"),
        (#"{"command":"ack"}"#, "bad_request"),
        (#"{"command":"hello","resume":{"last_seq":"x"}}"#, "bad_request"),
        (String(repeating: "[", count: 5000), "bad_json"),
        (#"{"command":"start_session","x":"\#(String(repeating: "a", count: 70_000))"}"#, "payload_too_large"),
        ("{\"command\":\"get_status\"}\u{0}", "bad_json"),
    ])
    func badCommandsGetAClearErrorAndTheSessionKeepsRunning(input: String, expected: String) async throws {
        let rig = Rig()
        let c = rig.hub.connect(Rig.phone)
        _ = await rig.send(start, c)
        let r = try #require(await rig.send(input, c))
        #expect(r["type"] == .string("command_result"))
        #expect(r["ok"] == .bool(false))
        let errorCode = r["error_code"]?.stringValue
        #expect(errorCode == expected)
        let message = r["message"]?.stringValue ?? ""
        #expect(!message.isEmpty)
        #expect(rig.engine.getStatus()?.sessionId == "s1")
        rig.clock.advance(byMs: 5_000)
        #expect(try messages(c.queue).contains { $0["type"] == .string("session_frame") })
    }

    @Test func randomBytesNeverCrashTheParser() async throws {
        let rig = Rig()
        let c = rig.hub.connect(Rig.phone)
        _ = await rig.send(start, c)
        var rng = SplitMix64(seed: 99)
        let alphabet = Array(#"{}[]",:0123456789.-eE truefalsnull\"command_sesionid"#.utf8)
        for _ in 0..<2000 {
            let n = Int(rng.next() % 80)
            let bytes = (0..<n).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] }
            _ = await rig.send(String(decoding: bytes, as: UTF8.self), c)
        }
        #expect(rig.engine.getStatus()?.sessionId == "s1")
    }

    @Test func aSlowConsumerLosesOldLiveFramesButNeverReliableOnesAndNeverBlocks() async throws {
        var config = RelayHubConfiguration()
        config.consumerLiveLimit = 4
        let rig = Rig(configuration: config)
        let slow = rig.hub.connect(Rig.phone)
        let fast = rig.hub.connect(Rig.viewer)
        _ = await rig.send(start.replacingOccurrences(of: "600", with: "100"), slow)
        for _ in 0..<100 {
            rig.clock.advance(byMs: 1_000)
            _ = fast.queue.drain()
        }
        await rig.engine.idle()
        #expect(rig.engine.getStatus() == nil, "the session ran to its end")
        let got = try messages(slow.queue)
        #expect(types(got.filter { $0["delivery"] == .string("reliable") }) == ["session_started", "session_summary"])
        #expect(got.filter { $0["delivery"] == .string("live") }.count == 4)
        #expect(slow.queue.droppedCount > 30)
    }
}

@Suite struct RelayHubConsumerTests {
    let start = #"{"command":"start_session","session_id":"s1","mode":"focus","duration_sec":600,"profile":{"window_sec":30,"emit_interval_sec":5},"window_label":"desk","id":"c1"}"#

    @Test func aRegisteredConsumerGetsReliableEventsPublishedBeforeItsFirstConnection() async throws {
        let rig = Rig()
        rig.hub.register(consumerId: "uplink")
        let phone = rig.hub.connect(Rig.phone)
        _ = try #require(await rig.send(start, phone))
        rig.clock.advance(byMs: 6_000)
        #expect(!rig.hub.hasDelivered(to: "uplink"), "session_started is kept for the uplink, not yet sent")
        let late = rig.hub.connect(RelayPrincipal(consumerId: "uplink", name: "uplink", scope: .control))
        let got = try messages(late.queue)
        #expect(types(got).contains("session_started"))
        #expect(!types(got).contains("session_frame"), "live frames before the connection are for hello to resume")
        #expect(rig.hub.hasDelivered(to: "uplink"), "connected with an empty queue: everything handed over")
        // An unregistered consumer connecting for the first time starts from now, as before.
        let fresh = rig.hub.connect(RelayPrincipal(consumerId: "laptop", name: "laptop", scope: .read))
        #expect(!types(try messages(fresh.queue)).contains("session_started"))
    }

    @Test func anAcknowledgedConsumerHasEverythingWithoutAConnection() async throws {
        let rig = Rig()
        rig.hub.register(consumerId: "uplink")
        let up = rig.hub.connect(RelayPrincipal(consumerId: "uplink", name: "uplink", scope: .control))
        _ = try #require(await rig.send(start, up))
        let seq = try #require(try messages(up.queue).first { $0["type"] == .string("session_started") }?["relay_seq"]?.intValue)
        rig.hub.disconnect(up)
        #expect(!rig.hub.isConnected("uplink"))
        #expect(!rig.hub.hasDelivered(to: "uplink"), "sent but not acknowledged, and the link is gone")
        let again = rig.hub.connect(RelayPrincipal(consumerId: "uplink", name: "uplink", scope: .control))
        #expect(try types(messages(again.queue)).contains("session_started"), "redelivered on the next link")
        _ = await rig.send(#"{"command":"ack","relay_seq":\#(seq)}"#, again)
        rig.hub.disconnect(again)
        #expect(rig.hub.hasDelivered(to: "uplink"))
    }

    @Test func revokingATokenClosesItsConnectionsAndNoOtherOnes() async throws {
        let rig = Rig()
        rig.hub.register(consumerId: "uplink")
        let phone = rig.hub.connect(Rig.phone)
        let viewer = rig.hub.connect(Rig.viewer)
        let uplink = rig.hub.connect(RelayPrincipal(consumerId: "uplink", name: "uplink", scope: .control))
        let anonymous = rig.hub.connect(.anonymous)
        #expect(rig.hub.closeRevoked(validConsumerIds: ["viewer"]) == 1)
        #expect(phone.queue.isClosed)
        #expect(phone.closeReason.withLock { $0 } == .revoked)
        #expect(!viewer.queue.isClosed && !uplink.queue.isClosed && !anonymous.queue.isClosed)
        #expect(rig.hub.closeRevoked(validConsumerIds: ["viewer", "phone"]) == 0, "an open connection counts once")
    }

    @Test func revokingTheLastHolderReleasesTheReliableEventsKeptForIt() async throws {
        let rig = Rig()
        let phone = rig.hub.connect(Rig.phone)
        _ = try #require(await rig.send(start, phone))
        rig.hub.disconnect(phone)
        #expect(!rig.hub.hasDelivered(to: "phone"), "session_started is kept for the phone until it acknowledges")
        rig.hub.closeRevoked(validConsumerIds: ["viewer"])
        #expect(rig.hub.hasDelivered(to: "phone"), "nothing is kept for a revoked token")
    }

    @Test(.timeLimit(.minutes(1))) func startSessionIsAnsweredAfterItsSessionStartedEvenWhenEventsComeThroughAQueue() async throws {
        // Events reach the hub later than the controller returns, as through the gateway's sink queue.
        let clock = ManualSessionClock(startMs: 1_000_000)
        let controller = LateStartController(clock: clock, publishAfterMs: 50)
        let hub = RelayHub(controller: controller, clock: clock)
        controller.hub = hub
        let c = hub.connect(Rig.phone)
        let answered = Task { await hub.handle(text: start, from: c) }
        await controller.called.first { _ in true }
        // The command waits for its session_started before the clock lets the queue publish it (without this, the
        // event could be out before the wait begins, and the queued path would go untested).
        while hub.startWaiterCount == 0 { await Task.yield() }
        clock.advance(byMs: 50)
        await answered.value
        let got = try types(messages(c.queue))
        let started = try #require(got.firstIndex(of: "session_started"))
        let result = try #require(got.firstIndex(of: "command_result"))
        #expect(started < result, "\(got)")
    }

    /// The same for `stop_session` and the session's summary: the result came before the summary at times (2 of 17
    /// stops through `serve`), and a phone that closed on `ok` missed the summary.
    @Test(.timeLimit(.minutes(1))) func stopSessionIsAnsweredAfterItsSummaryEvenWhenEventsComeThroughAQueue() async throws {
        let clock = ManualSessionClock(startMs: 1_000_000)
        let controller = LateStartController(clock: clock, publishAfterMs: 50)
        let hub = RelayHub(controller: controller, clock: clock)
        controller.hub = hub
        let c = hub.connect(Rig.phone)
        let answered = Task { await hub.handle(text: #"{"command":"stop_session","session_id":"s1","id":"c9"}"#, from: c) }
        await controller.called.first { _ in true }
        while hub.startWaiterCount == 0 { await Task.yield() }
        clock.advance(byMs: 50)
        await answered.value
        let got = try types(messages(c.queue))
        let summary = try #require(got.firstIndex(of: "session_summary"))
        let result = try #require(got.firstIndex(of: "command_result"))
        #expect(summary < result, "\(got)")
    }

    @Test(.timeLimit(.minutes(1))) func startSessionIsStillAnsweredWhenItsSessionStartedNeverComes() async throws {
        let clock = ManualSessionClock(startMs: 1_000_000)
        let controller = LateStartController(clock: clock, publishAfterMs: nil)
        let hub = RelayHub(controller: controller, clock: clock)
        let c = hub.connect(Rig.phone)
        let answered = Task { await hub.handle(text: start, from: c) }
        _ = await clock.scheduledDelays.first { _ in true }  // the hub's wait for session_started is set
        clock.advance(byMs: RelayHub.startedWaitMs)
        await answered.value
        let result = try #require(try messages(c.queue).first { $0["type"] == .string("command_result") })
        #expect(result["ok"] == .bool(true))
    }
}

/// A controller whose `session_started` reaches the hub `publishAfterMs` after `startSession` returned (never when
/// nil).
final class LateStartController: RelayController, @unchecked Sendable {
    // @unchecked: `hub` is set once before any command is handled and only read afterwards.
    let clock: ManualSessionClock
    let publishAfterMs: Int64?
    weak var hub: RelayHub?
    let (called, calledContinuation) = AsyncStream<Void>.makeStream()

    init(clock: ManualSessionClock, publishAfterMs: Int64?) {
        self.clock = clock
        self.publishAfterMs = publishAfterMs
    }

    func startSession(_ config: SessionConfig) async throws(SessionError) {
        if let publishAfterMs {
            _ = clock.schedule(afterMs: publishAfterMs) { [weak hub] in
                hub?.publish(.started(sessionId: config.sessionId, startedAtMs: 1_000_000))
            }
        }
        calledContinuation.yield()
    }

    func stopSession(sessionId: String) async throws(SessionError) {
        if let publishAfterMs {
            _ = clock.schedule(afterMs: publishAfterMs) { [weak hub] in
                hub?.publish(.summary(sessionId: sessionId, durationActualSec: 1, metrics: SessionMetrics(), behavior: nil))
            }
        }
        calledContinuation.yield()
    }
    func status() -> SessionStatus? { nil }
    func ingestHsiMetrics(_ metrics: [String: JSONValue], sessionId: String?) -> Bool { false }
}
