#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Files root makes in a state directory that another user owns (root typing `hr-gateway stream` on a Pi whose
/// service runs as `hr-gateway`, in `/var/lib/hr-gateway`) are handed to that user: left to root, they stopped the
/// service (a database it could not write, a journal it could not import, a lock it read as held).
public enum StateOwnership {
    /// As root, gives `path` to the owner of its directory, and first that directory to the owner of its parent
    /// when root made it too (`journal/`, `locks/`). Does nothing for any other user, or where root owns the state
    /// directory itself.
    public static func adopt(_ path: String) {
        guard geteuid() == 0 else { return }
        let dir = parent(path)
        var owner = stat()
        guard stat(dir, &owner) == 0 else { return }
        if owner.st_uid == 0 {
            var up = stat()
            guard stat(parent(dir), &up) == 0, up.st_uid != 0 else { return }
            _ = chown(dir, up.st_uid, up.st_gid)
            owner = up
        }
        _ = chown(path, owner.st_uid, owner.st_gid)
    }

    /// Why this user may not write the state file at `path` (it, or its directory, is another user's: the
    /// service's store, to an operator at a shell), naming the owner and how to run as them; nil when it may, or
    /// when the file's directory does not exist (nothing to name yet). SQLite says only "attempt to write a
    /// readonly database" or "unable to open database file".
    public static func unwritable(_ path: String) -> String? {
        let dir = parent(path)
        let fileExists = access(path, F_OK) == 0
        var code: Int32 = 0
        func writable(_ p: String) -> Bool {
            if access(p, W_OK) == 0 { return true }
            code = errno
            return false
        }
        let blocked = fileExists && !writable(path) ? path : !writable(dir) ? dir : nil
        guard let blocked, access(dir, F_OK) == 0 else { return nil }
        // No user may write a read-only file system (root neither): who owns the file is not the problem.
        if code == EROFS {
            return "\(blocked) is on a read-only file system: remount it read-write, or give a state directory on "
                + "another one (--state-dir, HR_GATEWAY_STATE_DIR)"
        }
        var st = stat()
        guard stat(blocked, &st) == 0 else { return nil }
        let owner = name(st.st_uid)
        let me = name(geteuid())
        let run = st.st_uid == 0 ? "as root (sudo hr-gateway …)" : "as \(owner) (sudo -u \(owner) hr-gateway …) or as root"
        let what = blocked == path ? "\(path) is" : "its directory, \(dir), is"
        return "\(what) \(owner)'s and this user (\(me)) may not write it: run the command \(run)"
    }

    /// Why this user may not read the state file at `path` ("it is root's, …": its owner and group, and how to get
    /// in), or nil when it
    /// may, or the file is not there. State files are 0640: a user outside the owner's group is refused.
    public static func unreadable(_ path: String) -> String? {
        guard access(path, F_OK) == 0, access(path, R_OK) != 0, errno == EACCES else { return nil }
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        let owner = name(st.st_uid)
        let group = getgrgid(st.st_gid).map { String(cString: $0.pointee.gr_name) } ?? "gid \(st.st_gid)"
        let me = name(geteuid())
        let mode = String(st.st_mode & 0o777, radix: 8)
        return "it is \(owner)'s, readable by the group \(group) (mode \(mode)), and this user (\(me)) is not in it: "
            + "run the command as \(owner == "root" ? "root" : "\(owner) (sudo -u \(owner) hr-gateway …) or as root"), or add "
            + "\(me) to the group (sudo usermod -aG \(group) \(me), then log in again)"
    }

    private static func name(_ uid: uid_t) -> String {
        getpwuid(uid).map { String(cString: $0.pointee.pw_name) } ?? "uid \(uid)"
    }

    private static func parent(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}
