import Foundation
import GatewayEngine
import HRVAnalysis
import Testing

@testable import MQTTSink

@Suite struct MQTTOutboxTests {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("mqtt-outbox-\(UUID().uuidString)").path

    /// A pid that is not running: a child that has exited and been reaped.
    static func deadPid() throws -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/true")
        try p.run()
        p.waitUntilExit()
        return p.processIdentifier
    }

    @Test func addedMessagesStayUntilRemoved() throws {
        let box = try MQTTOutbox(directory: dir)
        let a = try box.add(broker: "h:1883", gatewayId: "pi", topic: "hr-gateway/pi/event", payload: "{\"n\":1}",
                            qos: 1, retain: false, nowMs: 1)
        let b = try box.add(broker: "h:1883", gatewayId: "pi", topic: "hr-gateway/pi/event", payload: "{\"n\":2}",
                            qos: 1, retain: false, nowMs: 2)
        #expect(a.dropped == 0 && b.id > a.id)
        #expect(try box.count() == 2)
        try box.remove(id: a.id)
        #expect(try box.count(broker: "h:1883", gatewayId: "pi") == 1)
    }

    @Test func aLaterRunAdoptsOnlyDeadOwnersRowsForItsBrokerAndID() throws {
        let dead = try Self.deadPid()
        let crashed = try MQTTOutbox(directory: dir, owner: dead)
        for (i, gw) in ["pi", "pi", "other"].enumerated() {
            _ = try crashed.add(broker: "h:1883", gatewayId: gw, topic: "hr-gateway/\(gw)/event", payload: "\(i)",
                                qos: 1, retain: false, nowMs: Int64(i))
        }
        _ = try crashed.add(broker: "elsewhere:1883", gatewayId: "pi", topic: "hr-gateway/pi/event", payload: "x",
                            qos: 1, retain: false, nowMs: 9)
        // A live process (this one) with rows of its own: never taken from it.
        let live = try MQTTOutbox(directory: dir, owner: getppid())
        _ = try live.add(broker: "h:1883", gatewayId: "pi", topic: "hr-gateway/pi/event", payload: "live", qos: 1,
                         retain: false, nowMs: 10)

        let next = try MQTTOutbox(directory: dir)
        let adopted = try next.adoptLeftovers(broker: "h:1883", gatewayId: "pi")
        #expect(adopted.map(\.payload) == ["0", "1"])
        #expect(adopted.allSatisfy { $0.qos == 1 && !$0.retain && $0.topic == "hr-gateway/pi/event" })
        #expect(try next.adoptLeftovers(broker: "h:1883", gatewayId: "other").map(\.payload) == ["2"])
        #expect(try next.count() == 5)
    }

    @Test func theOldestAreDroppedPastTheLimit() throws {
        let box = try MQTTOutbox(directory: dir, maxItems: 3)
        var dropped = 0
        for i in 0..<5 {
            dropped += try box.add(broker: "h:1", gatewayId: "pi", topic: "t", payload: "\(i)", qos: 1, retain: false,
                                   nowMs: Int64(i)).dropped
        }
        #expect(dropped == 2)
        #expect(try box.adoptLeftovers(broker: "h:1", gatewayId: "pi").map(\.payload) == ["2", "3", "4"])
    }

    @Test func anUnwritableDirectoryIsAClearError() throws {
        try "".write(toFile: dir, atomically: true, encoding: .utf8)  // a file where the directory should be
        #expect { try MQTTOutbox(directory: dir) } throws: { e in
            (e as? MQTTError)?.code == .outbox && "\(e)".contains("--state-dir")
        }
    }
}

@Suite struct HomeAssistantDiscoveryTests {
    @Test func slugsAreTopicSafe() {
        #expect(HomeAssistantDiscovery.slug("AA:BB:CC:DD:EE:FF") == "aa_bb_cc_dd_ee_ff")
        #expect(HomeAssistantDiscovery.slug("/dev/video0") == "dev_video0")
        #expect(HomeAssistantDiscovery.slug("+#/") == "device")
    }

    @Test func configPointsAtTheDeviceStateAndTheGatewayStatus() throws {
        let topics = try MQTTTopics(gatewayId: "gym-1")
        let d = HomeAssistantDiscovery(topics: topics)
        #expect(d.configTopic(device: "AA:BB", metric: .heartRate) == "homeassistant/sensor/gym-1_aa_bb_heart_rate/config")
        let c = d.config(device: "AA:BB", source: "ble_hrm", metric: .battery)
        #expect(c["state_topic"]?.stringValue == "hr-gateway/gym-1/device/aa_bb/state")
        #expect(c["availability_topic"]?.stringValue == topics.status)
        #expect(c["value_template"]?.stringValue == "{{ value_json.battery_percent }}")
        #expect(c["device_class"]?.stringValue == "battery")
        #expect(c["unique_id"]?.stringValue == "hr-gateway_gym-1_aa_bb_battery")
        #expect(c["device"]?["identifiers"] == .array([.string("hr-gateway_gym-1_aa_bb")]))
        // Home Assistant drops a discovery topic whose object id holds more than letters, digits, _ and -.
        let dotted = HomeAssistantDiscovery(topics: try MQTTTopics(gatewayId: "pi.lab 2"))
        #expect(dotted.configTopic(device: "AA:BB", metric: .heartRate) == "homeassistant/sensor/pi_lab_2_aa_bb_heart_rate/config")
        let pulse = d.config(device: "/dev/video0", source: SessionMetrics.cameraSource, metric: .heartRate)
        #expect(pulse["name"]?.stringValue == "Camera pulse")
    }

    @Test func aMetricIsAnnouncedOnceWhenItFirstHasAValue() {
        var board = DeviceBoard()
        board.record(BiosignalSample(timestampMs: 1, bpm: 61, deviceId: "AA", source: "ble_hrm"))
        #expect(board.unannounced("AA") == [.heartRate])
        #expect(board.unannounced("AA") == [])
        let changed = board.record(SessionEvent.sensorStatus(
            sessionId: "s", emittedAtMs: 2, status: SensorStatus(source: "ble_hrm", deviceId: "AA", state: .streaming,
                                                                 batteryPercent: 80)))
        #expect(changed == ["AA"])
        #expect(board.unannounced("AA") == [.battery])
        var metrics = SessionMetrics()
        metrics.rrCount = 30
        metrics.rmssdMs = 42.04
        _ = board.record(SessionEvent.frame(sessionId: "s", seq: 1, emittedAtMs: 3, metrics: metrics, behavior: nil))
        #expect(board.unannounced("AA") == [.rmssd])
        let state = board.devices["AA"]!.stateDocument(deviceId: "AA")
        #expect(state["hr_bpm"] == .double(61) && state["rmssd_ms"] == .double(42) && state["battery_percent"] == .int(80))
        // The device's own id, which its topic holds only made topic-safe.
        #expect(state["device_id"] == .string("AA"))
        #expect(state["contact"] == nil)
    }

    @Test func rmssdIsNotGivenToACameraNorFromAFrameWithoutBeats() {
        var board = DeviceBoard()
        board.record(BiosignalSample(timestampMs: 1, bpm: 70, deviceId: "/dev/video0", source: SessionMetrics.cameraSource))
        board.record(BiosignalSample(timestampMs: 1, bpm: 60, deviceId: "AA", source: "ble_hrm"))
        var metrics = SessionMetrics()
        metrics.rmssdMs = 0
        _ = board.record(SessionEvent.frame(sessionId: "s", seq: 1, emittedAtMs: 3, metrics: metrics, behavior: nil))
        #expect(board.devices["AA"]?.rmssdMs == nil)
        metrics.rrCount = 10
        metrics.rmssdMs = 30
        _ = board.record(SessionEvent.frame(sessionId: "s", seq: 2, emittedAtMs: 4, metrics: metrics, behavior: nil))
        #expect(board.devices["AA"]?.rmssdMs == 30)
        #expect(board.devices["/dev/video0"]?.rmssdMs == nil)
    }

    /// Each strap's live DFA alpha1 (from the frame's `devices`) goes into its state and gets a Home Assistant sensor
    /// once it has a value; a withheld estimate leaves the last one.
    @Test func eachStrapsAlpha1IsInItsStateOnceItHasOne() throws {
        var board = DeviceBoard()
        for d in ["AA", "BB"] {
            board.record(BiosignalSample(timestampMs: 1_000, bpm: 60, rrIntervalsMs: [1000], deviceId: d, source: "ble_hrm"))
            _ = board.unannounced(d)
        }
        var x = 0.0
        var k = 0.0
        let correlated = (0..<160).map { _ -> Double in
            k += 1
            x = 0.9 * x + 15 * sin(k * 0.7) * cos(k * 0.13)
            return 850 + x
        }
        let estimate = LiveDFA.estimate(segments: [correlated], endS: 140)
        let alpha1 = try #require(estimate.alpha1)
        var a = SessionMetrics()
        a.liveDFA = estimate
        var b = SessionMetrics()
        b.liveDFA = LiveDFA.estimate(segments: [[800, 810]], endS: 140)
        #expect(b.liveDFA?.alpha1 == nil, "withheld: too few intervals")
        var frame = SessionMetrics()
        frame.devices = ["AA": a, "BB": b]
        _ = board.record(SessionEvent.frame(sessionId: "s", seq: 1, emittedAtMs: 2_000, metrics: frame, behavior: nil))
        #expect(board.unannounced("AA") == [.dfaAlpha1])
        #expect(board.unannounced("BB") == [])
        #expect(board.devices["AA"]?.stateDocument(deviceId: "AA")["dfa_alpha1"] == .double((alpha1 * 1000).rounded() / 1000))
        #expect(board.devices["BB"]?.stateDocument(deviceId: "BB")["dfa_alpha1"] == nil)
        // Withheld later: A keeps its last value.
        frame.devices = ["AA": b, "BB": b]
        _ = board.record(SessionEvent.frame(sessionId: "s", seq: 2, emittedAtMs: 3_000, metrics: frame, behavior: nil))
        #expect(board.devices["AA"]?.dfaAlpha1 == alpha1)
        // A strap and a camera: the frame has no `devices` (the camera is not one), and its alpha1 is the strap's
        // alone.
        var pair = DeviceBoard()
        pair.record(BiosignalSample(timestampMs: 1_000, bpm: 60, rrIntervalsMs: [1000], deviceId: "AA", source: "ble_hrm"))
        pair.record(BiosignalSample(timestampMs: 1_000, bpm: 61, deviceId: "/dev/video0", source: SessionMetrics.cameraSource))
        var strapAndCamera = a
        strapAndCamera.startMs = 0
        _ = pair.record(SessionEvent.frame(sessionId: "s", seq: 1, emittedAtMs: 2_000, metrics: strapAndCamera, behavior: nil))
        #expect(pair.devices["AA"]?.dfaAlpha1 == alpha1)
        #expect(pair.devices["/dev/video0"]?.dfaAlpha1 == nil)
        let config = HomeAssistantDiscovery(topics: try MQTTTopics(gatewayId: "gym-1")).config(
            device: "AA", source: "ble_hrm", metric: .dfaAlpha1)
        #expect(config["value_template"]?.stringValue == "{{ value_json.dfa_alpha1 }}")
        #expect(config["name"]?.stringValue == "DFA alpha1")
    }

    /// Strap A's link was lost a while ago; B alone is in the window, so the frame has no `devices` and its RMSSD is
    /// B's: A keeps its own last value instead of taking B's.
    @Test func aFrameOfOneStrapDoesNotGiveItsRMSSDToAnotherOutOfItsWindow() {
        var board = DeviceBoard()
        board.record(BiosignalSample(timestampMs: 1_000, bpm: 60, rrIntervalsMs: [1000], deviceId: "AA", source: "ble_hrm"))
        board.record(BiosignalSample(timestampMs: 1_005, bpm: 62, rrIntervalsMs: [960], deviceId: "BB", source: "ble_hrm"))
        var both = SessionMetrics()
        var a = SessionMetrics()
        a.rrCount = 30
        a.rmssdMs = 50
        var b = SessionMetrics()
        b.rrCount = 30
        b.rmssdMs = 20
        both.devices = ["AA": a, "BB": b]
        both.startMs = 0
        _ = board.record(SessionEvent.frame(sessionId: "s", seq: 1, emittedAtMs: 2_000, metrics: both, behavior: nil))
        #expect(board.devices["AA"]?.rmssdMs == 50 && board.devices["BB"]?.rmssdMs == 20)
        board.record(BiosignalSample(timestampMs: 90_000, bpm: 62, rrIntervalsMs: [960], deviceId: "BB", source: "ble_hrm"))
        var onlyB = SessionMetrics()
        onlyB.rrCount = 60
        onlyB.rmssdMs = 25
        onlyB.startMs = 30_000
        _ = board.record(SessionEvent.frame(sessionId: "s", seq: 2, emittedAtMs: 90_500, metrics: onlyB, behavior: nil))
        #expect(board.devices["BB"]?.rmssdMs == 25)
        #expect(board.devices["AA"]?.rmssdMs == 50, "A's own last value, not B's")
    }
}
