import ArgumentParser
import Foundation
import SessionStore

struct SessionsPruneCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prune",
        abstract: "Delete recorded sessions that started more than N days ago.",
        discussion: """
            Sessions being recorded are kept whatever their age. `hr-gateway stream --keep-days N` (or \
            keep_days in the configuration file) does the same before each session.

            Examples:
              hr-gateway sessions prune --keep-days 30
              hr-gateway sessions prune --keep-days 0      (every finished session)
            """
    )

    @Option(help: ArgumentHelp("Keep sessions that started within the last N days.", valueName: "n"))
    var keepDays: Int

    @OptionGroup var store: StoreOptions

    func validate() throws {
        if keepDays < 0 { throw ValidationError("--keep-days must be 0 or more.") }
    }

    func run() throws {
        let cutoff = Int64((Date().timeIntervalSince1970 - Double(keepDays) * 86_400) * 1000)
        let deleted = try store.open().prune(startedBeforeMs: cutoff)
        for id in deleted { print("deleted \(id)") }
        print("\(deleted.count) session\(deleted.count == 1 ? "" : "s") deleted")
    }
}
