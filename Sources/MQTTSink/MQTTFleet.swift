import GatewayEngine

/// What `hr-gateway fleet` shows: every gateway and device seen on a broker, from the retained status and device
/// state topics and the live events.
public struct FleetBoard: Sendable, Equatable {
    public struct Gateway: Sendable, Equatable {
        public var id: String
        public var state: String = "unknown"
        public var version: String?
        public var sources: [String] = []
        public var sessionId: String?
        public var lastSeenMs: Int64 = 0
    }

    public struct Device: Sendable, Equatable {
        public var gatewayId: String
        /// The device's topic name (its id made topic-safe).
        public var device: String
        /// Its own id (a strap's address), as every other output names it, when the gateway says it.
        public var deviceId: String?
        public var source: String?
        public var state: String?
        public var hrBpm: Double?
        public var rmssdMs: Double?
        public var batteryPercent: Int?
        public var contact: String?
        /// When the gateway last updated it (its clock).
        public var updatedAtMs: Int64?
        /// When this board last heard of it (ours).
        public var lastSeenMs: Int64 = 0
    }

    /// Whether `device`'s state was said before its gateway went offline and no longer holds: retained, it still
    /// reads "streaming" after a `kill -9`. ("disconnected", what a clean end says, still holds.)
    public func isStale(_ device: Device) -> Bool {
        guard let state = device.state, state != "disconnected" else { return false }
        return gateways[device.gatewayId]?.state == "offline"
    }

    public private(set) var gateways: [String: Gateway] = [:]
    public private(set) var devices: [String: Device] = [:]
    /// Messages that were not what their topic promises (not JSON, not an object), counted and skipped.
    public private(set) var malformed = 0

    public init() {}

    /// The topics to subscribe to.
    public static let subscriptions = ["hr-gateway/+/status", "hr-gateway/+/device/+/state", "hr-gateway/+/event"]

    /// Takes one message; returns whether it changed the board.
    @discardableResult
    public mutating func receive(topic: String, payload: [UInt8], nowMs: Int64) -> Bool {
        let parts = topic.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 3, parts[0] == "hr-gateway", !parts[1].isEmpty else { return false }
        let id = parts[1]
        guard let value = try? JSONValue(parsing: String(decoding: payload, as: UTF8.self), maxDepth: 32),
            case .object(let o) = value
        else {
            // An empty retained message clears a topic: not an error.
            if !payload.isEmpty { malformed += 1 }
            return false
        }
        var g = gateways[id] ?? Gateway(id: id)
        g.lastSeenMs = nowMs
        switch (parts.count, parts[2]) {
        case (3, "status"):
            g.state = o["state"]?.stringValue ?? g.state
            g.version = o["version"]?.stringValue ?? g.version
            if case .array(let s)? = o["sources"] { g.sources = s.compactMap(\.stringValue) }
        case (5, "device") where parts[4] == "state":
            let key = id + "/" + parts[3]
            var d = devices[key] ?? Device(gatewayId: id, device: parts[3])
            d.source = o["source"]?.stringValue ?? d.source
            d.deviceId = o["device_id"]?.stringValue ?? d.deviceId
            d.state = o["state"]?.stringValue ?? d.state
            d.hrBpm = o["hr_bpm"]?.doubleValue ?? d.hrBpm
            d.rmssdMs = o["rmssd_ms"]?.doubleValue ?? d.rmssdMs
            d.batteryPercent = o["battery_percent"]?.intValue.map { Int($0) } ?? d.batteryPercent
            d.contact = o["contact"]?.stringValue ?? d.contact
            d.updatedAtMs = o["updated_at_ms"]?.intValue ?? d.updatedAtMs
            d.lastSeenMs = nowMs
            devices[key] = d
        case (3, "event"):
            switch o["type"]?.stringValue {
            case "session_started": g.sessionId = o["session_id"]?.stringValue
            case "session_summary", "session_error": g.sessionId = nil
            default: break
            }
        default:
            return false
        }
        gateways[id] = g
        return true
    }

    /// One row per device (and per gateway without devices), sorted by gateway and device.
    public var rows: [(gateway: Gateway, device: Device?)] {
        gateways.values.sorted { $0.id < $1.id }.flatMap { g -> [(gateway: Gateway, device: Device?)] in
            let mine = devices.values.filter { $0.gatewayId == g.id }.sorted { $0.device < $1.device }
            return mine.isEmpty ? [(g, nil)] : mine.map { (g, $0) }
        }
    }

    /// The board as JSON, for scripts: `{"gateways": [{…, "devices": [{…}]}]}`.
    public var jsonValue: JSONValue {
        .object(["gateways": .array(gateways.values.sorted { $0.id < $1.id }.map { g in
            var o: [String: JSONValue] = [
                "gateway_id": .string(g.id), "state": .string(g.state), "last_seen_ms": .int(g.lastSeenMs),
                "sources": .array(g.sources.map { .string($0) }),
            ]
            if let v = g.version { o["version"] = .string(v) }
            if let s = g.sessionId { o["session_id"] = .string(s) }
            o["devices"] = .array(devices.values.filter { $0.gatewayId == g.id }.sorted { $0.device < $1.device }.map { d in
                var e: [String: JSONValue] = ["device": .string(d.device), "last_seen_ms": .int(d.lastSeenMs)]
                if let v = d.deviceId { e["device_id"] = .string(v) }
                if let v = d.source { e["source"] = .string(v) }
                if let v = d.state { e["state"] = .string(v) }
                if isStale(d) { e["state_stale"] = .bool(true) }
                if let v = d.hrBpm { e["hr_bpm"] = .double(v) }
                if let v = d.rmssdMs { e["rmssd_ms"] = .double(v) }
                if let v = d.batteryPercent { e["battery_percent"] = .int(Int64(v)) }
                if let v = d.contact { e["contact"] = .string(v) }
                if let v = d.updatedAtMs { e["updated_at_ms"] = .int(v) }
                return .object(e)
            })
            return .object(o)
        })])
    }
}
