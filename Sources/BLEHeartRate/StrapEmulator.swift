import BlueZ
import DBus
import GatewayEngine
import HRVAnalysis
import Logging

/// A heart-rate strap emulated on a local adapter: a GATT application (Heart Rate service with 2A37 notify and
/// 2A38 read, Battery service with 2A19) registered with `GattManager1`, an advertisement registered with
/// `LEAdvertisingManager1`, and one real Heart Rate Measurement notification per second carrying the RR of a
/// series (`HeartRatePacer`, looping). Timers run on the injected clock.
public final class StrapEmulator: Sendable {
    public static let root: DBusObjectPath = "/org/hrgateway/strap"
    public static let heartRateService: DBusObjectPath = "/org/hrgateway/strap/service0"
    public static let measurement: DBusObjectPath = "/org/hrgateway/strap/service0/char0"
    public static let bodySensorLocation: DBusObjectPath = "/org/hrgateway/strap/service0/char1"
    public static let batteryService: DBusObjectPath = "/org/hrgateway/strap/service1"
    public static let batteryLevel: DBusObjectPath = "/org/hrgateway/strap/service1/char0"
    public static let advertisement: DBusObjectPath = "/org/hrgateway/strap/advertisement0"

    public let connection: DBusConnection
    public let adapter: DBusObjectPath
    public let name: String
    let clock: any SessionClock
    let logger: Logger
    private let state: Locked<State>

    private struct State {
        var pacer: HeartRatePacer
        var notifying = false
        var timer: (any ScheduledAction)?
        var sent: UInt64 = 0
        var stopped = false
        var startMs: Int64 = 0
        var watcher: Task<Void, Never>?
        var agent: BlueZAgent?
    }

    /// Each (re-)registration with BlueZ as it completes: `registered` (both the application and the
    /// advertisement), `advertising` (the advertisement alone, after the controller came back), or `failed: …`.
    public let registrations: AsyncStream<String>
    private let registrationsIn: AsyncStream<String>.Continuation

    /// Number of notifications sent so far.
    public var sentCount: UInt64 { state.withLock { $0.sent } }

    /// Polar's measurement service, with `pmdECG`.
    let pmd: StrapEmulatorPMD?
    /// Where the beats' series starts, after `start()` (ms; `init`).
    let firstPeakMs: Int64

    /// ECG samples sent by the emulated measurement service.
    public var sentECGSamples: Int { pmd?.sentSamples(.ecg) ?? 0 }
    /// Accelerometer samples sent by the emulated measurement service.
    public var sentAccelerometerSamples: Int { pmd?.sentSamples(.acc) ?? 0 }

    /// `pmdECG` (µV at 130 Hz): also serve Polar's measurement service, streaming it (looping) once ECG is started,
    /// and a synthetic accelerometer once that is started; at `pmdECGRateHz` on the strap's clock and in real time
    /// (a real H10's "130 Hz" is 128–131 Hz), its settings saying 130 Hz either way. The recording plays from
    /// `start()` on, streamed or not; the first interval of `rr1024` starts `firstPeakMs` after it (at an R peak),
    /// so that beats derived from the recording (`ECGBeats`) come with the ECG they were derived from.
    public init(connection: DBusConnection, adapter: DBusObjectPath, name: String, rr1024: [UInt16],
                firstPeakMs: Int64 = 0, pmdECG: [Int32]? = nil, pmdECGRateHz: Double = 130,
                clock: any SessionClock = SystemSessionClock(), logger: Logger) {
        self.firstPeakMs = firstPeakMs
        pmd = pmdECG.map {
            StrapEmulatorPMD(connection: connection, ecg: $0, ecgRateHz: pmdECGRateHz, clock: clock, logger: logger)
        }
        self.connection = connection
        self.adapter = adapter
        self.name = name
        self.clock = clock
        self.logger = logger
        state = Locked(State(pacer: HeartRatePacer(rr1024: rr1024, loops: true)))
        (registrations, registrationsIn) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(64))
    }

    /// Exports the objects and registers the application and the advertisement with BlueZ.
    public func start() async throws {
        connection.exportObjectManager(at: Self.root)
        let gattService = "org.bluez.GattService1"
        let gattChar = "org.bluez.GattCharacteristic1"
        let notPermitted = DBusError(name: "org.bluez.Error.NotPermitted", message: "Read not permitted")
        try connection.export(Self.heartRateService, interfaces: [DBusInterface(
            gattService,
            properties: [
                "UUID": DBusProperty(.string(GATTUUID.full(GATTUUID.heartRateService))),
                "Primary": DBusProperty(.boolean(true)),
            ])])
        try connection.export(Self.measurement, interfaces: [DBusInterface(
            gattChar,
            methods: [
                "StartNotify": DBusMethod(input: "", output: "") { [weak self] _ in
                    self?.setNotifying(true)
                    return []
                },
                "StopNotify": DBusMethod(input: "", output: "") { [weak self] _ in
                    self?.setNotifying(false)
                    return []
                },
                "ReadValue": DBusMethod(input: "a{sv}", output: "ay") { _ in throw notPermitted },
            ],
            properties: [
                "UUID": DBusProperty(.string(GATTUUID.full(GATTUUID.heartRateMeasurement))),
                "Service": DBusProperty(.objectPath(Self.heartRateService)),
                "Flags": DBusProperty(.stringArray(["notify"])),
                "Notifying": DBusProperty(.boolean(false)),
                "Value": DBusProperty(.bytes([])),
            ])])
        try exportReadOnly(Self.bodySensorLocation, service: Self.heartRateService, uuid: GATTUUID.bodySensorLocation,
                           value: [BodySensorLocation.chest.rawValue])
        try connection.export(Self.batteryService, interfaces: [DBusInterface(
            gattService,
            properties: [
                "UUID": DBusProperty(.string(GATTUUID.full(GATTUUID.batteryService))),
                "Primary": DBusProperty(.boolean(true)),
            ])])
        try exportReadOnly(Self.batteryLevel, service: Self.batteryService, uuid: GATTUUID.batteryLevel, value: [100])
        try pmd?.export()
        try connection.export(Self.advertisement, interfaces: [DBusInterface(
            "org.bluez.LEAdvertisement1",
            methods: ["Release": DBusMethod(input: "", output: "") { _ in [] }],
            properties: [
                "Type": DBusProperty(.string("peripheral")),
                "ServiceUUIDs": DBusProperty(.stringArray([GATTUUID.full(GATTUUID.heartRateService)])),
                "LocalName": DBusProperty(.string(name)),
                "Appearance": DBusProperty(.uint16(0x0341)),   // heart rate sensor: belt
                "Discoverable": DBusProperty(.boolean(true)),
            ])])
        try await registerApplication()
        try await registerAdvertisement()
        if pmd != nil {
            // A central pairs before it may use the measurement service: accept it, as a strap does ("Just Works").
            do {
                let agent = try await BlueZAgent.register(on: connection, for: nil, asDefault: true)
                state.withLock { $0.agent = agent }
            } catch {
                logger.warning("no pairing agent (\(error)); a central may not be able to pair")
            }
        }
        registrationsIn.yield("registered")
        let now = clock.monotonicMs()
        pmd?.startPlaying(atMonotonicMs: now)
        state.withLock { $0.startMs = now + firstPeakMs }
        scheduleNext()
        try await watchBlueZ()
    }

    private func registerApplication() async throws {
        _ = try await connection.call(
            destination: BlueZ.busName, path: adapter, interface: "org.bluez.GattManager1",
            member: "RegisterApplication", arguments: [.objectPath(Self.root), .properties([:])], timeout: .seconds(10))
    }

    private func registerAdvertisement() async throws {
        _ = try await connection.call(
            destination: BlueZ.busName, path: adapter, interface: "org.bluez.LEAdvertisingManager1",
            member: "RegisterAdvertisement", arguments: [.objectPath(Self.advertisement), .properties([:])],
            timeout: .seconds(10))
    }

    /// Registers again by itself when bluetoothd comes back (a restart drops every registration) and advertises
    /// again when the controller is powered back on (a power cycle drops the advertisement).
    private func watchBlueZ() async throws {
        let owners = try await connection.nameOwnerChanges(of: BlueZ.busName)
        let powered = try await connection.subscribe(DBusMatchRule(
            sender: BlueZ.busName, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
            path: adapter)) { message -> Bool? in
                guard message.body.first?.string == BlueZ.adapterInterface else { return nil }
                return message.body.dropFirst().first?.propertyDictionary?["Powered"]?.bool
            }
        let task = Task { [weak self] in
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await change in owners where change.newOwner != nil {
                        await self?.again(application: true)
                    }
                }
                group.addTask {
                    for await on in powered where on {
                        await self?.again(application: false)
                    }
                }
            }
        }
        state.withLock { $0.watcher = task }
    }

    /// Whether bluetoothd has set the adapter up again (its advertising and GATT managers are there).
    private func adapterReady() async -> Bool {
        guard let objects = try? await connection.managedObjects(destination: BlueZ.busName, timeout: .seconds(5)),
            let interfaces = objects[adapter]
        else { return false }
        return interfaces["org.bluez.LEAdvertisingManager1"] != nil && interfaces["org.bluez.GattManager1"] != nil
    }

    /// One re-registration, once bluetoothd has the adapter ready (registering earlier made bluez 5.66 fail to add
    /// the advertisement and crash), retried a few times.
    private func again(application: Bool) async {
        for _ in 0..<60 where !(await adapterReady()) {
            guard !state.withLock({ $0.stopped }) else { return }
            try? await Task.sleep(for: .milliseconds(250))   // bluetoothd still setting its adapters up
        }
        for attempt in 0..<10 {
            guard !state.withLock({ $0.stopped }) else { return }
            do {
                if application { try await registerApplication() } else {
                    _ = try? await connection.call(
                        destination: BlueZ.busName, path: adapter, interface: "org.bluez.LEAdvertisingManager1",
                        member: "UnregisterAdvertisement", arguments: [.objectPath(Self.advertisement)],
                        timeout: .seconds(5))
                }
                try await registerAdvertisement()
                logger.notice("registered again with bluetoothd (\(application ? "bluetoothd restarted" : "controller powered on"))")
                registrationsIn.yield(application ? "registered" : "advertising")
                return
            } catch {
                if attempt == 9 {
                    logger.warning("could not register again with bluetoothd: \(error)")
                    registrationsIn.yield("failed: \(error)")
                    return
                }
                try? await Task.sleep(for: .milliseconds(200 * (attempt + 1)))   // bluetoothd still starting
            }
        }
    }

    /// Unregisters from BlueZ and stops notifying.
    public func stop() async {
        let (timer, watcher) = state.withLock { s -> ((any ScheduledAction)?, Task<Void, Never>?) in
            s.stopped = true
            return (s.timer, s.watcher)
        }
        timer?.cancel()
        watcher?.cancel()
        pmd?.stop()
        await state.withLock { $0.agent }?.unregister()
        registrationsIn.finish()
        _ = try? await connection.call(
            destination: BlueZ.busName, path: adapter, interface: "org.bluez.LEAdvertisingManager1",
            member: "UnregisterAdvertisement", arguments: [.objectPath(Self.advertisement)], timeout: .seconds(5))
        _ = try? await connection.call(
            destination: BlueZ.busName, path: adapter, interface: "org.bluez.GattManager1",
            member: "UnregisterApplication", arguments: [.objectPath(Self.root)], timeout: .seconds(5))
    }

    private func exportReadOnly(_ path: DBusObjectPath, service: DBusObjectPath, uuid: UInt16, value: [UInt8]) throws {
        try connection.export(path, interfaces: [DBusInterface(
            "org.bluez.GattCharacteristic1",
            methods: ["ReadValue": DBusMethod(input: "a{sv}", output: "ay") { _ in [.bytes(value)] }],
            properties: [
                "UUID": DBusProperty(.string(GATTUUID.full(uuid))),
                "Service": DBusProperty(.objectPath(service)),
                "Flags": DBusProperty(.stringArray(["read"])),
                "Value": DBusProperty(.bytes(value)),
            ])])
    }

    private func setNotifying(_ on: Bool) {
        state.withLock { $0.notifying = on }
        try? connection.setExportedProperty("Notifying", interface: "org.bluez.GattCharacteristic1", to: .boolean(on), at: Self.measurement)
    }

    private func scheduleNext() {
        let deadline = state.withLock { s -> Int64? in
            guard !s.stopped, let next = s.pacer.peekOffsetMs else { return nil }
            return s.startMs + next
        }
        guard let deadline else { return }
        let t = clock.schedule(atMonotonicMs: deadline) { [weak self] in self?.tick() }
        state.withLock { $0.timer = t }
    }

    /// Sends the next packet (while a central is subscribed; otherwise the beats of that second are skipped, as a
    /// real strap's would be).
    private func tick() {
        let payload = state.withLock { s -> [UInt8]? in
            guard !s.stopped, let p = s.pacer.next() else { return nil }
            guard s.notifying else { return nil }
            s.sent += 1
            return p.payload
        }
        if let payload {
            do {
                try connection.setExportedProperty("Value", interface: "org.bluez.GattCharacteristic1", to: .bytes(payload), at: Self.measurement)
            } catch {
                logger.warning("notify failed: \(error)")
            }
        }
        scheduleNext()
    }
}

extension HeartRatePacer {
    /// When the next packet is due (ms after the start), without consuming it.
    var peekOffsetMs: Int64? {
        var copy = self
        return copy.next()?.offsetMs
    }
}

extension StrapEmulator {
    /// The beats of an ECG recording as a strap derives its RR from its own ECG: the R peaks (`ECGRPeaks`) of the
    /// recording looping at `rateHz`, the intervals between them in 1/1024 s, from the first peak's to the next (the
    /// last one across the loop's seam, as the looping ECG shows it), and where the first peak falls.
    public struct ECGBeats: Sendable, Equatable {
        public var rr1024: [UInt16]
        /// The first R peak's time after the recording's start (ms): the series' first beat ends one RR later.
        public var firstPeakMs: Double

        /// Nil when the recording holds fewer than two beats (or is shorter than the detector's two seconds).
        public init?(looping ecg: [Int32], rateHz: Double) {
            guard !ecg.isEmpty, rateHz > 0, rateHz.isFinite else { return nil }
            // Three loops, so that the middle one's peaks have their neighbours on both sides.
            let loop = Double(ecg.count) / rateHz
            let peaks = ECGRPeaks.detect((ecg + ecg + ecg).map(Double.init), rateHz: rateHz)
            let middle = peaks.filter { $0 >= loop && $0 < 2 * loop }
            guard middle.count >= 2, let first = middle.first, let next = peaks.first(where: { $0 >= 2 * loop }) else {
                return nil
            }
            // Rounded as times from the first peak, not interval by interval: a loop of intervals lasts as long as
            // a loop of the ECG (to 1/1024 s), so the beats keep in step with it over hours.
            let ticks = (middle + [next]).map { Int((($0 - first) * 1024).rounded()) }
            rr1024 = zip(ticks, ticks.dropFirst()).map { UInt16(clamping: $1 - $0) }
            firstPeakMs = (first - loop) * 1000
        }
    }
}
