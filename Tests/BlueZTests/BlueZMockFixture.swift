import BlueZ
import DBus
import DBusTestSupport
import Logging
import Synchronization
import Testing

/// A private bus with python-dbusmock's `bluez5` template on it and a control connection to drive the mock.
final class BlueZMockBus: Sendable {
    let daemon: PrivateBusDaemon
    let control: DBusConnection
    let mock: Mutex<DBusMockProcess?>

    static var available: Bool { DBusMockProcess.templateAvailable("bluez5") }

    init() async throws {
        daemon = try PrivateBusDaemon()
        control = try await DBusConnection.connect(to: .address(daemon.address), logger: quietLogger)
        mock = Mutex(nil)
        try await startMock()
    }

    func startMock() async throws {
        let process = try await DBusMockProcess(
            template: "bluez5", busName: BlueZ.busName, address: daemon.address, observer: control)
        mock.withLock { $0 = process }
    }

    /// Kills the mock with SIGKILL, as a crashed or restarted bluetoothd would vanish.
    func killMock() {
        mock.withLock { $0?.stop() }
    }

    func tearDown() {
        killMock()
        control.close()
        daemon.stop()
    }

    /// A connection for the code under test.
    func clientConnection() async throws -> DBusConnection {
        try await DBusConnection.connect(to: .address(daemon.address), logger: quietLogger)
    }

    @discardableResult
    func mockCall(
        _ path: DBusObjectPath,
        _ interface: String,
        _ member: String,
        _ arguments: [DBusValue] = []
    ) async throws -> [DBusValue] {
        try await control.call(
            destination: BlueZ.busName, path: path, interface: interface, member: member, arguments: arguments,
            timeout: .seconds(10))
    }

    func addAdapter(_ name: String) async throws {
        try await mockCall("/", "org.bluez.Mock", "AddAdapter", [.string(name), .string("gateway-\(name)")])
    }

    @discardableResult
    func addDevice(_ address: String, name: String, adapter: String = "hci0") async throws -> DBusObjectPath {
        let reply = try await mockCall(
            "/", "org.bluez.Mock", "AddDevice", [.string(adapter), .string(address), .string(name)])
        return try #require(reply.first?.string.map { DBusObjectPath($0) })
    }

    func updateProperties(_ path: DBusObjectPath, _ interface: String, _ properties: [String: DBusValue]) async throws {
        try await mockCall(path, "org.freedesktop.DBus.Mock", "UpdateProperties", [
            .string(interface), .properties(properties),
        ])
    }

    /// Adds a GATT object (the bookworm template has none) and announces it with `InterfacesAdded`, as BlueZ does.
    func addGattObject(
        _ path: DBusObjectPath,
        interface: String,
        properties: [String: DBusValue],
        methods: [(name: String, input: String, output: String, code: String)] = []
    ) async throws {
        let methodList = DBusValue.array(
            elementSignature: "(ssss)",
            methods.map { .structure([.string($0.name), .string($0.input), .string($0.output), .string($0.code)]) })
        try await mockCall("/", "org.freedesktop.DBus.Mock", "AddObject", [
            .string(path.rawValue), .string(interface), .properties(properties), methodList,
        ])
        let interfaces = DBusValue.dictionary(
            keySignature: "s", valueSignature: "a{sv}", [.string(interface): .properties(properties)])
        try await mockCall("/", "org.freedesktop.DBus.Mock", "EmitSignal", [
            .string("org.freedesktop.DBus.ObjectManager"), .string("InterfacesAdded"), .string("oa{sa{sv}}"),
            .array(elementSignature: "v", [.variant(.objectPath(path)), .variant(interfaces)]),
        ])
    }

    /// Arguments of the calls of `method` the mock object at `path` recorded.
    func recordedCalls(_ path: DBusObjectPath, _ method: String) async throws -> [[DBusValue]] {
        let reply = try await mockCall(path, "org.freedesktop.DBus.Mock", "GetMethodCalls", [.string(method)])
        let calls = try #require(reply.first?.arrayElements)
        return try calls.map { call in
            let fields = try #require(call.structFields)
            return try #require(fields.last?.arrayElements).map(\.unwrapped)
        }
    }
}

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
