import ArgumentParser
import GatewayEngine
import SessionStore

struct SessionsListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List recorded sessions, oldest first.",
        discussion: """
            Columns: session id, state, mode, start (local time), duration (to the end, or to the last sample of an \
            interrupted session), samples, RR intervals, devices, and for paced breathing sessions the pattern with \
            the summary's adherence and RSA amplitude. --json prints one JSON array with the same fields \
            (times in epoch ms, duration_ms, pacing as the table's text) and each session's configuration.

            Examples:
              hr-gateway sessions list
              hr-gateway sessions list --last 20
              hr-gateway sessions list --json \\
                  | jq -r '.[] | select(.state=="interrupted") | .session_id'
            """
    )

    @Flag(help: "Print a JSON array instead of a table.")
    var json = false

    @Option(parsing: .unconditional, help: ArgumentHelp("Only the N sessions that started last (still oldest first).", valueName: "n"))
    var last: Int?

    func validate() throws {
        if let last, last < 1 { throw ValidationError("--last must be 1 or more, got \(last).") }
    }

    @OptionGroup var store: StoreOptions

    /// The SESSION column's width: a UUID's.
    static let idWidth = 36

    func run() throws {
        guard let opened = try store.existing() else { return try store.sayNoStore(json: json) }
        let sessions = try opened.list(newest: last)
        if json {
            // The table's columns: the duration (to the end, or the last sample) and the pacing summary too.
            print(JSONValue.array(sessions.map(opened.listed)).jsonString)
            return
        }
        if sessions.isEmpty {
            print("No sessions in \(try store.directory())/sessions.sqlite.")
            return
        }
        let rows: [[String]] = [["SESSION", "STATE", "MODE", "STARTED", "DURATION", "SAMPLES", "RR", "DEVICES", "PACING"]]
            + sessions.map { s in
                // An id of up to 200 characters widened every row past any terminal: cut to a UUID's length (the
                // first characters name a session for show, export and delete; --json has the whole id).
                [s.id.count > Self.idWidth ? s.id.prefix(Self.idWidth - 1) + "…" : s.id, s.state.rawValue, s.mode, SessionText.time(s.startedAtMs), SessionText.duration(s),
                 String(s.sampleCount), String(s.rrCount), s.devices.joined(separator: " "), opened.pacingSummary(s) ?? "-"]
            }
        let widths = (0..<9).map { c in rows.map { $0[c].count }.max() ?? 0 }
        for row in rows {
            var line = ""
            for (c, cell) in row.enumerated() {
                line += c == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[c] - cell.count + 2)
            }
            print(line)
        }
    }
}
