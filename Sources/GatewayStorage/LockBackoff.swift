/// The waits between tries on a database another process holds (its write lock outlasting SQLite's busy timeout, or a
/// write tried with none): 50 ms, then twice as long each time, up to 1 s, so that a short hold costs little and a
/// long one a try a second. Used by every writer that waits out such a lock rather than give up what it holds
/// (`SessionRecorder`, the webhook's sample commits).
public struct LockBackoff: Sendable {
    /// The next wait before any limit.
    private var stepMs: Int64 = 50
    /// The waits handed out under a limit: a limit counts from the first wait it applies to (a sample that waited
    /// without one while its session ran has its whole limit after the session).
    public private(set) var waitedMs: Int64 = 0

    public init() {}

    /// The next wait in milliseconds, with no limit.
    public mutating func next() -> Int64 {
        let ms = stepMs
        stepMs = min(stepMs * 2, 1_000)
        return ms
    }

    /// The next wait in milliseconds, cut to what is left of `limitMs` (nil: no limit); nil when the limit has been
    /// waited already.
    public mutating func next(within limitMs: Int64?) -> Int64? {
        guard let limitMs else { return next() }
        guard waitedMs < limitMs else { return nil }
        let ms = min(next(), limitMs - waitedMs)
        waitedMs += ms
        return ms
    }
}
