import DBus
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A failure to start a helper process for tests or benchmarks.
public struct TestProcessError: Error, CustomStringConvertible {
    public var description: String
    public init(description: String) { self.description = description }
}

/// A private `dbus-daemon` for tests and benchmarks: started with `--nofork --print-address=1`, killed with SIGKILL.
///
/// Children spawned from Swift Testing's worker threads block SIGTERM, so `stop()` (also run on deinit) uses SIGKILL.
// @unchecked Sendable: `process` is stopped only under the `stopped` lock (in `stop()`); `address` and the pid never change.
public final class PrivateBusDaemon: @unchecked Sendable {
    /// The address to connect to, e.g. `unix:path=/tmp/dbus-XXXX,guid=…`.
    public let address: String
    private let process: Process
    private let stopped = Mutex(false)

    /// Starts `dbus-daemon` with the session configuration, or with `configFile` if given.
    public init(configFile: String? = nil) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        var arguments = ["--nofork", "--print-address=1"]
        arguments.append(configFile.map { "--config-file=\($0)" } ?? "--session")
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw TestProcessError(
                description: "cannot start /usr/bin/dbus-daemon (apt-get install dbus-daemon): \(error)")
        }
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        let text = String(decoding: line, as: UTF8.self).split(separator: "\n").first.map(String.init) ?? ""
        guard !text.isEmpty else {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw TestProcessError(description: "dbus-daemon exited without printing its address")
        }
        self.address = text
        self.process = process
    }

    /// The process id of the daemon.
    public var processIdentifier: Int32 { process.processIdentifier }

    /// Kills the daemon (SIGKILL) and waits for it.
    public func stop() {
        // Under the lock so a concurrent stop() (deinit, test teardown) waits until the process is gone.
        stopped.withLock { stopped in
            guard !stopped else { return }
            stopped = true
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
    }

    deinit { stop() }
}

/// A python-dbusmock process (`/usr/bin/python3 -m dbusmock`) on a private bus, e.g. the `bluez5` template.
// @unchecked Sendable: `process` is only touched under the `stopped` lock (in `stop()`).
public final class DBusMockProcess: @unchecked Sendable {
    private let process: Process
    private let stopped = Mutex(false)
    /// The bus name the mock owns.
    public let busName: String

    /// Whether python3-dbusmock's template is installed for /usr/bin/python3.
    public static func templateAvailable(_ template: String) -> Bool {
        FileManager.default.fileExists(atPath: "/usr/lib/python3/dist-packages/dbusmock/templates/\(template).py")
    }

    /// Starts `python3 -m dbusmock --system --template <template>` with `DBUS_SYSTEM_BUS_ADDRESS` set to `address`,
    /// and returns once `busName` has an owner on the bus (seen through `observer`, a connection to the same bus).
    public init(
        template: String,
        busName: String,
        address: String,
        observer: DBusConnection,
        parameters: String? = nil
    ) async throws {
        let changes = try await observer.nameOwnerChanges(of: busName)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        var arguments = ["-m", "dbusmock", "--system", "--template", template]
        if let parameters { arguments += ["--parameters", parameters] }
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SYSTEM_BUS_ADDRESS"] = address
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        // If the mock dies before taking the name, stop waiting for it.
        process.terminationHandler = { _ in changes.cancel() }
        do {
            try process.run()
        } catch {
            throw TestProcessError(description: "cannot start /usr/bin/python3 -m dbusmock: \(error)")
        }
        self.process = process
        self.busName = busName
        if try await observer.nameOwner(of: busName) == nil {
            for await change in changes where change.newOwner != nil { break }
        }
        guard try await observer.nameOwner(of: busName) != nil else {
            stop()
            throw TestProcessError(
                description: "dbusmock template \(template) exited without taking \(busName); run "
                    + "`/usr/bin/python3 -m dbusmock --system --template \(template)` by hand to see why")
        }
    }

    /// Kills the mock (SIGKILL) and waits for it.
    public func stop() {
        // Under the lock so a concurrent stop() (deinit, test teardown) waits until the process is gone.
        stopped.withLock { stopped in
            guard !stopped else { return }
            stopped = true
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
    }

    deinit { stop() }
}
