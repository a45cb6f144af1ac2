import ArgumentParser
import BLEHeartRate
import Foundation
import Logging

/// `hr-gateway pair ADDRESS`: bonds with a strap through bluetoothd.
struct PairCommand: AsyncParsableCommand {
    /// Warnings only: a one-shot command says its result, not how it mirrored bluetoothd (as `scan`).
    static var quietLogger: Logger {
        var logger = Logger(label: "hr-gateway.pair")
        logger.logLevel = .warning
        return logger
    }

    static let configuration = CommandConfiguration(
        commandName: "pair",
        abstract: "Pair with a strap (a Polar H10 sends ECG and motion on an encrypted link only).",
        discussion: """
            Finds the strap (running a discovery for up to --timeout seconds when bluetoothd does not know it), \
            pairs with it as a device without display or keys (a NoInputNoOutput agent on hr-gateway's own \
            connection, "Just Works"), and marks it trusted. bluetoothd keeps the bond; `stream --ecg` also pairs \
            by itself when the strap asks, so this is for doing it ahead of time or to see why it fails.

            A strap paired with a phone may refuse a second bond: disconnect it there first. If the strap was reset \
            or paired elsewhere since, `hr-gateway unpair ADDRESS` and pair again (stream --ecg does that by itself).

            Examples:
              hr-gateway pair A0:9E:1A:12:34:56
              hr-gateway pair A0:9E:1A:12:34:56 --adapter hci1 --timeout 40
            """
    )

    @Argument(help: "The strap's address (see `hr-gateway scan`).")
    var address: String

    @Option(help: ArgumentHelp("Bluetooth adapter (default: the first powered one).", valueName: "hciN"))
    var adapter: String?

    @Option(parsing: .unconditional, help: ArgumentHelp("Seconds to look for the strap.", valueName: "sec"))
    var timeout: Int = 20

    func validate() throws {
        try checkAddress(address)
        if timeout <= 0 { throw ValidationError("--timeout must be a positive number of seconds.") }
    }

    func run() async throws {
        do {
            let o = try await StrapPairing.pair(
                address: address, adapter: adapter, timeoutMs: timeout * 1000, logger: Self.quietLogger)
            let who = o.name.map { "\($0) (\(o.address))" } ?? o.address
            print(o.alreadyPaired ? "\(who) was paired already; marked trusted." : "Paired with \(who); marked trusted.")
        } catch let f as StrapPairing.Failure {
            throw CommandFailure(f.description)
        }
    }
}

/// `hr-gateway unpair ADDRESS`: drops a strap and its bond from bluetoothd.
struct UnpairCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unpair",
        abstract: "Remove a strap and its pairing from bluetoothd (for a strap that was reset or paired elsewhere).",
        discussion: """
            Examples:
              hr-gateway unpair A0:9E:1A:12:34:56
            """
    )

    @Argument(help: "The strap's address.")
    var address: String

    @Option(help: ArgumentHelp("Bluetooth adapter (default: the first powered one).", valueName: "hciN"))
    var adapter: String?

    func validate() throws { try checkAddress(address) }

    func run() async throws {
        do {
            let removed = try await StrapPairing.unpair(address: address, adapter: adapter, logger: PairCommand.quietLogger)
            print(removed ? "Removed \(address.uppercased()) and its pairing." : "bluetoothd does not know \(address.uppercased()): nothing to remove.")
        } catch let f as StrapPairing.Failure {
            throw CommandFailure(f.description)
        }
    }
}

/// A Bluetooth address as `AA:BB:CC:DD:EE:FF`.
func checkAddress(_ address: String) throws {
    let parts = address.split(separator: ":", omittingEmptySubsequences: false)
    guard parts.count == 6, parts.allSatisfy({ $0.count == 2 && UInt8($0, radix: 16) != nil }) else {
        throw ValidationError("\(address) is not a Bluetooth address such as A0:9E:1A:12:34:56 (see `hr-gateway scan`).")
    }
}
