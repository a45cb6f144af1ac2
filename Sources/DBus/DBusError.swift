import CDBus

/// A D-Bus error: the error name and message as the peer (or libdbus) sent them, plus advice when we have some.
///
/// `description` is `name: message`, e.g. `org.bluez.Error.Failed: le-connection-abort-by-local`, followed by the
/// advice in parentheses for connection failures.
public struct DBusError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The D-Bus error name, e.g. `org.freedesktop.DBus.Error.ServiceUnknown`.
    public var name: String
    /// The error message (may be empty).
    public var message: String
    /// What to do about it, when known (set for connection failures).
    public var advice: String?

    public init(name: String, message: String, advice: String? = nil) {
        self.name = name
        self.message = message
        self.advice = advice
    }

    public var description: String {
        var text = message.isEmpty ? name : "\(name): \(message)"
        if let advice { text += " (\(advice))" }
        return text
    }

    // Well-known names.
    public static let failed = "org.freedesktop.DBus.Error.Failed"
    public static let noReply = "org.freedesktop.DBus.Error.NoReply"
    public static let timeout = "org.freedesktop.DBus.Error.Timeout"
    public static let serviceUnknown = "org.freedesktop.DBus.Error.ServiceUnknown"
    public static let nameHasNoOwner = "org.freedesktop.DBus.Error.NameHasNoOwner"
    public static let unknownObject = "org.freedesktop.DBus.Error.UnknownObject"
    public static let unknownInterface = "org.freedesktop.DBus.Error.UnknownInterface"
    public static let unknownMethod = "org.freedesktop.DBus.Error.UnknownMethod"
    public static let unknownProperty = "org.freedesktop.DBus.Error.UnknownProperty"
    public static let propertyReadOnly = "org.freedesktop.DBus.Error.PropertyReadOnly"
    public static let invalidArgs = "org.freedesktop.DBus.Error.InvalidArgs"
    public static let accessDenied = "org.freedesktop.DBus.Error.AccessDenied"
    public static let noMemory = "org.freedesktop.DBus.Error.NoMemory"
    public static let disconnected = "org.freedesktop.DBus.Error.Disconnected"
    public static let noServer = "org.freedesktop.DBus.Error.NoServer"
    public static let fileNotFound = "org.freedesktop.DBus.Error.FileNotFound"
    public static let badAddress = "org.freedesktop.DBus.Error.BadAddress"
    public static let authFailed = "org.freedesktop.DBus.Error.AuthFailed"

    /// Whether the call got no answer in time (`NoReply` or `Timeout`).
    public var isTimeout: Bool { name == Self.noReply || name == Self.timeout }

    static let outOfMemory = DBusError(name: noMemory, message: "libdbus could not allocate memory")
    static let closed = DBusError(
        name: disconnected,
        message: "the connection is closed",
        advice: "open a new DBusConnection"
    )

    /// Takes the name and message out of a filled libdbus `DBusError` and frees it.
    static func take(_ error: inout CDBus.DBusError) -> DBusError {
        let name = error.name.map { String(cString: $0) } ?? failed
        let message = error.message.map { String(cString: $0) } ?? ""
        dbus_error_free(&error)
        return DBusError(name: name, message: message)
    }

    /// Adds advice to a failure to reach or join a bus (`bus` names it, e.g. `system bus at unix:path=…`).
    func withConnectAdvice(bus: String) -> DBusError {
        var copy = self
        switch name {
        case Self.noServer, Self.fileNotFound:
            copy.advice = "nothing listens at the \(bus): is dbus-daemon running, and is the address "
                + "(DBUS_SYSTEM_BUS_ADDRESS / DBUS_SESSION_BUS_ADDRESS) right?"
        case Self.accessDenied:
            copy.advice = "the \(bus) refuses this user: run as a user its policy allows (for the system bus see "
                + "/etc/dbus-1/system.d/; for BlueZ, a member of group 'bluetooth'), or add a policy file"
        case Self.authFailed:
            copy.advice = "the \(bus) rejected our credentials: in a user namespace the uid may be remapped"
        case Self.badAddress:
            copy.advice = "the address is malformed; it looks like 'unix:path=/run/dbus/system_bus_socket'"
        case Self.noReply, Self.timeout:
            copy.advice = "the \(bus) did not answer Hello in time; it may be overloaded"
        default:
            break
        }
        return copy
    }
}
