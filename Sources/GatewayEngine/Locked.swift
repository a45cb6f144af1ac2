import Foundation

/// A value guarded by a lock, for state touched from provider threads and timer tasks alike.
// @unchecked Sendable: every access to `value` happens inside `withLock`, under `lock`.
public final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    public init(_ value: Value) { self.value = value }

    @discardableResult
    public func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
