import ArgumentParser
import BLEHeartRate
import Logging
import Foundation
import Testing

@testable import hr_gateway

struct StrapCommandsTests {
    @Test func scanOptions() throws {
        let scan = try ScanCommand.parse(["--timeout", "30", "--json", "--adapter", "hci1"])
        #expect(scan.timeout == 30)
        #expect(scan.json)
        #expect(scan.adapter == "hci1")
        let defaults = try ScanCommand.parse([])
        #expect(defaults.timeout == 10 && !defaults.json && defaults.adapter == nil)
        #expect(throws: (any Error).self) { try ScanCommand.parse(["--timeout", "0"]) }
    }

    @Test func emulateStrapOptions() throws {
        let e = try EmulateStrapCommand.parse(["--adapter", "hci1", "--name", "Polar H10 EMU", "--rr", "rest.txt"])
        #expect(e.adapter == "hci1" && e.name == "Polar H10 EMU" && e.rr == "rest.txt")
    }

    /// An --rr or --pmd-ecg file that cannot be read is said in words, not "NSCocoaErrorDomain error 256".
    @Test func anUnreadableEmulatorFileSaysWhy() throws {
        let r = try CLI.run(["emulate-strap", "--rr", "/"])
        #expect(r.status == 1, "a failure while running, as every command's")
        #expect(r.stderr.contains("cannot read --rr /: a directory, not an RR file"), "\(r.stderr)")
        let missing = try CLI.run(["emulate-strap", "--pmd-ecg", "/no/such/file"])
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("cannot read --pmd-ecg /no/such/file: no such file"), "\(missing.stderr)")
    }

    /// `--pmd-ecg-rate` is a rate for the ECG of `--pmd-ecg`, within what a strap may have: usage errors otherwise.
    @Test func theEmulatedECGRateIsChecked() throws {
        let alone = try CLI.run(["emulate-strap", "--pmd-ecg-rate", "128.6"])
        #expect(alone.status == 64 && alone.stderr.contains("--pmd-ecg-rate needs --pmd-ecg FILE"), "\(alone.stderr)")
        let far = try CLI.run(["emulate-strap", "--pmd-ecg", "e.csv", "--pmd-ecg-rate", "200"])
        #expect(far.status == 64 && far.stderr.contains("--pmd-ecg-rate 200: a rate between 120 and 140 Hz"), "\(far.stderr)")
        let e = try EmulateStrapCommand.parse(["--pmd-ecg", "e.csv", "--pmd-ecg-rate", "128.6"])
        #expect(e.pmdECGRate == 128.6)
    }

    /// An ECG with no heartbeats in it (a few samples) cannot give the strap's RR: said, and 60 bpm is sent instead.
    /// (The system bus is pointed nowhere, so the command stops there, after the note.)
    @Test func anECGWithoutBeatsSendsSixtyBeatsAMinuteAndSaysSo() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("emulate-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("flat.csv")
        try Data("ecg_uv\n1\n2\n3\n".utf8).write(to: file)
        let r = try CLI.run(["emulate-strap", "--pmd-ecg", file.path],
                            environment: ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=\(dir.path)/no-bus"])
        #expect(r.stderr.contains("no two heartbeats found in the ECG to send as RR; sending a steady 60 bpm"), "\(r.stderr)")
        #expect(r.status == 1 && r.stderr.contains("cannot reach the D-Bus system bus"), "\(r.stderr)")
    }

    @Test func theRootCommandDispatchesToTheStrapCommandsWithTheirOptions() throws {
        let scan = try #require(try HRGateway.parseAsRoot(["scan", "--timeout", "3", "--json"]) as? ScanCommand)
        #expect(scan.timeout == 3 && scan.json)
        let emulate = try #require(
            try HRGateway.parseAsRoot(["emulate-strap", "--name", "EMU", "--rr", "r.txt"]) as? EmulateStrapCommand)
        #expect(emulate.name == "EMU" && emulate.rr == "r.txt")
        // An option of one subcommand is refused by the other: the dispatch really picks the subcommand.
        #expect(throws: (any Error).self) { try HRGateway.parseAsRoot(["scan", "--rr", "r.txt"]) }
    }

    @Test func strapProvidersFromSpecs() throws {
        let providers = try makeStrapProviders(
            specs: ["auto", "a0:9e:1a:00:00:01", "Polar H10"], adapter: "hci0", logger: Logger(label: "t"))
        #expect(providers.count == 3)
        #expect(providers.allSatisfy { $0.name == "ble_hrm" })
        let specs = providers.compactMap { ($0 as? BLEHeartRateProvider)?.spec }
        #expect(specs == [.auto, .address("A0:9E:1A:00:00:01"), .name("Polar H10")])
        #expect(providers.compactMap { ($0 as? BLEHeartRateProvider)?.adapter } == ["hci0", "hci0", "hci0"])
        #expect(throws: (any Error).self) { try makeStrapProviders(specs: [" "], adapter: nil, logger: Logger(label: "t")) }
    }
}
