import GatewayEngine

/// Home Assistant MQTT discovery for the sensors a gateway sees: per device (a strap, a camera) and metric (heart
/// rate, RMSSD, live DFA alpha1, battery, contact), a retained config under
/// `homeassistant/sensor/<ID>_<device>_<metric>/config` that points at the device's state topic and ties availability
/// to the gateway's status topic. A config is
/// published when its metric first has a value, so a strap without a battery service gets no battery sensor.
public struct HomeAssistantDiscovery: Sendable {
    public let topics: MQTTTopics
    /// Home Assistant's discovery prefix (its default).
    public var prefix = "homeassistant"

    public init(topics: MQTTTopics) { self.topics = topics }

    /// The metrics a device may have, with the key they have in the device state.
    public enum Metric: String, Sendable, CaseIterable {
        case heartRate = "heart_rate"
        case rmssd = "rmssd"
        case dfaAlpha1 = "dfa_alpha1"
        case battery = "battery"
        case contact = "contact"

        /// Key in the state document.
        public var stateKey: String {
            switch self {
            case .heartRate: "hr_bpm"
            case .rmssd: "rmssd_ms"
            case .dfaAlpha1: "dfa_alpha1"
            case .battery: "battery_percent"
            case .contact: "contact"
            }
        }
    }

    /// A topic-safe form of a device id: lowercase letters, digits and `_` (`AA:BB:…` → `aa_bb_…`).
    public static func slug(_ deviceId: String) -> String {
        let mapped = deviceId.lowercased().unicodeScalars.map { s -> Character in
            ("a"..."z").contains(s) || ("0"..."9").contains(s) ? Character(s) : "_"
        }
        var out = ""
        for c in mapped where !(c == "_" && out.last == "_") { out.append(c) }
        while out.hasPrefix("_") { out.removeFirst() }
        while out.hasSuffix("_") { out.removeLast() }
        return out.isEmpty ? "device" : String(out.prefix(64))
    }

    public func configTopic(device: String, metric: Metric) -> String {
        "\(prefix)/sensor/\(Self.objectIdSafe(topics.gatewayId))_\(Self.slug(device))_\(metric.rawValue)/config"
    }

    /// `id` with what Home Assistant refuses in a discovery topic's object id (anything but letters, digits, `_`
    /// and `-`: a dotted host name, a space) made `_`; it logs "illegal discovery topic" and drops the config.
    static func objectIdSafe(_ id: String) -> String {
        String(id.unicodeScalars.map { s -> Character in
            s.isASCII && (s.properties.isAlphabetic || ("0"..."9").contains(s) || s == "_" || s == "-") ? Character(s) : "_"
        })
    }

    /// The discovery config for one metric of one device.
    public func config(device: String, source: String, metric: Metric) -> JSONValue {
        let slug = Self.slug(device)
        let unique = "hr-gateway_\(topics.gatewayId)_\(slug)_\(metric.rawValue)"
        let camera = source == SessionMetrics.cameraSource
        var o: [String: JSONValue] = [
            "unique_id": .string(unique),
            "object_id": .string(unique.replacingOccurrences(of: "-", with: "_")),
            "state_topic": .string(topics.deviceState(device)),
            "value_template": .string("{{ value_json.\(metric.stateKey) }}"),
            "availability_topic": .string(topics.status),
            "availability_template": .string("{{ value_json.state }}"),
            "payload_available": .string("online"),
            "payload_not_available": .string("offline"),
            "device": .object([
                "identifiers": .array([.string("hr-gateway_\(topics.gatewayId)_\(slug)")]),
                "name": .string(camera ? "Camera \(device) on \(topics.gatewayId)" : "Strap \(device) on \(topics.gatewayId)"),
                "manufacturer": .string("hr-gateway"),
                "model": .string(source),
                "sw_version": .string(GatewayVersion.current),
            ]),
        ]
        switch metric {
        case .heartRate:
            o["name"] = .string(camera ? "Camera pulse" : "Heart rate")
            o["unit_of_measurement"] = .string("bpm")
            o["state_class"] = .string("measurement")
            o["icon"] = .string("mdi:heart-pulse")
        case .rmssd:
            o["name"] = .string("RMSSD")
            o["unit_of_measurement"] = .string("ms")
            o["state_class"] = .string("measurement")
            o["icon"] = .string("mdi:heart-flash")
        case .dfaAlpha1:
            o["name"] = .string("DFA alpha1")
            o["state_class"] = .string("measurement")
            o["suggested_display_precision"] = .int(2)
            o["icon"] = .string("mdi:chart-bell-curve")
        case .battery:
            o["name"] = .string("Battery")
            o["unit_of_measurement"] = .string("%")
            o["device_class"] = .string("battery")
            o["state_class"] = .string("measurement")
            o["entity_category"] = .string("diagnostic")
        case .contact:
            o["name"] = .string("Contact")
            o["icon"] = .string("mdi:gesture-tap")
        }
        return .object(o)
    }
}

/// The latest values of each device a session has, for its state topic and Home Assistant.
struct DeviceBoard: Sendable {
    struct Device: Sendable {
        var source: String
        var hrBpm: Double?
        var rmssdMs: Double?
        /// Its latest live DFA alpha1 (withheld estimates leave it as it was).
        var dfaAlpha1: Double?
        var batteryPercent: Int?
        var contact: SensorContact?
        var state: String?
        var updatedAtMs: Int64 = 0
        /// The time of its newest reading.
        var lastSampleMs: Int64?
        /// Metrics whose discovery config has been published.
        var announced: Set<HomeAssistantDiscovery.Metric> = []

        var known: [HomeAssistantDiscovery.Metric] {
            HomeAssistantDiscovery.Metric.allCases.filter { m in
                switch m {
                case .heartRate: hrBpm != nil
                case .rmssd: rmssdMs != nil
                case .dfaAlpha1: dfaAlpha1 != nil
                case .battery: batteryPercent != nil
                case .contact: contact != nil
                }
            }
        }

        /// The state topic's document; `deviceId` is the device's own id (a strap's address), which the topic
        /// holds only made topic-safe (`a0_9e_…`).
        func stateDocument(deviceId: String) -> JSONValue {
            var o: [String: JSONValue] = ["source": .string(source), "updated_at_ms": .int(updatedAtMs)]
            if deviceId != source { o["device_id"] = .string(deviceId) }
            if let hrBpm, hrBpm.isFinite { o["hr_bpm"] = .double((hrBpm * 10).rounded() / 10) }
            if let rmssdMs, rmssdMs.isFinite { o["rmssd_ms"] = .double((rmssdMs * 10).rounded() / 10) }
            if let dfaAlpha1, dfaAlpha1.isFinite { o["dfa_alpha1"] = .double((dfaAlpha1 * 1000).rounded() / 1000) }
            if let batteryPercent { o["battery_percent"] = .int(Int64(batteryPercent)) }
            if let contact { o["contact"] = .string(contact.rawValue) }
            if let state { o["state"] = .string(state) }
            return .object(o)
        }
    }

    private(set) var devices: [String: Device] = [:]

    static func key(_ deviceId: String?, source: String) -> String { deviceId ?? source }

    mutating func record(_ sample: BiosignalSample) {
        // A raw ECG chunk says nothing of the heart rate.
        guard !sample.isWaveformOnly else { return }
        let key = Self.key(sample.deviceId, source: sample.source)
        var d = devices[key] ?? Device(source: sample.source)
        d.hrBpm = sample.bpm
        d.lastSampleMs = max(d.lastSampleMs ?? .min, sample.timestampMs)
        if let c = sample.contact, c != .notSupported { d.contact = c }
        d.updatedAtMs = max(d.updatedAtMs, sample.timestampMs)
        devices[key] = d
    }

    /// Applies an event; returns the devices whose state it changed.
    mutating func record(_ event: SessionEvent) -> [String] {
        switch event {
        case .sensorStatus(_, let at, let status):
            let key = Self.key(status.deviceId, source: status.source)
            var d = devices[key] ?? Device(source: status.source)
            d.state = status.state.rawValue
            if let b = status.batteryPercent { d.batteryPercent = b }
            d.updatedAtMs = max(d.updatedAtMs, at)
            devices[key] = d
            return [key]
        case .frame(_, _, _, let metrics, _), .summary(_, _, let metrics, _):
            // RMSSD and live DFA alpha1 are the device's own when several devices contribute; with one, the frame's,
            // for the device whose readings are in its window (another strap, gone for longer than the window, keeps
            // its last values rather than taking this one's); never for a camera.
            for key in devices.keys where devices[key]?.source != SessionMetrics.cameraSource {
                let inWindow = metrics.startMs.map { start in (devices[key]?.lastSampleMs).map { $0 >= start } ?? false } ?? true
                guard let m = metrics.devices?[key] ?? (metrics.devices == nil && inWindow ? metrics : nil) else { continue }
                if let rr = m.rrCount, rr > 1 { devices[key]?.rmssdMs = m.rmssdMs }
                if let a = m.liveDFA?.alpha1, a.isFinite { devices[key]?.dfaAlpha1 = a }
            }
            return devices.keys.sorted()
        default:
            return []
        }
    }

    /// Marks the metrics of `key` that have values but no config yet as announced, and returns them.
    mutating func unannounced(_ key: String) -> [HomeAssistantDiscovery.Metric] {
        guard var d = devices[key] else { return [] }
        let fresh = d.known.filter { !d.announced.contains($0) }
        d.announced.formUnion(fresh)
        devices[key] = d
        return fresh
    }
}
