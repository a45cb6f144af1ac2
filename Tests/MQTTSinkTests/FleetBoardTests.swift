import GatewayEngine
import MQTTSink
import Testing

@Suite struct FleetBoardTests {
    func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

    @Test func statusDeviceStateAndEventsFillTheBoard() {
        var b = FleetBoard()
        do { let changed = b.receive(topic: "hr-gateway/pi/status", payload: bytes(#"{"state":"online","version":"1","sources":["ble_hrm"]}"#), nowMs: 5); #expect(changed) }
        do { let changed = b.receive(topic: "hr-gateway/pi/device/aa_bb/state", payload: bytes(#"{"hr_bpm":61.5,"battery_percent":80,"contact":"contact","state":"streaming","updated_at_ms":4}"#), nowMs: 6); #expect(changed) }
        do { let changed = b.receive(topic: "hr-gateway/pi/event", payload: bytes(#"{"type":"session_started","session_id":"s1"}"#), nowMs: 7); #expect(changed) }
        #expect(b.gateways["pi"]?.state == "online" && b.gateways["pi"]?.sessionId == "s1")
        #expect(b.gateways["pi"]?.sources == ["ble_hrm"])
        let d = b.devices["pi/aa_bb"]
        #expect(d?.hrBpm == 61.5 && d?.batteryPercent == 80 && d?.contact == "contact" && d?.updatedAtMs == 4)
        b.receive(topic: "hr-gateway/pi/event", payload: bytes(#"{"type":"session_summary","session_id":"s1"}"#), nowMs: 8)
        #expect(b.gateways["pi"]?.sessionId == nil)
        #expect(b.rows.count == 1 && b.rows[0].device?.device == "aa_bb")
    }

    /// A gateway killed mid-session: its last will says offline, and its devices' retained states (still
    /// "streaming") are marked as said before that.
    @Test func aDevicesStateFromBeforeItsGatewayWentOfflineIsMarked() {
        var b = FleetBoard()
        b.receive(topic: "hr-gateway/pi/status", payload: bytes(#"{"state":"online"}"#), nowMs: 1)
        b.receive(topic: "hr-gateway/pi/device/aa_bb/state", payload: bytes(#"{"state":"streaming","updated_at_ms":1}"#), nowMs: 2)
        b.receive(topic: "hr-gateway/pi/device/cc_dd/state", payload: bytes(#"{"hr_bpm":60}"#), nowMs: 2)
        b.receive(topic: "hr-gateway/pi/device/ee_ff/state", payload: bytes(#"{"state":"disconnected"}"#), nowMs: 2)
        let stale = { (v: JSONValue) in v["gateways"]?.arrayValue?.first?["devices"]?.arrayValue?.map { $0["state_stale"] } ?? [] }
        #expect(stale(b.jsonValue) == [nil, nil, nil])
        b.receive(topic: "hr-gateway/pi/status", payload: bytes(#"{"state":"offline","reason":"connection lost"}"#), nowMs: 3)
        #expect(b.devices["pi/aa_bb"].map(b.isStale) == true && b.devices["pi/cc_dd"].map(b.isStale) == false)
        #expect(stale(b.jsonValue) == [.bool(true), nil, nil], "a state that still holds (disconnected), or none, is not marked")
        b.receive(topic: "hr-gateway/pi/status", payload: bytes(#"{"state":"online"}"#), nowMs: 4)
        #expect(b.devices["pi/aa_bb"].map(b.isStale) == false)
    }

    @Test func hostileOrForeignMessagesAreSkipped() {
        var b = FleetBoard()
        do { let changed = b.receive(topic: "hr-gateway/pi/status", payload: bytes("not json"), nowMs: 1); #expect(!changed) }
        do { let changed = b.receive(topic: "hr-gateway/pi/status", payload: bytes("[1,2]"), nowMs: 1); #expect(!changed) }
        do { let changed = b.receive(topic: "hr-gateway/pi/status", payload: [], nowMs: 1); #expect(!changed) }  // a cleared retained topic
        do { let changed = b.receive(topic: "other/pi/status", payload: bytes("{}"), nowMs: 1); #expect(!changed) }
        do { let changed = b.receive(topic: "hr-gateway//status", payload: bytes("{}"), nowMs: 1); #expect(!changed) }
        do { let changed = b.receive(topic: "hr-gateway/pi/device/x/other", payload: bytes("{}"), nowMs: 1); #expect(!changed) }
        #expect(b.malformed == 2 && b.gateways.isEmpty)
    }
}
