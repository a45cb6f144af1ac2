import Foundation
import BlueZ
import DBus

/// Why the strap code cannot start, with what to do about it.
public enum BLEHeartRateError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The system bus could not be reached.
    case busUnavailable(String)
    /// Nobody owns `org.bluez`.
    case noBluetoothd
    /// bluetoothd owns its name but did not answer a call in time (hung, or busy with a stuck adapter).
    case bluetoothdNotAnswering(String)
    /// The bus refused us access to `org.bluez`.
    case permissionDenied(String)
    /// No Bluetooth adapter (or none with the central role).
    case noAdapter
    /// `--adapter NAME` does not exist.
    case adapterNotFound(String, available: [String])
    /// The adapter exists but is powered off (or rfkill-blocked).
    case adapterOff(String)
    /// No matching strap showed up in time.
    case strapNotFound(spec: String, timeoutSec: Double)
    case invalidSpec(String)

    public var description: String {
        switch self {
        case .busUnavailable(let why):
            if let address = ProcessInfo.processInfo.environment["DBUS_SYSTEM_BUS_ADDRESS"] {
                "cannot reach the D-Bus system bus at DBUS_SYSTEM_BUS_ADDRESS=\(address) (\(why)). Correct the variable "
                    + "(the system bus is usually unix:path=/run/dbus/system_bus_socket) or unset it, then run "
                    + "`hr-gateway doctor` to check the rest."
            } else {
                "cannot reach the D-Bus system bus (\(why)). Start it with `sudo systemctl start dbus` (Debian: "
                    + "`sudo apt-get install dbus`) or set DBUS_SYSTEM_BUS_ADDRESS to its address, then run "
                    + "`hr-gateway doctor` to check the rest."
            }
        case .noBluetoothd:
            "bluetoothd is not running (nobody owns org.bluez on the system bus); start it with "
                + "`sudo systemctl start bluetooth` (Debian: `sudo apt-get install bluez` first)"
        case .bluetoothdNotAnswering(let why):
            "bluetoothd is running but did not answer (\(why)); it may be hung: restart it with "
                + "`sudo systemctl restart bluetooth`, look at `journalctl -u bluetooth` for why, then run "
                + "`hr-gateway doctor`"
        case .permissionDenied(let why):
            "the system bus denied access to org.bluez (\(why)); add this user to the `bluetooth` group "
                + "(`sudo usermod -aG bluetooth $USER`, then log in again) or install a D-Bus policy in "
                + "/etc/dbus-1/system.d/ allowing send_destination=\"org.bluez\" for this user"
        case .noAdapter:
            "no Bluetooth adapter found; plug in a USB dongle or check `bluetoothctl list` and `rfkill list`"
        case let .adapterNotFound(name, available):
            "no adapter \(name); available: \(available.isEmpty ? "none" : available.joined(separator: ", "))"
        case .adapterOff(let name):
            "adapter \(name) is powered off; run `bluetoothctl power on` (if it is blocked: `rfkill unblock bluetooth`)"
        case let .strapNotFound(spec, timeout):
            "no heart-rate strap\(spec == "auto" ? "" : " matching \(spec)") found within \(timeout) s; wear the strap "
                + "(it only advertises with skin contact), move it closer, and make sure no phone app holds its only "
                + "connection"
        case .invalidSpec(let s):
            StrapSpec.looksLikeAddress(s.trimmingCharacters(in: .whitespaces))
                ? StrapSpecError(spec: s, notAnAddress: true).description
                : "invalid strap spec \"\(s)\": give an address (AA:BB:CC:DD:EE:FF), a name prefix or auto"
        }
    }

    /// A failure to connect to the system bus, with libdbus's reason alone (the fix is in the description).
    public static func systemBusUnreachable(_ error: any Error) -> BLEHeartRateError {
        guard let e = error as? DBusError else { return .busUnavailable("\(error)") }
        return .busUnavailable(e.message.isEmpty ? e.name : e.message)
    }

    /// Maps a D-Bus failure talking to `org.bluez` to the error the user should see.
    public static func from(_ error: any Error) -> BLEHeartRateError {
        if let b = error as? BlueZError {
            switch b.kind {
            case .bluetoothdNotRunning: return .noBluetoothd
            case .accessDenied: return .permissionDenied(b.message)
            case .timedOut: return .bluetoothdNotAnswering(b.message)
            default: return .busUnavailable(b.description)
            }
        }
        guard let e = error as? DBusError else { return .busUnavailable("\(error)") }
        switch e.name {
        case DBusError.serviceUnknown, DBusError.nameHasNoOwner: return .noBluetoothd
        case DBusError.accessDenied: return .permissionDenied(e.message)
        case _ where e.isTimeout: return .bluetoothdNotAnswering(e.name)
        default: return .busUnavailable(e.description)
        }
    }
}
