import DBus
import Foundation
import Synchronization
import Logging

/// A private dbus-daemon with `Tests/Fixtures/fake_bluez.py` on it, and a control connection to script it.
// @unchecked Sendable: `process` is only touched under the `stopped` lock (in `stop()`); the rest is immutable.
public final class FakeBlueZ: @unchecked Sendable {
    public let daemon: PrivateBusDaemon
    public let control: DBusConnection
    private let process: Process
    private let stopped = Mutex(false)

    /// `Tests/Fixtures/fake_bluez.py`, found from this file's place in the repository.
    public static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Tests/Fixtures/fake_bluez.py").path

    public var bus: DBusBus { .address(daemon.address) }

    /// Starts the bus and the fake; returns when the fake printed READY (it owns org.bluez by then).
    public init(adapters: [String] = []) async throws {
        daemon = try PrivateBusDaemon()
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        p.arguments = [Self.script, "--address", daemon.address] + adapters.flatMap { ["--adapter", $0] }
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.standardError
        try p.run()
        process = p
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        guard String(decoding: line, as: UTF8.self).hasPrefix("READY") else {
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
            daemon.stop()
            throw FakeBlueZError.didNotStart
        }
        control = try await DBusConnection.connect(to: .address(daemon.address), logger: Logger(label: "test.control"))
    }

    @discardableResult
    public func ctl(_ member: String, _ args: [DBusValue] = []) async throws -> [DBusValue] {
        try await control.call(
            destination: "org.hrgateway.FakeBlueZ", path: "/control", interface: "org.hrgateway.FakeBlueZ1",
            member: member, arguments: args, timeout: .seconds(10))
    }

    public func addStrap(
        _ address: String, name: String = "Polar H10 0001", rr: [UInt16], adapter: String = "hci0",
        advertiseUUID: Bool = true, battery: UInt8 = 85, battery1: Bool = true
    ) async throws {
        try await ctl("AddStrap", [
            .string(adapter), .string(address), .string(name), .array(elementSignature: "q", rr.map(DBusValue.uint16)),
            .boolean(advertiseUUID), .byte(battery), .boolean(battery1),
        ])
    }

    /// Notifies the next `count` 1 Hz packets of the strap's RR list; returns how many were delivered.
    @discardableResult
    public func sendPackets(_ address: String, _ count: UInt32) async throws -> UInt32 {
        try await ctl("SendPackets", [.string(address), .uint32(count)]).first?.uint32 ?? 0
    }

    public func calls() async throws -> [String] { try await ctl("Calls").first?.stringArray ?? [] }

    public func count(_ method: String) async throws -> Int { try await calls().filter { $0.hasPrefix(method + " ") }.count }

    public func stop() {
        // Under the lock so a concurrent stop() (deinit, test teardown) waits until the process is gone.
        stopped.withLock { stopped in
            guard !stopped else { return }
            stopped = true
            control.close()
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            daemon.stop()
        }
    }

    deinit { stop() }
}

public enum FakeBlueZError: Error {
    /// fake_bluez.py needs /usr/bin/python3 with python3-dbus and python3-gi.
    case didNotStart
}

