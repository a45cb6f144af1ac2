import ArgumentParser
import BLEHeartRate
import Foundation
import GatewayConfig
import GatewayEngine
import GatewayMetrics
import GatewaySink
import RelayCore
import StdoutSink

/// `--metrics-listen`, shared by the commands that run sessions.
struct MetricsOptions: ParsableArguments {
    @Option(help: ArgumentHelp(
        "Serve Prometheus metrics at http://HOST:PORT/metrics, without a token: bind it where only the scraper "
            + "reaches it (such as 127.0.0.1:9464). With --listen the relay's port serves /metrics too, with the "
            + "relay's token. Default: the configuration's metrics.listen.",
        valueName: "host:port"))
    var metricsListen: String?

    /// Takes the configuration's `[metrics] listen` when the command line gives none.
    mutating func adopt(_ settings: GatewayConfiguration) {
        metricsListen = metricsListen ?? settings.metricsListen
    }

    /// `relayListen`: the relay's address (--listen), whose port the metrics server cannot share.
    func check(relayListen: String? = nil) throws {
        if let metricsListen {
            let port: Int
            do { port = try RelayOptions.split(metricsListen).1 } catch {
                throw ValidationError("--metrics-listen: \(error)")
            }
            if port != 0, let relayListen, let relayPort = try? RelayOptions.split(relayListen).1, relayPort == port {
                throw ValidationError("--metrics-listen and --listen both name port \(port): the relay's port serves "
                    + "/metrics already (with a relay token); give --metrics-listen a port of its own for a scraper "
                    + "without a token.")
            }
        }
    }
}

/// `--metrics-listen`: the metrics server, listening before the session starts, stopped at shutdown.
final class MetricsServerSink: SessionSink {
    let name = "metrics-server"
    private let task: Task<Void, any Error>

    private init(task: Task<Void, any Error>) { self.task = task }

    /// Starts listening on `listen` (HOST:PORT; port 0 picks one) and says where on standard error.
    static func start(_ metrics: GatewayMetrics, listen: String) async throws -> MetricsServerSink {
        let (host, port) = try RelayOptions.split(listen)
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let task = Task {
            defer { continuation.finish() }
            try await MetricsServer(metrics: metrics, host: host, port: port).run { continuation.yield($0) }
        }
        var it = ports.makeAsyncIterator()
        guard let bound = await it.next() else {
            do { try await task.value } catch {
                throw CommandFailure("--metrics-listen cannot listen on \(listen): "
                    + listenFailure(error, address: listen, option: "--metrics-listen") + ".")
            }
            throw CommandFailure("--metrics-listen: the metrics server stopped before listening on \(listen)")
        }
        let shown = host.contains(":") ? "[\(host)]" : host
        StandardStream.error.write(Data("metrics: serving http://\(shown):\(bound)/metrics\n".utf8))
        return MetricsServerSink(task: task)
    }

    func receive(event: EncodedEvent) {}

    func run() async throws {
        await untilGracefulShutdown()
        task.cancel()
        _ = try? await task.value
    }

    /// Stops the server outside a service group (`serve`).
    func stop() async {
        task.cancel()
        _ = try? await task.value
    }
}

extension GatewayMetrics {
    /// Figures read when scraped from each strap: advertisements dropped by its full queue, the queue's depth and
    /// high-water mark.
    func collectStraps(_ straps: [BLEHeartRateProvider]) {
        guard !straps.isEmpty else { return }
        addCollector { m in
            for (index, strap) in straps.enumerated() {
                let label = [("strap", strap.details.address ?? "strap\(index + 1)")]
                let flow = strap.flow
                m.setCounter("hr_gateway_strap_events_dropped_total", help: "Repeated advertisements dropped by a full strap queue.",
                             labels: label, to: flow.droppedEvents)
                m.gauge("hr_gateway_strap_queue_depth", help: "Events waiting in the strap's queue.", labels: label,
                        Double(flow.queueDepth))
                m.gauge("hr_gateway_strap_queue_high_water", help: "The most events that waited in the strap's queue.",
                        labels: label, Double(flow.queueHighWater))
            }
        }
    }

    /// The relay's consumers connected now, read when scraped.
    func collectRelay(_ hub: RelayHub) {
        collectOutbox("relay") { hub.outboxDepth }
        addCollector { m in
            m.gauge("hr_gateway_relay_consumers", help: "Relay consumers (phones, apps) connected now.",
                    Double(hub.connectionCount))
        }
    }

    /// An outbox's depth, read when scraped (nil: unknown, not set).
    func collectOutbox(_ name: String, _ depth: @escaping @Sendable () -> Int?) {
        addCollector { m in
            guard let d = depth() else { return }
            m.gauge("hr_gateway_outbox_depth", help: "Items waiting in each durable outbox.", labels: [("outbox", name)],
                    Double(d))
        }
    }
}
