import ArgumentParser
import BLEHeartRate
import BlueZ
import DBus
import Foundation
import GatewayEngine
import Logging
import StdoutSink

/// `hr-gateway scan`: lists heart-rate straps in range.
struct ScanCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scan",
        abstract: "List heart-rate straps in range (through bluetoothd).",
        discussion: """
            Runs a Bluetooth LE discovery for --timeout seconds and shows every device that looks like a heart-rate \
            strap: it advertises the Heart Rate service (0x180D), or its name starts with a known model (Polar H10, \
            Polar OH1, Garmin HRM-Pro, Wahoo TICKR, …), or it is a Polar strap broadcasting its heart rate.

            On a terminal the table is redrawn as devices appear: name, address, signal strength (RSSI, dBm), \
            whether it advertises the HR service, whether BlueZ has it connected, battery (%) when BlueZ knows it, \
            and the heart rate a Polar strap broadcasts (bpm).

            Straps only advertise while worn (skin contact) and while no other device holds their only \
            connection (close the phone app, or enable two connections in Polar Flow for an H10).

            Examples:
              hr-gateway scan                       # 10 s, live table
              hr-gateway scan --timeout 30 --json   # one JSON object per strap at the end
              hr-gateway scan --adapter hci1        # a second USB dongle

            Needs bluetoothd (Debian: apt-get install bluez; systemctl start bluetooth) and access to org.bluez on \
            the system bus (group `bluetooth` on restricted systems). DBUS_SYSTEM_BUS_ADDRESS is honoured.
            """
    )

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("How long to scan, in seconds.", valueName: "SEC"))
    var timeout: Double = 10

    @Flag(name: .long, help: "At the end, print one JSON object per strap (one per line) instead of the table.")
    var json = false

    @Option(name: .long, help: ArgumentHelp("Adapter to scan with (default: the first powered one).", valueName: "hciN"))
    var adapter: String?

    func validate() throws {
        guard timeout > 0, timeout.isFinite else { throw ValidationError("--timeout must be a positive number of seconds") }
    }

    func run() async throws {
        var logger = Logger(label: "hr-gateway.scan")
        logger.logLevel = .warning
        let connection: DBusConnection
        do { connection = try await DBusConnection.connect(to: .system, logger: logger) } catch {
            throw CommandFailure(BLEHeartRateError.systemBusUnreachable(error).description)
        }
        defer { connection.close() }
        // A scan needs bluetoothd now: without it, say so at once rather than start a mirror that waits for it.
        var bluetoothdAbsent = false
        do { bluetoothdAbsent = try await connection.nameOwner(of: BlueZ.busName) == nil } catch {
            // Cannot ask (a restrictive policy): BlueZClient.start reports it below.
        }
        if bluetoothdAbsent { throw CommandFailure(BLEHeartRateError.noBluetoothd.description) }
        let bluez: BlueZClient
        do { bluez = try await BlueZClient.start(on: connection, logger: logger) } catch {
            throw CommandFailure(BLEHeartRateError.from(error).description)
        }
        defer { bluez.close() }
        guard bluez.bluetoothdRunning else { throw CommandFailure(BLEHeartRateError.noBluetoothd.description) }
        let adapterPath: DBusObjectPath
        do { adapterPath = try StrapScan.chooseAdapter(adapter, in: bluez.tree) } catch {
            throw CommandFailure(error.description)
        }
        do {
            try await bluez.setDiscoveryFilter(on: adapterPath, uuids: [])
            try await bluez.startDiscovery(on: adapterPath)
        } catch let e as BlueZError where e.kind == .inProgress {
            // Our own discovery is already running: fine.
        } catch let e as BlueZError {
            throw CommandFailure("cannot start discovery on \(adapterPath): \(e)")
        }

        let live = !json && isatty(STDOUT_FILENO) == 1
        // The live table is redrawn from the mirror twice a second.
        let clock = ContinuousClock()
        let end = clock.now + .milliseconds(Int(timeout * 1000))
        while clock.now < end {
            if live {
                let left = Double((end - clock.now).components.seconds) + 1
                Self.draw(StrapScan.rows(in: bluez.tree, adapter: adapterPath), secondsLeft: left)
            }
            try? await Task.sleep(for: min(.milliseconds(500), end - clock.now))
        }
        let rows = StrapScan.rows(in: bluez.tree, adapter: adapterPath)
        try? await bluez.stopDiscovery(on: adapterPath)
        try? await bluez.clearDiscoveryFilter(on: adapterPath)

        if json {
            for r in rows { print(r.jsonValue.jsonString) }
        } else if live {
            Self.draw(rows, secondsLeft: 0)
        } else {
            print(StrapScan.table(rows))
        }
        if rows.isEmpty {
            throw CommandFailure(
                BLEHeartRateError.strapNotFound(spec: "auto", timeoutSec: timeout).description)
        }
        if !json, let first = rows.first {
            StandardStream.error.write(Self.nextSteps(address: first.address))
        }
    }

    /// What to do with a strap found: stream it now, or name it in the configuration for the service.
    static func nextSteps(address: String) -> String {
        "\nStream it: hr-gateway stream --strap \(address)\n"
            + "For the service: [strap] devices = [\"\(address)\"] in /etc/hr-gateway/hr-gateway.toml, then "
            + "sudo systemctl restart hr-gateway\n"
    }

    private static func draw(_ rows: [StrapScanRow], secondsLeft: Double) {
        var out = "\u{1B}[H\u{1B}[2J"
        out += StrapScan.table(rows) + "\n"
        out += secondsLeft > 0 ? "\nscanning… \(Int(secondsLeft.rounded(.up))) s left\n" : "\n\(rows.count) strap(s)\n"
        StandardStream.output.write(Data(out.utf8))
    }
}

