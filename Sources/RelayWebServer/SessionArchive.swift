import Foundation
import Synchronization
import SystemCalls

/// Recorded sessions offered to the dashboard (`GET /v1/sessions` and `GET /v1/sessions/ID/export`), kept abstract
/// so that the server does not depend on the session store (the gateway passes one that reads sessions.sqlite).
/// The server calls it from threads of its own (never the concurrency pool's), the list, plans and several exports
/// at once: an implementation must be safe to call so.
public protocol SessionArchive: Sendable {
    /// The newest `limit` sessions, newest first, as a JSON array text (the objects of `sessions list --json`); with
    /// `before` (a session's whole id), those that started before it (the next page); nil when no session has that id.
    func listJSON(limit: Int, before: String?) throws -> String?
    /// What an export of session `id` in `format` would be, found without making it (a `HEAD` needs no more, and a
    /// download's status is known before its first byte): nil when no session has that id or an id starting with it
    /// (the command line's prefixes); throws `SessionArchiveError`: `badFormat` for a format it does not write,
    /// `ambiguousId` for a prefix of several ids, `nothingToExport` for a session without what the format holds.
    func plan(id: String, format: String) throws -> ExportPlan?
    /// Writes the export `plan` names into `body` as it is made (its first bytes once every check that can refuse
    /// it has passed). False, with nothing written, when the session is gone since its plan; throws what `plan`
    /// throws; stops with `ExportBody.Cancelled` from `write` once nobody reads the export any more.
    func export(_ plan: ExportPlan, into body: ExportBody) throws -> Bool
    /// Where an export is written as it is made (an unnamed file, gone with its descriptor).
    var spoolDirectory: String { get }
}

/// One export, known before it is made: the session's whole id, the format, the media type and the name a browser
/// saves it under.
public struct ExportPlan: Sendable, Equatable {
    public var id: String
    public var format: String
    public var contentType: String
    public var filename: String

    public init(id: String, format: String, contentType: String, filename: String) {
        self.id = id
        self.format = format
        self.contentType = contentType
        self.filename = filename
    }
}

/// One export on its way from the store to a client: written to an unnamed file (`O_TMPFILE` in the archive's
/// spool directory: nothing is left behind, whatever happens) by the thread that makes it, and read from there by
/// the connection that sends it, as it grows. The client has its first bytes as soon as they are made (a 24-hour
/// JSON was made whole first, 17-40 s without a byte), and a slow client holds up neither the store nor the
/// thread: the export is made at the disk's pace, and sent at the client's. Held in memory only where the file
/// system cannot make such a file. The file goes when the last reference does.
public final class ExportBody: Sendable {
    /// How an export ended.
    public enum End: Sendable {
        case finished
        /// No such session.
        case notFound
        case failed(any Error)
    }

    /// Thrown by `write` once the export is no longer wanted (the client went, or asked for the head only).
    public struct Cancelled: Error, Sendable, CustomStringConvertible {
        public var description: String { "the export was cancelled: nobody reads it any more" }
    }

    /// What the reader sees at one moment.
    public struct Progress: Sendable {
        /// Bytes written so far.
        public var size: Int
        /// Set once the export is over.
        public var end: End?
    }

    private struct State {
        var size = 0
        /// The unnamed file, once the first bytes came (-1: none yet, or held in memory).
        var fd: Int32 = -1
        /// The bytes, where no unnamed file could be made.
        var memory: [UInt8]?
        var end: End?
        var cancelled = false
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    private let directory: String
    private let state = Mutex(State())

    public init(spoolDirectory: String) { directory = spoolDirectory }

    deinit {
        let fd = state.withLock { $0.fd }
        if fd >= 0 { close(fd) }
    }

    /// Whether nobody reads the export any more (`write` would throw `Cancelled`): a maker may stop before then.
    public var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Appends `bytes`, from the one thread that makes the export. Throws `Cancelled` once nobody reads it, and the
    /// file's error when the disk is full.
    public func write(_ bytes: [UInt8]) throws {
        let (fd, cancelled) = state.withLock { s -> (Int32, Bool) in
            if s.fd < 0, s.memory == nil, !s.cancelled {
                if let fd = SystemCall.unnamedFile(in: directory) { s.fd = fd } else { s.memory = [] }
            }
            return (s.fd, s.cancelled)
        }
        if cancelled { throw Cancelled() }
        if fd >= 0 {
            // Only this thread writes, and readers only read what `size` says is written: no lock held meanwhile.
            var failure: SystemCallError?
            bytes.withUnsafeBytes { raw in
                do throws(SystemCallError) { try SystemCall.writeAll(fd, raw) } catch { failure = error }
            }
            if let failure { throw failure }
        }
        changeAndWake { s in
            if fd < 0 { s.memory?.append(contentsOf: bytes) }
            s.size += bytes.count
        }
    }

    /// Says that the export is over (the thread that made it, once it returned or threw).
    public func end(_ end: End) {
        changeAndWake { $0.end = end }
    }

    /// Nobody reads the export any more: the next `write` throws `Cancelled`.
    public func cancel() {
        changeAndWake { $0.cancelled = true }
    }

    /// Returns once more than `offset` bytes are written, or the export is over (or cancelled), or the calling task
    /// is cancelled (the export goes on).
    public func progress(beyond offset: Int) async -> Progress {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (ready: CheckedContinuation<Void, Never>) in
                // Checked under the lock that `changeAndWake` takes: a cancellation before this is seen here, one after
                // it finds the continuation to resume.
                let now = state.withLock { s -> Bool in
                    if s.size > offset || s.end != nil || s.cancelled || Task.isCancelled { return true }
                    s.waiting.append(ready)
                    return false
                }
                if now { ready.resume() }
            }
        } onCancel: {
            changeAndWake { _ in }
        }
        return progressNow
    }

    /// What is written so far, and how the export ended if it did.
    public var progressNow: Progress { state.withLock { Progress(size: $0.size, end: $0.end) } }

    /// Applies `change` and resumes every `progress` waiting (outside the lock), which returns what it sees then.
    private func changeAndWake(_ change: (inout State) -> Void) {
        let resumed = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            change(&s)
            defer { s.waiting = [] }
            return s.waiting
        }
        for r in resumed { r.resume() }
    }

    /// Up to `count` bytes of what is written, from `offset`.
    public func read(at offset: Int, count: Int) throws(SystemCallError) -> [UInt8] {
        let (fd, size, held) = state.withLock { s -> (Int32, Int, [UInt8]?) in
            let upTo = min(s.size, offset + count)
            return (s.fd, s.size, s.memory.map { offset < upTo ? Array($0[offset..<upTo]) : [] })
        }
        if let held { return held }
        let wanted = max(0, min(count, size - offset))
        var out = [UInt8](repeating: 0, count: wanted)
        var got = 0
        while got < wanted {
            let n = out.withUnsafeMutableBytes { raw in
                SystemCall.retryingInterrupts { pread(fd, raw.baseAddress! + got, wanted - got, off_t(offset + got)) }
            }
            if n < 0 { throw SystemCallError(call: "pread", code: errno) }
            if n == 0 { break }
            got += n
        }
        out.removeLast(wanted - got)
        return out
    }
}

public enum SessionArchiveError: Error, Sendable, CustomStringConvertible {
    case badFormat(String, supported: [String])
    /// A prefix that starts several session ids: what to say (it names them).
    case ambiguousId(String)
    /// The session holds nothing of what the format exports (no raw ECG for ecg-csv): why, and how it is recorded.
    case nothingToExport(String)
    public var description: String {
        switch self {
        case .badFormat(let f, let supported):
            "No export format \"\(f.prefix(20))\": use format=\(supported.joined(separator: ", format="))."
        case .nothingToExport(let why): why.prefix(1).uppercased() + why.dropFirst() + "."
        // It starts with the prefix as given: ids are case-sensitive, so its case stays.
        case .ambiguousId(let why): why + "."
        }
    }
}
