import DBus

/// An error from BlueZ (or from the bus on its way there), classified by D-Bus error name; the name and message are
/// kept as received.
///
/// `description` is `name: message`, e.g. `org.bluez.Error.Failed: le-connection-abort-by-local`, plus advice for the
/// kinds that need an operator (bluetoothd not running, permission).
public struct BlueZError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of failure this is.
    public enum Kind: Hashable, Sendable {
        /// `org.bluez.Error.Failed`; see `message` (e.g. `le-connection-abort-by-local`).
        case failed
        /// `org.bluez.Error.InProgress`: the same operation is already under way.
        case inProgress
        /// `org.freedesktop.DBus.Error.UnknownObject` or `org.bluez.Error.DoesNotExist` on an object path: the
        /// object is gone (e.g. a temporary device removed after discovery stopped).
        case unknownObject
        /// `org.bluez.Error.DoesNotExist`.
        case doesNotExist
        /// `org.bluez.Error.NotReady`: adapter off or blocked.
        case notReady
        /// `org.bluez.Error.NotPermitted`.
        case notPermitted
        /// `org.bluez.Error.NotSupported`.
        case notSupported
        /// `org.bluez.Error.AlreadyConnected`.
        case alreadyConnected
        /// `org.bluez.Error.NotConnected`.
        case notConnected
        /// `org.bluez.Error.InvalidArguments` or `org.freedesktop.DBus.Error.InvalidArgs`.
        case invalidArguments
        /// `org.freedesktop.DBus.Error.ServiceUnknown` / `NameHasNoOwner`: bluetoothd is not running.
        case bluetoothdNotRunning
        /// `org.freedesktop.DBus.Error.AccessDenied`: the bus policy refuses this user.
        case accessDenied
        /// No reply within the call's timeout.
        case timedOut
        /// Any other error name.
        case other
    }

    public var kind: Kind
    /// The D-Bus error name as received.
    public var name: String
    /// The D-Bus error message as received.
    public var message: String

    /// The device refused an attribute for lack of pairing or encryption: `NotAuthorized`, or an ATT error
    /// 0x05 (insufficient authentication), 0x08 (insufficient authorization) or 0x0F (insufficient encryption) as
    /// BlueZ words it ("Operation failed with ATT error: 0x05").
    public var needsPairing: Bool {
        if name == "org.bluez.Error.NotAuthorized" || name == "org.bluez.Error.AuthenticationRequired" { return true }
        let m = message.lowercased()
        return ["att error: 0x05", "att error: 0x08", "att error: 0x0f"].contains { m.contains($0) }
            || ((kind == .notPermitted || kind == .failed) && (m.contains("authenticat") || m.contains("encrypt")))
    }

    public init(kind: Kind, name: String, message: String) {
        self.kind = kind
        self.name = name
        self.message = message
    }

    /// Classifies a D-Bus error by its name.
    public init(_ error: DBusError) {
        self.name = error.name
        self.message = error.message
        self.kind =
            switch error.name {
            case "org.bluez.Error.Failed": .failed
            case "org.bluez.Error.InProgress": .inProgress
            case DBusError.unknownObject: .unknownObject
            case "org.bluez.Error.DoesNotExist": .doesNotExist
            case "org.bluez.Error.NotReady": .notReady
            case "org.bluez.Error.NotPermitted": .notPermitted
            case "org.bluez.Error.NotSupported": .notSupported
            case "org.bluez.Error.AlreadyConnected": .alreadyConnected
            case "org.bluez.Error.NotConnected": .notConnected
            case "org.bluez.Error.InvalidArguments", DBusError.invalidArgs: .invalidArguments
            case DBusError.serviceUnknown, DBusError.nameHasNoOwner: .bluetoothdNotRunning
            case DBusError.accessDenied: .accessDenied
            case DBusError.noReply, DBusError.timeout: .timedOut
            default: .other
            }
    }

    /// `org.bluez.Error.Failed: le-connection-abort-by-local`: bluetoothd connected briefly and gave up; wait for
    /// `Connected=false`, then connect again.
    public var isConnectionAbortByLocal: Bool { kind == .failed && message == "le-connection-abort-by-local" }

    /// What an operator should do, for the kinds that need one.
    public var advice: String? {
        switch kind {
        case .bluetoothdNotRunning:
            "bluetoothd is not on the bus: start it (systemctl start bluetooth) and check that BlueZ is installed"
        case .accessDenied:
            "the D-Bus policy refuses this user access to org.bluez: run as a member of group 'bluetooth' or add a "
                + "policy file in /etc/dbus-1/system.d/"
        case .notReady:
            "the adapter is off or blocked: bluetoothctl power on; rfkill unblock bluetooth"
        default:
            nil
        }
    }

    public var description: String {
        var text = message.isEmpty ? name : "\(name): \(message)"
        if let advice { text += " (\(advice))" }
        return text
    }

    /// Runs a D-Bus call, turning `DBusError` into `BlueZError`.
    static func mapping<R>(_ body: () async throws -> R) async throws -> R {
        do {
            return try await body()
        } catch let error as DBusError {
            throw BlueZError(error)
        }
    }
}
