import Foundation
import GatewayEngine
import GatewayStorage
import SystemCalls
import Synchronization

/// The append-only journal of one recorded session: `journal/<id>.jsonl` in the state directory, one JSON object per
/// line. It is what makes a received sample durable before the engine sees it, without touching SQLite on the
/// provider's thread: a `write(2)` to the end of a file cannot be stalled by another process holding the database.
///
/// Lines (keys sorted, as every JSONValue is written):
/// - `{"kind":"session","session_id":…,"mode":…,"config_json":…,"started_at_ms":…}` first: what the store's row of
///   the session holds, so that a journal kept while the database could not be opened becomes a session of its own;
/// - `{"kind":"sample","sample":{…}}` for each sample, written on the provider's thread before the engine has it;
/// - `{"kind":"event","json":"…","type":…}` for each event, written by the background writer;
/// - `{"at_ms":…,"kind":"end","state":…}` when the recorder ends the session.
///
/// Writes are `write(2)` (a killed process loses nothing written); `sync()` is `fdatasync`, called by the background
/// writer about once a second, so a power cut loses at most that much, like the database's `synchronous=NORMAL`.
/// The journal is removed once everything in it is in the database; one left behind by a dead writer is imported
/// by the next `SessionStore` that opens the directory (`SessionStore.recoverJournals`).
final class SessionJournal: Sendable {
    let path: String
    private let fd: Int32
    /// A write failed part-way (a full disk): the file may end in a fragment of a line. The next line starts on a
    /// line of its own, so the fragment is one unreadable line, not glued to the next record and losing it too.
    private let torn = Mutex(false)

    /// Creates the journal (refusing one that exists: that session id is already journaled), its first line naming
    /// the session as the store's row does.
    init(path: String, config: SessionConfig, startedAtMs: Int64) throws(StoreError) {
        self.path = path
        let dir = SystemCall.parentDirectory(of: path)
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true,
                                                 attributes: [.posixPermissions: 0o750])
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0o640)
        guard fd >= 0 else {
            let code = errno
            if code == EEXIST { throw .sessionExists(config.sessionId) }
            throw .io("cannot create the session journal \(path): \(String(cString: strerror(code)))")
        }
        self.fd = fd
        StateOwnership.adopt(path)
        do throws(StoreError) {
            try append(.object([
                "kind": .string("session"), "session_id": .string(config.sessionId), "mode": .string(config.mode.rawValue),
                "config_json": .string(config.jsonValue.jsonString), "started_at_ms": .int(startedAtMs),
            ]))
        } catch {
            // A journal without its first line names no session: nothing could ever import it. (`deinit` closes it:
            // every property is set.)
            unlink(path)
            throw error
        }
    }

    deinit { close(fd) }

    func append(sample: BiosignalSample) throws(StoreError) {
        try append(.object(["kind": .string("sample"), "sample": sample.jsonValue]))
    }

    func append(eventType: String, json: String) throws(StoreError) {
        try append(.object(["kind": .string("event"), "type": .string(eventType), "json": .string(json)]))
    }

    func append(end state: RecordedSessionState, atMs: Int64) throws(StoreError) {
        try append(.object(["kind": .string("end"), "state": .string(state.rawValue), "at_ms": .int(atMs)]))
    }

    /// One line in one `write(2)` (O_APPEND: lines from several threads never interleave), after a line break when
    /// an earlier write failed part-way.
    private func append(_ value: JSONValue) throws(StoreError) {
        let line = value.jsonString + "\n"
        let failure = torn.withLock { torn -> SystemCallError? in
            do throws(SystemCallError) {
                try SystemCall.writeAll(fd, torn ? "\n" + line : line)
                torn = false
                return nil
            } catch {
                torn = true
                return error
            }
        }
        if let failure { throw .io("cannot write the session journal \(path): \(failure.reason)") }
    }

    /// Flushes what was written to the disk.
    func sync() { _ = fdatasync(fd) }

    /// Removes the file (everything in it is in the database).
    func remove() { unlink(path) }

    /// What a journal holds, read back for import. A last line cut short by a crash is skipped.
    struct Contents {
        var sessionId: String?
        /// The session's row (absent from journals of older versions).
        var row: (mode: String, configJSON: String, startedAtMs: Int64)?
        var samples: [BiosignalSample] = []
        var events: [(type: String, json: String)] = []
        var end: (state: RecordedSessionState, atMs: Int64)?
    }

    static func read(path: String) throws -> Contents {
        // Decoded line by line, not as one UTF-8 text: a character torn by a full disk spoils its own line only
        // (the whole file was refused, and never imported).
        let text = String(decoding: try Data(contentsOf: URL(fileURLWithPath: path)), as: UTF8.self)
        var c = Contents()
        for line in text.split(separator: "\n") {
            guard let v = try? JSONValue(parsing: String(line)) else { continue }
            switch v["kind"]?.stringValue {
            case "session":
                c.sessionId = v["session_id"]?.stringValue
                if let mode = v["mode"]?.stringValue, let config = v["config_json"]?.stringValue,
                    let started = v["started_at_ms"]?.intValue
                {
                    c.row = (mode, config, started)
                }
            case "sample":
                if let s = v["sample"], let sample = try? BiosignalSample(json: s) { c.samples.append(sample) }
            case "event":
                if let t = v["type"]?.stringValue, let j = v["json"]?.stringValue { c.events.append((t, j)) }
            case "end":
                if let st = v["state"]?.stringValue.flatMap(RecordedSessionState.init(rawValue:)),
                    let at = v["at_ms"]?.intValue
                {
                    c.end = (st, at)
                }
            default: continue
            }
        }
        return c
    }
}
