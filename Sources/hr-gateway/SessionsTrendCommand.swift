import ArgumentParser
import Foundation
import GatewayEngine
import SessionStore
import StdoutSink

extension SessionTrends.Metric: ExpressibleByArgument {}

struct SessionsTrendCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trend",
        abstract: "A per-day trend of RMSSD, RSA or resting heart rate over recorded sessions.",
        discussion: """
            Reads the summary of every finished session in the store and prints one line per day (local time): \
            the date, the day's value, how many sessions gave it, and a bar. A summary's values are those of the \
            session's last window (--window, 60 s unless set), as in the Synheart SDK: the end of each session. \
            rmssd is the mean RMSSD of the day's \
            sessions with RR intervals (ms); rsa the mean RSA amplitude of its paced breathing sessions (bpm; \
            `breathe`); resting_hr the day's lowest summary heart rate (bpm). Sessions shorter than \
            --min-duration (a minute by default: a test, a false start) are left out, and their number said. A \
            session with several straps gives its top-level strap's value (its primary_device), which may be \
            another person's from one session to the next: --device ID keeps one strap's values (sessions list \
            shows the ids; a session whose summary no longer holds that strap's own values, as it went quiet \
            before the end, is left out).

            Examples:
              hr-gateway sessions trend --metric rmssd --days 30
              hr-gateway sessions trend --metric resting_hr --json | jq '.[-1]'
              hr-gateway sessions trend --metric rmssd --device A0:9E:1A:12:34:56
            """
    )

    @Option(help: "rmssd, rsa or resting_hr.")
    var metric: SessionTrends.Metric = .rmssd

    @Option(parsing: .unconditional, help: ArgumentHelp("Only sessions started in the last N days.", valueName: "n"))
    var days: Int?

    @Option(name: .customLong("min-duration"), parsing: .unconditional, help: ArgumentHelp(
        "Leave out sessions shorter than SEC seconds (0: count every one).", valueName: "sec"))
    var minDurationSec = 60

    @Option(help: ArgumentHelp(
        "Only this strap's (or camera's) values, in the sessions it took part in (its id as `sessions list` shows "
            + "it; case does not matter).", valueName: "id"))
    var device: String?

    @Flag(help: "Print a JSON array ({date, value, sessions, unit}) instead of the table.")
    var json = false

    @OptionGroup var store: StoreOptions

    func validate() throws {
        if let days, days <= 0 { throw ValidationError("--days must be a positive number of days.") }
        if minDurationSec < 0 { throw ValidationError("--min-duration is a number of seconds, 0 or more.") }
        if device?.isEmpty == true { throw ValidationError("--device needs a device id (`hr-gateway sessions list` shows each session's).") }
    }

    func run() throws {
        // Any number of days past the epoch is every session (10^12 days overflowed the milliseconds: a crash).
        let since = days.map { Int64(Date().timeIntervalSince1970 * 1000) - Int64(min($0, SessionsPruneCommand.maxDays)) * 86_400_000 }
            ?? .min
        guard let opened = try store.existing() else {
            // As `sessions list` says it: a mistyped --state-dir read as "no value for rmssd".
            return try store.sayNoStore(json: json)
        }
        let recorded = try opened.summariesWithDevices(device: device)
        // A device no session recorded is a mistake (a typo, another store), not a trend without values.
        if let device, recorded.isEmpty {
            var known: [String] = []
            for s in try opened.list() { for d in s.devices where !known.contains(d) { known.append(d) } }
            if !known.contains(where: { $0.caseInsensitiveCompare(device) == .orderedSame }) {
                let listed = known.isEmpty ? "none" : known.prefix(10).joined(separator: ", ") + (known.count > 10 ? ", …" : "")
                throw CommandFailure("no recorded session has device \(device) (the store's devices: \(listed); "
                    + "`hr-gateway sessions list` shows each session's)")
            }
        }
        let sessions = recorded.map { (startedAtMs: $0.startedAtMs, summary: $0.summary) }
        let trend = SessionTrends.days(metric, sessions: sessions, sinceMs: since, minDurationSec: minDurationSec)
        let short = SessionTrends.tooShort(metric, sessions: sessions, sinceMs: since, minDurationSec: minDurationSec)
        // On standard error, so that --json stays one array.
        if short > 0 {
            StandardStream.error.write(Data(("\(short) session\(short == 1 ? "" : "s") shorter than \(minDurationSec) s "
                + "left out (--min-duration 0 counts every one).\n").utf8))
        }
        let mixed = device == nil ? SessionTrends.severalDevices(sessions: recorded, sinceMs: since) : 0
        if mixed > 0 {
            StandardStream.error.write(Data(("\(mixed) session\(mixed == 1 ? "" : "s") had several straps: each gives "
                + "its top-level strap's value (primary_device), maybe another person's; --device ID keeps one "
                + "strap's.\n").utf8))
        }
        if json {
            print(JSONValue.array(trend.map { d in
                .object(["date": .string(d.date), "value": .double((d.value * 10).rounded() / 10),
                         "sessions": .int(Int64(d.sessions)), "unit": .string(metric.unit)])
            }).jsonString)
            return
        }
        guard let top = trend.map(\.value).max(), top > 0 else {
            let hint = metric == .rsa ? " (RSA comes from paced breathing sessions: hr-gateway breathe)" : ""
            let whose = device.map { " of device \($0)" } ?? ""
            print("No recorded session has a value for \(metric.rawValue)\(whose)"
                + "\(days.map { " in the last \($0) days" } ?? "")\(hint).")
            return
        }
        let label = "\(metric.rawValue.uppercased()) (\(metric.unit))"
        let width = max(label.count, 8)
        print("DATE        \(label.padding(toLength: width, withPad: " ", startingAt: 0))  SESSIONS")
        for d in trend {
            let bar = String(repeating: "#", count: max(1, Int((d.value / top * 40).rounded())))
            // Rounded as --json rounds it (%.1f rounds 16.649999… down where the JSON says 16.7).
            let value = String(format: "%.1f", (d.value * 10).rounded() / 10)
                .padding(toLength: width, withPad: " ", startingAt: 0)
            print("\(d.date)  \(value)  \(String(d.sessions).padding(toLength: 8, withPad: " ", startingAt: 0))  \(bar)")
        }
    }
}
