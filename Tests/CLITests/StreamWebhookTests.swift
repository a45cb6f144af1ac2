import Foundation
import GatewayEngine
import Testing
import WebhookTestSupport

@Suite struct StreamWebhookTests {
    func temp(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("hrg-webhook-\(UUID().uuidString)-\(name)").path
    }

    /// A minute of beats to replay, and a configuration with a 20 ms backoff base so retries within the grace period
    /// are quick.
    func fixtures() throws -> (replay: String, config: String, stateDir: String) {
        let replay = temp("beats.jsonl")
        let lines = (0..<60).map { i in
            BiosignalSample(timestampMs: 5_000_000 + Int64(i) * 1000, bpm: 60, rrIntervalsMs: [1000], deviceId: "AA",
                            source: "ble_hrm").jsonValue.jsonString
        }
        try (lines.joined(separator: "\n") + "\n").write(toFile: replay, atomically: true, encoding: .utf8)
        let config = temp("hr-gateway.toml")
        try "[webhook]\nbackoff_base_ms = 20\nbackoff_max_sec = 1\n".write(toFile: config, atomically: true, encoding: .utf8)
        let stateDir = temp("state")
        try FileManager.default.createDirectory(atPath: stateDir, withIntermediateDirectories: true)
        return (replay, config, stateDir)
    }

    /// Runs `arguments` (a stream) until its first session_frame, then kills it (SIGKILL); returns that frame's
    /// sample count.
    func killedAtItsFirstFrame(_ arguments: [String]) throws -> Int {
        let stream = try RunningCLI(arguments)
        var received = 0
        while let line = stream.readLine() {
            let event = try JSONValue(parsing: line)
            if event["type"] == .string("session_frame") {
                received = Int(event["metrics"]?["sample_count"]?.intValue ?? 0)
                break
            }
        }
        stream.signal(SIGKILL)
        _ = stream.wait()
        return received
    }

    /// `serve` with the configuration's webhook: the summary of each session a consumer starts is posted (serve
    /// posted none, and said the webhook was stream's).
    @Test func serveRecordsAndPostsEachSessionsSummary() throws {
        let server = try FlakyServer(failing: 1)
        let (_, config, stateDir) = try fixtures()
        try "[webhook]\nurl = \"\(server.url.absoluteString)\"\nbackoff_base_ms = 20\nbackoff_max_sec = 1\n"
            .write(toFile: config, atomically: true, encoding: .utf8)
        let token = try #require(try CLI.run(["token", "create", "--name", "phone", "--state-dir", stateDir]).lines.last)
        let serve = try RunningCLI(["serve", "--simulate", "--listen", "127.0.0.1:0", "--state-dir", stateDir,
                                    "--config", config])
        let listening = try #require(serve.readLine())
        let url = try #require(listening.split(separator: " ").last.map(String.init))
        var summaries: [String] = []
        for id in ["wh-serve-1", "wh-serve-2"] {
            let run = try CLI.run(["attach", url, "--token", token, "--start", "focus", "--duration", "2",
                                   "--session-id", id])
            #expect(run.status == 0, "\(run.stderr)")
            summaries += run.lines.filter { $0.contains("\"type\":\"session_summary\"") }
        }
        serve.signal(SIGTERM)
        #expect(serve.wait() == 0)
        let posted = server.accepted().map(\.body)
        let ids = posted.compactMap { try? JSONValue(parsing: $0)["session_id"]?.stringValue }
        #expect(ids.sorted() == ["wh-serve-1", "wh-serve-2"], "\(posted)")
        #expect(posted.allSatisfy { (try? JSONValue(parsing: $0)["type"]) == .string("session_summary") })
        #expect(summaries.count == 2)
    }

    /// `serve --webhook URL`, as `stream --webhook` (serve had only the configuration's webhook.url, and said
    /// "Unknown option '--webhook'", while the configuration's comment names the option).
    @Test func serveTakesTheWebhookOnItsCommandLine() throws {
        let server = try FlakyServer(failing: 0)
        let (_, config, stateDir) = try fixtures()
        let token = try #require(try CLI.run(["token", "create", "--name", "phone", "--state-dir", stateDir]).lines.last)
        let serve = try RunningCLI(["serve", "--simulate", "--listen", "127.0.0.1:0", "--state-dir", stateDir,
                                    "--config", config, "--webhook", server.url.absoluteString])
        let listening = try #require(serve.readLine())
        let url = try #require(listening.split(separator: " ").last.map(String.init))
        let run = try CLI.run(["attach", url, "--token", token, "--start", "focus", "--duration", "2",
                               "--session-id", "wh-option"])
        #expect(run.status == 0, "\(run.stderr)")
        serve.signal(SIGTERM)
        #expect(serve.wait() == 0)
        let ids = server.accepted().compactMap { try? JSONValue(parsing: $0.body)["session_id"]?.stringValue }
        #expect(ids == ["wh-option"])
    }

    /// A webhook outbox that cannot be opened (a damaged file here; a full disk on a Pi) stopped the session, exit 1,
    /// while the recording, relay and MQTT degrade with a warning: a service with a webhook restarted until systemd
    /// gave up. The session now runs and is recorded, and the warning says how to post its summary later.
    @Test func anOutboxThatCannotOpenLeavesTheSessionRunning() throws {
        let (replay, config, stateDir) = try fixtures()
        try "not a database".write(toFile: stateDir + "/outbox.sqlite", atomically: true, encoding: .utf8)
        let run = try CLI.run(["stream", "--replay", replay, "--replay-speed", "100", "--format", "jsonl",
                               "--session-id", "wh-broken", "--webhook", "http://127.0.0.1:9/hook", "--webhook-grace", "0",
                               "--state-dir", stateDir, "--config", config])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("the session goes on without the webhook"), "\(run.stderr)")
        #expect(run.stderr.contains("hr-gateway webhook send SESSION_ID"), "\(run.stderr)")
        #expect(run.lines.last?.contains("\"session_summary\"") == true)
        let list = try CLI.run(["sessions", "list", "--state-dir", stateDir, "--config", config])
        #expect(list.stdout.contains("wh-broken") && list.stdout.contains("completed"), "\(list.stdout)")
    }

    @Test func theSummaryReachesAFailingWebhookExactlyOnce() throws {
        let server = try FlakyServer(failing: 2)
        let (replay, config, stateDir) = try fixtures()
        let r = try CLI.run([
            "stream", "--replay", replay, "--replay-speed", "1000", "--format", "jsonl", "--session-id", "wh-1",
            "--webhook", server.url.absoluteString, "--state-dir", stateDir, "--config", config,
        ])
        #expect(r.status == 0, "\(r.stderr)")
        let summaryLine = try #require(r.lines.last)
        #expect(try JSONValue(parsing: summaryLine)["type"] == .string("session_summary"))
        let accepted = server.accepted()
        #expect(accepted.map(\.body) == [summaryLine])
        #expect(accepted.first?.contentType == "application/json")
        #expect(server.requestCount() == 3)

        let status = try CLI.run(["webhook", "status", "--state-dir", stateDir, "--config", config, "--format", "json"])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.lines.isEmpty)
    }

    @Test func whatAStreamCouldNotDeliverAFlushDeliversLater() throws {
        let gate = temp("refuse")
        #expect(FileManager.default.createFile(atPath: gate, contents: nil))
        let server = try FlakyServer(failing: 0, failWhile: gate)
        let (replay, config, stateDir) = try fixtures()
        let r = try CLI.run([
            "stream", "--replay", replay, "--replay-speed", "1000", "--format", "jsonl", "--session-id", "wh-2",
            "--webhook", server.url.absoluteString, "--webhook-grace", "0", "--state-dir", stateDir, "--config", config,
        ])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("webhook flush"))
        let summaryLine = try #require(r.lines.last)
        #expect(server.accepted().isEmpty)
        #expect(server.requestCount() >= 1)

        let status = try CLI.run(["webhook", "status", "--state-dir", stateDir, "--config", config, "--format", "json"])
        #expect(status.status == 0, "\(status.stderr)")
        // --json says the same, as the other commands say it.
        let same = try CLI.run(["webhook", "status", "--state-dir", stateDir, "--config", config, "--json"])
        #expect(same.status == 0 && same.stdout == status.stdout, "\(same.stdout)")
        let items = try status.lines.map { try JSONValue(parsing: $0) }
        try #require(items.count == 1)
        #expect(items[0]["body"]?["type"] == .string("session_summary"))
        #expect(items[0]["last_error"] == .string("HTTP 500"))
        #expect((items[0]["attempts"]?.intValue ?? 0) >= 1)

        // Still refusing: the flush fails and keeps the item.
        let refused = try CLI.run(["webhook", "flush", "--timeout", "0", "--state-dir", stateDir, "--config", config])
        #expect(refused.status == 1)
        #expect(server.accepted().isEmpty)

        try FileManager.default.removeItem(atPath: gate)
        let flushed = try CLI.run(["webhook", "flush", "--state-dir", stateDir, "--config", config])
        #expect(flushed.status == 0, "\(flushed.stderr)")
        #expect(server.accepted().map(\.body) == [summaryLine])
        let after = try CLI.run(["webhook", "status", "--state-dir", stateDir, "--config", config])
        #expect(after.stdout.contains("is empty"))
    }

    @Test func theNextStreamDeliversWhatAnEarlierOneLeft() throws {
        let gate = temp("refuse")
        #expect(FileManager.default.createFile(atPath: gate, contents: nil))
        let server = try FlakyServer(failing: 0, failWhile: gate)
        let (replay, config, stateDir) = try fixtures()
        func stream(_ id: String, grace: String) throws -> CLI.Result {
            try CLI.run([
                "stream", "--replay", replay, "--replay-speed", "1000", "--format", "jsonl", "--session-id", id,
                "--webhook", server.url.absoluteString, "--webhook-grace", grace, "--state-dir", stateDir,
                "--config", config,
            ])
        }
        let first = try stream("wh-3a", grace: "0")
        #expect(first.status == 0, "\(first.stderr)")
        #expect(server.accepted().isEmpty)

        try FileManager.default.removeItem(atPath: gate)
        let second = try stream("wh-3b", grace: "10")
        #expect(second.status == 0, "\(second.stderr)")
        let bodies = Set(server.accepted().map(\.body))
        #expect(server.accepted().count == 2)
        #expect(bodies == [try #require(first.lines.last), try #require(second.lines.last)])
    }

    @Test func samplesGoInBatchesBeforeTheSummary() throws {
        let server = try FlakyServer(failing: 1)
        let (replay, config, stateDir) = try fixtures()
        let r = try CLI.run([
            "stream", "--replay", replay, "--replay-speed", "1000", "--format", "jsonl", "--session-id", "wh-4",
            "--webhook", server.url.absoluteString, "--webhook-samples", "--state-dir", stateDir, "--config", config,
        ])
        #expect(r.status == 0, "\(r.stderr)")
        let bodies = try server.accepted().map { try JSONValue(parsing: $0.body) }
        let batches = bodies.filter { $0["type"] == .string("biosignal_batch") }
        #expect(batches.allSatisfy { $0["session_id"] == .string("wh-4") })
        let samples = batches.flatMap { $0["samples"]?.arrayValue ?? [] }
        #expect(samples.count == 60)
        // In order: the replay keeps the recording's spacing of one second.
        let times = samples.compactMap { $0["timestamp_ms"]?.intValue }
        #expect(times.count == 60 && zip(times, times.dropFirst()).allSatisfy { $1 - $0 == 1000 })
        #expect(bodies.last?["type"] == .string("session_summary"))
        #expect(bodies.filter { $0["type"] == .string("session_summary") }.count == 1)
    }

    @Test func samplesOfAKilledStreamAreDeliveredByTheNextFlush() throws {
        let gate = temp("refuse")
        #expect(FileManager.default.createFile(atPath: gate, contents: nil))
        let server = try FlakyServer(failing: 0, failWhile: gate)
        let (replay, config, stateDir) = try fixtures()
        // A batch holds 60 samples; the stream is killed long before one fills.
        let received = try killedAtItsFirstFrame([
            "stream", "--replay", replay, "--replay-speed", "4", "--format", "jsonl", "--session-id", "wh-kill",
            "--webhook", server.url.absoluteString, "--webhook-samples", "--state-dir", stateDir, "--config", config,
        ])
        #expect(received > 0)

        try FileManager.default.removeItem(atPath: gate)
        let flush = try CLI.run(["webhook", "flush", "--state-dir", stateDir, "--config", config, "--timeout", "5"])
        #expect(flush.status == 0, "\(flush.stderr)")
        let batches = try server.accepted().map { try JSONValue(parsing: $0.body) }
        #expect(batches.allSatisfy { $0["type"] == .string("biosignal_batch") && $0["session_id"] == .string("wh-kill") })
        let delivered = try batches.flatMap { $0["samples"]?.arrayValue ?? [] }.map { try BiosignalSample(json: $0) }
        // Every sample the engine had received when it emitted the frame was committed before it got there: each one
        // is delivered, in the replay's order, with none missing or repeated.
        let replayed = try String(contentsOfFile: replay, encoding: .utf8).split(separator: "\n")
            .map { try BiosignalSample(json: JSONValue(parsing: String($0))) }
        #expect(delivered.count >= received)
        // The replay moves the recording onto the current clock, keeping its spacing: compare with that shift removed.
        let shift = (delivered.first?.timestampMs ?? 0) - (replayed.first?.timestampMs ?? 0)
        let unshifted = delivered.map { sample -> BiosignalSample in
            var s = sample
            s.timestampMs -= shift
            return s
        }
        #expect(unshifted == Array(replayed.prefix(delivered.count)))
    }

    @Test func aMalformedWebhookURLIsRefusedBeforeTheSession() throws {
        let (replay, _, stateDir) = try fixtures()
        let r = try CLI.run(["stream", "--replay", replay, "--webhook", "127.0.0.1:8080/hook", "--state-dir", stateDir])
        #expect(r.status != 0)
        #expect(r.stderr.contains("--webhook"))
        #expect(r.stderr.contains("http:// or https://"))
        #expect(r.stdout.isEmpty)
    }
}
