import ArgumentParser
import Foundation
import Synchronization
import GatewayConfig
import GatewayEngine
import GatewayLogging
import GatewayStorage
import Logging
import SessionStore
import StdoutSink
import SystemCalls

/// The state directory (sessions, relay tokens and outbox, webhook outbox), the configuration file and the log level,
/// shared by every command that keeps state.
struct StoreOptions: ParsableArguments {
    @Option(help: ArgumentHelp(
        "State directory (sessions.sqlite, tokens.json, relay.sqlite, outbox.sqlite, tls/). Default: $HR_GATEWAY_STATE_DIR, else the configuration file's "
            + "state_dir, else $STATE_DIRECTORY (systemd: /var/lib/hr-gateway), else $XDG_STATE_HOME/hr-gateway, else "
            + "~/.local/state/hr-gateway.",
        valueName: "dir"))
    var stateDir: String?

    @Option(help: ArgumentHelp(
        "Configuration file. Default: $HR_GATEWAY_CONFIG, else ~/.config/hr-gateway/hr-gateway.toml, else "
            + "/etc/hr-gateway/hr-gateway.toml, when present.",
        valueName: "file"))
    var config: String?

    @Option(help: ArgumentHelp(
        "Log level: trace, debug, info, notice, warning, error or critical. Default: $HR_GATEWAY_LOG_LEVEL, else the "
            + "configuration's log_level, else info. Logs go to standard error (with <N> priorities under systemd).",
        valueName: "level"))
    var logLevel: LogLevelSetting?

    func validate() throws {
        if stateDir?.isEmpty == true {
            throw ValidationError("--state-dir is empty: give a directory, or leave the option out for the default.")
        }
    }

    /// The configuration file (if any) with the environment applied over it; its warnings go to standard error.
    func settings() throws -> GatewayConfiguration {
        var c = GatewayConfiguration()
        if let path = GatewayConfiguration.locate(explicit: config) {
            do {
                let (loaded, warnings) = try GatewayConfiguration.load(path: path)
                // Read while the options are validated and again to run: each warning is said once.
                for w in warnings where Self.warned.withLock({ $0.insert(w).inserted }) {
                    Logger(label: "hr-gateway").warning("\(w)")
                }
                c = loaded
            } catch { throw CommandFailure("\(error) (check it with `hr-gateway config check \(path)`)") }
        }
        do { try c.applyEnvironment(ProcessInfo.processInfo.environment) } catch { throw CommandFailure("\(error)") }
        if let logLevel { c.logLevel = logLevel }
        Self.bootstrapLogging(c.logLevel)
        return c
    }

    private static let bootstrapped = Locked(false)
    private static let warned = Locked(Set<String>())

    /// Installs the log handler once per process at `level`.
    static func bootstrapLogging(_ level: LogLevelSetting) {
        let first = bootstrapped.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        guard first else { return }
        GatewayLogHandler.bootstrap(level: Logger.Level(rawValue: level.rawValue) ?? .info)
    }

    /// The resolved state directory.
    /// The state directory. Given by --state-dir or HR_GATEWAY_STATE_DIR, it needs no configuration file: a file
    /// with an error (being edited) does not keep an operator from revoking a token or listing sessions.
    func directory() throws -> String {
        if stateDir?.isEmpty == false || ProcessInfo.processInfo.environment["HR_GATEWAY_STATE_DIR"]?.isEmpty == false {
            // Not read, so not refused; but a file named on the command line that is not there is a mistake worth
            // a word (it was ignored in silence).
            if let config, !FileManager.default.fileExists(atPath: config), Self.warned.withLock({ $0.insert(config).inserted }) {
                let by = stateDir?.isEmpty == false ? "--state-dir" : "HR_GATEWAY_STATE_DIR"
                StandardStream.error.write(Data(("warning: --config \(config): no such file; not needed "
                    + "here, as \(by) gives the state directory\n").utf8))
            }
            return StateDirectory.resolve(option: stateDir)
        }
        return StateDirectory.resolve(option: stateDir, configured: try settings().stateDir)
    }

    /// The state directory, reading the configuration file without printing its warnings or failing on its errors
    /// (for checks made before the command runs; `settings()` reports them then).
    func quietDirectory() -> String {
        let file = GatewayConfiguration.locate(explicit: config).flatMap { try? GatewayConfiguration.load(path: $0).0 }
        return StateDirectory.resolve(option: stateDir, configured: file?.stateDir)
    }

    /// The session store's recorder for a session, after deleting sessions older than `keepDays` (default: the
    /// configuration's). On failure, says so once and returns nil: the session runs unrecorded. A session id already
    /// in the store is refused (thrown) before anything starts: a session the user named is one they mean to keep.
    func recorder(
        _ config: SessionConfig, _ settings: GatewayConfiguration, keepDays: Int? = nil,
        clock: any SessionClock = SystemSessionClock()
    ) throws(CommandFailure) -> SessionRecorder? {
        let logger = Logger(label: "hr-gateway")
        let report: @Sendable (String) -> Void = { logger.warning("\($0)") }
        let sessions: SessionStore
        let dir = StateDirectory.resolve(option: stateDir, configured: settings.stateDir)
        do { sessions = try SessionStore(directory: dir) } catch {
            // A damaged file is no permission problem: say how to start afresh without losing what it holds.
            let damaged = StateDatabase.isDamage("\(error)")
            let why = "\(error)" + (damaged
                ? " (the file is damaged: `hr-gateway doctor` says how to move it aside and recover its sessions)" : "")
            // A session of this id already waits in its journal: the same refusal as a healthy store's (the second
            // journal could not be made, and the session ran unrecorded after an "ok").
            let waiting = SessionStore.journalPath(directory: dir, sessionId: config.sessionId)
            if FileManager.default.fileExists(atPath: waiting) {
                throw CommandFailure("session \(config.sessionId) is already recorded, in its journal \(waiting), which "
                    + "waits for the session store (\(why)): choose another --session-id")
            }
            // The journal alone keeps the session until the store opens again. Its own failure to start is said
            // after the store's, which is the cause.
            let started = Mutex(false)
            let before = Mutex<String?>(nil)
            let journaling = SessionRecorder(journalingOnlyIn: dir, config: config, clock: clock) { message in
                if started.withLock({ $0 }) { report(message) } else { before.withLock { $0 = $0 ?? message } }
            }
            started.withLock { $0 = true }
            guard journaling.isJournalingOnly, let journal = journaling.journalPath else {
                let own = before.withLock { $0 }.map { "; nor into its journal: \($0)" } ?? ""
                report("not recording this session: \(why)\(own)")
                return nil
            }
            report("the session store cannot be opened: \(why); recording this session into its journal, \(journal), "
                + "which the first hr-gateway command to open the store once it can imports as a session of its own")
            return journaling
        }
        if (try? sessions.session(id: config.sessionId)) != nil {
            throw CommandFailure("session \(config.sessionId) is already in the store (\(dir)): choose another "
                + "--session-id, or delete it first with hr-gateway sessions delete \(config.sessionId)")
        }
        if let keepDays = keepDays ?? settings.keepDays, keepDays > 0 {
            do {
                let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
                let outcome = try sessions.prune(
                    keepDays: keepDays, nowMs: nowMs, clockSynchronized: SystemCall.clockIsSynchronized())
                let deleted = outcome.deleted
                if let held = outcome.held { logger.warning("\(held)") }
                if let kept = outcome.kept { logger.warning("\(kept)") }
                if !deleted.isEmpty {
                    let shown = deleted.count <= 5 ? deleted.joined(separator: ", ")
                        : deleted.prefix(5).joined(separator: ", ") + " and \(deleted.count - 5) more"
                    let what = "deleted \(deleted.count) session\(deleted.count == 1 ? "" : "s") started more than "
                        + "\(keepDays) day\(keepDays == 1 ? "" : "s") ago (keep_days): \(shown)"
                    logger.info("\(what)")
                }
            } catch { report("could not delete old sessions: \(error)") }
        }
        let recorder = SessionRecorder(store: sessions, config: config, clock: clock, onFailure: report)
        if recorder.isRecording {
            logger.debug("recording session \(config.sessionId) into \(sessions.databasePath)")
        }
        return recorder
    }

    /// Opens the store to read it, creating nothing (read-only when this user may not write it): nil when the state
    /// directory holds no store.
    func existing() throws -> SessionStore? {
        let dir = try directory()
        if let impossible = StateDirectory.impossibility(dir) { throw CommandFailure("state directory \(impossible)") }
        if let unreadable = StateDirectory.unreadable(dir) { throw CommandFailure("state directory: \(unreadable)") }
        do { return try SessionStore.existing(directory: dir).map(Self.sayJournalsLeftOut) } catch {
            // A damaged file: say where the way out is (reading commands said SQLite's words alone).
            throw CommandFailure("\(error)" + (StateDatabase.isDamage("\(error)")
                ? " (the file is damaged: `hr-gateway doctor` says how to move it aside and recover its sessions)" : ""))
        }
    }

    /// As `existing()`, failing with what to do when there is no store.
    func openForReading() throws -> SessionStore {
        guard let store = try existing() else {
            let dir = try directory()
            throw CommandFailure("No session store in \(dir)\(Self.isMissing(dir) ? ", which does not exist" : ""): "
                + "nothing has been recorded there (stream and breathe record into the state directory; --state-dir or "
                + "HR_GATEWAY_STATE_DIR chooses another).")
        }
        return store
    }

    /// What `sessions list` and `trend` say when there is no store: a directory that does not exist is named as such
    /// (a mistyped --state-dir read as "nothing recorded yet"); with `json`, said on standard error beside the `[]`.
    func sayNoStore(json: Bool) throws {
        let dir = try directory()
        if json {
            print("[]")
            if Self.isMissing(dir) {
                StandardStream.error.write(Data("warning: \(dir) does not exist: no session store there\n".utf8))
            }
        } else if Self.isMissing(dir) {
            print("No sessions: \(dir) does not exist (stream and breathe create it when they record; --state-dir or "
                + "HR_GATEWAY_STATE_DIR chooses the state directory).")
        } else {
            print("No sessions: nothing has been recorded in \(dir) yet.")
        }
    }

    static func isMissing(_ dir: String) -> Bool {
        var isDirectory: ObjCBool = false
        return !FileManager.default.fileExists(atPath: dir, isDirectory: &isDirectory)
    }

    /// Opens the store, creating it when needed, or fails with a message that says what to do.
    func open() throws -> SessionStore {
        let dir = try directory()
        do { return Self.sayJournalsLeftOut(try SessionStore(directory: dir)) } catch { throw CommandFailure("\(error)") }
    }

    /// Says on standard error each journal that no import takes (it waited for ever unseen), and returns `store`.
    static func sayJournalsLeftOut(_ store: SessionStore) -> SessionStore {
        for left in store.journalsLeftOut() {
            StandardStream.error.write(Data(("warning: journal \(left): no command shows it; it is JSON lines, one "
                + "sample or event per line, to read or move aside by hand\n").utf8))
        }
        return store
    }
}


/// A command that could not do its job; ArgumentParser prints it as `Error: …` and exits with status 1.
extension ParsableCommand {
    /// A usage error found in `run()` (after ArgumentParser has reported unknown options), said as a usage error of
    /// this command, with its own help to read: thrown from `run()`, ArgumentParser named the top level's.
    static func usageFailure(_ error: any Error) -> any Error {
        let name = "hr-gateway " + (configuration.commandName ?? "")
        StandardStream.error.write(Data(("Error: \(error)\nUsage: \(name) <options>\n  See '\(name) --help' for more "
            + "information.\n").utf8))
        return ExitCode.validationFailure
    }
}

struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension LogLevelSetting: ExpressibleByArgument {}
