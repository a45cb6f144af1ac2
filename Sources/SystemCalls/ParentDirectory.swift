extension SystemCall {
    /// The directory part of `path`, as `NSString.deletingLastPathComponent` gives it ("" for a name without a
    /// slash, "/" for a file at the root, trailing and repeated slashes dropped), which Foundation on Linux traps on
    /// for a relative path of one character (`--output -`, `--state-dir q`: the process died of SIGILL).
    public static func parentDirectory(of path: String) -> String {
        var p = Substring(path)
        while p.count > 1, p.hasSuffix("/") { p = p.dropLast() }
        guard let slash = p.lastIndex(of: "/") else { return "" }
        var parent = p[..<slash]
        while parent.hasSuffix("/") { parent = parent.dropLast() }
        return parent.isEmpty ? "/" : String(parent)
    }
}
