import DBus

/// BlueZ names used by the strap code.
enum BlueZName {
    static let service = "org.bluez"
    static let adapter = "org.bluez.Adapter1"
    static let device = "org.bluez.Device1"
    static let battery = "org.bluez.Battery1"
    static let gattService = "org.bluez.GattService1"
    static let characteristic = "org.bluez.GattCharacteristic1"
    static let properties = "org.freedesktop.DBus.Properties"
    static let objectManager = "org.freedesktop.DBus.ObjectManager"
}

/// A change seen in `/org/bluez`, after it was applied to the mirror.
enum BlueZChange: Sendable {
    case interfacesAdded(path: String, interfaces: [String])
    case interfacesRemoved(path: String, interfaces: [String])
    case propertiesChanged(path: String, interface: String, changed: [String: DBusValue])
}

/// The strap code's copy of BlueZ's object tree: `GetManagedObjects` plus `InterfacesAdded/Removed` and
/// `PropertiesChanged` applied on top (ble.md §3.1). Pure value; the driver guards it with a lock.
struct BlueZMirror: Sendable {
    private(set) var objects: [String: [String: [String: DBusValue]]] = [:]

    mutating func reset(_ managed: [DBusObjectPath: [String: [String: DBusValue]]]) {
        objects = [:]
        for (path, interfaces) in managed { objects[path.rawValue] = interfaces }
    }

    mutating func clear() { objects = [:] }

    /// Applies one `org.bluez` signal; returns what changed, or nil for signals the mirror ignores.
    mutating func apply(_ message: DBusMessage) -> BlueZChange? {
        switch (message.interface, message.member) {
        case (BlueZName.objectManager, "InterfacesAdded"):
            guard let path = message.body.first?.objectPath?.rawValue,
                let interfaces = message.body.dropFirst().first?.interfacesAndProperties
            else { return nil }
            for (name, props) in interfaces { objects[path, default: [:]][name] = props }
            return .interfacesAdded(path: path, interfaces: Array(interfaces.keys))
        case (BlueZName.objectManager, "InterfacesRemoved"):
            guard let path = message.body.first?.objectPath?.rawValue,
                let names = message.body.dropFirst().first?.stringArray
            else { return nil }
            for name in names { objects[path]?[name] = nil }
            if objects[path]?.isEmpty == true { objects[path] = nil }
            return .interfacesRemoved(path: path, interfaces: names)
        case (BlueZName.properties, "PropertiesChanged"):
            guard let path = message.path?.rawValue, let interface = message.body.first?.string,
                let changed = message.body.dropFirst().first?.propertyDictionary
            else { return nil }
            let invalidated = message.body.dropFirst(2).first?.stringArray ?? []
            if objects[path]?[interface] != nil {
                for (k, v) in changed { objects[path]?[interface]?[k] = v }
                for k in invalidated { objects[path]?[interface]?[k] = nil }
            }
            return .propertiesChanged(path: path, interface: interface, changed: changed)
        default:
            return nil
        }
    }

    // MARK: Queries

    func props(_ path: String, _ interface: String) -> [String: DBusValue]? { objects[path]?[interface] }

    /// Adapters as (path, name, powered, central-capable), sorted by path.
    var adapters: [(path: String, name: String, powered: Bool)] {
        objects.compactMap { path, ifaces -> (String, String, Bool)? in
            guard let a = ifaces[BlueZName.adapter] else { return nil }
            if let roles = a["Roles"]?.stringArray, !roles.contains("central") { return nil }
            return (path, String(path.split(separator: "/").last ?? ""), a["Powered"]?.bool ?? false)
        }.sorted { $0.0 < $1.0 }
    }

    func device(at path: String) -> StrapDevice? {
        guard let d = objects[path]?[BlueZName.device], let address = d["Address"]?.string else { return nil }
        return StrapDevice(
            path: path, address: address.uppercased(), name: d["Name"]?.string ?? d["Alias"]?.string,
            connected: d["Connected"]?.bool ?? false, servicesResolved: d["ServicesResolved"]?.bool ?? false)
    }

    func uuids(of devicePath: String) -> [String] { objects[devicePath]?[BlueZName.device]?["UUIDs"]?.stringArray ?? [] }

    /// Device objects under `adapterPath`, sorted by path.
    func devices(under adapterPath: String) -> [StrapDevice] {
        objects.keys.filter { $0.hasPrefix(adapterPath + "/") }.sorted().compactMap(device(at:))
    }

    /// The characteristic with 16-bit UUID `uuid` under `devicePath` (looked up by UUID, never by handle).
    func characteristic(_ uuid: UInt16, under devicePath: String) -> String? {
        objects.keys.sorted().first { path in
            path.hasPrefix(devicePath + "/")
                && objects[path]?[BlueZName.characteristic]?["UUID"]?.string.flatMap(GATTUUID.short) == uuid
        }
    }

    /// The Battery1 percentage of a device, when BlueZ exposes it.
    func batteryPercent(of devicePath: String) -> Int? {
        objects[devicePath]?[BlueZName.battery]?["Percentage"]?.byte.map(Int.init)
    }

    /// The Polar broadcast heart rate in a device's manufacturer data.
    func polarBroadcast(of devicePath: String) -> PolarBroadcast? {
        guard let entries = objects[devicePath]?[BlueZName.device]?["ManufacturerData"]?.dictionaryEntries else {
            return nil
        }
        for (k, v) in entries where k.unwrapped.uint16 == PolarBroadcast.companyId {
            if let bytes = v.unwrapped.bytes { return PolarBroadcast(payload: bytes) }
        }
        return nil
    }
}
