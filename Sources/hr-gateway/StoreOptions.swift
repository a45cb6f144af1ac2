import ArgumentParser
import Foundation
import SessionStore

/// Where the session database lives, shared by `stream` and `sessions`.
struct StoreOptions: ParsableArguments {
    @Option(help: ArgumentHelp(
        "State directory holding sessions.sqlite. Default: $HR_GATEWAY_STATE_DIR, else the configuration file's "
            + "state_dir, else $STATE_DIRECTORY (systemd: /var/lib/hr-gateway), else $XDG_STATE_HOME/hr-gateway, else "
            + "~/.local/state/hr-gateway.",
        valueName: "dir"))
    var stateDir: String?

    /// The resolved directory (`configured`: the configuration file's value).
    func directory(configured: String? = nil) -> String {
        StateDirectory.resolve(option: stateDir, configured: configured)
    }

    /// Opens the store, or fails with a message that says what to do.
    func open(configured: String? = nil) throws -> SessionStore {
        do { return try SessionStore(directory: directory(configured: configured)) } catch {
            throw CommandFailure("\(error)")
        }
    }
}


/// A command that could not do its job; ArgumentParser prints it as `Error: …` and exits with status 1.
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
