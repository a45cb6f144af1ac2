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

    private static func parent(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}
