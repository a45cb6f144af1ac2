import DBus
import GatewayEngine
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// What the strap told us besides heart rate: read once per provider after the first connection.
public struct StrapDetails: Sendable, Equatable {
    public var address: String?
    public var name: String?
    public var bodySensorLocation: BodySensorLocation?
    public var batteryPercent: Int?
    /// Device Information strings by characteristic (0x2A29 manufacturer, 0x2A24 model, 0x2A25 serial,
    /// 0x2A27 hardware, 0x2A26 firmware, 0x2A28 software revision).
    public var deviceInformation: [UInt16: String] = [:]

    public init() {}
}

/// A heart-rate strap through BlueZ (source `ble_hrm`, device id = the strap's address).
///
/// Uses its own D-Bus connection (so BlueZ's notify session belongs to this strap alone), mirrors `/org/bluez`, and
/// runs `StrapStateMachine`: discovery, Connect with retries (le-connection-abort-by-local, InProgress,
/// UnknownObject), ServicesResolved raced against Connected=false and removal, 2A37 lookup by UUID, StartNotify once
/// per connection lifetime, an explicit `stale` status when notifications stop, its own reconnect loop with
/// backoff, bluetoothd restarts, and Disconnect on stop. Timers run on the injected `SessionClock`.
public final class BLEHeartRateProvider: BiosignalProvider {
    public let name = BLEHeartRate.source
    public let spec: StrapSpec
    /// `hciN`, or nil for the first powered adapter with the central role.
    public let adapter: String?
    public let bus: DBusBus
    public let clock: any SessionClock
    public let policy: StrapPolicy
    let monotonicNs: @Sendable () -> UInt64
    let logger: Logger
    private let session = Locked<StrapSession?>(nil)

    public init(
        spec: StrapSpec,
        adapter: String? = nil,
        bus: DBusBus = .system,
        clock: any SessionClock = SystemSessionClock(),
        policy: StrapPolicy = StrapPolicy(),
        monotonicNs: @escaping @Sendable () -> UInt64 = BLEHeartRateProvider.systemMonotonicNs,
        logger: Logger = Logger(label: "hr-gateway.ble")
    ) {
        self.spec = spec
        self.adapter = adapter
        self.bus = bus
        self.clock = clock
        self.policy = policy
        self.monotonicNs = monotonicNs
        self.logger = logger
    }

    /// CLOCK_MONOTONIC in nanoseconds.
    public static let systemMonotonicNs: @Sendable () -> UInt64 = {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    public var isAvailable: Bool {
        get async {
            guard let c = try? await DBusConnection.connect(to: bus, logger: logger) else { return false }
            defer { c.close() }
            return (try? await c.nameOwner(of: BlueZName.service)) != nil
        }
    }

    /// Connects to the bus, checks bluetoothd and the adapter, and starts looking for the strap. Returns without
    /// waiting for the strap (its progress arrives as `SensorStatus`). Throws `BLEHeartRateError`.
    public func startStreaming(into sink: ProviderSink) async throws {
        let s = try await StrapSession.open(provider: self, sink: sink)
        let old = session.withLock { current -> StrapSession? in
            defer { current = s }
            return current
        }
        if let old { await old.stop() }
        s.run()
    }

    /// Stops: Disconnects the strap (never leaves it connected), stops discovery, closes the connection.
    public func stopStreaming() async {
        let s = session.withLock { current -> StrapSession? in
            defer { current = nil }
            return current
        }
        await s?.stop()
    }

    /// Body sensor location, battery and Device Information, once read.
    public var details: StrapDetails { session.withLock { $0?.details.withLock { $0 } } ?? StrapDetails() }

    /// The state machine's phase (for tests and status lines).
    public var phase: StrapStateMachine.Phase { session.withLock { $0?.machine.withLock { $0.phase } } ?? .idle }
}

/// One run of a provider: a D-Bus connection, the mirror, the machine and its event loop.
final class StrapSession: Sendable {
    let connection: DBusConnection
    let adapterPath: String
    let spec: StrapSpec
    let clock: any SessionClock
    let monotonicNs: @Sendable () -> UInt64
    let logger: Logger
    let sink: ProviderSink
    let mirror: Locked<BlueZMirror>
    let machine: Locked<StrapStateMachine>
    let details = Locked(StrapDetails())
    private let events: AsyncStream<StrapEvent>.Continuation
    private let stream: AsyncStream<StrapEvent>
    private let timers = Locked<[StrapTimer: any ScheduledAction]>([:])
    private let discovering = Locked(false)
    private let tasks = Locked<[Task<Void, Never>]>([])
    private let loop = Locked<Task<Void, Never>?>(nil)
    private let signals: DBusSubscription<DBusMessage>
    private let owners: DBusSubscription<DBusNameOwnerChange>

    private init(
        provider: BLEHeartRateProvider, sink: ProviderSink, connection: DBusConnection, adapterPath: String,
        mirror: BlueZMirror, signals: DBusSubscription<DBusMessage>, owners: DBusSubscription<DBusNameOwnerChange>
    ) {
        self.connection = connection
        self.adapterPath = adapterPath
        self.spec = provider.spec
        self.clock = provider.clock
        self.monotonicNs = provider.monotonicNs
        self.logger = provider.logger
        self.sink = sink
        self.mirror = Locked(mirror)
        self.machine = Locked(StrapStateMachine(spec: provider.spec, policy: provider.policy))
        self.signals = signals
        self.owners = owners
        (stream, events) = AsyncStream<StrapEvent>.makeStream(bufferingPolicy: .unbounded)
    }

    static func open(provider: BLEHeartRateProvider, sink: ProviderSink) async throws(BLEHeartRateError) -> StrapSession {
        let connection: DBusConnection
        do { connection = try await DBusConnection.connect(to: provider.bus, logger: provider.logger) } catch {
            throw .busUnavailable("\(error)")
        }
        do {
            // Match rules before reading state (ble.md §3.1), so nothing falls between the two.
            let signals = try await connection.messages(matching: DBusMatchRule(sender: BlueZName.service))
            let owners = try await connection.nameOwnerChanges(of: BlueZName.service)
            guard try await connection.nameOwner(of: BlueZName.service) != nil else { throw BLEHeartRateError.noBluetoothd }
            var mirror = BlueZMirror()
            mirror.reset(try await connection.managedObjects(destination: BlueZName.service, timeout: .seconds(10)))
            let adapterPath = try chooseAdapter(provider.adapter, in: mirror)
            return StrapSession(
                provider: provider, sink: sink, connection: connection, adapterPath: adapterPath, mirror: mirror,
                signals: signals, owners: owners)
        } catch let e as BLEHeartRateError {
            connection.close()
            throw e
        } catch {
            connection.close()
            throw BLEHeartRateError.from(error)
        }
    }

    static func chooseAdapter(_ name: String?, in mirror: BlueZMirror) throws(BLEHeartRateError) -> String {
        let adapters = mirror.adapters
        if let name {
            guard let a = adapters.first(where: { $0.name == name }) else {
                throw .adapterNotFound(name, available: adapters.map(\.name))
            }
            guard a.powered else { throw .adapterOff(a.name) }
            return a.path
        }
        if let a = adapters.first(where: \.powered) { return a.path }
        if let a = adapters.first { throw .adapterOff(a.name) }
        throw .noAdapter
    }

    // MARK: Running

    func run() {
        let signalTask = Task { [signals] in
            for await message in signals {
                guard let change = mirror.withLock({ $0.apply(message) }) else { continue }
                translate(change)
            }
        }
        let ownerTask = Task { [owners] in
            for await change in owners {
                if change.newOwner == nil {
                    mirror.withLock { $0.clear() }
                    discovering.withLock { $0 = false }
                    events.yield(.bluezVanished)
                } else {
                    if let objects = try? await connection.managedObjects(destination: BlueZName.service) {
                        mirror.withLock { $0.reset(objects) }
                    }
                    events.yield(.bluezAppeared)
                }
            }
        }
        tasks.withLock { $0 += [signalTask, ownerTask] }
        loop.withLock {
            $0 = Task {
                for await event in stream {
                    let actions = machine.withLock { $0.handle(event) }
                    await perform(actions)
                    if machine.withLock({ $0.phase }) == .stopped { break }
                }
            }
        }
        events.yield(.start)
    }

    func stop() async {
        events.yield(.stop)
        let l = loop.withLock { $0 }
        await l?.value
        events.finish()
        for t in tasks.withLock({ $0 }) { t.cancel() }
        for t in timers.withLock({ Array($0.values) }) { t.cancel() }
        connection.close()
    }

    /// Turns mirror changes into machine events for this strap.
    private func translate(_ change: BlueZChange) {
        let ours = machine.withLock { $0.device?.path }
        switch change {
        case let .interfacesAdded(path, interfaces):
            if interfaces.contains(BlueZName.device), let d = candidate(path) { events.yield(.deviceSeen(d)) }
        case let .interfacesRemoved(path, interfaces):
            if interfaces.contains(BlueZName.device) { events.yield(.deviceRemoved(path: path)) }
        case let .propertiesChanged(path, interface, changed):
            switch interface {
            case BlueZName.characteristic:
                if let bytes = changed["Value"]?.bytes {
                    events.yield(.notification(charPath: path, bytes: bytes, monotonicNs: monotonicNs(), wallMs: clock.nowMs()))
                }
            case BlueZName.device:
                if path == ours {
                    if let c = changed["Connected"]?.bool { events.yield(.connectedChanged(path: path, c)) }
                    if let r = changed["ServicesResolved"]?.bool { events.yield(.servicesResolvedChanged(path: path, r)) }
                }
                let advert = ["RSSI", "Name", "Alias", "UUIDs", "ManufacturerData"].contains { changed[$0] != nil }
                if advert, let d = candidate(path) { events.yield(.deviceSeen(d)) }
            case BlueZName.battery:
                if path == ours, let p = changed["Percentage"]?.byte { events.yield(.battery(percent: Int(p))) }
            default:
                break
            }
        }
    }

    /// The device at `path` if it is on our adapter and matches the spec.
    private func candidate(_ path: String) -> StrapDevice? {
        mirror.withLock { m -> StrapDevice? in
            guard path.hasPrefix(adapterPath + "/"), let d = m.device(at: path),
                spec.matches(address: d.address, name: d.name, uuids: m.uuids(of: path))
            else { return nil }
            return d
        }
    }

    // MARK: Actions

    /// Runs timers and I/O first, then reports statuses and samples, so that whoever reacts to a status finds the
    /// timers it implies already scheduled.
    private func perform(_ actions: [StrapAction]) async {
        for action in actions {
            switch action {
            case .status, .sample, .malformed: continue
            case let .schedule(timer, afterMs, token):
                let deadline = clock.nowMs() + afterMs
                let handle = clock.schedule(atMs: deadline) { [events] in events.yield(.timer(timer, token: token)) }
                timers.withLock { $0.updateValue(handle, forKey: timer) }?.cancel()
            case .cancel(let timer):
                timers.withLock { $0.removeValue(forKey: timer) }?.cancel()
            case .startDiscovery:
                spawn { await self.startDiscovery() }
            case .stopDiscovery:
                await stopDiscovery()
            case .connect(let path):
                spawn { await self.connect(path) }
            case .disconnect(let path):
                // Awaited: the link must be down before any retry the same step schedules.
                await disconnect(path)
            case .lookUpHeartRateCharacteristic(let devicePath):
                let path = mirror.withLock { $0.characteristic(GATTUUID.heartRateMeasurement, under: devicePath) }
                events.yield(.heartRateCharacteristic(path: path))
            case .startNotify(let path):
                spawn { await self.startNotify(path) }
            case .readDetails(let devicePath):
                spawn { await self.readDetails(devicePath) }
            }
        }
        for action in actions {
            switch action {
            case .status(let s): sink.status(s)
            case .sample(let s): sink.send(s)
            case .malformed(let e): logger.warning("dropped a Heart Rate Measurement: \(e)")
            default: continue
            }
        }
    }

    private func spawn(_ body: @escaping @Sendable () async -> Void) {
        let t = Task { await body() }
        tasks.withLock { $0.append(t) }
    }

    private func call(_ path: String, _ interface: String, _ member: String, _ args: [DBusValue] = [],
                      timeout: Duration = .seconds(10)) async throws -> [DBusValue] {
        try await connection.call(
            destination: BlueZName.service, path: DBusObjectPath(path), interface: interface, member: member,
            arguments: args, timeout: timeout)
    }

    private static func failure(_ error: any Error) -> StrapBusFailure {
        if let e = error as? DBusError { return StrapBusFailure(errorName: e.name, message: e.message) }
        return .other(name: "error", message: "\(error)")
    }

    private func startDiscovery() async {
        let already = discovering.withLock { d -> Bool in
            defer { d = true }
            return d
        }
        if !already {
            do {
                // No UUID filter: straps recognised by name may not advertise 0x180D (ble.md §3.2 step 6).
                let filter = DBusValue.properties(["Transport": .string("le"), "DuplicateData": .boolean(false)])
                _ = try await call(adapterPath, BlueZName.adapter, "SetDiscoveryFilter", [filter])
                _ = try await call(adapterPath, BlueZName.adapter, "StartDiscovery")
            } catch {
                let f = Self.failure(error)
                if f != .inProgress {
                    discovering.withLock { $0 = false }
                    logger.warning("StartDiscovery on \(adapterPath): \(error)")
                }
            }
        }
        // Devices BlueZ already knows (cached, connected, or found by someone else's discovery).
        let known = mirror.withLock { m in
            m.devices(under: adapterPath).filter { spec.matches(address: $0.address, name: $0.name, uuids: m.uuids(of: $0.path)) }
        }
        if let d = known.first(where: \.connected) ?? known.first { events.yield(.deviceSeen(d)) }
    }

    private func stopDiscovery() async {
        guard discovering.withLock({ d -> Bool in defer { d = false }; return d }) else { return }
        _ = try? await call(adapterPath, BlueZName.adapter, "StopDiscovery", timeout: .seconds(3))
        _ = try? await call(adapterPath, BlueZName.adapter, "SetDiscoveryFilter", [.properties([:])], timeout: .seconds(3))
    }

    private func connect(_ path: String) async {
        let timeout = Duration.milliseconds(machine.withLock { $0.policy.connectTimeoutMs } + 5_000)
        do {
            _ = try await call(path, BlueZName.device, "Connect", timeout: timeout)
            events.yield(.connectReturned(nil))
        } catch {
            logger.info("Connect \(path): \(error)")
            events.yield(.connectReturned(Self.failure(error)))
        }
    }

    private func disconnect(_ path: String) async {
        _ = try? await call(path, BlueZName.device, "Disconnect", timeout: .seconds(5))
    }

    private func startNotify(_ path: String) async {
        do {
            _ = try await call(path, BlueZName.characteristic, "StartNotify")
            events.yield(.startNotifyReturned(nil))
        } catch {
            events.yield(.startNotifyReturned(Self.failure(error)))
        }
    }

    private func readValue(_ path: String) async -> [UInt8]? {
        for _ in 0..<3 {
            do {
                return try await call(path, BlueZName.characteristic, "ReadValue", [.properties([:])]).first?.bytes
            } catch let e as DBusError where e.name == "org.bluez.Error.InProgress" {
                continue   // BlueZ busy: retry (bleak does the same)
            } catch {
                return nil
            }
        }
        return nil
    }

    private func readDetails(_ devicePath: String) async {
        let (device, battery1, chars) = mirror.withLock { m in
            (m.device(at: devicePath), m.batteryPercent(of: devicePath),
             [GATTUUID.bodySensorLocation, GATTUUID.batteryLevel, GATTUUID.manufacturerName, GATTUUID.modelNumber,
              GATTUUID.serialNumber, GATTUUID.hardwareRevision, GATTUUID.firmwareRevision, GATTUUID.softwareRevision]
                .compactMap { uuid in m.characteristic(uuid, under: devicePath).map { (uuid, $0) } })
        }
        var info = StrapDetails()
        info.address = device?.address
        info.name = device?.name
        info.batteryPercent = battery1
        for (uuid, path) in chars {
            if uuid == GATTUUID.batteryLevel, battery1 != nil { continue }
            guard let bytes = await readValue(path) else { continue }
            switch uuid {
            case GATTUUID.bodySensorLocation: info.bodySensorLocation = BodySensorLocation(bytes: bytes)
            case GATTUUID.batteryLevel: info.batteryPercent = bytes.first.map(Int.init)
            default: info.deviceInformation[uuid] = String(decoding: bytes, as: UTF8.self)
            }
        }
        details.withLock { $0 = info }
        if let p = info.batteryPercent { events.yield(.battery(percent: p)) }
    }
}
