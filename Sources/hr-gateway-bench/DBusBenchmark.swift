import DBus
import DBusTestSupport
import Logging

/// Round-trip latency of method calls over a private dbus-daemon the benchmark starts (and kills).
///
/// Prints p50/p99/max for `ListNames` (client ↔ daemon), for echoes of a `u` and of a BlueZ-sized `a{oa{sa{sv}}}`
/// through an object exported on a second connection (client ↔ daemon ↔ server), and for signal delivery.
/// Run the release build (`swift run -c release hr-gateway-bench dbus`) for meaningful figures.
func runDBusBenchmark() async {
    do {
        try await measureDBus()
    } catch {
        print("dbus benchmark failed: \(error)")
    }
}

private func measureDBus(iterations: Int = 2000) async throws {
    let daemon = try PrivateBusDaemon()
    defer { daemon.stop() }
    let logger = Logger(label: "bench.dbus")
    let client = try await DBusConnection.connect(to: .address(daemon.address), logger: logger)
    defer { client.close() }
    let server = try await DBusConnection.connect(to: .address(daemon.address), logger: logger)
    defer { server.close() }
    try server.export("/bench", interfaces: [
        DBusInterface("org.example.Bench", methods: ["Echo": DBusMethod(input: nil) { $0.arguments }])
    ])
    let clock = ContinuousClock()

    func report(_ name: String, _ samples: [Duration]) {
        let sorted = samples.sorted()
        func micros(_ duration: Duration) -> String {
            let (seconds, attoseconds) = duration.components
            let value = Double(seconds) * 1e6 + Double(attoseconds) / 1e12
            return String(Int(value.rounded())) + " us"
        }
        let p50 = sorted[sorted.count / 2]
        let p99 = sorted[min(sorted.count - 1, sorted.count * 99 / 100)]
        print("\(name): n=\(sorted.count) p50=\(micros(p50)) p99=\(micros(p99)) max=\(micros(sorted.last ?? .zero))")
    }

    var samples: [Duration] = []
    samples.reserveCapacity(iterations)
    for _ in 0..<iterations {
        let start = clock.now
        _ = try await client.listNames()
        samples.append(clock.now - start)
    }
    report("ListNames round trip", samples)

    samples.removeAll(keepingCapacity: true)
    for _ in 0..<iterations {
        let start = clock.now
        _ = try await client.call(
            destination: server.uniqueName, path: "/bench", interface: "org.example.Bench", member: "Echo",
            arguments: [.uint32(1)], timeout: .seconds(5))
        samples.append(clock.now - start)
    }
    report("Echo u via exported object", samples)

    let objects = DBusValue.dictionary(
        keySignature: "o", valueSignature: "a{sa{sv}}",
        Dictionary(uniqueKeysWithValues: (0..<8).map { index in
            (
                DBusValue.objectPath(DBusObjectPath("/org/bluez/hci0/dev_AA_BB_CC_DD_EE_0\(index)")),
                DBusValue.dictionary(keySignature: "s", valueSignature: "a{sv}", [
                    .string("org.bluez.Device1"): .properties([
                        "Name": .string("Polar H10 \(index)"), "RSSI": .int16(-60),
                        "UUIDs": .stringArray(["0000180d-0000-1000-8000-00805f9b34fb"]),
                        "Connected": .boolean(false),
                    ])
                ])
            )
        }))
    samples.removeAll(keepingCapacity: true)
    for _ in 0..<iterations {
        let start = clock.now
        _ = try await client.call(
            destination: server.uniqueName, path: "/bench", interface: "org.example.Bench", member: "Echo",
            arguments: [objects], timeout: .seconds(5))
        samples.append(clock.now - start)
    }
    report("Echo a{oa{sa{sv}}} (8 devices) via exported object", samples)

    let signals = try await client.messages(
        matching: DBusMatchRule(interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged"))
    var iterator = signals.makeAsyncIterator()
    samples.removeAll(keepingCapacity: true)
    for _ in 0..<iterations {
        let start = clock.now
        try server.emitSignal(
            path: "/bench", interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
            arguments: [.string("org.bluez.GattCharacteristic1"), .properties(["Value": .bytes([0x10, 0x48])]),
                        .stringArray([])])
        guard await iterator.next() != nil else { break }
        samples.append(clock.now - start)
    }
    report("PropertiesChanged(Value) signal delivery", samples)
}
