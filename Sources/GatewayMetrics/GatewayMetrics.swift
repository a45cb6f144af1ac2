import GatewayEngine
import GatewaySink
import Prometheus
import Synchronization

/// The gateway's Prometheus metrics (swift-prometheus): what the session's samples and events show, kept by
/// `MetricsSink`, and figures read when scraped (queue and outbox depths, drop counters) from collectors the command
/// registers. `exposition()` is the text format served at `/metrics`.
public final class GatewayMetrics: Sendable {
    public let registry = PrometheusCollectorRegistry()
    private let collectors = Mutex<[@Sendable (GatewayMetrics) -> Void]>([])
    /// Last value seen of each counter read at scrape time, so that the Prometheus counter only moves forward.
    private let seen = Mutex<[String: Int]>([:])

    public init() {
        // Present from the start, so a scraper sees the series before the first session.
        _ = registry.gauge(name: "hr_gateway_session_active", help: "1 while a session runs.")
        setCounter("hr_gateway_nonfinite_values_dropped_total", help: "NaN or infinite values dropped before use.",
                   to: 0)
        addCollector { m in
            m.setCounter("hr_gateway_nonfinite_values_dropped_total", help: "NaN or infinite values dropped before use.",
                         to: NonFiniteValues.droppedCount)
        }
    }

    /// Adds a function called before each exposition, to set gauges and counters from live figures.
    public func addCollector(_ collect: @escaping @Sendable (GatewayMetrics) -> Void) {
        collectors.withLock { $0.append(collect) }
    }

    /// Sets a gauge.
    public func gauge(_ name: String, help: String, labels: [(String, String)] = [], _ value: Double) {
        registry.gauge(name: name, labels: labels, help: help).set(to: value)
    }

    /// Moves a counter up to `total`, a running total kept elsewhere (it never goes down).
    public func setCounter(_ name: String, help: String, labels: [(String, String)] = [], to total: Int) {
        let key = name + labels.map { "\u{0}\($0.0)=\($0.1)" }.joined()
        let delta = seen.withLock { s -> Int in
            let before = s[key] ?? 0
            s[key] = max(before, total)
            return max(0, total - before)
        }
        let counter = registry.counter(name: name, labels: labels, help: help)
        if delta > 0 { counter.increment(by: Int64(delta)) }
    }

    /// The Prometheus text exposition format (version 0.0.4).
    public func exposition() -> String {
        for collect in collectors.withLock({ $0 }) { collect(self) }
        return registry.emitToString()
    }

    /// The content type of `exposition()`.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"
}

/// Keeps the metrics the session itself shows: per device, notifications, RR intervals, heart rate, battery,
/// contact, reconnections and stale periods; per session, starts, ends and events by type. Cheap and non-blocking
/// (atomic counters), so it runs on the delivering thread.
///
/// A device's heart rate and contact are what it says now: they leave the exposition when the device stops
/// streaming (stale, reconnecting, gone) and when the session ends, and come back with its next reading, so that a
/// scraper never graphs a strap taken off an hour ago at its last heart rate.
public final class MetricsSink: SessionSink {
    public let name = "metrics"
    public let metrics: GatewayMetrics
    private let states = Mutex<[String: SensorStatus.State]>([:])
    /// The devices whose heart rate or contact gauge is in the registry.
    private let live = Mutex<Set<String>>([])

    public init(metrics: GatewayMetrics) { self.metrics = metrics }

    private var registry: PrometheusCollectorRegistry { metrics.registry }

    public func receive(sample: BiosignalSample) {
        let key = sample.deviceId ?? sample.source
        let device = [("device", key)]
        if let ecg = sample.ecgUv {
            registry.counter(name: "hr_gateway_ecg_samples_total", labels: device,
                             help: "Raw ECG samples received from each device (Polar PMD).").increment(by: Int64(ecg.count))
            if sample.isWaveformOnly { return }
        }
        registry.counter(
            name: "hr_gateway_notifications_total", labels: device + [("source", sample.source)],
            help: "Readings received from each device (one per strap notification or camera estimate)."
        ).increment()
        if let rr = sample.rrIntervalsMs, !rr.isEmpty {
            registry.counter(name: "hr_gateway_rr_intervals_total", labels: device,
                                 help: "RR intervals received from each device.").increment(by: Int64(rr.count))
        }
        // Set and removed under `live`'s lock: a reading and a status from different threads leave the gauge and
        // the set in step.
        if sample.bpm.isFinite {
            live.withLock { l in
                l.insert(key)
                heartRate(device).set(to: sample.bpm)
            }
        }
        if let c = sample.contact, c != .notSupported {
            live.withLock { l in
                l.insert(key)
                contact(device).set(to: c == .contact ? 1.0 : 0.0)
            }
        }
        if sample.gapBefore {
            registry.counter(name: "hr_gateway_gaps_total", labels: device,
                                 help: "Readings after which beats may be missing (link loss).").increment()
        }
    }

    public func receive(event: EncodedEvent) {
        registry.counter(name: "hr_gateway_events_total", labels: [("type", event.event.type)],
                             help: "Session events emitted, by type.").increment()
        switch event.event {
        case .started:
            registry.gauge(name: "hr_gateway_session_active", help: "1 while a session runs.").set(to: 1.0)
        case .summary, .error:
            registry.gauge(name: "hr_gateway_session_active", help: "1 while a session runs.").set(to: 0.0)
            live.withLock { l in
                for key in l { removeReadings(of: key) }
                l = []
            }
        case .sensorStatus(_, _, let status):
            let key = status.deviceId ?? status.source
            let device = [("device", key)]
            let before = states.withLock { s -> SensorStatus.State? in
                defer { s[key] = status.state }
                return s[key]
            }
            if status.state != before {
                switch status.state {
                case .reconnecting:
                    registry.counter(name: "hr_gateway_reconnects_total", labels: device,
                                         help: "Times each device's link was lost and a reconnection began.").increment()
                case .stale:
                    registry.counter(name: "hr_gateway_stale_periods_total", labels: device,
                                         help: "Times each device went quiet while connected.").increment()
                default: break
                }
            }
            registry.gauge(name: "hr_gateway_sensor_streaming", labels: device,
                               help: "1 while the device streams, 0 otherwise.").set(to: status.state == .streaming ? 1.0 : 0.0)
            if status.state != .streaming {
                live.withLock { l in if l.remove(key) != nil { removeReadings(of: key) } }
            }
            if let b = status.batteryPercent {
                registry.gauge(name: "hr_gateway_battery_percent", labels: device,
                                   help: "Latest battery level of each device.").set(to: Double(b))
            }
        default:
            break
        }
    }

    public func run() async throws { await untilGracefulShutdown() }

    private func heartRate(_ device: [(String, String)]) -> Gauge {
        registry.gauge(name: "hr_gateway_heart_rate_bpm", labels: device,
                       help: "Heart rate of each device while it streams (absent when it does not).")
    }

    private func contact(_ device: [(String, String)]) -> Gauge {
        registry.gauge(name: "hr_gateway_contact", labels: device,
                       help: "1 when a streaming strap reports skin contact, 0 when it reports none.")
    }

    /// Takes a device's heart rate and contact out of the exposition (a gauge not in the registry is ignored).
    private func removeReadings(of key: String) {
        let device = [("device", key)]
        registry.unregisterGauge(heartRate(device))
        registry.unregisterGauge(contact(device))
    }
}

extension PrometheusCollectorRegistry {
    /// The counter `name` with `labels` (made on first use, the same one after).
    func counter(name: String, labels: [(String, String)] = [], help: String) -> Counter {
        makeCounter(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help), labels: labels)
    }

    /// The gauge `name` with `labels` (made on first use, the same one after).
    func gauge(name: String, labels: [(String, String)] = [], help: String) -> Gauge {
        makeGauge(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help), labels: labels)
    }
}
