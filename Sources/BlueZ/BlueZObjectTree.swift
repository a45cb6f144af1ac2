import DBus

/// BlueZ names and UUID helpers.
public enum BlueZ {
    public static let busName = "org.bluez"
    public static let adapterInterface = "org.bluez.Adapter1"
    public static let deviceInterface = "org.bluez.Device1"
    public static let gattServiceInterface = "org.bluez.GattService1"
    public static let gattCharacteristicInterface = "org.bluez.GattCharacteristic1"
    public static let gattDescriptorInterface = "org.bluez.GattDescriptor1"
    public static let batteryInterface = "org.bluez.Battery1"

    /// The 128-bit form BlueZ uses for a 16-bit SIG UUID: `uuid16(0x180d)` is
    /// `0000180d-0000-1000-8000-00805f9b34fb`.
    public static func uuid16(_ short: UInt16) -> String {
        let hex = String(short, radix: 16)
        return String(repeating: "0", count: 8 - hex.count) + hex + "-0000-1000-8000-00805f9b34fb"
    }

    public static let heartRateService = uuid16(0x180d)
    public static let heartRateMeasurement = uuid16(0x2a37)
    public static let bodySensorLocation = uuid16(0x2a38)
    public static let batteryService = uuid16(0x180f)
    public static let batteryLevel = uuid16(0x2a19)
}

/// A Bluetooth adapter (`org.bluez.Adapter1`).
public struct BlueZAdapter: Sendable, Hashable {
    public var path: DBusObjectPath
    /// The last path element, e.g. `hci0`.
    public var name: String { path.rawValue.split(separator: "/").last.map(String.init) ?? path.rawValue }
    public var properties: [String: DBusValue]
    public var address: String? { properties["Address"]?.string }
    public var powered: Bool { properties["Powered"]?.bool ?? false }
    public var discovering: Bool { properties["Discovering"]?.bool ?? false }
    /// `Roles` (BlueZ ≥ 5.50), e.g. `["central", "peripheral"]`; `nil` when the adapter does not report it.
    public var roles: [String]? { properties["Roles"]?.stringArray }
}

/// A remote device (`org.bluez.Device1`, plus `org.bluez.Battery1` when present).
public struct BlueZDevice: Sendable, Hashable {
    public var path: DBusObjectPath
    public var properties: [String: DBusValue]
    /// `org.bluez.Battery1` properties, if the device has that interface.
    public var batteryProperties: [String: DBusValue]?
    public var adapter: DBusObjectPath? { properties["Adapter"]?.objectPath }
    public var address: String? { properties["Address"]?.string }
    public var name: String? { properties["Name"]?.string }
    public var alias: String? { properties["Alias"]?.string }
    public var rssi: Int16? { properties["RSSI"]?.int16 }
    /// Advertised or resolved service UUIDs (lower-case 128-bit strings).
    public var uuids: [String] { properties["UUIDs"]?.stringArray ?? [] }
    public var connected: Bool { properties["Connected"]?.bool ?? false }
    /// BlueZ holds keys for the device (it may have lost its own: a stale bond).
    public var paired: Bool { properties["Paired"]?.bool ?? false }
    public var servicesResolved: Bool { properties["ServicesResolved"]?.bool ?? false }
    /// `Battery1.Percentage`.
    public var batteryPercentage: UInt8? { batteryProperties?["Percentage"]?.byte }
}

/// A GATT service (`org.bluez.GattService1`).
public struct BlueZGattService: Sendable, Hashable {
    public var path: DBusObjectPath
    public var properties: [String: DBusValue]
    public var uuid: String? { properties["UUID"]?.string?.lowercased() }
    public var device: DBusObjectPath? { properties["Device"]?.objectPath }
    public var primary: Bool { properties["Primary"]?.bool ?? false }
}

/// A GATT characteristic (`org.bluez.GattCharacteristic1`).
public struct BlueZGattCharacteristic: Sendable, Hashable {
    public var path: DBusObjectPath
    public var properties: [String: DBusValue]
    public var uuid: String? { properties["UUID"]?.string?.lowercased() }
    public var service: DBusObjectPath? { properties["Service"]?.objectPath }
    /// e.g. `["read", "notify"]`.
    public var flags: [String] { properties["Flags"]?.stringArray ?? [] }
    public var notifying: Bool { properties["Notifying"]?.bool ?? false }
    /// The last value BlueZ holds (updated by reads and notifications).
    public var value: [UInt8]? { properties["Value"]?.bytes }
}

/// A change to the mirror of `/org/bluez`.
public enum BlueZChange: Sendable, Hashable {
    case interfacesAdded(DBusObjectPath, interfaces: [String])
    case interfacesRemoved(DBusObjectPath, interfaces: [String])
    case propertiesChanged(DBusObjectPath, interface: String, changed: [String: DBusValue], invalidated: [String])
    /// bluetoothd left the bus: the mirror is now empty and every BlueZ object, connection and notify session is
    /// gone.
    case bluetoothdStopped
    /// bluetoothd is (back) on the bus and the mirror was rebuilt from `GetManagedObjects`.
    case bluetoothdStarted
}

/// A snapshot of BlueZ's objects under `/org/bluez`: path → interface → properties, with typed views.
///
/// Pure value: `apply(_:)` updates it from a signal, so the mirroring logic can be tested without a bus.
public struct BlueZObjectTree: Sendable, Hashable {
    public private(set) var objects: [DBusObjectPath: [String: [String: DBusValue]]]

    public init(objects: [DBusObjectPath: [String: [String: DBusValue]]] = [:]) {
        self.objects = objects.filter { $0.key.isEqualOrDescendant(of: "/org/bluez") }
    }

    /// Adapters, sorted by path.
    public var adapters: [BlueZAdapter] {
        objects.compactMap { path, interfaces in
            interfaces[BlueZ.adapterInterface].map { BlueZAdapter(path: path, properties: $0) }
        }.sorted { $0.path < $1.path }
    }

    /// Devices (of every adapter, or of `adapter`), sorted by path.
    public func devices(of adapter: DBusObjectPath? = nil) -> [BlueZDevice] {
        objects.compactMap { path, interfaces -> BlueZDevice? in
            guard let properties = interfaces[BlueZ.deviceInterface] else { return nil }
            let device = BlueZDevice(
                path: path, properties: properties, batteryProperties: interfaces[BlueZ.batteryInterface])
            if let adapter, device.adapter != adapter, !path.isEqualOrDescendant(of: adapter) { return nil }
            return device
        }.sorted { $0.path < $1.path }
    }

    /// The device at `path`.
    public func device(_ path: DBusObjectPath) -> BlueZDevice? {
        objects[path]?[BlueZ.deviceInterface].map {
            BlueZDevice(path: path, properties: $0, batteryProperties: objects[path]?[BlueZ.batteryInterface])
        }
    }

    /// GATT services of `device` (optionally only those with `uuid`), sorted by path.
    public func services(of device: DBusObjectPath, uuid: String? = nil) -> [BlueZGattService] {
        objects.compactMap { path, interfaces -> BlueZGattService? in
            guard let properties = interfaces[BlueZ.gattServiceInterface] else { return nil }
            let service = BlueZGattService(path: path, properties: properties)
            guard service.device == device || (service.device == nil && path.isEqualOrDescendant(of: device))
            else { return nil }
            if let uuid, service.uuid != uuid.lowercased() { return nil }
            return service
        }.sorted { $0.path < $1.path }
    }

    /// GATT characteristics of `service` (optionally only those with `uuid`), sorted by path.
    public func characteristics(of service: DBusObjectPath, uuid: String? = nil) -> [BlueZGattCharacteristic] {
        objects.compactMap { path, interfaces -> BlueZGattCharacteristic? in
            guard let properties = interfaces[BlueZ.gattCharacteristicInterface] else { return nil }
            let characteristic = BlueZGattCharacteristic(path: path, properties: properties)
            guard characteristic.service == service
                || (characteristic.service == nil && path.isEqualOrDescendant(of: service))
            else { return nil }
            if let uuid, characteristic.uuid != uuid.lowercased() { return nil }
            return characteristic
        }.sorted { $0.path < $1.path }
    }

    /// The first characteristic with `characteristicUUID` in a service with `serviceUUID` on `device`; look
    /// characteristics up this way, never by handle-derived paths (handles differ between firmware versions).
    public func characteristic(
        _ characteristicUUID: String,
        inService serviceUUID: String,
        of device: DBusObjectPath
    ) -> BlueZGattCharacteristic? {
        for service in services(of: device, uuid: serviceUUID) {
            if let found = characteristics(of: service.path, uuid: characteristicUUID).first { return found }
        }
        return nil
    }

    /// The characteristic at `path`.
    public func characteristic(_ path: DBusObjectPath) -> BlueZGattCharacteristic? {
        objects[path]?[BlueZ.gattCharacteristicInterface].map { BlueZGattCharacteristic(path: path, properties: $0) }
    }

    /// Chooses an adapter: the one called `name` (`hciN`) if given, else the first powered adapter with the
    /// central role (adapters that do not report `Roles` count as central).
    public func chooseAdapter(named name: String? = nil) throws(BlueZAdapterChoiceError) -> BlueZAdapter {
        let all = adapters
        if let name {
            guard let adapter = all.first(where: { $0.name == name }) else {
                throw BlueZAdapterChoiceError(requested: name, available: all.map(\.name))
            }
            return adapter
        }
        guard let adapter = all.first(where: { $0.powered && ($0.roles?.contains("central") ?? true) }) else {
            throw BlueZAdapterChoiceError(requested: nil, available: all.map(\.name))
        }
        return adapter
    }

    /// Updates the tree from an `InterfacesAdded`, `InterfacesRemoved` or `PropertiesChanged` signal and returns
    /// the change, or `nil` if the message is none of these or lies outside `/org/bluez`.
    @discardableResult
    public mutating func apply(_ message: DBusMessage) -> BlueZChange? {
        guard message.kind == .signal else { return nil }
        switch (message.interface, message.member) {
        case ("org.freedesktop.DBus.ObjectManager", "InterfacesAdded"):
            guard message.body.count == 2, let path = message.body[0].objectPath,
                path.isEqualOrDescendant(of: "/org/bluez"),
                let interfaces = message.body[1].interfacesAndProperties
            else { return nil }
            for (interface, properties) in interfaces {
                objects[path, default: [:]][interface, default: [:]].merge(properties) { $1 }
            }
            return .interfacesAdded(path, interfaces: interfaces.keys.sorted())
        case ("org.freedesktop.DBus.ObjectManager", "InterfacesRemoved"):
            guard message.body.count == 2, let path = message.body[0].objectPath,
                path.isEqualOrDescendant(of: "/org/bluez"),
                let interfaces = message.body[1].stringArray
            else { return nil }
            for interface in interfaces { objects[path]?[interface] = nil }
            if objects[path]?.isEmpty == true { objects[path] = nil }
            return .interfacesRemoved(path, interfaces: interfaces)
        case ("org.freedesktop.DBus.Properties", "PropertiesChanged"):
            guard message.body.count >= 2, let path = message.path, path.isEqualOrDescendant(of: "/org/bluez"),
                let interface = message.body[0].string, let changed = message.body[1].propertyDictionary
            else { return nil }
            let invalidated = message.body.count > 2 ? (message.body[2].stringArray ?? []) : []
            // Only objects we know about: a late signal for a removed object must not resurrect it.
            guard objects[path] != nil else { return nil }
            objects[path]?[interface, default: [:]].merge(changed) { $1 }
            for name in invalidated { objects[path]?[interface]?[name] = nil }
            return .propertiesChanged(path, interface: interface, changed: changed, invalidated: invalidated)
        default:
            return nil
        }
    }
}

/// No adapter fits the request.
public struct BlueZAdapterChoiceError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The adapter name asked for, or `nil` for "the default".
    public var requested: String?
    /// Names of the adapters BlueZ has.
    public var available: [String]

    public init(requested: String?, available: [String]) {
        self.requested = requested
        self.available = available
    }

    public var description: String {
        let present = available.isEmpty ? "none" : available.joined(separator: ", ")
        if let requested {
            return "no Bluetooth adapter named \(requested) (adapters: \(present)); check `bluetoothctl list`"
        }
        if available.isEmpty {
            return "no Bluetooth adapter: plug one in, check `rfkill list` and that bluetoothd sees it"
        }
        return "no powered Bluetooth adapter with the central role (adapters: \(present)); "
            + "power one on with `bluetoothctl power on`"
    }
}
