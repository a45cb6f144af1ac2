import Dispatch
import Synchronization

/// A serial queue of its own for work on a state database that may wait for another process. A write waits up to
/// `StateDatabase.busyTimeoutMs` while another process holds the file's write lock (`webhook flush`, a second gateway,
/// `sqlite3`); a read of a busy store can take as long. Done on a thread of the concurrency pool or a Hummingbird
/// event loop, such a wait stalls everything scheduled there (both have about as many threads as cores), and done on
/// a provider's thread it stalls the session. It waits here instead (docs/architecture.md, "No waiting on another
/// process from the concurrency pool or an event loop").
public final class DatabaseLane: Sendable {
    private let queue: DispatchQueue
    /// Jobs submitted and not finished. `runHereIfIdle` works on the caller's thread only when it is 0, holding the
    /// lock meanwhile, so no job can be submitted (or run) between its check and its work.
    private let jobs = Mutex(0)

    public init(label: String) { queue = DispatchQueue(label: label) }

    /// Jobs submitted and not finished (the one running among them): what waits behind a lock held elsewhere.
    public var pending: Int { jobs.withLock { $0 } }

    /// Runs `job` on the queue after everything submitted before it.
    public func submit(_ job: @escaping @Sendable () -> Void) {
        jobs.withLock { $0 += 1 }
        queue.async { [self] in
            job()
            jobs.withLock { $0 -= 1 }
        }
    }

    /// Runs `body` on the queue and hands its result to the awaiting task, whose thread goes back to the pool
    /// meanwhile.
    public func run<T: Sendable, E: Error>(_ body: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
        let result: Result<T, E> = await withCheckedContinuation { done in
            submit { done.resume(returning: Result { () throws(E) -> T in try body() }) }
        }
        return try result.get()
    }

    /// Runs `here` on the caller's thread when nothing is queued or running, for work that must be done before the
    /// caller goes on whenever that costs no wait; `here` answers false when it did nothing because it would have had
    /// to wait (an SQLite busy timeout of 0 met a lock). In that case, or when work is queued, `otherwise` is queued,
    /// behind that work: so everything reaches the database in the order it was given.
    public func runHereIfIdle(_ here: () -> Bool, otherwise: @escaping @Sendable () -> Void) {
        let done = jobs.withLock { pending in pending == 0 && here() }
        if !done { submit(otherwise) }
    }

    /// Returns once everything submitted before the call has run.
    public func settled() async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in submit { done.resume() } }
    }
}
