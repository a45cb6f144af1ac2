import DBus
import Logging
import Synchronization

/// One GATT notification: a `PropertiesChanged` of `Value` on a characteristic.
public struct BlueZNotification: Sendable, Hashable {
    public var characteristic: DBusObjectPath
    public var value: [UInt8]
    /// When the D-Bus connection decoded the signal (monotonic).
    public var receivedAt: ContinuousClock.Instant

    public init(characteristic: DBusObjectPath, value: [UInt8], receivedAt: ContinuousClock.Instant) {
        self.characteristic = characteristic
        self.value = value
        self.receivedAt = receivedAt
    }
}

/// An `observe(_:)` registration; `cancel()` stops the calls.
public final class BlueZObservation: Sendable {
    private let cancellation: OnceAction

    init(cancel: @escaping @Sendable () -> Void) { cancellation = OnceAction(cancel) }

    public func cancel() { cancellation.run() }
}

/// How `writeValue` writes.
public enum BlueZWriteType: String, Sendable {
    /// Write with response.
    case request
    /// Write without response.
    case command
}

/// A client of `org.bluez`: a live mirror of `/org/bluez` and the calls a heart-rate strap client needs.
///
/// `start(on:logger:)` adds the match rules first, then reads `GetManagedObjects`, then applies
/// `InterfacesAdded`/`InterfacesRemoved`/`PropertiesChanged` in arrival order. Signals are applied where the D-Bus
/// connection dispatches them, with no queue or task in between; `observe(_:)` handlers run there too, so a strap
/// provider sees a notification one hop after it was read from the socket. When bluetoothd leaves the bus the
/// mirror is emptied and observers get `.bluetoothdStopped`; when it returns the mirror is read again (signals that
/// arrive meanwhile are held and applied after it, in order) and observers get `.bluetoothdStarted`.
///
/// ```swift
/// let bus = try await DBusConnection.connect(to: .system, logger: logger)
/// let bluez = try await BlueZClient.start(on: bus, logger: logger)
/// let adapter = try bluez.tree.chooseAdapter(named: nil)
/// let (snapshot, changes) = bluez.observe()
/// try await bluez.setDiscoveryFilter(on: adapter.path)
/// try await bluez.startDiscovery(on: adapter.path)
/// for await change in changes { … }
/// ```
///
/// - Important: Call `close()` when done, or drop the client: either stops the mirror and ends `observe()` streams.
///   The connection stays open and is yours to close.
public final class BlueZClient: Sendable {
    /// The connection the client uses.
    public let connection: DBusConnection
    private let logger: Logger
    private let state: Mutex<State>
    private let droppedCount = Atomic<Int>(0)

    /// How many changes an `observe()` stream holds for a slow reader before it drops (and counts) further ones.
    public static let observerBufferLimit = 1024
    /// How many signals are held while the mirror is being read; more are dropped and counted.
    public static let heldSignalLimit = 4096

    /// Someone told about changes: a stream, or a handler called on the connection's queue.
    private enum Observer: Sendable {
        case stream(AsyncStream<BlueZChange>.Continuation)
        case handler(@Sendable (BlueZChange, ContinuousClock.Instant) -> Void)
    }

    private struct State: ~Copyable {
        var tree = BlueZObjectTree()
        var owner: String?
        var observers: [UInt64: Observer] = [:]
        var nextObserverID: UInt64 = 0
        var registration: DBusHandlerRegistration?
        /// Signals that arrived while the mirror is (re)read; `nil` when not reading.
        var held: [DBusMessage]?
        /// Counts mirror reads, so a read overtaken by another bluetoothd restart is not applied.
        var mirrorGeneration: UInt64 = 0
        var closed = false

        /// The observers to tell. Tell them after releasing the lock: an observer's stream may be cancelled
        /// concurrently, and its termination handler takes this lock.
        var audience: [Observer] { Array(observers.values) }
    }

    private init(connection: DBusConnection, logger: Logger) {
        self.connection = connection
        self.logger = logger
        self.state = Mutex(State())
    }

    /// Mirrors `/org/bluez` over `connection` (the system bus in production). Does not fail when bluetoothd is not
    /// running: the mirror is then empty, `bluetoothdRunning` is false, and it fills when bluetoothd appears.
    ///
    /// - Throws: `BlueZError` (e.g. `.accessDenied`) if the match rules or the initial read fail for another reason.
    public static func start(on connection: DBusConnection, logger: Logger) async throws -> BlueZClient {
        let client = BlueZClient(connection: connection, logger: logger)
        let rules = [
            DBusMatchRule(
                sender: BlueZ.busName, interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesAdded",
                arg0Path: "/org/bluez/"),
            DBusMatchRule(
                sender: BlueZ.busName, interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesRemoved",
                arg0Path: "/org/bluez/"),
            DBusMatchRule(
                sender: BlueZ.busName, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
                pathNamespace: "/org/bluez"),
            DBusMatchRule(
                sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged",
                path: "/org/freedesktop/DBus", arg0: BlueZ.busName),
        ]
        let generation = client.state.withLock { state -> UInt64 in
            state.held = []
            state.mirrorGeneration += 1
            return state.mirrorGeneration
        }
        // The handler holds the client weakly: dropping the client ends the registration (its deinit closes).
        let registration = try await BlueZError.mapping {
            try await connection.receive(anyOf: rules) { [weak client] message in client?.handle(message) }
        }
        client.state.withLock { $0.registration = registration }
        if let owner = try await BlueZError.mapping({ try await connection.nameOwner(of: BlueZ.busName) }) {
            try await client.mirror(owner: owner, generation: generation, initial: true)
        } else {
            // Whether to wait for it is the caller's choice (`bluetoothdRunning`); the strap provider and `scan`
            // say at once that it is missing, so a warning here would promise a wait that does not happen.
            logger.debug("bluetoothd is not running; the mirror fills in when org.bluez appears on the bus")
            await client.finishMirror(owner: nil, tree: BlueZObjectTree(), generation: generation, initial: true)
        }
        return client
    }

    /// Stops mirroring and ends every `observe()` stream; `observe(_:)` handlers are not called any more. Safe from
    /// any thread, also from an observer (a handler or a task reading a stream).
    public func close() {
        let (registration, observers) = state.withLock { state -> (DBusHandlerRegistration?, [UInt64: Observer]) in
            state.closed = true
            let taken = (state.registration, state.observers)
            state.registration = nil
            state.observers = [:]
            state.held = nil
            return taken
        }
        // Outside the lock: finishing a stream runs its termination handler, which takes the lock; and what the
        // observers hold is released here, not under it.
        registration?.cancel()
        for case .stream(let continuation) in observers.values { continuation.finish() }
    }

    /// Tells every observer, outside the lock. Changes are published on the connection's queue, so their order is
    /// kept.
    private func publish(_ change: BlueZChange, at instant: ContinuousClock.Instant, to observers: [Observer]) {
        for observer in observers {
            switch observer {
            case .stream(let continuation):
                if case .dropped = continuation.yield(change) { countDrop("an observe() stream is full") }
            case .handler(let handler):
                handler(change, instant)
            }
        }
    }

    private func countDrop(_ why: String) {
        if droppedCount.add(1, ordering: .relaxed).oldValue == 0 {
            logger.warning("BlueZ mirror: \(why); dropping changes (counted in droppedChanges)")
        }
    }

    /// Changes not delivered to a full `observe()` stream, or signals not held while the mirror was read.
    public var droppedChanges: Int { droppedCount.load(ordering: .relaxed) }

    deinit { close() }

    /// The current mirror.
    public var tree: BlueZObjectTree { state.withLock { $0.tree } }

    /// Whether `org.bluez` has an owner on the bus.
    public var bluetoothdRunning: Bool { state.withLock { $0.owner != nil } }

    /// The current mirror and the changes after it, taken together so nothing falls between them. The stream ends
    /// on `close()`. It holds up to `observerBufferLimit` changes for a slow reader, then drops (and counts) the
    /// newest; the mirror itself is always complete.
    public func observe() -> (snapshot: BlueZObjectTree, changes: AsyncStream<BlueZChange>) {
        let (stream, continuation) = AsyncStream.makeStream(
            of: BlueZChange.self, bufferingPolicy: .bufferingOldest(Self.observerBufferLimit))
        let (snapshot, id) = state.withLock { state -> (BlueZObjectTree, UInt64?) in
            guard !state.closed else { return (state.tree, nil) }
            state.nextObserverID += 1
            state.observers[state.nextObserverID] = .stream(continuation)
            return (state.tree, state.nextObserverID)
        }
        guard let id else {
            continuation.finish()
            return (snapshot, stream)
        }
        continuation.onTermination = { [weak self] _ in self?.removeObserver(id) }
        return (snapshot, stream)
    }

    /// The current mirror, and `handler` called with every change after it and the instant its signal was read
    /// from the bus socket (`DBusMessage.receivedAt`; the current time for `.bluetoothdStarted`/`Stopped`). The
    /// handler runs on the connection's queue, in order, with no buffer in between: keep it short and non-blocking
    /// (hand work to a bounded queue; to hold the bus back, `connection.pauseReading()`). Ends on `cancel()` of
    /// the returned observation or `close()`.
    public func observe(
        _ handler: @escaping @Sendable (BlueZChange, ContinuousClock.Instant) -> Void
    ) -> (snapshot: BlueZObjectTree, observation: BlueZObservation) {
        let (snapshot, id) = state.withLock { state -> (BlueZObjectTree, UInt64?) in
            guard !state.closed else { return (state.tree, nil) }
            state.nextObserverID += 1
            state.observers[state.nextObserverID] = .handler(handler)
            return (state.tree, state.nextObserverID)
        }
        return (snapshot, BlueZObservation { [weak self] in if let id { self?.removeObserver(id) } })
    }

    private func removeObserver(_ id: UInt64) {
        // The removed observer is released after the lock: releasing a stream's continuation may run its handler.
        let removed = state.withLock { $0.observers.removeValue(forKey: id) }
        _ = removed
    }

    /// Evaluates `condition` on the mirror now and after every change until it gives a value, e.g. "the device's
    /// `ServicesResolved` is true, or `Connected` went false". Returns `nil` if the client closes or the task is
    /// cancelled; put your own timeout around it.
    public func wait<T: Sendable>(for condition: (BlueZObjectTree) -> T?) async -> T? {
        let (snapshot, changes) = observe()
        if let value = condition(snapshot) { return value }
        for await _ in changes {
            if let value = condition(tree) { return value }
        }
        return nil
    }

    // MARK: Mirroring

    /// Reads `GetManagedObjects` and makes it the mirror, then applies the signals held meanwhile.
    private func mirror(owner: String, generation: UInt64, initial: Bool) async throws {
        let objects: [DBusObjectPath: [String: [String: DBusValue]]]
        do {
            objects = try await connection.managedObjects(destination: BlueZ.busName, path: "/", timeout: .seconds(10))
        } catch let error as DBusError where BlueZError(error).kind == .bluetoothdNotRunning {
            logger.info("bluetoothd left the bus while being mirrored")
            await finishMirror(owner: nil, tree: BlueZObjectTree(), generation: generation, initial: initial)
            return
        } catch let error as DBusError {
            await finishMirror(owner: nil, tree: BlueZObjectTree(), generation: generation, initial: initial)
            throw BlueZError(error)
        } catch {
            await finishMirror(owner: nil, tree: BlueZObjectTree(), generation: generation, initial: initial)
            throw error
        }
        let tree = BlueZObjectTree(objects: objects)
        await finishMirror(owner: owner, tree: tree, generation: generation, initial: initial)
        logger.info(
            "mirrored org.bluez",
            metadata: ["owner": "\(owner)", "adapters": "\(tree.adapters.count)", "devices": "\(tree.devices().count)"])
    }

    /// On the connection's queue, so it falls in order between the signals: installs the mirror and applies what
    /// was held.
    private func finishMirror(owner: String?, tree: BlueZObjectTree, generation: UInt64, initial: Bool) async {
        await connection.onQueue { [self] in
            let published = state.withLock { state -> ([(BlueZChange, ContinuousClock.Instant)], [Observer])? in
                guard state.mirrorGeneration == generation, let held = state.held else { return nil }
                state.held = nil
                state.owner = owner
                state.tree = tree
                var changes: [(BlueZChange, ContinuousClock.Instant)] = []
                if owner != nil, !initial { changes.append((.bluetoothdStarted, .now)) }
                for message in held where owner != nil && message.sender == owner {
                    if let change = state.tree.apply(message) { changes.append((change, message.receivedAt)) }
                }
                return (changes, state.audience)
            }
            guard let (changes, observers) = published else { return }
            for (change, instant) in changes { publish(change, at: instant, to: observers) }
        }
    }

    /// Applies one signal, on the connection's queue.
    private func handle(_ message: DBusMessage) {
        if let change = DBusNameOwnerChange(message) {
            ownerChanged(change)
            return
        }
        var overflow = false
        let published = state.withLock { state -> (BlueZChange, [Observer])? in
            if state.held != nil {
                guard state.held!.count < Self.heldSignalLimit else {
                    overflow = true
                    return nil
                }
                state.held!.append(message)
                return nil
            }
            guard let owner = state.owner, message.sender == owner else { return nil }
            guard let change = state.tree.apply(message) else { return nil }
            return (change, state.audience)
        }
        if overflow { countDrop("too many signals while the mirror is read") }
        if let (change, observers) = published { publish(change, at: message.receivedAt, to: observers) }
    }

    private func ownerChanged(_ change: DBusNameOwnerChange) {
        enum Step { case none, stopped([Observer]), remirror(UInt64, [Observer]?) }
        let step = state.withLock { state -> Step in
            let current = state.owner
            if change.newOwner == current, current != nil { return .none }
            var stopped: [Observer]?
            if current != nil {
                state.owner = nil
                state.tree = BlueZObjectTree()
                stopped = state.audience
            }
            guard change.newOwner != nil, !state.closed else { return stopped.map { .stopped($0) } ?? .none }
            state.mirrorGeneration += 1
            state.held = []
            return .remirror(state.mirrorGeneration, stopped)
        }
        let stopped: [Observer]?
        switch step {
        case .none: return
        case .stopped(let observers): stopped = observers
        case .remirror(_, let observers): stopped = observers
        }
        if let stopped {
            logger.warning("bluetoothd left the bus; dropping the BlueZ mirror")
            publish(.bluetoothdStopped, at: .now, to: stopped)
        }
        if case .remirror(let generation, _) = step, let newOwner = change.newOwner {
            logger.info("bluetoothd is on the bus; mirroring again", metadata: ["owner": "\(newOwner)"])
            Task { [self] in
                do {
                    try await mirror(owner: newOwner, generation: generation, initial: false)
                } catch {
                    logger.error("cannot mirror org.bluez: \(error)")
                }
            }
        }
    }

    // MARK: Calls

    private func call(
        _ path: DBusObjectPath,
        _ interface: String,
        _ member: String,
        _ arguments: [DBusValue] = [],
        timeout: Duration
    ) async throws -> [DBusValue] {
        try await BlueZError.mapping {
            try await connection.call(
                destination: BlueZ.busName, path: path, interface: interface, member: member, arguments: arguments,
                timeout: timeout)
        }
    }

    /// `Adapter1.SetDiscoveryFilter`: by default `{UUIDs: [180d], Transport: "le", DuplicateData: false}`, so RSSI and
    /// advertisement data keep updating for heart-rate straps. `pattern` (BlueZ ≥ 5.54) keeps only devices whose
    /// address or name starts with it; BlueZ applies it on top of `uuids` (both must match). A bluetoothd too old
    /// for `Pattern` answers `InvalidArguments`; the filter is then set again without it.
    public func setDiscoveryFilter(
        on adapter: DBusObjectPath,
        uuids: [String] = [BlueZ.heartRateService],
        pattern: String? = nil,
        transport: String = "le",
        duplicateData: Bool = false,
        timeout: Duration = .seconds(5)
    ) async throws {
        var filter: [String: DBusValue] = [
            "UUIDs": .stringArray(uuids), "Transport": .string(transport), "DuplicateData": .boolean(duplicateData),
        ]
        if let pattern { filter["Pattern"] = .string(pattern) }
        do {
            _ = try await call(adapter, BlueZ.adapterInterface, "SetDiscoveryFilter", [.properties(filter)], timeout: timeout)
        } catch let error as BlueZError where pattern != nil && error.name == "org.bluez.Error.InvalidArguments" {
            logger.info("SetDiscoveryFilter without Pattern (bluetoothd does not take it): \(error)")
            filter["Pattern"] = nil
            _ = try await call(adapter, BlueZ.adapterInterface, "SetDiscoveryFilter", [.properties(filter)], timeout: timeout)
        }
    }

    /// `Adapter1.SetDiscoveryFilter({})`: clears this client's filter.
    public func clearDiscoveryFilter(on adapter: DBusObjectPath, timeout: Duration = .seconds(5)) async throws {
        _ = try await call(adapter, BlueZ.adapterInterface, "SetDiscoveryFilter", [.properties([:])], timeout: timeout)
    }

    /// `Adapter1.StartDiscovery`. The discovery session belongs to this D-Bus connection and ends with it.
    public func startDiscovery(on adapter: DBusObjectPath, timeout: Duration = .seconds(5)) async throws {
        _ = try await call(adapter, BlueZ.adapterInterface, "StartDiscovery", timeout: timeout)
    }

    /// `Adapter1.StopDiscovery`; `NotReady` is ignored.
    public func stopDiscovery(on adapter: DBusObjectPath, timeout: Duration = .seconds(5)) async throws {
        do {
            _ = try await call(adapter, BlueZ.adapterInterface, "StopDiscovery", timeout: timeout)
        } catch let error as BlueZError where error.kind == .notReady {
            logger.debug("StopDiscovery: \(error)")
        }
    }

    /// `Adapter1.RemoveDevice`: forgets the device (cache and bonding).
    public func removeDevice(
        _ device: DBusObjectPath,
        from adapter: DBusObjectPath,
        timeout: Duration = .seconds(10)
    ) async throws {
        _ = try await call(adapter, BlueZ.adapterInterface, "RemoveDevice", [.objectPath(device)], timeout: timeout)
    }

    /// `Device1.Connect`. An LE connect that never hears the device can take 20 s or more, hence the timeout.
    /// `BlueZError.isConnectionAbortByLocal` means: wait for `Connected=false`, then call again.
    public func connect(_ device: DBusObjectPath, timeout: Duration = .seconds(30)) async throws {
        _ = try await call(device, BlueZ.deviceInterface, "Connect", timeout: timeout)
    }

    /// `Device1.Pair`: bonds with the device (BlueZ asks the registered agent, if any, to confirm). `AlreadyExists`
    /// when BlueZ holds keys already. Pairing can take several seconds.
    public func pair(_ device: DBusObjectPath, timeout: Duration = .seconds(30)) async throws {
        _ = try await call(device, BlueZ.deviceInterface, "Pair", timeout: timeout)
    }

    /// `Device1.Disconnect` (also cancels a pending Connect).
    public func disconnect(_ device: DBusObjectPath, timeout: Duration = .seconds(10)) async throws {
        _ = try await call(device, BlueZ.deviceInterface, "Disconnect", timeout: timeout)
    }

    /// `GattCharacteristic1.StartNotify`. Subscribe with `notifications(of:)` first. `InProgress` means BlueZ is
    /// still arming a session from this connection and is reported as success.
    public func startNotify(_ characteristic: DBusObjectPath, timeout: Duration = .seconds(10)) async throws {
        do {
            _ = try await call(characteristic, BlueZ.gattCharacteristicInterface, "StartNotify", timeout: timeout)
        } catch let error as BlueZError where error.kind == .inProgress {
            logger.debug("StartNotify: \(error)")
        }
    }

    /// `GattCharacteristic1.StopNotify`.
    public func stopNotify(_ characteristic: DBusObjectPath, timeout: Duration = .seconds(10)) async throws {
        _ = try await call(characteristic, BlueZ.gattCharacteristicInterface, "StopNotify", timeout: timeout)
    }

    /// `GattCharacteristic1.ReadValue`.
    public func readValue(
        _ characteristic: DBusObjectPath,
        offset: UInt16? = nil,
        timeout: Duration = .seconds(10)
    ) async throws -> [UInt8] {
        var options: [String: DBusValue] = [:]
        if let offset { options["offset"] = .uint16(offset) }
        let reply = try await call(
            characteristic, BlueZ.gattCharacteristicInterface, "ReadValue", [.properties(options)], timeout: timeout)
        guard let bytes = reply.first?.bytes else {
            throw BlueZError(kind: .other, name: DBusError.failed, message: "ReadValue reply is not ay: \(reply)")
        }
        return bytes
    }

    /// `GattCharacteristic1.WriteValue`.
    public func writeValue(
        _ characteristic: DBusObjectPath,
        _ bytes: [UInt8],
        type: BlueZWriteType = .request,
        timeout: Duration = .seconds(10)
    ) async throws {
        _ = try await call(
            characteristic, BlueZ.gattCharacteristicInterface, "WriteValue",
            [.bytes(bytes), .properties(["type": .string(type.rawValue)])], timeout: timeout)
    }

    /// `Battery1.Percentage` of a device, read from BlueZ (not from the mirror).
    public func batteryPercentage(of device: DBusObjectPath, timeout: Duration = .seconds(5)) async throws -> UInt8 {
        let value = try await BlueZError.mapping {
            try await connection.property(
                "Percentage", interface: BlueZ.batteryInterface, destination: BlueZ.busName, path: device,
                timeout: timeout)
        }
        guard let percentage = value.byte else {
            throw BlueZError(
                kind: .other, name: DBusError.failed, message: "Battery1.Percentage is not a byte: \(value)")
        }
        return percentage
    }

    /// Value notifications of one characteristic, each with its arrival instant. Subscribe before `startNotify` so
    /// the first notifications are not missed. Reads also update `Value`, so a read shows up here too.
    public func notifications(of characteristic: DBusObjectPath) async throws -> DBusSubscription<BlueZNotification> {
        let rule = DBusMatchRule(
            sender: BlueZ.busName, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
            path: characteristic, arg0: BlueZ.gattCharacteristicInterface)
        return try await BlueZError.mapping {
            try await connection.subscribe(rule) { message in
                guard message.body.count >= 2, let value = message.body[1].propertyDictionary?["Value"]?.bytes else {
                    return nil
                }
                return BlueZNotification(characteristic: characteristic, value: value, receivedAt: message.receivedAt)
            }
        }
    }
}
