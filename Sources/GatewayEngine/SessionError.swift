/// The five stable error codes of the Synheart wire format.
public enum SessionErrorCode: String, Sendable, CaseIterable, Codable {
    case permissionDenied = "permission_denied"
    case sensorUnavailable = "sensor_unavailable"
    case invalidState = "invalid_state"
    case lowBattery = "low_battery"
    case osTerminated = "os_terminated"
}

/// An error with a stable code and a human-readable message, as thrown and emitted by the engine.
public enum SessionError: Error, Sendable, Equatable, CustomStringConvertible {
    case permissionDenied(String)
    case sensorUnavailable(String)
    case invalidState(String)
    case lowBattery(String)
    case osTerminated(String)

    public init(code: SessionErrorCode, message: String) {
        switch code {
        case .permissionDenied: self = .permissionDenied(message)
        case .sensorUnavailable: self = .sensorUnavailable(message)
        case .invalidState: self = .invalidState(message)
        case .lowBattery: self = .lowBattery(message)
        case .osTerminated: self = .osTerminated(message)
        }
    }

    public var code: SessionErrorCode {
        switch self {
        case .permissionDenied: .permissionDenied
        case .sensorUnavailable: .sensorUnavailable
        case .invalidState: .invalidState
        case .lowBattery: .lowBattery
        case .osTerminated: .osTerminated
        }
    }

    public var message: String {
        switch self {
        case .permissionDenied(let m), .sensorUnavailable(let m), .invalidState(let m), .lowBattery(let m),
            .osTerminated(let m):
            m
        }
    }

    /// The SDK's text: `"InvalidState: <message>"`.
    public var description: String {
        switch self {
        case .permissionDenied(let m): "PermissionDenied: \(m)"
        case .sensorUnavailable(let m): "SensorUnavailable: \(m)"
        case .invalidState(let m): "InvalidState: \(m)"
        case .lowBattery(let m): "LowBattery: \(m)"
        case .osTerminated(let m): "OsTerminated: \(m)"
        }
    }
}
