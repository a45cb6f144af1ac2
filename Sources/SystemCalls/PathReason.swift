#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a path cannot be read or written, in a few words and the same words wherever it is said (a recording, a
/// configuration file, an RR series, an export), with what to do where there is something to do.
public enum PathReason {
    /// Why reading `path` failed: "no such file", "a directory, not `what`", "permission denied"; nil when it is a
    /// file this user may read (then what it holds is the problem: not UTF-8, not the expected format).
    public static func unreadable(_ path: String, notA what: String = "a file") -> String? {
        var st = stat()
        guard stat(path, &st) == 0 else {
            switch errno {
            case ENOENT: return "no such file"
            case ENOTDIR: return "a part of the path is not a directory"
            case EACCES: return "permission denied (a directory on the way cannot be entered)"
            case let code: return String(cString: strerror(code))
            }
        }
        if (st.st_mode & S_IFMT) == S_IFDIR { return "a directory, not \(what)" }
        if access(path, R_OK) != 0 { return "permission denied" }
        return nil
    }

    /// Why creating or writing `path` failed with errno `code`.
    public static func unwritable(_ path: String, code: Int32) -> String {
        let parent = path.lastIndex(of: "/").map { String(path[..<$0]) }
        let dir = parent.map { $0.isEmpty ? "/" : $0 } ?? "."
        switch code {
        case EISDIR: return "a directory: give a file name inside it"
        case ENOENT: return "the directory \(dir) does not exist"
        case ENOTDIR: return "a part of the path is not a directory"
        case EACCES, EPERM: return "permission denied (may this user write \(dir)?)"
        case ENOSPC, EDQUOT: return "\(String(cString: strerror(code))): free some space or write elsewhere"
        default: return String(cString: strerror(code))
        }
    }
}
