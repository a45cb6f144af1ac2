import Foundation
import GatewayEngine

/// Writes one compact JSON object per line and flushes it, so a pipe reader sees each event as it happens.
public struct JSONLinesWriter: Sendable {
    private let write: @Sendable (String) -> Bool

    /// Writes to standard output.
    public init() {
        self.init(failable: { line in StandardStream.output.write(line) })
    }

    /// Writes through `write` (tests, files).
    public init(write: @escaping @Sendable (String) -> Void) {
        self.write = { line in
            write(line)
            return true
        }
    }

    /// Writes through `write`, which answers false when its destination is gone (a closed pipe).
    public init(failable write: @escaping @Sendable (String) -> Bool) { self.write = write }

    @discardableResult
    public func write(_ event: SessionEvent) -> Bool { write(event.jsonValue) }

    @discardableResult
    public func write(_ value: JSONValue) -> Bool { write(value.jsonString + "\n") }

    /// Writes JSON text already made (an `EncodedEvent`'s) as one line; false when the destination is gone.
    @discardableResult
    public func write(line json: String) -> Bool { write(json + "\n") }
}
