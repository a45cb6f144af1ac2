import ArgumentParser
import Foundation
import SessionStore
import StdoutSink

struct SessionsDeleteCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Delete recorded sessions with their samples and events.",
        discussion: """
            A session being recorded right now cannot be deleted: stop it first.

            Each ID is a session id or its first characters (enough to name one session).

            Example:
              hr-gateway sessions delete 3f2a9c1e
            """
    )

    @Argument(help: "One or more session ids, or their first characters (see `hr-gateway sessions list`).")
    var ids: [String]

    func validate() throws {
        if ids.contains(where: { $0.trimmingCharacters(in: .whitespaces).isEmpty }) {
            throw ValidationError("A session id is empty: give one, or its first characters (see hr-gateway sessions list).")
        }
    }

    @OptionGroup var store: StoreOptions

    func run() throws {
        let sessions = try store.open()
        for given in ids {
            let id: String
            do {
                id = try sessions.resolve(given)
                try sessions.delete(id: id)
            } catch { throw CommandFailure("\(error)") }
            print("deleted \(id)")
        }
        Self.compact(sessions)
    }

    /// Gives the deleted sessions' space back to the disk, or says why not (what was deleted stays deleted).
    static func compact(_ sessions: SessionStore) {
        do {
            let (before, after) = try sessions.compact()
            if before > after {
                // On standard error: scripts read the "deleted ID" lines.
                StandardStream.error.write(Data(("note: \(sessions.databasePath) compacted: \(megabytes(before)) -> "
                    + "\(megabytes(after))\n").utf8))
            }
        } catch {
            StandardStream.error.write(Data(("note: the space is not given back to the disk yet (\(error)); later "
                + "recordings reuse it, and the next delete or prune tries again\n").utf8))
        }
    }

    static func megabytes(_ bytes: Int64) -> String { String(format: "%.1f MB", Double(bytes) / 1_000_000) }
}
