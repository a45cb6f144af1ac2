import GatewayEngine

/// One consumer's bounded outgoing queue.
///
/// `push` never blocks (the engine calls it on its own thread). Live frames beyond `liveLimit` push out the oldest
/// queued live frame; any other frame beyond `limit` closes the queue (the consumer is too slow to keep up, and
/// whatever reliable events it missed are redelivered when it reconnects).
public final class ConsumerQueue: Sendable {
    public enum PushResult: Sendable, Equatable {
        case queued
        /// A live frame was dropped to make room.
        case droppedOldestLive
        /// The queue was over its limit and is now closed.
        case overflowed
        case closed
    }

    private struct Item {
        var text: String
        var droppable: Bool
    }

    private struct State {
        var items: [Item] = []
        var head = 0
        var liveCount = 0
        var closed = false
        var dropped = 0
        var waiter: CheckedContinuation<String?, Never>?
        var count: Int { items.count - head }
    }

    public let liveLimit: Int
    public let limit: Int
    private let state = Locked(State())

    public init(liveLimit: Int = 256, limit: Int = 4096) {
        self.liveLimit = liveLimit
        self.limit = max(limit, liveLimit + 1)
    }

    /// Live frames dropped so far.
    public var droppedCount: Int { state.withLock { $0.dropped } }
    public var isClosed: Bool { state.withLock { $0.closed } }
    public var isEmpty: Bool { state.withLock { $0.count == 0 } }

    @discardableResult
    public func push(_ text: String, droppable: Bool) -> PushResult {
        let (result, resume) = state.withLock { s -> (PushResult, (CheckedContinuation<String?, Never>, String?)?) in
            if s.closed { return (.closed, nil) }
            if let w = s.waiter {
                s.waiter = nil
                return (.queued, (w, text))
            }
            var result = PushResult.queued
            if droppable && s.liveCount >= liveLimit {
                if let i = s.items[s.head...].firstIndex(where: { $0.droppable }) {
                    s.items.remove(at: i)
                    s.liveCount -= 1
                    s.dropped += 1
                    result = .droppedOldestLive
                }
            } else if s.count >= limit {
                s.closed = true
                return (.overflowed, nil)
            }
            s.items.append(Item(text: text, droppable: droppable))
            if droppable { s.liveCount += 1 }
            return (result, nil)
        }
        if let (w, t) = resume { w.resume(returning: t) }
        return result
    }

    /// The next frame, or nil once closed and drained.
    public func next() async -> String? {
        await withCheckedContinuation { (c: CheckedContinuation<String?, Never>) in
            let now = state.withLock { s -> String?? in
                if s.count > 0 {
                    let item = s.items[s.head]
                    s.head += 1
                    if item.droppable { s.liveCount -= 1 }
                    if s.head > 64 && s.head * 2 > s.items.count {
                        s.items.removeFirst(s.head)
                        s.head = 0
                    }
                    return .some(item.text)
                }
                if s.closed { return .some(nil) }
                s.waiter = c
                return .none
            }
            if let now { c.resume(returning: now) }
        }
    }

    /// Takes every frame queued now, without waiting.
    public func drain() -> [String] {
        state.withLock { s in
            let out = s.items[s.head...].map(\.text)
            s.items.removeAll()
            s.head = 0
            s.liveCount = 0
            return out
        }
    }

    /// Ends the queue: a waiting `next` returns nil; later pushes are ignored.
    public func close() {
        let w = state.withLock { s -> CheckedContinuation<String?, Never>? in
            s.closed = true
            s.items.removeAll()
            s.head = 0
            s.liveCount = 0
            defer { s.waiter = nil }
            return s.waiter
        }
        w?.resume(returning: nil)
    }
}
