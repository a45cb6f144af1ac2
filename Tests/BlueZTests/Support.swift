import BlueZ
import Logging

let quietLogger = Logger(label: "test.bluez") { _ in SwiftLogNoOpLogHandler() }

/// Waits for the first change that satisfies `predicate`, returning it.
func next(
    _ iterator: inout AsyncStream<BlueZChange>.AsyncIterator,
    where predicate: (BlueZChange) -> Bool
) async -> BlueZChange? {
    while let change = await iterator.next() {
        if predicate(change) { return change }
    }
    return nil
}
