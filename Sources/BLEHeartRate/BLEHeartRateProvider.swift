import BlueZ
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

/// Straps already taken by providers of one process, so that several `auto` providers follow different straps.
public final class StrapClaims: Sendable {
    private let owners = Locked<[String: ObjectIdentifier]>([:])

    public init() {}

    /// Takes `address` for `owner`; false if another owner has it.
    func claim(_ address: String, by owner: ObjectIdentifier) -> Bool {
        owners.withLock { o in
            if let current = o[address], current != owner { return false }
            o[address] = owner
            return true
        }
    }

    func release(all owner: ObjectIdentifier) { owners.withLock { $0 = $0.filter { $0.value != owner } } }

    /// Addresses currently taken.
    public var claimed: Set<String> { owners.withLock { Set($0.keys) } }
}

/// A heart-rate strap through BlueZ (source `ble_hrm`, device id = the strap's address).
///
/// Uses its own D-Bus connection (so BlueZ's notify session belongs to this strap alone), mirrors `/org/bluez`, and
/// runs `StrapStateMachine`: discovery, Connect with retries (le-connection-abort-by-local, InProgress,
/// UnknownObject), ServicesResolved raced against Connected=false and removal, 2A37 lookup by UUID, StartNotify once
/// per connection lifetime, an explicit `stale` status when notifications stop (and a Disconnect and reconnect when
/// they stay away: `StrapPolicy.staleReconnectAfterMs`), its own reconnect loop with backoff, bluetoothd restarts,
/// and Disconnect on stop. Timers run on the injected `SessionClock`.
public final class BLEHeartRateProvider: BiosignalProvider {
    public let name = BLEHeartRate.source
    public let spec: StrapSpec
    /// `hciN`, or nil for the first powered adapter with the central role.
    public let adapter: String?
    public let bus: DBusBus
    public let clock: any SessionClock
    public let policy: StrapPolicy
    /// Shared between the providers of one process: an `auto` provider skips straps another one follows.
    public let claims: StrapClaims?
    /// Raw streams to start on a Polar strap's Measurement Data service (`--ecg`); nil: heart rate only.
    public let polar: PolarStreams?
    let monotonicNs: @Sendable () -> UInt64
    let logger: Logger
    private let session = Locked<StrapSession?>(nil)

    public init(
        spec: StrapSpec,
        adapter: String? = nil,
        bus: DBusBus = .system,
        clock: any SessionClock = SystemSessionClock(),
        policy: StrapPolicy = StrapPolicy(),
        claims: StrapClaims? = nil,
        polar: PolarStreams? = nil,
        monotonicNs: @escaping @Sendable () -> UInt64 = BLEHeartRateProvider.systemMonotonicNs,
        logger: Logger = Logger(label: "hr-gateway.ble")
    ) {
        self.polar = polar
        self.spec = spec
        self.adapter = adapter
        self.bus = bus
        self.clock = clock
        self.policy = policy
        self.claims = claims
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
            return (try? await c.nameOwner(of: BlueZ.busName)) != nil
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

    /// Polar Measurement Data figures of the current run: ECG samples and frames delivered, frames dropped as
    /// malformed or out of order, gaps and sensor clock resets found; nil without `polar`.
    public var polarCounts: (samples: Int, frames: Int, dropped: Int, gaps: Int, resets: Int)? {
        session.withLock { $0?.pmd?.counts }
    }

    /// Body sensor location, battery and Device Information, once read.
    public var details: StrapDetails { session.withLock { $0?.details.withLock { $0 } } ?? StrapDetails() }

    /// The state machine's phase (for tests and status lines).
    public var phase: StrapStateMachine.Phase { session.withLock { $0?.machine.withLock { $0.phase } } ?? .idle }

    /// Flow figures of the current run: advertisements dropped by the strap's full event queue, the most events
    /// that ever waited in it, and changes the BlueZ mirror could not deliver to a stream observer. Notifications
    /// are never dropped: a full queue stops reading the D-Bus socket instead.
    public var flow: StrapFlow {
        session.withLock { s in
            s.map {
                StrapFlow(droppedEvents: $0.events.dropped, queueHighWater: $0.events.highWater, queueDepth: $0.events.depth)
            } ?? StrapFlow()
        }
    }
}

/// See `BLEHeartRateProvider.flow`.
public struct StrapFlow: Sendable, Equatable {
    public var droppedEvents = 0
    public var queueHighWater = 0
    /// Events waiting now.
    public var queueDepth = 0

    public init(droppedEvents: Int = 0, queueHighWater: Int = 0, queueDepth: Int = 0) {
        self.droppedEvents = droppedEvents
        self.queueHighWater = queueHighWater
        self.queueDepth = queueDepth
    }
}

extension StrapSpec {
    /// What discovery is narrowed to (ble.md §3.2). A strap by address: BlueZ's `Pattern` (address prefix), and no
    /// UUID, because within one client's filter BlueZ requires both and a strap may advertise without 0x180D.
    /// By name or `auto`: LE only. A UUID filter of 0x180D would hide the straps that advertise only their name
    /// (Polar H9, TICKR; `StrapRecognizer.knownNamePrefixes`), BlueZ filters cannot say "0x180D or a name", and
    /// `Pattern` compares names case-sensitively where `--strap name:` does not.
    var discoveryFilter: (uuids: [String], pattern: String?) {
        switch self {
        case .address(let a): ([], a.uppercased())
        case .name, .auto: ([], nil)
        }
    }
}

/// One run of a provider: a D-Bus connection, the BlueZ mirror, the machine and its event loop.
///
/// One hop from the bus to the machine: BlueZ signals are applied to the mirror and translated into machine events
/// where the connection dispatches them, and go into the session's one bounded queue (`StrapEventQueue`), which
/// the loop task reads. A notification carries the instant its message was read from the socket.
final class StrapSession: Sendable {
    let connection: DBusConnection
    /// Dropped (not closed) on stop: see `stop()`.
    private let client: Locked<BlueZClient?>
    let adapterPath: DBusObjectPath
    let spec: StrapSpec
    let clock: any SessionClock
    let monotonicNs: @Sendable () -> UInt64
    let logger: Logger
    let sink: ProviderSink
    let claims: StrapClaims?
    let machine: Locked<StrapStateMachine>
    let details = Locked(StrapDetails())
    /// Polar Measurement Data (ECG), when asked for.
    let pmd: PolarPMDLink?
    let events: StrapEventQueue
    private let observation = Locked<BlueZObservation?>(nil)
    private let timers = Locked<[StrapTimer: ArmedTimer]>([:])
    /// Identifies each clock timer set, so that one replaced meanwhile does nothing when it fires.
    private let timerGeneration = Locked<UInt64>(0)
    private let discovering = Locked(false)
    /// The last discovery start or restart: the next one runs after it, so that a restart's stop never overtakes
    /// the start it restarts.
    private let lastDiscoveryStep = Locked<Task<Void, Never>?>(nil)
    private let connectGeneration = Locked<UInt64>(0)
    private let myClaim = Locked<String?>(nil)
    private let tasks = Locked<[Task<Void, Never>]>([])
    private let loop = Locked<Task<Void, Never>?>(nil)

    private init(provider: BLEHeartRateProvider, sink: ProviderSink, connection: DBusConnection, bluez: BlueZClient,
                 adapterPath: DBusObjectPath) {
        self.connection = connection
        self.client = Locked(bluez)
        self.adapterPath = adapterPath
        self.spec = provider.spec
        self.clock = provider.clock
        self.monotonicNs = provider.monotonicNs
        self.logger = provider.logger
        self.sink = sink
        self.claims = provider.claims
        self.machine = Locked(StrapStateMachine(spec: provider.spec, policy: provider.policy))
        self.pmd = provider.polar.map { PolarPMDLink(streams: $0, sink: sink, logger: provider.logger, clock: provider.clock) }
        self.events = StrapEventQueue(
            onFull: { [logger = provider.logger] in
                logger.warning("strap event queue full; holding the D-Bus connection back until it drains")
                connection.pauseReading()
            },
            onDrained: { connection.resumeReading() })
    }

    static func open(provider: BLEHeartRateProvider, sink: ProviderSink) async throws(BLEHeartRateError) -> StrapSession {
        let (connection, bluez, adapter) = try await connectToBlueZ(
            bus: provider.bus, adapter: provider.adapter, logger: provider.logger)
        return StrapSession(provider: provider, sink: sink, connection: connection, bluez: bluez, adapterPath: adapter)
    }

    /// A connection to the system bus, bluetoothd's objects mirrored over it, and the adapter to use: what a strap
    /// session and pairing (`StrapPairing`) start from. On failure nothing stays open.
    static func connectToBlueZ(bus: DBusBus, adapter: String?, logger: Logger) async throws(BLEHeartRateError)
        -> (DBusConnection, BlueZClient, DBusObjectPath)
    {
        let connection: DBusConnection
        do { connection = try await DBusConnection.connect(to: bus, logger: logger) } catch {
            throw .systemBusUnreachable(error)
        }
        do {
            let bluez = try await BlueZClient.start(on: connection, logger: logger)
            do {
                guard bluez.bluetoothdRunning else { throw BLEHeartRateError.noBluetoothd }
                return (connection, bluez, try chooseAdapter(adapter, in: bluez.tree))
            } catch {
                bluez.close()
                throw error
            }
        } catch let e as BLEHeartRateError {
            connection.close()
            throw e
        } catch {
            connection.close()
            throw BLEHeartRateError.from(error)
        }
    }

    /// The named adapter, or the first powered one with the central role; errors say which exist and what to do.
    static func chooseAdapter(_ name: String?, in tree: BlueZObjectTree) throws(BLEHeartRateError) -> DBusObjectPath {
        let adapters = tree.adapters.filter { $0.roles?.contains("central") ?? true }
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

    private var bluez: BlueZClient? { client.withLock { $0 } }

    /// The mirror (empty once stopped).
    private var tree: BlueZObjectTree { bluez?.tree ?? BlueZObjectTree() }

    // MARK: Running

    func run() {
        // The handler runs on the connection's queue as each signal is dispatched (see `BlueZClient.observe(_:)`).
        guard let (_, observing) = client.withLock({ $0?.observe({ [weak self] change, receivedAt in
            self?.translate(change, receivedAt: receivedAt)
        }) }) else { return }
        observation.withLock { $0 = observing }
        loop.withLock {
            $0 = Task {
                while let event = await events.next() {
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
        observation.withLock { $0 }?.cancel()
        for t in tasks.withLock({ $0 }) { t.cancel() }
        for t in timers.withLock({ Array($0.values) }) { t.handle.cancel() }
        let bluez = client.withLock { c -> BlueZClient? in
            defer { c = nil }
            return c
        }
        bluez?.close()
        connection.close()
        claims?.release(all: ObjectIdentifier(self))
    }

    /// `now` on `monotonicNs` and the wall clock, moved back to `instant` (when the signal was read).
    private func stamps(at instant: ContinuousClock.Instant) -> (monotonicNs: UInt64, wallMs: Int64) {
        let age = max(.zero, ContinuousClock.now - instant)
        let (seconds, attoseconds) = age.components
        let ageNs = UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
        let mono = monotonicNs()
        return (mono > ageNs ? mono - ageNs : 0, clock.nowMs() - Int64(ageNs / 1_000_000))
    }

    /// Turns mirror changes into machine events for this strap. Runs on the D-Bus connection's queue.
    private func translate(_ change: BlueZChange, receivedAt: ContinuousClock.Instant) {
        let ours = machine.withLock { $0.device?.path }
        switch change {
        case let .interfacesAdded(path, interfaces):
            if interfaces.contains(BlueZ.deviceInterface), let d = candidate(path) { events.yield(.deviceSeen(d)) }
        case let .interfacesRemoved(path, interfaces):
            if interfaces.contains(BlueZ.deviceInterface) { events.yield(.deviceRemoved(path: path.rawValue)) }
        case let .propertiesChanged(path, interface, changed, _):
            switch interface {
            case BlueZ.gattCharacteristicInterface:
                if let bytes = changed["Value"]?.bytes, let pmd, pmd.handles(path.rawValue) {
                    let (mono, wall) = stamps(at: receivedAt)
                    let address = machine.withLock { $0.device?.address } ?? ""
                    pmd.receive(path: path.rawValue, bytes: bytes, monotonicNs: mono, wallMs: wall, address: address)
                } else if let bytes = changed["Value"]?.bytes {
                    let (mono, wall) = stamps(at: receivedAt)
                    let event = StrapEvent.notification(
                        charPath: path.rawValue, bytes: bytes, monotonicNs: mono, wallMs: wall)
                    // With nothing ahead of it, a notification is handled here, on the D-Bus thread, sparing it the
                    // hop to the machine's task; its actions (sample, status, timers) are all synchronous.
                    let inline = events.handleInlineIfIdle {
                        performInline(machine.withLock { $0.handle(event) })
                    }
                    if !inline { events.yield(event) }
                }
            case BlueZ.deviceInterface:
                if path.rawValue == ours {
                    if let c = changed["Connected"]?.bool { events.yield(.connectedChanged(path: path.rawValue, c)) }
                    if let r = changed["ServicesResolved"]?.bool {
                        events.yield(.servicesResolvedChanged(path: path.rawValue, r))
                    }
                }
                // An advertisement, or a change the machine keeps track of (the bond).
                let advert = ["RSSI", "Name", "Alias", "UUIDs", "ManufacturerData", "Paired"].contains { changed[$0] != nil }
                if advert, let d = candidate(path) { events.yield(.deviceSeen(d)) }
            case BlueZ.batteryInterface:
                if path.rawValue == ours, let p = changed["Percentage"]?.byte { events.yield(.battery(percent: Int(p))) }
            default:
                break
            }
        case .bluetoothdStopped:
            discovering.withLock { $0 = false }
            events.yield(.bluezVanished)
        case .bluetoothdStarted:
            events.yield(.bluezAppeared)
        }
    }

    static func strapDevice(_ d: BlueZDevice) -> StrapDevice? {
        guard let address = d.address else { return nil }
        return StrapDevice(path: d.path.rawValue, address: address.uppercased(), name: d.name ?? d.alias,
                           connected: d.connected, servicesResolved: d.servicesResolved, paired: d.paired)
    }

    /// The device at `path` if it is on our adapter, matches the spec and is not another provider's.
    private func candidate(_ path: DBusObjectPath) -> StrapDevice? {
        guard let d = tree.device(path), d.adapter == adapterPath || path.isEqualOrDescendant(of: adapterPath),
            let s = Self.strapDevice(d), spec.matches(address: s.address, name: s.name, uuids: d.uuids)
        else { return nil }
        return claim(s) ? s : nil
    }

    /// With shared claims, takes the strap for this session; a session that already took one takes no other.
    private func claim(_ s: StrapDevice) -> Bool {
        guard let claims else { return true }
        return myClaim.withLock { mine in
            if let mine { return mine == s.address }   // one strap per session, kept across reconnects
            guard claims.claim(s.address, by: ObjectIdentifier(self)) else { return false }
            mine = s.address
            return true
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
                arm(timer, afterMs: afterMs, token: token)
            case .cancel(let timer):
                disarm(timer)
            case .startDiscovery:
                discoveryStep { await self.startDiscovery() }
            case .stopDiscovery:
                await stopDiscovery()
            case .restartDiscovery:
                discoveryStep {
                    await self.stopDiscovery()
                    await self.startDiscovery()
                }
            case .connect(let path):
                let generation = connectGeneration.withLock { $0 }
                spawn { await self.connect(DBusObjectPath(path), generation: generation) }
            case .disconnect(let path):
                // Awaited: the link must be down before any retry the same step schedules. A Connect it cancels
                // answers late; that answer belongs to no attempt and is dropped.
                connectGeneration.withLock { $0 += 1 }
                _ = try? await bluez?.disconnect(DBusObjectPath(path), timeout: .seconds(5))
            case .removeDevice(let path):
                _ = try? await bluez?.removeDevice(DBusObjectPath(path), from: adapterPath, timeout: .seconds(5))
            case .lookUpHeartRateCharacteristic(let devicePath):
                let c = tree.characteristic(
                    BlueZ.heartRateMeasurement, inService: BlueZ.heartRateService, of: DBusObjectPath(devicePath))
                events.yield(.heartRateCharacteristic(path: c?.path.rawValue))
            case .startNotify(let path):
                spawn { await self.startNotify(DBusObjectPath(path)) }
            case .readDetails(let devicePath):
                spawn { await self.readDetails(DBusObjectPath(devicePath)) }
            }
        }
        report(actions)
    }

    /// `perform` for what a notification yields, on the caller's thread: timers, statuses, samples and drops are
    /// synchronous. Anything else (no notification yields it today) goes to a task, after the rest.
    private func performInline(_ actions: [StrapAction]) {
        var later: [StrapAction] = []
        for action in actions {
            switch action {
            case let .schedule(timer, afterMs, token):
                arm(timer, afterMs: afterMs, token: token)
            case .cancel(let timer):
                disarm(timer)
            case .status, .sample, .malformed:
                continue
            default:
                later.append(action)
            }
        }
        report(actions)
        if !later.isEmpty {
            let pending = later
            spawn { await self.perform(pending) }
        }
    }

    /// A timer the machine asked for: when it is due and with which token, and the clock timer set for it, which may
    /// fire earlier than `deadlineMs` (the deadline moved later since).
    private struct ArmedTimer: Sendable {
        var deadlineMs: Int64
        var token: UInt64
        var firesAtMs: Int64
        var generation: UInt64
        var handle: any ScheduledAction
    }

    /// Sets `timer`. The stale timer is re-armed by every notification (about once a second, five seconds ahead):
    /// a clock timer already set for no later than the new deadline is kept, and the new deadline and token are
    /// noted; when it fires early it sets itself again for the rest. So a notification costs no timer task, and
    /// the machine still gets the newest token at the newest deadline.
    private func arm(_ timer: StrapTimer, afterMs: Int64, token: UInt64) {
        let deadline = clock.monotonicMs() + afterMs
        let kept = timers.withLock { t -> Bool in
            guard var a = t[timer], a.firesAtMs <= deadline else { return false }
            a.deadlineMs = deadline
            a.token = token
            t[timer] = a
            return true
        }
        if !kept { setClockTimer(timer, at: deadline, token: token) }
    }

    /// Sets a clock timer for `timer` at `deadline`. `continuing`: the generation of the clock timer that fired early;
    /// the record then keeps any later deadline a notification noted meanwhile, and a record replaced meanwhile wins.
    private func setClockTimer(_ timer: StrapTimer, at deadline: Int64, token: UInt64, continuing: UInt64? = nil) {
        let generation = timerGeneration.withLock { g -> UInt64 in
            g += 1
            return g
        }
        let handle = clock.schedule(atMonotonicMs: deadline) { [weak self] in self?.clockTimerFired(timer, generation) }
        let superseded = timers.withLock { t -> (any ScheduledAction)? in
            var record = ArmedTimer(deadlineMs: deadline, token: token, firesAtMs: deadline, generation: generation,
                                    handle: handle)
            if let continuing {
                guard let current = t[timer], current.generation == continuing else { return handle }   // replaced
                if current.deadlineMs > deadline {
                    record.deadlineMs = current.deadlineMs
                    record.token = current.token
                }
            }
            return t.updateValue(record, forKey: timer)?.handle
        }
        superseded?.cancel()
    }

    private func clockTimerFired(_ timer: StrapTimer, _ generation: UInt64) {
        enum Next { case nothing, deliver(UInt64), again(Int64, UInt64) }
        let now = clock.monotonicMs()
        let next = timers.withLock { t -> Next in
            guard let a = t[timer], a.generation == generation else { return .nothing }   // replaced or cancelled
            if a.deadlineMs > now { return .again(a.deadlineMs, a.token) }
            t.removeValue(forKey: timer)
            return .deliver(a.token)
        }
        switch next {
        case .nothing: return
        case .deliver(let token): events.yield(.timer(timer, token: token))
        case let .again(deadline, token): setClockTimer(timer, at: deadline, token: token, continuing: generation)
        }
    }

    private func disarm(_ timer: StrapTimer) { timers.withLock { $0.removeValue(forKey: timer) }?.handle.cancel() }

    /// Statuses, samples and dropped measurements, in the machine's order.
    private func report(_ actions: [StrapAction]) {
        for action in actions {
            switch action {
            case .status(let s):
                sink.status(s)
                if let pmd { follow(s, pmd) }
            case .sample(let s): sink.send(s)
            case .malformed(let e): logger.warning("dropped a Heart Rate Measurement: \(e)")
            default: continue
            }
        }
    }

    /// Starts Polar streams once the strap streams heart rate; forgets them when the link goes.
    private func follow(_ status: SensorStatus, _ pmd: PolarPMDLink) {
        switch status.state {
        case .streaming:
            guard let (path, address) = machine.withLock({ m in m.device.map { ($0.path, $0.address) } }),
                let bluez
            else { return }
            let adapter = adapterPath
            spawn { await pmd.start(device: DBusObjectPath(path), address: address, adapter: adapter, bluez: bluez) }
        case .reconnecting, .disconnected, .searching, .connecting, .error:
            pmd.linkLost()
        default:
            break
        }
    }

    private func spawn(_ body: @escaping @Sendable () async -> Void) {
        let t = Task { await body() }
        tasks.withLock { $0.append(t) }
    }

    /// Spawns `body` to run after the previous discovery step has finished.
    private func discoveryStep(_ body: @escaping @Sendable () async -> Void) {
        let t = lastDiscoveryStep.withLock { last -> Task<Void, Never> in
            let previous = last
            let t = Task {
                await previous?.value
                await body()
            }
            last = t
            return t
        }
        tasks.withLock { $0.append(t) }
    }

    private static func failure(_ error: any Error) -> StrapBusFailure {
        if let e = error as? BlueZError { return StrapBusFailure(errorName: e.name, message: e.message) }
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
                let filter = spec.discoveryFilter
                try await bluez?.setDiscoveryFilter(on: adapterPath, uuids: filter.uuids, pattern: filter.pattern)
                try await bluez?.startDiscovery(on: adapterPath)
            } catch {
                if Self.failure(error) != .inProgress {
                    discovering.withLock { $0 = false }
                    logger.warning("StartDiscovery on \(adapterPath): \(error)")
                }
            }
        }
        // Devices BlueZ already knows (cached, connected, or found by someone else's discovery).
        let known = tree.devices(of: adapterPath).compactMap { d -> StrapDevice? in
            guard let s = Self.strapDevice(d), spec.matches(address: s.address, name: s.name, uuids: d.uuids) else {
                return nil
            }
            return s
        }
        let ordered = known.filter(\.connected) + known.filter { !$0.connected }
        if let d = ordered.first(where: claim) { events.yield(.deviceSeen(d)) }
    }

    private func stopDiscovery() async {
        guard discovering.withLock({ d -> Bool in defer { d = false }; return d }) else { return }
        try? await bluez?.stopDiscovery(on: adapterPath, timeout: .seconds(3))
        try? await bluez?.clearDiscoveryFilter(on: adapterPath, timeout: .seconds(3))
    }

    private func connect(_ path: DBusObjectPath, generation: UInt64) async {
        let timeout = Duration.milliseconds(machine.withLock { $0.policy.connectTimeoutMs } + 5_000)
        var result: StrapBusFailure?
        do {
            guard let bluez else { throw BLEHeartRateError.busUnavailable("session stopped") }
            try await bluez.connect(path, timeout: timeout)
        } catch {
            logger.info("Connect \(path): \(error)")
            result = Self.failure(error)
        }
        guard connectGeneration.withLock({ $0 }) == generation else { return }
        events.yield(.connectReturned(result))
    }

    private func startNotify(_ path: DBusObjectPath) async {
        do {
            guard let bluez else { throw BLEHeartRateError.busUnavailable("session stopped") }
            try await bluez.startNotify(path)   // InProgress ("still arming") counts as success
            events.yield(.startNotifyReturned(nil))
        } catch {
            events.yield(.startNotifyReturned(Self.failure(error)))
        }
    }

    private func readValue(_ path: DBusObjectPath) async -> [UInt8]? {
        for _ in 0..<3 {
            do {
                guard let bluez else { return nil }
                return try await bluez.readValue(path)
            } catch let e as BlueZError where e.kind == .inProgress {
                continue   // BlueZ busy: retry (bleak does the same)
            } catch {
                return nil
            }
        }
        return nil
    }

    private func readDetails(_ devicePath: DBusObjectPath) async {
        let device = tree.device(devicePath)
        var info = StrapDetails()
        info.address = device?.address?.uppercased()
        info.name = device?.name ?? device?.alias
        info.batteryPercent = device?.batteryPercentage.map(Int.init)
        let wanted: [(UInt16, UInt16)] = [
            (GATTUUID.heartRateService, GATTUUID.bodySensorLocation), (GATTUUID.batteryService, GATTUUID.batteryLevel),
            (GATTUUID.deviceInformation, GATTUUID.manufacturerName), (GATTUUID.deviceInformation, GATTUUID.modelNumber),
            (GATTUUID.deviceInformation, GATTUUID.serialNumber), (GATTUUID.deviceInformation, GATTUUID.hardwareRevision),
            (GATTUUID.deviceInformation, GATTUUID.firmwareRevision), (GATTUUID.deviceInformation, GATTUUID.softwareRevision),
        ]
        for (service, uuid) in wanted {
            if uuid == GATTUUID.batteryLevel, info.batteryPercent != nil { continue }   // Battery1 first
            guard let c = tree.characteristic(GATTUUID.full(uuid), inService: GATTUUID.full(service), of: devicePath),
                let bytes = await readValue(c.path)
            else { continue }
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
