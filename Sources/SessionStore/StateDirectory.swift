import Foundation
import SystemCalls

/// Where hr-gateway keeps its state (the session database): the first of
/// `--state-dir`, `HR_GATEWAY_STATE_DIR`, the configuration file's `state_dir`, systemd's `STATE_DIRECTORY`
/// (set by `StateDirectory=` in the service unit: `/var/lib/hr-gateway`), the service's `/var/lib/hr-gateway` for
/// its owner and root when it exists, `$XDG_STATE_HOME/hr-gateway`, `~/.local/state/hr-gateway`.
public enum StateDirectory {
    /// Resolves the directory. The environment, the service's directory and the user are passed in (tests); the
    /// service's directory is looked at with `stat`.
    /// The installed service's state directory (systemd's `StateDirectory=hr-gateway`).
    public static let serviceDirectory = "/var/lib/hr-gateway"

    /// `service` (the installed service's state directory) is the default, after systemd's `$STATE_DIRECTORY`, for
    /// its owner (`sudo -u hr-gateway …`) and for root, when it exists: a command typed by hand on the service's
    /// machine reaches the service's tokens and sessions (it used `~/.local/state/hr-gateway`: a token created there
    /// was refused by the service, and `doctor` checked a directory the service does not use).
    public static func resolve(
        option: String? = nil,
        configured: String? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        service: String = serviceDirectory,
        euid: uid_t = geteuid()
    ) -> String {
        // A "~" the shell left alone (quoted, after "=", or in a unit's Environment=) means the home directory, not a
        // directory named "~" under the current one.
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        func expanded(_ path: String) -> String {
            path == "~" ? home : path.hasPrefix("~/") ? home + path.dropFirst() : path
        }
        if let option, !option.isEmpty { return expanded(option) }
        if let env = environment["HR_GATEWAY_STATE_DIR"], !env.isEmpty { return expanded(env) }
        if let configured, !configured.isEmpty { return configured }
        // systemd may list several directories separated by colons; ours is the first.
        if let systemd = environment["STATE_DIRECTORY"]?.split(separator: ":").first, !systemd.isEmpty {
            return String(systemd)
        }
        var st = stat()
        if stat(service, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR, euid == 0 || euid == st.st_uid { return service }
        if let xdg = environment["XDG_STATE_HOME"], xdg.hasPrefix("/") { return xdg + "/hr-gateway" }
        return home + "/.local/state/hr-gateway"
    }

    /// Why this user cannot look into `directory` although it exists (the service's, mode 0750, to another user), for
    /// reading commands that would otherwise report it as empty ("No sessions", "no tokens"); nil when it can, or when
    /// it does not exist.
    public static func unreadable(_ directory: String) -> String? {
        var st = stat()
        guard stat(directory, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR, access(directory, R_OK | X_OK) != 0 else {
            return nil
        }
        let reason = String(cString: strerror(errno))
        let owner = getpwuid(st.st_uid).map { String(cString: $0.pointee.pw_name) } ?? "uid \(st.st_uid)"
        return "cannot read \(directory) (\(reason)): it is \(owner)'s; run the command as "
            + (st.st_uid == 0 ? "root" : "\(owner) (sudo -u \(owner) hr-gateway …) or as root")
    }

    /// Why `directory` cannot exist (a part of its path is a file), for reading commands that would otherwise report
    /// an impossible directory as merely empty; nil when it exists or could be created.
    public static func impossibility(_ directory: String) -> String? {
        let existing = nearestExisting(directory)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: existing, isDirectory: &isDirectory), !isDirectory.boolValue else {
            return nil
        }
        return "\(directory) cannot be a directory: \(existing) is a file"
    }

    /// The deepest part of `path` that exists: `path` itself when it does, else its nearest existing parent ("." for a
    /// relative path none of whose parts exist).
    public static func nearestExisting(_ path: String) -> String {
        var path = path
        while !path.isEmpty, path != "/", path != ".", !FileManager.default.fileExists(atPath: path) {
            path = SystemCall.parentDirectory(of: path)
        }
        return path.isEmpty ? "." : path
    }
}
