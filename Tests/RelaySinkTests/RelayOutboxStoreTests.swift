import Foundation
import GatewayEngine
import SimulatedProvider
import StorageTestSupport
import Testing

@testable import RelayCore
@testable import RelayStore

@Suite struct RelayOutboxStoreTests {
    let start = #"{"command":"start_session","session_id":"s1","mode":"focus","duration_sec":600,"profile":{"window_sec":30,"emit_interval_sec":5},"window_label":"desk","id":"c1"}"#

    func tempDir() -> String { NSTemporaryDirectory() + "relay-outbox-" + UUID().uuidString }

    /// A hub over a real engine on a manual clock, persisting into `directory`.
    func rig(
        _ directory: String, onStoreFailure: (@Sendable (String) -> Void)? = nil
    ) throws -> (Rig, RelayOutboxStore) {
        let store = try RelayOutboxStore(directory: directory)
        let clock = ManualSessionClock(startMs: 1_000_000)
        let engine = SessionEngine(providers: [SimulatedBiosignalProvider(seed: 3, clock: clock)], clock: clock)
        let hub = RelayHub(
            controller: EngineRelayController(engine: engine), clock: clock, store: store, onStoreFailure: onStoreFailure)
        return (Rig(clock: clock, engine: engine, hub: hub, token: hub.attach(to: engine)), store)
    }

    /// After a restart, a consumer of the new run resuming from a number below the run's first (0, as a client with
    /// nothing yet sends it) lost nothing of this run: it was answered `complete: false`.
    @Test func aResumeBelowThisRunsFirstNumberIsComplete() async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        do {
            let (rig, _) = try rig(dir)
            let phone = rig.hub.connect(Rig.phone)
            _ = try #require(await rig.send(start, phone))
            rig.clock.advance(byMs: 12_000)
            _ = await rig.send(#"{"command":"stop_session","session_id":"s1"}"#, phone)
            rig.hub.disconnect(phone)
            rig.token.cancel()
            await rig.engine.dispose()
        }
        let (rig, _) = try rig(dir)
        let phone = rig.hub.connect(Rig.phone)
        _ = try #require(await rig.send(start.replacingOccurrences(of: "s1", with: "s2"), phone))
        rig.clock.advance(byMs: 6_000)
        let again = rig.hub.connect(Rig.phone)
        let hello = try #require(await rig.send(
            #"{"command":"hello","resume":{"epoch":"\#(rig.hub.epoch)","last_seq":0},"id":"h"}"#, again))
        #expect(hello["complete"] == .bool(true), "\(hello)")
        #expect((hello["replayed"]?.intValue ?? 0) > 0, "\(hello)")
        rig.token.cancel()
        await rig.engine.dispose()
    }

    @Test func reliableEventsNotAcknowledgedBeforeARestartAreDeliveredAfterIt() async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var before: [[String: JSONValue]] = []
        var lastSeqBefore: Int64 = 0
        do {
            let (rig, _) = try rig(dir)
            let phone = rig.hub.connect(Rig.phone)
            _ = try #require(await rig.send(start, phone))
            rig.clock.advance(byMs: 12_000)
            _ = await rig.send(#"{"command":"stop_session","session_id":"s1"}"#, phone)
            before = try messages(phone.queue).filter { $0["delivery"] == .string("reliable") }
            lastSeqBefore = rig.hub.lastSeq
            rig.hub.disconnect(phone)
            rig.token.cancel()
            await rig.engine.dispose()
        }
        #expect(types(before) == ["session_started", "session_summary"])
        let (rig, store) = try rig(dir)
        #expect(store.snapshot.events.count == 2)
        #expect(rig.hub.lastSeq >= lastSeqBefore, "relay_seq goes on from where it was, never back")
        let phone = rig.hub.connect(Rig.phone)
        let after = try messages(phone.queue).filter { $0["delivery"] == .string("reliable") }
        #expect(after == before, "the same events, with the same relay_seq, in order")
        let viewer = rig.hub.connect(Rig.viewer)
        #expect(try messages(viewer.queue).allSatisfy { $0["delivery"] != .string("reliable") },
                "a token first seen after the restart starts from now")
        let last = try #require(after.last?["relay_seq"]?.intValue)
        _ = await rig.send(#"{"command":"ack","relay_seq":\#(last)}"#, phone)
        _ = await rig.send(start, phone)
        let fresh = try #require(try messages(phone.queue).first { $0["type"] == .string("session_started") })
        #expect((fresh["relay_seq"]?.intValue ?? 0) > last)
        await rig.engine.dispose()
    }

    @Test func anAcknowledgementIsKeptAcrossARestart() async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        do {
            let (rig, _) = try rig(dir)
            let phone = rig.hub.connect(Rig.phone)
            _ = try #require(await rig.send(start, phone))
            let seq = try #require(try messages(phone.queue).first { $0["type"] == .string("session_started") }?["relay_seq"]?.intValue)
            _ = await rig.send(#"{"command":"ack","relay_seq":\#(seq)}"#, phone)
            await rig.engine.dispose()
            await rig.hub.settled()
        }
        let store = try RelayOutboxStore(directory: dir)
        #expect(store.snapshot.events.isEmpty, "acknowledged by the only consumer: dropped from disk")
        #expect(store.snapshot.cursors["phone"] != nil)
    }

    /// Another process holding relay.sqlite (`sqlite3`, a backup) holds neither the hub's lock nor a thread of the
    /// concurrency pool: the summary published meanwhile waits, invisible, for its write (durable before any consumer
    /// sees it), while commands and acknowledgements are answered at once; once the file is free both are on disk.
    @Test func aLockedOutboxHoldsNeitherTheHubNorThePool() async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let failures = Locked<[String]>([])
        var started: Int64 = 0
        do {
            let (rig, _) = try rig(dir, onStoreFailure: { e in failures.withLock { $0.append(e) } })
            let (clock, hub) = (rig.clock, rig.hub)
            let phone = hub.connect(Rig.phone)
            _ = try #require(await rig.send(start, phone))
            started = try #require(try messages(phone.queue).first { $0["type"] == .string("session_started") }?["relay_seq"]?.intValue)
            clock.advance(byMs: 12_000)

            let lock = try OutsideLock(path: dir + "/relay.sqlite")
            let stop = await hub.response(to: #"{"command":"stop_session","session_id":"s1","id":"stop"}"#, from: phone)
            #expect(stop?["ok"] == .bool(true), "the command returns while its summary waits for the file")
            #expect(hub.heldCount == 1, "the summary is numbered and held until it is on disk")
            #expect(try messages(phone.queue).allSatisfy { $0["type"] != .string("session_summary") })
            // More commands than the pool has threads, each needing the hub's lock, while the write waits.
            let commands = 2 * ProcessInfo.processInfo.activeProcessorCount + 2
            let answers = await withTaskGroup(of: JSONValue?.self) { group in
                for i in 0..<commands {
                    group.addTask { await hub.response(to: #"{"command":"get_status","id":"s\#(i)"}"#, from: phone) }
                }
                return await group.reduce(into: [JSONValue?]()) { $0.append($1) }
            }
            #expect(answers.count == commands && answers.allSatisfy { $0?["ok"] == .bool(true) })
            let ack = await hub.response(to: #"{"command":"ack","relay_seq":\#(started),"id":"ack"}"#, from: phone)
            #expect(ack?["acked_through"]?.intValue == started)
            #expect(await Task.detached { 42 }.value == 42, "the pool runs other work meanwhile")
            #expect(hub.heldCount == 1 && failures.withLock { $0 }.isEmpty, "still waiting, nothing given up")
            // A consumer connecting meanwhile: a replay it asks for stops at the last visible event, without the
            // held summary, which reaches it live once written.
            let viewer = hub.connect(Rig.viewer)
            let hello = await hub.response(
                to: #"{"command":"hello","resume":{"epoch":"\#(hub.epoch)","last_seq":\#(started - 1)},"id":"h"}"#, from: viewer)
            #expect(hello?["ok"] == .bool(true))
            let replayed = try messages(viewer.queue)
            let lastVisible = try #require(replayed.first { $0["type"] == .string("welcome") }?["relay_seq_last"]?.intValue)
            let numbers = replayed.compactMap { $0["relay_seq"]?.intValue }
            #expect(!numbers.isEmpty && numbers.allSatisfy { $0 <= lastVisible }, "the replay stops at the last visible number")
            #expect(replayed.allSatisfy { $0["type"] != .string("session_summary") }, "and not the held summary")
            #expect(try lock.release() == "released on request")

            await hub.settled()
            #expect(hub.heldCount == 0)
            let after = try messages(phone.queue)
            #expect(after.filter { $0["type"] == .string("session_summary") }.count == 1, "visible once written")
            #expect(try messages(viewer.queue).filter { $0["type"] == .string("session_summary") }.count == 1,
                    "the late consumer gets the summary live, once")
            rig.token.cancel()
            await rig.engine.dispose()
        }
        #expect(failures.withLock { $0 }.isEmpty)
        let reopened = try RelayOutboxStore(directory: dir)
        #expect(reopened.snapshot.cursors["phone"] == started, "the acknowledgement made while the file was held")
        #expect(reopened.snapshot.events.map { try? JSONValue(parsing: $0.text)["type"] } == [.string("session_summary")],
                "the summary is on disk and session_started, acknowledged, is gone")
    }

    /// A `start_session` answered while its `session_started` waits for relay.sqlite (held by another process longer
    /// than the result's usual wait) still reaches the consumer after the event, never before it.
    @Test func aStartResultWaitsForItsHeldSessionStarted() async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (rig, _) = try rig(dir)
        let phone = rig.hub.connect(Rig.phone)
        await rig.hub.settled()
        let lock = try OutsideLock(path: dir + "/relay.sqlite")
        let starting = Task { await rig.hub.handle(text: start, from: phone) }
        // The event is numbered and held, and the command waits for it with its timer set.
        while rig.hub.heldCount == 0 || rig.hub.startWaiterCount == 0 { await Task.yield() }
        // The result's own wait (5 s) runs out while the event is held.
        rig.clock.advance(byMs: RelayHub.startedWaitMs + 1_000)
        #expect(rig.hub.startWaiterCount == 1, "still waiting for its session_started")
        #expect(try lock.release() == "released on request")
        await starting.value
        await rig.hub.settled()
        let types = try messages(phone.queue).compactMap { $0["type"]?.stringValue }
        let started = try #require(types.firstIndex(of: "session_started"))
        let result = try #require(types.firstIndex(of: "command_result"))
        #expect(started < result, "\(types)")
        await rig.engine.dispose()
    }

    @Test func oneGatewayAtATimeUsesAStateDirectory() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        do {
            let first = try RelayOutboxStore(directory: dir)
            #expect(throws: RelayOutboxStoreError.self) { _ = try RelayOutboxStore(directory: dir) }
            withExtendedLifetime(first) {}
        }
        // Released with the first store.
        #expect(throws: Never.self) { _ = try RelayOutboxStore(directory: dir) }
    }

    @Test func aDamagedFileIsRefusedWithItsPath() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try Data(repeating: 0x5A, count: 4096).write(to: URL(fileURLWithPath: dir + "/relay.sqlite"))
        let error = #expect(throws: RelayOutboxStoreError.self) { _ = try RelayOutboxStore(directory: dir) }
        #expect(error?.description.contains("relay.sqlite") == true)
    }
}
