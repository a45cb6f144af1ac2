import GatewayEngine
import RelayCore
import RelayWebServer
import HummingbirdWSClient
import Logging

/// Reverse mode: the gateway dials out to a relay endpoint (a phone app's server, or a rendezvous) and speaks the
/// same protocol as on `/v1/relay`, as a control consumer: events flow out, commands flow in. Reconnects with
/// backoff (0.5 s doubling to 10 s) until `finish` or cancellation.
///
/// The uplink is a known consumer of the hub from the moment it is made, so every reliable event
/// (`session_started`, `session_summary`, `session_error`) published from then on reaches the remote end, in order,
/// even if it was published while the link was down; unacknowledged ones are sent again on each connection. Live
/// frames missed while away are resumed by the remote end's `hello` (docs/relay-protocol.md).
public final class RelayUplink: Sendable {
    public let url: String
    /// Sent as `Authorization: Bearer TOKEN` to the remote end.
    public let token: String?
    public let hub: RelayHub
    public let heartbeat: Duration
    public let maxFrameBytes: Int
    public let principal: RelayPrincipal
    /// For `wss://`: trust only the certificate with this SHA-256 fingerprint (see `RelayPinning`).
    public let pinnedFingerprint: String?
    private let finishing = Locked(false)

    public init(
        url: String, token: String?, hub: RelayHub, pinnedFingerprint: String? = nil, heartbeat: Duration = .seconds(5),
        maxFrameBytes: Int = 1 << 20
    ) {
        self.url = url
        self.token = token
        self.pinnedFingerprint = pinnedFingerprint
        self.hub = hub
        self.heartbeat = heartbeat
        self.maxFrameBytes = maxFrameBytes
        self.principal = RelayPrincipal(consumerId: "uplink", name: "uplink \(url)", scope: .control)
        hub.register(consumerId: principal.consumerId)
    }

    /// Runs until `finish` or cancellation. `onEvent` reports connection changes (for a log line).
    public func run(onEvent: @escaping @Sendable (String) -> Void = { _ in }) async {
        var delayMs = 500
        var logger = Logger(label: "hr-gateway.uplink")
        logger.logLevel = .critical
        while !Task.isCancelled && !finishing.withLock({ $0 }) {
            do {
                let (hub, principal, heartbeat, maxFrame) = (self.hub, self.principal, self.heartbeat, self.maxFrameBytes)
                onEvent("connecting to \(url)")
                let (configuration, tls) = try await RelayClient.settings(
                    url: url, token: token, pinnedFingerprint: pinnedFingerprint, maxFrameBytes: maxFrame)
                try await WebSocketClient.connect(
                    url: url, configuration: configuration, tlsConfiguration: tls, logger: logger
                ) { inbound, outbound, _ in
                    onEvent("connected to \(self.url)")
                    try await RelayServer.pump(
                        hub: hub, principal: principal, inbound: inbound, outbound: outbound,
                        heartbeat: heartbeat, maxFrame: maxFrame)
                }
                delayMs = 500
                onEvent("disconnected from \(url)")
            } catch {
                onEvent("cannot connect to \(url): \(RelayClient.explain(error))")
            }
            if Task.isCancelled || finishing.withLock({ $0 }) { break }
            try? await Task.sleep(for: .milliseconds(Int(Double(delayMs) * Double.random(in: 0.8...1.2))))
            delayMs = min(delayMs * 2, 10_000)
        }
    }

    /// Waits up to `grace` for the remote end to have every reliable event (acknowledged, or written to a live
    /// link; then up to one more second for its `ack`, so that the next run need not send them again), then closes
    /// the link so that `run` returns. Returns false when the grace ran out before everything was written.
    @discardableResult
    public func finish(grace: Duration) async -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: grace)
        let id = principal.consumerId
        var delivered = hub.hasDelivered(to: id)
        while !delivered && clock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
            delivered = hub.hasDelivered(to: id)
        }
        let ackDeadline = min(deadline, clock.now.advanced(by: .seconds(1)))
        while delivered && !hub.hasAcknowledgedAll(id) && clock.now < ackDeadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        finishing.withLock { $0 = true }
        hub.close(consumerId: principal.consumerId)
        // Let the writer finish the frame in flight and send the close frame before the caller cancels `run`.
        let closeDeadline = clock.now.advanced(by: .seconds(2))
        while hub.isConnected(principal.consumerId) && clock.now < closeDeadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        return delivered
    }
}
