import Synchronization

/// A value guarded by the standard library's `Mutex`, for state touched from provider threads and timer tasks alike.
/// The value must be `Sendable`: what leaves the lock (copies of it, results of `withLock`) may cross threads.
public final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    public init(_ value: Value) { mutex = Mutex(value) }

    @discardableResult
    public func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        try mutex.withLock { (value: inout sending Value) throws(E) -> sending R in try body(&value) }
    }
}
