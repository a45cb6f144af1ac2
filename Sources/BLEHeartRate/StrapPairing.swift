import BlueZ
import DBus
import Foundation
import Logging

/// Pairing with a strap through BlueZ (`hr-gateway pair` / `unpair`, and `--ecg` on demand; docs/pmd.md,
/// "Pairing"): a NoInputNoOutput agent on our own connection for the time of the pairing, `Device1.Pair`, and the
/// device marked trusted so that BlueZ reconnects it without asking.
public enum StrapPairing {
    /// A pairing that could not be done: what happened, with what to do next.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public enum Code: String, Sendable {
            case noBluetoothd = "no_bluetoothd"
            case noAdapter = "no_adapter"
            case notFound = "not_found"
            case rejected = "rejected"
            case failed = "failed"
        }

        public let code: Code
        public let description: String
        public init(_ code: Code, _ description: String) {
            self.code = code
            self.description = description
        }
    }

    public struct Outcome: Sendable, Equatable {
        public var address: String
        public var name: String?
        /// BlueZ held a bond already.
        public var alreadyPaired: Bool
        /// What the agent was asked (`RequestAuthorization /org/bluez/…`).
        public var agentRequests: [String]
    }

    /// Pairs `device` on `bluez`'s connection with a NoInputNoOutput agent registered for it meanwhile; returns what
    /// the agent was asked.
    /// Throws `BlueZError` as BlueZ answers (`AlreadyExists` when paired already).
    @discardableResult
    public static func pair(_ device: DBusObjectPath, bluez: BlueZClient, logger: Logger) async throws -> [String] {
        var agent: BlueZAgent?
        do { agent = try await BlueZAgent.register(on: bluez.connection, for: device) } catch {
            logger.notice("no pairing agent (\(error)); pairing as BlueZ does without one (Just Works)")
        }
        do {
            try await bluez.pair(device)
        } catch {
            await agent?.unregister()
            throw error
        }
        await agent?.unregister()
        return agent?.requests ?? []
    }

    /// `hr-gateway pair ADDRESS`: finds the strap (discovering up to `timeoutMs` when BlueZ does not know it), pairs,
    /// and marks it trusted.
    public static func pair(
        address: String, adapter: String? = nil, bus: DBusBus = .system, timeoutMs: Int = 20_000,
        discoveryRefreshMs: Int = StrapPairing.discoveryRefreshMs, logger: Logger = Logger(label: "hr-gateway.pair")
    ) async throws -> Outcome {
        let (connection, bluez, adapterPath) = try await open(bus: bus, adapter: adapter, logger: logger)
        defer {
            bluez.close()
            connection.close()
        }
        let target = address.uppercased()
        var device = bluez.tree.devices(of: adapterPath).first { $0.address?.uppercased() == target }
        if device == nil {
            // Discovery restarts every `discoveryRefreshMs` until the strap is seen: bluetoothd 5.66 can keep
            // reporting Discovering after the controller stopped scanning (a StopDiscovery the kernel refused leaves
            // its state stale), and a StartDiscovery with the same filter then scans nothing. Stopping and starting
            // again clears it. The timeout is the user's, on real time.
            let deadline = ContinuousClock.now + .milliseconds(timeoutMs)
            while device == nil, ContinuousClock.now < deadline {
                try? await bluez.setDiscoveryFilter(on: adapterPath, uuids: [], pattern: target)
                try? await bluez.startDiscovery(on: adapterPath)
                let slice = min(deadline - .now, .milliseconds(discoveryRefreshMs))
                device = await seen(target, on: adapterPath, bluez: bluez, within: slice)
                try? await bluez.stopDiscovery(on: adapterPath)
            }
        }
        guard let found = device else {
            throw Failure(.notFound, "\(target) was not seen in \(timeoutMs / 1000) s. Wake the strap (moisten the "
                + "electrodes and put it on: it does not advertise when dry), check the address with "
                + "`hr-gateway scan`, and try again.")
        }
        var outcome = Outcome(address: target, name: found.name, alreadyPaired: found.paired, agentRequests: [])
        if !found.paired {
            do {
                outcome.agentRequests = try await pair(found.path, bluez: bluez, logger: logger)
            } catch let e as BlueZError where e.name == "org.bluez.Error.AlreadyExists" {
                outcome.alreadyPaired = true
            } catch let e as BlueZError {
                let code: Failure.Code = e.name.hasSuffix("Rejected") || e.name.hasSuffix("Canceled") ? .rejected : .failed
                throw Failure(code, "pairing with \(target) failed: \(e.name.split(separator: ".").last ?? "") "
                    + "(\(e.message)). Keep the strap on and close to this computer; if a phone holds it, "
                    + "disconnect it there; then try again.")
            }
        }
        try? await connection.setProperty(
            "Trusted", interface: BlueZ.deviceInterface, to: .boolean(true), destination: BlueZ.busName, path: found.path,
            timeout: .seconds(5))
        return outcome
    }

    /// How long one discovery runs before it is restarted while the strap has not been seen.
    public static let discoveryRefreshMs = 10_000

    /// The device `target` once BlueZ knows it (the mirror's changes wake the wait: InterfacesAdded when BlueZ first
    /// sees it), or nil after `limit`.
    private static func seen(
        _ target: String, on adapterPath: DBusObjectPath, bluez: BlueZClient, within limit: Duration
    ) async -> BlueZDevice? {
        await withTaskGroup(of: BlueZDevice?.self) { group in
            group.addTask {
                await bluez.wait { tree in tree.devices(of: adapterPath).first { $0.address?.uppercased() == target } }
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    /// `hr-gateway unpair ADDRESS`: removes the device and its bond from BlueZ. False when BlueZ does not know it.
    public static func unpair(address: String, adapter: String? = nil, bus: DBusBus = .system,
                              logger: Logger = Logger(label: "hr-gateway.pair")) async throws -> Bool {
        let (connection, bluez, adapterPath) = try await open(bus: bus, adapter: adapter, logger: logger)
        defer {
            bluez.close()
            connection.close()
        }
        guard let device = bluez.tree.devices(of: adapterPath).first(where: { $0.address?.uppercased() == address.uppercased() })
        else { return false }
        do { try await bluez.removeDevice(device.path, from: adapterPath) } catch {
            throw Failure(.failed, "BlueZ did not remove \(address.uppercased()): \(error)")
        }
        return true
    }

    private static func open(bus: DBusBus, adapter: String?, logger: Logger) async throws(Failure)
        -> (DBusConnection, BlueZClient, DBusObjectPath)
    {
        do {
            return try await StrapSession.connectToBlueZ(bus: bus, adapter: adapter, logger: logger)
        } catch {
            switch error {
            case .noAdapter, .adapterNotFound, .adapterOff: throw Failure(.noAdapter, error.description)
            default: throw Failure(.noBluetoothd, error.description)
            }
        }
    }
}
