import ArgumentParser
import Foundation
import Logging
import SessionStore
import WebhookSink
import StdoutSink

struct WebhookFlushCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "flush",
        abstract: "Deliver the webhook items waiting in the outbox now.",
        discussion: """
            Posts every waiting item at once (whatever its backoff), each to the URL it was queued for, then keeps \
            retrying those that fail, with backoff, for up to --timeout seconds. Delivered items are deleted; the \
            others stay for a later flush or stream. Exit status 0 when the outbox is empty at the end, 1 when \
            items remain.

            Example:
              hr-gateway webhook flush --timeout 60 --state-dir /var/lib/hr-gateway
            """
    )

    @OptionGroup var retry: WebhookRetryOptions

    @OptionGroup var store: StoreOptions

    func run() async throws {
        let settings = try store.settings()
        let dir = StateDirectory.resolve(option: store.stateDir, configured: settings.stateDir)
        if let unreadable = StateDirectory.unreadable(dir) { throw CommandFailure("state directory: \(unreadable)") }
        // Nothing to deliver without an outbox: none is made (a mistyped --state-dir made a directory and an outbox).
        guard FileManager.default.fileExists(atPath: dir + "/outbox.sqlite") else {
            print("No webhook outbox in \(dir): nothing has been queued for a webhook there.")
            return
        }
        let forwarder = try WebhookDelivery.forwarder(
            stateDir: dir, settings: settings, logger: Logger(label: "hr-gateway.webhook"))
        let before: Int
        let left: Int
        do {
            // Samples a session left forming (it was killed, or is still running) go out now too.
            try forwarder.sealAllBatches()
            before = try forwarder.outbox.pending().count
            left = try await forwarder.drain(forMs: retry.ms(settings), immediately: true)
        } catch { throw CommandFailure("\(error)") }
        print("Delivered \(max(0, before - left)) of \(before) webhook item(s); \(left) left in \(forwarder.outbox.path).")
        if left > 0 {
            StandardStream.error.write(Data(
                "Error: \(left) item(s) could not be delivered: see `hr-gateway webhook status` for the last errors\n".utf8))
            throw ExitCode(1)
        }
    }
}
