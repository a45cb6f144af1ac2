import ArgumentParser
import Foundation
import SessionStore

struct SessionsPruneCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prune",
        abstract: "Delete recorded sessions that started more than N days ago.",
        discussion: """
            Sessions being recorded are kept whatever their age. `hr-gateway stream --keep-days N` (or \
            keep_days in the configuration file) does the same before each session; there 0 means keep every \
            session, so here --keep-days must be 1 or more, and --all deletes every finished session.

            Like keep_days, --keep-days counts on a clock that may be wrong (a Raspberry Pi without a real-time \
            clock): with the clock before 2025 (not set yet) nothing is deleted; with it ahead of the newest \
            session, the days count back from that session's start; and sessions stamped before 2025 (recorded \
            before the clock was set) have no known age and are kept (delete them by id, or with --all). A \
            clock ahead also stamps the sessions recorded on it: when every session to keep started more than N \
            days after the newest one to delete (a jump longer than what is kept), nothing is deleted and the \
            command says so; --across-gap deletes anyway, when those dates are right (a long pause).

            Examples:
              hr-gateway sessions prune --keep-days 30
              hr-gateway sessions prune --all              (every finished session)
            """
    )

    @Option(parsing: .unconditional, help: ArgumentHelp(
        "Keep sessions that started within the last N days (1 or more).", valueName: "n"))
    var keepDays: Int?

    @Flag(help: "Delete every finished session, whatever its age.")
    var all = false

    @Flag(help: "With --keep-days: prune even when the sessions to keep started more than N days after the ones to delete (the dates are right: a long pause, not a clock that jumped ahead).")
    var acrossGap = false

    @OptionGroup var store: StoreOptions

    func validate() throws {
        switch (keepDays, all) {
        case (nil, false):
            throw ValidationError("Say which sessions to delete: --keep-days N (older than N days) or --all.")
        case (_?, true):
            throw ValidationError("--keep-days and --all cannot go together: --all deletes every finished session.")
        case (let k?, false) where k == 0:
            throw ValidationError("--keep-days 0 would delete every finished session, while 0 means \"keep every "
                + "session\" for stream --keep-days and keep_days. Use --all to delete every finished session.")
        case (let k?, false) where k < 0:
            throw ValidationError("--keep-days must be 1 or more (got \(k)).")
        case (nil, true) where acrossGap:
            throw ValidationError("--across-gap goes with --keep-days: --all deletes every finished session anyway.")
        default:
            break
        }
    }

    /// More days than any clock has counted since 1970: the same as any larger number.
    static let maxDays = 1_000_000

    func run() throws {
        // --all is every finished session, also one whose start is after the clock's now (a clock set back since,
        // as NTP does to a Pi that booted without the time, or a fast replay's session on a loaded machine).
        // Any number of days past the epoch keeps everything (and 10^12 days overflowed the milliseconds: a crash).
        let days = min(keepDays ?? 0, Self.maxDays)
        let sessions = try store.open()
        let deleted: [String]
        if all {
            deleted = try sessions.prune(startedBeforeMs: .max)
        } else {
            // keep_days' rule: a clock not set, or ahead, deleted sessions of every age.
            let held: String?
            (deleted, held) = try sessions.prune(keepDays: days, nowMs: Int64(Date().timeIntervalSince1970 * 1000),
                                                 acrossGap: acrossGap)
            if let held {
                throw CommandFailure(held + (held.contains("--across-gap") ? ""
                    : "; `hr-gateway sessions prune --all` or `sessions delete ID` delete without a date"))
            }
        }
        for id in deleted { print("deleted \(id)") }
        print("\(deleted.count) session\(deleted.count == 1 ? "" : "s") deleted")
        if !deleted.isEmpty { SessionsDeleteCommand.compact(sessions) }
    }
}
