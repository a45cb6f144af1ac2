import ArgumentParser
import Foundation
import SessionStore
import StdoutSink
import SystemCalls

struct SessionsPruneCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prune",
        abstract: "Delete recorded sessions that started more than N days ago.",
        discussion: """
            Sessions being recorded are kept whatever their age. `hr-gateway stream --keep-days N` (or \
            keep_days in the configuration file) does the same before each session; there 0 means keep every \
            session, so here --keep-days must be 1 or more, and --all deletes every finished session.

            Like keep_days, --keep-days counts from today when the system clock is synchronized (an NTP client \
            such as systemd-timesyncd or chrony keeps it: `timedatectl` says "System clock synchronized: yes"). \
            Otherwise the clock may be wrong (a Raspberry Pi without a real-time clock or a time service): with \
            it before 2025 (not set yet) nothing is deleted; with it later than the newest session, the days \
            count back from that session's start, and the command says how many older sessions it kept; and \
            when every session to keep started more than N days, and more than 90, after the newest one to \
            delete (a jump longer than what is kept, as a clock ahead stamps its sessions), nothing is deleted and the command says \
            so. --trust-clock counts from today by the clock anyway, when its date is right. Sessions stamped \
            before 2025 (recorded before the clock was set) have no known age and are kept (delete them by id, \
            or with --all).

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

    @Flag(name: [.customLong("trust-clock"), .customLong("across-gap")], help: "With --keep-days: count the days from today by the system clock even when it is not synchronized (no NTP client keeps it), and prune even when the sessions to keep started more than N days and 90 days after the ones to delete (a long pause, not a clock that jumped ahead).")
    var trustClock = false

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
        case (nil, true) where trustClock:
            throw ValidationError("--trust-clock goes with --keep-days: --all deletes every finished session anyway.")
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
            let outcome = try sessions.prune(
                keepDays: days, nowMs: Int64(Date().timeIntervalSince1970 * 1000),
                clockSynchronized: SystemCall.clockIsSynchronized(), trustClock: trustClock)
            if let held = outcome.held {
                throw CommandFailure(held + (held.contains("--trust-clock") ? ""
                    : "; `hr-gateway sessions prune --all` or `sessions delete ID` delete without a date"))
            }
            if let kept = outcome.kept { StandardStream.error.write(Data("warning: \(kept)\n".utf8)) }
            deleted = outcome.deleted
        }
        for id in deleted { print("deleted \(id)") }
        print("\(deleted.count) session\(deleted.count == 1 ? "" : "s") deleted")
        if !deleted.isEmpty { SessionsDeleteCommand.compact(sessions) }
    }
}
