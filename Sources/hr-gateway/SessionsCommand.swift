import ArgumentParser
import Foundation
import GatewayEngine
import SessionStore

struct SessionsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sessions",
        abstract: "List, show, export and delete the sessions recorded in the session store.",
        discussion: """
            `hr-gateway stream` records every session (unless --no-record-db) into sessions.sqlite in the state \
            directory: each sample with its heart rate, RR intervals (ms and the strap's raw 1/1024 s), contact, \
            energy, camera estimates with their confidence, device id, source and notification counter; every event; \
            and the session's configuration. A session whose process died without ending it (kill -9, a crash, a \
            power cut) lists as interrupted, with everything it had received.

            States: running (being recorded now), completed (ended with its summary), failed (ended with a \
            session_error), stopped (the command ended before the summary), interrupted.

            A session is named by its id or by the first characters of it, as long as they name one session.

            Examples:
              hr-gateway sessions list
              hr-gateway sessions show 3f2a9c1e
              hr-gateway sessions export 3f2a9c1e --format csv > beats.csv
              hr-gateway sessions export 3f2a9c1e --format jsonl > s.jsonl
              hr-gateway stream --replay s.jsonl
              hr-gateway sessions prune --keep-days 30
              hr-gateway sessions trend --metric rmssd --days 30
            """,
        subcommands: [
            SessionsListCommand.self, SessionsShowCommand.self, SessionsExportCommand.self, SessionsDeleteCommand.self,
            SessionsPruneCommand.self, SessionsTrendCommand.self,
        ]
    )
}

/// Session listing helpers shared by the `sessions` subcommands.
enum SessionText {
    /// Local time with its offset from UTC: without it, the hour repeated when summer time ends read as two sessions
    /// out of order, and a session ending before it started.
    static func time(_ ms: Int64) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.dateFormat = "yyyy-MM-dd HH:mm:ss xxx"
        return f.string(from: Date(timeIntervalSince1970: Double(ms) / 1000))
    }

    static func duration(_ s: RecordedSession) -> String {
        guard let ms = s.durationMs else { return "-" }
        let sec = ms / 1000
        return String(format: "%d:%02d:%02d", sec / 3600, sec / 60 % 60, sec % 60)
    }
}
