import ArgumentParser
import Foundation
import GatewayEngine
import SessionStore
import WebhookSink

struct WebhookStatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "List the webhook items waiting in the outbox.",
        discussion: """
            One line per item, oldest first: its id, URL, event type and session, when it was queued, the attempts \
            made, when the next is due, and the last error. Times are UTC. Nothing listed: everything was \
            delivered. --format json prints one JSON object per item (the body included).
            """
    )

    enum Format: String, ExpressibleByArgument, CaseIterable { case text, json }

    @Option(name: .customLong("format"), help: "Output: text (a table; the default) or json (one object per line).")
    var formatOption: Format?

    @Flag(help: "Same as --format json (as the other commands say it).")
    var json = false

    var format: Format { json ? .json : formatOption ?? .text }

    func validate() throws {
        if json, formatOption == .text {
            throw ValidationError("--json asks for JSON and --format text for a table: give one of them.")
        }
    }

    @OptionGroup var store: StoreOptions

    func run() async throws {
        let settings = try store.settings()
        let dir = StateDirectory.resolve(option: store.stateDir, configured: settings.stateDir)
        if let unreadable = StateDirectory.unreadable(dir) { throw CommandFailure("state directory: \(unreadable)") }
        let items: [OutboxItem]
        let forming: Int
        // Nothing to create for a status: no outbox is nothing queued (and a mistyped --state-dir stays uncreated).
        guard FileManager.default.fileExists(atPath: dir + "/outbox.sqlite") else {
            if format == .text {
                print("No webhook outbox in \(dir): nothing has been queued for a webhook there.")
            }
            return
        }
        do {
            let outbox = try WebhookOutbox(directory: dir, maxItems: settings.webhookMaxItems)
            items = try outbox.pending()
            forming = try outbox.formingSampleCount()
        } catch {
            throw CommandFailure("\(error)")
        }
        switch format {
        case .json:
            for item in items { print(Self.json(item).jsonString) }
        case .text:
            if forming > 0 {
                print("\(forming) sample(s) committed in a batch still forming (sealed at the batch size, the session's "
                    + "end, a minute without samples, or by `hr-gateway webhook flush`).")
            }
            guard !items.isEmpty else {
                print("The webhook outbox (\(dir)/outbox.sqlite) is empty: everything was delivered.")
                return
            }
            print("\(items.count) item(s) waiting in \(dir)/outbox.sqlite:")
            for item in items {
                let (type, session) = Self.describe(item.body)
                print("#\(item.id) \(type) \(session) -> \(item.url)")
                print("    queued \(Self.time(item.createdAtMs)), \(item.attempts) attempt(s), next "
                    + "\(Self.time(item.nextAttemptMs))" + (item.lastError.map { ", last error: \($0)" } ?? ""))
            }
            print("Deliver them now with `hr-gateway webhook flush`.")
        }
    }

    static func describe(_ body: String) -> (type: String, session: String) {
        let o = (try? JSONValue(parsing: body))?.objectValue
        return (o?["type"]?.stringValue ?? "item", o?["session_id"]?.stringValue ?? "-")
    }

    static func json(_ item: OutboxItem) -> JSONValue {
        var o: [String: JSONValue] = [
            "id": .int(item.id), "url": .string(item.url), "created_at_ms": .int(item.createdAtMs),
            "attempts": .int(Int64(item.attempts)), "next_attempt_ms": .int(item.nextAttemptMs),
            "body": (try? JSONValue(parsing: item.body)) ?? .string(item.body),
        ]
        if let e = item.lastError { o["last_error"] = .string(e) }
        return .object(o)
    }

    static func time(_ ms: Int64) -> String {
        let f = ISO8601DateFormatter()
        return f.string(from: Date(timeIntervalSince1970: Double(ms) / 1000))
    }
}
