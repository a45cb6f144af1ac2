import DBus
import DBusTestSupport
import Foundation
import Testing

/// `hr-gateway pair` / `unpair` against the fake bluetoothd: the agent it registers is asked, and answers, for the
/// strap only.
@Suite struct PairCommandTests {
    static let strap = "A0:9E:1A:00:00:09"

    @Test func pairFindsTheStrapPairsThroughItsAgentAndUnpairRemovesIt() async throws {
        let fake = try await FakeBlueZ()
        defer { fake.stop() }
        try await fake.addStrap(Self.strap, name: "Polar H10 PAIR", rr: [1000, 1000])
        let env = ["DBUS_SYSTEM_BUS_ADDRESS": fake.daemon.address]
        let pair = try CLI.run(["pair", Self.strap.lowercased(), "--timeout", "10"], environment: env)
        #expect(pair.status == 0, "\(pair.stderr)")
        #expect(pair.stdout.contains("Paired with Polar H10 PAIR (\(Self.strap)); marked trusted."), "\(pair.stdout)")
        let calls = try await fake.calls()
        #expect(calls.contains { $0.hasPrefix("RegisterAgent NoInputNoOutput ") })
        #expect(calls.contains { $0.hasPrefix("UnregisterAgent ") })
        #expect(calls.filter { $0.hasPrefix("Pair ") }.count == 1)
        let again = try CLI.run(["pair", Self.strap], environment: env)
        #expect(again.stdout.contains("was paired already"), "\(again.stdout)")
        let unpair = try CLI.run(["unpair", Self.strap], environment: env)
        #expect(unpair.status == 0 && unpair.stdout.contains("Removed \(Self.strap) and its pairing."), "\(unpair.stdout)")
        let none = try CLI.run(["unpair", Self.strap], environment: env)
        #expect(none.stdout.contains("nothing to remove"), "\(none.stdout)")
    }

    @Test func aRefusedPairingSaysWhatToDo() async throws {
        let fake = try await FakeBlueZ()
        defer { fake.stop() }
        try await fake.addStrap(Self.strap, rr: [1000])
        try await fake.ctl("ScriptPair", [.string(Self.strap), .array(elementSignature: "s", [.string("failed:AuthenticationFailed")])])
        let env = ["DBUS_SYSTEM_BUS_ADDRESS": fake.daemon.address]
        let r = try CLI.run(["pair", Self.strap, "--timeout", "10"], environment: env)
        #expect(r.status != 0)
        #expect(r.stderr.contains("pairing with \(Self.strap) failed: AuthenticationFailed"), "\(r.stderr)")
        #expect(r.stderr.contains("if a phone holds it, disconnect it there"), "\(r.stderr)")
    }

    @Test func aStrapNotInRangeAndABadAddressAreSaid() async throws {
        let fake = try await FakeBlueZ()
        defer { fake.stop() }
        let env = ["DBUS_SYSTEM_BUS_ADDRESS": fake.daemon.address]
        let r = try CLI.run(["pair", Self.strap, "--timeout", "1"], environment: env)
        #expect(r.status != 0 && r.stderr.contains("was not seen in 1 s. Wake the strap"), "\(r.stderr)")
        let bad = try CLI.run(["pair", "A0:9E:1A"], environment: env)
        #expect(bad.status != 0 && bad.stderr.contains("is not a Bluetooth address"), "\(bad.stderr)")
    }

    /// Pairing starts the way a strap session does (`StrapSession.connectToBlueZ`), with the same errors and fixes.
    @Test func noBluetoothdAndAnAdapterOffAreSaidWithTheirFix() async throws {
        let bus = try PrivateBusDaemon()
        defer { bus.stop() }
        let r = try CLI.run(["pair", Self.strap, "--timeout", "1"], environment: ["DBUS_SYSTEM_BUS_ADDRESS": bus.address])
        #expect(r.status != 0)
        #expect(r.stderr.contains("bluetoothd is not running") && r.stderr.contains("sudo systemctl start bluetooth"),
                "\(r.stderr)")

        let fake = try await FakeBlueZ(adapters: ["hci0=00:AA:01:00:00:01", "hci1=00:AA:01:00:00:02"])
        defer { fake.stop() }
        try await fake.ctl("SetPowered", [.string("hci1"), .boolean(false)])
        let env = ["DBUS_SYSTEM_BUS_ADDRESS": fake.daemon.address]
        let off = try CLI.run(["unpair", Self.strap, "--adapter", "hci1"], environment: env)
        #expect(off.status != 0 && off.stderr.contains("adapter hci1 is powered off; run `bluetoothctl power on`"),
                "\(off.stderr)")
        let missing = try CLI.run(["pair", Self.strap, "--adapter", "hci7"], environment: env)
        #expect(missing.status != 0 && missing.stderr.contains("no adapter hci7; available: hci0, hci1"), "\(missing.stderr)")
    }
}
