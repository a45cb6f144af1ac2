import Foundation
import GatewayEngine

/// Writes one compact JSON object per line and flushes it, so a pipe reader sees each event as it happens.
public struct JSONLinesWriter: Sendable {
    private let write: @Sendable (String) -> Void

    /// Writes to standard output.
    public init() {
        self.init { line in
            FileHandle.standardOutput.write(Data(line.utf8))
        }
    }

    /// Writes through `write` (tests, files).
    public init(write: @escaping @Sendable (String) -> Void) { self.write = write }

    public func write(_ event: SessionEvent) { write(event.jsonValue) }

    public func write(_ value: JSONValue) { write(value.jsonString + "\n") }

    /// Writes JSON text already made (an `EncodedEvent`'s) as one line.
    public func write(line json: String) { write(json + "\n") }
}
