/// Recorded sessions offered to the dashboard (`GET /v1/sessions` and `GET /v1/sessions/ID/export`), kept abstract
/// so that the server does not depend on the session store (the gateway passes one that reads sessions.sqlite).
public protocol SessionArchive: Sendable {
    /// The newest `limit` sessions, newest first, as a JSON array text (the objects of `sessions list --json`).
    func listJSON(limit: Int) throws -> String
    /// One session in `format`; nil when there is no such session. Throws `SessionArchiveError.badFormat` for a
    /// format it does not write.
    func export(id: String, format: String) throws -> SessionArchiveFile?
}

/// An exported session: its bytes and how a browser should save them.
public struct SessionArchiveFile: Sendable {
    public var contentType: String
    public var filename: String
    public var body: [UInt8]
    public init(contentType: String, filename: String, body: [UInt8]) {
        self.contentType = contentType
        self.filename = filename
        self.body = body
    }
}

public enum SessionArchiveError: Error, Sendable, CustomStringConvertible {
    case badFormat(String, supported: [String])
    /// The session holds nothing of what the format exports (no raw ECG for ecg-csv): why, and how it is recorded.
    case nothingToExport(String)
    public var description: String {
        switch self {
        case .badFormat(let f, let supported):
            "No export format \"\(f.prefix(20))\": use format=\(supported.joined(separator: ", format="))."
        case .nothingToExport(let why): why.prefix(1).uppercased() + why.dropFirst() + "."
        }
    }
}
