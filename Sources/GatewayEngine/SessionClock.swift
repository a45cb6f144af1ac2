import Foundation

/// A timer returned by `SessionClock.schedule`.
public protocol ScheduledAction: Sendable {
    func cancel()
}

/// Time for the engine and the providers, injected so tests run in virtual time.
///
/// Two clocks, never mixed: `monotonicMs()` for durations, schedules and timeouts (it never jumps, whatever NTP or
/// an administrator does to the system time), and `nowMs()`, the wall clock, only for the epoch-millisecond
/// timestamps written into events and samples. Timers are set on the monotonic clock.
public protocol SessionClock: Sendable {
    /// Unix epoch milliseconds (the wall clock): for timestamps only, never for measuring time.
    func nowMs() -> Int64
    /// Milliseconds on a monotonic clock from an arbitrary origin: for durations, schedules and timeouts.
    func monotonicMs() -> Int64
    /// Runs `action` once when `monotonicMs()` reaches `deadlineMs` (or as soon as possible if it has passed).
    func schedule(atMonotonicMs deadlineMs: Int64, _ action: @escaping @Sendable () -> Void) -> any ScheduledAction
    /// Called by the engine as a session starts, before it reads the time; nothing for a clock that keeps real time.
    func sessionStarting()
}

extension SessionClock {
    public func sessionStarting() {}

    /// Runs `action` once, `delayMs` from now on the monotonic clock.
    public func schedule(afterMs delayMs: Int64, _ action: @escaping @Sendable () -> Void) -> any ScheduledAction {
        schedule(atMonotonicMs: monotonicMs() + delayMs, action)
    }
}

/// Real time: the system's wall clock for timestamps, `ContinuousClock` for everything measured, timers on Swift
/// concurrency sleeping on `ContinuousClock`.
public struct SystemSessionClock: SessionClock {
    /// The monotonic origin, taken once per process.
    private static let origin = ContinuousClock.now

    public init() {}

    public func nowMs() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)) }

    public func monotonicMs() -> Int64 { Self.milliseconds(Self.origin.duration(to: .now)) }

    public func schedule(atMonotonicMs deadlineMs: Int64, _ action: @escaping @Sendable () -> Void) -> any ScheduledAction {
        let deadline = Self.origin.advanced(by: .milliseconds(deadlineMs))
        let task = Task {
            do { try await Task.sleep(until: deadline, clock: .continuous) } catch { return }
            action()
        }
        return TaskAction(task: task)
    }

    static func milliseconds(_ d: Duration) -> Int64 {
        let (seconds, attoseconds) = d.components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    private struct TaskAction: ScheduledAction {
        let task: Task<Void, Never>
        func cancel() { task.cancel() }
    }
}

/// `base` run `rate` times faster from the start of the session: a replay at speed 10 as a session on the
/// recording's time, its frames, windows, pacing and duration those of the recording, ten times sooner.
///
/// Until `sessionStarting()` (called by the engine as a session starts) it keeps `base`'s pace, so the time spent
/// setting up is not multiplied into the session's timestamps. From then on the monotonic clock is scaled from that
/// moment, and the wall clock is `base`'s plus the time gained (a wall-clock step still shows in timestamps as it
/// would live).
///
/// Its timers run in lockstep, one at a time in deadline order, each seeing the clock at its own deadline, and the
/// clock never reads past the deadline of a timer that has not run. A few milliseconds of real delay (a busy machine,
/// a debug build) are seconds at speed 1000: with the timers set on `base` one by one, a late one read the time it
/// fired at, so a replay at 1000 ran 71 to 106 s for a 60-s recording, lost frames and ended in the future. A machine
/// slower than `rate` now slows the replay instead of bending its times.
public struct ScaledSessionClock: SessionClock {
    public let base: any SessionClock
    public let rate: Double

    private struct Timer {
        let id: UInt64
        let deadline: Int64
        let action: @Sendable () -> Void
    }

    private struct State {
        /// `base`'s monotonic time when the session started; nil before.
        var origin: Int64?
        /// Timers not yet run, set after the session started.
        var timers: [Timer] = []
        var nextId: UInt64 = 0
        /// The deadline of the timer running now: the time while it runs.
        var running: Int64?
        /// A thread is running due timers (one at a time).
        var driving = false
        /// The latest time read: never read back earlier.
        var floor = Int64.min
        /// The `base` timer set for the earliest deadline, and that deadline.
        var wake: (any ScheduledAction)?
        var wakeAt: Int64?
    }

    private let state = Locked(State())

    /// `rate` must be positive and finite.
    public init(base: any SessionClock, rate: Double) {
        precondition(rate > 0 && rate.isFinite, "a clock rate is positive and finite")
        self.base = base
        self.rate = rate
    }

    /// Starts the faster pace (once: a later session goes on from where the clock stands).
    public func sessionStarting() {
        let now = base.monotonicMs()
        state.withLock { $0.origin = $0.origin ?? now }
    }

    public func monotonicMs() -> Int64 {
        let real = base.monotonicMs()
        return state.withLock { read(real, &$0) }
    }

    public func nowMs() -> Int64 {
        let real = base.monotonicMs()
        let wall = base.nowMs()
        let mono = state.withLock { read(real, &$0) }
        return wall + (mono - real)
    }

    public func schedule(atMonotonicMs deadlineMs: Int64, _ action: @escaping @Sendable () -> Void) -> any ScheduledAction {
        let id = state.withLock { s -> UInt64? in
            guard let origin = s.origin, deadlineMs > origin else { return nil }
            s.nextId += 1
            s.timers.append(Timer(id: s.nextId, deadline: deadlineMs, action: action))
            return s.nextId
        }
        guard let id else { return base.schedule(atMonotonicMs: deadlineMs, action) }
        // Never run here: the caller may hold a lock its action takes (the engine's).
        arm()
        return LockstepAction(clock: self, id: id)
    }

    /// The time at real time `real`: scaled, held at the deadline of the timer running or of the earliest not yet
    /// run, never earlier than a time already read.
    private func read(_ real: Int64, _ s: inout State) -> Int64 {
        if let running = s.running { return running }
        var t = scaled(real, s.origin)
        if let earliest = s.timers.map(\.deadline).min() { t = min(t, earliest) }
        t = max(t, s.floor)
        s.floor = t
        return t
    }

    /// Sets a `base` timer for the earliest deadline, unless one is set for it.
    private func arm() {
        let armed = state.withLock { s -> (deadline: Int64, origin: Int64, old: (any ScheduledAction)?)? in
            guard let origin = s.origin, let earliest = s.timers.map(\.deadline).min(), s.wakeAt != earliest else {
                return nil
            }
            defer { s.wake = nil }
            s.wakeAt = earliest
            return (earliest, origin, s.wake)
        }
        guard let armed else { return }
        armed.old?.cancel()
        let real = armed.origin + Int64((Double(armed.deadline - armed.origin) / rate).rounded(.up))
        let wake = base.schedule(atMonotonicMs: real) { [self] in
            state.withLock { s in
                if s.wakeAt == armed.deadline {
                    s.wakeAt = nil
                    s.wake = nil
                }
            }
            runDue()
        }
        let stale = state.withLock { s -> Bool in
            guard s.wakeAt == armed.deadline, s.wake == nil else { return true }
            s.wake = wake
            return false
        }
        if stale { wake.cancel() }
    }

    /// Runs the timers that are due, one at a time in deadline order (ties in the order set), unless another
    /// thread is at it; then arms the next.
    private func runDue() {
        enum Step { case run(Timer), busy, notDue }
        while true {
            let real = base.monotonicMs()
            let step = state.withLock { s -> Step in
                // The thread running a timer runs the rest once it returns, and arms the next.
                guard !s.driving else { return .busy }
                guard let next = s.timers.min(by: { ($0.deadline, $0.id) < ($1.deadline, $1.id) }),
                    scaled(real, s.origin) >= next.deadline
                else { return .notDue }
                s.timers.removeAll { $0.id == next.id }
                s.running = next.deadline
                s.floor = max(s.floor, next.deadline)
                s.driving = true
                return .run(next)
            }
            guard case .run(let due) = step else {
                if case .busy = step { return }
                break
            }
            due.action()
            state.withLock {
                $0.running = nil
                $0.driving = false
            }
        }
        arm()
    }

    fileprivate func cancel(id: UInt64) { state.withLock { $0.timers.removeAll { $0.id == id } } }

    private func scaled(_ realMs: Int64, _ origin: Int64?) -> Int64 {
        guard let originMs = origin, realMs > originMs else { return realMs }
        // The millionth absorbs floating-point error, so a timer set for a deadline never fires a millisecond short.
        return originMs + Int64((Double(realMs - originMs) * rate + 1e-6).rounded(.down))
    }

    private struct LockstepAction: ScheduledAction {
        let clock: ScaledSessionClock
        let id: UInt64
        func cancel() { clock.cancel(id: id) }
    }
}

/// Virtual time for tests: nothing happens until `advance` is called, and then every due action runs, in deadline
/// order (ties in scheduling order), before `advance` returns.
///
/// Monotonic and wall time start equal (`startMs`) and move together with `advance`; `stepWallClock(byMs:)` moves
/// the wall clock alone, as NTP or `date -s` would, so tests can show that no timer follows it.
public final class ManualSessionClock: SessionClock {
    private struct Pending {
        let id: UInt64
        let deadline: Int64
        let action: @Sendable () -> Void
    }

    private struct State {
        var now: Int64
        /// Wall time minus monotonic time.
        var wallOffset: Int64 = 0
        var nextId: UInt64 = 0
        var pending: [Pending] = []
        var scheduled = 0
    }

    private let state: Locked<State>
    /// The delay (ms from the time it was set) of every timer set, in order: a test that must act once a timer is
    /// set waits here instead of sleeping.
    public let scheduledDelays: AsyncStream<Int64>
    private let delays: AsyncStream<Int64>.Continuation

    public init(startMs: Int64 = 1_700_000_000_000) {
        state = Locked(State(now: startMs))
        (scheduledDelays, delays) = AsyncStream<Int64>.makeStream(bufferingPolicy: .bufferingNewest(4096))
    }

    public func nowMs() -> Int64 { state.withLock { $0.now + $0.wallOffset } }

    public func monotonicMs() -> Int64 { state.withLock { $0.now } }

    public func schedule(atMonotonicMs deadlineMs: Int64, _ action: @escaping @Sendable () -> Void) -> any ScheduledAction {
        let (id, delay) = state.withLock { s -> (UInt64, Int64) in
            s.nextId += 1
            s.scheduled += 1
            s.pending.append(Pending(id: s.nextId, deadline: deadlineMs, action: action))
            return (s.nextId, deadlineMs - s.now)
        }
        delays.yield(delay)
        return ManualAction(clock: self, id: id)
    }

    /// Number of actions waiting to run.
    public var pendingCount: Int { state.withLock { $0.pending.count } }

    /// Number of timers set so far (cancelled or not).
    public var scheduledCount: Int { state.withLock { $0.scheduled } }

    /// Steps the wall clock by `ms` (negative: backwards) without moving monotonic time or running any timer.
    public func stepWallClock(byMs ms: Int64) { state.withLock { $0.wallOffset += ms } }

    /// Moves time forward by `ms` (the wall clock with it) without running any timer, as a process that got no CPU
    /// sees it; the next `advance` runs the overdue timers late, at the time it has reached.
    public func stall(byMs ms: Int64) { state.withLock { $0.now += ms } }

    /// Moves time forward by `ms`, running every action that falls due on the way.
    public func advance(byMs ms: Int64) { advance(toMs: monotonicMs() + ms) }

    /// Moves monotonic time to `target` (the wall clock follows, keeping any step), running every action that falls
    /// due on the way, each at its own deadline. Without a wall-clock step, `target` is also the wall time.
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
