import GatewayEngine
import Testing

/// Golden JSON for every event shape: the exact text a consumer receives (keys sorted).
@Suite struct WireFormatTests {
    @Test func sessionStarted() {
        #expect(SessionEvent.started(sessionId: "s", startedAtMs: 1_700_000_000_123).jsonValue.jsonString
            == #"{"session_id":"s","started_at_ms":1700000000123,"type":"session_started"}"#)
    }

    @Test func sessionFrameWithSamples() {
        var m = SessionMetrics()
        m.hrMeanBpm = 72.4
        m.hrSdnnMs = 42.0
        m.rmssdMs = 33.5
        m.pnn50 = 21.3
        m.sampleCount = 12
        m.startMs = 1000
        m.endMs = 12000
        let e = SessionEvent.frame(sessionId: "s", seq: 3, emittedAtMs: 15000, metrics: m, behavior: nil)
        #expect(e.jsonValue.jsonString == #"{"emitted_at_ms":15000,"metrics":{"end_ms":12000,"hr_mean_bpm":72.4,"hr_sdnn_ms":42.0,"pnn50":21.3,"rmssd_ms":33.5,"sample_count":12,"start_ms":1000},"seq":3,"session_id":"s","type":"session_frame"}"#)
    }

    @Test func sessionFrameWithLocalHRVCameraAndBehavior() {
        var m = SessionMetrics()
        m.hrMeanBpm = 60
        m.sampleCount = 1
        m.startMs = 5
        m.endMs = 5
        m.rrCount = 2
        m.hrFromRRBpm = 60.0
        m.artifactCount = 0
        m.respRateRRBpm = 12.5
        m.respRateRRConfidence = 0.8
        m.cameraHrBpm = 61.2
        m.cameraConfidence = 0.9
        m.breathingRateBpm = 13.0
        m.cameraSampleCount = 4
        let b = BehaviorSnapshot(typingCadence: 3.5, burstLength: 8, appSwitchesPerMinute: 4, timestamp: 99)
        let e = SessionEvent.frame(sessionId: "s", seq: 1, emittedAtMs: 10, metrics: m, behavior: b)
        #expect(e.jsonValue.jsonString == #"{"behavior":{"app_switches_per_minute":4,"burst_length":8,"timestamp":99,"typing_cadence":3.5},"emitted_at_ms":10,"metrics":{"artifact_count":0,"breathing_rate_bpm":13.0,"camera_confidence":0.9,"camera_hr_bpm":61.2,"camera_sample_count":4,"end_ms":5,"hr_from_rr_bpm":60.0,"hr_mean_bpm":60.0,"hr_sdnn_ms":0.0,"pnn50":0.0,"resp_rate_rr_bpm":12.5,"resp_rate_rr_confidence":0.8,"rmssd_ms":0.0,"rr_count":2,"sample_count":1,"start_ms":5},"seq":1,"session_id":"s","type":"session_frame"}"#)
    }

    @Test func biosignalFrame() {
        let samples = [
            BiosignalSample(timestampMs: 1, bpm: 60, source: "mock"),
            BiosignalSample(timestampMs: 2, bpm: 61.5, rrIntervalsMs: [975.6], deviceId: "AA:BB", source: "ble_hrm",
                            contact: .contact, energyKJ: 12, rrRaw1024: [999], sequence: 7),
        ]
        let e = SessionEvent.biosignalFrame(sessionId: "s", seq: 2, emittedAtMs: 3, samples: samples)
        #expect(e.jsonValue.jsonString == #"{"emitted_at_ms":3,"samples":[{"bpm":60.0,"source":"mock","timestamp_ms":1},{"bpm":61.5,"contact":"contact","device_id":"AA:BB","energy_kj":12,"notification_seq":7,"rr_1024":[999],"rr_intervals_ms":[975.6],"source":"ble_hrm","timestamp_ms":2}],"seq":2,"session_id":"s","type":"biosignal_frame"}"#)
    }

    @Test func sessionSummaryOfAnEmptyWindow() {
        let e = SessionEvent.summary(sessionId: "s", durationActualSec: 0, metrics: SessionMetrics(), behavior: nil)
        #expect(e.jsonValue.jsonString == #"{"duration_actual_sec":0,"metrics":{"hr_mean_bpm":0.0,"hr_sdnn_ms":0.0,"pnn50":0.0,"rmssd_ms":0.0,"sample_count":0},"session_id":"s","type":"session_summary"}"#)
    }

    @Test func sessionErrorCarriesBothCodeKeys() {
        let e = SessionEvent.error(sessionId: "s", code: .sensorUnavailable, message: "BLE HRM not connected")
        #expect(e.jsonValue.jsonString == #"{"code":"sensor_unavailable","error_code":"sensor_unavailable","message":"BLE HRM not connected","session_id":"s","type":"session_error"}"#)
    }

    @Test func sensorStatus() {
        let e = SessionEvent.sensorStatus(
            sessionId: "s", emittedAtMs: 4,
            status: SensorStatus(source: "camera_rppg", deviceId: "/dev/video0", state: .error, message: "device gone",
                                 errorCode: .sensorUnavailable))
        #expect(e.jsonValue.jsonString == #"{"device_id":"/dev/video0","emitted_at_ms":4,"error_code":"sensor_unavailable","message":"device gone","session_id":"s","source":"camera_rppg","state":"error","type":"sensor_status"}"#)
    }

    @Test func dictionaryFormKeepsIntegersAndDoubles() {
        let d = SessionEvent.started(sessionId: "s", startedAtMs: 5).dictionary
        #expect(d["started_at_ms"] as? Int64 == 5)
        #expect(d["type"] as? String == "session_started")
        var m = SessionMetrics()
        m.hrMeanBpm = 70
        let f = SessionEvent.frame(sessionId: "s", seq: 1, emittedAtMs: 1, metrics: m, behavior: nil).dictionary
        #expect((f["metrics"] as? [String: Any])?["hr_mean_bpm"] as? Double == 70.0)
        #expect(f["seq"] as? Int64 == 1)
    }

    @Test func samplesRoundTripThroughTheirWireShape() throws {
        let s = BiosignalSample(timestampMs: 9, bpm: 58, rrIntervalsMs: [1000, 1031.25], deviceId: "d", source: "ble_hrm",
                                contact: .noContact, energyKJ: 3, rrRaw1024: [1024, 1056], confidence: 0.5,
                                breathingRateBpm: 11, sequence: 4, gapBefore: true)
        #expect(try BiosignalSample(json: JSONValue(parsing: s.jsonValue.jsonString)) == s)
        let dart = try BiosignalSample(json: JSONValue(parsing: #"{"timestamp_ms":1,"bpm":60,"rr_interval_ms":1000}"#))
        #expect(dart.rrIntervalsMs == [1000])
        #expect(throws: SampleDecodingError.self) { try BiosignalSample(json: JSONValue(parsing: #"{"bpm":60}"#)) }
        #expect(throws: SampleDecodingError.self) {
            try BiosignalSample(json: JSONValue(parsing: #"{"timestamp_ms":1,"bpm":60,"rr_intervals_ms":["x"]}"#))
        }
    }
}
