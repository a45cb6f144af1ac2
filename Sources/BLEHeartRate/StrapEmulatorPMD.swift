import BlueZ
import DBus
import GatewayEngine
import Logging
import PolarPMD

/// The Polar Measurement Data service of `emulate-strap --pmd-ecg FILE` (docs/pmd.md, "Emulated"): a control point
/// (read: features; write: requests, answered by indications) that, like an H10's, bluetoothd serves on an encrypted
/// link only (`encrypt-write`), and a data characteristic. Once ECG is started it notifies one frame of 73 samples
/// every 73/`ecgRateHz` s from a recording (looping; 130 Hz, or the rate of `--pmd-ecg-rate`: a real H10's is
/// 128–131 Hz while its settings, and these, say 130); once the accelerometer is started (25, 50, 100 or 200 Hz), one frame of
/// 36 samples every 36 sample periods. Both are stamped with the emulated strap's own clock. The accelerometer's
/// values are synthetic (`accelerometerSample`): they carry bytes, not motion.
final class StrapEmulatorPMD: Sendable {
    static let service: DBusObjectPath = "/org/hrgateway/strap/service2"
    static let controlPoint: DBusObjectPath = "/org/hrgateway/strap/service2/char0"
    static let data: DBusObjectPath = "/org/hrgateway/strap/service2/char1"
    static let ecgPerFrame = 73
    static let accPerFrame = 36
    static let accRatesHz: [UInt16] = [25, 50, 100, 200]
    /// The emulated strap's clock when the first sample is taken (ns): unrelated to the host's, as a strap's is.
    static let sensorStartNs: UInt64 = 599_000_000_000

    /// One running measurement: its rate, frames sent since its start, and its timer.
    private struct Stream {
        var rateHz: Double
        var perFrame: Int
        var frame = 0
        var startMonoMs: Int64
        /// The strap's clock at this stream's start.
        var startSensorNs: UInt64
        var timer: (any ScheduledAction)?
    }

    private struct State {
        var streams: [PMDMeasurementType: Stream] = [:]
        var dataNotifying = false
        /// Next ECG sample of the recording, and of the synthetic accelerometer pattern.
        var ecgIndex = 0
        var accIndex = 0
        var stopped = false
        var sentSamples: [PMDMeasurementType: Int] = [:]
        /// When the recording started playing (monotonic ms): the emulated heart beats on from then whether or not
        /// its ECG is streamed, as a strap's does, so a stream started later starts where the recording then is.
        var originMs: Int64?
    }

    let connection: DBusConnection
    let ecg: [Int32]
    let clock: any SessionClock
    let logger: Logger
    private let state = Locked(State())

    /// The rate the ECG really runs at on the emulated strap's clock, and in real time.
    let ecgRateHz: Double

    init(connection: DBusConnection, ecg: [Int32], ecgRateHz: Double = 130, clock: any SessionClock, logger: Logger) {
        self.connection = connection
        self.ecg = ecg
        self.ecgRateHz = ecgRateHz
        self.clock = clock
        self.logger = logger
    }

    func sentSamples(_ type: PMDMeasurementType) -> Int { state.withLock { $0.sentSamples[type] ?? 0 } }

    /// Starts the recording's clock (once): the heart-rate notifications' beats are derived from the same moment.
    func startPlaying(atMonotonicMs ms: Int64) { state.withLock { $0.originMs = $0.originMs ?? ms } }

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
                    [.bytes([PMDFeatures.featureCode, 0x05, 0x00])]   // ECG and accelerometer
                },
                "WriteValue": DBusMethod(input: "aya{sv}", output: "") { [weak self] call in
                    self?.request(call.arguments.first?.bytes ?? [])
                    return []
                },
            ].merging(notifyMethods(Self.controlPoint)) { a, _ in a },
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
            methods: notifyMethods(Self.data),
            properties: [
                "UUID": DBusProperty(.string(PMDService.dataUUID)),
                "Service": DBusProperty(.objectPath(Self.service)),
                "Flags": DBusProperty(.stringArray(["notify"])),
                "Notifying": DBusProperty(.boolean(false)),
                "Value": DBusProperty(.bytes([])),
            ])])
    }

    /// StartNotify and StopNotify of the characteristic at `path`.
    private func notifyMethods(_ path: DBusObjectPath) -> [String: DBusMethod] {
        [
            "StartNotify": DBusMethod(input: "", output: "") { [weak self] _ in
                self?.notifying(path, true)
                return []
            },
            "StopNotify": DBusMethod(input: "", output: "") { [weak self] _ in
                self?.notifying(path, false)
                return []
            },
        ]
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
        case (.getMeasurementSettings, .acc):
            var offered = PMDSettings()
            offered.values[.sampleRate] = Self.accRatesHz.map { UInt32($0) }
            offered.values[.resolution] = [16]
            offered.values[.range] = [2, 4, 8]   // ±g
            parameters = offered.encoded()
        case (.startMeasurement, .ecg):
            status = start(.ecg, rateHz: ecgRateHz, perFrame: Self.ecgPerFrame)
        case (.startMeasurement, .acc):
            let asked = (try? PMDSettings(decoding: bytes.dropFirst(2)))?.sampleRates.first
            if let hz = asked, Self.accRatesHz.contains(UInt16(clamping: hz)) {
                status = start(.acc, rateHz: Double(hz), perFrame: Self.accPerFrame)
            } else {
                status = .invalidSampleRate
            }
        case (.stopMeasurement, .ecg), (.stopMeasurement, .acc):
            let timer = state.withLock { $0.streams.removeValue(forKey: type)?.timer }
            timer?.cancel()
        default:
            status = .notSupported
        }
        indicate([PMDControlPointResponse.responseCode, op.rawValue, type.rawValue, status.rawValue, 0] + parameters)
    }

    private func start(_ type: PMDMeasurementType, rateHz: Double, perFrame: Int) -> PMDStatus {
        let started = state.withLock { s -> Bool in
            guard s.streams[type] == nil, !s.stopped else { return false }
            let mono = clock.monotonicMs()
            if type == .ecg, let origin = s.originMs, !ecg.isEmpty {
                s.ecgIndex = Int((Double(max(0, mono - origin)) * ecgRateHz / 1000).rounded(.down)) % ecg.count
            }
            s.streams[type] = Stream(
                rateHz: rateHz, perFrame: perFrame, startMonoMs: mono,
                startSensorNs: Self.sensorStartNs + UInt64(max(0, mono)) * 1_000_000)
            return true
        }
        guard started else { return .alreadyInState }
        scheduleNext(type)
        return .success
    }

    private func indicate(_ bytes: [UInt8]) {
        try? connection.setExportedProperty(
            "Value", interface: "org.bluez.GattCharacteristic1", to: .bytes(bytes), at: Self.controlPoint)
    }

    private func scheduleNext(_ type: PMDMeasurementType) {
        let due = state.withLock { s -> Int64? in
            guard let st = s.streams[type], !s.stopped else { return nil }
            let samples = Double((st.frame + 1) * st.perFrame)
            return st.startMonoMs + Int64((samples * 1000 / st.rateHz).rounded())
        }
        guard let due else { return }
        let t = clock.schedule(atMonotonicMs: due) { [weak self] in self?.tick(type) }
        state.withLock { s in
            if s.streams[type] != nil { s.streams[type]?.timer = t } else { t.cancel() }
        }
    }

    /// Synthetic accelerometer sample `i` in milli-g: gravity on z and a sway on x and y. Sample i is recognisable
    /// from its values (modulo 4650), so a reader can check that every sample came once and in order.
    static func accelerometerSample(_ i: Int) -> SIMD3<Int16> {
        SIMD3(Int16(i % 50 - 25), Int16((i * 7) % 31 - 15), Int16(1000 - i % 3))
    }

    /// One frame of `type`: the next samples, stamped with the last one's time on the strap's clock.
    private func tick(_ type: PMDMeasurementType) {
        let frame = state.withLock { s -> [UInt8]? in
            guard var st = s.streams[type], !s.stopped else { return nil }
            let lastSample = UInt64(st.frame * st.perFrame + st.perFrame - 1)
            let ts = st.startSensorNs + UInt64((Double(lastSample) * 1e9 / st.rateHz).rounded())
            st.frame += 1
            s.streams[type] = st
            var bytes: [UInt8]
            if type == .ecg {
                guard !ecg.isEmpty else { return nil }
                let first = s.ecgIndex
                s.ecgIndex = (s.ecgIndex + st.perFrame) % ecg.count
                guard s.dataNotifying else { return nil }   // samples of unsubscribed time are lost, as a strap's
                bytes = PMDFrameHeader(measurementType: .ecg, timestampNs: ts, frameType: 0, isCompressed: false).encoded()
                for k in 0..<st.perFrame {
                    let u = UInt32(bitPattern: ecg[(first + k) % ecg.count])
                    bytes += [UInt8(u & 0xFF), UInt8((u >> 8) & 0xFF), UInt8((u >> 16) & 0xFF)]
                }
            } else {
                let first = s.accIndex
                s.accIndex += st.perFrame
                guard s.dataNotifying else { return nil }
                // Frame type 1: x, y, z as 16-bit little-endian milli-g.
                bytes = PMDFrameHeader(measurementType: .acc, timestampNs: ts, frameType: 1, isCompressed: false).encoded()
                for k in 0..<st.perFrame {
                    let v = Self.accelerometerSample(first + k)
                    for c in [v.x, v.y, v.z] {
                        let u = UInt16(bitPattern: c)
                        bytes += [UInt8(u & 0xFF), UInt8(u >> 8)]
                    }
                }
            }
            s.sentSamples[type, default: 0] += st.perFrame
            return bytes
        }
        if let frame {
            try? connection.setExportedProperty(
                "Value", interface: "org.bluez.GattCharacteristic1", to: .bytes(frame), at: Self.data)
        }
        scheduleNext(type)
    }

    func stop() {
        let timers = state.withLock { s -> [any ScheduledAction] in
            s.stopped = true
            return s.streams.values.compactMap(\.timer)
        }
        for t in timers { t.cancel() }
    }
}
