import BLEHeartRate
import DBus
import DBusTestSupport
import Foundation
import GatewayEngine
import Testing

/// `hr-gateway stream --strap` as a user runs it, against the fake bluetoothd on a private system bus.
@Suite struct StreamStrapTests {
    static let strap = "A0:9E:1A:00:00:07"

    @Test func framesCarryTheHeartRateAndHRVOfTheBeatsTheStrapSent() async throws {
        let fake = try await FakeBlueZ()
        defer { fake.stop() }
        // Alternating 820 and 870 (1/1024 s): every successive difference is 48.83 ms.
        let rr: [UInt16] = (0..<80).map { $0 % 2 == 0 ? 820 : 870 }
        try await fake.addStrap(Self.strap, name: "Polar H10 CLI", rr: rr)

        let cli = try RunningCLI(
            ["stream", "--strap", "auto", "--format", "jsonl", "--correct", "none", "--window", "600", "--raw",
             "--emit-interval", "1", "--session-id", "strap-cli"],
            environment: ["DBUS_SYSTEM_BUS_ADDRESS": fake.daemon.address])
        // Wait until the strap streams, then let it send its packets.
        var streaming = false
        while !streaming, let line = cli.readLine() {
            let e = try JSONValue(parsing: line)
            if e["type"] == .string("sensor_status"), e["state"] == .string("streaming") || e["state"] == .string("connected") {
                streaming = true
            }
        }
        #expect(streaming)
        let packets = 30
        let sentPackets = try await fake.sendPackets(Self.strap, UInt32(packets))
        #expect(sentPackets == UInt32(packets))
        let sent = Array(HeartRatePacer(rr1024: rr).prefix(packets)).map(\.measurement.rrIntervals1024)
        let sentRR = sent.flatMap { $0 }

        // Read raw frames until every notification is in the window, then stop with Ctrl-C.
        var received: [UInt16] = []
        while received.count < sentRR.count, let line = cli.readLine() {
            let e = try JSONValue(parsing: line)
            guard e["type"] == .string("biosignal_frame"), let samples = e["samples"]?.arrayValue else { continue }
            received = samples.flatMap { $0["rr_1024"]?.arrayValue ?? [] }.compactMap { $0.intValue.map { UInt16($0) } }
        }
        cli.signal(SIGINT)
        var last = ""
        while let line = cli.readLine() { last = line }
        #expect(cli.wait() == 0)

        #expect(received == sentRR, "every RR the strap sent arrives once, in order")
        let summary = try JSONValue(parsing: last)
        #expect(summary["type"] == .string("session_summary"))
        let m = try #require(summary["metrics"])
        let ms = sentRR.map { Double($0) * 1000 / 1024 }
        #expect(m["rr_count"] == .int(Int64(ms.count)))
        #expect(m["rmssd_ms"]?.doubleValue.map { abs($0 - 50.0 * 1000 / 1024) < 1e-6 } == true)
        #expect(m["pnn50"] == .double(0))
        let hr = 60000 / (ms.reduce(0, +) / Double(ms.count))
        #expect(m["hr_from_rr_bpm"]?.doubleValue.map { abs($0 - hr) <= 0.05 } == true)
    }

    @Test func withoutBluetoothdItSaysHowToStartIt() throws {
        let bus = try PrivateBusDaemon()
        defer { bus.stop() }
        let r = try CLI.run(["stream", "--strap", "auto", "--format", "jsonl", "--duration", "5"],
                            environment: ["DBUS_SYSTEM_BUS_ADDRESS": bus.address])
        #expect(r.status != 0)
        #expect(r.stderr.contains("bluetoothd"), "\(r.stderr)")
        #expect(r.lines.last?.contains("\"session_error\"") == true)
        #expect(!r.stderr.contains("waiting for org.bluez"), "no wait is promised when none happens: \(r.stderr)")
    }

    /// On the live view the failure is said once (on its last screen, not again on stderr), without a claim that
    /// something was recorded, and with the way to find out more.
    @Test func withoutBluetoothdTheLiveViewSaysItOnceAndPointsToDoctor() throws {
        let bus = try PrivateBusDaemon()
        defer { bus.stop() }
        let r = try CLI.run(["stream", "--strap", "auto", "--format", "pretty", "--duration", "5"],
                            environment: ["DBUS_SYSTEM_BUS_ADDRESS": bus.address])
        #expect(r.status != 0)
        let lastScreen = r.stdout.components(separatedBy: "\u{1B}[H").last ?? ""
        let said = (lastScreen + r.stderr).components(separatedBy: "bluetoothd is not running").count - 1
        #expect(lastScreen.contains("session error sensor_unavailable: ble_hrm: bluetoothd is not running"), "\(r.stdout)")
        #expect(said == 1, "said \(said) times: \(r.stdout) \(r.stderr)")
        #expect(!r.stdout.contains("Recorded as session"), "\(r.stdout)")
        #expect(lastScreen.contains("Nothing was received"), "\(r.stdout)")
        #expect(lastScreen.contains("hr-gateway doctor"), "\(r.stdout)")
    }
}
