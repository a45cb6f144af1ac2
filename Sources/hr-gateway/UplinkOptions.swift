import ArgumentParser
import Foundation
import GatewayEngine
import Logging
import RelayCore
import RelayWSClient
import StdoutSink

/// Dialling out to a relay endpoint instead of (or as well as) listening: `serve --connect`, `stream --connect`.
struct UplinkOptions: ParsableArguments {
    @Option(help: ArgumentHelp(
        "Dial out to this relay endpoint (ws:// or wss://) and speak the relay protocol to it as a phone would "
            + "to a watch: events out, start_session / stop_session in. Reconnects with backoff (0.5 s doubling to "
            + "10 s) and redelivers the reliable events the far end has not acknowledged. For a phone app or a "
            + "backend that hosts the socket.",
        valueName: "url"))
    var connect: String?

    @Option(
        name: [.customLong("token"), .customLong("connect-token")],
        help: ArgumentHelp(
            "With --connect: the bearer token sent to the far end (Authorization: Bearer TOKEN). "
                + "Default: $HR_GATEWAY_UPLINK_TOKEN.",
            valueName: "token"))
    var token: String?

    @Option(help: ArgumentHelp(
        "With --connect to a wss:// address: trust only the certificate with this SHA-256 fingerprint (for a far "
            + "end with a self-signed certificate).",
        valueName: "sha256"))
    var pin: String?

    @Option(parsing: .unconditional, help: ArgumentHelp(
        "With --connect: seconds to wait at the end for the far end to receive every reliable event (the "
            + "summary above all), reconnecting if needed, before exiting.",
        valueName: "sec"))
    var connectGrace: Int = 10

    func check() throws {
        guard let connect else {
            if token != nil || pin != nil { throw ValidationError("--token and --pin go with --connect URL.") }
            return
        }
        guard let scheme = connect.split(separator: ":", maxSplits: 1).first, ["ws", "wss"].contains(scheme.lowercased()),
            connect.contains("://"), connect.count > scheme.count + 3
        else {
            throw ValidationError("--connect takes a ws:// or wss:// address such as ws://192.168.1.20:8080/gateway; got '\(connect)'.")
        }
        if pin != nil && !connect.lowercased().hasPrefix("wss://") { throw ValidationError("--pin is for a wss:// address.") }
        if connectGrace < 0 { throw ValidationError("--connect-grace must be 0 or more seconds.") }
    }

    /// The uplink for `hub`, registered with it at once; nil without --connect.
    func uplink(hub: RelayHub) -> RelayUplink? {
        connect.map { url in
            RelayUplink(
                url: url, token: token ?? ProcessInfo.processInfo.environment["HR_GATEWAY_UPLINK_TOKEN"], hub: hub,
                pinnedFingerprint: pin)
        }
    }

    /// Runs `uplink` in a task, logging each change of link state once on standard error.
    static func start(_ uplink: RelayUplink) -> Task<Void, Never> {
        let last = Locked("")
        return Task {
            await uplink.run { line in
                guard !line.hasPrefix("connecting") else { return }
                let repeated = last.withLock { l -> Bool in
                    defer { l = line }
                    return l == line
                }
                if !repeated { StandardStream.error.write(Data("relay: \(line)\n".utf8)) }
            }
        }
    }

    /// Gives the far end `connectGrace` seconds to receive every reliable event, then ends the uplink's task.
    func finish(_ uplink: RelayUplink, task: Task<Void, Never>) async {
        if !(await uplink.finish(grace: .seconds(connectGrace))) {
            Logger(label: "hr-gateway").warning(
                "relay: \(uplink.url) did not receive every session event within \(connectGrace) s (see --connect-grace).")
        }
        task.cancel()
        await task.value
        await uplink.hub.settled()
    }
}
