import DBus
import DBusTestSupport
import Foundation
import Logging
import Synchronization
import Testing

/// Values recorded from handlers.
final class Recorder: Sendable {
    private let values = Mutex<[DBusValue]>([])
    func append(_ value: DBusValue) { values.withLock { $0.append(value) } }
    var recorded: [DBusValue] { values.withLock { $0 } }
}

@Suite("Exported objects: Properties, ObjectManager, Introspectable", .timeLimit(.minutes(1)))
struct ExportedObjectTests {
    static let busName = "org.example.Gatt"

    /// A GATT-application-like tree: an object manager at /org/example/app with a service and a characteristic.
    static func exportApplication(on server: DBusConnection, setValues: Recorder? = nil) async throws {
        #expect(try await server.requestName(busName) == .primaryOwner)
        server.exportObjectManager(at: "/org/example/app")
        try server.export("/org/example/app/service0", interfaces: [
            DBusInterface("org.bluez.GattService1", properties: [
                "UUID": DBusProperty(.string("0000180d-0000-1000-8000-00805f9b34fb")),
                "Primary": DBusProperty(.boolean(true)),
            ])
        ])
        try server.export("/org/example/app/service0/char0", interfaces: [
            DBusInterface(
                "org.bluez.GattCharacteristic1",
                methods: ["ReadValue": DBusMethod(input: "a{sv}", output: "ay") { _ in [.bytes([0x00, 0x48])] }],
                properties: [
                    "UUID": DBusProperty(.string("00002a37-0000-1000-8000-00805f9b34fb")),
                    "Service": DBusProperty(.objectPath("/org/example/app/service0")),
                    "Flags": DBusProperty(.stringArray(["read", "notify"])),
                    "Description": DBusProperty(.string("initial"), writable: true) { value in
                        setValues?.append(value)
                    },
                ]
            )
        ])
    }

    @Test func getManagedObjectsFromASecondConnection() async throws {
        try await withPrivateBus { _, server, client in
            try await Self.exportApplication(on: server)
            let objects = try await client.managedObjects(destination: Self.busName, path: "/org/example/app")
            #expect(Set(objects.keys) == ["/org/example/app/service0", "/org/example/app/service0/char0"])
            let service = try #require(objects["/org/example/app/service0"]?["org.bluez.GattService1"])
            #expect(service["UUID"]?.string == "0000180d-0000-1000-8000-00805f9b34fb")
            #expect(service["Primary"]?.bool == true)
            let characteristic = try #require(
                objects["/org/example/app/service0/char0"]?["org.bluez.GattCharacteristic1"])
            #expect(characteristic["Flags"]?.stringArray == ["read", "notify"])
            #expect(characteristic["Service"]?.objectPath == "/org/example/app/service0")
        }
    }

    @Test func propertiesGetGetAllAndSet() async throws {
        let setValues = Recorder()
        try await withPrivateBus { _, server, client in
            try await Self.exportApplication(on: server, setValues: setValues)
            let path: DBusObjectPath = "/org/example/app/service0/char0"
            let interface = "org.bluez.GattCharacteristic1"
            #expect(
                try await client.property("UUID", interface: interface, destination: Self.busName, path: path)
                    == .string("00002a37-0000-1000-8000-00805f9b34fb"))
            let all = try await client.allProperties(interface: interface, destination: Self.busName, path: path)
            #expect(Set(all.keys) == ["UUID", "Service", "Flags", "Description"])

            let changes = try await client.messages(
                matching: DBusMatchRule(interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
                                        path: path))
            try await client.setProperty(
                "Description", interface: interface, to: .string("chest strap"), destination: Self.busName, path: path)
            #expect(
                try await client.property("Description", interface: interface, destination: Self.busName, path: path)
                    == .string("chest strap"))
            #expect(setValues.recorded == [.string("chest strap")])
            var iterator = changes.makeAsyncIterator()
            let changed = try #require(await iterator.next())
            #expect(changed.body.first == .string(interface))
            #expect(changed.body.dropFirst().first?.propertyDictionary == ["Description": .string("chest strap")])

            let readOnly = await #expect(throws: DBusError.self) {
                try await client.setProperty(
                    "UUID", interface: interface, to: .string("x"), destination: Self.busName, path: path)
            }
            #expect(readOnly?.name == DBusError.propertyReadOnly)
            let wrongType = await #expect(throws: DBusError.self) {
                try await client.setProperty(
                    "Description", interface: interface, to: .int32(1), destination: Self.busName, path: path)
            }
            #expect(wrongType?.name == DBusError.invalidArgs)
            let missing = await #expect(throws: DBusError.self) {
                _ = try await client.property("Nope", interface: interface, destination: Self.busName, path: path)
            }
            #expect(missing?.name == DBusError.unknownProperty)
        }
    }

    @Test func serverSidePropertyChangeIsSignalled() async throws {
        try await withPrivateBus { _, server, client in
            try await Self.exportApplication(on: server)
            let path: DBusObjectPath = "/org/example/app/service0/char0"
            let changes = try await client.messages(
                matching: DBusMatchRule(interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
                                        pathNamespace: "/org/example/app"))
            try server.setExportedProperty(
                "Value", interface: "org.bluez.GattCharacteristic1", to: .bytes([0x10, 0x48]), at: path)
            var iterator = changes.makeAsyncIterator()
            let changed = try #require(await iterator.next())
            #expect(changed.path == path)
            #expect(changed.body.dropFirst().first?.propertyDictionary?["Value"]?.bytes == [0x10, 0x48])
            #expect(
                try await client.property(
                    "Value", interface: "org.bluez.GattCharacteristic1", destination: Self.busName, path: path
                ).bytes == [0x10, 0x48])
        }
    }

    @Test func exportAndUnexportEmitInterfacesAddedAndRemoved() async throws {
        try await withPrivateBus { _, server, client in
            try await Self.exportApplication(on: server)
            let signals = try await client.messages(
                matching: DBusMatchRule(interface: "org.freedesktop.DBus.ObjectManager", path: "/org/example/app"))
            try server.export("/org/example/app/service1", interfaces: [
                DBusInterface("org.bluez.GattService1", properties: ["UUID": DBusProperty(.string("180f"))])
            ])
            try server.unexport("/org/example/app/service1")
            // The application's own InterfacesAdded signals may still be on their way when the match rule is added:
            // they come first, and are not what this test is about.
            var iterator = signals.filter { $0.body.first == .objectPath("/org/example/app/service1") }
                .makeAsyncIterator()
            let added = try #require(await iterator.next())
            #expect(added.member == "InterfacesAdded")
            #expect(added.body.first == .objectPath("/org/example/app/service1"))
            #expect(added.body.dropFirst().first?.interfacesAndProperties?["org.bluez.GattService1"]?["UUID"]
                == .string("180f"))
            let removed = try #require(await iterator.next())
            #expect(removed.member == "InterfacesRemoved")
            #expect(removed.body == [.objectPath("/org/example/app/service1"), .stringArray(["org.bluez.GattService1"])])
        }
    }

    @Test func exportedObjectsAreVisibleToGdbusAndBusctl() async throws {
        try await withPrivateBus { daemon, server, _ in
            try await Self.exportApplication(on: server)
            let managed = try runTool("/usr/bin/gdbus", [
                "call", "--address", daemon.address, "--dest", Self.busName, "--object-path", "/org/example/app",
                "--method", "org.freedesktop.DBus.ObjectManager.GetManagedObjects",
            ])
            #expect(managed.contains("'/org/example/app/service0/char0': {'org.bluez.GattCharacteristic1'"))
            #expect(managed.contains("'UUID': <'0000180d-0000-1000-8000-00805f9b34fb'>"))
            let flags = try runTool("/usr/bin/busctl", [
                "--address=\(daemon.address)", "get-property", Self.busName, "/org/example/app/service0/char0",
                "org.bluez.GattCharacteristic1", "Flags",
            ])
            #expect(flags.trimmingCharacters(in: .whitespacesAndNewlines) == #"as 2 "read" "notify""#)
            let read = try runTool("/usr/bin/busctl", [
                "--address=\(daemon.address)", "call", Self.busName, "/org/example/app/service0/char0",
                "org.bluez.GattCharacteristic1", "ReadValue", "a{sv}", "0",
            ])
            #expect(read.trimmingCharacters(in: .whitespacesAndNewlines) == "ay 2 0 72")
            let tree = try runTool("/usr/bin/busctl", ["--address=\(daemon.address)", "tree", "--list", Self.busName])
            #expect(tree.contains("/org/example/app/service0/char0"))
        }
    }
}
