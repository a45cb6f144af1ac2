import CBluetooth
import DBus
import FaceDetection
import Foundation
import Logging

/// Gathers `DoctorFacts` from the machine: the system bus and BlueZ through D-Bus, controllers through
/// libbluetooth, rfkill through sysfs, cameras through /dev.
public enum SystemProbe {
    /// Fills the Bluetooth, rfkill and camera facts. `bus` defaults to the system bus
    /// (`DBUS_SYSTEM_BUS_ADDRESS` if set).
    public static func probe(
        into facts: inout DoctorFacts, bus: DBusBus = .system,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        sysfsRoot: String = "/sys", devRoot: String = "/dev"
    ) async {
        switch bus {
        case .address(let a): facts.busAddress = a
        case .system:
            facts.busAddress = environment["DBUS_SYSTEM_BUS_ADDRESS"] ?? "unix:path=/run/dbus/system_bus_socket"
            facts.busAddressFromEnvironment = environment["DBUS_SYSTEM_BUS_ADDRESS"] != nil
        case .session: facts.busAddress = environment["DBUS_SESSION_BUS_ADDRESS"] ?? "session bus"
        }
        facts.bluetoothdVersion = bluetoothdVersion()
        (facts.controllers, facts.controllersError) = controllers()
        facts.rfkill = rfkill(sysfsRoot: sysfsRoot)
        facts.cameras = cameras(devRoot: devRoot)
        let (chosen, chosenBy) = (facts.faceCascade.chosen, facts.faceCascade.chosenBy)
        facts.faceCascade = faceCascade(path: facts.faceCascade.path.isEmpty
            ? CascadeFaceDetector.defaultCascadePath : facts.faceCascade.path)
        (facts.faceCascade.chosen, facts.faceCascade.chosenBy) = (chosen, chosenBy)

        let logger = Logger(label: "doctor") { _ in SwiftLogNoOpLogHandler() }
        let connection: DBusConnection
        do { connection = try await DBusConnection.connect(to: bus, logger: logger) } catch {
            // libdbus's reason alone: the check's line carries the address and the fix.
            facts.busError = (error as? DBusError).map { $0.message.isEmpty ? $0.name : $0.message } ?? "\(error)"
            return
        }
        defer { connection.close() }
        do {
            facts.bluezRunning = try await connection.listNames().contains("org.bluez")
        } catch {
            facts.busError = "ListNames failed: \(error)"
            return
        }
        guard facts.bluezRunning else { return }
        do {
            let objects = try await connection.managedObjects(destination: "org.bluez", timeout: .seconds(5))
            facts.adapters = objects.compactMap { path, interfaces -> DoctorFacts.Adapter? in
                guard let a = interfaces["org.bluez.Adapter1"] else { return nil }
                return DoctorFacts.Adapter(
                    name: String(path.rawValue.split(separator: "/").last ?? ""),
                    address: a["Address"]?.string ?? "?",
                    powered: a["Powered"]?.bool ?? false)
            }.sorted { $0.name < $1.name }
        } catch {
            facts.bluezError = "\(error)"
        }
    }

    /// `bluetoothd -v` of the first binary found.
    static func bluetoothdVersion() -> String? {
        for path in ["/usr/libexec/bluetooth/bluetoothd", "/usr/lib/bluetooth/bluetoothd", "/usr/sbin/bluetoothd"]
        where FileManager.default.isExecutableFile(atPath: path) {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: path)
            p.arguments = ["-v"]
            let out = Pipe()
            p.standardOutput = out
            p.standardError = FileHandle.nullDevice
            p.standardInput = FileHandle.nullDevice
            guard (try? p.run()) != nil else { continue }
            let data = out.fileHandleForReading.readDataToEndOfFile()
            p.waitUntilExit()
            let v = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            if !v.isEmpty { return v }
        }
        return nil
    }

    /// Controllers known to the kernel, through libbluetooth's `hci_devinfo`; `hci_get_route` names the default.
    static func controllers() -> ([DoctorFacts.Controller], String?) {
        let probe = socket(AF_BLUETOOTH, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), BTPROTO_HCI)
        guard probe >= 0 else {
            let reason = errno == EAFNOSUPPORT
                ? "Bluetooth sockets are not supported here (no bluetooth kernel module, or a container)"
                : String(cString: strerror(errno))
            return ([], reason)
        }
        close(probe)
        var found: [DoctorFacts.Controller] = []
        for id in 0..<Int32(HCI_MAX_DEV) {
            var info = hci_dev_info()
            guard hci_devinfo(id, &info) == 0 else { continue }
            let name = withUnsafeBytes(of: info.name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            var text = [CChar](repeating: 0, count: 18)
            var address = info.bdaddr
            _ = ba2str(&address, &text)
            found.append(DoctorFacts.Controller(
                name: name, address: String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self),
                up: info.flags & 1 != 0))
        }
        let route = hci_get_route(nil)
        if route >= 0, let i = found.firstIndex(where: { $0.name == "hci\(route)" }), i != 0 {
            found.insert(found.remove(at: i), at: 0)
        }
        return (found, nil)
    }

    static func rfkill(sysfsRoot: String) -> [DoctorFacts.RFKill] {
        let dir = sysfsRoot + "/class/rfkill"
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
        func read(_ path: String) -> String? {
            (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        return entries.sorted().compactMap { e in
            guard read("\(dir)/\(e)/type") == "bluetooth" else { return nil }
            return DoctorFacts.RFKill(
                name: read("\(dir)/\(e)/name") ?? e,
                softBlocked: read("\(dir)/\(e)/soft") == "1", hardBlocked: read("\(dir)/\(e)/hard") == "1")
        }
    }

    /// Loads the face cascade the camera provider would load.
    public static func faceCascade(path: String) -> DoctorFacts.FaceCascade {
        do {
            _ = try CascadeFaceDetector(cascadePath: path)
            return DoctorFacts.FaceCascade(path: path, loaded: true)
        } catch {
            return DoctorFacts.FaceCascade(path: path, loaded: false, errorCode: error.code.rawValue,
                                           error: error.description)
        }
    }

    static func cameras(devRoot: String) -> [DoctorFacts.Camera] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: devRoot)) ?? []
        return entries.filter { $0.hasPrefix("video") && $0.dropFirst(5).allSatisfy(\.isNumber) }
            .sorted { $0.count != $1.count ? $0.count < $1.count : $0 < $1 }
            .map { DoctorFacts.Camera(path: "\(devRoot)/\($0)", accessible: access("\(devRoot)/\($0)", R_OK | W_OK) == 0) }
    }
}
