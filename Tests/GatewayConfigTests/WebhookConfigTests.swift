import GatewayConfig
import Testing

@Suite struct WebhookConfigTests {
    @Test func webhookValuesAreRead() throws {
        let (c, warnings) = try GatewayConfiguration.parse("""
            [webhook]
            url = "https://example.org/hook"
            samples = true
            batch_size = 10
            timeout_sec = 3
            grace_sec = 0
            backoff_base_ms = 50
            backoff_max_sec = 60
            max_items = 500
            """, path: "t.toml")
        #expect(warnings.isEmpty)
        #expect(c.webhookURL == "https://example.org/hook")
        #expect(c.webhookSamples)
        #expect(c.webhookBatchSize == 10)
        #expect(c.webhookTimeoutSec == 3)
        #expect(c.webhookGraceSec == 0)
        #expect(c.webhookBackoffBaseMs == 50)
        #expect(c.webhookBackoffMaxSec == 60)
        #expect(c.webhookMaxItems == 500)
    }

    @Test func aMalformedWebhookURLNamesItsLine() {
        do {
            _ = try GatewayConfiguration.parse("[webhook]\nsamples = false\nurl = \"127.0.0.1:8080/hook\"\n", path: "t.toml")
            Issue.record("accepted a URL without a scheme")
        } catch {
            #expect(error.line == 3)
            #expect(error.message.contains("webhook.url"))
        }
    }

    @Test func theEnvironmentSetsTheWebhook() throws {
        var c = GatewayConfiguration()
        try c.applyEnvironment(["HR_GATEWAY_WEBHOOK": "http://10.0.0.2:9000/x"])
        #expect(c.webhookURL == "http://10.0.0.2:9000/x")
        #expect(throws: ConfigurationError.self) { try c.applyEnvironment(["HR_GATEWAY_WEBHOOK": "nope"]) }
    }

    @Test func unknownWebhookKeysAreErrors() {
        #expect(throws: ConfigurationError.self) {
            try GatewayConfiguration.parse("[webhook]\nurll = \"http://a/b\"\n", path: "t.toml")
        }
    }
}
