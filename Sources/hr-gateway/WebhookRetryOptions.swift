import ArgumentParser
import GatewayConfig

/// How long `webhook flush` and `webhook send` keep retrying what fails.
struct WebhookRetryOptions: ParsableArguments {
    @Option(parsing: .unconditional, help: ArgumentHelp(
        "Seconds to keep retrying failed items (default: the configuration's webhook.grace_sec, else 10; 0: one "
            + "attempt each). No new attempt starts after it; one under way runs to its own request timeout "
            + "(webhook.timeout_sec, 10 s by default), so a hung server can add that much.",
        valueName: "sec"))
    var timeout: Int?

    func validate() throws {
        if let t = timeout, t < 0 { throw ValidationError("--timeout must be 0 or more seconds.") }
    }

    /// The retry period in milliseconds: --timeout, else the configuration's grace period.
    func ms(_ settings: GatewayConfiguration) -> Int64 { Int64(timeout ?? settings.webhookGraceSec) * 1000 }
}
