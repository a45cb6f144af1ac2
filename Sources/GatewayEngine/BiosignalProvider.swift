/// What a provider reports besides samples: its link and health, for the pretty view and status lines.
public struct SensorStatus: Sendable, Equatable {
    public enum State: String, Sendable, Equatable, CaseIterable {
        case starting
        case searching
        case connecting
        case connected
        case streaming
        /// Connected, but no data for longer than expected: values are not current.
        case stale
        case reconnecting
        case disconnected
        /// The sensor failed mid-session; the session goes on with the other providers.
        case error
    }

    public var source: String
    public var deviceId: String?
    public var state: State
    public var batteryPercent: Int?
    public var message: String?
    public var errorCode: SessionErrorCode?

    public init(
        source: String,
        deviceId: String? = nil,
        state: State,
        batteryPercent: Int? = nil,
        message: String? = nil,
        errorCode: SessionErrorCode? = nil
    ) {
        self.source = source
        self.deviceId = deviceId
        self.state = state
        self.batteryPercent = batteryPercent
        self.message = message
        self.errorCode = errorCode
    }
}

/// Where a provider delivers. Safe to call from any thread; calls after the session ended are ignored. Non-finite
/// values are dropped here (see `BiosignalSample.finiteOnly()`), before anything records or computes with them.
public struct ProviderSink: Sendable {
    let onSample: @Sendable (BiosignalSample) -> Void
    let onStatus: @Sendable (SensorStatus) -> Void
    /// The session this sink delivers into, as the engine started it (nil outside an engine). A provider that acts
    /// on the session's settings reads them here, as the simulated strap follows a phone-started breathing pattern.
    public let session: SessionConfig?
    /// When that session started, on the session clock's monotonic and wall clocks (nil outside an engine): a
    /// replay starts its recording there, not when it was itself started (at speed 1000 a millisecond of setup was a
    /// second, and the recording's beats fell a second off the session's frames).
    public let sessionStartedAt: (monotonicMs: Int64, wallMs: Int64)?

    public init(
        session: SessionConfig? = nil,
        sessionStartedAt: (monotonicMs: Int64, wallMs: Int64)? = nil,
        onSample: @escaping @Sendable (BiosignalSample) -> Void,
        onStatus: @escaping @Sendable (SensorStatus) -> Void = { _ in }
    ) {
        self.session = session
        self.sessionStartedAt = sessionStartedAt
        self.onSample = onSample
        self.onStatus = onStatus
    }

    public func send(_ sample: BiosignalSample) {
        guard let finite = sample.finiteOnly() else { return }
        onSample(finite)
    }
    public func status(_ status: SensorStatus) { onStatus(status) }
}

/// A source of biosignal samples: a strap, a camera, a simulation, a recording.
///
/// `startStreaming` returns once the sensor delivers or is about to (it may throw: the session then ends with a
/// `session_error` of code `sensor_unavailable`, or the code carried by a thrown `SessionError`). Afterwards the
/// provider pushes samples and status into the sink until `stopStreaming` returns.
public protocol BiosignalProvider: Sendable {
    /// Short name for logs and status (`mock`, `ble_hrm`, `camera_rppg`, …).
    var name: String { get }
    var isAvailable: Bool { get async }
    func startStreaming(into sink: ProviderSink) async throws
    func stopStreaming() async
}
