import Foundation
import GatewayEngine
import GatewayStorage
import StorageTestSupport
import Testing
@testable import WebhookSink
import WebhookTestSupport

/// A clock the test moves by hand.
final class ManualNow: Sendable {
    private let ms = Locked<Int64>(1_700_000_000_000)
    var value: Int64 { ms.withLock { $0 } }
    func advance(_ d: Int64) { ms.withLock { $0 += d } }
}

private func tempDir() -> String {
    let p = FileManager.default.temporaryDirectory.appendingPathComponent("webhook-\(UUID().uuidString)").path
    try? FileManager.default.createDirectory(atPath: p, withIntermediateDirectories: true)
    return p
}

/// The samples of each `biosignal_batch` the server accepted, in order.
private func sampleBatches(_ server: FlakyServer) throws -> [[BiosignalSample]] {
    try server.accepted().map { try JSONValue(parsing: $0.body) }.filter { $0["type"] == .string("biosignal_batch") }
        .map { batch in try (batch["samples"]?.arrayValue ?? []).map { try BiosignalSample(json: $0) } }
}

/// `count` strap samples a second apart, 70 bpm.
private func strapSamples(_ count: Int) -> [BiosignalSample] {
    (0..<count).map { BiosignalSample(timestampMs: 1_000 * Int64($0), bpm: 70, rrIntervalsMs: [857], source: "ble") }
}

private func summary(_ id: String = "s-\(UUID().uuidString)") -> SessionEvent {
    var m = SessionMetrics()
    m.hrMeanBpm = 61.5
    m.rmssdMs = 42.25
    m.sampleCount = 120
    m.rrCount = 118
    return .summary(sessionId: id, durationActualSec: 120, metrics: m, behavior: nil)
}

/// A forwarder on `now`; `pause` (between tries of a sample waiting for a lock) is real unless a test gives its own.
private func forwarder(
    _ dir: String, _ now: ManualNow, backoff: WebhookBackoff = WebhookBackoff(jitter: 0),
    pause: @escaping @Sendable (Int64) -> Void = { Thread.sleep(forTimeInterval: Double($0) / 1_000) }
) throws -> WebhookForwarder {
    WebhookForwarder(
        outbox: try WebhookOutbox(directory: dir), backoff: backoff, timeoutSec: 5,
        now: { now.value }, random: { 0.5 },
        sleep: { _ in Issue.record("no sleeping in these tests") }, pause: pause)
}

@Suite struct WebhookForwarderTests {
    @Test func summaryArrivesOnceWithItsExactJSONAfterFailures() async throws {
        let server = try FlakyServer(failing: 2)
        let now = ManualNow()
        let f = try forwarder(tempDir(), now)
        let event = summary()
        try f.enqueue(event, to: server.url)
        #expect(try f.outbox.pending().count == 1)

        var r = try await f.deliverDue()
        #expect(r.failed == 1 && r.delivered == 0 && r.remaining == 1)
        // Not due again until the backoff has passed.
        r = try await f.deliverDue()
        #expect(r.failed == 0 && r.delivered == 0)
        #expect(server.requestCount() == 1)

        for _ in 0..<4 where try f.outbox.pending().count > 0 {
            now.advance(3_600_000)
            r = try await f.deliverDue()
        }
        #expect(try f.outbox.pending().isEmpty)
        #expect(server.requestCount() == 3)
        let accepted = server.accepted()
        try #require(accepted.count == 1)
        #expect(accepted[0].body == event.jsonValue.jsonString)
        #expect(accepted[0].contentType == "application/json")
        // The SHA-256 of the body (sha256sum of the same bytes: 64 hex digits), the same on every attempt.
        #expect(accepted[0].idempotencyKey == HTTPClientWebhookTransport.idempotencyKey(of: accepted[0].body))
        #expect(HTTPClientWebhookTransport.idempotencyKey(of: "abc")
            == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        let parsed = try JSONValue(parsing: accepted[0].body)
        #expect(parsed.objectValue?["type"]?.stringValue == "session_summary")
        #expect(parsed.objectValue?["session_id"]?.stringValue == event.sessionId)

        // Nothing more is sent once delivered.
        now.advance(3_600_000)
        r = try await f.deliverDue()
        #expect(r.delivered == 0 && server.requestCount() == 3)
    }

    @Test func connectionRefusedIsRetriedAndKept() async throws {
        let now = ManualNow()
        let f = try forwarder(tempDir(), now)
        let event = summary()
        try f.enqueue(event, to: URL(string: "http://127.0.0.1:\(closedPort())/hook")!)
        for _ in 0..<3 {
            let r = try await f.deliverDue()
            #expect(r.failed == 1 && r.remaining == 1)
            now.advance(3_600_000)
        }
        let stored = try #require(try f.outbox.pending().first)
        #expect(stored.attempts == 3)
        // What happened, in words: the address that refused, not a timeout after the client's own retries.
        let error = try #require(stored.lastError)
        #expect(error.hasPrefix("could not connect to 127.0.0.1:"), "\(error)")
        #expect(stored.body == event.jsonValue.jsonString)
    }

    @Test func aLaterForwarderDeliversWhatAnEarlierOneCouldNot() async throws {
        let dir = tempDir()
        let now = ManualNow()
        let server = try FlakyServer(failing: 3)
        let event = summary()
        do {
            let first = try forwarder(dir, now)
            try first.enqueue(event, to: server.url)
            try await first.deliverDue()
            now.advance(3_600_000)
            try await first.deliverDue()
        }
        let stored = try WebhookOutbox(directory: dir).pending()
        #expect(stored.map(\.attempts) == [2])
        #expect(stored.map(\.body) == [event.jsonValue.jsonString])
        #expect(stored.first?.lastError == "HTTP 500")
        #expect(server.accepted().isEmpty)

        let second = try forwarder(dir, now)
        now.advance(3_600_000)
        var r = try await second.deliverDue()
        #expect(r.failed == 1)
        now.advance(3_600_000)
        r = try await second.deliverDue()
        #expect(r.delivered == 1 && r.remaining == 0)
        #expect(server.accepted().map(\.body) == [event.jsonValue.jsonString])
    }

    @Test func droppedConnectionsAreRetried() async throws {
        let server = try FlakyServer(failing: 2, mode: .drop)
        let now = ManualNow()
        let f = try forwarder(tempDir(), now)
        try f.enqueue(summary(), to: server.url)
        var errors: [String?] = []
        for _ in 0..<5 where try f.outbox.pending().count > 0 {
            try await f.deliverDue()
            errors.append(try f.outbox.pending().first?.lastError)
            now.advance(3_600_000)
        }
        #expect(try f.outbox.pending().isEmpty)
        #expect(server.accepted().count == 1)
        #expect(server.requestCount() == 3)
        #expect(errors.prefix(2).allSatisfy { $0 != nil && $0?.contains("HTTP") == false })
    }

    @Test func serverErrorsAreRecordedAsHTTPStatus() async throws {
        let server = try FlakyServer(failing: 1)
        let now = ManualNow()
        let f = try forwarder(tempDir(), now)
        try f.enqueue(summary(), to: server.url)
        try await f.deliverDue()
        #expect(try f.outbox.pending().first?.lastError == "HTTP 500")
    }

    @Test func backoffGrowsBetweenAttempts() async throws {
        let now = ManualNow()
        let f = try forwarder(
            tempDir(), now, backoff: WebhookBackoff(baseMs: 1_000, maxMs: 60_000, jitter: 0.25))
        try f.enqueue(summary(), to: URL(string: "http://127.0.0.1:\(closedPort())/hook")!)
        var waits: [Int64] = []
        for _ in 0..<8 {
            try await f.deliverDue()
            let item = try #require(try f.outbox.pending().first)
            waits.append(item.nextAttemptMs - now.value)
            // One millisecond before it is due, nothing is attempted.
            now.advance(item.nextAttemptMs - now.value - 1)
            let early = try await f.deliverDue()
            #expect(early.failed == 0)
            now.advance(1)
        }
        #expect(zip(waits, waits.dropFirst()).allSatisfy { $0 <= $1 })
        #expect(waits[0] >= 1_000 && waits[0] <= 1_250)
        #expect(waits[1] >= 2_000 && waits[1] <= 2_500)
        #expect(waits[3] > waits[2] && waits[2] > waits[1])
        // Capped at the maximum (plus jitter).
        #expect(waits[7] >= 60_000 && waits[7] <= 75_000)
    }

    @Test func jitterStaysWithinItsFraction() {
        let b = WebhookBackoff(baseMs: 500, maxMs: 10_000, jitter: 0.25)
        #expect(b.delayMs(afterAttempts: 1, random: 0) == 500)
        #expect(b.delayMs(afterAttempts: 1, random: 0.999) < 625)
        #expect(b.delayMs(afterAttempts: 3, random: 0) == 2_000)
        #expect(b.delayMs(afterAttempts: 100, random: 0) == 10_000)
    }

    @Test func aSuccessRemovesOnlyTheDeliveredItem() async throws {
        let server = try FlakyServer(failing: 0)
        let now = ManualNow()
        let f = try forwarder(tempDir(), now)
        let refused = URL(string: "http://127.0.0.1:\(closedPort())/hook")!
        try f.enqueue(json: #"{"n":1}"#, to: refused)
        try f.enqueue(json: #"{"n":2}"#, to: server.url)
        let r = try await f.deliverDue()
        #expect(r.delivered == 1 && r.failed == 1 && r.remaining == 1)
        #expect(try f.outbox.pending().map(\.body) == [#"{"n":1}"#])
        #expect(server.accepted().map(\.body) == [#"{"n":2}"#])
    }

    @Test func aFailureHoldsBackLaterItemsForTheSameURLInOrder() async throws {
        let server = try FlakyServer(failing: 1)
        let now = ManualNow()
        let f = try forwarder(tempDir(), now)
        for i in 1...3 { try f.enqueue(json: "{\"n\":\(i)}", to: server.url) }
        let first = try await f.deliverDue()
        #expect(first.failed == 1 && first.delivered == 0)
        #expect(server.requestCount() == 1)
        #expect(try f.outbox.pending().map(\.attempts) == [1, 0, 0])
        now.advance(3_600_000)
        let second = try await f.deliverDue()
        #expect(second.delivered == 3 && second.remaining == 0)
        #expect(server.accepted().map(\.body) == ["{\"n\":1}", "{\"n\":2}", "{\"n\":3}"])
    }

    @Test func drainWaitsForEachRetryThroughTheInjectedSleep() async throws {
        let server = try FlakyServer(failing: 2)
        let now = ManualNow()
        let waits = Locked<[Int64]>([])
        let f = WebhookForwarder(
            outbox: try WebhookOutbox(directory: tempDir()), backoff: WebhookBackoff(baseMs: 1_000, jitter: 0),
            timeoutSec: 5, now: { now.value }, monotonic: { now.value },
            sleep: { ms in
                waits.withLock { $0.append(ms) }
                now.advance(ms)
            })
        try f.enqueue(summary(), to: server.url)
        let left = try await f.drain(forMs: 60_000)
        #expect(left == 0)
        #expect(waits.withLock { $0 } == [1_000, 2_000])
        #expect(server.accepted().count == 1)
    }

    @Test func drainGivesUpAtItsDeadlineAndKeepsTheItem() async throws {
        let now = ManualNow()
        let f = WebhookForwarder(
            outbox: try WebhookOutbox(directory: tempDir()), backoff: WebhookBackoff(baseMs: 1_000, jitter: 0),
            timeoutSec: 5, now: { now.value }, monotonic: { now.value }, sleep: { ms in now.advance(ms) })
        try f.enqueue(summary(), to: URL(string: "http://127.0.0.1:\(closedPort())/hook")!)
        let left = try await f.drain(forMs: 10_000)
        #expect(left == 1)
        // Attempts at 0, 1, 3 and 7 s; the next (15 s) is past the deadline.
        #expect(try f.outbox.pending().first?.attempts == 4)
    }

    /// Schedules are wall-clock times (they outlive the process), but an NTP step back must not add an hour to a
    /// retry, and the grace period is measured on the monotonic clock: neither stretched by a step back nor cut
    /// short by a step forward.
    @Test func aWallClockStepNeitherDelaysRetriesNorChangesTheGrace() async throws {
        let server = try FlakyServer(failing: 2)
        let wall = ManualNow()
        let mono = ManualNow()
        let waits = Locked<[Int64]>([])
        let f = WebhookForwarder(
            outbox: try WebhookOutbox(directory: tempDir()), backoff: WebhookBackoff(baseMs: 1_000, jitter: 0),
            timeoutSec: 5, now: { wall.value }, monotonic: { mono.value },
            sleep: { ms in
                waits.withLock { $0.append(ms) }
                wall.advance(ms)
                mono.advance(ms)
            })
        try f.enqueue(summary(), to: server.url)
        #expect(try await f.deliverDue().failed == 1, "the first attempt fails; the retry is due 1 s later")
        wall.advance(-3_600_000)
        let left = try await f.drain(forMs: 10_000)
        #expect(left == 0, "delivered within the grace")
        #expect(server.accepted().count == 1)
        #expect(waits.withLock { $0 }.allSatisfy { $0 <= 2_000 }, "no wait of an hour: \(waits.withLock { $0 })")

        // A step forward mid-grace does not end it: the next retries still happen.
        let down = WebhookForwarder(
            outbox: try WebhookOutbox(directory: tempDir()), backoff: WebhookBackoff(baseMs: 1_000, jitter: 0),
            timeoutSec: 5, now: { wall.value }, monotonic: { mono.value },
            sleep: { ms in
                wall.advance(ms + 3_600_000)
                mono.advance(ms)
            })
        try down.enqueue(summary(), to: URL(string: "http://127.0.0.1:\(closedPort())/hook")!)
        #expect(try await down.drain(forMs: 10_000) == 1)
        #expect(try down.outbox.pending().first?.attempts == 4, "attempts at 0, 1, 3 and 7 s of monotonic time")
    }

    @Test func aClaimedItemIsNotClaimedAgainByAnotherProcessUntilItsLeaseEnds() throws {
        let dir = tempDir()
        let a = try WebhookOutbox(directory: dir)
        let b = try WebhookOutbox(directory: dir)
        try a.enqueue(url: "http://127.0.0.1:9/hook", body: "{}", nowMs: 1_000)
        #expect(try a.claimDue(nowMs: 1_000, leaseUntilMs: 20_000).count == 1)
        #expect(try b.claimDue(nowMs: 19_999, leaseUntilMs: 40_000).isEmpty)
        #expect(try b.claimDue(nowMs: 20_000, leaseUntilMs: 40_000).count == 1)
    }

    @Test func sampleBatchesHaveTheirOwnType() async throws {
        let server = try FlakyServer(failing: 0)
        let now = ManualNow()
        let f = try forwarder(tempDir(), now)
        let batcher = WebhookSampleBatcher(forwarder: f, url: server.url, sessionId: "s1", size: 2, onFailure: { _ in })
        let samples = (0..<3).map {
            BiosignalSample(timestampMs: 1_000 * Int64($0), bpm: 60 + Double($0), rrIntervalsMs: [1000], source: "ble")
        }
        samples.forEach(batcher.add)
        #expect(try f.outbox.pending().count == 1)
        await batcher.flush()
        try await f.deliverDue()
        let bodies = try server.accepted().map { try JSONValue(parsing: $0.body) }
        try #require(bodies.count == 2)
        #expect(bodies.allSatisfy { $0.objectValue?["type"]?.stringValue == "biosignal_batch" })
        #expect(bodies.allSatisfy { $0.objectValue?["session_id"]?.stringValue == "s1" })
        let sent = bodies.flatMap { $0.objectValue?["samples"]?.arrayValue ?? [] }
        #expect(try sent.map { try BiosignalSample(json: $0) } == samples)
    }

    @Test func eachSampleIsOnDiskAsItArrivesAndAnAbandonedBatchIsDeliveredByTheNextProcess() async throws {
        let server = try FlakyServer(failing: 0)
        let dir = tempDir()
        let now = ManualNow()
        let first = try forwarder(dir, now)
        let batcher = WebhookSampleBatcher(forwarder: first, url: server.url, sessionId: "s2", size: 60, onFailure: { _ in })
        let samples = strapSamples(7)
        for (i, sample) in samples.enumerated() {
            batcher.add(sample)
            now.advance(1_000)
            // Committed at once: another connection to the file sees every sample added so far.
            #expect(try WebhookOutbox(directory: dir).formingSampleCount() == i + 1)
        }
        #expect(try first.outbox.pending().isEmpty)
        // The first process ends without flushing (kill -9). A later one seals the batch once it has been idle for a
        // minute, not before (a live session's batch is still growing).
        let later = try forwarder(dir, now)
        try await later.deliverDue()
        #expect(server.accepted().isEmpty)
        now.advance(WebhookOutbox.idleBatchMs)
        try await later.deliverDue()
        let bodies = try server.accepted().map { try JSONValue(parsing: $0.body) }
        try #require(bodies.count == 1)
        #expect(bodies[0]["type"] == .string("biosignal_batch") && bodies[0]["session_id"] == .string("s2"))
        #expect(try (bodies[0]["samples"]?.arrayValue ?? []).map { try BiosignalSample(json: $0) } == samples)
        #expect(try later.outbox.formingSampleCount() == 0)
    }

    /// Another process holding outbox.sqlite (`webhook flush`, `sqlite3`) holds neither the provider's thread nor the
    /// concurrency pool: samples added meanwhile wait on the outbox's queue and are committed in order once it is
    /// free; delivery passes wait there too instead of failing after the busy timeout.
    @Test func aLockedOutboxHoldsNoProviderThreadAndNoPoolThread() async throws {
        let server = try FlakyServer(failing: 0)
        let dir = tempDir()
        let f = try forwarder(dir, ManualNow())
        let failures = Locked<[String]>([])
        let batcher = WebhookSampleBatcher(
            forwarder: f, url: server.url, sessionId: "s5", size: 60,
            onFailure: { e in failures.withLock { $0.append(e) } })
        let samples = strapSamples(6)
        batcher.add(samples[0])
        try f.enqueue(json: "{\"n\":1}", to: server.url)

        let lock = try OutsideLock(path: dir + "/outbox.sqlite")
        // On the provider's thread: each add returns without waiting (waiting, it would fail after the busy timeout).
        for sample in samples.dropFirst() { batcher.add(sample) }
        // More delivery passes than the pool has threads, all waiting for the lock.
        let passes = 2 * ProcessInfo.processInfo.activeProcessorCount + 2
        let queued = f.outboxJobs
        let delivering = (0..<passes).map { _ in Task { try await f.deliverDue() } }
        // Every pass is waiting for the lock (its first step is on the outbox's lane, and nothing there can finish
        // while the lock is held)...
        while f.outboxJobs < queued + passes { await Task.yield() }
        // ...and the pool still runs other work.
        #expect(await Task.detached { 42 }.value == 42)
        #expect(try lock.release() == "released on request")

        var delivered = 0
        for pass in delivering { delivered += try await pass.value.delivered }
        #expect(delivered == 1)
        await batcher.flush()
        try await f.deliverDue()
        #expect(failures.withLock { $0 }.isEmpty)
        #expect(try sampleBatches(server) == [samples])
    }

    /// While the session runs, a sample waiting for another process's lock waits however long it is held (here twice
    /// the busy timeout after which it used to be given up, counted in the forwarder's pauses, which the test makes
    /// instant) and is committed in order once the lock is free.
    @Test func whileTheSessionRunsASampleWaitsForTheLockHoweverLongItIsHeld() async throws {
        let server = try FlakyServer(failing: 0)
        let dir = tempDir()
        let now = ManualNow()
        let longWait = 2 * Int64(StateDatabase.busyTimeoutMs)
        let paused = Locked<Int64>(0)
        let (reached, reaching) = AsyncStream.makeStream(of: Void.self)
        let goOn = DispatchSemaphore(value: 0)
        let f = try forwarder(
            dir, now,
            pause: { ms in
                let total = paused.withLock { p in
                    p += ms
                    return p
                }
                // Once the waits pass twice the busy timeout, hold the queue until the test has released the lock.
                if total >= longWait && total - ms < longWait {
                    reaching.yield()
                    goOn.wait()
                }
            })
        let failures = Locked<[String]>([])
        let batcher = WebhookSampleBatcher(
            forwarder: f, url: server.url, sessionId: "s6", size: 60,
            onFailure: { e in failures.withLock { $0.append(e) } })
        let samples = strapSamples(6)
        batcher.add(samples[0])
        let lock = try OutsideLock(path: dir + "/outbox.sqlite")
        for sample in samples.dropFirst() { batcher.add(sample) }
        var waits = reached.makeAsyncIterator()
        _ = await waits.next()
        #expect(failures.withLock { $0 }.isEmpty)
        #expect(try lock.release() == "released on request")
        goOn.signal()

        await batcher.flush()
        try await f.deliverDue()
        #expect(failures.withLock { $0 }.isEmpty)
        #expect(paused.withLock { $0 } >= longWait)
        #expect(try sampleBatches(server) == [samples])
    }

    /// After the session (`flush()`), a waiting sample waits at most the busy timeout more, so that the session's end is
    /// not held up for ever; the ones after it try once. A loss is said at once, and counted at the end.
    @Test func afterTheSessionTheWaitIsBoundedAndWhatIsGivenUpIsCounted() async throws {
        let server = try FlakyServer(failing: 0)
        let dir = tempDir()
        let now = ManualNow()
        let f = try forwarder(dir, now, pause: { _ in })
        let failures = Locked<[String]>([])
        let (failed, failing) = AsyncStream.makeStream(of: Void.self)
        let goOn = DispatchSemaphore(value: 0)
        let batcher = WebhookSampleBatcher(
            forwarder: f, url: server.url, sessionId: "s7", size: 60,
            onFailure: { e in
                let first = failures.withLock { f in
                    f.append(e)
                    return f.count == 1
                }
                // At the first loss, hold the queue until the test has released the lock.
                if first {
                    failing.yield()
                    goOn.wait()
                }
            })
        let samples = strapSamples(5)
        batcher.add(samples[0])
        let lock = try OutsideLock(path: dir + "/outbox.sqlite")
        for sample in samples.dropFirst() { batcher.add(sample) }
        let flushing = Task { await batcher.flush() }
        var losses = failed.makeAsyncIterator()
        _ = await losses.next()
        let seconds = StateDatabase.busyTimeoutMs / 1_000
        #expect(failures.withLock { $0 } == [
            "a sample could not be added to the outbox: webhook outbox: \(dir)/outbox.sqlite was held by another "
                + "process for \(seconds) s"
        ])
        #expect(try lock.release() == "released on request")
        goOn.signal()
        await flushing.value

        #expect(failures.withLock { $0 }.dropFirst() == ["1 sample(s) of session s7 are missing from its webhook batches (the session store has them)"])
        try await f.deliverDue()
        #expect(try sampleBatches(server) == [[samples[0]] + samples.dropFirst(2)])
    }

    @Test func aFullBatchBecomesAnItemInTheTransactionThatAddsItsLastSample() throws {
        let dir = tempDir()
        let now = ManualNow()
        let f = try forwarder(dir, now)
        let url = URL(string: "http://127.0.0.1:9/hook")!
        let batcher = WebhookSampleBatcher(forwarder: f, url: url, sessionId: "s3", size: 3, onFailure: { _ in })
        for i in 0..<7 { batcher.add(BiosignalSample(timestampMs: Int64(i), bpm: 60, rrIntervalsMs: [1000], source: "ble")) }
        let items = try f.outbox.pending()
        #expect(items.count == 2)
        #expect(try items.map { try JSONValue(parsing: $0.body)["samples"]?.arrayValue?.count } == [3, 3])
        #expect(try f.outbox.formingSampleCount() == 1)
        // A flush by hand seals what is forming, however young.
        try f.sealAllBatches()
        #expect(try f.outbox.pending().count == 3)
        #expect(try f.outbox.formingSampleCount() == 0)
    }

    @Test func theOutboxIsBounded() throws {
        let warnings = Locked<[String]>([])
        let now = ManualNow()
        let f = WebhookForwarder(
            outbox: try WebhookOutbox(directory: tempDir(), maxItems: 3), now: { now.value },
            onWarning: { w in warnings.withLock { $0.append(w) } })
        let url = URL(string: "http://127.0.0.1:9/hook")!
        for i in 1...5 { try f.enqueue(json: "{\"n\":\(i)}", to: url) }
        #expect(try f.outbox.pending().map(\.body) == ["{\"n\":3}", "{\"n\":4}", "{\"n\":5}"])
        #expect(warnings.withLock { $0.count } == 2)
    }

    @Test(arguments: ["", "127.0.0.1:8080/hook", "ftp://example.org/x", "http://", "not a url", "http:///path"])
    func malformedURLsAreRefused(_ text: String) {
        #expect(throws: WebhookError.badURL(text)) { try parseWebhookURL(text) }
    }

    @Test func wellFormedURLsAreAccepted() throws {
        #expect(try parseWebhookURL("http://127.0.0.1:8080/hook").port == 8080)
        #expect(try parseWebhookURL("https://example.org/a?b=c").host == "example.org")
    }
}
