import BLEHeartRate
import DBus
import DBusTestSupport
import Testing

/// `StrapPairing` against the fake bluetoothd.
@Suite struct StrapPairingTests {
    static let strap = "A0:9E:1A:00:00:0A"

    /// bluetoothd 5.66 can accept a StartDiscovery and scan nothing (its state left stale by a StopDiscovery the
    /// kernel refused). Pairing restarts discovery until the strap is seen instead of waiting out its timeout.
    @Test func aDiscoveryThatScansNothingIsRestarted() async throws {
        let fake = try await FakeBlueZ()
        defer { fake.stop() }
        try await fake.addStrap(Self.strap, name: "Polar H10 STALE", rr: [1000, 1000])
        _ = try await fake.ctl("ScriptStartDiscovery", [.string("hci0"), .array(elementSignature: "s", [.string("stale")])])
        let outcome = try await StrapPairing.pair(
            address: Self.strap, bus: .address(fake.daemon.address), timeoutMs: 60_000, discoveryRefreshMs: 300)
        #expect(outcome.address == Self.strap && !outcome.alreadyPaired)
        let calls = try await fake.calls()
        #expect(calls.filter { $0.hasPrefix("StartDiscovery ") }.count == 2, "\(calls)")
        #expect(calls.filter { $0.hasPrefix("Pair ") }.count == 1, "\(calls)")
    }
}
