import ArgumentParser
import Foundation
import GatewayEngine
import RelayCore
import RelayStore
import RelayWebServer
import SessionStore

struct TokenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Create, list and revoke the tokens relay consumers connect with.",
        discussion: """
            A consumer of `hr-gateway serve` or `stream --listen` presents a token at the WebSocket upgrade \
            (Authorization: Bearer TOKEN). Only the token's SHA-256 is stored, in tokens.json (mode 0600) in the \
            state directory, the one serve and stream use (see --state-dir: the option, else \
            $HR_GATEWAY_STATE_DIR, else the configuration file's state_dir, else systemd's $STATE_DIRECTORY, else \
            $XDG_STATE_HOME/hr-gateway, else ~/.local/state/hr-gateway). A lost token cannot be shown again: \
            revoke it and create another.

            Examples:
              hr-gateway token create --name phone
              hr-gateway token create --read-only --name obs-overlay
              hr-gateway token create --name phone --tls
                  (also prints the certificate fingerprint to pin)
              TOKEN=$(hr-gateway token create --name ci | tail -n 1)
              hr-gateway token list
              hr-gateway token revoke 3a9f0c
            """,
        subcommands: [Create.self, List.self, Revoke.self]
    )

    struct Create: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a token and print it (last line of the output; shown only once).")

        @Flag(help: "The token receives events but cannot start_session, stop_session or ingest_hsi_metrics.")
        var readOnly = false

        @Option(help: ArgumentHelp(
            "A name to recognise the token by in `token list` and the log, and to revoke it by; one per token "
                + "(default: consumer, then consumer-2, …).",
            valueName: "label"))
        var name: String?

        @Flag(help: "Also make the relay's self-signed TLS certificate now if there is none yet (as `serve --tls` would on first use), so that its fingerprint is printed for the phone to pin.")
        var tls = false

        @Flag(help: "Print one JSON object: id, name, scope (control or read-only), created_at_ms, token and, when the relay has a TLS certificate, tls_fingerprint.")
        var json = false

        @OptionGroup var state: StoreOptions

        func validate() throws {
            if let name, let problem = RelayTokenStore.nameProblem(name) { throw ValidationError(problem) }
        }

        func run() throws {
            let store = try state.tokens()
            let tlsFiles = RelayTLSFiles.inStateDirectory(store.directory)
            if tls {
                do { try tlsFiles.createSelfSignedIfMissing() } catch let e as RelayServerError { throw CommandFailure(e.description) }
            }
            let (token, record) = try Self.wrap {
                try store.create(name: name ?? "consumer", scope: readOnly ? RelayScope.read : RelayScope.control,
                                 nowMs: SystemSessionClock().nowMs(), numbered: name == nil)
            }
            let fingerprint = try? tlsFiles.fingerprint()
            if json {
                var o = List.object(record)
                o["token"] = .string(token)
                if let fingerprint { o["tls_fingerprint"] = .string(fingerprint) }
                print(JSONValue.object(o).jsonString)
                return
            }
            print("created \(List.scopeName(record)) token \(record.id) '\(record.name)' in \(store.path)")
            print("connect with: Authorization: Bearer <token>   (the token is not stored and is shown only now)")
            if let fingerprint {
                print("pin the relay's TLS certificate (SHA-256): \(fingerprint)")
            }
            print(token)
        }

        /// A token store error (no such token, an unreadable or unwritable file): printed as one line, exit status 1.
        static func wrap<T>(_ body: () throws -> T) throws -> T {
            do { return try body() } catch let e as RelayTokenStoreError { throw CommandFailure(e.description) }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List tokens: id, scope, creation time (UTC), name.")

        @Flag(help: "Print a JSON array of {id, name, scope (control or read-only), created_at_ms}; [] when there are none.")
        var json = false

        @OptionGroup var state: StoreOptions

        static func scopeName(_ r: RelayTokenRecord) -> String { r.scope == RelayScope.read ? "read-only" : "control" }

        static func object(_ r: RelayTokenRecord) -> [String: JSONValue] {
            ["id": .string(r.id), "name": .string(r.name), "scope": .string(scopeName(r)), "created_at_ms": .int(r.createdAtMs)]
        }

        func run() throws {
            let store = try state.tokens()
            let records = try Create.wrap { try store.list() }
            if json {
                print(JSONValue.array(records.map { .object(Self.object($0)) }).jsonString)
                return
            }
            if records.isEmpty {
                print("no tokens in \(store.path); create one with `hr-gateway token create --name phone`")
                return
            }
            let formatter = ISO8601DateFormatter()
            for r in records {
                let created = formatter.string(from: Date(timeIntervalSince1970: Double(r.createdAtMs) / 1000))
                let scope = Self.scopeName(r)
                print("\(r.id)  \(scope.padding(toLength: 9, withPad: " ", startingAt: 0))  \(created)  \(r.name)")
            }
        }
    }

    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke a token by id (or a unique prefix of it) or by name; new connections with it get 401.")

        @Argument(help: ArgumentHelp("Token id as shown by `token list` (a unique prefix is enough), or its name.", valueName: "id"))
        var id: String

        @OptionGroup var state: StoreOptions

        func run() throws {
            let store = try state.tokens()
            let removed = try Create.wrap { try store.revoke(id) }
            print("revoked \(removed.id) '\(removed.name)'")
        }
    }
}

extension StoreOptions {
    /// The relay tokens of the resolved state directory.
    func tokens() throws -> RelayTokenStore {
        let dir = try directory()
        if let impossible = StateDirectory.impossibility(dir) { throw CommandFailure("state directory \(impossible)") }
        if let unreadable = StateDirectory.unreadable(dir) { throw CommandFailure("state directory: \(unreadable)") }
        return RelayTokenStore(directory: dir)
    }
}
