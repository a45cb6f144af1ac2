import Foundation
import GatewayEngine
import GatewaySink
import Logging

/// The topics of one gateway: everything under `hr-gateway/<ID>/`.
public struct MQTTTopics: Sendable, Equatable {
    public let gatewayId: String

    /// Fails for an ID that would break the topic tree (empty, `/`, `+`, `#`, or a NUL).
    public init(gatewayId: String) throws(MQTTError) {
        guard !gatewayId.isEmpty, !gatewayId.contains(where: { "/+#\u{0}".contains($0) }) else {
            throw MQTTError(.invalidURL, "gateway id \"\(gatewayId)\" must be non-empty without '/', '+' or '#'")
        }
        self.gatewayId = gatewayId
    }

    /// Retained JSON: `{"state": "online" | "offline", …}`; the will sets it to offline.
    public var status: String { "hr-gateway/\(gatewayId)/status" }
    /// Every engine event, unchanged, one per message.
    public var event: String { "hr-gateway/\(gatewayId)/event" }
}

/// Publishes the session to an MQTT broker (libmosquitto): the gateway's retained status (online while it runs,
/// offline after a clean end, and by the broker's last will after a crash or a lost link) and every event on
/// `hr-gateway/<ID>/event`: `session_started`, `session_summary` and `session_error` at QoS 1, the rest at QoS 0.
/// At the end it waits up to `graceMs` for the broker's acknowledgements.
public final class MQTTSink: SessionSink {
    public let name = "mqtt"
    public let topics: MQTTTopics
    private let connection: MQTTConnection
    private let queue = SinkQueue<EncodedEvent>()
    private let graceMs: Int64
    private let sources: [String]
    private let logger: Logger

    public init(
        broker: MQTTBrokerURL, topics: MQTTTopics, caFile: String? = nil, sources: [String], graceMs: Int64 = 10_000,
        logger: Logger = Logger(label: "hr-gateway.mqtt")
    ) throws(MQTTError) {
        self.topics = topics
        self.graceMs = graceMs
        self.sources = sources
        self.logger = logger
        connection = try MQTTConnection(
            clientId: "hr-gateway-\(topics.gatewayId)-\(getpid())", broker: broker,
            will: (topics.status, Self.status("offline", gatewayId: topics.gatewayId, sources: sources, reason: "connection lost")),
            caFile: caFile)
        if let failure = try connection.start() {
            logger.warning("mqtt: \(broker) not reachable yet (\(failure)); retrying, and holding messages until it is")
        }
    }

    /// The status document.
    static func status(_ state: String, gatewayId: String, sources: [String], reason: String? = nil) -> String {
        var o: [String: JSONValue] = [
            "state": .string(state), "gateway_id": .string(gatewayId), "version": .string(GatewayVersion.current),
            "sources": .array(sources.map { .string($0) }),
        ]
        if let reason { o["reason"] = .string(reason) }
        return JSONValue.object(o).jsonString
    }

    /// QoS 1 for what a fleet must not miss (a session's start and end), 0 for frames and statuses.
    static func qos(_ event: SessionEvent) -> Int32 {
        switch event {
        case .started, .summary, .error: 1
        default: 0
        }
    }

    public func receive(event: EncodedEvent) { queue.push(event) }

    public func run() async throws {
        let online = Self.status("online", gatewayId: topics.gatewayId, sources: sources)
        connection.publish(topic: topics.status, payload: online, qos: 1, retain: true)
        await queue.drain { [connection, topics] e in
            connection.publish(topic: topics.event, payload: e.json, qos: Self.qos(e.event), retain: false)
        }
        let offline = Self.status("offline", gatewayId: topics.gatewayId, sources: sources, reason: "stopped")
        connection.publish(topic: topics.status, payload: offline, qos: 1, retain: true)
        let left = await connection.waitForAcknowledgements(timeoutMs: graceMs)
        if left > 0 {
            logger.warning(
                "mqtt: \(left) QoS 1 message(s) not acknowledged by \(connection.broker) within \(graceMs / 1000) s; they are lost (is the broker reachable?)")
        }
        let refused = connection.refused
        if refused.count > 0 {
            logger.warning("mqtt: \(refused.count) message(s) could not be queued (\(refused.lastError ?? "?"))")
        }
        connection.stop()
    }
}
