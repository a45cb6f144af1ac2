import DBus
import Synchronization

/// A BlueZ pairing agent (`org.bluez.Agent1`) with capability NoInputNoOutput, exported on the client's own D-Bus
/// connection and registered with `org.bluez.AgentManager1` while it pairs one device (docs/pmd.md, "Pairing").
///
/// A chest strap has no display and no keys: pairing is "Just Works". The agent confirms and authorizes requests
/// for the device it was created for, and only that one; a PIN or passkey request (a device that needs input) is
/// rejected with a message saying to pair it with bluetoothctl.
public final class BlueZAgent: Sendable {
    public static let path = DBusObjectPath("/org/hrgateway/agent")
    public static let interface = "org.bluez.Agent1"
    public static let capability = "NoInputNoOutput"

    private let connection: DBusConnection
    /// The device it answers for; nil: any (an emulated strap accepting whoever pairs with it, as a strap does).
    private let device: DBusObjectPath?
    private let answered = Mutex<[String]>([])

    /// What BlueZ asked, in order (`RequestConfirmation /org/bluez/hci0/dev_…`), for logs and tests.
    public var requests: [String] { answered.withLock { $0 } }

    private init(connection: DBusConnection, device: DBusObjectPath?) {
        self.connection = connection
        self.device = device
    }

    /// Exports the agent and registers it with BlueZ for pairing `device` (nil: any device; `asDefault` also makes it
    /// bluetoothd's default agent, the one asked about pairings other devices start). A second registration from
    /// the same connection (`AlreadyExists`) is taken as done.
    public static func register(on connection: DBusConnection, for device: DBusObjectPath?, asDefault: Bool = false)
        async throws -> BlueZAgent
    {
        let agent = BlueZAgent(connection: connection, device: device)
        try connection.export(path, interfaces: [agent.interface()])
        do {
            _ = try await connection.call(
                destination: BlueZ.busName, path: "/org/bluez", interface: "org.bluez.AgentManager1",
                member: "RegisterAgent", arguments: [.objectPath(path), .string(capability)], timeout: .seconds(10))
        } catch let e as DBusError where e.name == "org.bluez.Error.AlreadyExists" {
            // Registered by an earlier pairing on this connection.
        }
        if asDefault {
            _ = try await connection.call(
                destination: BlueZ.busName, path: "/org/bluez", interface: "org.bluez.AgentManager1",
                member: "RequestDefaultAgent", arguments: [.objectPath(path)], timeout: .seconds(10))
        }
        return agent
    }

    /// Unregisters from BlueZ (errors ignored: bluetoothd may be gone).
    public func unregister() async {
        _ = try? await connection.call(
            destination: BlueZ.busName, path: "/org/bluez", interface: "org.bluez.AgentManager1",
            member: "UnregisterAgent", arguments: [.objectPath(Self.path)], timeout: .seconds(5))
        try? connection.unexport(Self.path)
    }

    private func interface() -> DBusInterface {
        let rejected: @Sendable (String) -> DBusError = { what in
            DBusError(
                name: "org.bluez.Error.Rejected",
                message: "hr-gateway pairs without input (NoInputNoOutput); this device asks for a \(what): "
                    + "pair it with bluetoothctl")
        }
        @Sendable func mine(_ call: DBusMethodCall, _ member: String) throws {
            let path = call.arguments.first?.objectPath
            answered.withLock { $0.append("\(member) \(path?.rawValue ?? "?")") }
            guard device == nil || path == device else {
                throw DBusError(name: "org.bluez.Error.Rejected", message: "not the device hr-gateway is pairing")
            }
        }
        return DBusInterface(Self.interface, methods: [
            "Release": DBusMethod(input: "", output: "") { _ in [] },
            "Cancel": DBusMethod(input: "", output: "") { _ in [] },
            "RequestPinCode": DBusMethod(input: "o", output: "s") { _ in throw rejected("PIN code") },
            "RequestPasskey": DBusMethod(input: "o", output: "u") { _ in throw rejected("passkey") },
            "DisplayPinCode": DBusMethod(input: "os", output: "") { _ in throw rejected("PIN code to be shown") },
            "DisplayPasskey": DBusMethod(input: "ouq", output: "") { _ in [] },
            "RequestConfirmation": DBusMethod(input: "ou", output: "") { call in
                try mine(call, "RequestConfirmation")
                return []
            },
            "RequestAuthorization": DBusMethod(input: "o", output: "") { call in
                try mine(call, "RequestAuthorization")
                return []
            },
            "AuthorizeService": DBusMethod(input: "os", output: "") { call in
                try mine(call, "AuthorizeService")
                return []
            },
        ])
    }
}
