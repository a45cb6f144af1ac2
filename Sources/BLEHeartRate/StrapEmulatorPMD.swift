import BlueZ
import DBus
import GatewayEngine
import Logging
import PolarPMD

/// The Polar Measurement Data service of `emulate-strap --pmd-ecg FILE` (docs/pmd.md, "Emulated"): a control point
/// (read: features; write: requests, answered by indications) that, like an H10's, bluetoothd serves on an encrypted
/// link only (`encrypt-write`), and a data characteristic that, once ECG is started, notifies one frame of 73
/// samples every 73/130 s from a recording (looping), stamped with the emulated strap's own clock.
final class StrapEmulatorPMD: Sendable {
    static let service: DBusObjectPath = "/org/hrgateway/strap/service2"
    static let controlPoint: DBusObjectPath = "/org/hrgateway/strap/service2/char0"
    static let data: DBusObjectPath = "/org/hrgateway/strap/service2/char1"
    static let perFrame = 73
    static let rateHz = 130
    /// The emulated strap's clock when the first sample is taken (ns): unrelated to the host's, as a strap's is.
    static let sensorStartNs: UInt64 = 599_000_000_000

    private struct State {
        var ecgOn = false
        var dataNotifying = false
        var index = 0
        var frame = 0
        var startMonoMs: Int64 = 0
        var timer: (any ScheduledAction)?
        var stopped = false
        var sentSamples = 0
    }

    let connection: DBusConnection
    let ecg: [Int32]
    let clock: any SessionClock
    let logger: Logger
    private let state = Locked(State())

    init(connection: DBusConnection, ecg: [Int32], clock: any SessionClock, logger: Logger) {
        self.connection = connection
        self.ecg = ecg
        self.clock = clock
        self.logger = logger
    }

    var sentSamples: Int { state.withLock { $0.sentSamples } }

    func export() throws {
        let char = "org.bluez.GattCharacteristic1"
        try connection.export(Self.service, interfaces: [DBusInterface(
            "org.bluez.GattService1",
            properties: [
                "UUID": DBusProperty(.string(PMDService.serviceUUID)),
                "Primary": DBusProperty(.boolean(true)),
            ])])
        try connection.export(Self.controlPoint, interfaces: [DBusInterface(
            char,
            methods: [
                "ReadValue": DBusMethod(input: "a{sv}", output: "ay") { _ in
                    [.bytes([PMDFeatures.featureCode, 0x01, 0x00])]   // ECG
                },
                "WriteValue": DBusMethod(input: "aya{sv}", output: "") { [weak self] call in
                    self?.request(call.arguments.first?.bytes ?? [])
                    return []
                },
                "StartNotify": DBusMethod(input: "", output: "") { [weak self] _ in
                    self?.notifying(Self.controlPoint, true)
                    return []
                },
                "StopNotify": DBusMethod(input: "", output: "") { [weak self] _ in
                    self?.notifying(Self.controlPoint, false)
                    return []
                },
            ],
            properties: [
                "UUID": DBusProperty(.string(PMDService.controlPointUUID)),
                "Service": DBusProperty(.objectPath(Self.service)),
                // An H10 takes requests on an encrypted link only: bluetoothd refuses them otherwise.
                "Flags": DBusProperty(.stringArray(["read", "encrypt-write", "indicate"])),
                "Notifying": DBusProperty(.boolean(false)),
                "Value": DBusProperty(.bytes([])),
            ])])
        try connection.export(Self.data, interfaces: [DBusInterface(
            char,
            methods: [
                "StartNotify": DBusMethod(input: "", output: "") { [weak self] _ in
                    self?.notifying(Self.data, true)
                    return []
                },
                "StopNotify": DBusMethod(input: "", output: "") { [weak self] _ in
                    self?.notifying(Self.data, false)
                    return []
                },
            ],
            properties: [
                "UUID": DBusProperty(.string(PMDService.dataUUID)),
                "Service": DBusProperty(.objectPath(Self.service)),
                "Flags": DBusProperty(.stringArray(["notify"])),
                "Notifying": DBusProperty(.boolean(false)),
                "Value": DBusProperty(.bytes([])),
            ])])
    }

    private func notifying(_ path: DBusObjectPath, _ on: Bool) {
        if path == Self.data { state.withLock { $0.dataNotifying = on } }
        try? connection.setExportedProperty("Notifying", interface: "org.bluez.GattCharacteristic1", to: .boolean(on), at: path)
    }

    /// Answers a control point request with an indication, as the H10 does.
    private func request(_ bytes: [UInt8]) {
        guard bytes.count >= 2 else {
            indicate([PMDControlPointResponse.responseCode, bytes.first ?? 0, 0, PMDStatus.invalidLength.rawValue, 0])
            return
        }
        let op = PMDOpCode(rawValue: bytes[0]), type = PMDMeasurementType(rawValue: bytes[1])
        var status = PMDStatus.success
        var parameters: [UInt8] = []
        switch (op, type) {
        case (.getMeasurementSettings, .ecg):
            parameters = [0x00, 0x01, 0x82, 0x00, 0x01, 0x01, 0x0E, 0x00]   // 130 Hz, 14 bit
        case (.startMeasurement, .ecg):
            let start = state.withLock { s -> Bool in
                guard !s.ecgOn else { return false }
                s.ecgOn = true
                s.frame = 0
                s.startMonoMs = clock.monotonicMs()
                return true
            }
            if start { scheduleNext() } else { status = .alreadyInState }
        case (.stopMeasurement, .ecg):
            let timer = state.withLock { s -> (any ScheduledAction)? in
                s.ecgOn = false
                defer { s.timer = nil }
                return s.timer
            }
            timer?.cancel()
        default:
            status = .notSupported
        }
        indicate([PMDControlPointResponse.responseCode, op.rawValue, type.rawValue, status.rawValue, 0] + parameters)
    }

    private func indicate(_ bytes: [UInt8]) {
        try? connection.setExportedProperty(
            "Value", interface: "org.bluez.GattCharacteristic1", to: .bytes(bytes), at: Self.controlPoint)
    }

    private func scheduleNext() {
        let due = state.withLock { s -> Int64? in
            guard s.ecgOn, !s.stopped else { return nil }
            return s.startMonoMs + Int64(((Double(s.frame + 1) * Double(Self.perFrame) * 1000) / Double(Self.rateHz)).rounded())
        }
        guard let due else { return }
        let t = clock.schedule(atMonotonicMs: due) { [weak self] in self?.tick() }
        state.withLock { $0.timer = t }
    }

    /// One frame: the next 73 samples of the recording, stamped with the last one's time on the strap's clock.
    private func tick() {
        let frame = state.withLock { s -> [UInt8]? in
            guard s.ecgOn, !s.stopped, !ecg.isEmpty else { return nil }
            var values: [Int32] = []
            for k in 0..<Self.perFrame { values.append(ecg[(s.index + k) % ecg.count]) }
            let lastSample = UInt64(s.frame * Self.perFrame + Self.perFrame - 1)
            let ts = Self.sensorStartNs + lastSample * 1_000_000_000 / UInt64(Self.rateHz)
            s.index = (s.index + Self.perFrame) % ecg.count
            s.frame += 1
            guard s.dataNotifying else { return nil }   // samples of unsubscribed time are lost, as a strap's
            s.sentSamples += values.count
            var bytes = PMDFrameHeader(measurementType: .ecg, timestampNs: ts, frameType: 0, isCompressed: false).encoded()
            for v in values {
                let u = UInt32(bitPattern: v)
                bytes += [UInt8(u & 0xFF), UInt8((u >> 8) & 0xFF), UInt8((u >> 16) & 0xFF)]
            }
            return bytes
        }
        if let frame {
            try? connection.setExportedProperty(
                "Value", interface: "org.bluez.GattCharacteristic1", to: .bytes(frame), at: Self.data)
        }
        scheduleNext()
    }

    func stop() {
        let timer = state.withLock { s -> (any ScheduledAction)? in
            s.stopped = true
            return s.timer
        }
        timer?.cancel()
    }
}
