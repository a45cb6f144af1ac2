import Foundation
import GatewayEngine
import GatewayStorage
import SystemCalls

/// Records one session into a `SessionStore` as it runs: samples through a tap on each provider
/// (`wrap(_:)` or `record(_:)` from an existing `TappedProvider` closure), events through `record(_:json:)` (the
/// store's sink) or `attach(to:)`.
///
/// A received sample is durable before the engine gets it: `record(_:)` appends it to the session's journal
/// (`SessionJournal`, a plain file) on the provider's thread. Nothing on the provider's thread or on the engine's
/// delivery path touches SQLite: a background thread drains samples and events into `sessions.sqlite` in order,
/// retrying while another process holds the database (so a locked database never stalls the session), and removes
/// the journal once everything is in. If the process dies first, the next `SessionStore` opened on the directory
/// imports the journal. A write that fails for another reason (disk full, a damaged file) never disturbs the
/// session: `onFailure` is called once, the journal is kept, and recording carries on.
///
/// When the database cannot be opened at all (a damaged file), `init(journalingOnlyIn:…)` records into the journal
/// alone: its first line holds the session's row, so the first `SessionStore` that opens the directory once the
/// database is replaced imports it as a session of its own.
public final class SessionRecorder: Sendable {
    public let sessionId: String
    /// Nil when journaling only.
    private let store: SessionStore?
    private let directory: String
    /// The session's clock, for the time it ended (a faster replay's is the recording's time).
    private let clock: any SessionClock
    private let onFailure: @Sendable (String) -> Void
    private let journal: SessionJournal?
    /// The session was added to the store by this recorder (not refused, as a duplicate id is).
    private let began: Bool
    /// One signal per queued batch of work and one to finish.
    private let wake = DispatchSemaphore(value: 0)
    /// Signalled once when the background writer has finished.
    private let done = DispatchSemaphore(value: 0)

    enum Item: Sendable {
        /// `journaled`: the sample is in the journal (its append did not fail).
        case sample(BiosignalSample, journaled: Bool)
        case event(SessionEvent, json: String)
        case end(RecordedSessionState, atMs: Int64)
    }

    /// What a failing disk kept out of the recording, said once the session is written (the first failure alone
    /// was said, and a later one that lost data went unsaid).
    struct Losses: Sendable {
        /// Samples and events in the journal but not in the database: imported at the next start.
        var journalOnly = (samples: 0, events: 0)
        /// In neither: lost.
        var lost = (samples: 0, events: 0)
    }

    private struct State: Sendable {
        var lock: FileLock?
        var reported = false
        /// The session's end is queued: later records are ignored.
        var ended = false
        var token: ObservationToken?
        var queue: [Item] = []
        /// `finish` gave up waiting: the writer stops retrying and leaves the rest to the journal.
        var abandon = false
        /// Some write failed for good: the journal is kept for the next import.
        var failed = false
        var losses = Losses()
        var writerRunning = false
    }

    private let state = Locked(State())

    /// Adds the session to the store as `running`, holds its writer lock and opens its journal. When this fails
    /// (the id is already recorded, the database cannot be written) `onFailure` is called and the recorder records
    /// nothing.
    public convenience init(
        store: SessionStore,
        config: SessionConfig,
        nowMs: Int64? = nil,
        clock: any SessionClock = SystemSessionClock(),
        onFailure: @escaping @Sendable (String) -> Void
    ) {
        self.init(store: store, directory: store.directory, config: config, nowMs: nowMs, clock: clock,
                  onFailure: onFailure)
    }

    /// Records into the session's journal in `directory` alone, for a store whose database cannot be opened: the
    /// journal is kept when the session ends and imported by the first `SessionStore` opened on the directory once
    /// the database can be. When even the journal cannot be made, `onFailure` is called and nothing is recorded.
    public convenience init(
        journalingOnlyIn directory: String,
        config: SessionConfig,
        clock: any SessionClock = SystemSessionClock(),
        onFailure: @escaping @Sendable (String) -> Void
    ) {
        self.init(store: nil, directory: directory, config: config, nowMs: nil, clock: clock, onFailure: onFailure)
    }

    private init(
        store: SessionStore?,
        directory: String,
        config: SessionConfig,
        nowMs: Int64?,
        clock: any SessionClock,
        onFailure: @escaping @Sendable (String) -> Void
    ) {
        let nowMs = nowMs ?? clock.nowMs()
        self.clock = clock
        self.sessionId = config.sessionId
        self.store = store
        self.directory = directory
        self.onFailure = onFailure
        let opened = Result { () throws(StoreError) -> (FileLock, SessionJournal) in
            let acquired: FileLock?
            let lockPath = SessionStore.lockPath(directory: directory, sessionId: config.sessionId)
            if store == nil {
                try? FileManager.default.createDirectory(
                    atPath: SystemCall.parentDirectory(of: lockPath), withIntermediateDirectories: true,
                    attributes: [.posixPermissions: 0o750])
            }
            do { acquired = try FileLock.tryAcquire(path: lockPath) } catch {
                throw StoreError.io("\(error)")
            }
            guard let lock = acquired else { throw StoreError.sessionRunning(config.sessionId) }
            do throws(StoreError) {
                try store?.insertSession(config, startedAtMs: nowMs)
                let path = SessionStore.journalPath(directory: directory, sessionId: config.sessionId)
                return (lock, try SessionJournal(path: path, config: config, startedAtMs: nowMs))
            } catch {
                lock.release(remove: false)
                throw error
            }
        }
        switch opened {
        case .success(let (lock, journal)):
            self.journal = journal
            began = true
            state.withLock {
                $0.lock = lock
                $0.writerRunning = true
            }
            let writer = Thread { [self] in writerLoop() }
            writer.name = "session-recorder"
            writer.start()
        case .failure(let error):
            self.journal = nil
            began = false
            fail("not recording this session: \(error)")
            state.withLock { $0.ended = true }
        }
    }

    /// The database the session is recorded into.
    public var databasePath: String { store?.databasePath ?? directory + "/sessions.sqlite" }

    /// The session's journal (kept after the session when journaling only, or when the database failed).
    public var journalPath: String? { journal?.path }

    /// True when the session goes to its journal alone (the database could not be opened).
    public var isJournalingOnly: Bool { store == nil && journal != nil }

    /// True when the session is being recorded (the initial insert succeeded and it has not ended).
    public var isRecording: Bool { state.withLock { $0.lock != nil && !$0.ended } }

    /// `provider`, with every sample it delivers recorded first.
    public func wrap(_ provider: any BiosignalProvider) -> TappedProvider {
        TappedProvider(provider, onSample: { [self] sample in record(sample) })
    }

    /// Records every event of this session that `engine` emits, until the session ends.
    public func attach(to engine: SessionEngine) {
        let token = engine.observe { [self] event in record(event) }
        state.withLock { $0.token = token }
    }

    /// Makes `sample` durable (journal) and queues it for the database. Called on the provider's thread.
    public func record(_ sample: BiosignalSample) {
        guard isRecording, let journal else { return }
        guard let sample = sample.finiteOnly() else { return }
        var journaled = true
        do { try journal.append(sample: sample) } catch {
            journaled = false
            fail("\(error); the session goes on")
        }
        enqueue(.sample(sample, journaled: journaled))
    }

    /// Queues `event` when it belongs to this session; the terminal event also ends the session in the store.
    /// Never blocks.
    public func record(_ event: SessionEvent) { record(event, json: event.jsonValue.jsonString) }

    /// As `record(_:)`, with the event's JSON text already made (shared with the other sinks).
    public func record(_ event: SessionEvent, json: String) {
        guard event.sessionId == sessionId, isRecording else { return }
        enqueue(.event(event, json: json))
        switch event {
        case .summary: end(.completed)
        case .error: end(.failed)
        default: break
        }
    }

    /// Ends the recording (a session that has not emitted its end is marked `stopped`) and waits up to `graceSec`
    /// for the background writer to have everything in the database; what it could not write stays in the journal
    /// for the next start. Idempotent.
    public func finish(graceSec: Double = 15) {
        end(.stopped)
        let (token, running) = state.withLock { s -> (ObservationToken?, Bool) in
            defer { s.token = nil }
            return (s.token, s.writerRunning)
        }
        token?.cancel()
        guard running else { return }
        if done.wait(timeout: .now() + graceSec) == .timedOut {
            state.withLock { $0.abandon = true }
            fail("recording to \(databasePath) is still waiting for the database; the rest stays in "
                + "\(journal?.path ?? "the journal") and is imported at the next start")
        } else {
            done.signal()
        }
    }

    /// For a command that failed before its session started (a relay port in use, a `--record` path that cannot be
    /// created): ends the recording as `finish` does, then removes the session from the store if nothing of it was
    /// recorded (no sample, no event), so that it does not stay behind as a session with nothing in it. A session
    /// with anything recorded is kept.
    public func discardUnstarted() {
        finish()
        guard began else { return }  // a session of that id recorded before is not this one's to remove
        guard let store else {
            // Journaling only: a journal with nothing but its session and its end would import an empty session.
            if state.withLock({ $0.losses.journalOnly == (0, 0) && $0.losses.lost == (0, 0) }) { journal?.remove() }
            return
        }
        do { try store.deleteIfEmpty(id: sessionId) } catch { fail("could not remove the unstarted session: \(error)") }
    }

    private func end(_ final: RecordedSessionState) {
        let queued = state.withLock { s -> Bool in
            guard !s.ended, s.lock != nil else { return false }
            s.ended = true
            s.queue.append(.end(final, atMs: clock.nowMs()))
            return true
        }
        if queued { wake.signal() }
    }

    private func enqueue(_ item: Item) {
        state.withLock { $0.queue.append(item) }
        wake.signal()
    }

    // MARK: Background writer

    private func writerLoop() {
        var lastSync = ContinuousClock.now
        var finished = false
        while !finished {
            wake.wait()
            let batch = state.withLock { s -> [Item] in
                defer { s.queue = [] }
                return s.queue
            }
            if batch.isEmpty { continue }
            var unjournaled: Set<Int> = []  // events of the batch whose journal line failed
            for (index, item) in batch.enumerated() {
                do {
                    switch item {
                    case .event(let event, let json): try journal?.append(eventType: event.type, json: json)
                    case .end(let st, let at):
                        finished = true
                        try journal?.append(end: st, atMs: at)
                    case .sample: break
                    }
                } catch {
                    unjournaled.insert(index)
                    fail("\(error); the session goes on")
                }
            }
            if finished || ContinuousClock.now - lastSync > .seconds(1) {
                journal?.sync()
                lastSync = .now
            }
            if !write(batch, unjournaled: unjournaled) { break }
        }
        let (lock, failed, losses) = state.withLock { s -> (FileLock?, Bool, Losses) in
            defer { s.lock = nil }
            return (s.lock, s.failed, s.losses)
        }
        if let said = Self.describe(
            losses, sessionId: sessionId, journal: journal?.path,
            until: store == nil ? "once it can be opened (`hr-gateway doctor` says how)" : "once it has room")
        {
            onFailure(said)
        }
        if !failed { journal?.remove() }
        lock?.release(remove: true)
        // Running until here: a `finish` that found the writer stopped returned at once, and the process could exit
        // before the losses above were said (the note that a session waits in its journal went missing under load).
        state.withLock { $0.writerRunning = false }
        done.signal()
    }

    /// What `losses` says, or nil when nothing was kept out.
    static func describe(_ losses: Losses, sessionId: String, journal: String?, until: String = "once it has room") -> String? {
        func count(_ n: (samples: Int, events: Int)) -> String {
            [(n.samples, "sample"), (n.events, "event")].filter { $0.0 > 0 }
                .map { "\($0.0) \($0.1)\($0.0 == 1 ? "" : "s")" }.joined(separator: " and ")
        }
        var parts: [String] = []
        let lost = losses.lost.samples + losses.lost.events
        if lost > 0 {
            parts.append("\(count(losses.lost)) could be written neither to the journal nor to the database (the disk "
                + "was full, or failing) and \(lost == 1 ? "is" : "are") lost")
        }
        let waiting = losses.journalOnly.samples + losses.journalOnly.events
        if waiting > 0 {
            parts.append("\(count(losses.journalOnly)) \(waiting == 1 ? "is" : "are") in \(journal ?? "the journal") "
                + "only, imported into the database by the next hr-gateway command that opens the store, \(until)")
        }
        return parts.isEmpty ? nil : "recording of session \(sessionId): " + parts.joined(separator: "; ")
    }

    /// Writes `batch` in one transaction, waiting out a database held by another process (`LockBackoff`). Returns
    /// false when `finish` gave up waiting.
    private func write(_ batch: [Item], unjournaled: Set<Int> = []) -> Bool {
        guard let store else {
            // Journaling only: everything journaled waits there for the database.
            state.withLock { s in
                s.failed = true
                for (index, item) in batch.enumerated() { Self.tally(item, lineFailed: unjournaled.contains(index), &s.losses) }
            }
            return true
        }
        var backoff = LockBackoff()
        while true {
            do {
                try store.write(batch, sessionId: sessionId)
                return true
            } catch .busy {
                if state.withLock({ $0.abandon }) {
                    state.withLock { $0.failed = true }
                    return false
                }
                // No limit: `finish` decides when to stop waiting.
                Thread.sleep(forTimeInterval: Double(backoff.next()) / 1_000)
            } catch {
                // Not a wait: write item by item so that what can be written is (the end of the session above all).
                state.withLock { $0.failed = true }
                fail("recording to \(store.databasePath) failed: \(error); the session goes on")
                for (index, item) in batch.enumerated() where (try? store.write([item], sessionId: sessionId)) == nil {
                    state.withLock { Self.tally(item, lineFailed: unjournaled.contains(index), &$0.losses) }
                }
                return true
            }
        }
    }

    /// Counts `item`, not in the database, as waiting in the journal, or lost when its journal line failed too
    /// (`lineFailed`, for an event; a sample knows).
    private static func tally(_ item: Item, lineFailed: Bool, _ losses: inout Losses) {
        switch item {
        case .sample(_, let journaled):
            if journaled { losses.journalOnly.samples += 1 } else { losses.lost.samples += 1 }
        case .event:
            if lineFailed { losses.lost.events += 1 } else { losses.journalOnly.events += 1 }
        case .end: break
        }
    }

    private func fail(_ message: String) {
        let first = state.withLock { s -> Bool in
            defer { s.reported = true }
            return !s.reported
        }
        if first { onFailure(message) }
    }
}
