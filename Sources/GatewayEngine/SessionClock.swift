import Foundation

/// A timer returned by `SessionClock.schedule`.
public protocol ScheduledAction: Sendable {
    func cancel()
}

/// Wall-clock time and timers for the engine. Injected so tests run in virtual time.
public protocol SessionClock: Sendable {
    /// Unix epoch milliseconds.
    func nowMs() -> Int64
    /// Runs `action` once at `deadlineMs` (or as soon as possible if it has passed).
    func schedule(atMs deadlineMs: Int64, _ action: @escaping @Sendable () -> Void) -> any ScheduledAction
}

/// Real time: the system's wall clock, timers on Swift concurrency.
public struct SystemSessionClock: SessionClock {
    public init() {}

    public func nowMs() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)) }

    public func schedule(atMs deadlineMs: Int64, _ action: @escaping @Sendable () -> Void) -> any ScheduledAction {
        let task = Task {
            while true {
                let remaining = deadlineMs - nowMs()
                if remaining <= 0 { break }
                do { try await Task.sleep(for: .milliseconds(remaining)) } catch { return }
            }
            action()
        }
        return TaskAction(task: task)
    }

    private struct TaskAction: ScheduledAction {
        let task: Task<Void, Never>
        func cancel() { task.cancel() }
    }
}

/// Virtual time for tests: nothing happens until `advance` is called, and then every due action runs, in deadline
/// order (ties in scheduling order), before `advance` returns.
public final class ManualSessionClock: SessionClock {
    private struct Pending {
        let id: UInt64
        let deadline: Int64
        let action: @Sendable () -> Void
    }

    private struct State {
        var now: Int64
        var nextId: UInt64 = 0
        var pending: [Pending] = []
    }

    private let state: Locked<State>

    public init(startMs: Int64 = 1_700_000_000_000) { state = Locked(State(now: startMs)) }

    public func nowMs() -> Int64 { state.withLock { $0.now } }

    public func schedule(atMs deadlineMs: Int64, _ action: @escaping @Sendable () -> Void) -> any ScheduledAction {
        let id = state.withLock { s -> UInt64 in
            s.nextId += 1
            s.pending.append(Pending(id: s.nextId, deadline: deadlineMs, action: action))
            return s.nextId
        }
        return ManualAction(clock: self, id: id)
    }

    /// Number of actions waiting to run.
    public var pendingCount: Int { state.withLock { $0.pending.count } }

    /// Moves time forward by `ms`, running every action that falls due on the way.
    public func advance(byMs ms: Int64) { advance(toMs: nowMs() + ms) }

    /// Moves time to `target`, running every action that falls due on the way, each at its own deadline.
    public func advance(toMs target: Int64) {
        while true {
            let next: Pending? = state.withLock { s in
                guard let index = s.pending.indices
                    .filter({ s.pending[$0].deadline <= target })
                    .min(by: { (s.pending[$0].deadline, s.pending[$0].id) < (s.pending[$1].deadline, s.pending[$1].id) })
                else { return nil }
                let p = s.pending.remove(at: index)
                s.now = max(s.now, p.deadline)
                return p
            }
            guard let next else { break }
            next.action()
        }
        state.withLock { $0.now = max($0.now, target) }
    }

    fileprivate func cancel(id: UInt64) {
        state.withLock { $0.pending.removeAll { $0.id == id } }
    }

    private struct ManualAction: ScheduledAction {
        let clock: ManualSessionClock
        let id: UInt64
        func cancel() { clock.cancel(id: id) }
    }
}
