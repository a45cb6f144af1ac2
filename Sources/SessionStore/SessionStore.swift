import Foundation
import GatewayStorage
import GRDB
import GatewayEngine

/// What went wrong with the session store, and what to do about it.
public enum StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The state directory or a file in it could not be created or opened.
    case io(String)
    /// SQLite refused an operation (disk full, permission, a damaged file).
    case database(String)
    case sessionNotFound(String)
    case sessionExists(String)
    /// The session is being recorded by a live process.
    case sessionRunning(String)
    /// A prefix that starts several session ids: the prefix and the ids it matches (oldest first).
    case ambiguousPrefix(String, [String])
    /// Another process holds the database (after the 10 s wait): try again later.
    case busy(String)
    /// The session holds nothing of what was asked for (an export of its ECG when none was recorded).
    case nothingToExport(String)

    public var description: String {
        switch self {
        case .io(let m): m
        case .database(let m): "session database: \(m)"
        case .sessionNotFound(let id): "no session \(id) in the store (see `hr-gateway sessions list`)"
        case .sessionExists(let id): "session \(id) is already in the store: choose another --session-id or delete it first"
        case .sessionRunning(let id): "session \(id) is being recorded right now: stop it first"
        case let .ambiguousPrefix(prefix, ids):
            "\(prefix) starts \(ids.count) session ids: "
                + (ids.count > 10 ? ids.prefix(10).joined(separator: ", ") + ", …" : ids.joined(separator: ", "))
                + "; give more of the id"
        case .busy(let m): "session database is held by another process: \(m)"
        case .nothingToExport(let m): m
        }
    }
}

/// How a recorded session ended.
public enum RecordedSessionState: String, Sendable, CaseIterable, Codable {
    /// Its writer is recording it now.
    case running
    /// Ended with a `session_summary`.
    case completed
    /// Ended with a `session_error`.
    case failed
    /// The recorder was closed before the session emitted its end (the command was stopped another way).
    case stopped
    /// Its writer died without ending it (`kill -9`, a crash, a power loss): everything committed is kept.
    case interrupted
}

/// One session in the store, as `sessions list` shows it.
public struct RecordedSession: Sendable, Equatable {
    public var id: String
    public var mode: String
    public var configJSON: String
    public var startedAtMs: Int64
    public var endedAtMs: Int64?
    public var state: RecordedSessionState
    public var sampleCount: Int
    public var eventCount: Int
    public var rrCount: Int
    /// Distinct device ids (or sources for samples without one), sorted.
    public var devices: [String]
    /// Timestamp of the last sample, if any.
    public var lastSampleMs: Int64?
    /// The raw waveforms recorded ("ecg", "acc"): what `sessions export --format ecg-csv` (`acc-csv`) can write.
    public var waveforms: [String] = []
    /// The summary's `duration_actual_sec` (measured on the monotonic clock), when the session has one.
    public var durationActualSec: Int?
    /// The process that records (or recorded) the session, when the store has it.
    public var writerPid: Int64?

    /// How long the session ran, ms: from its start to its end (or last sample) on the wall clock, or the summary's
    /// duration where the wall clock says less than nothing or a minute more or less (it was stepped while the
    /// session ran: a 20-s session showed 48 hours, or none). Nil when neither says.
    public var durationMs: Int64? {
        let wall = (endedAtMs ?? lastSampleMs).map { $0 - startedAtMs }
        if let actual = durationActualSec.map({ Int64($0) * 1000 }),
            wall.map({ $0 < 0 || abs($0 - actual) > 60_000 }) ?? true
        {
            return actual
        }
        return wall.flatMap { $0 >= 0 ? $0 : nil }
    }

    /// The duration the session was started with, or nil when it was to run until stopped.
    public var plannedDurationSec: Int? {
        guard let d = (try? JSONValue(parsing: configJSON))?["duration_sec"]?.intValue,
              d < Int64(SessionConfig.untilStopped) else { return nil }
        return Int(d)
    }

    /// The configuration as recorded, without `duration_sec` for a session that ran until stopped.
    public var config: JSONValue? {
        guard case .object(var o)? = try? JSONValue(parsing: configJSON) else { return nil }
        if plannedDurationSec == nil { o["duration_sec"] = nil }
        return .object(o)
    }

    public var jsonValue: JSONValue {
        var o: [String: JSONValue] = [
            "session_id": .string(id),
            "mode": .string(mode),
            "state": .string(state.rawValue),
            "started_at_ms": .int(startedAtMs),
            "sample_count": .int(Int64(sampleCount)),
            "event_count": .int(Int64(eventCount)),
            "rr_count": .int(Int64(rrCount)),
            "devices": .array(devices.map(JSONValue.string)),
        ]
        if let config { o["config"] = config }
        if let e = endedAtMs { o["ended_at_ms"] = .int(e) }
        if let l = lastSampleMs { o["last_sample_ms"] = .int(l) }
        if !waveforms.isEmpty { o["waveforms"] = .array(waveforms.map(JSONValue.string)) }
        return .object(o)
    }
}

/// One recorded event: its wire type and JSON text.
public struct RecordedEvent: Sendable, Equatable {
    public var type: String
    public var json: String
}

/// The session database: `sessions.sqlite` (SQLite in WAL mode) and `locks/` in the state directory.
///
/// A recording session writes each sample to its journal (`journal/` in the state directory) before the engine
/// sees it, and a background writer moves samples and events into the database (see `SessionRecorder`). A killed or
/// crashed process loses nothing it had received: its journal is imported when a store is next opened on the
/// directory. Commits are not fsynced (`synchronous=NORMAL`) and the journal is synced about once a second: a power
/// cut may lose the last second. Several processes may open one store at once.
public final class SessionStore: Sendable {
    public let directory: String
    public var databasePath: String { directory + "/sessions.sqlite" }
    let dbQueue: DatabaseQueue
    /// Opened by a user who may only read the store (`existing(directory:)`): nothing is written, and a session whose
    /// writer is gone is shown as interrupted without being marked so.
    public let isReadOnly: Bool

    /// Opens (creating when needed) the store in `directory`, imports the journals of writers that died before
    /// their database writes were done, and marks as `interrupted` every session whose writer is gone.
    public init(directory: String) throws(StoreError) {
        self.directory = directory
        isReadOnly = false
        do {
            try FileManager.default.createDirectory(
                atPath: directory + "/locks", withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o750])
        } catch {
            throw .io("cannot create the state directory \(directory): \(Self.reason(error)) "
                + "(\(StateDatabase.directoryAdvice))")
        }
        do {
            dbQueue = try StateDatabase.open(path: directory + "/sessions.sqlite", migrations: [("v1", Self.schemaV1), ("v2", Self.schemaV2), ("v3", Self.schemaV3)])
        } catch {
            // SQLite says "disk I/O error" when it cannot grow its shared-memory file: that reads as failing
            // hardware, where the disk is full.
            if let free = StateDatabase.freeBytes(directory), free < StateDatabase.fullBelowBytes {
                throw .database("cannot open \(directory)/sessions.sqlite: the disk holding it is full (\(free / 1024) KB "
                    + "free). " + Self.fullDiskAdvice)
            }
            throw .database("cannot open \(directory)/sessions.sqlite: \(Self.reason(error))")
        }
        // A journal that cannot be imported now (the database is held) stays for the next open.
        _ = try? recoverJournals()
        try markInterrupted()
    }

    /// Opens the store in `directory` to read it, creating nothing: nil when the directory holds no store. A store
    /// this user may write is opened as `init(directory:)` opens it (journals imported, sessions whose writer is gone
    /// marked interrupted); one it may only read (the service's, readable by others) is read as it is. Journals
    /// waiting without a database (kept while it could not be opened, and it was moved aside since) are a store:
    /// made and imported when this user may write the directory.
    public static func existing(directory: String) throws(StoreError) -> SessionStore? {
        let path = directory + "/sessions.sqlite"
        if access(path, F_OK) != 0 {
            guard access(directory, W_OK) == 0, hasJournals(directory) else { return nil }
            return try SessionStore(directory: directory)
        }
        if access(path, W_OK) == 0 && access(directory, W_OK) == 0 {
            do { return try SessionStore(directory: directory) } catch {
                // A full disk: read as it stands, as a user who may not write would (listing and exporting are how
                // an operator decides what to delete).
                guard let free = StateDatabase.freeBytes(directory), free < StateDatabase.fullBelowBytes else { throw error }
                return try SessionStore(readingOnly: directory)
            }
        }
        return try SessionStore(readingOnly: directory)
    }

    /// True when `directory` holds session journals (recorded, not yet in the database).
    static func hasJournals(_ directory: String) -> Bool {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory + "/journal")) ?? []).contains {
            $0.hasSuffix(".jsonl")
        }
    }

    static let fullDiskAdvice = "Reading commands still work; free some space elsewhere before deleting sessions (a "
        + "delete needs a little room itself)"

    private init(readingOnly directory: String) throws(StoreError) {
        self.directory = directory
        isReadOnly = true
        let path = directory + "/sessions.sqlite"
        if let why = StateOwnership.unreadable(path) { throw .database("cannot read \(path): \(why)") }
        var config = Configuration()
        config.readonly = true
        do {
            // While a writer has the store open, its WAL is read too. With none, SQLite cannot open a WAL database
            // read-only without creating its shared-memory file, which this user may not do: nobody is writing, so
            // the file is read as it stands (immutable); so is one whose WAL is empty (left by an open that failed,
            // on a full disk: a read through it needs the shared memory a full disk cannot give).
            var wal = stat()
            if stat(path + "-wal", &wal) == 0, wal.st_size > 0 {
                dbQueue = try DatabaseQueue(path: path, configuration: config)
            } else {
                let uriPath = path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? path
                dbQueue = try DatabaseQueue(path: "file:" + uriPath + "?immutable=1", configuration: config)
            }
        } catch {
            throw .database("cannot read \(path): \(Self.reason(error))")
        }
    }

    /// Raw ECG chunks (Polar PMD): µV as little-endian int32 and their rate.
    private static let schemaV2 = """
        ALTER TABLE samples ADD COLUMN ecg_uv BLOB;
        ALTER TABLE samples ADD COLUMN ecg_rate_hz REAL;
        """

    /// Accelerometer chunks (Polar PMD): x, y, z in g as little-endian float64 triples, and their rate.
    private static let schemaV3 = """
        ALTER TABLE samples ADD COLUMN acc_g BLOB;
        ALTER TABLE samples ADD COLUMN acc_rate_hz REAL;
        """

    private static let schemaV1 = """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY NOT NULL,
            mode TEXT NOT NULL,
            config_json TEXT NOT NULL,
            started_at_ms INTEGER NOT NULL,
            ended_at_ms INTEGER,
            state TEXT NOT NULL,
            writer_pid INTEGER
        );
        CREATE TABLE samples (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            timestamp_ms INTEGER NOT NULL,
            bpm REAL NOT NULL,
            rr_ms TEXT,
            rr_1024 TEXT,
            rr_count INTEGER NOT NULL DEFAULT 0,
            contact TEXT,
            energy_kj INTEGER,
            confidence REAL,
            breathing_rate_bpm REAL,
            device_id TEXT,
            source TEXT NOT NULL,
            notification_seq INTEGER,
            gap_before INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX samples_by_session ON samples(session_id, id);
        CREATE TABLE events (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            type TEXT NOT NULL,
            json TEXT NOT NULL
        );
        CREATE INDEX events_by_session ON events(session_id, id);
        """

    // MARK: Reading

    /// Every session, oldest first; with `newest`, only that many of the latest. Each session's counts are read
    /// from its samples, so the limit is applied first (a relay page of 20 counted the beats of every session).
    /// With `before` (a session's whole id), only the sessions that started before it (a page after the one that
    /// ended with it: ordered by start, then id, so that none is skipped or repeated); `sessionNotFound` when no
    /// session has that id.
    public func list(newest limit: Int? = nil, before: String? = nil) throws(StoreError) -> [RecordedSession] {
        try read { db in
            if let before {
                guard try String.fetchOne(db, sql: "SELECT id FROM sessions WHERE id = ?", arguments: [before]) != nil else {
                    throw StoreError.sessionNotFound(before)
                }
                return try Row.fetchAll(
                    db, sql: Self.summarySQL + """
                         WHERE s.id IN (SELECT id FROM sessions
                            WHERE (started_at_ms, id) < (SELECT started_at_ms, id FROM sessions WHERE id = ?)
                            ORDER BY started_at_ms DESC, id DESC LIMIT ?)
                        ORDER BY s.started_at_ms, s.id
                        """, arguments: [before, max(0, limit ?? Int(Int32.max))]).map(Self.session)
            }
            if let limit {
                return try Row.fetchAll(
                    db, sql: Self.summarySQL + """
                         WHERE s.id IN (SELECT id FROM sessions ORDER BY started_at_ms DESC, id DESC LIMIT ?)
                        ORDER BY s.started_at_ms, s.id
                        """, arguments: [max(0, limit)]).map(Self.session)
            }
            return try Row.fetchAll(db, sql: Self.summarySQL + " ORDER BY s.started_at_ms, s.id").map(Self.session)
        }.map(observed)
    }

    /// One session, or nil.
    public func session(id: String) throws(StoreError) -> RecordedSession? {
        try read { db in
            try Row.fetchOne(db, sql: Self.summarySQL + " WHERE s.id = ?", arguments: [id]).map(Self.session)
        }.map(observed)
    }

    /// `s` as it stands: read-only, a `running` session whose writer is gone is shown interrupted (a writable store
    /// marked it so when opened).
    private func observed(_ s: RecordedSession) -> RecordedSession {
        guard isReadOnly, s.state == .running else { return s }
        // A lock this user may not look at counts as held; a writer process that no longer exists holds nothing (a
        // session killed with -9 was shown running to another user for ever). Another user's live process answers
        // EPERM, not ESRCH.
        let writerGone = s.writerPid.map { $0 > 0 && $0 <= Int64(Int32.max) && kill(pid_t($0), 0) == -1 && errno == ESRCH }
        guard writerGone == true || !FileLock.isHeld(path: lockPath(sessionId: s.id)) else { return s }
        var shown = s
        shown.state = .interrupted
        return shown
    }

    /// The id of the session that `idOrPrefix` names: the session with exactly that id, else the only one whose id
    /// starts with it (ids are long UUIDs; their first characters are enough, as in `git`).
    ///
    /// - Throws: `.sessionNotFound` when none matches, `.ambiguousPrefix` with the candidates when several do.
    public func resolve(_ idOrPrefix: String) throws(StoreError) -> String {
        let ids = try read { db -> [String] in
            // The stored id, not the one given: SQLite's `=` took "abc111\0" for "abc111", and the export then
            // carried the NUL in its rows and file name.
            if let exact = try String.fetchOne(db, sql: "SELECT id FROM sessions WHERE id = ?", arguments: [idOrPrefix]),
                exact == idOrPrefix
            {
                return [exact]
            }
            guard !idOrPrefix.isEmpty else { return [] }
            return try String.fetchAll(
                db, sql: "SELECT id FROM sessions WHERE substr(id, 1, length(?)) = ? ORDER BY started_at_ms, id",
                arguments: [idOrPrefix, idOrPrefix])
        }
        switch ids.count {
        case 0: throw .sessionNotFound(idOrPrefix)
        case 1: return ids[0]
        default: throw .ambiguousPrefix(idOrPrefix, ids)
        }
    }

    /// The samples of a session in the order they were recorded; without `waveforms`, without their ECG and
    /// accelerometer values (for what needs the beats only: an hour of ECG is 468,000 values).
    public func samples(sessionId: String, waveforms: Bool = true) throws(StoreError) -> [BiosignalSample] {
        try read { db in
            try Row.fetchAll(db, sql: Self.samplesQuery(waveforms: waveforms), arguments: [sessionId]).map(Self.sample)
        }
    }

    /// The samples of a session that are not raw ECG or motion chunks (`isWaveformOnly`), in the order they were
    /// recorded: what the beats are rebuilt from (`BeatTimeline` leaves the chunks out). A strap streaming ECG sends
    /// about two chunks a second beside its one heart-rate notification: the beat exports of a 12-hour ECG session
    /// held all of them (157 MB).
    public func beatSamples(sessionId: String) throws(StoreError) -> [BiosignalSample] {
        try read { db in
            try Row.fetchAll(db, sql: Self.samplesQuery(waveforms: false, chunks: false), arguments: [sessionId]).map(Self.sample)
        }
    }

    /// Each sample of a session, in the order they were recorded, read one at a time.
    public func eachSample(
        sessionId: String, while going: () -> Bool = { true }, _ body: (BiosignalSample) -> Void
    ) throws(StoreError) {
        try read { db in
            let rows = try Row.fetchCursor(db, sql: Self.samplesQuery(waveforms: true), arguments: [sessionId])
            while going(), let row = try rows.next() { body(Self.sample(row)) }
        }
    }

    private static func samplesQuery(waveforms: Bool, chunks: Bool = true) -> String {
        // Without waveforms, a chunk's values read as none (an empty array): it is still a chunk (`isWaveformOnly`).
        let columns = waveforms ? "*" : "id, session_id, timestamp_ms, bpm, rr_ms, rr_1024, rr_count, contact, energy_kj, "
            + "confidence, breathing_rate_bpm, device_id, source, notification_seq, gap_before, "
            + "CASE WHEN ecg_uv IS NULL THEN NULL ELSE x'' END AS ecg_uv, ecg_rate_hz, "
            + "CASE WHEN acc_g IS NULL THEN NULL ELSE x'' END AS acc_g, acc_rate_hz"
        // A chunk as `BiosignalSample.isWaveformOnly` tells one: waveform values, no heart rate, no RR.
        let notChunks = " AND NOT ((ecg_uv IS NOT NULL OR acc_g IS NOT NULL) AND COALESCE(bpm, 0) <= 0 AND rr_count = 0)"
        return "SELECT \(columns) FROM samples WHERE session_id = ?\(chunks ? "" : notChunks) ORDER BY id"
    }

    /// The events of a session in the order they were emitted.
    public func events(sessionId: String) throws(StoreError) -> [RecordedEvent] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT type, json FROM events WHERE session_id = ? ORDER BY id", arguments: [sessionId])
                .map { RecordedEvent(type: $0["type"], json: $0["json"]) }
        }
    }

    // MARK: Removing

    /// Deletes a session with its samples and events. Refuses a session that is being recorded.
    public func delete(id: String) throws(StoreError) {
        try markInterrupted()
        guard let s = try session(id: id) else { throw .sessionNotFound(id) }
        if s.state == .running { throw .sessionRunning(id) }
        try write { db in try db.execute(sql: "DELETE FROM sessions WHERE id = ?", arguments: [id]) }
    }

    /// Deletes the finished session `id` if it holds no sample and no event (recorded, but never started).
    func deleteIfEmpty(id: String) throws(StoreError) {
        try write { db in
            try db.execute(
                sql: """
                    DELETE FROM sessions WHERE id = ? AND state != 'running'
                        AND NOT EXISTS (SELECT 1 FROM samples WHERE session_id = ?)
                        AND NOT EXISTS (SELECT 1 FROM events WHERE session_id = ?)
                    """,
                arguments: [id, id, id])
        }
    }

    /// Deletes every finished session that started before `cutoffMs` (epoch ms), and not before `floorMs`; returns
    /// their ids.
    @discardableResult
    public func prune(startedBeforeMs cutoffMs: Int64, notBeforeMs floorMs: Int64 = .min) throws(StoreError) -> [String] {
        try markInterrupted()
        return try write { db in
            let ids = try String.fetchAll(
                db, sql: """
                    SELECT id FROM sessions WHERE started_at_ms < ? AND started_at_ms >= ? AND state != 'running'
                    ORDER BY started_at_ms
                    """,
                arguments: [cutoffMs, floorMs])
            for id in ids { try db.execute(sql: "DELETE FROM sessions WHERE id = ?", arguments: [id]) }
            return ids
        }
    }

    /// No session of this program started before this (2025-01-01): a clock reading earlier is not set yet (a
    /// Raspberry Pi without a real-time clock, before NTP), and a session stamped earlier has no known date.
    public static let earliestPlausibleMs: Int64 = 1_735_689_600_000

    /// The shortest jump in the sessions' dates taken for a clock that jumped ahead, when the clock is not
    /// synchronized (and when it is longer than the days kept). A clock set wrong is months or years off; people
    /// who record every ten days with keep_days 7, or come back after a few weeks, were never pruned.
    public static let clockJumpMs: Int64 = 90 * 86_400_000

    /// What `prune(keepDays:nowMs:clockSynchronized:trustClock:)` did.
    public struct PruneOutcome: Sendable, Equatable {
        /// The ids deleted.
        public var deleted: [String] = []
        /// Why nothing was deleted for its age (a clock not set, or a jump in the sessions' dates), when so.
        public var held: String?
        /// Sessions older than the days kept by the clock's date that were kept, and why (the clock is not
        /// synchronized, so the days counted back from the newest session).
        public var kept: String?
    }

    /// `keep_days`: deletes the finished sessions that started more than `keepDays` days before now.
    ///
    /// Today is the clock's date when the clock is synchronized (`clockSynchronized`: an NTP client keeps it) or the
    /// user says it is right (`trustClock`). Otherwise the clock may be anything, and a clock ahead would make every
    /// session old, so:
    /// - with the clock before `earliestPlausibleMs` (not set yet), nothing is deleted and `held` says why;
    /// - with it later than the newest session's start, the days count back from that start, and `kept` says how many
    ///   sessions the clock's date would have deleted (a user who stopped recording keeps them until a synchronized
    ///   clock or `--trust-clock`);
    /// - a clock ahead also stamps the sessions recorded on it, and the newest of them then makes every real session
    ///   old (one session recorded a year ahead, and the next prune deleted all the others): when every session that
    ///   would be kept started more than `keepDays` days, and more than `clockJumpMs`, after the newest one that would
    ///   be deleted (the store's record jumps by more than the retention itself), nothing is deleted and `held` says
    ///   so.
    /// Sessions stamped before `earliestPlausibleMs` have no known date and are always kept.
    public func prune(keepDays: Int, nowMs: Int64, clockSynchronized: Bool, trustClock: Bool = false)
        throws(StoreError) -> PruneOutcome
    {
        let retentionMs = Int64(keepDays) * 86_400_000
        let today = "\(Self.isoDay(nowMs)) by this clock"
        let trust = "`hr-gateway sessions prune --keep-days \(keepDays) --trust-clock`"
        guard nowMs >= Self.earliestPlausibleMs else {
            return PruneOutcome(held: "the clock reads \(Self.isoDay(nowMs)), so it is not set yet (no NTP): no session "
                + "is pruned for its age until it is")
        }
        if clockSynchronized || trustClock {
            return PruneOutcome(deleted: try prune(startedBeforeMs: nowMs - retentionMs, notBeforeMs: Self.earliestPlausibleMs))
        }
        let newest = try read { db in
            try Int64.fetchOne(db, sql: "SELECT MAX(started_at_ms) FROM sessions WHERE started_at_ms >= ?",
                               arguments: [Self.earliestPlausibleMs])
        }
        let reference = min(nowMs, newest ?? nowMs)
        let cutoff = reference - retentionMs
        let (lastOld, firstKept) = try read { db in
            (try Int64.fetchOne(db, sql: "SELECT MAX(started_at_ms) FROM sessions WHERE started_at_ms < ? AND started_at_ms >= ?",
                                arguments: [cutoff, Self.earliestPlausibleMs]),
             try Int64.fetchOne(db, sql: "SELECT MIN(started_at_ms) FROM sessions WHERE started_at_ms >= ?",
                                arguments: [cutoff]))
        }
        if let lastOld, let firstKept, firstKept - lastOld > max(retentionMs, Self.clockJumpMs) {
            return PruneOutcome(held: "the sessions since \(Self.isoDay(firstKept)) started "
                + "\((firstKept - lastOld) / 86_400_000) days after the one before them (\(Self.isoDay(lastOld))), more than "
                + "the \(keepDays) days kept and than \(Self.clockJumpMs / 86_400_000) days, and the system clock is not "
                + "synchronized (no NTP client keeps it): a clock "
                + "that jumped ahead stamps its sessions so, and counting from them would delete every session before. "
                + "Nothing is pruned for its age; if today is \(today) and those dates are right (a long pause), "
                + "run \(trust)")
        }
        var outcome = PruneOutcome(deleted: try prune(startedBeforeMs: cutoff, notBeforeMs: Self.earliestPlausibleMs))
        if reference < nowMs, let newest {
            let older = try read { db in
                try Int.fetchOne(db, sql: """
                    SELECT COUNT(*) FROM sessions WHERE started_at_ms < ? AND started_at_ms >= ? AND state != 'running'
                    """, arguments: [nowMs - retentionMs, Self.earliestPlausibleMs]) ?? 0
            }
            if older > 0 {
                outcome.kept = "kept \(older) session\(older == 1 ? "" : "s") started more than \(keepDays) "
                    + "day\(keepDays == 1 ? "" : "s") before today (\(today)): the system clock is not synchronized (no "
                    + "NTP client keeps it), so the days count back from the newest session (\(Self.isoDay(newest))), as a "
                    + "clock ahead would make every session old. If today is right, \(trust) deletes them; an NTP client "
                    + "(systemd-timesyncd, chrony) makes keep_days count from today"
            }
        }
        return outcome
    }

    static func isoDay(_ ms: Int64) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "UTC")
        f.dateFormat = "yyyy-MM-dd"
        return f.string(from: Date(timeIntervalSince1970: Double(ms) / 1000))
    }

    /// Gives the pages deleted sessions left back to the file system (SQLite keeps them for later recordings, so a
    /// full SD card got no space back from `delete` or `prune`): `VACUUM`, then a WAL checkpoint that truncates the
    /// log. Returns the database's size before and after (bytes). Throws when another process is writing (a
    /// session being recorded) or when the disk lacks room for the copy VACUUM makes.
    public func compact() throws(StoreError) -> (before: Int64, after: Int64) {
        func size() -> Int64 {
            ["", "-wal"].reduce(0) { total, suffix in
                var st = stat()
                return total + (stat(databasePath + suffix, &st) == 0 ? Int64(st.st_size) : 0)
            }
        }
        let before = size()
        do {
            try dbQueue.writeWithoutTransaction { db in
                try db.execute(sql: "VACUUM")
                try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            }
        } catch { throw Self.wrap(error) }
        return (before, size())
    }

    // MARK: Writing (used by SessionRecorder)

    func insertSession(_ config: SessionConfig, startedAtMs: Int64) throws(StoreError) {
        try write { db in
            if try Bool.fetchOne(db, sql: "SELECT 1 FROM sessions WHERE id = ?", arguments: [config.sessionId]) == true {
                throw StoreError.sessionExists(config.sessionId)
            }
            try db.execute(
                sql: """
                    INSERT INTO sessions (id, mode, config_json, started_at_ms, state, writer_pid)
                    VALUES (?, ?, ?, ?, 'running', ?)
                    """,
                arguments: [config.sessionId, config.mode.rawValue, config.jsonValue.jsonString, startedAtMs,
                            Int64(getpid())])
        }
    }

    /// `s` as it arrived through a `ProviderSink`; a sample with a non-finite `bpm` is dropped (and counted), never
    /// stored as 0.
    func insert(_ s: BiosignalSample, sessionId: String) throws(StoreError) {
        try write { db in try Self.insert(s, sessionId: sessionId, db: db) }
    }

    private static func insert(_ s: BiosignalSample, sessionId: String, db: Database) throws {
        guard let s = s.finiteOnly() else { return }
        let rr = s.rrIntervalsMs.map { JSONValue.array($0.filter(\.isFinite).map(JSONValue.double)).jsonString }
        let raw = s.rrRaw1024.map { JSONValue.array($0.map { .int(Int64($0)) }).jsonString }
        let values: [(any DatabaseValueConvertible)?] = [
            sessionId, s.timestampMs, s.bpm, rr, raw,
            s.rrIntervalsMs?.filter(\.isFinite).count ?? 0,
            s.contact?.rawValue, s.energyKJ.map { Int64($0) }, s.confidence.flatMap { $0.isFinite ? $0 : nil },
            s.breathingRateBpm.flatMap { $0.isFinite ? $0 : nil }, s.deviceId, s.source,
            s.sequence.map { Int64(truncatingIfNeeded: $0) }, s.gapBefore ? 1 : 0,
            s.ecgUv.map { Self.blob($0) }, s.ecgRateHz.flatMap { $0.isFinite ? $0 : nil },
            s.accG.map { Self.blob($0) }, s.accRateHz.flatMap { $0.isFinite ? $0 : nil },
        ]
        // Prepared once per connection (GRDB's statement cache), not parsed again for every sample.
        try db.cachedStatement(sql: """
            INSERT INTO samples (session_id, timestamp_ms, bpm, rr_ms, rr_1024, rr_count, contact, energy_kj,
                confidence, breathing_rate_bpm, device_id, source, notification_seq, gap_before, ecg_uv, ecg_rate_hz, acc_g, acc_rate_hz)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """).execute(arguments: StatementArguments(values))
    }

    private static func insert(_ event: SessionEvent, json: String, db: Database) throws {
        switch event {
        case .started(let id, let at):
            try db.execute(sql: "UPDATE sessions SET started_at_ms = ? WHERE id = ?", arguments: [at, id])
        default:
            break
        }
        try db.cachedStatement(sql: "INSERT INTO events (session_id, type, json) VALUES (?, ?, ?)")
            .execute(arguments: [event.sessionId, event.type, json])
    }

    private static func end(sessionId: String, state: RecordedSessionState, atMs: Int64, db: Database) throws {
        try db.execute(
            sql: "UPDATE sessions SET state = ?, ended_at_ms = ? WHERE id = ? AND state = 'running'",
            arguments: [state.rawValue, atMs, sessionId])
    }

    /// The lock file of a session's writer.
    func lockPath(sessionId: String) -> String { Self.lockPath(directory: directory, sessionId: sessionId) }

    static func lockPath(directory: String, sessionId: String) -> String {
        directory + "/locks/" + fileName(sessionId) + ".lock"
    }

    /// The journal of a session being recorded (see `SessionJournal`).
    func journalPath(sessionId: String) -> String { Self.journalPath(directory: directory, sessionId: sessionId) }

    public static func journalPath(directory: String, sessionId: String) -> String {
        directory + "/journal/" + fileName(sessionId) + ".jsonl"
    }

    private static func fileName(_ sessionId: String) -> String {
        let bytes = Array(sessionId.utf8)
        if bytes.count <= 100 { return bytes.map { String($0, radix: 16).leftPadded(2) }.joined() }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in bytes { hash = (hash ^ UInt64(b)) &* 0x100_0000_01b3 }
        return "h" + String(hash, radix: 16)
    }

    /// Writes a recorder's queued work in one transaction.
    func write(_ items: [SessionRecorder.Item], sessionId: String) throws(StoreError) {
        try write { db in
            for item in items {
                switch item {
                case .sample(let sample, _): try Self.insert(sample, sessionId: sessionId, db: db)
                case .event(let event, let json): try Self.insert(event, json: json, db: db)
                case .end(let state, let at): try Self.end(sessionId: sessionId, state: state, atMs: at, db: db)
                }
            }
        }
    }

    /// Imports the journal of every session whose writer died before its database writes were done: its samples
    /// and events are merged with what the database has of it, in the order they arrived (in one transaction, so
    /// an import cut short is simply done again): a record the journal lost (a line torn by a full disk) but the
    /// database has is kept. Its end, when the journal has one, is recorded. Returns the imported session ids.
    @discardableResult
    public func recoverJournals() throws(StoreError) -> [String] {
        let dir = directory + "/journal"
        let files = ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.hasSuffix(".jsonl") }
        var importedIds: [String] = []
        for file in files.sorted() {
            let path = dir + "/" + file
            guard let contents = try? SessionJournal.read(path: path), let id = contents.sessionId else { continue }
            guard journalPath(sessionId: id) == path else { continue }
            // Its writer is alive: not ours to import.
            guard case .gone(let lock) = writer(of: id) else { continue }
            defer { lock?.release(remove: true) }
            let imported = try write { db -> Bool in
                if try Bool.fetchOne(db, sql: "SELECT 1 FROM sessions WHERE id = ?", arguments: [id]) != true {
                    // Kept while the database could not be opened: the journal holds the session's row too. One of
                    // an older version names no row: kept, not deleted.
                    guard let row = contents.row else { return false }
                    try db.execute(
                        sql: """
                            INSERT INTO sessions (id, mode, config_json, started_at_ms, state, writer_pid)
                            VALUES (?, ?, ?, ?, 'running', NULL)
                            """,
                        arguments: [id, row.mode, row.configJSON, row.startedAtMs])
                }
                let stored = try Row.fetchAll(
                    db, sql: "SELECT * FROM samples WHERE session_id = ? ORDER BY id", arguments: [id]).map(Self.sample)
                let storedEvents = try Row.fetchAll(
                    db, sql: "SELECT type, json FROM events WHERE session_id = ? ORDER BY id", arguments: [id])
                    .map { (type: $0["type"] as String, json: $0["json"] as String) }
                let samples = Self.merged(stored, contents.samples) { $0.jsonValue.jsonString }
                let events = Self.merged(storedEvents, contents.events) { $0.type + "\n" + $0.json }
                try db.execute(sql: "DELETE FROM samples WHERE session_id = ?", arguments: [id])
                try db.execute(sql: "DELETE FROM events WHERE session_id = ?", arguments: [id])
                for sample in samples { try Self.insert(sample, sessionId: id, db: db) }
                for event in events {
                    try db.execute(
                        sql: "INSERT INTO events (session_id, type, json) VALUES (?, ?, ?)",
                        arguments: [id, event.type, event.json])
                }
                if let end = contents.end { try Self.end(sessionId: id, state: end.state, atMs: end.atMs, db: db) }
                return true
            }
            guard imported else { continue }
            unlink(path)
            importedIds.append(id)
        }
        return importedIds
    }

    /// The journals left in `journal/` that no import takes, each with why and what it holds (a journal whose
    /// writer is still alive is not one of them). Such a file was kept for ever without a word: every command,
    /// `doctor` included, showed an empty, healthy store while samples waited in it.
    public func journalsLeftOut() -> [String] {
        let dir = directory + "/journal"
        let files = ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.hasSuffix(".jsonl") }
        var out: [String] = []
        for file in files.sorted() {
            let path = dir + "/" + file
            // Being written now (its lock has the journal's name): not read (a day's journal is large).
            if FileLock.isHeld(path: directory + "/locks/" + file.dropLast(".jsonl".count) + ".lock") { continue }
            guard let contents = try? SessionJournal.read(path: path) else {
                out.append("\(path): cannot be read")
                continue
            }
            // Empty (a journal begun as the disk filled or the process died): nothing waits in it to be said.
            if contents.sessionId == nil, contents.samples.isEmpty, contents.events.isEmpty { continue }
            let holds = "\(contents.samples.count) sample\(contents.samples.count == 1 ? "" : "s") and "
                + "\(contents.events.count) event\(contents.events.count == 1 ? "" : "s")"
            guard let id = contents.sessionId else {
                out.append("\(path) holds \(holds) but no line naming its session (its first line is missing or torn)")
                continue
            }
            if journalPath(sessionId: id) != path {
                out.append("\(path) holds \(holds) of session \(id), whose journal has another name")
            } else if contents.row == nil, (try? session(id: id)) == nil {
                out.append("\(path) holds \(holds) of session \(id), which is not in the database, from a version "
                    + "whose journal did not hold the session's row")
            }
            // Otherwise it waits for the database (held by another process) and is imported at the next open.
        }
        return out
    }

    /// Two records of one arrival order, each possibly missing some of the other's (the database behind the
    /// journal; the journal missing a torn line): every record of either once (a record in both, by `key`, once for
    /// each time it is in the fuller one), in that order.
    static func merged<T>(_ a: [T], _ b: [T], key: (T) -> String) -> [T] {
        var leftInB: [String: Int] = [:]
        for x in b { leftInB[key(x), default: 0] += 1 }
        var out: [T] = []
        var i = 0
        var j = 0
        while i < a.count || j < b.count {
            if i < a.count, j < b.count, key(a[i]) == key(b[j]) {
                leftInB[key(b[j])]! -= 1
                out.append(b[j])
                i += 1
                j += 1
            } else if i < a.count, leftInB[key(a[i]), default: 0] == 0 {
                out.append(a[i])  // only in `a`
                i += 1
            } else if j < b.count {
                leftInB[key(b[j])]! -= 1
                out.append(b[j])
                j += 1
            } else {
                i += 1  // in `a`, and its copy in `b` already taken
            }
        }
        return out
    }

    enum Writer {
        case alive
        /// Its lock, taken; nil when this user may not open the lock file (another user's, root's), which nobody
        /// holds either.
        case gone(FileLock?)
    }

    /// Whether session `id`'s writer still holds its lock. A lock file this user may not open (root recorded, in
    /// the service's directory) was read as held, and a dead session as "being recorded" for ever.
    func writer(of id: String) -> Writer {
        let path = lockPath(sessionId: id)
        do {
            guard let lock = try FileLock.tryAcquire(path: path) else { return .alive }
            return .gone(lock)
        } catch {
            return FileLock.isHeld(path: path) ? .alive : .gone(nil)
        }
    }

    /// Marks `interrupted` every `running` session whose writer no longer holds its lock.
    public func markInterrupted() throws(StoreError) {
        let running = try read { db in try String.fetchAll(db, sql: "SELECT id FROM sessions WHERE state = 'running'") }
        for id in running {
            guard case .gone(let lock) = writer(of: id) else { continue }
            defer { lock?.release(remove: true) }
            try write { db in
                try db.execute(sql: "UPDATE sessions SET state = 'interrupted' WHERE id = ? AND state = 'running'",
                               arguments: [id])
            }
        }
    }

    // MARK: Internals

    /// Each session with what its samples and events say: the samples' figures in one pass over them, as a JSON array
    /// `[count, RR intervals, last time, has ECG, has accelerometer, [devices]]` (five subqueries took five passes,
    /// 1.6 s for 600 one-hour sessions; 0.7 s now). Correlated, not a grouped join: that one materialised its groups
    /// and an automatic index, which SQLite writes to a temporary file, so a full disk failed the reading commands.
    private static let summarySQL = """
        SELECT s.*,
            (SELECT json_array(COUNT(*), COALESCE(SUM(rr_count), 0), MAX(timestamp_ms), MAX(ecg_uv IS NOT NULL),
                MAX(acc_g IS NOT NULL), json_group_array(DISTINCT COALESCE(device_id, source)))
                FROM samples WHERE session_id = s.id) AS sample_stats,
            (SELECT COUNT(*) FROM events WHERE session_id = s.id) AS event_count,
            (SELECT json_extract(json, '$.duration_actual_sec') FROM events
                WHERE session_id = s.id AND type = 'session_summary' ORDER BY id DESC LIMIT 1) AS duration_actual_sec
        FROM sessions s
        """

    /// The devices of `summarySQL`'s figures, in the order of their bytes (as SQLite orders text).
    private static func devices(_ items: [JSONValue]?) -> [String] {
        (items ?? []).compactMap(\.stringValue).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    private static func session(_ row: Row) -> RecordedSession {
        let stats = (row["sample_stats"] as String?).flatMap { try? JSONValue(parsing: $0) }?.arrayValue ?? []
        func figure(_ i: Int) -> Int64? { i < stats.count ? stats[i].intValue.map { Int64($0) } : nil }
        return RecordedSession(
            id: row["id"], mode: row["mode"], configJSON: row["config_json"], startedAtMs: row["started_at_ms"],
            endedAtMs: row["ended_at_ms"],
            state: RecordedSessionState(rawValue: row["state"]) ?? .interrupted,
            sampleCount: Int(figure(0) ?? 0), eventCount: row["event_count"], rrCount: Int(figure(1) ?? 0),
            devices: devices(stats.count > 5 ? stats[5].arrayValue : nil),
            lastSampleMs: figure(2),
            waveforms: [("ecg", figure(3) == 1), ("acc", figure(4) == 1)].filter(\.1).map(\.0),
            durationActualSec: (row["duration_actual_sec"] as Int64?).map { Int($0) }, writerPid: row["writer_pid"])
    }

    private static func sample(_ row: Row) -> BiosignalSample {
        func doubles(_ text: String?) -> [Double]? {
            guard let text, let items = (try? JSONValue(parsing: text))?.arrayValue else { return nil }
            return items.compactMap(\.doubleValue)
        }
        let seq: Int64? = row["notification_seq"]
        let energy: Int64? = row["energy_kj"]
        let contact: String? = row["contact"]
        return BiosignalSample(
            timestampMs: row["timestamp_ms"], bpm: row["bpm"], rrIntervalsMs: doubles(row["rr_ms"]),
            deviceId: row["device_id"], source: row["source"],
            contact: contact.flatMap(SensorContact.init(rawValue:)),
            energyKJ: energy.map { Int($0) },
            rrRaw1024: doubles(row["rr_1024"]).map { $0.map { UInt16(clamping: Int($0)) } },
            confidence: row["confidence"], breathingRateBpm: row["breathing_rate_bpm"],
            sequence: seq.map { UInt64(bitPattern: $0) }, gapBefore: (row["gap_before"] as Int64? ?? 0) != 0,
            ecgUv: (row["ecg_uv"] as Data?).map(Self.int32s), ecgRateHz: row["ecg_rate_hz"],
            accG: (row["acc_g"] as Data?).map(Self.vectors), accRateHz: row["acc_rate_hz"])
    }

    static func blob(_ values: [SIMD3<Double>]) -> Data {
        var d = Data(capacity: values.count * 24)
        for v in values {
            for c in [v.x, v.y, v.z] { withUnsafeBytes(of: c.bitPattern.littleEndian) { d.append(contentsOf: $0) } }
        }
        return d
    }

    static func vectors(_ d: Data) -> [SIMD3<Double>] {
        let b = [UInt8](d)
        func double(_ at: Int) -> Double {
            var bits: UInt64 = 0
            for i in 0..<8 { bits |= UInt64(b[at + i]) << (8 * UInt64(i)) }
            return Double(bitPattern: bits)
        }
        return stride(from: 0, to: b.count - b.count % 24, by: 24).map { SIMD3(double($0), double($0 + 8), double($0 + 16)) }
    }

    static func blob(_ values: [Int32]) -> Data {
        var d = Data(capacity: values.count * 4)
        for v in values {
            let u = UInt32(bitPattern: v)
            d.append(contentsOf: [UInt8(u & 0xFF), UInt8((u >> 8) & 0xFF), UInt8((u >> 16) & 0xFF), UInt8(u >> 24)])
        }
        return d
    }

    static func int32s(_ d: Data) -> [Int32] {
        let b = [UInt8](d)
        return stride(from: 0, to: b.count - b.count % 4, by: 4).map {
            Int32(bitPattern: UInt32(b[$0]) | UInt32(b[$0 + 1]) << 8 | UInt32(b[$0 + 2]) << 16 | UInt32(b[$0 + 3]) << 24)
        }
    }

    func read<T>(_ body: (Database) throws -> T) throws(StoreError) -> T {
        do { return try dbQueue.read(body) } catch { throw Self.wrap(error) }
    }

    private func write<T>(_ body: (Database) throws -> T) throws(StoreError) -> T {
        do { return try dbQueue.write(body) } catch {
            if let notWritable = StateDatabase.notWritable(error, path: databasePath) { throw .database(notWritable.reason) }
            throw Self.wrap(error)
        }
    }

    private static func wrap(_ error: any Error) -> StoreError {
        if let e = error as? StoreError { return e }
        if let db = error as? DatabaseError, db.resultCode == .SQLITE_BUSY || db.resultCode == .SQLITE_LOCKED {
            return .busy(reason(error))
        }
        if let db = error as? DatabaseError, db.resultCode == .SQLITE_FULL {
            return .database("the disk holding it is full (\(reason(error))). " + fullDiskAdvice)
        }
        return .database(reason(error))
    }

    static func reason(_ error: any Error) -> String { StateDatabase.reason(error) }
}

extension String {
    fileprivate func leftPadded(_ n: Int) -> String { String(repeating: "0", count: max(0, n - count)) + self }
}
