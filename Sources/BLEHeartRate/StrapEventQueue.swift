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

    /// The most events that waited at once.
    var highWater: Int { state.withLock { $0.highWater } }

    /// Whether the queue asked its sources to hold back and has not yet released them.
    var isFull: Bool { state.withLock { $0.full } }

    /// Queues `event` (or, full, drops an advertisement). Never blocks. Returns false if the event was dropped.
    @discardableResult
    func yield(_ event: StrapEvent) -> Bool {
        enum Outcome { case resume(CheckedContinuation<StrapEvent?, Never>), queued(becameFull: Bool), dropped }
        let outcome = state.withLock { state -> Outcome in
            if state.finished { return .dropped }
            if let waiter = state.waiter {
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
                let event = state.removeFirst()
                var drained = false
                if state.full, state.count <= capacity / 2 {
                    state.full = false
                    drained = true
                }
                return (event, drained, false)
            }
            if drained { onDrained() }
            if !waiting { continuation.resume(returning: event) }
        }
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
