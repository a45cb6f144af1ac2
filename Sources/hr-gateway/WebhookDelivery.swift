import Foundation
import GatewayConfig
import GatewayEngine
import Logging
import WebhookSink

/// `stream --webhook`: delivers pending items while the session runs, commits the summary (and sample batches) to
/// the outbox, and after the session retries for a grace period.
struct WebhookDelivery: Sendable {
    let forwarder: WebhookForwarder
    let url: URL
    let samples: Bool
    let batchSize: Int
    let graceSec: Int

    /// The forwarder over `outbox.sqlite` in `stateDir`, with the configuration's timeout, backoff and bound.
    static func forwarder(stateDir: String, settings: GatewayConfiguration, logger: Logger) throws -> WebhookForwarder {
        let outbox: WebhookOutbox
        do { outbox = try WebhookOutbox(directory: stateDir, maxItems: settings.webhookMaxItems) } catch {
            throw CommandFailure("\(error)")
        }
        return WebhookForwarder(
            outbox: outbox,
            backoff: WebhookBackoff(
                baseMs: Int64(settings.webhookBackoffBaseMs), maxMs: Int64(settings.webhookBackoffMaxSec) * 1000),
            timeoutSec: Double(settings.webhookTimeoutSec),
            onWarning: { logger.warning("\($0)") })
    }

    /// The forwarder for a session's command (`stream`, `serve`), or nil, said, when its outbox cannot be opened (a
    /// full disk, a damaged file): the session goes on without the webhook, as it does without its recording, and
    /// `webhook send` posts its summary later (a service stopped here, and restarted until systemd gave up).
    static func forwarderForSession(stateDir: String, settings: GatewayConfiguration) -> WebhookForwarder? {
        let logger = Logger(label: "hr-gateway.webhook")
        do { return try forwarder(stateDir: stateDir, settings: settings, logger: logger) } catch {
            let said = "\(error); the session goes on without the webhook: once the outbox can be opened, "
                + "`hr-gateway webhook send SESSION_ID` posts a recorded session's summary"
            logger.warning("\(said)")
            return nil
        }
    }

    /// What one session needs: a sample tap, an event observer, and `finish()` after the session.
    final class Session: Sendable {
        let delivery: WebhookDelivery
        let batcher: WebhookSampleBatcher?
        private let sessionId: String
        private let loop: Task<Void, Never>
        private let logger = Logger(label: "hr-gateway.webhook")

        init(_ delivery: WebhookDelivery, sessionId: String) {
            self.delivery = delivery
            self.sessionId = sessionId
            let logger = logger
            batcher = delivery.samples
                ? WebhookSampleBatcher(
                    forwarder: delivery.forwarder, url: delivery.url, sessionId: sessionId, size: delivery.batchSize,
                    onFailure: { logger.warning("webhook: \($0)") })
                : nil
            let forwarder = delivery.forwarder
            loop = Task { await forwarder.run() }
        }

        func handle(_ sample: BiosignalSample) { batcher?.add(sample) }

        /// Commits the summary (after the last sample batch), its shared JSON text as is, before anything tries to
        /// deliver it; on the outbox's queue, as every write of a running session that may wait.
        func handle(_ encoded: EncodedEvent) async {
            guard case .summary = encoded.event else { return }
            await batcher?.flush()
            let (forwarder, url) = (delivery.forwarder, delivery.url)
            do {
                try await forwarder.onOutboxQueue { () throws(WebhookError) in try forwarder.enqueue(json: encoded.json, to: url) }
            } catch {
                let message = "webhook: the session_summary could not be queued: \(error); once the outbox is free, "
                    + "`hr-gateway webhook send \(sessionId)` queues it from the session store (when recorded)"
                logger.warning("\(message)")
            }
        }

        /// Stops the background loop and retries for the grace period; says what is left in the outbox.
        func finish() async {
            await batcher?.flush()
            loop.cancel()
            await loop.value
            await delivery.drainAtEnd(logger: logger)
        }
    }

    /// At the end of a command, after its forwarder's loop stopped: retries for the grace period, and says what is
    /// left in the outbox for a later run.
    func drainAtEnd(logger: Logger) async {
        do {
            let left = try await forwarder.drain(forMs: Int64(graceSec) * 1000)
            if left > 0 {
                let message = "webhook: \(left) item(s) not delivered yet, kept in \(forwarder.outbox.path); the next "
                    + "`hr-gateway stream` or `serve`, or `hr-gateway webhook flush`, delivers them"
                logger.warning("\(message)")
            }
        } catch {
            logger.warning("webhook: \(error)")
        }
    }
}
