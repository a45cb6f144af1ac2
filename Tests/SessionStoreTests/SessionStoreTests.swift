import Foundation
import GatewayEngine
import SessionStore
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
        sqlite.arguments = [store.databasePath, "DROP TABLE samples; DROP TABLE events;"]
        try sqlite.run()
        sqlite.waitUntilExit()
        try #require(sqlite.terminationStatus == 0)
        clock.advance(byMs: 20_000)
        token.cancel()
        recorder.finish()
        #expect(last.withLock { $0 }?.type == "session_summary", "the session ran to its end")
        let messages = failures.withLock { $0 }
        #expect(messages.count == 1, "\(messages)")
        #expect(messages.first?.contains("the session goes on") == true)
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
}

@Suite struct SessionExportTests {
    @Test func csvHasOneRowPerBeatTimedBackFromTheSample() {
        let samples = [
            BiosignalSample(timestampMs: 10_000, bpm: 66, rrIntervalsMs: [1000, 800], deviceId: "AA:BB", source: "ble_hrm",
                            contact: .contact, rrRaw1024: [1024, 819]),
            BiosignalSample(timestampMs: 10_500, bpm: 0, source: "camera_rppg", confidence: 0.3),
            BiosignalSample(timestampMs: 11_000, bpm: 60.5, rrIntervalsMs: [1000.5], deviceId: "x,y", source: "ble_hrm"),
        ]
        let lines = SessionExport.csv(sessionId: "s", samples: samples).split(separator: "\n").map(String.init)
        #expect(lines == [
            SessionExport.csvHeader,
            "s,AA:BB,9200,1000,1024,66,contact",
            "s,AA:BB,10000,800,819,66,contact",
            "s,\"x,y\",11000,1000.5,,60.5,",
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
