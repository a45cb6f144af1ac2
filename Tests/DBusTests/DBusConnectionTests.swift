@testable import DBus
import DBusTestSupport
import Foundation
import Logging
import Testing

/// A private bus with two connections on it; everything is torn down at the end of `body`.
func withPrivateBus<R>(
    _ body: (PrivateBusDaemon, DBusConnection, DBusConnection) async throws -> R
) async throws -> R {
    let daemon = try PrivateBusDaemon()
    defer { daemon.stop() }
    let logger = Logger(label: "test.dbus")
    let first = try await DBusConnection.connect(to: .address(daemon.address), logger: logger)
    defer { first.close() }
    let second = try await DBusConnection.connect(to: .address(daemon.address), logger: logger)
    defer { second.close() }
    return try await body(daemon, first, second)
}

/// Whether `condition` holds within `seconds`, checked every 10 ms: for what ends on a thread of its own (an OS
/// thread's exit), which no clock of ours can drive.
func eventually(within seconds: Double = 5, _ condition: () -> Bool) async -> Bool {
    for _ in 0..<Int(seconds * 100) {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return condition()
}

/// Runs `tool` with `arguments` and returns its standard output; throws if it exits non-zero.
func runTool(_ tool: String, _ arguments: [String]) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: tool)
    process.arguments = arguments
    let output = Pipe()
    let errors = Pipe()
    process.standardOutput = output
    process.standardError = errors
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    let errorData = errors.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw TestProcessError(
            description: "\(tool) \(arguments) exited \(process.terminationStatus): "
                + String(decoding: errorData, as: UTF8.self))
    }
    return String(decoding: data, as: UTF8.self)
}

let echoInterface = DBusInterface(
    "org.example.Echo",
    methods: [
        "Echo": DBusMethod(input: nil) { call in call.arguments },
        "EchoAfterSuspending": DBusMethod(input: nil) { call in
            await Task.yield()
            return call.arguments
        },
        "Fail": DBusMethod(input: "ss") { call in
            throw DBusError(name: call.arguments[0].string ?? "", message: call.arguments[1].string ?? "")
        },
    ]
)

@Suite("DBusConnection against a private dbus-daemon", .timeLimit(.minutes(1)))
struct DBusConnectionTests {
    @Test func listNamesSeesTheBusAndBothConnections() async throws {
        try await withPrivateBus { _, first, second in
            let names = try await first.listNames()
            #expect(names.contains("org.freedesktop.DBus"))
            #expect(names.contains(first.uniqueName))
            #expect(names.contains(second.uniqueName))
            #expect(first.uniqueName.hasPrefix(":"))
            #expect(first.uniqueName != second.uniqueName)
        }
    }

    static let roundTripValues: [DBusValue] = [
        .byte(0), .byte(255),
        .boolean(true), .boolean(false),
        .int16(.min), .int16(.max), .uint16(.max),
        .int32(.min), .int32(-1), .uint32(.max),
        .int64(.min), .int64(.max), .uint64(.max),
        .double(-0.5), .double(.infinity), .double(1e-300),
        .string(""), .string("Polar H10 ♥ ünïcødé"),
        .objectPath("/"), .objectPath("/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF"),
        .signature(""), .signature("a{oa{sa{sv}}}"),
        .variant(.uint16(72)), .variant(.variant(.string("nested"))),
        .bytes([0x10, 0x48, 0x2c, 0x03]), .bytes([]),
        .stringArray(["0000180d-0000-1000-8000-00805f9b34fb", "x"]), .stringArray([]),
        .array(elementSignature: "ai", [.array(elementSignature: "i", [.int32(1), .int32(2)]),
                                         .array(elementSignature: "i", [])]),
        .array(elementSignature: "v", [.variant(.boolean(true)), .variant(.bytes([1]))]),
        .properties(["UUIDs": .stringArray(["180d"]), "Transport": .string("le"), "DuplicateData": .boolean(false)]),
        .properties([:]),
        .dictionary(keySignature: "q", valueSignature: "ay", [.uint16(0x006b): .bytes([1, 2, 3])]),
        .dictionary(keySignature: "o", valueSignature: "a{sa{sv}}", [
            .objectPath("/org/bluez/hci0"): .dictionary(keySignature: "s", valueSignature: "a{sv}", [
                .string("org.bluez.Adapter1"): .properties(["Powered": .boolean(true), "Roles": .stringArray(["central"])]),
                .string("org.freedesktop.DBus.Introspectable"): .properties([:]),
            ]),
            .objectPath("/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF"): .dictionary(keySignature: "s", valueSignature: "a{sv}", [
                .string("org.bluez.Device1"): .properties(["RSSI": .int16(-60), "Name": .string("Polar H10 1234")]),
            ]),
        ]),
        .dictionary(keySignature: "o", valueSignature: "a{sa{sv}}", [:]),
        .structure([.string("a"), .int32(1), .variant(.double(2.5))]),
        .structure([.structure([.byte(1)]), .array(elementSignature: "(ss)", [.structure([.string("k"), .string("v")])])]),
    ]

    @Test(arguments: roundTripValues)
    func everyTypeRoundTripsThroughTheDaemon(_ value: DBusValue) async throws {
        try await withPrivateBus { _, server, client in
            try server.export("/org/example/Echo", interfaces: [echoInterface])
            let reply = try await client.call(
                destination: server.uniqueName, path: "/org/example/Echo", interface: "org.example.Echo",
                member: "Echo", arguments: [value], timeout: .seconds(5))
            #expect(reply == [value])
            #expect(reply.first?.signature == value.signature)
        }
    }

    @Test func manyArgumentsRoundTripInOneMessage() async throws {
        try await withPrivateBus { _, server, client in
            try server.export("/org/example/Echo", interfaces: [echoInterface])
            let reply = try await client.call(
                destination: server.uniqueName, path: "/org/example/Echo", interface: "org.example.Echo",
                member: "Echo", arguments: Self.roundTripValues, timeout: .seconds(5))
            #expect(reply == Self.roundTripValues)
        }
    }

    @Test func handlersThatSuspendStillAnswer() async throws {
        try await withPrivateBus { _, server, client in
            try server.export("/org/example/Echo", interfaces: [echoInterface])
            for index in 0..<20 {
                let reply = try await client.call(
                    destination: server.uniqueName, path: "/org/example/Echo", interface: "org.example.Echo",
                    member: "EchoAfterSuspending", arguments: [.uint32(UInt32(index))], timeout: .seconds(5))
                #expect(reply == [.uint32(UInt32(index))])
            }
        }
    }

    @Test func managedObjectsAccessorReadsTheNestedDictionary() throws {
        let value = Self.roundTripValues.first { $0.signature == "a{oa{sa{sv}}}" && $0.dictionaryEntries?.isEmpty == false }
        let objects = try #require(value?.managedObjects)
        #expect(objects["/org/bluez/hci0"]?["org.bluez.Adapter1"]?["Powered"] == .boolean(true))
        #expect(objects["/org/bluez/hci0"]?["org.bluez.Adapter1"]?["Roles"]?.stringArray == ["central"])
        #expect(objects["/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF"]?["org.bluez.Device1"]?["RSSI"]?.int16 == -60)
    }

    @Test func errorNameAndMessageArePreserved() async throws {
        try await withPrivateBus { _, server, client in
            try server.export("/org/example/Echo", interfaces: [echoInterface])
            let error = await #expect(throws: DBusError.self) {
                _ = try await client.call(
                    destination: server.uniqueName, path: "/org/example/Echo", interface: "org.example.Echo",
                    member: "Fail", arguments: [.string("org.bluez.Error.Failed"), .string("le-connection-abort-by-local")],
                    timeout: .seconds(5))
            }
            #expect(error?.name == "org.bluez.Error.Failed")
            #expect(error?.message == "le-connection-abort-by-local")
            #expect(error?.description == "org.bluez.Error.Failed: le-connection-abort-by-local")
        }
    }

    @Test func callsToMissingThingsFailWithTheStandardNames() async throws {
        try await withPrivateBus { _, server, client in
            try server.export("/org/example/Echo", interfaces: [echoInterface])
            func failure(_ destination: String, _ path: DBusObjectPath, _ interface: String, _ member: String,
                         _ arguments: [DBusValue] = []) async -> DBusError? {
                await #expect(throws: DBusError.self) {
                    _ = try await client.call(destination: destination, path: path, interface: interface,
                                              member: member, arguments: arguments, timeout: .seconds(5))
                }
            }
            #expect(await failure("org.bluez", "/", "org.bluez.Adapter1", "StartDiscovery")?.name
                == DBusError.serviceUnknown)
            #expect(await failure(server.uniqueName, "/nowhere", "org.example.Echo", "Echo")?.name
                == DBusError.unknownObject)
            #expect(await failure(server.uniqueName, "/org/example/Echo", "org.example.Nope", "Echo")?.name
                == DBusError.unknownInterface)
            #expect(await failure(server.uniqueName, "/org/example/Echo", "org.example.Echo", "Nope")?.name
                == DBusError.unknownMethod)
            let badArgs = await failure(server.uniqueName, "/org/example/Echo", "org.example.Echo", "Fail", [.int32(1)])
            #expect(badArgs?.name == DBusError.invalidArgs)
        }
    }

    @Test func aCallWithNoAnswerTimesOut() async throws {
        try await withPrivateBus { _, server, client in
            let (release, releaser) = AsyncStream.makeStream(of: Void.self)
            defer { releaser.finish() }
            try server.export("/org/example/Slow", interfaces: [
                DBusInterface("org.example.Slow", methods: [
                    "Wait": DBusMethod { _ in
                        for await _ in release {}
                        return []
                    }
                ])
            ])
            let error = await #expect(throws: DBusError.self) {
                _ = try await client.call(
                    destination: server.uniqueName, path: "/org/example/Slow", interface: "org.example.Slow",
                    member: "Wait", timeout: .milliseconds(200))
            }
            #expect(error?.isTimeout == true)
            // The connection still works afterwards.
            #expect(try await client.listNames().contains(server.uniqueName))
        }
    }

    @Test func cancellingACallThrowsCancellationError() async throws {
        try await withPrivateBus { _, server, client in
            let (release, releaser) = AsyncStream.makeStream(of: Void.self)
            let (started, starter) = AsyncStream.makeStream(of: Void.self)
            defer { releaser.finish() }
            try server.export("/org/example/Slow", interfaces: [
                DBusInterface("org.example.Slow", methods: [
                    "Wait": DBusMethod { _ in
                        starter.yield()
                        for await _ in release {}
                        return []
                    }
                ])
            ])
            let task = Task {
                try await client.call(
                    destination: server.uniqueName, path: "/org/example/Slow", interface: "org.example.Slow",
                    member: "Wait", timeout: .seconds(60))
            }
            for await _ in started { break }
            task.cancel()
            await #expect(throws: CancellationError.self) { _ = try await task.value }
        }
    }

    @Test func aCallFromAnAlreadyCancelledTaskThrowsCancellationError() async throws {
        try await withPrivateBus { _, connection, _ in
            let (gate, opener) = AsyncStream.makeStream(of: Void.self)
            let task = Task {
                for await _ in gate {}
                return try await connection.listNames()
            }
            task.cancel()
            opener.finish()
            await #expect(throws: CancellationError.self) { _ = try await task.value }
            let names = try await connection.listNames()
            #expect(names.contains(connection.uniqueName))
        }
    }

    @Test func signalSubscriptionDeliversOnlyMatchingSignals() async throws {
        try await withPrivateBus { _, listener, emitter in
            let rule = DBusMatchRule(interface: "org.example.Test", member: "Ping", pathNamespace: "/org/example")
            let signals = try await listener.messages(matching: rule)
            try emitter.emitSignal(path: "/org/example/a", interface: "org.example.Test", member: "Pong",
                                   arguments: [.string("wrong member")])
            try emitter.emitSignal(path: "/elsewhere", interface: "org.example.Test", member: "Ping",
                                   arguments: [.string("wrong path")])
            try emitter.emitSignal(path: "/org/example/a/b", interface: "org.example.Test", member: "Ping",
                                   arguments: [.string("hello"), .uint32(7)])
            var iterator = signals.makeAsyncIterator()
            let message = try #require(await iterator.next())
            #expect(message.body == [.string("hello"), .uint32(7)])
            #expect(message.sender == emitter.uniqueName)
            #expect(message.path == "/org/example/a/b")
            #expect(message.member == "Ping")
        }
    }

    /// The reader thread that reads a message dispatches it: libdbus announcing "data remains" while it reads does
    /// not also schedule a drain of its own on the queue, which would wake a second thread for every message.
    @Test func aMessageReadIsDispatchedWithoutASecondDrain() async throws {
        try await withPrivateBus { _, listener, emitter in
            let signals = try await listener.messages(matching: DBusMatchRule(interface: "org.example.Test"))
            var iterator = signals.makeAsyncIterator()
            let before = listener.drainsScheduled
            for n in 0..<40 {
                try emitter.emitSignal(path: "/org/example", interface: "org.example.Test", member: "Ping",
                                       arguments: [.uint32(UInt32(n))])
                let message = try #require(await iterator.next())
                #expect(message.body == [.uint32(UInt32(n))])
            }
            // One read per signal (each is awaited before the next is sent); before, each scheduled a drain.
            #expect(listener.drainsScheduled - before <= 2)
        }
    }

    @Test func nameOwnerChangedReportsADroppedConnection() async throws {
        try await withPrivateBus { _, watcher, other in
            let changes = try await watcher.nameOwnerChanges(of: "org.example.Second")
            #expect(try await other.requestName("org.example.Second") == .primaryOwner)
            #expect(try await watcher.requestName("org.example.Second") == .exists)
            var iterator = changes.makeAsyncIterator()
            let acquired = try #require(await iterator.next())
            #expect(acquired == DBusNameOwnerChange(name: "org.example.Second", oldOwner: nil, newOwner: other.uniqueName))
            other.close()
            let lost = try #require(await iterator.next())
            #expect(lost == DBusNameOwnerChange(name: "org.example.Second", oldOwner: other.uniqueName, newOwner: nil))
            #expect(try await watcher.nameOwner(of: "org.example.Second") == nil)
        }
    }

    @Test func uniqueNameDisappearsWhenItsConnectionDrops() async throws {
        try await withPrivateBus { _, watcher, other in
            let name = other.uniqueName
            let changes = try await watcher.nameOwnerChanges(of: name)
            other.close()
            #expect(!other.isConnected)
            var iterator = changes.makeAsyncIterator()
            let change = try #require(await iterator.next())
            #expect(change.name == name && change.oldOwner == name && change.newOwner == nil)
        }
    }

    @Test func closingEndsSubscriptionsAndFailsLaterCalls() async throws {
        try await withPrivateBus { _, connection, _ in
            let signals = try await connection.messages(matching: DBusMatchRule(interface: "org.example.Never"))
            connection.close()
            var iterator = signals.makeAsyncIterator()
            #expect(await iterator.next() == nil)
            await connection.waitUntilClosed()
            let error = await #expect(throws: DBusError.self) { _ = try await connection.listNames() }
            #expect(error?.name == DBusError.disconnected)
        }
    }

    /// The socket's reader thread ends when reading pauses and when the connection closes: a process that opens and
    /// closes connections (the strap scanner, reconnects) leaves no threads behind.
    @Test func theReaderThreadEndsWithPausingAndClosing() async throws {
        try await withPrivateBus { _, connection, _ in
            #expect(connection.readerThreadsRunning == 1)
            connection.pauseReading()
            #expect(await eventually { connection.readerThreadsRunning == 0 })
            connection.resumeReading()
            #expect(connection.readerThreadsRunning == 1)
            let names = try await connection.listNames()
            #expect(names.contains(connection.uniqueName))
            connection.close()
            #expect(await eventually { connection.readerThreadsRunning == 0 })
        }
    }

    @Test func losingTheDaemonClosesTheConnection() async throws {
        let daemon = try PrivateBusDaemon()
        let connection = try await DBusConnection.connect(to: .address(daemon.address), logger: Logger(label: "test"))
        defer { connection.close() }
        daemon.stop()
        await connection.waitUntilClosed()
        #expect(!connection.isConnected)
    }

    @Test func systemBusConnectHonoursDBUS_SYSTEM_BUS_ADDRESS() async throws {
        try await withPrivateBus { daemon, first, _ in
            setenv("DBUS_SYSTEM_BUS_ADDRESS", daemon.address, 1)
            let system = try await DBusConnection.connect(to: .system, logger: Logger(label: "test.system"))
            defer { system.close() }
            #expect(system.bus == .system)
            #expect(try await first.listNames().contains(system.uniqueName))
        }
    }

    @Test func sessionBusConnectUsesDBUS_SESSION_BUS_ADDRESS() async throws {
        try await withPrivateBus { daemon, first, _ in
            setenv("DBUS_SESSION_BUS_ADDRESS", daemon.address, 1)
            let session = try await DBusConnection.connect(to: .session, logger: Logger(label: "test.session"))
            defer { session.close() }
            #expect(try await first.listNames().contains(session.uniqueName))
        }
    }

    @Test(.enabled(if: DBusMockProcess.templateAvailable("bluez5")))
    func aMockThatCannotStartIsReportedNotAwaitedForever() async throws {
        try await withPrivateBus { daemon, observer, _ in
            let error = await #expect(throws: TestProcessError.self) {
                _ = try await DBusMockProcess(
                    template: "no_such_template", busName: "org.example.Never", address: daemon.address,
                    observer: observer)
            }
            #expect(error?.description.contains("no_such_template") == true)
        }
    }

    @Test func unreachableAddressSaysWhatToCheck() async throws {
        let error = await #expect(throws: DBusError.self) {
            _ = try await DBusConnection.connect(
                to: .address("unix:path=/nonexistent/hr-gateway-test-socket"), logger: Logger(label: "test"))
        }
        #expect(error?.name == DBusError.noServer || error?.name == DBusError.fileNotFound)
        #expect(error?.advice?.contains("DBUS_SYSTEM_BUS_ADDRESS") == true)
        #expect(error?.description.contains("/nonexistent/hr-gateway-test-socket") == true)
    }
}

@Suite("DBusConnection failures and load", .timeLimit(.minutes(1)))
struct DBusConnectionFailureTests {
    @Test func aBusThatRefusesTheUserSaysWhichPolicyToCheck() async throws {
        let config = try #require(Bundle.module.path(forResource: "deny-all-users", ofType: "conf", inDirectory: "Data"))
        let daemon = try PrivateBusDaemon(configFile: config)
        defer { daemon.stop() }
        let error = await #expect(throws: DBusError.self) {
            _ = try await DBusConnection.connect(to: .address(daemon.address), logger: Logger(label: "test"))
        }
        #expect(error?.advice?.contains("policy refuses this user") == true)
        #expect(error?.advice?.contains("group 'bluetooth'") == true)
    }

    @Test func closingFailsCallsInFlight() async throws {
        try await withPrivateBus { _, server, client in
            let (release, releaser) = AsyncStream.makeStream(of: Void.self)
            let (started, starter) = AsyncStream.makeStream(of: Void.self)
            defer { releaser.finish() }
            try server.export("/org/example/Slow", interfaces: [
                DBusInterface("org.example.Slow", methods: [
                    "Wait": DBusMethod { _ in
                        starter.yield()
                        for await _ in release {}
                        return []
                    }
                ])
            ])
            let call = Task {
                try await client.call(
                    destination: server.uniqueName, path: "/org/example/Slow", interface: "org.example.Slow",
                    member: "Wait", timeout: .seconds(60))
            }
            for await _ in started { break }
            client.close()
            let error = await #expect(throws: DBusError.self) { _ = try await call.value }
            #expect(error?.name == DBusError.disconnected)
        }
    }

    @Test func manyConcurrentCallsAllGetTheirOwnReply() async throws {
        try await withPrivateBus { _, server, client in
            try server.export("/org/example/Echo", interfaces: [echoInterface])
            let replies = try await withThrowingTaskGroup(of: (Int, [DBusValue]).self) { group in
                for index in 0..<300 {
                    group.addTask {
                        let reply = try await client.call(
                            destination: server.uniqueName, path: "/org/example/Echo", interface: "org.example.Echo",
                            member: "Echo", arguments: [.int32(Int32(index)), .string("call \(index)")],
                            timeout: .seconds(20))
                        return (index, reply)
                    }
                }
                var collected: [Int: [DBusValue]] = [:]
                for try await (index, reply) in group { collected[index] = reply }
                return collected
            }
            #expect(replies.count == 300)
            for (index, reply) in replies {
                #expect(reply == [.int32(Int32(index)), .string("call \(index)")])
            }
        }
    }

    @Test func oneSubscriptionOverSeveralRulesKeepsArrivalOrder() async throws {
        try await withPrivateBus { _, listener, emitter in
            let rules = [
                DBusMatchRule(interface: "org.example.A", member: "First"),
                DBusMatchRule(interface: "org.example.B", member: "Second"),
            ]
            let signals = try await listener.subscribe(anyOf: rules) { message in message.body.first?.int32 }
            for index in 0..<20 {
                try emitter.emitSignal(
                    path: "/org/example", interface: index.isMultiple(of: 2) ? "org.example.A" : "org.example.B",
                    member: index.isMultiple(of: 2) ? "First" : "Second", arguments: [.int32(Int32(index))])
                try emitter.emitSignal(path: "/org/example", interface: "org.example.C", member: "First")
            }
            var received: [Int32] = []
            for await value in signals {
                received.append(value)
                if received.count == 20 { break }
            }
            #expect(received == (0..<20).map { Int32($0) })
        }
    }

    @Test func cancellingASubscriptionEndsIteration() async throws {
        try await withPrivateBus { _, connection, _ in
            let signals = try await connection.messages(matching: DBusMatchRule(interface: "org.example.Never"))
            signals.cancel()
            var iterator = signals.makeAsyncIterator()
            #expect(await iterator.next() == nil)
            #expect(connection.isConnected)
        }
    }
}
