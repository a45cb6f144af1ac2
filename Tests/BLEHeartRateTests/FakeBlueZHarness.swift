import BLEHeartRate
import DBus
import DBusTestSupport
import Foundation
import GatewayEngine
import Logging

/// A private dbus-daemon with `Tests/Fixtures/fake_bluez.py` on it, and a control connection to script it.
// @unchecked Sendable: `process` is only touched under `lock` (in `stop()`); the rest is immutable.
final class FakeBlueZ: @unchecked Sendable {
    let daemon: PrivateBusDaemon
    let control: DBusConnection
    private let process: Process
    private let lock = NSLock()
    private var stopped = false

    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/fake_bluez.py").path

    var bus: DBusBus { .address(daemon.address) }

    /// Starts the bus and the fake; returns when the fake printed READY (it owns org.bluez by then).
    init(adapters: [String] = []) async throws {
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
    func ctl(_ member: String, _ args: [DBusValue] = []) async throws -> [DBusValue] {
        try await control.call(
            destination: "org.hrgateway.FakeBlueZ", path: "/control", interface: "org.hrgateway.FakeBlueZ1",
            member: member, arguments: args, timeout: .seconds(10))
    }

    func addStrap(
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
    func sendPackets(_ address: String, _ count: UInt32) async throws -> UInt32 {
        try await ctl("SendPackets", [.string(address), .uint32(count)]).first?.uint32 ?? 0
    }

    func calls() async throws -> [String] { try await ctl("Calls").first?.stringArray ?? [] }

    func count(_ method: String) async throws -> Int { try await calls().filter { $0.hasPrefix(method + " ") }.count }

    func stop() {
        lock.lock()
        defer { lock.unlock() }
        guard !stopped else { return }
        stopped = true
        control.close()
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        daemon.stop()
    }

    deinit { stop() }
}

enum FakeBlueZError: Error {
    /// fake_bluez.py needs /usr/bin/python3 with python3-dbus and python3-gi.
    case didNotStart
}

/// A sink that hands every status and sample to the test as async streams.
final class Recorder: Sendable {
    let statuses: AsyncStream<SensorStatus>
    let samples: AsyncStream<BiosignalSample>
    private let statusIn: AsyncStream<SensorStatus>.Continuation
    private let sampleIn: AsyncStream<BiosignalSample>.Continuation

    init() {
        (statuses, statusIn) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
        (samples, sampleIn) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
    }

    var sink: ProviderSink {
        ProviderSink(onSample: { [sampleIn] in sampleIn.yield($0) }, onStatus: { [statusIn] in statusIn.yield($0) })
    }

    /// Wraps another sink: everything goes to it and to the recorder.
    func tee(_ other: ProviderSink) -> ProviderSink {
        ProviderSink(
            onSample: { [sampleIn] in other.send($0); sampleIn.yield($0) },
            onStatus: { [statusIn] in other.status($0); statusIn.yield($0) })
    }
}

extension AsyncStream<SensorStatus>.Iterator {
    /// Skips statuses until one satisfies `predicate`; nil if the stream ended.
    mutating func first(where predicate: (SensorStatus) -> Bool) async -> SensorStatus? {
        while let s = await next() { if predicate(s) { return s } }
        return nil
    }

    mutating func first(_ state: SensorStatus.State, containing text: String? = nil) async -> SensorStatus? {
        await first { s in s.state == state && (text.map { t in s.message?.contains(t) ?? false } ?? true) }
    }
}

extension AsyncStream<BiosignalSample>.Iterator {
    mutating func take(_ n: Int) async -> [BiosignalSample] {
        var out: [BiosignalSample] = []
        while out.count < n, let s = await next() { out.append(s) }
        return out
    }
}

/// A provider wrapper that tees the engine's sink into a recorder (so tests know when a sample was ingested).
struct TeeProvider: BiosignalProvider {
    let inner: BLEHeartRateProvider
    let recorder: Recorder
    var name: String { inner.name }
    var isAvailable: Bool { get async { await inner.isAvailable } }
    func startStreaming(into sink: ProviderSink) async throws { try await inner.startStreaming(into: recorder.tee(sink)) }
    func stopStreaming() async { await inner.stopStreaming() }
}

/// A monotonic counter standing in for CLOCK_MONOTONIC.
final class FakeMonotonic: Sendable {
    private let value = Locked<UInt64>(0)
    func next() -> UInt64 { value.withLock { $0 += 1_000_000; return $0 } }
}
