import Foundation
import SystemCalls

/// Recorded sessions offered to the dashboard (`GET /v1/sessions` and `GET /v1/sessions/ID/export`), kept abstract
/// so that the server does not depend on the session store (the gateway passes one that reads sessions.sqlite).
public protocol SessionArchive: Sendable {
    /// The newest `limit` sessions, newest first, as a JSON array text (the objects of `sessions list --json`).
    func listJSON(limit: Int) throws -> String
    /// One session in `format`; nil when there is no such session. Throws `SessionArchiveError.badFormat` for a
    /// format it does not write.
    func export(id: String, format: String) throws -> SessionArchiveFile?
}

/// An exported session: its bytes (or the file that holds them) and how a browser should save them.
public struct SessionArchiveFile: Sendable {
    public var contentType: String
    public var filename: String
    /// The export, when it is held in memory (`spool` is nil).
    public var body: [UInt8]
    /// The export, when it was written to a file as it was made; sent from there a part at a time.
    public var spool: SpooledExport?

    public init(contentType: String, filename: String, body: [UInt8]) {
        self.contentType = contentType
        self.filename = filename
        self.body = body
    }

    public init(contentType: String, filename: String, spool: SpooledExport) {
        self.contentType = contentType
        self.filename = filename
        self.body = []
        self.spool = spool
    }
}

/// An export written to an unnamed file (`O_TMPFILE` in the state directory: nothing is left behind, whatever
/// happens), so that a download never holds the export in memory: a 4-hour ECG CSV (127 MB), gathered whole, took
/// `serve` to 357 MB. The file goes when the last reference does.
public final class SpooledExport: Sendable {
    /// Read-only once made; the descriptor is closed in `deinit` only.
    private let fd: Int32
    public let size: Int

    /// An empty unnamed file in `directory`; nil when the file system has no `O_TMPFILE`.
    public static func create(in directory: String) -> Int32? { SystemCall.unnamedFile(in: directory) }

    /// Takes `fd` (written, `size` bytes) over.
    public init(fd: Int32, size: Int) {
        self.fd = fd
        self.size = size
    }

    deinit { close(fd) }

    /// Up to `count` bytes from `offset`.
    public func read(at offset: Int, count: Int) throws(SystemCallError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = out.withUnsafeMutableBytes { raw in
                SystemCall.retryingInterrupts { pread(fd, raw.baseAddress! + got, count - got, off_t(offset + got)) }
            }
            if n < 0 { throw SystemCallError(call: "pread", code: errno) }
            if n == 0 { break }
            got += n
        }
        out.removeLast(count - got)
        return out
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
