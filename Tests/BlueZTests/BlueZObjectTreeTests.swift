import BlueZ
import DBus
import Testing

@Suite("BlueZObjectTree (no bus)")
struct BlueZObjectTreeTests {
    static func adapter(powered: Bool, roles: [String]?) -> [String: [String: DBusValue]] {
        var properties: [String: DBusValue] = ["Powered": .boolean(powered)]
        if let roles { properties["Roles"] = .stringArray(roles) }
        return [BlueZ.adapterInterface: properties]
    }

    @Test func defaultAdapterIsTheFirstPoweredCentral() throws {
        let tree = BlueZObjectTree(objects: [
            "/org/bluez/hci0": Self.adapter(powered: true, roles: ["peripheral"]),
            "/org/bluez/hci1": Self.adapter(powered: false, roles: ["central"]),
            "/org/bluez/hci2": Self.adapter(powered: true, roles: ["central", "peripheral"]),
            "/org/bluez/hci3": Self.adapter(powered: true, roles: nil),
        ])
        #expect(try tree.chooseAdapter().name == "hci2")
        #expect(try tree.chooseAdapter(named: "hci1").name == "hci1")
        let none = BlueZObjectTree(objects: ["/org/bluez/hci0": Self.adapter(powered: false, roles: nil)])
        let error = #expect(throws: BlueZAdapterChoiceError.self) { try none.chooseAdapter() }
        #expect(error?.description.contains("bluetoothctl power on") == true)
        #expect(throws: BlueZAdapterChoiceError(requested: nil, available: [])) { try BlueZObjectTree().chooseAdapter() }
    }

    @Test func adaptersWithoutRolesCountAsCentral() throws {
        let tree = BlueZObjectTree(objects: ["/org/bluez/hci4": Self.adapter(powered: true, roles: nil)])
        #expect(try tree.chooseAdapter().name == "hci4")
    }

    @Test func signalsUpdateTheTreeAndInvalidatedPropertiesGo() {
        var tree = BlueZObjectTree()
        let device: DBusObjectPath = "/org/bluez/hci0/dev_11_22_33_44_55_66"
        let added = DBusMessage(
            kind: .signal, path: "/", interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesAdded",
            body: [
                .objectPath(device),
                .dictionary(keySignature: "s", valueSignature: "a{sv}", [
                    .string(BlueZ.deviceInterface): .properties(["Name": .string("TICKR"), "RSSI": .int16(-70)])
                ]),
            ])
        #expect(tree.apply(added) == .interfacesAdded(device, interfaces: [BlueZ.deviceInterface]))
        let changed = DBusMessage(
            kind: .signal, path: device, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
            body: [.string(BlueZ.deviceInterface), .properties(["Connected": .boolean(true)]), .stringArray(["RSSI"])])
        #expect(tree.apply(changed) != nil)
        #expect(tree.device(device)?.connected == true)
        #expect(tree.device(device)?.rssi == nil)
        #expect(tree.device(device)?.name == "TICKR")

        let removed = DBusMessage(
            kind: .signal, path: "/", interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesRemoved",
            body: [.objectPath(device), .stringArray([BlueZ.deviceInterface])])
        #expect(tree.apply(removed) == .interfacesRemoved(device, interfaces: [BlueZ.deviceInterface]))
        #expect(tree.objects.isEmpty)
        // A late PropertiesChanged for the removed object does not bring it back.
        #expect(tree.apply(changed) == nil)
        #expect(tree.objects.isEmpty)
    }

    @Test func objectsOutsideOrgBluezAreIgnored() {
        var tree = BlueZObjectTree(objects: ["/": ["org.bluez.AgentManager1": [:]], "/org/bluez": ["x": [:]]])
        #expect(Set(tree.objects.keys) == ["/org/bluez"])
        let foreign = DBusMessage(
            kind: .signal, path: "/", interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesAdded",
            body: [.objectPath("/org/other"), .dictionary(keySignature: "s", valueSignature: "a{sv}", [:])])
        #expect(tree.apply(foreign) == nil)
    }

    @Test func characteristicsAreFoundByUUIDNotByPath() {
        let device: DBusObjectPath = "/org/bluez/hci0/dev_A"
        let tree = BlueZObjectTree(objects: [
            device: [BlueZ.deviceInterface: [:]],
            "/org/bluez/hci0/dev_A/service0010": [BlueZ.gattServiceInterface: [
                "UUID": .string(BlueZ.batteryService), "Device": .objectPath(device)]],
            "/org/bluez/hci0/dev_A/service0010/char0011": [BlueZ.gattCharacteristicInterface: [
                "UUID": .string(BlueZ.batteryLevel), "Service": .objectPath("/org/bluez/hci0/dev_A/service0010")]],
            "/org/bluez/hci0/dev_A/service0020": [BlueZ.gattServiceInterface: [
                "UUID": .string("0000180D-0000-1000-8000-00805F9B34FB"), "Device": .objectPath(device)]],
            "/org/bluez/hci0/dev_A/service0020/char0023": [BlueZ.gattCharacteristicInterface: [
                "UUID": .string(BlueZ.heartRateMeasurement), "Service": .objectPath("/org/bluez/hci0/dev_A/service0020"),
                "Value": .bytes([0x00, 0x50])]],
        ])
        let found = tree.characteristic(BlueZ.heartRateMeasurement, inService: BlueZ.heartRateService, of: device)
        #expect(found?.path == "/org/bluez/hci0/dev_A/service0020/char0023")
        #expect(found?.value == [0x00, 0x50])
        #expect(tree.characteristic(BlueZ.heartRateMeasurement, inService: BlueZ.batteryService, of: device) == nil)
    }

    @Test func uuid16Expansion() {
        #expect(BlueZ.uuid16(0x180d) == "0000180d-0000-1000-8000-00805f9b34fb")
        #expect(BlueZ.uuid16(0x2a37) == "00002a37-0000-1000-8000-00805f9b34fb")
    }

    @Test func errorsAreClassifiedByName() {
        let cases: [(String, BlueZError.Kind)] = [
            ("org.bluez.Error.Failed", .failed), ("org.bluez.Error.InProgress", .inProgress),
            ("org.freedesktop.DBus.Error.UnknownObject", .unknownObject), ("org.bluez.Error.NotReady", .notReady),
            ("org.bluez.Error.NotPermitted", .notPermitted), ("org.bluez.Error.NotSupported", .notSupported),
            ("org.bluez.Error.AlreadyConnected", .alreadyConnected), ("org.bluez.Error.DoesNotExist", .doesNotExist),
            ("org.freedesktop.DBus.Error.ServiceUnknown", .bluetoothdNotRunning),
            ("org.freedesktop.DBus.Error.AccessDenied", .accessDenied),
            ("org.freedesktop.DBus.Error.NoReply", .timedOut), ("org.example.Weird", .other),
        ]
        for (name, kind) in cases {
            let error = BlueZError(DBusError(name: name, message: "m"))
            #expect(error.kind == kind, "\(name)")
            #expect(error.name == name && error.message == "m")
        }
        #expect(BlueZError(DBusError(name: "org.freedesktop.DBus.Error.AccessDenied", message: "x"))
            .description.contains("group 'bluetooth'"))
    }
}
