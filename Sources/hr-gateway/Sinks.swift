import Foundation
import GatewayEngine
import GatewaySink
import Logging
import RelayCore
import RelayWSClient
import RelayWebServer
import ReplayProvider
import ServiceLifecycle
import WebhookSink

/// `--record FILE`: every sample appended to a JSON-lines file on the provider's thread (durable before the engine
/// has it), closed at shutdown.
final class RecordFileSink: SessionSink {
    let name = "record-file"
    let writer: SampleFileWriter

    init(writer: SampleFileWriter) { self.writer = writer }

    func receive(sample: BiosignalSample) { writer.append(sample) }
    func receive(event: EncodedEvent) {}

    func run() async throws {
        await untilGracefulShutdown()
        writer.close()
    }
}

/// Publishes the session's events to a relay hub (for `--listen` consumers and the `--connect` uplink). The hub
/// numbers each event on this sink's task, never on the engine's delivery path, and hands the reliable ones to
/// relay.sqlite's own queue; at shutdown this sink returns once they are written and so queued for consumers.
final class RelayHubSink: SessionSink {
    let name = "relay-hub"
    let hub: RelayHub
    private let queue = SinkQueue<EncodedEvent>()

    init(hub: RelayHub) { self.hub = hub }

    func receive(event: EncodedEvent) { queue.push(event) }

    func run() async throws {
        await queue.drain { [hub] event in hub.publish(event) }
        await hub.settled()
    }

    /// Ends `run()` after what is queued, outside a service group (`serve`).
    func close() { queue.close() }
}

/// `--listen`: the relay server, listening before the session starts; at shutdown it gives consumers their grace to
/// receive what is queued, then closes.
final class RelayServerSink: SessionSink {
    let name = "relay-server"
    let runtime: RelayRuntime

    init(runtime: RelayRuntime) { self.runtime = runtime }

    func receive(event: EncodedEvent) {}

    func run() async throws {
        await untilGracefulShutdown()
        await runtime.stop()
    }
}

/// `--connect`: dials out and keeps redelivering until the far end has every reliable event; at shutdown it waits
/// up to --connect-grace for the summary to be acknowledged.
final class UplinkSink: SessionSink {
    let name = "uplink"
    let options: UplinkOptions
    let dialer: RelayUplink
    private let dialing: Task<Void, Never>

    /// Starts dialling at once, so that the link may be up before the session starts.
    init(options: UplinkOptions, dialer: RelayUplink) {
        self.options = options
        self.dialer = dialer
        dialing = UplinkOptions.start(dialer)
    }

    func receive(event: EncodedEvent) {}

    func run() async throws {
        await untilGracefulShutdown()
        await options.finish(dialer, task: dialing)
    }
}

/// `--webhook`: sample batches from the provider's tap, the summary queued for the outbox on this sink's task, and
/// at shutdown the grace period of retries.
final class WebhookOutput: SessionSink {
    let name = "webhook"
    let session: WebhookDelivery.Session
    private let sessionId: String
    private let queue = SinkQueue<EncodedEvent>()

    init(_ delivery: WebhookDelivery, sessionId: String) {
        session = WebhookDelivery.Session(delivery, sessionId: sessionId)
        self.sessionId = sessionId
    }

    func receive(sample: BiosignalSample) { session.handle(sample) }
    func receive(event: EncodedEvent) {
        if event.event.sessionId == sessionId, case .summary = event.event { queue.push(event) }
    }

    func run() async throws {
        await queue.drain { [session] event in await session.handle(event) }
        await session.finish()
    }
}

/// `serve`'s webhook (the configuration's `webhook.url`): every session's `session_summary`, whichever consumer
/// started it, committed to the durable outbox and posted by one forwarder that runs as long as `serve`; at the end,
/// the grace period as for `stream`. Sample batches are `stream`'s (`--webhook-samples`).
final class ServeWebhook: SessionSink {
    let name = "webhook"
    let delivery: WebhookDelivery
    private let queue = SinkQueue<EncodedEvent>()
    private let logger = Logger(label: "hr-gateway.webhook")

    init(_ delivery: WebhookDelivery) { self.delivery = delivery }

    func receive(event: EncodedEvent) {
        if case .summary = event.event { queue.push(event) }
    }

    /// Ends `run()` after the summaries queued so far (at shutdown, after the last session's summary).
    func close() { queue.close() }

    func run() async throws {
        let forwarder = delivery.forwarder
        let loop = Task { await forwarder.run() }
        await queue.drain { [delivery, logger] encoded in
            let url = delivery.url
            do {
                try await forwarder.onOutboxQueue { () throws(WebhookError) in
                    try forwarder.enqueue(json: encoded.json, to: url)
                }
            } catch {
                let id = encoded.event.sessionId
                let said = "webhook: the session_summary of \(id) could not be queued: \(error); once the outbox is "
                    + "free, `hr-gateway webhook send \(id)` queues it from the session store (when recorded)"
                logger.warning("\(said)")
            }
        }
        loop.cancel()
        await loop.value
        await delivery.drainAtEnd(logger: logger)
    }
}
