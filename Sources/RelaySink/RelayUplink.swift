import GatewayEngine
import HTTPTypes
import HummingbirdWSClient
import Logging

/// Reverse mode: the gateway dials out to a relay endpoint (a phone app's server, or a rendezvous) and speaks the
/// same protocol as on `/v1/relay`, as a control consumer: events flow out, commands flow in. Reconnects with
/// backoff (0.5 s doubling to 10 s) until cancelled; the reliable cursor survives reconnects, so missed
/// `session_started` / `session_summary` are redelivered.
public struct RelayUplink: Sendable {
    public var url: String
    /// Sent as `Authorization: Bearer TOKEN` to the remote end.
    public var token: String?
    public var hub: RelayHub
    public var heartbeat: Duration = .seconds(5)
    public var maxFrameBytes = 1 << 20

    public init(url: String, token: String?, hub: RelayHub) {
        self.url = url
        self.token = token
        self.hub = hub
    }

    /// Runs until the task is cancelled. `onEvent` reports connection changes (for a log line).
    public func run(onEvent: @escaping @Sendable (String) -> Void = { _ in }) async {
        var delayMs = 500
        let principal = RelayPrincipal(consumerId: "uplink", name: "uplink \(url)", scope: .control)
        var headers = HTTPFields()
        if let token { headers[.authorization] = "Bearer \(token)" }
        var logger = Logger(label: "hr-gateway.uplink")
        logger.logLevel = .critical
        while !Task.isCancelled {
            do {
                let hub = self.hub
                let heartbeat = self.heartbeat
                let maxFrame = self.maxFrameBytes
                onEvent("connecting to \(url)")
                try await WebSocketClient.connect(
                    url: url, configuration: .init(maxFrameSize: maxFrame, additionalHeaders: headers), logger: logger
                ) { inbound, outbound, _ in
                    onEvent("connected to \(url)")
                    try await RelayServer.pump(
                        hub: hub, principal: principal, inbound: inbound, outbound: outbound,
                        heartbeat: heartbeat, maxFrame: maxFrame)
                }
                delayMs = 500
                onEvent("disconnected from \(url)")
            } catch {
                onEvent("cannot connect to \(url): \(error)")
            }
            if Task.isCancelled { break }
            try? await Task.sleep(for: .milliseconds(Int(Double(delayMs) * Double.random(in: 0.8...1.2))))
            delayMs = min(delayMs * 2, 10_000)
        }
    }
}
