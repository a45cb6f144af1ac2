import Foundation
import GatewayEngine
import Testing
import WebhookTestSupport

/// `webhook send`: a recorded session's summary (and samples) queued again from the session store.
extension StreamWebhookTests {
    /// Records session `id` from the minute of beats, without a webhook; returns its stdout.
    func recordWithoutWebhook(_ id: String, replay: String, config: String, stateDir: String) throws -> CLI.Result {
        let r = try CLI.run([
            "stream", "--replay", replay, "--replay-speed", "1000", "--format", "jsonl", "--session-id", id,
            "--state-dir", stateDir, "--config", config,
        ])
        #expect(r.status == 0, "\(r.stderr)")
        return r
    }

    @Test func sendPostsTheRecordedSummaryOfASessionThatHadNoWebhook() throws {
        let gate = temp("refuse")
        #expect(FileManager.default.createFile(atPath: gate, contents: nil))
        let server = try FlakyServer(failing: 0, failWhile: gate)
        let (replay, config, stateDir) = try fixtures()
        let recorded = try recordWithoutWebhook("send-one-9f", replay: replay, config: config, stateDir: stateDir)
        let summary = try #require(recorded.lines.last)
        #expect(try JSONValue(parsing: summary)["type"] == .string("session_summary"))
        #expect(server.requestCount() == 0)

        func send() throws -> CLI.Result {
            try CLI.run([
                "webhook", "send", "send-one", "--url", server.url.absoluteString, "--timeout", "0",
                "--state-dir", stateDir, "--config", config,
            ])
        }
        // The server refuses: the summary stays in the outbox, and the command says so.
        let refused = try send()
        #expect(refused.status == 1)
        #expect(refused.stdout.contains("send-one-9f: queued 1 item(s): its session_summary"), "\(refused.stdout)")
        #expect(refused.stderr.contains("not delivered yet"), "\(refused.stderr)")
        // Sent again while it waits: not queued a second time.
        let again = try send()
        #expect(again.status == 1)
        #expect(again.stdout.contains("queued 0 item(s): its session_summary; 1 of them already waiting"), "\(again.stdout)")
        let status = try CLI.run(["webhook", "status", "--state-dir", stateDir, "--config", config, "--format", "json"])
        #expect(try status.lines.map { try JSONValue(parsing: $0)["body"] } == [try JSONValue(parsing: summary)])
        #expect(try CLI.run(["webhook", "status", "--state-dir", stateDir, "--config", config, "--json"]).stdout == status.stdout)
        // Two formats asked for: said, not one of them chosen in silence (it printed JSON).
        let both = try CLI.run(["webhook", "status", "--state-dir", stateDir, "--config", config, "--json", "--format", "text"])
        #expect(both.status == 64 && both.stdout.isEmpty && both.stderr.contains("--json asks for JSON and --format text"), "\(both.stderr)")
        let table = try CLI.run(["webhook", "status", "--state-dir", stateDir, "--config", config])
        #expect(table.status == 0 && !table.stdout.hasPrefix("{"), "\(table.stdout)")

        try FileManager.default.removeItem(atPath: gate)
        let flushed = try CLI.run(["webhook", "flush", "--state-dir", stateDir, "--config", config])
        #expect(flushed.status == 0, "\(flushed.stderr)")
        // The exact text the session printed, once.
        #expect(server.accepted().map(\.body) == [summary])
    }

    /// A summary posted live and queued again by `webhook send` is the same body with the same `Idempotency-Key`
    /// (the SHA-256 of the body), so a server can drop the second; another session's summary has another key.
    @Test func aSummarySentAgainCarriesTheKeyOfItsFirstPost() throws {
        let server = try FlakyServer(failing: 0)
        let (replay, config, stateDir) = try fixtures()
        for id in ["key-a", "key-b"] {
            let live = try CLI.run([
                "stream", "--replay", replay, "--replay-speed", "1000", "--format", "jsonl", "--session-id", id,
                "--webhook", server.url.absoluteString, "--state-dir", stateDir, "--config", config,
            ])
            #expect(live.status == 0, "\(live.stderr)")
        }
        let again = try CLI.run([
            "webhook", "send", "key-a", "--url", server.url.absoluteString, "--state-dir", stateDir, "--config", config,
        ])
        #expect(again.status == 0, "\(again.stderr)")
        let posts = server.accepted()
        try #require(posts.count == 3)
        #expect(posts[2].body == posts[0].body)
        let keys = posts.map { $0.idempotencyKey ?? "" }
        #expect(keys[2] == keys[0] && keys[1] != keys[0], "\(keys)")
        #expect(keys.allSatisfy { $0.count == 64 && $0.allSatisfy(\.isHexDigit) }, "\(keys)")
    }

    @Test func sendWithSamplesPostsEveryRecordedSampleInBatchesThenTheSummary() throws {
        let server = try FlakyServer(failing: 0)
        let (replay, config, stateDir) = try fixtures()
        let recorded = try recordWithoutWebhook("send-samples", replay: replay, config: config, stateDir: stateDir)
        let r = try CLI.run([
            "webhook", "send", "send-samples", "--samples", "--batch-size", "25", "--url", server.url.absoluteString,
            "--state-dir", stateDir, "--config", config,
        ])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("queued 4 item(s): 3 sample batch(es) and its session_summary"), "\(r.stdout)")
        let bodies = try server.accepted().map { try JSONValue(parsing: $0.body) }
        #expect(bodies.map { $0["type"]?.stringValue ?? "" }
            == ["biosignal_batch", "biosignal_batch", "biosignal_batch", "session_summary"])
        let batches = bodies.dropLast()
        #expect(batches.map { $0["samples"]?.arrayValue?.count ?? 0 } == [25, 25, 10])
        #expect(batches.allSatisfy { $0["session_id"] == .string("send-samples") })
        // Every replayed sample, in order (the replay moved the recording onto the current clock: compare with that
        // shift removed).
        let sent = try batches.flatMap { $0["samples"]?.arrayValue ?? [] }.map { try BiosignalSample(json: $0) }
        let replayed = try String(contentsOfFile: replay, encoding: .utf8).split(separator: "\n")
            .map { try BiosignalSample(json: JSONValue(parsing: String($0))) }
        let shift = (sent.first?.timestampMs ?? 0) - (replayed.first?.timestampMs ?? 0)
        #expect(sent.map { s in var u = s; u.timestampMs -= shift; return u } == replayed)
        #expect(try bodies.last == JSONValue(parsing: try #require(recorded.lines.last)))
    }

    @Test func sendRefusesAnUnknownIdAndQueuesNothingForTheOthers() throws {
        let server = try FlakyServer(failing: 0)
        let (replay, config, stateDir) = try fixtures()
        _ = try recordWithoutWebhook("send-known", replay: replay, config: config, stateDir: stateDir)
        let r = try CLI.run([
            "webhook", "send", "send-known", "no-such-session", "--url", server.url.absoluteString,
            "--state-dir", stateDir, "--config", config,
        ])
        #expect(r.status == 1)
        #expect(r.stderr.contains("no session no-such-session in the store"), "\(r.stderr)")
        #expect(server.requestCount() == 0)
        #expect(!FileManager.default.fileExists(atPath: stateDir + "/outbox.sqlite"))
    }

    @Test func sendWithoutAURLSaysWhereToGiveOne() throws {
        let (replay, config, stateDir) = try fixtures()
        _ = try recordWithoutWebhook("send-nourl", replay: replay, config: config, stateDir: stateDir)
        let r = try CLI.run(["webhook", "send", "send-nourl", "--state-dir", stateDir, "--config", config])
        #expect(r.status == 1)
        #expect(r.stderr.contains("No webhook URL: give --url, or set webhook.url"), "\(r.stderr)")
    }

    @Test func aKilledSessionHasOnlyItsSamplesToSend() throws {
        let server = try FlakyServer(failing: 0)
        let (replay, config, stateDir) = try fixtures()
        let received = try killedAtItsFirstFrame([
            "stream", "--replay", replay, "--replay-speed", "4", "--format", "jsonl", "--session-id", "send-kill",
            "--state-dir", stateDir, "--config", config,
        ])
        #expect(received > 0)

        let bare = try CLI.run([
            "webhook", "send", "send-kill", "--url", server.url.absoluteString, "--state-dir", stateDir,
            "--config", config,
        ])
        #expect(bare.status == 1)
        #expect(bare.stdout.contains("send-kill: nothing to send (interrupted, no session_summary recorded)"),
                "\(bare.stdout)")
        #expect(bare.stderr.contains("add --samples"), "\(bare.stderr)")
        #expect(server.requestCount() == 0)

        let withSamples = try CLI.run([
            "webhook", "send", "send-kill", "--samples", "--url", server.url.absoluteString, "--state-dir", stateDir,
            "--config", config,
        ])
        #expect(withSamples.status == 0, "\(withSamples.stderr)")
        let bodies = try server.accepted().map { try JSONValue(parsing: $0.body) }
        #expect(bodies.allSatisfy { $0["type"] == .string("biosignal_batch") })
        #expect(bodies.flatMap { $0["samples"]?.arrayValue ?? [] }.count >= received)
    }
}
