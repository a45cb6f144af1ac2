import GatewayEngine
import HTTPTypes
import HummingbirdWSClient
import Logging

/// A relay consumer: connects to `ws://HOST:PORT/v1/relay` with a token and hands every message to a callback.
public struct RelayClient: Sendable {
    public var url: String
    public var token: String?
    public var maxFrameBytes = 1 << 20

    public init(url: String, token: String?) {
        self.url = url
        self.token = token
    }

    /// What the callback asks the client to do next.
    public enum Action: Sendable {
        case `continue`
        case send([JSONValue])
        case sendThenClose([JSONValue])
        case close
    }

    /// Connects, sends `initial`, and calls `onMessage` for each message until it returns `.close` or the server closes.
    public func run(
        initial: [JSONValue] = [],
        onMessage: @escaping @Sendable (JSONValue) async -> Action
    ) async throws {
        var headers = HTTPFields()
        if let token { headers[.authorization] = "Bearer \(token)" }
        var logger = Logger(label: "hr-gateway.attach")
        logger.logLevel = .warning
        try await WebSocketClient.connect(
            url: url,
            configuration: .init(maxFrameSize: maxFrameBytes, additionalHeaders: headers),
            logger: logger
        ) { inbound, outbound, _ in
            for m in initial { try await outbound.write(.text(m.jsonString)) }
            for try await message in inbound.messages(maxSize: maxFrameBytes) {
                guard case .text(let text) = message, let value = try? JSONValue(parsing: text) else { continue }
                switch await onMessage(value) {
                case .continue: break
                case .send(let values): for v in values { try await outbound.write(.text(v.jsonString)) }
                case .sendThenClose(let values):
                    for v in values { try await outbound.write(.text(v.jsonString)) }
                    try await outbound.close(.normalClosure, reason: nil)
                    return
                case .close:
                    try await outbound.close(.normalClosure, reason: nil)
                    return
                }
            }
        }
    }
}
