import BLEHeartRate
import DBusTestSupport
import Foundation
import GatewayConfig
import GatewayEngine
import Testing

@testable import hr_gateway

/// The configuration file's `[strap]`, `[camera]` and `[relay]`: what the command line leaves out comes from them.
@Suite struct ConfigSourcesCLITests {
    static func configFile(_ name: String, _ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-\(name)-\(UUID().uuidString).toml").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    static func settings(_ text: String) throws -> GatewayConfiguration {
        try GatewayConfiguration.parse(text, path: "t.toml").0
    }

    /// The service runs `stream` with no source: the file's strap is streamed and its relay listens.
    @Test func withNoSourceOptionTheFilesStrapIsStreamedAndItsRelayListens() async throws {
        let strap = "A0:9E:1A:00:00:31"
        let fake = try await FakeBlueZ()
        defer { fake.stop() }
        try await fake.addStrap(strap, name: "Polar H10 config", rr: [820, 870])
        let config = try Self.configFile("sources", """
            [strap]
            devices = ["\(strap)"]
            [relay]
            listen = "127.0.0.1:0"
            """)
        let errors = config + ".stderr"
        let cli = try RunningCLI(
            ["stream", "--config", config, "--format", "jsonl", "--no-record-db"],
            environment: ["DBUS_SYSTEM_BUS_ADDRESS": fake.daemon.address], errorTo: errors)
        // The strap connected, then its first beats (a session stopped before any sample fails).
        var strapStatus: JSONValue?
        while strapStatus == nil, let line = cli.readLine() {
            let e = try JSONValue(parsing: line)
            if e["type"] == .string("sensor_status"), e["source"] == .string("ble_hrm"),
               e["state"] == .string("streaming") || e["state"] == .string("connected") {
                strapStatus = e
            }
        }
        _ = try await fake.sendPackets(strap, 2)
        while let line = cli.readLine(), !line.contains("\"session_frame\"") {}
        cli.signal(SIGINT)
        var last = ""
        while let line = cli.readLine() { last = line }
        #expect(cli.wait() == 0)
        let status = try #require(strapStatus, "the strap of the file is a source")
        #expect(status["device_id"]?.stringValue?.uppercased().contains(strap) == true, "\(status)")
        #expect(last.contains("\"session_summary\""))
        let stderr = try String(contentsOfFile: errors, encoding: .utf8)
        #expect(stderr.contains("sources: --strap \(strap) (from \(config))"), "said where the sources came from: \(stderr)")
        #expect(stderr.contains("relay: listening on ws://127.0.0.1:"), "\(stderr)")
    }

    /// A source on the command line replaces all of the file's: its strap, its camera and their Polar streams.
    @Test func aSourceOptionReplacesEveryOneOfTheFiles() throws {
        let config = try Self.configFile("replaced", """
            [strap]
            devices = ["auto"]
            ecg = true
            acc_hz = 50
            [camera]
            device = "/dev/hrg-no-such-camera"
            """)
        let r = try CLI.run(["stream", "--config", config, "--simulate", "--duration", "2", "--format", "jsonl",
                             "--no-record-db"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(!r.stderr.contains("sources:"), "\(r.stderr)")
        #expect(!r.stdout.contains("hrg-no-such-camera") && !r.stderr.contains("hrg-no-such-camera"))
        let sources = try r.lines.map { try JSONValue(parsing: $0) }.compactMap { e -> String? in
            e["type"] == .string("sensor_status") ? e["source"]?.stringValue : nil
        }
        #expect(!sources.isEmpty && sources.allSatisfy { $0 == "simulated" }, "\(sources)")
    }

    @Test func withNoSourceAnywhereTheErrorNamesTheFilesSections() throws {
        let config = try Self.configFile("none", "[strap]\ndevices = []\n")
        let r = try CLI.run(["stream", "--config", config, "--duration", "1"])
        #expect(r.status == 64)
        #expect(r.stderr.contains("Choose a source"), "\(r.stderr)")
        #expect(r.stderr.contains("[strap] devices = [\"auto\"]"), "\(r.stderr)")
        #expect(r.stdout.isEmpty)
    }

    @Test func anOptionGivenWinsOverTheFileAndTheFileFillsTheRest() throws {
        let file = try Self.settings("""
            [strap]
            devices = ["Polar H10"]
            adapter = "hci1"
            ecg = true
            acc_hz = 100
            [camera]
            device = "/dev/video2"
            width = 1280
            height = 720
            fps = 25
            mains_hz = 60
            face_cascade = "/opt/face.xml"
            [relay]
            listen = "0.0.0.0:8765"
            tls = true
            """)
        var fromFile = try SourceOptions.parse([])
        fromFile.adopt(file)
        #expect(fromFile.straps == ["Polar H10"] && fromFile.camera.camera == "/dev/video2")
        #expect(fromFile.fromFile == "t.toml")
        #expect(fromFile.adapter == "hci1" && fromFile.ecg && fromFile.acc == 100)
        #expect(fromFile.camera.cameraWidth == 1280 && fromFile.camera.cameraHeight == 720)
        #expect(fromFile.camera.cameraFps == 25 && fromFile.camera.mains == .sixty)
        #expect(fromFile.camera.faceCascade == "/opt/face.xml")
        #expect(fromFile.described == "--strap \"Polar H10\" --camera /dev/video2")

        var given = try SourceOptions.parse(["--strap", "auto", "--adapter", "hci0", "--acc", "25",
                                             "--camera-fps", "30", "--mains", "50"])
        given.adopt(file)
        #expect(given.straps == ["auto"] && given.camera.camera == nil, "the file's camera is one of its sources")
        #expect(given.fromFile == nil)
        #expect(given.adapter == "hci0" && given.acc == 25 && given.ecg, "given options win; ECG from the file")
        #expect(given.camera.cameraFps == 30 && given.camera.mains == .fifty && given.camera.cameraWidth == 1280)

        // The file's Polar streams are for straps: a simulated source takes none of them (and is not refused).
        var simulated = try SourceOptions.parse(["--simulate"])
        simulated.adopt(file)
        #expect(simulated.straps.isEmpty && !simulated.ecg && simulated.acc == nil)
        try simulated.check()

        var relay = try RelayOptions.parse([])
        relay.adopt(file)
        #expect(relay.listen == "0.0.0.0:8765" && relay.tls)
        var ownCertificate = try RelayOptions.parse(["--listen", "127.0.0.1:0", "--tls-cert", "c.pem", "--tls-key", "k.pem"])
        ownCertificate.adopt(file)
        #expect(ownCertificate.listen == "127.0.0.1:0" && !ownCertificate.tls && ownCertificate.tlsCert == "c.pem")
        var plain = try RelayOptions.parse(["--no-tls"])
        plain.adopt(file)
        #expect(plain.listen == "0.0.0.0:8765" && !plain.tls && plain.tlsCert == nil)
        #expect(try plain.tlsFiles(stateDirectory: "/nonexistent") == nil, "plain ws://")
        #expect(throws: (any Error).self) { try RelayOptions.parse(["--no-tls", "--tls"]).check() }
        #expect(throws: (any Error).self) {
            try RelayOptions.parse(["--no-tls", "--tls-cert", "c.pem", "--tls-key", "k.pem"]).check()
        }
    }

    /// The file's check of `strap.acc_hz` offers what the strap code asks a Polar strap for.
    @Test func theFilesAccelerometerRatesAreThePolarStrapsRates() {
        #expect(GatewayConfiguration.strapAccRates == PolarStreams.accRates)
    }
}
