import BlueZ
import DBus
import DBusTestSupport
import Foundation
import Testing

/// Runs `body` on a thread of its own and waits at most `seconds` for it, so that a deadlock fails the test instead of
/// hanging the run (the stuck thread is abandoned).
func returns(within seconds: Double, _ body: @escaping @Sendable () -> Void) async -> Bool {
    let (done, signal) = AsyncStream.makeStream(of: Bool.self)
    Thread {
        body()
        signal.yield(true)
    }.start()
    let timer = Task {
        try? await Task.sleep(for: .seconds(seconds))
        signal.yield(false)
    }
    defer { timer.cancel() }
    var it = done.makeAsyncIterator()
    return await it.next() ?? false
}

/// Waits at most `seconds` for `task`; nil if it did not finish.
func value<T: Sendable>(of task: Task<T, Never>, within seconds: Double) async -> T? {
    let (done, signal) = AsyncStream.makeStream(of: T?.self)
    let waiter = Task { signal.yield(await task.value) }
    let timer = Task {
        try? await Task.sleep(for: .seconds(seconds))
        signal.yield(nil)
    }
    defer {
        timer.cancel()
        waiter.cancel()
    }
    var it = done.makeAsyncIterator()
    return await it.next() ?? nil
}

@Suite(
    "BlueZClient.close() with streams open",
    .enabled(if: BlueZMock.available, "python3-dbusmock is not installed"),
    .timeLimit(.minutes(1))
)
struct BlueZClientCloseTests {
    /// The provider used to drop the client instead of closing it: closing while a stream was open and changes were
    /// flowing could hang. Here close() runs while a stream reader, a handler observer and a notification
    /// subscription are all live and property changes keep arriving; it must return, and the reader must end.
    @Test func closeWhileChangesFlowToOpenStreamsReturnsAndEndsThem() async throws {
        let bus = try await BlueZMock()
        defer { bus.tearDown() }
        try await bus.addAdapter("hci0")
        let path = try await bus.addDevice(strapAddress, name: "Polar H10 1234")
        let connection = try await bus.clientConnection()
        defer { connection.close() }
        let client = try await BlueZClient.start(on: connection, logger: quietLogger)

        let (_, changes) = client.observe()
        let (seen, seenSignal) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let (_, observation) = client.observe { _, _ in seenSignal.yield() }
        defer { observation.cancel() }
        let notifications = try await client.notifications(of: DBusObjectPath(strapPath.rawValue + "/service000c/char000d"))
        let reader = Task { () -> Int in
            var count = 0
            for await _ in changes { count += 1 }
            return count
        }
        let notificationReader = Task { () -> Int in
            var count = 0
            for await _ in notifications { count += 1 }
            return count
        }
        let writer = Task {
            for rssi in 0..<400 {
                guard !Task.isCancelled else { return }
                try? await bus.updateProperties(path, BlueZ.deviceInterface, ["RSSI": .int16(Int16(-40 - rssi % 50))])
            }
        }
        defer { writer.cancel() }
        var it = seen.makeAsyncIterator()
        _ = await it.next()   // changes are flowing

        #expect(await returns(within: 10) { client.close() }, "close() returned")
        let count = await value(of: reader, within: 10)
        #expect(count != nil, "the observe() stream ended on close()")
        #expect(await returns(within: 10) { client.close() }, "a second close() returns too")
        // The connection stays usable and closes cleanly, which also ends the notification stream.
        #expect(try await connection.nameOwner(of: BlueZ.busName) != nil)
        #expect(await returns(within: 10) { connection.close() })
        #expect(await value(of: notificationReader, within: 10) != nil)
    }

    /// Closing from inside an observer (on the connection's queue, while the client is publishing).
    @Test func closeFromAHandlerObserverReturns() async throws {
        let bus = try await BlueZMock()
        defer { bus.tearDown() }
        try await bus.addAdapter("hci0")
        let path = try await bus.addDevice(strapAddress, name: "Polar H10 1234")
        let connection = try await bus.clientConnection()
        defer { connection.close() }
        let client = try await BlueZClient.start(on: connection, logger: quietLogger)
        let (_, changes) = client.observe()
        let (closed, closedSignal) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let (_, observation) = client.observe { _, _ in
            client.close()
            closedSignal.yield()
        }
        defer { observation.cancel() }
        try await bus.updateProperties(path, BlueZ.deviceInterface, ["RSSI": .int16(-50)])
        let reader = Task { () -> Int in
            var count = 0
            for await _ in changes { count += 1 }
            return count
        }
        let waited = Task { () -> Bool in
            var it = closed.makeAsyncIterator()
            return await it.next() != nil
        }
        #expect(await value(of: waited, within: 10) == true, "close() inside the handler returned")
        #expect(await value(of: reader, within: 10) != nil, "and ended the stream")
    }
}
