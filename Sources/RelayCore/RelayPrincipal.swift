/// What a token may do on the relay.
public enum RelayScope: String, Sendable, Codable, Equatable {
    /// Receive events and send `get_status`, `hello`, `ack`.
    case read
    /// Also `start_session`, `stop_session`, `ingest_hsi_metrics`.
    case control
}

/// Who is connected: the identity a reliable-delivery cursor is kept under.
public struct RelayPrincipal: Sendable, Equatable, Hashable {
    /// Token id, or `anonymous` in loopback dev mode.
    public var consumerId: String
    public var name: String
    public var scope: RelayScope

    public init(consumerId: String, name: String, scope: RelayScope) {
        self.consumerId = consumerId
        self.name = name
        self.scope = scope
    }

    /// The principal of loopback dev mode (no token).
    public static let anonymous = RelayPrincipal(consumerId: "anonymous", name: "anonymous", scope: .control)

    /// Commands from the MQTT broker's `cmd` topic: who may send them is the broker's ACL, not a token.
    public static let mqtt = RelayPrincipal(consumerId: "mqtt", name: "mqtt", scope: .control)
}
