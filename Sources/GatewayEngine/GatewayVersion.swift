/// The gateway's version, as reported to fleets (the MQTT status topic) and by `hr-gateway --version`.
public enum GatewayVersion {
    public static let current = "0.3.0-dev"
}
