import Crypto
import Foundation
import GatewayEngine
import GatewayStorage
import RelayCore

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
    public init(
        directory: String,
        readFile: @escaping @Sendable (String) -> [UInt8]? = { FileManager.default.contents(atPath: $0).map { [UInt8]($0) } }
    ) {
        self.directory = directory
        self.readFile = readFile
    }

    /// All records as the file holds them now (another process may have created or revoked one); read again only
    /// when the file changed since it was last read.
    public func list() throws(RelayTokenStoreError) -> [RelayTokenRecord] {
        try current()
    }

    /// Creates a token and returns its secret text (shown once) and its record.
    public func create(name: String, scope: RelayScope, nowMs: Int64) throws(RelayTokenStoreError)
        -> (token: String, record: RelayTokenRecord)
    {
        var bytes = [UInt8](repeating: 0, count: 32)
        var rng = SystemRandomNumberGenerator()
        for i in bytes.indices { bytes[i] = UInt8.random(in: 0...255, using: &rng) }
        let token = "hrg_" + Self.base64url(bytes)
        let hash = Self.sha256Hex(token)
        let record = RelayTokenRecord(
            id: String(hash.prefix(12)), name: name, scope: scope, sha256: hash, createdAtMs: nowMs)
        var records = try load().records
        records.append(record)
        try save(records)
        return (token, record)
    }

    /// Removes the token whose id (or unique id prefix, or name) matches; returns the removed record.
    public func revoke(_ key: String) throws(RelayTokenStoreError) -> RelayTokenRecord {
        var records = try load().records
        let matches = records.indices.filter { records[$0].id.hasPrefix(key) || records[$0].name == key }
        guard !key.isEmpty, let first = matches.first else {
            throw RelayTokenStoreError("No token with id or name '\(key)'; `hr-gateway token list` shows them.")
        }
        guard matches.count == 1 else {
            throw RelayTokenStoreError("'\(key)' matches \(matches.count) tokens; give more of the id.")
        }
        let removed = records.remove(at: first)
        try save(records)
        return removed
    }

    /// The principal for a presented token, or nil. Costs a `stat`; reads the file only when it changed on disk
    /// since it was last read. A file that cannot be read or decoded keeps the records last read.
    public func authenticate(_ token: String) -> RelayPrincipal? {
        let records = (try? current()) ?? cache.withLock { $0?.records } ?? []
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

    private func save(_ records: [RelayTokenRecord]) throws(RelayTokenStoreError) {
        do {
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            let data = try encoder.encode(records)
            let tmp = path + ".tmp"
            unlink(tmp)  // a leftover keeps its own mode through O_TRUNC; a new file gets 0600
            do { try FileWrite.write(data, to: tmp, mode: 0o600) } catch {
                throw RelayTokenStoreError("Cannot save the tokens: \(error.description).")
            }
            if rename(tmp, path) != 0 {
                throw RelayTokenStoreError("Cannot replace \(path): \(String(cString: strerror(errno))).")
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
