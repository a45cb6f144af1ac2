/// Interaction behaviour for the current moment, attached to frames and the summary as `behavior`.
public struct BehaviorSnapshot: Sendable, Equatable {
    public var appSwitchesPerMinute: Int
    /// Epoch milliseconds.
    public var timestamp: Int64
    public var typingCadence: Double?
    public var interKeyLatency: Double?
    public var burstLength: Int?
    public var scrollVelocity: Double?
    public var scrollAcceleration: Double?
    public var scrollJitter: Double?
    public var tapRate: Double?
    public var foregroundDuration: Double?
    public var idleGapSeconds: Double?
    public var stabilityIndex: Double?
    public var fragmentationIndex: Double?

    public init(
        typingCadence: Double? = nil,
        interKeyLatency: Double? = nil,
        burstLength: Int? = nil,
        scrollVelocity: Double? = nil,
        scrollAcceleration: Double? = nil,
        scrollJitter: Double? = nil,
        tapRate: Double? = nil,
        appSwitchesPerMinute: Int = 0,
        foregroundDuration: Double? = nil,
        idleGapSeconds: Double? = nil,
        stabilityIndex: Double? = nil,
        fragmentationIndex: Double? = nil,
        timestamp: Int64
    ) {
        self.typingCadence = typingCadence
        self.interKeyLatency = interKeyLatency
        self.burstLength = burstLength
        self.scrollVelocity = scrollVelocity
        self.scrollAcceleration = scrollAcceleration
        self.scrollJitter = scrollJitter
        self.tapRate = tapRate
        self.appSwitchesPerMinute = appSwitchesPerMinute
        self.foregroundDuration = foregroundDuration
        self.idleGapSeconds = idleGapSeconds
        self.stabilityIndex = stabilityIndex
        self.fragmentationIndex = fragmentationIndex
        self.timestamp = timestamp
    }

    public var jsonValue: JSONValue {
        var o: [String: JSONValue] = [
            "app_switches_per_minute": .int(Int64(appSwitchesPerMinute)),
            "timestamp": .int(timestamp),
        ]
        func put(_ key: String, _ v: Double?) { if let v, v.isFinite { o[key] = .double(v) } }
        put("typing_cadence", typingCadence)
        put("inter_key_latency", interKeyLatency)
        if let b = burstLength { o["burst_length"] = .int(Int64(b)) }
        put("scroll_velocity", scrollVelocity)
        put("scroll_acceleration", scrollAcceleration)
        put("scroll_jitter", scrollJitter)
        put("tap_rate", tapRate)
        put("foreground_duration", foregroundDuration)
        put("idle_gap_seconds", idleGapSeconds)
        put("stability_index", stabilityIndex)
        put("fragmentation_index", fragmentationIndex)
        return .object(o)
    }
}

/// Pulled once per `session_frame` and once for the summary, only when available.
public protocol BehaviorProvider: Sendable {
    var isAvailable: Bool { get }
    var name: String { get }
    func currentSnapshot() -> BehaviorSnapshot?
}

/// The SDK's mock: fixed values, timestamp from the given clock.
public struct MockBehaviorProvider: BehaviorProvider {
    public let isAvailable = true
    public let name = "mock"
    let clock: any SessionClock

    public init(clock: any SessionClock = SystemSessionClock()) { self.clock = clock }

    public func currentSnapshot() -> BehaviorSnapshot? {
        BehaviorSnapshot(
            typingCadence: 3.5,
            interKeyLatency: 120.0,
            burstLength: 8,
            scrollVelocity: 120.5,
            scrollAcceleration: 15.2,
            scrollJitter: 3.1,
            tapRate: 2.3,
            appSwitchesPerMinute: 4,
            foregroundDuration: 45.0,
            idleGapSeconds: 2.1,
            stabilityIndex: 0.82,
            fragmentationIndex: 0.15,
            timestamp: clock.nowMs()
        )
    }
}
