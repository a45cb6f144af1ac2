import ArgumentParser
import Foundation
import GatewayEngine
import MQTTSink
import Synchronization
import StdoutSink

/// `hr-gateway fleet`: every gateway and strap seen on an MQTT broker.
struct FleetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleet",
        abstract: "Show every gateway and strap publishing to an MQTT broker.",
        discussion: """
            Subscribes to hr-gateway/+/status, hr-gateway/+/device/+/state and hr-gateway/+/event on the broker \
            and shows one row per strap (or camera): gateway, its state (online/offline), device, heart rate, \
            RMSSD, battery, contact, device state and how long ago the gateway last updated it (by its clock). Retained messages show \
            every gateway and device the broker knows at once; the table is redrawn every second until Ctrl-C. A \
            device state said before its gateway went offline (killed, or its link lost) is marked "(before offline)".

            With --json, it listens for --wait seconds and prints one JSON document \
            ({"gateways": [{"gateway_id", "state", "devices": [...]}, ...]}) for scripts; such a device has \
            "state_stale": true.

            Examples:
              hr-gateway fleet --mqtt mqtt://broker.lan
              hr-gateway fleet --mqtt mqtt://ops@broker.lan --mqtt-password-file ~/.mqtt.pw
              hr-gateway fleet --mqtt mqtts://broker.example --json --wait 5 \\
                  | jq '.gateways[].devices'

            The user needs read access to hr-gateway/# in the broker's ACL (docs/fleet.md).
            """
    )

    @Option(help: ArgumentHelp(
        "The broker: mqtt://[user[:password]@]HOST[:PORT] or mqtts://…. Default: $HR_GATEWAY_MQTT, else the "
            + "configuration's [mqtt] url.", valueName: "url"))
    var mqtt: String?

    @Option(help: ArgumentHelp("With mqtts://: the CA certificate (PEM) to trust. Default: the system's.", valueName: "file"))
    var mqttCa: String?

    @Option(help: ArgumentHelp("A file holding the password (first line).", valueName: "file"))
    var mqttPasswordFile: String?

    @Flag(help: "Print one JSON document after --wait seconds instead of the live table.")
    var json = false

    @Option(parsing: .unconditional, help: ArgumentHelp("With --json, or without a terminal: how long to listen, in seconds.", valueName: "sec"))
    var wait: Double = 3

    @OptionGroup var store: StoreOptions

    func validate() throws {
        if let mqtt {
            do { _ = try MQTTBrokerURL(parsing: mqtt) } catch { throw ValidationError("--mqtt: \(error)") }
        }
        guard wait > 0, wait.isFinite else { throw ValidationError("--wait must be a positive number of seconds.") }
    }

    func run() async throws {
        let settings = try store.settings()
        guard let url = mqtt ?? settings.mqttURL else {
            // A usage error found after reading the configuration: said here, pointing at fleet's help (a
            // ValidationError thrown from run() is printed with the root command's usage).
            StandardStream.error.write(Data(("Error: fleet needs the broker: --mqtt mqtt://HOST (or [mqtt] url in the "
                + "configuration). See `hr-gateway fleet --help`.\n").utf8))
            throw ExitCode(64)
        }
        let broker = try MQTTOptions.broker(url, passwordFile: mqttPasswordFile ?? settings.mqttPasswordFile)
        let board = Mutex(FleetBoard())
        let refused = Mutex<String?>(nil)
        // Whether the broker was reached at all, and why not: an empty fleet is only an answer from a broker.
        let reached = Mutex(false)
        let lastFailure = Mutex<String?>(nil)
        let connection = try MQTTConnection(
            clientId: "hr-gateway-fleet-\(getpid())", broker: broker, caFile: mqttCa ?? settings.mqttCAFile)
        connection.onMessage { topic, payload, _ in
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            _ = board.withLock { $0.receive(topic: topic, payload: payload, nowMs: now) }
        }
        connection.onLink { event in
            switch event {
            case .connected: reached.withLock { $0 = true }
            case .refused(_, let reason): refused.withLock { $0 = reason }
            case .lost(let reason), .failed(let reason): lastFailure.withLock { $0 = reason }
            }
        }
        for topic in FleetBoard.subscriptions { connection.subscribe(topic) }
        if let failure = try connection.start() {
            lastFailure.withLock { $0 = "\(failure)" }
            StandardStream.error.write(Data("fleet: \(broker) not reachable yet (\(failure)); retrying\n".utf8))
        }
        defer { connection.stop() }

        let live = !json && isatty(STDOUT_FILENO) == 1
        if !live {
            try await Task.sleep(for: .seconds(wait))
            if let reason = refused.withLock({ $0 }) {
                throw CommandFailure("fleet: \(broker) refused the connection: \(reason) (check the user and password)")
            }
            guard reached.withLock({ $0 }) else {
                let why = lastFailure.withLock { $0 }.map { " (\($0))" } ?? ""
                throw CommandFailure("fleet: \(broker) could not be reached in \(Self.seconds(wait)) s\(why), so there is "
                    + "no fleet to report. Check the address and that the broker runs, or allow longer with --wait.")
            }
            let snapshot = board.withLock { $0 }
            print(json ? snapshot.jsonValue.jsonString : Self.table(snapshot, nowMs: Self.nowMs()))
            return
        }
        let stop = Mutex(false)
        let signals = await TerminationSignals.onSignal { _ in stop.withLock { $0 = true } }
        defer { signals.finishing() }
        while !stop.withLock({ $0 }) {
            let snapshot = board.withLock { $0 }
            var screen = "\u{1B}[H\u{1B}[2J" + "hr-gateway fleet on \(broker)   (Ctrl-C to quit)\n\n"
            if let reason = refused.withLock({ $0 }) {
                screen += "The broker refused the connection: \(reason). Check the user and password.\n"
            } else if !connection.isConnected {
                screen += "Connecting…\n"
            }
            screen += Self.table(snapshot, nowMs: Self.nowMs())
            StandardStream.output.write(Data(screen.utf8))
            try? await Task.sleep(for: .seconds(1))
        }
    }

    static func seconds(_ s: Double) -> String { s == s.rounded() ? String(Int(s)) : String(s) }

    static func nowMs() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    /// The table, one row per device.
    static func table(_ board: FleetBoard, nowMs: Int64) -> String {
        var rows = [["GATEWAY", "STATE", "DEVICE", "HR", "RMSSD", "BATTERY", "CONTACT", "DEVICE STATE", "UPDATED"]]
        func ago(_ ms: Int64) -> String {
            let s = max(0, (nowMs - ms) / 1000)
            return s < 60 ? "\(s) s ago" : s < 3600 ? "\(s / 60) min ago" : "\(s / 3600) h ago"
        }
        for (g, d) in board.rows {
            rows.append([
                g.id, g.state, d.map { $0.deviceId ?? $0.device } ?? "-",
                d?.hrBpm.map { String(format: "%.0f", $0) } ?? "-",
                d?.rmssdMs.map { String(format: "%.0f ms", $0) } ?? "-",
                d?.batteryPercent.map { "\($0) %" } ?? "-",
                d?.contact ?? "-", d.flatMap { d in d.state.map { board.isStale(d) ? "\($0) (before offline)" : $0 } } ?? "-",
                (d?.updatedAtMs).map(ago) ?? "-",
            ])
        }
        if board.gateways.isEmpty { return "No gateway has published to this broker yet.\n" }
        let widths = rows[0].indices.map { i in rows.map { $0[i].count }.max() ?? 0 }
        return rows.map { r in
            r.enumerated().map { $1.padding(toLength: widths[$0], withPad: " ", startingAt: 0) }.joined(separator: "  ")
        }.joined(separator: "\n") + "\n"
    }
}
