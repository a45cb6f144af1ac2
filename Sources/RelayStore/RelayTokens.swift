import Crypto
import Foundation
import GatewayEngine
import GatewayStorage
import RelayCore
import SystemCalls

/// One stored token: only the SHA-256 of the secret is kept.
public struct RelayTokenRecord: Sendable, Codable, Equatable {
    /// The first 12 hex digits of the hash: shown by `token list`, used by `token revoke`, and the consumer's identity.
    public var id: String
    public var name: String
    public var scope: RelayScope
    /// Lowercase hex SHA-256 of the token text (UTF-8).
    public var sha256: String
    /// Unix milliseconds.
    public var createdAtMs: Int64

    enum CodingKeys: String, CodingKey {
        case id, name, scope, sha256
        case createdAtMs = "created_at_ms"
    }
}

/// A token file that cannot be read or written.
public struct RelayTokenStoreError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Tokens kept in `tokens.json` in the state directory, mode 0600, as hashes.
///
/// Lookup hashes the presented token and compares it with every stored hash in constant time, so neither the
/// position of a match nor the length of a common prefix shows in the timing.
///
/// The records are cached: a lookup costs one `stat` of the file, and the file is read and decoded again only when
/// its identity (device, inode, size, modification and change times) differs from the one last read, so another
/// process's `token create` or `token revoke` is seen at the next lookup and an unchanged file is never re-read.
public final class RelayTokenStore: Sendable {
    public let directory: String
    public var path: String { directory + "/tokens.json" }
    private let readFile: @Sendable (String) -> [UInt8]?
    private let cache = Locked<Cached?>(nil)
    /// Told once when the file cannot be read or decoded at a lookup (the records last read stay in use), and once
    /// when it can again; nil when nobody listens.
    private let warn: (@Sendable (String) -> Void)?
    private let lastFailure = Locked<String?>(nil)

    /// What the cached records were decoded from.
    struct FileIdentity: Equatable, Sendable {
        var device: UInt64
        var inode: UInt64
        var size: Int64
        var modified: timespec
        var changed: timespec

        static func == (a: Self, b: Self) -> Bool {
            a.device == b.device && a.inode == b.inode && a.size == b.size
                && a.modified.tv_sec == b.modified.tv_sec && a.modified.tv_nsec == b.modified.tv_nsec
                && a.changed.tv_sec == b.changed.tv_sec && a.changed.tv_nsec == b.changed.tv_nsec
        }
    }

    private struct Cached: Sendable {
        /// nil: the file did not exist.
        var identity: FileIdentity?
        var records: [RelayTokenRecord]
    }

    /// - Parameter readFile: reads a whole file (nil when it cannot); injected by tests to count reads.
    /// - Parameter warn: told (once per distinct failure) when a lookup cannot read the file, so that a gateway says
    ///   so in its log instead of going on with a stale set in silence.
    public init(
        directory: String,
        readFile: @escaping @Sendable (String) -> [UInt8]? = { FileManager.default.contents(atPath: $0).map { [UInt8]($0) } },
        warn: (@Sendable (String) -> Void)? = nil
    ) {
        self.directory = directory
        self.readFile = readFile
        self.warn = warn
    }

    /// All records as the file holds them now (another process may have created or revoked one); read again only
    /// when the file changed since it was last read.
    public func list() throws(RelayTokenStoreError) -> [RelayTokenRecord] {
        try current()
    }

    /// Creates a token and returns its secret text (shown once) and its record.
    /// Makes a token named `name` (refused when another token has that name); with `numbered`, a name in use gets
    /// the first free number instead (`consumer-2`), for a default name nobody chose.
    public func create(name: String, scope: RelayScope, nowMs: Int64, numbered: Bool = false)
        throws(RelayTokenStoreError) -> (token: String, record: RelayTokenRecord)
    {
        var bytes = [UInt8](repeating: 0, count: 32)
        var rng = SystemRandomNumberGenerator()
        for i in bytes.indices { bytes[i] = UInt8.random(in: 0...255, using: &rng) }
        let token = "hrg_" + Self.base64url(bytes)
        let hash = Self.sha256Hex(token)
        if let problem = Self.nameProblem(name) { throw RelayTokenStoreError(problem) }
        let record = try changing { records throws(RelayTokenStoreError) -> RelayTokenRecord in
            var chosen = name
            // A name is how `token revoke` and the logs tell tokens apart: two tokens of one name could be revoked
            // only by id, and the log would not say which one connected.
            if let other = records.first(where: { $0.name == name }) {
                guard numbered else {
                    throw RelayTokenStoreError("A token named '\(name)' exists already (id \(other.id)). Choose "
                        + "another name, or replace it: `hr-gateway token revoke \(name)` first.")
                }
                let names = Set(records.map(\.name))
                chosen = (2...).lazy.map { "\(name)-\($0)" }.first { !names.contains($0) }!
            }
            let record = RelayTokenRecord(
                id: String(hash.prefix(12)), name: chosen, scope: scope, sha256: hash, createdAtMs: nowMs)
            records.append(record)
            return record
        }
        return (token, record)
    }

    /// Why `name` cannot name a token (nil: it can): it is shown in `token list` and the log, and typed to revoke.
    public static func nameProblem(_ name: String) -> String? {
        if name.trimmingCharacters(in: .whitespaces).isEmpty {
            return "A token needs a name (--name phone, for example): `token revoke` and the log name tokens by it."
        }
        if name.unicodeScalars.contains(where: { s in
            s.properties.generalCategory == .control || (s.properties.isWhitespace && s != " ")
        }) {
            return "A token's name cannot hold a control character or a line or tab break: it is one line of `token list`."
        }
        if name.first == " " || name.last == " " {
            return "A token's name cannot begin or end with a space (`token revoke` would need it typed exactly)."
        }
        if name.count > 64 { return "A token's name is at most 64 characters (this one has \(name.count))." }
        return nil
    }

    /// Removes the token whose id (or unique id prefix, or name) matches; returns the removed record.
    public func revoke(_ key: String) throws(RelayTokenStoreError) -> RelayTokenRecord {
        try changing { records throws(RelayTokenStoreError) in
            // A whole id first, then a name, then a unique id prefix: a name that happens to begin another token's id
            // still revokes its own token.
            let exact = records.indices.filter { records[$0].id == key }
            let named = records.indices.filter { records[$0].name == key }
            let prefixed = records.indices.filter { records[$0].id.hasPrefix(key) }
            let matches = !exact.isEmpty ? exact : !named.isEmpty ? named : prefixed
            guard !key.isEmpty, let first = matches.first else {
                throw RelayTokenStoreError("No token with id or name '\(key)'; `hr-gateway token list` shows them.")
            }
            guard matches.count == 1 else {
                throw RelayTokenStoreError("'\(key)' begins the ids of \(matches.count) tokens; give more of the id.")
            }
            return records.remove(at: first)
        }
    }

    /// Reads, changes and writes the file back while holding an exclusive `flock` on the state directory, so that
    /// two token commands at once (two administrators, a provisioning loop) do not write over each other's change: a
    /// revocation reported as done was undone, and a token printed was never stored.
    private func changing<T>(_ change: (inout [RelayTokenRecord]) throws(RelayTokenStoreError) -> T)
        throws(RelayTokenStoreError) -> T
    {
        do {
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw RelayTokenStoreError("Cannot create \(directory): \(error.localizedDescription).")
        }
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else {
            throw RelayTokenStoreError("Cannot open \(directory): \(String(cString: strerror(errno))).")
        }
        defer { close(fd) }
        guard SystemCall.retryingInterrupts({ flock(fd, LOCK_EX) }) == 0 else {
            throw RelayTokenStoreError("Cannot lock \(directory): \(String(cString: strerror(errno))).")
        }
        var records = try load().records
        let result = try change(&records)
        try save(records)
        return result
    }

    /// The principal for a presented token, or nil. Costs a `stat`; reads the file only when it changed on disk
    /// since it was last read. A file that cannot be read or decoded keeps the records last read, and is said once
    /// through `warn`.
    public func authenticate(_ token: String) -> RelayPrincipal? {
        let read: [RelayTokenRecord]?
        do {
            read = try current()
            if lastFailure.withLock({ f in defer { f = nil }; return f != nil }) {
                warn?("\(path) is readable again: its tokens count from now on")
            }
        } catch {
            read = nil
            let message = error.description
            if lastFailure.withLock({ f in defer { f = message }; return f != message }) {
                // Said as it is: with none ever read, "the tokens last read stay in use" was false.
                let kept = cache.withLock { $0 != nil }
                    ? "The tokens last read stay in use: a token created or revoked since does not count until the "
                        + "file can be read."
                    : "No token was ever read from it: every consumer is refused (401) until it can be."
                warn?("\(message) \(kept)")
            }
        }
        let records = read ?? cache.withLock { $0?.records } ?? []
        let presented = Array(SHA256.hash(data: Array(token.utf8)))
        var found: RelayTokenRecord?
        for r in records {
            guard let stored = Self.hexBytes(r.sha256) else { continue }
            if Self.constantTimeEqual(stored, presented) && found == nil { found = r }
        }
        return found.map { RelayPrincipal(consumerId: $0.id, name: $0.name, scope: $0.scope) }
    }

    /// The cached records when the file is unchanged, else the file read again (and cached).
    private func current() throws(RelayTokenStoreError) -> [RelayTokenRecord] {
        let identity = Self.identity(of: path)
        if let cached = cache.withLock({ $0 }), cached.identity == identity { return cached.records }
        let loaded = try load()
        cache.withLock { $0 = loaded }
        return loaded.records
    }

    /// The identity of the file at `path`, nil when there is none.
    static func identity(of path: String) -> FileIdentity? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return FileIdentity(
            device: UInt64(st.st_dev), inode: UInt64(st.st_ino), size: Int64(st.st_size),
            modified: st.st_mtim, changed: st.st_ctim)
    }

    // MARK: File

    /// Reads and decodes the file, with the identity it had before the read (so that a change during the read is
    /// seen at the next lookup).
    private func load() throws(RelayTokenStoreError) -> Cached {
        guard let identity = Self.identity(of: path) else { return Cached(identity: nil, records: []) }
        guard let bytes = readFile(path) else {
            throw RelayTokenStoreError("Cannot read \(path): check its permissions.")
        }
        do {
            return Cached(identity: identity, records: try JSONDecoder().decode([RelayTokenRecord].self, from: Data(bytes)))
        } catch {
            throw RelayTokenStoreError(
                "\(path) is not a token file (\(Self.reason(error))); move it away to start afresh.")
        }
    }

    /// What is wrong with the file, in a few words rather than a decoder's dump.
    private static func reason(_ error: any Error) -> String {
        func at(_ path: [any CodingKey]) -> String {
            path.isEmpty ? "" : " at " + path.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
        }
        switch error as? DecodingError {
        case .dataCorrupted(let c)? where c.codingPath.isEmpty: return "not valid JSON"
        case .dataCorrupted(let c)?: return "an unreadable value" + at(c.codingPath)
        case .keyNotFound(let key, let c)?: return "no \"\(key.stringValue)\"" + at(c.codingPath)
        case .typeMismatch(_, let c)?, .valueNotFound(_, let c)?: return "a value of the wrong kind" + at(c.codingPath)
        default: return "\(error)"
        }
    }

    /// Writes the records to a temporary file of this process and renames it over the file. The new file keeps the
    /// old one's owner, group and mode, or, when there was none, takes the state directory's owner and group: root
    /// changing the tokens of a service's directory (`sudo hr-gateway token revoke`) left a file owned by root, mode
    /// 0600, that the service could no longer read (it went on with its old set; after a restart it refused every
    /// token).
    private func save(_ records: [RelayTokenRecord]) throws(RelayTokenStoreError) {
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            let data = try encoder.encode(records)
            let tmp = path + ".tmp.\(getpid())"
            unlink(tmp)  // a leftover keeps its own mode through O_TRUNC; a new file gets 0600
            do { try FileWrite.write(data, to: tmp, mode: 0o600) } catch {
                throw RelayTokenStoreError("Cannot save the tokens: \(error.description).")
            }
            var old = stat()
            var dir = stat()
            if stat(path, &old) == 0 {
                _ = chown(tmp, old.st_uid, old.st_gid)  // as root; otherwise the owner already is this user
                _ = chmod(tmp, old.st_mode & 0o777)
            } else if stat(directory, &dir) == 0, dir.st_uid != geteuid() {
                _ = chown(tmp, dir.st_uid, dir.st_gid)
            }
            if rename(tmp, path) != 0 {
                let reason = String(cString: strerror(errno))
                unlink(tmp)
                throw RelayTokenStoreError("Cannot replace \(path): \(reason).")
            }
        } catch let e as RelayTokenStoreError {
            throw e
        } catch {
            throw RelayTokenStoreError("Cannot write \(path): \(error).")
        }
        // Read back at the next lookup: stat-ing the file here could see another process's newer file.
        cache.withLock { $0 = nil }
    }

    // MARK: Helpers

    static func sha256Hex(_ text: String) -> String {
        SHA256.hash(data: Array(text.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    static func hexBytes(_ hex: String) -> [UInt8]? {
        let chars = Array(hex.utf8)
        guard chars.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count / 2)
        var i = 0
        while i < chars.count {
            guard let hi = nibble(chars[i]), let lo = nibble(chars[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Equal length and equal bytes, in time that depends only on the length.
    public static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var diff: UInt8 = 0
        for i in a.indices { diff |= a[i] ^ b[i] }
        return diff == 0
    }

    static func base64url(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
