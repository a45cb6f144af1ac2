import Hummingbird
import Logging
import NIOCore

/// `--metrics-listen HOST:PORT`: `GET /metrics` alone, in the Prometheus text format, without a token (bind it to
/// an address only the scraper reaches). On the relay's port, `/metrics` is served by the relay with its tokens.
public struct MetricsServer: Sendable {
    public let metrics: GatewayMetrics
    public let host: String
    public let port: Int

    public init(metrics: GatewayMetrics, host: String, port: Int) {
        self.metrics = metrics
        self.host = host
        self.port = port
    }

    /// Runs until cancelled; `onListening` gets the bound port.
    public func run(onListening: @escaping @Sendable (Int) async -> Void = { _ in }) async throws {
        let router = Router()
        let metrics = self.metrics
        router.get("/metrics") { _, _ -> Response in
            Response(
                status: .ok, headers: [.contentType: GatewayMetrics.contentType],
                body: .init(byteBuffer: ByteBuffer(string: metrics.exposition())))
        }
        var logger = Logger(label: "hr-gateway.metrics")
        logger.logLevel = .critical
        let app = Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), serverName: nil),
            onServerRunning: { channel in await onListening(channel.localAddress?.port ?? 0) },
            logger: logger)
        try await app.run()
    }
}
