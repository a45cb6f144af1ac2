@testable import BLEHeartRate
import Synchronization
import Testing

/// The strap's one bounded queue: advertisements are dropped and counted when it is full, notifications never;
/// a full queue asks its sources to hold back (the provider pauses reading the D-Bus socket) until it drains.
struct StrapEventQueueTests {
    final class Calls: Sendable {
        let full = Atomic<Int>(0)
        let drained = Atomic<Int>(0)
    }

    func notification(_ i: Int) -> StrapEvent {
        .notification(charPath: "/c", bytes: [0x00, UInt8(i & 0xff)], monotonicNs: UInt64(i), wallMs: Int64(i))
    }

    let advert = StrapEvent.deviceSeen(
        StrapDevice(path: "/d", address: "A0:9E:1A:00:00:01", name: "Polar H10 1", connected: false,
                    servicesResolved: false))

    @Test func fullQueueKeepsNotificationsDropsAdvertsAndHoldsSourcesBackUntilHalfDrained() async {
        let calls = Calls()
        let queue = StrapEventQueue(
            capacity: 4, onFull: { calls.full.add(1, ordering: .relaxed) },
            onDrained: { calls.drained.add(1, ordering: .relaxed) })
        for i in 0..<3 { queue.yield(notification(i)) }
        #expect(calls.full.load(ordering: .relaxed) == 0)
        queue.yield(notification(3))
        #expect(calls.full.load(ordering: .relaxed) == 1, "reaching capacity holds the sources back")
        #expect(queue.yield(advert) == false, "an advertisement is dropped when full")
        #expect(queue.dropped == 1)
        #expect(queue.yield(notification(4)), "a notification is never dropped")
        #expect(queue.yield(notification(5)))
        #expect(calls.full.load(ordering: .relaxed) == 1, "asked once")
        #expect(queue.highWater == 6)

        var got: [StrapEvent] = []
        for _ in 0..<3 { if let e = await queue.next() { got.append(e) } }
        #expect(calls.drained.load(ordering: .relaxed) == 0, "3 left of capacity 4: still above half")
        if let e = await queue.next() { got.append(e) }
        #expect(calls.drained.load(ordering: .relaxed) == 1, "at half the sources are released")
        for _ in 0..<2 { if let e = await queue.next() { got.append(e) } }
        #expect(got == (0..<6).map(notification), "every notification, in order")
        #expect(!queue.isFull)
    }

    @Test func readerWaitsForTheNextEventAndEndsAfterFinish() async {
        let queue = StrapEventQueue(capacity: 8)
        let reader = Task { () -> [StrapEvent] in
            var got: [StrapEvent] = []
            while let e = await queue.next() { got.append(e) }
            return got
        }
        queue.yield(.start)
        queue.yield(notification(1))
        queue.finish()
        #expect(queue.yield(.stop) == false, "nothing is taken after finish")
        let got = await reader.value
        #expect(got.last == notification(1))
        #expect(got.count == 2)
    }

    /// A notification with nothing ahead of it is handled on the D-Bus thread; anything that arrives meanwhile waits
    /// behind it, and a busy reader or a non-empty queue means the usual way (yield).
    @Test func anIdleReaderLetsOneEventBeHandledInlineAndKeepsTheOrder() async {
        let queue = StrapEventQueue(capacity: 8)
        let log = Mutex<[String]>([])
        #expect(!queue.handleInlineIfIdle { log.withLock { $0.append("ran") } }, "no reader waits yet")
        #expect(log.withLock { $0 }.isEmpty)

        let reader = Task {
            while let e = await queue.next() {
                if case .notification(_, _, let n, _) = e { log.withLock { $0.append("reader \(n)") } }
            }
        }
        while !queue.readerWaiting { await Task.yield() }
        let ran = queue.handleInlineIfIdle {
            log.withLock { $0.append("inline 1") }
            queue.yield(notification(2))   // arrives while the inline event is handled
            #expect(queue.readerWaiting, "the reader is not woken while an event is handled inline")
            #expect(!queue.handleInlineIfIdle { log.withLock { $0.append("nested") } }, "one inline handler at a time")
        }
        #expect(ran)
        while log.withLock({ $0.count }) < 2 { await Task.yield() }
        #expect(log.withLock { $0 } == ["inline 1", "reader 2"], "handled in arrival order")

        // A finished queue handles nothing more, inline or not.
        while !queue.readerWaiting { await Task.yield() }
        queue.finish()
        #expect(!queue.handleInlineIfIdle { log.withLock { $0.append("after finish") } })
        await reader.value
        #expect(log.withLock { $0 } == ["inline 1", "reader 2"])
    }
}
