import Synchronization

/// The one queue between a strap's event sources (the D-Bus dispatch, replies of its calls, its timers) and the
/// task that runs its state machine.
///
/// Bounded: past `capacity` events, an advertisement (`deviceSeen`, repeated by BlueZ as long as the strap
/// advertises) is dropped and counted, and anything else, above all a notification with RR intervals, is kept and
/// `onFull` is called once: the provider then stops reading the D-Bus socket (`DBusConnection.pauseReading()`), so
/// bluetoothd's signals wait in the bus and the kernel instead of here. Only what the connection had already read
/// still arrives (a few messages). When the reader has brought the queue down to half, `onDrained` undoes it.
final class StrapEventQueue: Sendable {
    let capacity: Int
    private let onFull: @Sendable () -> Void
    private let onDrained: @Sendable () -> Void
    private let state = Mutex(State())

    private struct State: ~Copyable {
        var buffer: [StrapEvent] = []
        var head = 0
        var waiter: CheckedContinuation<StrapEvent?, Never>?
        var finished = false
        var full = false
        var dropped = 0
        var highWater = 0
        /// An event is being handled on the caller's thread (`handleInlineIfIdle`): the waiting reader stays
        /// suspended and new events queue behind it.
        var inline = false

        var count: Int { buffer.count - head }

        mutating func removeFirst() -> StrapEvent {
            let event = buffer[head]
            head += 1
            if head >= 64, head * 2 >= buffer.count {
                buffer.removeFirst(head)
                head = 0
            }
            return event
        }

        /// The first event, and whether taking it brought a full queue down to half (time to resume reading).
        mutating func take(capacity: Int) -> (StrapEvent, drained: Bool) {
            let event = removeFirst()
            guard full, count <= capacity / 2 else { return (event, false) }
            full = false
            return (event, true)
        }
    }

    init(
        capacity: Int = 256,
        onFull: @escaping @Sendable () -> Void = {},
        onDrained: @escaping @Sendable () -> Void = {}
    ) {
        precondition(capacity >= 2)
        self.capacity = capacity
        self.onFull = onFull
        self.onDrained = onDrained
    }

    /// Advertisements dropped because the queue was full.
    var dropped: Int { state.withLock { $0.dropped } }

    /// Events waiting now.
    var depth: Int { state.withLock { $0.count } }

    /// The most events that waited at once.
    var highWater: Int { state.withLock { $0.highWater } }

    /// Whether the reader is suspended in `next()` waiting for an event.
    var readerWaiting: Bool { state.withLock { $0.waiter != nil } }

    /// Whether the queue asked its sources to hold back and has not yet released them.
    var isFull: Bool { state.withLock { $0.full } }

    /// Queues `event` (or, full, drops an advertisement). Never blocks. Returns false if the event was dropped.
    @discardableResult
    func yield(_ event: StrapEvent) -> Bool {
        enum Outcome { case resume(CheckedContinuation<StrapEvent?, Never>), queued(becameFull: Bool), dropped }
        let outcome = state.withLock { state -> Outcome in
            if state.finished { return .dropped }
            if !state.inline, let waiter = state.waiter {
                state.waiter = nil
                return .resume(waiter)
            }
            if state.count >= capacity {
                if case .deviceSeen = event {
                    state.dropped += 1
                    return .dropped
                }
            }
            state.buffer.append(event)
            state.highWater = max(state.highWater, state.count)
            guard state.count >= capacity, !state.full else { return .queued(becameFull: false) }
            state.full = true
            return .queued(becameFull: true)
        }
        switch outcome {
        case .resume(let waiter):
            waiter.resume(returning: event)
            return true
        case .queued(let becameFull):
            if becameFull { onFull() }
            return true
        case .dropped:
            return false
        }
    }

    /// The next event, waiting for one; `nil` once finished and empty.
    func next() async -> StrapEvent? {
        await withCheckedContinuation { (continuation: CheckedContinuation<StrapEvent?, Never>) in
            let (event, drained, waiting) = state.withLock { state -> (StrapEvent?, Bool, Bool) in
                guard state.count > 0 else {
                    if state.finished { return (nil, false, false) }
                    state.waiter = continuation
                    return (nil, false, true)
                }
                let (event, drained) = state.take(capacity: capacity)
                return (event, drained, false)
            }
            if drained { onDrained() }
            if !waiting { continuation.resume(returning: event) }
        }
    }

    /// Runs `body` on the calling thread, as if it were the reader handling one event, when the reader is idle:
    /// waiting in `next()` with nothing queued and no other inline handler running. Events yielded meanwhile queue
    /// behind it and reach the reader afterwards, so the order of handling is the order of arrival. Returns false
    /// (and does not run `body`) when the reader is busy or events are waiting: the caller then `yield`s.
    ///
    /// This spares a notification the hop from the D-Bus thread to the reader's task when nothing is ahead of it.
    func handleInlineIfIdle(_ body: () -> Void) -> Bool {
        let idle = state.withLock { state -> Bool in
            guard !state.finished, !state.inline, state.waiter != nil, state.count == 0 else { return false }
            state.inline = true
            return true
        }
        guard idle else { return false }
        body()
        let (waiter, event, drained) = state.withLock {
            state -> (CheckedContinuation<StrapEvent?, Never>?, StrapEvent?, Bool) in
            state.inline = false
            // finish() resumed the reader already; otherwise hand it what queued behind the inline event.
            guard state.count > 0, let waiter = state.waiter else { return (nil, nil, false) }
            state.waiter = nil
            let (event, drained) = state.take(capacity: capacity)
            return (waiter, event, drained)
        }
        if drained { onDrained() }
        if let waiter, let event { waiter.resume(returning: event) }
        return true
    }

    /// Ends the queue: the reader gets what is left, then `nil`; later events are ignored.
    func finish() {
        let (waiter, wasFull) = state.withLock { state -> (CheckedContinuation<StrapEvent?, Never>?, Bool) in
            state.finished = true
            defer {
                state.waiter = nil
                state.full = false
            }
            return (state.waiter, state.full)
        }
        waiter?.resume(returning: nil)
        if wasFull { onDrained() }
    }
}
