import AsyncHTTPClient
import Crypto
import Foundation
import GatewayEngine
import GatewayStorage
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// Exponential backoff with jitter: the n-th failed attempt waits `base · 2^(n-1)` capped at `max`, lengthened by a
/// random fraction up to `jitter` (0.25: up to 25 % more), so that many gateways do not retry in step.
public struct WebhookBackoff: Sendable, Equatable {
    public var baseMs: Int64
    public var maxMs: Int64
    public var jitter: Double

    public init(baseMs: Int64 = 1_000, maxMs: Int64 = 300_000, jitter: Double = 0.25) {
        self.baseMs = max(1, baseMs)
        self.maxMs = max(self.baseMs, maxMs)
        self.jitter = max(0, jitter)
    }

    /// The wait after the `attempts`-th failed attempt; `random` is in [0, 1).
    public func delayMs(afterAttempts attempts: Int, random: Double) -> Int64 {
        let doublings = min(max(attempts - 1, 0), 40)
        let plain = min(Double(baseMs) * pow(2, Double(doublings)), Double(maxMs))
        return Int64(plain * (1 + jitter * min(max(random, 0), 1)))
    }
}

/// How one POST ended.
public enum WebhookAnswer: Sendable, Equatable {
    /// The server answered with this HTTP status.
    case status(Int)
    /// No answer: connection refused or dropped, timeout, name resolution.
    case failed(String)

    public var isSuccess: Bool { if case .status(let s) = self { (200..<300).contains(s) } else { false } }
}

/// Posts one JSON body. `HTTPClientWebhookTransport` in production.
public protocol WebhookTransport: Sendable {
    func post(url: URL, json: String, timeoutSec: Double) async -> WebhookAnswer
}

/// POSTs with AsyncHTTPClient (`Content-Type: application/json`, and `Idempotency-Key`: `idempotencyKey(of:)`) on one
/// client for the process, created with the first request on AsyncHTTPClient's default event loop group: a gateway
/// without a webhook runs none of it. (Not Foundation's URLSession: that is FoundationNetworking over libcurl, whose
/// library tree every hr-gateway process would then map, about 5 MB resident, webhook or not.) HTTPS is checked
/// against the system's trust store.
public struct HTTPClientWebhookTransport: WebhookTransport {
    /// The most of an answer's body that is read (and ignored): only the status matters.
    static let bodyLimit = 64 * 1024

    /// One client for the process, never shut down (it lives as long as the process). Its own retry of failed
    /// connections is off: the outbox retries with its backoff, and a refused connection is a failed attempt now,
    /// not a wait until the request's timeout.
    private static let client: HTTPClient = {
        var configuration = HTTPClient.Configuration.singletonConfiguration
        configuration.connectionPool.retryConnectionEstablishment = false
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    public init() {}

    public func post(url: URL, json: String, timeoutSec: Double) async -> WebhookAnswer {
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "hr-gateway")
        request.headers.add(name: "Idempotency-Key", value: Self.idempotencyKey(of: json))
        request.body = .bytes(ByteBuffer(string: json))
        do {
            let response = try await Self.client.execute(
                request, timeout: .milliseconds(Int64((timeoutSec * 1_000).rounded())))
            // Read what the server sent so the connection can be reused; a long or broken body changes nothing.
            _ = try? await response.body.collect(upTo: Self.bodyLimit)
            return .status(Int(response.status.code))
        } catch {
            return .failed(Self.describe(error, url: url))
        }
    }

    /// The `Idempotency-Key` of a body: the hex SHA-256 of its bytes. Delivery is at least once (an answer lost after
    /// the server acted is a failed attempt, retried), so a server may receive an item twice; the same body always
    /// carries the same key, on a retry, from another gateway process, or queued again by `webhook send` (a summary
    /// is its recorded JSON), and a server can drop what it has seen.
    public static func idempotencyKey(of json: String) -> String {
        SHA256.hash(data: Data(json.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// A short reason for the outbox's `last_error`: what happened, not the client library's type names.
    static func describe(_ error: any Error, url: URL) -> String {
        let target = "\(url.host ?? "?"):\(url.port ?? (url.scheme == "https" ? 443 : 80))"
        switch error {
        case let e as HTTPClientError where e == .deadlineExceeded || e == .readTimeout || e == .connectTimeout:
            return "timed out (\(target))"
        case let e as HTTPClientError where e == .remoteConnectionClosed:
            return "\(target) closed the connection"
        case let e as HTTPClientError where e == .invalidURL || e == .emptyScheme:
            return "not a valid http or https URL"
        case let e as IOError:
            let reason = String(cString: strerror(e.errnoCode))
            switch e.errnoCode {
            case ECONNREFUSED, EHOSTUNREACH, ENETUNREACH, ETIMEDOUT: return "could not connect to \(target): \(reason)"
            default: return "connection to \(target) failed: \(reason)"
            }
        case let e as NIOConnectionError:
            let reasons = (e.dnsAError.map { [$0] } ?? []) + (e.dnsAAAAError.map { [$0] } ?? [])
                + e.connectionErrors.map { $0.error }
            if reasons.isEmpty { return "could not connect to \(target)" }
            return "could not connect to \(target): " + reasons.map { "\($0)" }.joined(separator: "; ")
        default:
            return "\(error)"
        }
    }
}

/// What one delivery pass did.
public struct WebhookDeliveryReport: Sendable, Equatable {
    public var delivered = 0
    public var failed = 0
    /// Items still in the outbox after the pass.
    public var remaining = 0
    public init() {}
}

/// Store-and-forward delivery of session events to a webhook: items go into the durable `WebhookOutbox` first,
/// then are POSTed as JSON until the server answers 2xx, with exponential backoff and jitter between attempts.
///
/// Time is injected (`now`, `sleep`, `pause`) so that tests drive retries and waits for a lock without waiting:
/// call `deliverDue()` after moving the clock.
///
/// Delivery passes (`deliverDue`, `drain`, `run`) and `onOutboxQueue` do their database work on the outbox's own
/// queue (a `DatabaseLane`), and `commit(sample:…)` writes on the caller's thread only when that costs no wait: a
/// session never waits for another process's lock on `outbox.sqlite` on a thread of the concurrency pool or a
/// provider's. The other synchronous methods write where they are called, for commands and tests.
public final class WebhookForwarder: Sendable {
    public let outbox: WebhookOutbox
    public let backoff: WebhookBackoff
    /// Seconds one request may take before it counts as failed.
    public let timeoutSec: Double
    private let transport: any WebhookTransport
    private let now: @Sendable () -> Int64
    /// Milliseconds on a monotonic clock: the grace deadline of `drain(forMs:)` is measured on it.
    private let monotonic: @Sendable () -> Int64
    private let random: @Sendable () -> Double
    private let sleep: @Sendable (Int64) async throws -> Void
    /// Blocks the outbox's queue for the given milliseconds: between tries of a sample waiting for another process's
    /// lock (`commit(sample:…)`).
    private let pause: @Sendable (Int64) -> Void
    private let onWarning: @Sendable (String) -> Void
    private let lane = DatabaseLane(label: "hr-gateway.webhook.outbox")
    /// Outbox work waiting on its lane or running there (for tests: that work is waiting, not holding a thread).
    var outboxJobs: Int { lane.pending }
    /// Items left by the last delivery pass.
    private let lastRemaining = Mutex<Int?>(nil)

    public init(
        outbox: WebhookOutbox,
        transport: any WebhookTransport = HTTPClientWebhookTransport(),
        backoff: WebhookBackoff = WebhookBackoff(),
        timeoutSec: Double = 10,
        now: @escaping @Sendable () -> Int64 = { Int64((Date().timeIntervalSince1970 * 1000).rounded()) },
        monotonic: @escaping @Sendable () -> Int64 = { SystemSessionClock().monotonicMs() },
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        sleep: @escaping @Sendable (Int64) async throws -> Void = { try await Task.sleep(for: .milliseconds($0)) },
        pause: @escaping @Sendable (Int64) -> Void = { Thread.sleep(forTimeInterval: Double($0) / 1_000) },
        onWarning: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.outbox = outbox
        self.transport = transport
        self.backoff = backoff
        self.timeoutSec = timeoutSec
        self.now = now
        self.monotonic = monotonic
        self.random = random
        self.sleep = sleep
        self.pause = pause
        self.onWarning = onWarning
    }

    /// Commits `json` to the outbox for `url`; it is posted by the next `deliverDue()`.
    public func enqueue(json: String, to url: URL) throws(WebhookError) {
        let (_, dropped) = try outbox.enqueue(url: url.absoluteString, body: json, nowMs: now())
        warnDropped(dropped)
    }

    /// Commits a session event (its exact wire JSON) to the outbox.
    public func enqueue(_ event: SessionEvent, to url: URL) throws(WebhookError) {
        try enqueue(json: event.jsonValue.jsonString, to: url)
    }

    /// Commits one sample to the batch forming for `sessionId` and `url` (sealed into an item at `batchSize`): on the
    /// caller's thread, on disk when this returns, unless that would wait (work queued on the outbox's queue, or
    /// another process holding the outbox); then on the outbox's queue, after what is there, trying again (50 ms, then
    /// twice as long each time, up to 1 s) for as long as `waiting` allows: a sample is not given up because another
    /// process held the file for a while. `onFailure` hears of a sample that could not be committed.
    public func commit(
        sample: BiosignalSample, sessionId: String, to url: URL, batchSize: Int,
        waiting: @escaping @Sendable () -> WebhookLockWait = { .upToMs(Int64(StateDatabase.busyTimeoutMs)) },
        onFailure: @escaping @Sendable (WebhookError) -> Void
    ) {
        let json = sample.jsonValue.jsonString
        let target = url.absoluteString
        let arrivedMs = now()
        let add = { @Sendable [outbox] () throws(WebhookError) -> WebhookOutbox.BatchResult? in
            try outbox.addSampleIfFree(json, sessionId: sessionId, url: target, batchSize: batchSize, nowMs: arrivedMs)
        }
        lane.runHereIfIdle(
            {
                do throws(WebhookError) {
                    guard let result = try add() else { return false }
                    warnDropped(result.dropped)
                } catch {
                    onFailure(error)
                }
                return true
            },
            otherwise: { [self] in
                var backoff = LockBackoff()
                do throws(WebhookError) {
                    while true {
                        if let result = try add() {
                            warnDropped(result.dropped)
                            return
                        }
                        let limit: Int64? = if case .upToMs(let ms) = waiting() { ms } else { nil }
                        guard let ms = backoff.next(within: limit) else {
                            let waited = backoff.waitedMs >= 1_000 ? " for \(backoff.waitedMs / 1_000) s" : ""
                            throw .outbox("\(outbox.path) was held by another process\(waited)")
                        }
                        pause(ms)
                    }
                } catch {
                    onFailure(error)
                }
            })
    }

    /// Runs `body` (calls on this forwarder or its outbox) on the outbox's queue, after the work already there:
    /// from a task, so that waiting for another process's lock holds no thread of the concurrency pool.
    public func onOutboxQueue<T: Sendable>(_ body: @escaping @Sendable () throws(WebhookError) -> T)
        async throws(WebhookError) -> T
    {
        try await lane.run(body)
    }

    /// Items waiting after the last delivery pass (nil before the first): for a gauge read by a scrape, which must not
    /// wait for the outbox.
    public var outboxDepth: Int? { lastRemaining.withLock { $0 } }

    /// Seals the batch forming for `sessionId` and `url` into an item, however many samples it holds.
    public func sealBatch(sessionId: String, to url: URL) throws(WebhookError) {
        warnDropped(try outbox.sealBatch(url: url.absoluteString, sessionId: sessionId, nowMs: now()).dropped)
    }

    /// Seals every forming batch (left by any process) into an item: a flush by hand.
    public func sealAllBatches() throws(WebhookError) {
        warnDropped(try outbox.sealIdleBatches(idleMs: 0, nowMs: now()).dropped)
    }

    private func warnDropped(_ dropped: Int) {
        if dropped > 0 {
            onWarning("webhook outbox full (\(outbox.maxItems) items): dropped the \(dropped) oldest undelivered item(s)")
        }
    }

    /// Attempts the items due now (every item with `ignoringSchedule`), oldest first: a 2xx removes an item, anything
    /// else schedules its next attempt after the backoff. After a failure, the later items for the same URL wait with
    /// it (not attempted, not counted), so a URL receives its items in order and a server that is down gets one request
    /// per pass.
    @discardableResult
    public func deliverDue(ignoringSchedule: Bool = false) async throws(WebhookError) -> WebhookDeliveryReport {
        var report = WebhookDeliveryReport()
        let start = now()
        // Hold the claimed items a little past the request timeout so a crash mid-request only delays them.
        let (leaseUntil, horizon) = (start + leaseMs, horizonMs)
        let items = try await lane.run { [outbox] () throws(WebhookError) in
            try outbox.claimDue(
                nowMs: start, leaseUntilMs: leaseUntil, ignoringSchedule: ignoringSchedule, horizonMs: horizon)
        }
        var blocked: [String: Int64] = [:]
        for item in items {
            if let retryAt = blocked[item.url] {
                try await reschedule(item.id, at: retryAt, failedAttempt: nil)
                continue
            }
            let answer: WebhookAnswer
            if let url = URL(string: item.url) {
                answer = await transport.post(url: url, json: item.body, timeoutSec: timeoutSec)
            } else {
                answer = .failed("malformed URL \(item.url)")
            }
            if answer.isSuccess {
                try await lane.run { [outbox] () throws(WebhookError) in try outbox.remove(id: item.id) }
                report.delivered += 1
            } else if Task.isCancelled {
                // Stopped mid-request: due again at once, for whoever delivers next.
                try await reschedule(item.id, at: now(), failedAttempt: nil)
                blocked[item.url] = now()
            } else {
                let reason = switch answer {
                case .status(let s): "HTTP \(s)"
                case .failed(let m): m
                }
                let retryAt = now() + backoff.delayMs(afterAttempts: item.attempts + 1, random: random())
                try await reschedule(item.id, at: retryAt, failedAttempt: reason)
                blocked[item.url] = retryAt
                report.failed += 1
            }
        }
        report.remaining = try await lane.run { [outbox] () throws(WebhookError) in try outbox.count() }
        lastRemaining.withLock { $0 = report.remaining }
        return report
    }

    private func reschedule(_ id: Int64, at nextAttemptMs: Int64, failedAttempt: String?) async throws(WebhookError) {
        try await lane.run { [outbox] () throws(WebhookError) in
            try outbox.reschedule(id: id, nextAttemptMs: nextAttemptMs, failedAttempt: failedAttempt)
        }
    }

    /// Delivers until the outbox is empty or `graceMs` have passed (on the monotonic clock, so that a wall-clock step
    /// neither cuts the grace short nor stretches it by the step), waiting between passes for the next item to fall
    /// due. The first pass ignores the schedule when `immediately` (a flush by hand). Returns the items left.
    @discardableResult
    public func drain(forMs graceMs: Int64, immediately: Bool = false) async throws(WebhookError) -> Int {
        let deadline = monotonic() + graceMs
        var first = true
        while true {
            let report = try await deliverDue(ignoringSchedule: first && immediately)
            first = false
            if report.remaining == 0 { return 0 }
            if Task.isCancelled { return report.remaining }
            let t = now()
            guard let due = try await nextDue(at: t) else { return 0 }
            let wait = max(0, due - t)
            let left = deadline - monotonic()
            if left <= 0 || wait > left { return report.remaining }
            if wait > 0 {
                do { try await sleep(wait) } catch { return report.remaining }
            }
        }
    }

    /// How long a claimed item is held: a little past the request timeout.
    private var leaseMs: Int64 { Int64(timeoutSec * 1000) + 5_000 }

    /// No schedule lies further ahead than this (the longest backoff with its jitter, or a lease, plus a minute);
    /// one that does was made before the wall clock stepped back, and is due now (`WebhookOutbox.claimDue`).
    private var horizonMs: Int64 {
        max(Int64(Double(backoff.maxMs) * (1 + backoff.jitter)), leaseMs) + 60_000
    }

    /// The next schedule, with one beyond the horizon (the wall clock stepped back) counted as due now.
    private func nextDue(at t: Int64) async throws(WebhookError) -> Int64? {
        guard let due = try await lane.run({ [outbox] () throws(WebhookError) in try outbox.nextDueMs() }) else {
            return nil
        }
        return due > t + horizonMs ? t : due
    }

    /// Delivers as items fall due until cancelled, checking at least every `pollMs` for items added meanwhile.
    public func run(pollMs: Int64 = 500) async {
        while !Task.isCancelled {
            do {
                try await deliverDue()
            } catch {
                onWarning("\(error) (the items stay in the outbox; the next delivery pass tries again)")
            }
            let t = now()
            let due = (try? await nextDue(at: t)) ?? nil
            let wait = min(pollMs, max(1, (due ?? t + pollMs) - t))
            do { try await sleep(wait) } catch { return }
        }
    }
}

/// How long a sample waiting on the outbox's queue for another process's lock may go on waiting.
public enum WebhookLockWait: Sendable, Equatable {
    /// Until the lock is free: while its session runs.
    case untilFree
    /// At most this many milliseconds (counted from the first try it is told so).
    case upToMs(Int64)
}

/// Gathers samples into `biosignal_batch` items of `size` samples for a `WebhookForwarder`. Each sample is committed
/// to the outbox as it arrives (the batch forms on disk), so a crash or `kill -9` loses none: whatever a process left
/// forming is sealed into an item by the next delivery pass. While another process holds the outbox, samples wait in
/// memory on the outbox's queue, in order, rather than stall the provider: for as long as the lock is held while the
/// session runs, and after `flush()` (the session's end) at most `StateDatabase.busyTimeoutMs` more, so that the end
/// is not held up for ever. Samples given up then, or lost to a `kill -9` while waiting, are missing from the webhook
/// only (the session store has them). The first sample that cannot be committed is reported at once; `flush()`
/// reports how many were, if any.
public final class WebhookSampleBatcher: Sendable {
    public let size: Int
    private let forwarder: WebhookForwarder
    private let url: URL
    private let sessionId: String
    private let onFailure: @Sendable (String) -> Void
    private let state = Mutex(State())

    private struct State {
        /// `flush()` was called: waits are bounded from now on.
        var closing = false
        /// Samples that could not be committed.
        var lost = 0
    }

    public init(
        forwarder: WebhookForwarder, url: URL, sessionId: String, size: Int = 60,
        onFailure: @escaping @Sendable (String) -> Void
    ) {
        self.forwarder = forwarder
        self.url = url
        self.sessionId = sessionId
        self.size = max(1, size)
        self.onFailure = onFailure
    }

    /// Commits `sample` (`WebhookForwarder.commit(sample:…)`).
    public func add(_ sample: BiosignalSample) {
        forwarder.commit(
            sample: sample, sessionId: sessionId, to: url, batchSize: size,
            waiting: { [self] in
                state.withLock { s in
                    // Once one sample has been given up after the session, the others try once each.
                    s.closing ? .upToMs(s.lost > 0 ? 0 : Int64(StateDatabase.busyTimeoutMs)) : .untilFree
                }
            },
            onFailure: { [self] error in
                let first = state.withLock { s in
                    s.lost += 1
                    return s.lost == 1
                }
                if first { onFailure("a sample could not be added to the outbox: \(error)") }
            })
    }

    /// Seals the forming batch, after every sample added before, on the outbox's queue; from now on a sample waiting
    /// for another process's lock waits at most `StateDatabase.busyTimeoutMs`.
    public func flush() async {
        state.withLock { $0.closing = true }
        let (forwarder, sessionId, url) = (forwarder, sessionId, url)
        do {
            try await forwarder.onOutboxQueue { () throws(WebhookError) in try forwarder.sealBatch(sessionId: sessionId, to: url) }
        } catch {
            onFailure("\(error)")
        }
        let lost = state.withLock { s in
            defer { s.lost = 0 }
            return s.lost
        }
        if lost > 0 {
            onFailure("\(lost) sample(s) of session \(sessionId) are missing from its webhook batches "
                + "(the session store has them)")
        }
    }
}
