import DBus
import Logging
import Synchronization

/// A private bus with python-dbusmock's `bluez5` template on it (bluetoothd without hardware), and a control
/// connection to drive the mock. Its bookworm version has no GATT objects: add them with `addGattObject`.
///
/// ```swift
/// let mock = try await BlueZMock()
/// defer { mock.tearDown() }
/// try await mock.addAdapter("hci0")
/// let strap = try await mock.addDevice("AA:BB:CC:DD:EE:FF", name: "Polar H10 1234")
/// let connection = try await mock.clientConnection()
/// ```
public final class BlueZMock: Sendable {
    public let daemon: PrivateBusDaemon
    /// A connection used to drive the mock (not the code under test).
    public let control: DBusConnection
    private let mock: Mutex<DBusMockProcess?>
    private let logger: Logger

    /// Whether python3-dbusmock's bluez5 template is installed (use with `.enabled(if:)`).
    public static var available: Bool { DBusMockProcess.templateAvailable("bluez5") }

    /// Starts a private dbus-daemon and the mock on it.
    public init(logger: Logger = Logger(label: "bluez-mock") { _ in SwiftLogNoOpLogHandler() }) async throws {
        self.logger = logger
        daemon = try PrivateBusDaemon()
        do {
            control = try await DBusConnection.connect(to: .address(daemon.address), logger: logger)
        } catch {
            daemon.stop()
            throw error
        }
        mock = Mutex(nil)
        do {
            try await startMock()
        } catch {
            tearDown()
            throw error
        }
    }

    /// Starts the mock (again, after `killMock()`); returns once it owns `org.bluez`. It starts with no adapters.
    public func startMock() async throws {
        let process = try await DBusMockProcess(
            template: "bluez5", busName: "org.bluez", address: daemon.address, observer: control)
        mock.withLock { $0 = process }
    }

    /// Kills the mock with SIGKILL, as a crashed or restarted bluetoothd vanishes.
    public func killMock() {
        mock.withLock { $0?.stop() }
    }

    /// Kills the mock and the daemon.
    public func tearDown() {
        killMock()
        control.close()
        daemon.stop()
    }

    /// A new connection to the private bus, for the code under test.
    public func clientConnection() async throws -> DBusConnection {
        try await DBusConnection.connect(to: .address(daemon.address), logger: logger)
    }

    /// Calls a method on the mock.
    @discardableResult
    public func call(
        _ path: DBusObjectPath,
        _ interface: String,
        _ member: String,
        _ arguments: [DBusValue] = []
    ) async throws -> [DBusValue] {
        try await control.call(
            destination: "org.bluez", path: path, interface: interface, member: member, arguments: arguments,
            timeout: .seconds(10))
    }

    /// `org.bluez.Mock.AddAdapter`: a powered adapter `/org/bluez/<name>` (the name must end in a digit).
    public func addAdapter(_ name: String) async throws {
        try await call("/", "org.bluez.Mock", "AddAdapter", [.string(name), .string("gateway-\(name)")])
    }

    /// `org.bluez.Mock.AddDevice`: a disconnected device; returns its path.
    @discardableResult
    public func addDevice(_ address: String, name: String, adapter: String = "hci0") async throws -> DBusObjectPath {
        let reply = try await call(
            "/", "org.bluez.Mock", "AddDevice", [.string(adapter), .string(address), .string(name)])
        guard let path = reply.first?.string else {
            throw TestProcessError(description: "AddDevice answered \(reply)")
        }
        return DBusObjectPath(path)
    }

    /// Changes properties of a mock object and emits `PropertiesChanged` (e.g. a notification: `Value` of a
    /// characteristic; a link loss: `Connected=false` of a device).
    public func updateProperties(
        _ path: DBusObjectPath,
        _ interface: String,
        _ properties: [String: DBusValue]
    ) async throws {
        try await call(path, "org.freedesktop.DBus.Mock", "UpdateProperties", [
            .string(interface), .properties(properties),
        ])
    }

    /// Adds an object (e.g. a GATT service or characteristic) and announces it with `InterfacesAdded`, as BlueZ
    /// does. Method code is Python run by dbusmock (`""` does nothing; `ret = [1, 2]` returns them).
    public func addGattObject(
        _ path: DBusObjectPath,
        interface: String,
        properties: [String: DBusValue],
        methods: [(name: String, input: String, output: String, code: String)] = []
    ) async throws {
        let methodList = DBusValue.array(
            elementSignature: "(ssss)",
            methods.map { .structure([.string($0.name), .string($0.input), .string($0.output), .string($0.code)]) })
        try await call("/", "org.freedesktop.DBus.Mock", "AddObject", [
            .string(path.rawValue), .string(interface), .properties(properties), methodList,
        ])
        let interfaces = DBusValue.dictionary(
            keySignature: "s", valueSignature: "a{sv}", [.string(interface): .properties(properties)])
        try await call("/", "org.freedesktop.DBus.Mock", "EmitSignal", [
            .string("org.freedesktop.DBus.ObjectManager"), .string("InterfacesAdded"), .string("oa{sa{sv}}"),
            .array(elementSignature: "v", [.variant(.objectPath(path)), .variant(interfaces)]),
        ])
    }

    /// Replaces (or adds) a method of a mock object; `code` is Python, e.g.
    /// `raise dbus.exceptions.DBusException('le-connection-abort-by-local', name='org.bluez.Error.Failed')`.
    public func setMethod(
        _ path: DBusObjectPath,
        interface: String,
        name: String,
        input: String = "",
        output: String = "",
        code: String
    ) async throws {
        try await call(path, "org.freedesktop.DBus.Mock", "AddMethod", [
            .string(interface), .string(name), .string(input), .string(output), .string(code),
        ])
    }

    /// Arguments of the calls of `method` the mock object at `path` recorded, oldest first.
    public func recordedCalls(_ path: DBusObjectPath, _ method: String) async throws -> [[DBusValue]] {
        let reply = try await call(path, "org.freedesktop.DBus.Mock", "GetMethodCalls", [.string(method)])
        guard let calls = reply.first?.arrayElements else {
            throw TestProcessError(description: "GetMethodCalls answered \(reply)")
        }
        return calls.map { call in (call.structFields?.last?.arrayElements ?? []).map(\.unwrapped) }
    }
}
