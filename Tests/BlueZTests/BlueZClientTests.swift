import BlueZ
import DBus
import DBusTestSupport
import Logging
import Testing

let strapAddress = "AA:BB:CC:DD:EE:FF"
let strapPath: DBusObjectPath = "/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF"

@Suite(
    "BlueZClient against python-dbusmock's bluez5 template on a private bus",
    .enabled(if: BlueZMock.available, "python3-dbusmock is not installed"),
    .timeLimit(.minutes(1))
)
struct BlueZClientTests {
    func withMock(_ body: (BlueZMock, BlueZClient) async throws -> Void, setUp: (BlueZMock) async throws -> Void = { _ in })
        async throws
    {
        let bus = try await BlueZMock()
        defer { bus.tearDown() }
        try await setUp(bus)
        let connection = try await bus.clientConnection()
        defer { connection.close() }
        let client = try await BlueZClient.start(on: connection, logger: quietLogger)
        defer { client.close() }
        try await body(bus, client)
    }

    @Test func mirrorHoldsAdaptersAndDevicesPresentAtStart() async throws {
        try await withMock { _, client in
            let tree = client.tree
            #expect(client.bluetoothdRunning)
            #expect(tree.adapters.map(\.name) == ["hci0"])
            let adapter = try #require(tree.adapters.first)
            #expect(adapter.path == "/org/bluez/hci0")
            #expect(adapter.powered)
            #expect(adapter.address == "00:01:02:03:04:05")
            let devices = tree.devices(of: adapter.path)
            #expect(devices.map(\.path) == [strapPath])
            #expect(devices.first?.address == strapAddress)
            #expect(devices.first?.name == "Polar H10 1234")
            #expect(devices.first?.connected == false)
            #expect(devices.first?.rssi == -79)
        } setUp: { bus in
            try await bus.addAdapter("hci0")
            try await bus.addDevice(strapAddress, name: "Polar H10 1234")
        }
    }

    @Test func closeWithOpenObserversEndsTheirStreams() async throws {
        try await withMock { _, client in
            let (_, first) = client.observe()
            let (_, second) = client.observe()
            client.close()
            for await _ in first {}
            for await _ in second {}
            var late = client.observe().changes.makeAsyncIterator()
            #expect(await late.next() == nil, "a closed client hands out finished streams")
        }
    }

    @Test func observersCancelledWhileChangesFlowDoNotStallTheMirror() async throws {
        try await withMock { bus, client in
            // Observers come and go (their tasks cancelled) while property changes are published.
            let churn = Task {
                for _ in 0..<200 {
                    let (_, changes) = client.observe()
                    let t = Task { for await _ in changes {} }
                    t.cancel()
                    await t.value
                }
            }
            let path = try await bus.addDevice(strapAddress, name: "Polar H10 1234")
            for rssi in 0..<50 {
                try await bus.updateProperties(path, BlueZ.deviceInterface, ["RSSI": .int16(Int16(-40 - rssi))])
            }
            await churn.value
            let (_, changes) = client.observe()
            try await bus.updateProperties(path, BlueZ.deviceInterface, ["RSSI": .int16(-99)])
            var it = changes.makeAsyncIterator()
            #expect(await it.next() != nil, "the mirror still publishes")
        } setUp: { bus in
            try await bus.addAdapter("hci0")
        }
    }

    @Test func adapterChoiceByNameAndDefault() async throws {
        try await withMock { bus, client in
            let (snapshot, changes) = client.observe()
            var tree = snapshot
            #expect(try tree.chooseAdapter().name == "hci0")
            #expect(try tree.chooseAdapter(named: "hci1").path == "/org/bluez/hci1")
            #expect(throws: BlueZAdapterChoiceError(requested: "hci7", available: ["hci0", "hci1"])) {
                try tree.chooseAdapter(named: "hci7")
            }
            try await bus.updateProperties("/org/bluez/hci0", BlueZ.adapterInterface, ["Powered": .boolean(false)])
            var iterator = changes.makeAsyncIterator()
            _ = await next(&iterator) { if case .propertiesChanged("/org/bluez/hci0", _, _, _) = $0 { true } else { false } }
            tree = client.tree
            #expect(tree.adapters.first { $0.name == "hci0" }?.powered == false)
            #expect(try tree.chooseAdapter().name == "hci1")
            #expect(try tree.chooseAdapter(named: "hci0").name == "hci0")
        } setUp: { bus in
            try await bus.addAdapter("hci0")
            try await bus.addAdapter("hci1")
        }
    }

    @Test func discoveryFilterAndDiscoveryReachTheAdapter() async throws {
        try await withMock { bus, client in
            let (_, changes) = client.observe()
            let adapter = try client.tree.chooseAdapter()
            try await client.setDiscoveryFilter(on: adapter.path)
            let calls = try await bus.recordedCalls(adapter.path, "SetDiscoveryFilter")
            #expect(calls.count == 1)
            let filter = try #require(calls.first?.first?.propertyDictionary)
            #expect(filter["UUIDs"]?.stringArray == ["0000180d-0000-1000-8000-00805f9b34fb"])
            #expect(filter["Transport"] == .string("le"))
            #expect(filter["DuplicateData"] == .boolean(false))

            try await client.startDiscovery(on: adapter.path)
            var iterator = changes.makeAsyncIterator()
            let change = await next(&iterator) {
                if case .propertiesChanged(adapter.path, BlueZ.adapterInterface, let changed, _) = $0 {
                    changed["Discovering"] == .boolean(true)
                } else { false }
            }
            #expect(change != nil)
            #expect(client.tree.adapters.first?.discovering == true)
            try await client.stopDiscovery(on: adapter.path)
            #expect(try await bus.recordedCalls(adapter.path, "StopDiscovery").count == 1)
        } setUp: { bus in
            try await bus.addAdapter("hci0")
        }
    }

    @Test func devicesAppearAndDisappear() async throws {
        try await withMock { bus, client in
            let (snapshot, changes) = client.observe()
            #expect(snapshot.devices().isEmpty)
            var iterator = changes.makeAsyncIterator()
            let path = try await bus.addDevice(strapAddress, name: "Polar H10 1234")
            let added = await next(&iterator) { if case .interfacesAdded = $0 { true } else { false } }
            #expect(added == .interfacesAdded(path, interfaces: [BlueZ.deviceInterface]))
            #expect(client.tree.device(path)?.name == "Polar H10 1234")

            try await bus.updateProperties(path, BlueZ.deviceInterface, ["RSSI": .int16(-52)])
            _ = await next(&iterator) { if case .propertiesChanged(path, _, _, _) = $0 { true } else { false } }
            #expect(client.tree.device(path)?.rssi == -52)

            try await client.removeDevice(path, from: "/org/bluez/hci0")
            let removed = await next(&iterator) { if case .interfacesRemoved = $0 { true } else { false } }
            #expect(removed == .interfacesRemoved(path, interfaces: [BlueZ.deviceInterface]))
            #expect(client.tree.device(path) == nil)
        } setUp: { bus in
            try await bus.addAdapter("hci0")
        }
    }

    @Test func bluetoothdRestartIsMirroredAgain() async throws {
        try await withMock { bus, client in
            let (snapshot, changes) = client.observe()
            #expect(snapshot.device(strapPath) != nil)
            var iterator = changes.makeAsyncIterator()
            bus.killMock()
            #expect(await next(&iterator) { $0 == .bluetoothdStopped } != nil)
            #expect(client.tree.adapters.isEmpty)
            #expect(!client.bluetoothdRunning)

            try await bus.startMock()
            #expect(await next(&iterator) { $0 == .bluetoothdStarted } != nil)
            #expect(client.bluetoothdRunning)
            try await bus.addAdapter("hci0")
            try await bus.addDevice(strapAddress, name: "Polar H10 1234")
            let added = await next(&iterator) { $0 == .interfacesAdded(strapPath, interfaces: [BlueZ.deviceInterface]) }
            #expect(added != nil)
            #expect(client.tree.adapters.map(\.name) == ["hci0"])
            #expect(client.tree.device(strapPath)?.address == strapAddress)
        } setUp: { bus in
            try await bus.addAdapter("hci0")
            try await bus.addDevice(strapAddress, name: "Polar H10 1234")
        }
    }

    @Test func startsWithoutBluetoothdAndMirrorsWhenItAppears() async throws {
        let bus = try await BlueZMock()
        defer { bus.tearDown() }
        bus.killMock()
        let connection = try await bus.clientConnection()
        defer { connection.close() }
        let client = try await BlueZClient.start(on: connection, logger: quietLogger)
        defer { client.close() }
        #expect(!client.bluetoothdRunning)
        let error = await #expect(throws: BlueZError.self) { try await client.startDiscovery(on: "/org/bluez/hci0") }
        #expect(error?.kind == .bluetoothdNotRunning)
        #expect(error?.name == DBusError.serviceUnknown)
        #expect(error?.description.contains("systemctl start bluetooth") == true)

        let (_, changes) = client.observe()
        var iterator = changes.makeAsyncIterator()
        try await bus.startMock()
        #expect(await next(&iterator) { $0 == .bluetoothdStarted } != nil)
        try await bus.addAdapter("hci0")
        _ = await next(&iterator) { if case .interfacesAdded = $0 { true } else { false } }
        #expect(client.tree.adapters.map(\.name) == ["hci0"])
    }

    @Test func gattObjectsNotificationsReadsAndBattery() async throws {
        try await withMock { bus, client in
            let (_, changes) = client.observe()
            var iterator = changes.makeAsyncIterator()
            let service: DBusObjectPath = "/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF/service000c"
            let measurement: DBusObjectPath = "/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF/service000c/char000d"
            try await bus.addGattObject(service, interface: BlueZ.gattServiceInterface, properties: [
                "UUID": .string(BlueZ.heartRateService), "Primary": .boolean(true), "Device": .objectPath(strapPath),
            ])
            try await bus.addGattObject(
                measurement, interface: BlueZ.gattCharacteristicInterface,
                properties: [
                    "UUID": .string(BlueZ.heartRateMeasurement), "Service": .objectPath(service),
                    "Flags": .stringArray(["notify"]), "Notifying": .boolean(false), "Value": .bytes([]),
                ],
                methods: [
                    ("StartNotify", "", "", ""), ("StopNotify", "", "", ""),
                    ("ReadValue", "a{sv}", "ay", "ret = [0x06, 0x48]"),
                    ("WriteValue", "aya{sv}", "", ""),
                ])
            _ = await next(&iterator) { $0 == .interfacesAdded(measurement, interfaces: [BlueZ.gattCharacteristicInterface]) }

            let found = try #require(
                client.tree.characteristic(BlueZ.heartRateMeasurement, inService: BlueZ.heartRateService, of: strapPath))
            #expect(found.path == measurement)
            #expect(found.flags == ["notify"])
            #expect(client.tree.services(of: strapPath).map(\.uuid) == [BlueZ.heartRateService])

            let notifications = try await client.notifications(of: measurement)
            try await client.startNotify(measurement)
            #expect(try await bus.recordedCalls(measurement, "StartNotify").count == 1)
            let before = ContinuousClock.now
            try await bus.updateProperties(measurement, BlueZ.gattCharacteristicInterface, ["Value": .bytes([0x10, 0x48, 0x2c, 0x03])])
            try await bus.updateProperties(measurement, BlueZ.gattCharacteristicInterface, ["Value": .bytes([0x00, 0x49])])
            var received = notifications.makeAsyncIterator()
            let first = try #require(await received.next())
            let second = try #require(await received.next())
            #expect(first.value == [0x10, 0x48, 0x2c, 0x03])
            #expect(second.value == [0x00, 0x49])
            #expect(first.characteristic == measurement)
            #expect(first.receivedAt >= before && second.receivedAt >= first.receivedAt)

            #expect(try await client.readValue(measurement) == [0x06, 0x48])
            try await client.writeValue(measurement, [0x01], type: .command)
            let writes = try await bus.recordedCalls(measurement, "WriteValue")
            #expect(writes.first?.first?.bytes == [0x01])
            #expect(writes.first?.dropFirst().first?.propertyDictionary?["type"] == .string("command"))
            try await client.stopNotify(measurement)

            try await bus.call(strapPath, "org.freedesktop.DBus.Mock", "AddProperties", [
                .string(BlueZ.batteryInterface), .properties(["Percentage": .byte(87)]),
            ])
            #expect(try await client.batteryPercentage(of: strapPath) == 87)
        } setUp: { bus in
            try await bus.addAdapter("hci0")
            try await bus.addDevice(strapAddress, name: "Polar H10 1234")
        }
    }

    @Test func blueZErrorsKeepNameAndMessageAndAreClassified() async throws {
        try await withMock { bus, client in
            try await client.connect(strapPath)
            let again = await #expect(throws: BlueZError.self) { try await client.connect(strapPath) }
            #expect(again?.kind == .alreadyConnected)
            #expect(again?.name == "org.bluez.Error.AlreadyConnected")
            #expect(again?.message == "Already Connected")

            try await bus.setMethod(
                strapPath, interface: BlueZ.deviceInterface, name: "Connect",
                code: "raise dbus.exceptions.DBusException('le-connection-abort-by-local', name='org.bluez.Error.Failed')")
            let abort = await #expect(throws: BlueZError.self) { try await client.connect(strapPath) }
            #expect(abort?.kind == .failed)
            #expect(abort?.isConnectionAbortByLocal == true)
            #expect(abort?.description == "org.bluez.Error.Failed: le-connection-abort-by-local")

            let gone = await #expect(throws: BlueZError.self) {
                try await client.disconnect("/org/bluez/hci0/dev_00_00_00_00_00_01")
            }
            #expect(gone?.kind == .unknownObject)
            #expect(gone?.name == "org.freedesktop.DBus.Error.UnknownObject")
        } setUp: { bus in
            try await bus.addAdapter("hci0")
            try await bus.addDevice(strapAddress, name: "Polar H10 1234")
        }
    }

    @Test func waitingForALinkStateSeesTheChange() async throws {
        try await withMock { bus, client in
            enum Outcome: Sendable, Equatable { case resolved, dropped }
            let (evaluated, evaluation) = AsyncStream.makeStream(of: Void.self)
            let waiter = Task {
                await client.wait { tree -> Outcome? in
                    evaluation.yield()
                    guard let device = tree.device(strapPath) else { return .dropped }
                    if device.servicesResolved { return .resolved }
                    return nil
                }
            }
            var evaluations = evaluated.makeAsyncIterator()
            await evaluations.next()  // the snapshot was checked: later changes reach the waiter
            try await bus.updateProperties(strapPath, BlueZ.deviceInterface, ["RSSI": .int16(-50)])
            try await bus.updateProperties(
                strapPath, BlueZ.deviceInterface, ["Connected": .boolean(true), "ServicesResolved": .boolean(true)])
            #expect(await waiter.value == .resolved)
            evaluation.finish()
            var count = 1
            while await evaluations.next() != nil { count += 1 }
            #expect(count >= 2)
            let immediate = await client.wait { $0.device(strapPath)?.connected == true ? true : nil }
            #expect(immediate == true)
        } setUp: { bus in
            try await bus.addAdapter("hci0")
            try await bus.addDevice(strapAddress, name: "Polar H10 1234")
        }
    }
}
