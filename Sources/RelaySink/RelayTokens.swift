import Crypto
import Foundation
import GatewayEngine

/// What a token may do on the relay.
public enum RelayScope: String, Sendable, Codable, Equatable {
    /// Receive events and send `get_status`, `hello`, `ack`.
    case read
    /// Also `start_session`, `stop_session`, `ingest_hsi_metrics`.
    case control
}

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

/// Who is connected: the identity a reliable-delivery cursor is kept under.
public struct RelayPrincipal: Sendable, Equatable, Hashable {
    /// Token id, or `anonymous` in loopback dev mode.
    public var consumerId: String
    public var name: String
    public var scope: RelayScope

    public init(consumerId: String, name: String, scope: RelayScope) {
        self.consumerId = consumerId
        self.name = name
        self.scope = scope
    }

    /// The principal of loopback dev mode (no token).
    public static let anonymous = RelayPrincipal(consumerId: "anonymous", name: "anonymous", scope: .control)
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
public final class RelayTokenStore: Sendable {
    public let directory: String
    public var path: String { directory + "/tokens.json" }
    private let cache: Locked<[RelayTokenRecord]?> = Locked(nil)

    public init(directory: String) { self.directory = directory }

    /// All records, re-read from disk (another process may have created or revoked one).
    public func list() throws(RelayTokenStoreError) -> [RelayTokenRecord] {
        let records = try load()
        cache.withLock { $0 = records }
        return records
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
        var records = try load()
        records.append(record)
        try save(records)
        return (token, record)
    }

    /// Removes the token whose id (or unique id prefix, or name) matches; returns the removed record.
    public func revoke(_ key: String) throws(RelayTokenStoreError) -> RelayTokenRecord {
        var records = try load()
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

    /// The principal for a presented token, or nil. Reads the file when it changed on disk since the last lookup.
    public func authenticate(_ token: String) -> RelayPrincipal? {
        let records = (try? load()) ?? cache.withLock { $0 } ?? []
        let presented = Array(SHA256.hash(data: Array(token.utf8)))
        var found: RelayTokenRecord?
        for r in records {
            guard let stored = Self.hexBytes(r.sha256) else { continue }
            if Self.constantTimeEqual(stored, presented) && found == nil { found = r }
        }
        return found.map { RelayPrincipal(consumerId: $0.id, name: $0.name, scope: $0.scope) }
    }

    // MARK: File

    private func load() throws(RelayTokenStoreError) -> [RelayTokenRecord] {
        guard FileManager.default.fileExists(atPath: path) else { return [] }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw RelayTokenStoreError("Cannot read \(path): check its permissions.")
        }
        do {
            return try JSONDecoder().decode([RelayTokenRecord].self, from: data)
        } catch {
            throw RelayTokenStoreError("\(path) is not a token file (\(error)); move it away to start afresh.")
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
            guard FileManager.default.createFile(atPath: tmp, contents: data, attributes: [.posixPermissions: 0o600]) else {
                throw RelayTokenStoreError("Cannot write \(tmp): check that \(directory) is writable.")
            }
            if rename(tmp, path) != 0 {
                throw RelayTokenStoreError("Cannot replace \(path): \(String(cString: strerror(errno))).")
            }
        } catch let e as RelayTokenStoreError {
            throw e
        } catch {
            throw RelayTokenStoreError("Cannot write \(path): \(error).")
        }
        cache.withLock { $0 = records }
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
