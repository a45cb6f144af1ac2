import ArgumentParser

struct WebhookCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webhook",
        abstract: "Inspect and deliver the webhook outbox; send a recorded session again.",
        discussion: """
            `stream --webhook URL` writes each session_summary (and with --webhook-samples, sample batches) to \
            outbox.sqlite in the state directory before posting it, and deletes it only once the server has \
            answered 2xx. Items that could not be delivered wait there, with their attempts and last error, \
            across restarts. `webhook send` queues a recorded session's summary (and samples) again.

            Examples:
              hr-gateway webhook status
              hr-gateway webhook status --format json
              hr-gateway webhook flush --timeout 60
              hr-gateway webhook send 3f2a9c1e
            """,
        subcommands: [WebhookStatusCommand.self, WebhookFlushCommand.self, WebhookSendCommand.self]
    )
}
