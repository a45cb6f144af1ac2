import GatewayEngine
import GatewayMetrics
import Testing

@Suite struct MetricsSinkTests {
    func status(_ state: SensorStatus.State, battery: Int? = nil) -> EncodedEvent {
        EncodedEvent(.sensorStatus(
            sessionId: "s", emittedAtMs: 0,
            status: SensorStatus(source: "ble_hrm", deviceId: "AA:BB", state: state, batteryPercent: battery)))
    }

    func line(_ text: String, _ prefix: String) -> String? {
        text.split(separator: "\n").first { $0.hasPrefix(prefix) }.map(String.init)
    }

    @Test func reconnectionsAndStalePeriodsAreCountedOncePerChange() {
        let metrics = GatewayMetrics()
        let sink = MetricsSink(metrics: metrics)
        for s in [SensorStatus.State.streaming, .stale, .stale, .streaming, .reconnecting, .reconnecting, .streaming,
                  .reconnecting] {
            sink.receive(event: status(s))
        }
        let text = metrics.exposition()
        #expect(line(text, "hr_gateway_reconnects_total{device=\"AA:BB\"}") == "hr_gateway_reconnects_total{device=\"AA:BB\"} 2")
        #expect(line(text, "hr_gateway_stale_periods_total{device=\"AA:BB\"}") == "hr_gateway_stale_periods_total{device=\"AA:BB\"} 1")
        #expect(line(text, "hr_gateway_sensor_streaming{device=\"AA:BB\"}") == "hr_gateway_sensor_streaming{device=\"AA:BB\"} 0.0")
    }

    @Test func samplesGiveNotificationsRRBatteryAndContact() {
        let metrics = GatewayMetrics()
        let sink = MetricsSink(metrics: metrics)
        var sample = BiosignalSample(timestampMs: 1, bpm: 58, rrIntervalsMs: [1010, 1030], deviceId: "AA:BB", source: "ble_hrm")
        sample.contact = .noContact
        sink.receive(sample: sample)
        sink.receive(sample: sample)
        sink.receive(event: status(.streaming, battery: 71))
        let text = metrics.exposition()
        #expect(text.contains("hr_gateway_notifications_total{device=\"AA:BB\",source=\"ble_hrm\"} 2"))
        #expect(text.contains("hr_gateway_rr_intervals_total{device=\"AA:BB\"} 4"))
        #expect(text.contains("hr_gateway_contact{device=\"AA:BB\"} 0.0"))
        #expect(text.contains("hr_gateway_battery_percent{device=\"AA:BB\"} 71.0"))
        #expect(text.contains("hr_gateway_heart_rate_bpm{device=\"AA:BB\"} 58.0"))
    }

    @Test func heartRateAndContactLeaveWhenTheStrapStopsStreamingAndWhenTheSessionEnds() {
        let metrics = GatewayMetrics()
        let sink = MetricsSink(metrics: metrics)
        var sample = BiosignalSample(timestampMs: 1, bpm: 64, rrIntervalsMs: [940], deviceId: "AA:BB", source: "ble_hrm")
        sample.contact = .contact
        let hr = "hr_gateway_heart_rate_bpm{device=\"AA:BB\"}"
        let contact = "hr_gateway_contact{device=\"AA:BB\"}"
        sink.receive(event: EncodedEvent(.started(sessionId: "s", startedAtMs: 0)))
        sink.receive(event: status(.streaming))
        sink.receive(sample: sample)
        #expect(line(metrics.exposition(), hr) == "\(hr) 64.0")
        #expect(line(metrics.exposition(), contact) == "\(contact) 1.0")
        sink.receive(event: status(.stale))
        #expect(line(metrics.exposition(), hr) == nil)
        #expect(line(metrics.exposition(), contact) == nil)
        sink.receive(event: status(.streaming))
        sample.bpm = 66
        sink.receive(sample: sample)
        #expect(line(metrics.exposition(), hr) == "\(hr) 66.0")
        sink.receive(event: EncodedEvent(.summary(sessionId: "s", durationActualSec: 60, metrics: SessionMetrics(),
                                                  behavior: nil)))
        let after = metrics.exposition()
        #expect(line(after, hr) == nil)
        #expect(line(after, contact) == nil)
        // What the strap did stays: its counters and its streaming state.
        #expect(line(after, "hr_gateway_rr_intervals_total{device=\"AA:BB\"}") == "hr_gateway_rr_intervals_total{device=\"AA:BB\"} 2")
        #expect(line(after, "hr_gateway_session_active") == "hr_gateway_session_active 0.0")
    }

    @Test func countersReadAtScrapeTimeNeverGoBack() {
        let metrics = GatewayMetrics()
        let total = Locked(5)
        metrics.addCollector { m in
            m.setCounter("hr_gateway_test_total", help: "test", to: total.withLock { $0 })
        }
        #expect(metrics.exposition().contains("hr_gateway_test_total 5"))
        total.withLock { $0 = 3 }  // a restarted source: the counter holds, it does not go down
        #expect(metrics.exposition().contains("hr_gateway_test_total 5"))
        total.withLock { $0 = 9 }
        #expect(metrics.exposition().contains("hr_gateway_test_total 9"))
    }
}
