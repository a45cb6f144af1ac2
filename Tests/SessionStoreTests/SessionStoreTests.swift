import Foundation
import GatewayEngine
@testable import SessionStore
import SimulatedProvider
import Testing

func tempDir() -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-store-\(UUID().uuidString)").path
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// Collects what a tap or observer saw, independently of the recorder.
final class Seen: Sendable {
    let samples = Locked<[BiosignalSample]>([])
    let events = Locked<[SessionEvent]>([])
    let failures = Locked<[String]>([])
    let ended = Locked(false)
}

@Suite struct SessionStoreTests {
    /// A simulated strap through the real engine in virtual time, recorded, and what an independent tap saw.
    func recordSimulated(store: SessionStore, id: String, seconds: Int = 60) async throws -> Seen {
        let clock = ManualSessionClock(startMs: 1_700_000_000_000)
        let seen = Seen()
        let sim = SimulatedBiosignalProvider(model: .realistic, seed: 5, clock: clock)
        let config = SessionConfig(sessionId: id, mode: .breathing, durationSec: seconds,
                                   profile: ComputeProfile(windowSec: 30, emitIntervalSec: 5))
        let recorder = SessionRecorder(store: store, config: config, nowMs: clock.nowMs()) { msg in
            seen.failures.withLock { $0.append(msg) }
        }
        // Samples after the summary belong to no session: neither the engine nor the recorder takes them.
        let observed = TappedProvider(recorder.wrap(sim), onSample: { s in
            if !seen.ended.withLock({ $0 }) { seen.samples.withLock { $0.append(s) } }
        })
        let engine = SessionEngine(providers: [observed], clock: clock)
        recorder.attach(to: engine)
        let token = engine.observe { e in
            seen.events.withLock { $0.append(e) }
            if e.isTerminal { seen.ended.withLock { $0 = true } }
        }
        _ = try await engine.startSession(config)
        clock.advance(toMs: clock.nowMs() + Int64(seconds) * 1000)
        await engine.idle()
        token.cancel()
        recorder.finish()
        return seen
    }

    @Test func aSessionThroughTheEngineIsRecordedWithEverySampleAndEvent() async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try SessionStore(directory: dir)
        let seen = try await recordSimulated(store: store, id: "sim-1")
        #expect(seen.failures.withLock { $0 }.isEmpty)

        let sessions = try store.list()
        #expect(sessions.map(\.id) == ["sim-1"])
        let s = try #require(sessions.first)
        #expect(s.state == .completed)
        #expect(s.mode == "breathing")
        #expect(s.endedAtMs != nil)
        let samples = seen.samples.withLock { $0 }
        #expect(samples.count > 40)
        #expect(s.sampleCount == samples.count)
        #expect(try store.samples(sessionId: "sim-1") == samples, "every field survives the round trip")
        #expect(s.rrCount == samples.reduce(0) { $0 + ($1.rrIntervalsMs?.count ?? 0) })

        let events = seen.events.withLock { $0 }
        let stored = try store.events(sessionId: "sim-1")
        #expect(stored.map(\.type) == events.map(\.type))
        #expect(stored.map(\.json) == events.map(\.jsonValue.jsonString))
        #expect(stored.last?.type == "session_summary")
        #expect(try JSONValue(parsing: s.configJSON)["mode"] == .string("breathing"))
    }

    @Test func aSecondStoreOnTheSameDirectorySeesALiveWriterAsRunning() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try SessionStore(directory: dir)
        let recorder = SessionRecorder(store: store, config: SessionConfig(sessionId: "live", mode: .focus, durationSec: 60)) { _ in }
        recorder.record(BiosignalSample(timestampMs: 1, bpm: 60, rrIntervalsMs: [1000], source: "test"))

        let other = try SessionStore(directory: dir)
        #expect(try other.session(id: "live")?.state == .running)
        #expect(throws: StoreError.sessionRunning("live")) { try other.delete(id: "live") }
        #expect(try other.prune(startedBeforeMs: .max).isEmpty)

        recorder.finish()
        #expect(try other.session(id: "live")?.state == .stopped)
        #expect(try other.session(id: "live")?.sampleCount == 1)
        try other.delete(id: "live")
        #expect(try other.list().isEmpty)
        #expect(throws: StoreError.sessionNotFound("live")) { try other.delete(id: "live") }
    }

    /// Raw ECG chunks keep every µV value (the int32 extremes too) and their rate, through the database and through
    /// a journal left by a writer that died before its database writes.
    @Test func ecgChunksAreRecordedValueForValue() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try SessionStore(directory: dir)
        let chunk = BiosignalSample(
            timestampMs: 1_000, bpm: 0, deviceId: "A0", source: "polar_ecg", ecgUv: [-245, 3645, Int32.min, Int32.max, 0],
            ecgRateHz: 130)
        let recorder = SessionRecorder(store: store, config: SessionConfig(sessionId: "ecg", mode: .focus, durationSec: 60)) { _ in }
        recorder.record(BiosignalSample(timestampMs: 900, bpm: 61, rrIntervalsMs: [983], deviceId: "A0", source: "ble_hrm"))
        recorder.record(chunk)
        let motion = BiosignalSample(
            timestampMs: 1_100, bpm: 0, deviceId: "A0", source: "polar_acc",
            accG: [SIMD3(0.012, -0.5, 0.998), SIMD3(-1e-3, 0, 16)], accRateHz: 50)
        recorder.record(motion)
        recorder.finish()
        let back = try store.samples(sessionId: "ecg")
        #expect(back.count == 3 && back[1] == chunk && back[2] == motion, "\(back)")
        #expect(try BiosignalSample(json: motion.jsonValue) == motion)
        #expect(back[1].isWaveformOnly && back[2].isWaveformOnly && !back[0].isWaveformOnly)
        // The wire form reads back the same.
        #expect(try BiosignalSample(json: chunk.jsonValue) == chunk)
        #expect(throws: SampleDecodingError.self) {
            try BiosignalSample(json: JSONValue(parsing: #"{"timestamp_ms":1,"bpm":0,"ecg_uv":[1,4294967296]}"#))
        }
    }

    /// A full disk tore a journal line and the next line was glued to it, so the journal lost two records; the
    /// import replaced the database's rows with the journal's, and a sample the database had was deleted. The import
    /// now merges the two in arrival order.
    @Test func aJournalImportKeepsWhatTheDatabaseHadAndTheJournalLost() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try SessionStore(directory: dir)
        let samples = (0..<5).map {
            BiosignalSample(timestampMs: 1_000 + Int64($0) * 1000, bpm: 60 + Double($0), rrIntervalsMs: [1000],
                            deviceId: "A0", source: "ble_hrm", sequence: UInt64($0))
        }
        let recorder = SessionRecorder(store: store, config: SessionConfig(sessionId: "torn", mode: .focus, durationSec: 60)) { _ in }
        for s in samples.prefix(3) { recorder.record(s) }
        recorder.finish()
        // The journal a dead writer left: sample 1 torn and glued to sample 2's line (both unreadable), then two
        // samples the database never got.
        func line(_ s: BiosignalSample) -> String {
            JSONValue.object(["kind": .string("sample"), "sample": s.jsonValue]).jsonString
        }
        let journal = [
            JSONValue.object(["kind": .string("session"), "session_id": .string("torn")]).jsonString,
            line(samples[0]),
            String(line(samples[1]).prefix(30)) + line(samples[2]),
            line(samples[3]),
            line(samples[4]),
        ].joined(separator: "\n") + "\n"
        try FileManager.default.createDirectory(atPath: dir + "/journal", withIntermediateDirectories: true)
        // journal/<hex of the id>.jsonl
        let name = "torn".utf8.map { String(format: "%02x", $0) }.joined()
        try journal.write(toFile: dir + "/journal/\(name).jsonl", atomically: true, encoding: .utf8)
        #expect(try store.recoverJournals() == ["torn"])
        #expect(try store.samples(sessionId: "torn") == samples, "every sample once, in order")
    }

    /// A full disk that cut a line inside a multibyte character made the whole journal unreadable as UTF-8: it was
    /// never imported, and nothing said so. The torn line alone is skipped now. A journal of an older version whose
    /// session is not in the database (it names no row) is kept, not deleted.
    @Test func aCharacterTornByAFullDiskSpoilsItsOwnLineOnly() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try SessionStore(directory: dir)
        let config = SessionConfig(sessionId: "torn-utf8", mode: .focus, durationSec: 60)
        let recorder = SessionRecorder(store: store, config: config) { _ in }
        recorder.finish()
        let samples = (0..<3).map {
            BiosignalSample(timestampMs: 1_000 + Int64($0) * 1000, bpm: 60, rrIntervalsMs: [1000],
                            deviceId: "Pulsgurt Jürgen", source: "ble_hrm", sequence: UInt64($0))
        }
        func line(_ s: BiosignalSample) -> Data {
            Data((JSONValue.object(["kind": .string("sample"), "sample": s.jsonValue]).jsonString + "\n").utf8)
        }
        var journal = Data((JSONValue.object(["kind": .string("session"), "session_id": .string("torn-utf8")]).jsonString + "\n").utf8)
        journal += line(samples[0])
        journal += Data(#"{"kind":"event","type":"sensor_status","json":"{\"message\":\"caf"#.utf8) + Data([0xC3, 0x0A])
        journal += line(samples[1]) + line(samples[2])
        try FileManager.default.createDirectory(atPath: dir + "/journal", withIntermediateDirectories: true)
        try journal.write(to: URL(fileURLWithPath: store.journalPath(sessionId: "torn-utf8")))
        #expect(try store.recoverJournals() == ["torn-utf8"])
        #expect(try store.samples(sessionId: "torn-utf8") == samples)

        let orphan = store.journalPath(sessionId: "older")
        try Data((JSONValue.object(["kind": .string("session"), "session_id": .string("older")]).jsonString + "\n").utf8
                 + line(samples[0])).write(to: URL(fileURLWithPath: orphan))
        #expect(try store.recoverJournals() == [])
        #expect(FileManager.default.fileExists(atPath: orphan), "kept: it names no session to import into")
    }

    /// A session recorded while the database could not be opened goes to its journal alone, which holds the
    /// session's row: the first store opened once the database can be imports it as a session of its own (it was
    /// never recorded). One that ended before anything was recorded leaves no journal behind.
    @Test func aJournalOnlyRecordingBecomesASessionOfItsOwn() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let clock = ManualSessionClock(startMs: 1_700_000_000_000)
        let config = SessionConfig(sessionId: "alone", mode: .breathing, durationSec: 60)
        let said = Locked([String]())
        let recorder = SessionRecorder(journalingOnlyIn: dir, config: config, clock: clock) { m in said.withLock { $0.append(m) } }
        #expect(recorder.isJournalingOnly && recorder.isRecording)
        let samples = (0..<4).map {
            BiosignalSample(timestampMs: 1_700_000_001_000 + Int64($0) * 1000, bpm: 60, rrIntervalsMs: [1000],
                            deviceId: "A0", source: "ble_hrm", sequence: UInt64($0))
        }
        for s in samples { recorder.record(s) }
        clock.advance(byMs: 5_000)
        recorder.finish()
        #expect(said.withLock { $0 }.count == 1 && said.withLock { $0 }.first?.contains("4 samples are in") == true,
                "\(said.withLock { $0 })")
        #expect(SessionStore.hasJournals(dir), "kept for the database")
        let store = try #require(try SessionStore.existing(directory: dir), "the waiting journal makes a store")
        let session = try #require(try store.session(id: "alone"))
        #expect(session.mode == "breathing" && session.startedAtMs == 1_700_000_000_000, "\(session)")
        #expect(session.state == .stopped && session.endedAtMs == 1_700_000_005_000, "\(session)")
        #expect(try SessionConfig(json: JSONValue(parsing: session.configJSON)) == config)
        #expect(try store.samples(sessionId: "alone") == samples)
        #expect(!SessionStore.hasJournals(dir))
        // Listed as `sessions list --json` and the relay's GET /v1/sessions list it (the relay's lacked the duration).
        #expect(store.listed(session)["duration_ms"] == .int(5_000), "\(store.listed(session))")

        let empty = SessionRecorder(journalingOnlyIn: dir + "/other", config: SessionConfig(sessionId: "e", mode: .focus, durationSec: 60), clock: clock) { _ in }
        #expect(empty.isJournalingOnly)
        empty.discardUnstarted()
        #expect(!SessionStore.hasJournals(dir + "/other"))
    }

    /// A failing disk kept samples out of the recording, and only the first failure was said: the end now says how
    /// many are lost and how many wait in the journal.
    @Test func whatAFailingDiskKeptOutIsSaidAtTheEnd() {
        var losses = SessionRecorder.Losses()
        #expect(SessionRecorder.describe(losses, sessionId: "s", journal: "/j") == nil)
        losses.lost = (samples: 21, events: 1)
        losses.journalOnly = (samples: 1, events: 0)
        #expect(SessionRecorder.describe(losses, sessionId: "s", journal: "/j") == "recording of session s: 21 samples "
            + "and 1 event could be written neither to the journal nor to the database (the disk was full, or "
            + "failing) and are lost; 1 sample is in /j only, imported into the database by the next "
            + "hr-gateway command that opens the store, once it has room")
    }

    /// The list's figures, read from the samples in one pass: counts, the last sample's time, the devices in the
    /// order of their bytes (a sample without a device by its source), the waveforms; a session without samples
    /// has none of them; `newest` counts only what it shows.
    @Test func theListSaysWhatEachSessionsSamplesHold() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try SessionStore(directory: dir)
        let t0: Int64 = 1_700_000_000_000
        let mixed = SessionRecorder(store: store, config: SessionConfig(sessionId: "mixed", mode: .focus, durationSec: 60), nowMs: t0) { _ in }
        mixed.record(BiosignalSample(timestampMs: t0 + 1000, bpm: 61, rrIntervalsMs: [983, 990], deviceId: "b", source: "ble_hrm"))
        mixed.record(BiosignalSample(timestampMs: t0 + 2000, bpm: 0, deviceId: "A", source: "polar_ecg", ecgUv: [1, 2, 3], ecgRateHz: 130))
        mixed.record(BiosignalSample(timestampMs: t0 + 3500, bpm: 62, rrIntervalsMs: [970], deviceId: "a", source: "ble_hrm"))
        mixed.record(BiosignalSample(timestampMs: t0 + 3000, bpm: 70, source: "camera", confidence: 0.8))
        mixed.record(BiosignalSample(timestampMs: t0 + 2500, bpm: 61, rrIntervalsMs: [980], deviceId: "b", source: "ble_hrm"))
        mixed.finish()
        let empty = SessionRecorder(store: store, config: SessionConfig(sessionId: "empty", mode: .focus, durationSec: 60), nowMs: t0 + 10_000) { _ in }
        empty.finish()
        let moving = SessionRecorder(store: store, config: SessionConfig(sessionId: "moving", mode: .focus, durationSec: 60), nowMs: t0 + 20_000) { _ in }
        moving.record(BiosignalSample(timestampMs: t0 + 21_000, bpm: 0, deviceId: "A", source: "polar_acc", accG: [SIMD3(0, 0, 1)], accRateHz: 25))
        moving.finish()

        let all = try store.list()
        #expect(all.map(\.id) == ["mixed", "empty", "moving"])
        let m = try #require(all.first)
        #expect(m.sampleCount == 5 && m.rrCount == 4 && m.lastSampleMs == t0 + 3500, "\(m)")
        #expect(m.devices == ["A", "a", "b", "camera"] && m.waveforms == ["ecg"], "\(m)")
        #expect(all[1].sampleCount == 0 && all[1].rrCount == 0 && all[1].lastSampleMs == nil && all[1].devices.isEmpty
            && all[1].waveforms.isEmpty, "\(all[1])")
        #expect(all[2].sampleCount == 1 && all[2].devices == ["A"] && all[2].waveforms == ["acc"], "\(all[2])")
        #expect(try store.list(newest: 2).map(\.id) == ["empty", "moving"])
        #expect(try store.list(newest: 1).first?.sampleCount == 1)
        #expect(try store.session(id: "mixed") == m)
        // Pages: the sessions that started before a given one, none skipped or repeated when two share a start.
        let twin = SessionRecorder(store: store, config: SessionConfig(sessionId: "twin", mode: .focus, durationSec: 60), nowMs: t0 + 10_000) { _ in }
        twin.finish()
        #expect(try store.list(newest: 2).map(\.id) == ["twin", "moving"])
        #expect(try store.list(newest: 2, before: "twin").map(\.id) == ["mixed", "empty"])
        #expect(try store.list(newest: 2, before: "empty").map(\.id) == ["mixed"])
        #expect(try store.list(newest: 2, before: "mixed").isEmpty)
        #expect(throws: StoreError.self) { try store.list(newest: 2, before: "nosuch") }
        #expect(try store.session(id: "nosuch") == nil)
    }

    /// A session whose clock jumped by years while it was recorded (a Pi's clock set by NTP after the start, a
    /// corrupt timestamp in a replayed file): its EDF export, a record a second, took all memory. It is refused,
    /// saying why and which formats hold it; the CSV still exports.
    @Test func anEDFSpanningYearsIsRefused() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try SessionStore(directory: dir)
        let recorder = SessionRecorder(store: store, config: SessionConfig(sessionId: "jump", mode: .focus, durationSec: 60)) { _ in }
        recorder.record(BiosignalSample(timestampMs: 1_700_000_000_000, bpm: 61, rrIntervalsMs: [983], deviceId: "A0",
                                        source: "ble_hrm"))
        recorder.record(BiosignalSample(timestampMs: 3_845_000_000_000, bpm: 61, rrIntervalsMs: [983], deviceId: "A0",
                                        source: "ble_hrm"))
        recorder.finish()
        #expect(throws: StoreError.self) { try store.export(id: "jump", format: .edf) }
        do { _ = try store.export(id: "jump", format: .edf) } catch {
            #expect("\(error)".contains("more than the 7 days an EDF export covers"), "\(error)")
            #expect("\(error)".contains("--format csv, jsonl or json"), "\(error)")
        }
        #expect(try store.export(id: "jump", format: .csv).count > 0)
    }

    /// The samples beats are rebuilt from are every sample that is not a raw waveform chunk, as `isWaveformOnly` tells
    /// them (read in SQL, so that a long ECG session's chunks are not held in memory for its beat exports).
    @Test func beatSamplesAreEverySampleButTheWaveformChunks() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try SessionStore(directory: dir)
        let t0 = Int64(Date().timeIntervalSince1970 * 1000) - 100_000
        let r = SessionRecorder(store: store, config: SessionConfig(sessionId: "m", mode: .focus, durationSec: 60), nowMs: t0) { _ in }
        for s in [
            BiosignalSample(timestampMs: t0 + 1000, bpm: 61, rrIntervalsMs: [983], deviceId: "A", source: "ble_hrm"),
            BiosignalSample(timestampMs: t0 + 1100, bpm: 0, deviceId: "A", source: "polar_ecg", gapBefore: true, ecgUv: [1, 2], ecgRateHz: 130),
            BiosignalSample(timestampMs: t0 + 1200, bpm: 0, deviceId: "A", source: "polar_acc", accG: [SIMD3(0, 0, 1)], accRateHz: 25),
            BiosignalSample(timestampMs: t0 + 1300, bpm: 0, rrIntervalsMs: [990], deviceId: "A", source: "ble_hrm"),
            BiosignalSample(timestampMs: t0 + 1400, bpm: 62, deviceId: "A", source: "ble_hrm", contact: .noContact),
            BiosignalSample(timestampMs: t0 + 1500, bpm: 70, source: "camera", confidence: 0.8),
            BiosignalSample(timestampMs: t0 + 1600, bpm: 0, source: "camera"),
        ] { r.record(s) }
        r.finish()
        let all = try store.samples(sessionId: "m", waveforms: false)
        #expect(all.count == 7)
        #expect(try store.beatSamples(sessionId: "m") == all.filter { !$0.isWaveformOnly })
        #expect(try store.beatSamples(sessionId: "m").count == 5)
    }

    /// The checks of an export without the export (a relay's HEAD, a download's status) refuse what the export
    /// refuses, with its words, and pass what it makes: every format of sessions with and without beats, ECG, motion,
    /// a waveform chunk without a rate, and a clock that jumped by years.
    @Test func anExportsChecksAloneAgreeWithTheExport() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try SessionStore(directory: dir)
        // Recent: a session ends at the wall clock's time (an EDF spanning years is refused).
        let t0 = Int64(Date().timeIntervalSince1970 * 1000) - 100_000
        func record(_ id: String, at start: Int64, _ samples: [BiosignalSample]) {
            let r = SessionRecorder(store: store, config: SessionConfig(sessionId: id, mode: .focus, durationSec: 60), nowMs: start) { _ in }
            for s in samples { r.record(s) }
            r.finish()
        }
        record("beats", at: t0, [BiosignalSample(timestampMs: t0 + 1000, bpm: 61, rrIntervalsMs: [983], deviceId: "b", source: "ble_hrm")])
        record("ecg", at: t0, [BiosignalSample(timestampMs: t0 + 2000, bpm: 0, deviceId: "A", source: "polar_ecg", ecgUv: [1, 2, 3], ecgRateHz: 130)])
        record("acc", at: t0, [BiosignalSample(timestampMs: t0 + 2000, bpm: 0, deviceId: "A", source: "polar_acc", accG: [SIMD3(0, 0, 1)], accRateHz: 25)])
        record("no-rate", at: t0, [BiosignalSample(timestampMs: t0 + 2000, bpm: 0, deviceId: "A", source: "polar_ecg", ecgUv: [1, 2], ecgRateHz: 0)])
        record("empty", at: t0, [])
        record("jump", at: t0, [
            BiosignalSample(timestampMs: t0 + 1000, bpm: 61, rrIntervalsMs: [983], deviceId: "A0", source: "ble_hrm"),
            BiosignalSample(timestampMs: t0 + 8 * 86_400_000, bpm: 61, rrIntervalsMs: [983], deviceId: "A0", source: "ble_hrm"),
        ])
        var refused = 0
        for id in ["beats", "ecg", "acc", "no-rate", "empty", "jump", "nosuch"] {
            for format in SessionExport.Format.allCases {
                var exported: String?, checked: String?
                do { _ = try store.export(id: id, format: format) } catch { exported = "\(error)" }
                do { try store.checkExport(id: id, format: format) } catch { checked = "\(error)" }
                #expect(checked == exported, "\(id) as \(format.rawValue): check \(checked ?? "passed"), export \(exported ?? "made")")
                if exported != nil { refused += 1 }
            }
        }
        // nosuch in 6 formats; ecg-csv of beats, acc, no-rate, empty, jump; acc-csv of beats, ecg, no-rate, empty, jump; jump's EDF.
        #expect(refused == 6 + 5 + 5 + 1, "\(refused) refused")
    }

    /// Deleting sessions gave no space back to the disk (SQLite keeps the pages): `compact` does.
    @Test func compactingGivesTheDeletedSessionsSpaceBack() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try SessionStore(directory: dir)
        let recorder = SessionRecorder(store: store, config: SessionConfig(sessionId: "big", mode: .focus, durationSec: 60)) { _ in }
        for k in 0..<20_000 {
            recorder.record(BiosignalSample(timestampMs: 1_700_000_000_000 + Int64(k) * 1000, bpm: 60,
                                            rrIntervalsMs: [1000, 990], deviceId: "A0", source: "ble_hrm"))
        }
        recorder.finish()
        try store.delete(id: "big")
        let (before, after) = try store.compact()
        #expect(before > 1_000_000 && after < before / 4, "\(before) -> \(after) bytes")
        #expect(try store.list().isEmpty)
    }

    @Test func aDuplicateSessionIdIsReportedOnceAndNotRecorded() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try SessionStore(directory: dir)
        let config = SessionConfig(sessionId: "dup", mode: .focus, durationSec: 60)
        let first = SessionRecorder(store: store, config: config) { _ in }
        first.finish()
        let failures = Locked<[String]>([])
        let second = SessionRecorder(store: store, config: config) { m in failures.withLock { $0.append(m) } }
        #expect(!second.isRecording)
        second.record(BiosignalSample(timestampMs: 1, bpm: 60, source: "test"))
        second.record(BiosignalSample(timestampMs: 2, bpm: 60, source: "test"))
        let messages = failures.withLock { $0 }
        #expect(messages.count == 1)
        #expect(messages.first?.contains("already in the store") == true)
        #expect(try store.session(id: "dup")?.sampleCount == 0)
    }

    @Test func aWriteFailureMidSessionIsReportedOnceAndTheSessionGoesOn() async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try SessionStore(directory: dir)
        let clock = ManualSessionClock(startMs: 1_700_000_000_000)
        let config = SessionConfig(sessionId: "broken", mode: .focus, durationSec: 30)
        let failures = Locked<[String]>([])
        let recorder = SessionRecorder(store: store, config: config) { m in failures.withLock { $0.append(m) } }
        let sim = SimulatedBiosignalProvider(model: .sdkMock, seed: 1, clock: clock)
        let engine = SessionEngine(providers: [recorder.wrap(sim)], clock: clock)
        recorder.attach(to: engine)
        let last = Locked<SessionEvent?>(nil)
        let token = engine.observe { e in last.withLock { $0 = e } }
        _ = try await engine.startSession(config)
        clock.advance(byMs: 10_000)
        // Another process breaks the database under the recorder (as a full disk or a lost mount would).
        let sqlite = Process()
        sqlite.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        // (It waits for the recorder's writer, which may be in a transaction with what the advance queued.)
        sqlite.arguments = ["-cmd", ".timeout 10000", store.databasePath, "DROP TABLE samples; DROP TABLE events;"]
        try sqlite.run()
        sqlite.waitUntilExit()
        try #require(sqlite.terminationStatus == 0)
        clock.advance(byMs: 20_000)
        await engine.idle()
        token.cancel()
        recorder.finish()
        #expect(last.withLock { $0 }?.type == "session_summary", "the session ran to its end")
        let messages = failures.withLock { $0 }
        #expect(messages.count == 2, "the first failure, and at the end what it kept out: \(messages)")
        #expect(messages.first?.contains("the session goes on") == true)
        // Every sample after the break is in the journal only (none lost: the journal's disk was fine).
        #expect(messages.last?.hasPrefix("recording of session broken: ") == true, "\(messages)")
        #expect(messages.last?.contains("in \(dir)/journal/") == true && messages.last?.contains("lost") == false,
                "\(messages)")
    }

    @Test func pruneDeletesOnlyFinishedSessionsOlderThanTheCutoff() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try SessionStore(directory: dir)
        for (id, at) in [("old", Int64(1_000)), ("new", Int64(9_000))] {
            SessionRecorder(store: store, config: SessionConfig(sessionId: id, mode: .focus, durationSec: 5), nowMs: at) { _ in }
                .finish()
        }
        #expect(try store.prune(startedBeforeMs: 5_000) == ["old"])
        #expect(try store.list().map(\.id) == ["new"])
    }

    /// keep_days counts from today when the clock is synchronized (a user who stopped recording had sessions 43 days
    /// old kept with keep_days 30, for ever: the days counted from the newest session); without NTP it counts from the
    /// newest session and says what it kept; the gap rule holds a clock ahead only when the clock is not synchronized
    /// (with NTP, a long pause is a long pause).
    @Test func keepDaysCountsFromTodayOnASynchronizedClock() throws {
        let day: Int64 = 86_400_000
        let now = SessionStore.earliestPlausibleMs + 400 * day
        func store(_ sessions: [(String, Int64)]) throws -> (SessionStore, String) {
            let dir = tempDir()
            let store = try SessionStore(directory: dir)
            for (id, at) in sessions {
                SessionRecorder(store: store, config: SessionConfig(sessionId: id, mode: .focus, durationSec: 5), nowMs: at) { _ in }
                    .finish()
            }
            return (store, dir)
        }
        // Nothing recorded for 40 days, keep_days 30.
        let (paused, pausedDir) = try store([("a", now - 45 * day), ("b", now - 40 * day)])
        defer { try? FileManager.default.removeItem(atPath: pausedDir) }
        let unsynced = try paused.prune(keepDays: 30, nowMs: now, clockSynchronized: false)
        #expect(unsynced.deleted.isEmpty && unsynced.held == nil)
        let kept = try #require(unsynced.kept)
        #expect(kept.contains("kept 2 sessions started more than 30 days before today") && kept.contains("--trust-clock"), "\(kept)")
        #expect(try paused.prune(keepDays: 30, nowMs: now, clockSynchronized: true) == .init(deleted: ["a", "b"]))

        // Sessions every ten days, keep_days 7, without NTP: the older ones go (a jump of ten days held every prune).
        let (rhythm, rhythmDir) = try store([("d40", now - 40 * day), ("d30", now - 30 * day), ("d20", now - 20 * day),
                                             ("d10", now - 10 * day)])
        defer { try? FileManager.default.removeItem(atPath: rhythmDir) }
        let pruned = try rhythm.prune(keepDays: 7, nowMs: now, clockSynchronized: false)
        #expect(pruned.deleted == ["d40", "d30", "d20"] && pruned.held == nil, "\(pruned)")

        // A jump longer than keep_days and 90 days, then a session: the gap rule holds without NTP, not with it.
        let (gap, gapDir) = try store([("old", now - 120 * day), ("today", now - 1_000)])
        defer { try? FileManager.default.removeItem(atPath: gapDir) }
        let held = try gap.prune(keepDays: 30, nowMs: now, clockSynchronized: false)
        #expect(held.deleted.isEmpty && held.held?.contains("not synchronized") == true, "\(String(describing: held.held))")
        #expect(try gap.prune(keepDays: 30, nowMs: now, clockSynchronized: false, trustClock: true).deleted == ["old"])

        let (synced, syncedDir) = try store([("old", now - 120 * day), ("today", now - 1_000)])
        defer { try? FileManager.default.removeItem(atPath: syncedDir) }
        #expect(try synced.prune(keepDays: 30, nowMs: now, clockSynchronized: true) == .init(deleted: ["old"]))
        // A clock not set yet deletes nothing, synchronized or not (it is not, whatever the kernel says).
        #expect(try synced.prune(keepDays: 1, nowMs: 86_400_000, clockSynchronized: true).held?.contains("not set yet") == true)
    }

    @Test func anUnwritableStateDirectoryIsAClearError() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/not-a-directory"
        _ = FileManager.default.createFile(atPath: file, contents: Data("x".utf8))
        do {
            _ = try SessionStore(directory: file + "/state")
            Issue.record("opened a store below a regular file")
        } catch {
            #expect("\(error)".contains("cannot create the state directory"))
            #expect("\(error)".contains("--state-dir"))
        }
    }

    @Test func stateDirectoryPrecedence() {
        let env = ["HR_GATEWAY_STATE_DIR": "/env", "STATE_DIRECTORY": "/var/lib/hr-gateway", "XDG_STATE_HOME": "/xdg",
                   "HOME": "/home/u"]
        #expect(StateDirectory.resolve(option: "/cli", configured: "/file", environment: env) == "/cli")
        #expect(StateDirectory.resolve(option: nil, configured: "/file", environment: env) == "/env")
        var e = env
        e["HR_GATEWAY_STATE_DIR"] = nil
        #expect(StateDirectory.resolve(configured: "/file", environment: e) == "/file")
        #expect(StateDirectory.resolve(environment: e) == "/var/lib/hr-gateway")
        e["STATE_DIRECTORY"] = nil
        #expect(StateDirectory.resolve(environment: e) == "/xdg/hr-gateway")
        e["XDG_STATE_HOME"] = "relative"
        #expect(StateDirectory.resolve(environment: e) == "/home/u/.local/state/hr-gateway", "XDG ignores relative paths")
    }

    /// On the service's machine, its owner (`sudo -u hr-gateway …`) and root reach the service's state directory
    /// without --state-dir; another user, or a machine without it, keeps the user's own.
    @Test func theServicesDirectoryIsTheDefaultForItsOwnerAndRoot() throws {
        let service = tempDir()
        defer { try? FileManager.default.removeItem(atPath: service) }
        let env = ["HOME": "/home/u"]
        let own = "/home/u/.local/state/hr-gateway"
        var st = stat()
        #expect(stat(service, &st) == 0)
        #expect(StateDirectory.resolve(environment: env, service: service, euid: st.st_uid) == service)
        #expect(StateDirectory.resolve(environment: env, service: service, euid: 0) == service)
        #expect(StateDirectory.resolve(environment: env, service: service, euid: st.st_uid &+ 4242) == own)
        #expect(StateDirectory.resolve(environment: env, service: service + "/none", euid: 0) == own)
        #expect(StateDirectory.resolve(environment: ["HOME": "/home/u", "STATE_DIRECTORY": "/s"], service: service, euid: 0) == "/s")
        #expect(StateDirectory.resolve(option: "/cli", environment: env, service: service, euid: 0) == "/cli")
    }

    /// A "~" the shell did not expand (quoted, or in a unit's Environment=) is the home directory, not a directory
    /// named "~" under the current one (sessions recorded there could not be found by the next command).
    @Test func aTildeLeftByTheShellIsTheHomeDirectory() {
        let env = ["HOME": "/home/u", "HR_GATEWAY_STATE_DIR": "~/env"]
        #expect(StateDirectory.resolve(option: "~/cli", environment: env) == "/home/u/cli")
        #expect(StateDirectory.resolve(option: "~", environment: env) == "/home/u")
        #expect(StateDirectory.resolve(environment: env) == "/home/u/env")
        #expect(StateDirectory.resolve(option: "~user/x", environment: env) == "~user/x", "only the user's own ~")
    }
}

@Suite struct SessionExportTests {
    /// A strap's notifications over a known beat train: one notification a second (each a little late, by a
    /// varying link latency) carrying the RR of the beats completed since the previous one, as raw 1/1024 s values
    /// and in ms. Returns the samples and the true beat times.
    func strapNotifications(start: Int64 = 1_700_000_000_000, seconds: Int = 60, raw: [UInt16], latencyMs: [Int64],
                            device: String = "AA:BB") -> (samples: [BiosignalSample], beats: [Double]) {
        var beats: [Double] = []
        var t = Double(start)
        var k = 0
        while t < Double(start) + Double(seconds) * 1000 {
            t += Double(raw[k % raw.count]) * 1000 / 1024
            beats.append(t)
            k += 1
        }
        var samples: [BiosignalSample] = []
        var next = 0
        for tick in 1...seconds {
            let packedAt = Double(start) + Double(tick) * 1000
            var rrRaw: [UInt16] = []
            while next < beats.count, beats[next] <= packedAt {
                rrRaw.append(raw[next % raw.count])
                next += 1
            }
            samples.append(BiosignalSample(
                timestampMs: start + Int64(tick) * 1000 + latencyMs[tick % latencyMs.count], bpm: 60,
                rrIntervalsMs: rrRaw.map { Double($0) * 1000 / 1024 }, deviceId: device, source: "ble_hrm",
                contact: .contact, rrRaw1024: rrRaw, sequence: UInt64(tick)))
        }
        return (samples, Array(beats.prefix(next)))
    }

    struct Row {
        var device: String
        var timeMs: Int64
        var rrMs: Double
        var raw: String
        var contact: String
    }

    func rows(_ csv: String) -> [Row] {
        csv.split(separator: "\n").dropFirst().map { line in
            let f = line.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            return Row(device: f[1], timeMs: Int64(f[2])!, rrMs: Double(f[3])!, raw: f[4], contact: f[6])
        }
    }

    @Test func exportedBeatTimesDifferByTheRRBetweenThemAcrossPacketsOfZeroOneAndTwoIntervals() throws {
        let (samples, truth) = strapNotifications(
            raw: [900, 1100, 870, 1240, 1024, 780, 790, 1000, 1180, 760], latencyMs: [35, 180, 60, 290, 20, 110])
        let sizes = Set(samples.map { $0.rrIntervalsMs?.count ?? 0 })
        try #require(sizes == [0, 1, 2], "the train must exercise empty, single and double packets: \(sizes)")
        let out = rows(SessionExport.csv(sessionId: "s", samples: samples))
        #expect(out.count == truth.count)
        // Consecutive beats are exactly their RR apart (to the millisecond: both are rounded to whole ms).
        for (a, b) in zip(out, out.dropFirst()) {
            #expect(abs(Double(b.timeMs - a.timeMs) - b.rrMs) < 1, "\(a) -> \(b)")
        }
        // No beat after the notification that reported it; the most prompt notification's last beat at its arrival.
        var row = 0
        var slack: [Double] = []
        for s in samples {
            for _ in s.rrIntervalsMs ?? [] {
                #expect(out[row].timeMs <= s.timestampMs)
                row += 1
            }
            if let last = s.rrIntervalsMs?.count, last > 0 { slack.append(Double(s.timestampMs - out[row - 1].timeMs)) }
        }
        #expect(slack.min().map { $0 < 1 } == true)
        // Against the truth: off by one constant, the least delay between a beat and the arrival of its report.
        let offsets = zip(out, truth).map { Double($0.timeMs) - $1 }
        #expect(offsets.allSatisfy { abs($0 - offsets[0]) < 1 })
        var seen = 0
        var leastDelay = Double.infinity
        for s in samples where !(s.rrIntervalsMs ?? []).isEmpty {
            seen += s.rrIntervalsMs!.count
            leastDelay = min(leastDelay, Double(s.timestampMs) - truth[seen - 1])
        }
        #expect(abs(offsets[0] - leastDelay) < 1)
        // The raw value and the contact column follow each beat.
        #expect(out.prefix(3).map(\.raw) == ["900", "1100", "870"])
        #expect(out.allSatisfy { $0.contact == "1" })
    }

    /// Notifications without skin contact each start a stretch, anchored at the latest its beats can be (their
    /// arrival); the stretch after them, anchored from its own promptest notification, put its first beat's interval
    /// before the last of theirs (two beats 124 ms apart with an RR of 913, in one export). Beats never overlap:
    /// the earlier stretches move back (their beats only ever earlier than their notifications).
    @Test func stretchesAfterLostContactDoNotOverlap() throws {
        var (samples, truth) = strapNotifications(seconds: 60, raw: [900, 1100, 870, 1010], latencyMs: [20, 400, 60, 250, 30])
        for k in 20...22 { samples[k].contact = .noContact }
        let beats = BeatTimeline.beats(samples)
        #expect(beats.count <= truth.count && beats.count > truth.count - 5)
        for (a, b) in zip(beats, beats.dropFirst()) {
            #expect(b.timeMs - b.rrMs >= a.timeMs - 1e-6, "beat at \(b.timeMs) (RR \(b.rrMs)) starts before the beat at \(a.timeMs)")
        }
        // No beat after the notification that reported it.
        for b in beats { #expect(b.timeMs <= Double(samples[b.sampleIndex].timestampMs) + 1e-6) }
    }

    /// One notification delivered 3 s late (nothing lost, the next on time): the beats break once, at it, as the
    /// engine's runs do (they broke there and again at the next notification, whose beats then ran "ahead" of the
    /// late one's anchor: `hrv` on the CSV export and on the recording disagreed).
    @Test func aLateNotificationBreaksTheBeatsOnceAsTheEngineDoes() throws {
        var (samples, _) = strapNotifications(seconds: 60, raw: [900, 1100, 870, 1010], latencyMs: [20, 60, 40])
        // A notification with beats, followed by one with beats.
        let late = try #require((30..<(samples.count - 1)).first {
            !(samples[$0].rrIntervalsMs ?? []).isEmpty && !(samples[$0 + 1].rrIntervalsMs ?? []).isEmpty
        })
        samples[late].timestampMs += 3_000
        let stretches = BeatTimeline.beats(samples).filter(\.startsSegment).count
        #expect(stretches == SessionMetrics.rrSegments(samples).count)
        #expect(stretches == 2)
    }

    /// A strap's raw ECG chunks, one after a lost PMD frame (`gapBefore`), between its heart-rate notifications: the
    /// beats go on unbroken, as the engine's runs do (the chunk's gap broke the export's beats, and `sessions show`'s
    /// recorded HRV with them).
    @Test func aWaveformChunksGapDoesNotBreakTheBeats() throws {
        let (plain, _) = strapNotifications(raw: [1000, 950, 1080], latencyMs: [50, 90], device: "A")
        var mixed: [BiosignalSample] = []
        for (k, s) in plain.enumerated() {
            mixed.append(s)
            mixed.append(BiosignalSample(timestampMs: s.timestampMs + 5, bpm: 0, deviceId: "A", source: "polar_ecg",
                                         gapBefore: k == plain.count / 2, ecgUv: [1, 2, 3], ecgRateHz: 130))
        }
        #expect(SessionExport.csv(sessionId: "s", samples: mixed) == SessionExport.csv(sessionId: "s", samples: plain))
        #expect(BeatTimeline.beats(mixed).filter(\.startsSegment).count == 1)
        // Numbered notifications with one skipped, and a sample without a number after the skip: still a break.
        var numbered = plain
        for k in numbered.indices { numbered[k].sequence = UInt64(k < 10 ? k : k + 1) }
        numbered[10].sequence = nil
        #expect(BeatTimeline.beats(numbered).filter(\.startsSegment).count == 2)
        #expect(BeatTimeline.recordedHRV(mixed).map(\.result) == BeatTimeline.recordedHRV(plain).map(\.result))
    }

    @Test func aGapRestartsTheTimelineAndEachDeviceHasItsOwn() throws {
        var (first, _) = strapNotifications(raw: [1000, 950, 1080], latencyMs: [50, 90], device: "A")
        // The strap reconnects: 8 s later, flagged as a gap, with a new beat train.
        let later = strapNotifications(start: first.last!.timestampMs + 8_000, seconds: 20, raw: [700, 760],
                                       latencyMs: [10, 400], device: "A")
        var second = later.samples
        second[0].gapBefore = true
        let other = strapNotifications(seconds: 30, raw: [820], latencyMs: [70], device: "B").samples
        first += second
        // Interleave B's notifications with A's, in arrival order.
        let all = (first + other).sorted { $0.timestampMs < $1.timestampMs }
        let out = rows(SessionExport.csv(sessionId: "s", samples: all))
        for device in ["A", "B"] {
            let mine = out.filter { $0.device == device }
            let steps = zip(mine, mine.dropFirst()).filter { abs(Double($1.timeMs - $0.timeMs) - $1.rrMs) >= 1 }
            #expect(steps.count == (device == "A" ? 1 : 0), "\(device): \(steps)")
        }
        let jumps = zip(out.filter { $0.device == "A" }, out.filter { $0.device == "A" }.dropFirst())
            .filter { abs(Double($1.timeMs - $0.timeMs) - $1.rrMs) >= 1 }
        // The beat after the gap is placed from its own notification, not from the RR before the gap.
        let anchored = try #require(jumps.first?.1)
        #expect(anchored.timeMs > first[first.count - second.count - 1].timestampMs + 7_000)
        let beats = try #require(SessionExport.beatsJSON(samples: all).arrayValue)
        #expect(beats.filter { $0["segment_start"] == .bool(true) }.count == 3, "A's start, A after the gap, B's start")
        // The JSON export's beats carry the CSV's row, field for field.
        let csvLines = SessionExport.csv(sessionId: "s", samples: all).split(separator: "\n").dropFirst()
        #expect(beats.count == csvLines.count)
        for (beat, line) in zip(beats, csvLines) {
            let f = line.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            let contact: JSONValue? = f[6] == "1" ? .bool(true) : f[6] == "0" ? .bool(false) : nil
            #expect((beat["segment_start"] == .bool(true)) == (f[7] == "1") && ["0", "1"].contains(f[7]))
            #expect(beat["device_id"]?.stringValue == f[1] && beat["beat_time_ms"]?.intValue == Int64(f[2])
                && beat["rr_ms"]?.doubleValue == Double(f[3]) && beat["rr_1024"]?.intValue == Int64(f[4])
                && beat["hr_bpm"]?.doubleValue == Double(f[5]) && beat["contact"] == contact, "\(beat) vs \(line)")
        }
    }

    @Test func aSimulatedStrapIsExportedWithEachBeatInTheSecondBeforeItsNotification() async throws {
        let clock = ManualSessionClock(startMs: 1_700_000_000_000)
        let sim = SimulatedBiosignalProvider(
            model: .realistic, physiology: .init(meanHeartRateBpm: 60, ectopicProbability: 0.02), seed: 9, clock: clock)
        let got = Locked<[BiosignalSample]>([])
        try await sim.startStreaming(into: ProviderSink(onSample: { s in got.withLock { $0.append(s) } }))
        clock.advance(byMs: 300_000)
        await sim.stopStreaming()
        let samples = got.withLock { $0 }
        #expect(Set(samples.map { $0.rrIntervalsMs?.count ?? 0 }) == [0, 1, 2])
        let out = rows(SessionExport.csv(sessionId: "s", samples: samples))
        for (a, b) in zip(out, out.dropFirst()) { #expect(b.timeMs - a.timeMs == Int64(b.rrMs)) }
        var row = 0
        for s in samples {
            for _ in s.rrIntervalsMs ?? [] {
                #expect(out[row].timeMs <= s.timestampMs && out[row].timeMs > s.timestampMs - 1000)
                row += 1
            }
        }
    }

    @Test func csvHasOneRowPerBeatWithContactAsOneZeroOrEmpty() {
        let samples = [
            BiosignalSample(timestampMs: 10_000, bpm: 66, rrIntervalsMs: [1000, 800], deviceId: "AA:BB", source: "ble_hrm",
                            contact: .contact, rrRaw1024: [1024, 819]),
            BiosignalSample(timestampMs: 10_500, bpm: 0, source: "camera_rppg", confidence: 0.3),
            BiosignalSample(timestampMs: 11_000, bpm: 60.5, rrIntervalsMs: [1000.5], deviceId: "x,y", source: "ble_hrm",
                            contact: .notSupported),
            BiosignalSample(timestampMs: 11_900, bpm: 75, rrIntervalsMs: [900], deviceId: "AA:BB", source: "ble_hrm",
                            contact: .noContact),
        ]
        let lines = SessionExport.csv(sessionId: "s", samples: samples).split(separator: "\n").map(String.init)
        #expect(lines == [
            SessionExport.csvHeader,
            "s,AA:BB,9200,1000,1024,66,1,1",
            "s,AA:BB,10000,800,819,66,1,0",
            "s,\"x,y\",11000,1000.5,,60.5,,1",
            "s,AA:BB,11900,900,,75,0,1",  // no skin contact: a new stretch
        ])
    }

    @Test func jsonlIsTheReplayFormat() throws {
        let samples = [BiosignalSample(timestampMs: 5, bpm: 61, rrIntervalsMs: [980], deviceId: "d", source: "ble_hrm",
                                       sequence: 7, gapBefore: true)]
        let text = SessionExport.jsonl(samples: samples)
        let back = try text.split(separator: "\n").map { try BiosignalSample(json: JSONValue(parsing: String($0))) }
        #expect(back == samples)
    }
}

struct SessionStoreOpenErrorTests {
    /// A state directory that cannot be created is named with the reason in a few words, not a Foundation dump.
    @Test func aStateDirectoryBehindAFileSaysWhy() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(FileManager.default.createFile(atPath: dir + "/file", contents: Data()))
        let error = #expect(throws: StoreError.self) { _ = try SessionStore(directory: dir + "/file/state") }
        let text = "\(error.map { "\($0)" } ?? "")"
        #expect(text.contains("cannot create the state directory \(dir)/file/state"), "\(text)")
        #expect(!text.contains("Error Domain"), "\(text)")
        #expect(text.contains("Not a directory (\(dir)/file/state)"), "\(text)")
    }
}

@Suite struct WaveformCSVTests {
    func ecgChunk(_ ms: Int64, _ values: [Int32], device: String = "A0:9E", gap: Bool = false) -> BiosignalSample {
        BiosignalSample(timestampMs: ms, bpm: 0, deviceId: device, source: "polar_ecg", gapBefore: gap,
                        ecgUv: values, ecgRateHz: 130)
    }

    func rows(_ csv: String) -> [[String]] {
        csv.split(separator: "\n").dropFirst().map { $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init) }
    }

    /// Chunks whose times wander by a few ms (the strap clock's mapping, rounded to the ms) give samples exactly
    /// 1/130 s apart, every value once and in order; lost frames start a segment at the chunk's own time.
    @Test func samplesAreExactlyOneRateApartWithinASegment() throws {
        let t0: Int64 = 1_700_000_000_000
        let values = (0..<(73 * 4)).map { Int32($0 * 3 - 400) }
        var samples: [BiosignalSample] = []
        for k in 0..<3 {
            let ms = t0 + Int64((Double(k * 73) * 1000 / 130).rounded()) + [0, 4, -3][k]
            samples.append(ecgChunk(ms, Array(values[(k * 73)..<((k + 1) * 73)])))
        }
        // The fourth chunk after a lost one: flagged, and placed at its own time.
        let lateMs = t0 + Int64((Double(5 * 73) * 1000 / 130).rounded()) + 2
        samples.append(ecgChunk(lateMs, Array(values[(3 * 73)...]), gap: true))
        // A heart-rate sample between them is not a row.
        samples.insert(BiosignalSample(timestampMs: t0 + 500, bpm: 61, rrIntervalsMs: [980], deviceId: "A0:9E",
                                       source: "ble_hrm"), at: 1)

        let csv = try #require(SessionExport.waveformCSV(sessionId: "s", samples: samples, waveform: .ecg))
        #expect(csv.hasPrefix("session_id,device_id,time_ms,ecg_uv,segment_start\n"))
        let r = rows(csv)
        #expect(r.count == values.count)
        #expect(r.map { Int32($0[3]) } == values.map { Optional($0) }, "every value once, in order")
        let times = r.compactMap { Double($0[2]) }
        let steps = zip(times, times.dropFirst()).map { $1 - $0 }
        #expect(steps.prefix(3 * 73 - 1).allSatisfy { abs($0 - 1000 / 130) < 0.0011 }, "\(steps.prefix(5))")
        #expect(times[0] == Double(t0))
        #expect(abs(times[3 * 73] - Double(lateMs)) < 1000 / 130, "after the gap: at its own time")
        #expect(r.map { $0[4] }.enumerated().filter { $0.element == "1" }.map(\.offset) == [0, 3 * 73])
        #expect(r.allSatisfy { $0[0] == "s" && $0[1] == "A0:9E" })

        let tracks = SessionExport.waveformTracks(samples: samples, waveform: .ecg)
        #expect(tracks.count == 1)
        #expect(tracks.first?.samples == values.count && tracks.first?.segments == 2)
        #expect(tracks.first?.firstMs == times.first && abs((tracks.first?.lastMs ?? 0) - (times.last ?? 0)) < 0.001)
        #expect(SessionExport.waveformTracks(samples: samples, waveform: .acc).isEmpty)
    }

    /// A strap whose "130 Hz" is really 130.17 Hz (a real H10's, in a public capture: 73 samples every 560.81 ms):
    /// one segment over a minute, its samples evenly spaced at the real rate, each at its time. Spaced at 130 Hz they
    /// would fall 0.73 ms further behind with every chunk, and a new segment would start every 38 s.
    @Test func aStrapOffItsNominalRateIsOneSegmentAtItsRealRate() throws {
        let t0: Int64 = 1_700_000_000_000
        let rate = 130.17
        let values = (0..<(73 * 107)).map { Int32($0 % 400) }
        var samples: [BiosignalSample] = []
        for start in stride(from: 0, to: values.count, by: 73) {
            samples.append(ecgChunk(t0 + Int64((Double(start) * 1000 / rate).rounded()), Array(values[start..<(start + 73)])))
        }
        let r = rows(try #require(SessionExport.waveformCSV(sessionId: "s", samples: samples, waveform: .ecg)))
        #expect(r.map { Int32($0[3]) } == values.map { Optional($0) })
        #expect(r.filter { $0[4] == "1" }.count == 1, "one segment")
        let times = r.compactMap { Double($0[2]) }
        for (k, t) in times.enumerated() {
            #expect(abs(t - (Double(t0) + Double(k) * 1000 / rate)) < 0.6, "sample \(k) at \(t)")
        }
        let tracks = SessionExport.waveformTracks(samples: samples, waveform: .ecg)
        #expect(tracks.count == 1 && tracks.first?.segments == 1)
        #expect(tracks.first?.text.contains("at 130 Hz (sampled at 130.17 Hz) over 60.0 s, 1 segment") == true,
                "\(tracks.first?.text ?? "")")
    }

    @Test func eachDeviceHasItsOwnTimelineAndAccelerometerRowsHaveThreeAxes() throws {
        let t0: Int64 = 1_700_000_000_000
        let samples = [
            ecgChunk(t0, [1, 2], device: "A"), ecgChunk(t0 + 3, [7, 8], device: "B"),
            ecgChunk(t0 + 15, [3, 4], device: "A"),
        ]
        let r = rows(try #require(SessionExport.waveformCSV(sessionId: "s", samples: samples, waveform: .ecg)))
        #expect(r.filter { $0[1] == "A" }.map { $0[3] } == ["1", "2", "3", "4"])
        #expect(r.filter { $0[1] == "A" }.map { $0[4] } == ["1", "0", "0", "0"], "A's second chunk continues its first")
        #expect(r.filter { $0[1] == "B" }.first?[2] == String(format: "%.3f", Double(t0 + 3)))

        let acc = BiosignalSample(timestampMs: t0, bpm: 0, deviceId: "A", source: "polar_acc",
                                  accG: [SIMD3(0.01, -0.5, 1), SIMD3(0.02, -0.25, 0.98)], accRateHz: 50)
        let a = try #require(SessionExport.waveformCSV(sessionId: "s", samples: [acc], waveform: .acc))
        #expect(a == """
            session_id,device_id,time_ms,x_g,y_g,z_g,segment_start
            s,A,1700000000000.000,0.01,-0.5,1,1
            s,A,1700000000020.000,0.02,-0.25,0.98,0

            """)
        #expect(SessionExport.waveformCSV(sessionId: "s", samples: samples, waveform: .acc) == nil)
    }
}
