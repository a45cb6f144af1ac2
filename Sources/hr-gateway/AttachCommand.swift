import ArgumentParser
import Foundation
import GatewayEngine
import RelayWSClient
import StdoutSink

struct AttachCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "attach",
        abstract: "Connect to a relay as a consumer and print what it sends, one JSON object per line.",
        discussion: """
            Plays the phone: connects to ws://HOST:PORT/v1/relay with a token, prints every message (welcome, \
            gateway_status, command_result, heartbeat and the session events) as JSON lines on stdout, and \
            acknowledges reliable events (session_started, session_summary, session_error) as it prints them.

            With --start it first sends a start_session exactly as a phone relay does and exits after that \
            session's session_summary (status 0) or session_error (status 1). Without it, it runs until the \
            relay closes or --until-summary sees a session end. The token can also come from $HR_GATEWAY_TOKEN.

            Examples:
              hr-gateway attach ws://127.0.0.1:8765/v1/relay --token "$TOKEN"
              hr-gateway attach ws://pi.local:8765/v1/relay --start focus \\
                  --duration 60 --emit-interval 5
              hr-gateway attach ws://127.0.0.1:8765/v1/relay --until-summary \\
                  --no-heartbeats | jq .type
              hr-gateway attach wss://pi.local:8765/v1/relay --pin 3A:1F:…:C0 \\
                  --token "$TOKEN"
            """
    )

    /// What a session started with --start gets when an option is not given (written once, for the help and the command).
    enum StartDefault {
        static let durationSec = 60
        static let emitIntervalSec = 5
        static let windowSec = 60
    }

    @Argument(help: ArgumentHelp("Relay address, such as ws://127.0.0.1:8765/v1/relay.", valueName: "url"))
    var url: String

    @Option(help: ArgumentHelp("Bearer token (`hr-gateway token create`). Default: $HR_GATEWAY_TOKEN.", valueName: "token"))
    var token: String?

    @Option(help: ArgumentHelp("Start a session in this mode (focus, breathing, typing) and exit after its summary.", valueName: "mode"))
    var start: SessionMode?

    @Option(parsing: .unconditional, help: ArgumentHelp("With --start: session length in seconds (default \(StartDefault.durationSec)).", valueName: "sec"))
    var duration: Int?

    @Option(parsing: .unconditional, help: ArgumentHelp("With --start: seconds between session_frame events (default \(StartDefault.emitIntervalSec)).", valueName: "sec"))
    var emitInterval: Int?

    @Option(parsing: .unconditional, help: ArgumentHelp("With --start: sliding window for the metrics, in seconds (default \(StartDefault.windowSec)).", valueName: "sec"))
    var window: Int?

    @Option(help: ArgumentHelp("With --start: session id (default: a new UUID).", valueName: "id"))
    var sessionId: String?

    @Option(help: ArgumentHelp(
        "For wss://: trust only the certificate with this SHA-256 fingerprint (printed by `hr-gateway token create` "
            + "and by `serve --tls`), as a phone pins the gateway's self-signed certificate.",
        valueName: "sha256"))
    var pin: String?

    @Flag(help: "Exit after the first session_summary or session_error.")
    var untilSummary = false

    @Flag(help: "Do not print heartbeat messages.")
    var noHeartbeats = false

    func validate() throws {
        guard url.hasPrefix("ws://") || url.hasPrefix("wss://") else {
            throw ValidationError(
                "The relay address starts with ws:// or wss:// (such as ws://127.0.0.1:8765/v1/relay); got '\(url)'.")
        }
        if start == nil {
            let session = [("--duration", duration != nil), ("--emit-interval", emitInterval != nil),
                           ("--window", window != nil), ("--session-id", sessionId != nil)].filter(\.1).map(\.0)
            if !session.isEmpty {
                throw ValidationError("\(session.joined(separator: ", ")) describe\(session.count == 1 ? "s" : "") the session "
                    + "--start starts; without --start, attach only watches. Add --start focus (or breathing, typing).")
            }
        }
        if let duration, duration <= 0 { throw ValidationError("--duration must be a positive number of seconds.") }
        if let emitInterval, emitInterval <= 0 {
            throw ValidationError("--emit-interval must be a positive number of seconds.")
        }
        if let window, window <= 0 { throw ValidationError("--window must be a positive number of seconds.") }
        if let sessionId, let problem = SessionConfig.sessionIdProblem(sessionId, named: "--session-id") {
            throw ValidationError(problem + ".")
        }
        if pin != nil && !url.hasPrefix("wss://") { throw ValidationError("--pin is for a wss:// address.") }
    }

    func run() async throws {
        let token = (self.token ?? ProcessInfo.processInfo.environment["HR_GATEWAY_TOKEN"]).flatMap { $0.isEmpty ? nil : $0 }
        let id = sessionId ?? UUID().uuidString.lowercased()
        // The command's own id, short whatever the session's (a 190-byte session id made it longer than the relay
        // takes, and the refusal, which then carries no id, was never matched: attach waited for ever).
        let commandId = "attach-start-" + UUID().uuidString.lowercased().prefix(8)
        var initial: [JSONValue] = []
        if let start {
            initial.append(.object([
                "command": .string("start_session"), "id": .string(commandId),
                "session_id": .string(id), "mode": .string(start.rawValue), "duration_sec": .int(Int64(duration ?? StartDefault.durationSec)),
                "profile": .object([
                    "window_sec": .int(Int64(window ?? StartDefault.windowSec)), "emit_interval_sec": .int(Int64(emitInterval ?? StartDefault.emitIntervalSec)),
                ]),
            ]))
        }
        let status = Locked<Int32?>(nil)
        let watching = start == nil ? nil : id
        let stopAtEnd = untilSummary || start != nil
        let hideHeartbeats = noHeartbeats
        do {
            try await RelayClient(url: url, token: token, pinnedFingerprint: pin).run(initial: initial) { m in
                let type = m["type"]?.stringValue
                if !(hideHeartbeats && type == "heartbeat") {
                    StandardStream.output.write(Data((m.jsonString + "\n").utf8))
                }
                if type == "command_result", m["ok"] == .bool(false), m["id"] == .string(commandId) {
                    // Said on stderr too: a script reading only the exit status and stderr learns why.
                    let code = m["error_code"]?.stringValue ?? "refused"
                    StandardStream.error.write(Data(
                        "Error: the gateway refused to start the session (\(code)): \(m["message"]?.stringValue ?? "")\n".utf8))
                    status.withLock { $0 = 1 }
                    return .close
                }
                var reply: [JSONValue] = []
                if m["delivery"] == .string("reliable"), let seq = m["relay_seq"] {
                    reply.append(.object(["command": .string("ack"), "relay_seq": seq]))
                }
                if stopAtEnd, type == "session_summary" || type == "session_error",
                    watching == nil || m["session_id"]?.stringValue == watching
                {
                    status.withLock { $0 = type == "session_summary" ? 0 : 1 }
                    // Send the acknowledgement before closing.
                    return reply.isEmpty ? .close : .sendThenClose(reply)
                }
                return reply.isEmpty ? .continue : .send(reply)
            }
        } catch let e as RelayPinningError {
            StandardStream.error.write(Data("Error: \(e)\n".utf8))
            throw ExitCode(1)
        } catch let e as RelayClientError {
            StandardStream.error.write(Data("Error: \(e)\n".utf8))
            throw ExitCode(1)
        } catch {
            var hint = ""
            if url.hasPrefix("wss://") && pin == nil {
                hint = " A gateway with its own self-signed certificate (serve --tls) is trusted by fingerprint: add --pin SHA256."
            }
            let why = RelayClient.explain(error, url: url, tokenGiven: token != nil)
            StandardStream.error.write(Data("Error: cannot attach to \(url): \(why).\(hint)\n".utf8))
            throw ExitCode(1)
        }
        if let code = status.withLock({ $0 }), code != 0 { throw ExitCode(code) }
        if stopAtEnd && status.withLock({ $0 }) == nil {
            StandardStream.error.write(Data("Error: the relay closed before the session ended\n".utf8))
            throw ExitCode(1)
        }
    }
}
