import ArgumentParser
import Foundation
import GatewayEngine
import Logging
import SessionStore
import StdoutSink
import WebhookSink

struct WebhookSendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Queue recorded sessions' summaries for the webhook again, and deliver them.",
        discussion: """
            For each session ID (an id from `hr-gateway sessions list`, or its first characters), queues the \
            session_summary recorded in the session store, its exact JSON, in outbox.sqlite, then delivers the \
            outbox as `webhook flush` does. For a summary that never reached the outbox (another process held it \
            when the session ended), a webhook set up after the session, or a server that lost what it received.

            --samples also queues the session's recorded samples in batches of --batch-size, before its summary, \
            as `stream --webhook-samples` posts them. A session still being recorded is refused (its summary is \
            queued when it ends); one that ended without a summary (a session_error, or the command was killed) \
            has only its samples to send. An item already waiting in the outbox for the same URL is not queued twice.

            Exit status 0 when every item for these sessions was delivered, 1 when some are left in the outbox \
            (a later `webhook flush` or `stream` delivers it) or a session had nothing to send.

            Examples:
              hr-gateway webhook send 3f2a9c1e
              hr-gateway webhook send 3f2a9c1e 77b0 --samples --url https://example.org/hr
            """
    )

    @Argument(help: "Session ids, or their first characters (see `hr-gateway sessions list`).")
    var ids: [String]

    @Option(help: ArgumentHelp(
        "Where to post (default: $HR_GATEWAY_WEBHOOK, else the configuration's webhook.url).", valueName: "url"))
    var url: String?

    @Flag(help: "Also queue the session's recorded samples, in batches, before its summary.")
    var samples = false

    @Option(help: ArgumentHelp(
        "Samples per batch with --samples (default: the configuration's webhook.batch_size, else 60).",
        valueName: "n"))
    var batchSize: Int?

    @OptionGroup var retry: WebhookRetryOptions

    @OptionGroup var store: StoreOptions

    func validate() throws {
        if ids.isEmpty { throw ValidationError("Name at least one session (see `hr-gateway sessions list`).") }
        if ids.contains(where: { $0.trimmingCharacters(in: .whitespaces).isEmpty }) {
            throw ValidationError("A session id is empty: give one, or its first characters (see hr-gateway sessions list).")
        }
        if let url { do { _ = try parseWebhookURL(url) } catch { throw ValidationError("--url: \(error)") } }
        if let n = batchSize, n < 1 { throw ValidationError("--batch-size must be 1 or more samples.") }
        if batchSize != nil, !samples { throw ValidationError("--batch-size goes with --samples.") }
    }

    func run() async throws {
        let settings = try store.settings()
        guard let text = url ?? settings.webhookURL else {
            throw CommandFailure("No webhook URL: give --url, or set webhook.url in the configuration "
                + "(or $HR_GATEWAY_WEBHOOK)")
        }
        let target: URL
        do { target = try parseWebhookURL(text) } catch { throw CommandFailure("webhook URL: \(error)") }
        let sessions = try store.openForReading()

        // Everything is read (and every id checked) before anything is queued: a mistyped id queues nothing.
        var plans: [WebhookResend.Plan] = []
        for id in ids {
            do throws(StoreError) {
                plans.append(try WebhookResend.plan(
                    session: try sessions.resolve(id), in: sessions, samples: samples,
                    batchSize: batchSize ?? settings.webhookBatchSize))
            } catch .sessionRunning(let id) {
                throw CommandFailure("session \(id) is being recorded right now: a stream with --webhook queues its "
                    + "summary when it ends; send it once it has")
            } catch { throw CommandFailure("\(error)") }
        }

        let dir = StateDirectory.resolve(option: store.stateDir, configured: settings.stateDir)
        let forwarder = try WebhookDelivery.forwarder(
            stateDir: dir, settings: settings, logger: Logger(label: "hr-gateway.webhook"))
        var queued: [Int64] = []  // the outbox items for these sessions: queued now, or waiting already
        var nothing: [String] = []
        do {
            var waiting: [String: Int64] = [:]
            for item in try forwarder.outbox.pending() where item.url == target.absoluteString {
                waiting[item.body] = item.id
            }
            for plan in plans {
                var fresh = 0
                for body in plan.bodies {
                    if let id = waiting[body] {
                        queued.append(id)
                    } else {
                        queued.append(try forwarder.outbox.enqueue(url: target.absoluteString, body: body, nowMs: Self.nowMs()).id)
                        fresh += 1
                    }
                }
                print(plan.describe(queued: fresh, alreadyWaiting: plan.bodies.count - fresh))
                if plan.bodies.isEmpty { nothing.append(plan.sessionId) }
            }
            // Delivers what waits in the outbox (these items, and any before them: a URL gets its items in order).
            if !queued.isEmpty { _ = try await forwarder.drain(forMs: retry.ms(settings), immediately: true) }
        } catch { throw CommandFailure("\(error)") }

        var left = 0
        if !queued.isEmpty {
            do {
                let ids = Set(queued)
                left = try forwarder.outbox.pending().filter { ids.contains($0.id) }.count
            } catch { throw CommandFailure("\(error)") }
            print("Delivered \(queued.count - left) of these \(queued.count) item(s) to \(target.absoluteString).")
        }
        if left > 0 {
            StandardStream.error.write(Data(("Error: \(left) item(s) not delivered yet, kept in \(forwarder.outbox.path): "
                + "see `hr-gateway webhook status` for the last errors; `hr-gateway webhook flush` tries again\n").utf8))
        }
        if !nothing.isEmpty {
            let advice = samples ? "and no sample" : "(add --samples to send the samples)"
            StandardStream.error.write(Data(("Error: nothing to send for \(nothing.joined(separator: ", ")): no "
                + "session_summary was recorded \(advice)\n").utf8))
        }
        if left > 0 || !nothing.isEmpty { throw ExitCode(1) }
    }

    private static func nowMs() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }
}

/// What `webhook send` queues for one recorded session: its sample batches (optionally), then its summary.
enum WebhookResend {
    struct Plan {
        let sessionId: String
        let state: RecordedSessionState
        /// The request bodies, in the order they are posted.
        let bodies: [String]
        let batches: Int
        let hasSummary: Bool

        func describe(queued: Int, alreadyWaiting: Int) -> String {
            var what: [String] = []
            if batches > 0 { what.append("\(batches) sample batch(es)") }
            if hasSummary { what.append("its session_summary") }
            guard !what.isEmpty else {
                return "\(sessionId): nothing to send (\(state.rawValue), no session_summary recorded)"
            }
            let waiting = alreadyWaiting > 0 ? "; \(alreadyWaiting) of them already waiting in the outbox" : ""
            return "\(sessionId): queued \(queued) item(s): \(what.joined(separator: " and "))\(waiting)"
        }
    }

    static func plan(session id: String, in store: SessionStore, samples: Bool, batchSize: Int) throws(StoreError)
        -> Plan
    {
        guard let session = try store.session(id: id) else { throw .sessionNotFound(id) }
        if session.state == .running { throw .sessionRunning(id) }
        var bodies: [String] = []
        if samples {
            let recorded = try store.samples(sessionId: id)
            for start in stride(from: 0, to: recorded.count, by: batchSize) {
                bodies.append(WebhookOutbox.batchBody(
                    sessionId: id, samples: recorded[start..<min(start + batchSize, recorded.count)].map(\.jsonValue)))
            }
        }
        let batches = bodies.count
        let summary = try store.events(sessionId: id).last(where: { $0.type == "session_summary" })
        if let summary { bodies.append(summary.json) }
        return Plan(sessionId: id, state: session.state, bodies: bodies, batches: batches, hasSummary: summary != nil)
    }
}
