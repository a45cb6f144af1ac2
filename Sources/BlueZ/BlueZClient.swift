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
/// `InterfacesAdded`/`InterfacesRemoved`/`PropertiesChanged` in arrival order. When bluetoothd leaves the bus the
/// mirror is emptied and observers get `.bluetoothdStopped`; when it returns the mirror is read again and observers
/// get `.bluetoothdStarted`.
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

    private struct State: ~Copyable {
        var tree = BlueZObjectTree()
        var owner: String?
        var observers: [UInt64: AsyncStream<BlueZChange>.Continuation] = [:]
        var nextObserverID: UInt64 = 0
        var pump: Task<Void, Never>?
        var closed = false

        /// The observers to tell. Yield to them after releasing the lock: an observer's stream may be cancelled
        /// concurrently, and its termination handler takes this lock.
        var audience: [AsyncStream<BlueZChange>.Continuation] { Array(observers.values) }
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
        let signals = try await BlueZError.mapping {
            try await connection.subscribe(anyOf: rules) { $0 }
        }
        if let owner = try await BlueZError.mapping({ try await connection.nameOwner(of: BlueZ.busName) }) {
            try await client.mirror(owner: owner, initial: true)
        } else {
            logger.warning("bluetoothd is not running; waiting for org.bluez to appear on the bus")
        }
        let pump = Task { [weak client] in
            var iterator = signals.makeAsyncIterator()
            while let message = await iterator.next() {
                guard let client else { return }
                await client.handle(message)
            }
        }
        client.state.withLock { $0.pump = pump }
        return client
    }

    /// Stops mirroring and ends every `observe()` stream.
    public func close() {
        let (pump, observers) = state.withLock { state -> (Task<Void, Never>?, [AsyncStream<BlueZChange>.Continuation]) in
            state.closed = true
            defer { state.observers.removeAll() }
            return (state.pump, state.audience)
        }
        for observer in observers { observer.finish() }
        pump?.cancel()
    }

    /// Tells every observer, outside the lock. Changes come from the one pump task, so their order is kept.
    private func publish(_ change: BlueZChange, to observers: [AsyncStream<BlueZChange>.Continuation]) {
        for observer in observers { observer.yield(change) }
    }

    deinit { close() }

    /// The current mirror.
    public var tree: BlueZObjectTree { state.withLock { $0.tree } }

    /// Whether `org.bluez` has an owner on the bus.
    public var bluetoothdRunning: Bool { state.withLock { $0.owner != nil } }

    /// The current mirror and the changes after it, taken together so nothing falls between them. The stream ends
    /// on `close()`.
    public func observe() -> (snapshot: BlueZObjectTree, changes: AsyncStream<BlueZChange>) {
        let (stream, continuation) = AsyncStream.makeStream(of: BlueZChange.self, bufferingPolicy: .unbounded)
        let (snapshot, id) = state.withLock { state -> (BlueZObjectTree, UInt64?) in
            guard !state.closed else { return (state.tree, nil) }
            state.nextObserverID += 1
            state.observers[state.nextObserverID] = continuation
            return (state.tree, state.nextObserverID)
        }
        guard let id else {
            continuation.finish()
            return (snapshot, stream)
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.observers.removeValue(forKey: id) }
        }
        return (snapshot, stream)
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

    private func mirror(owner: String, initial: Bool) async throws {
        let objects: [DBusObjectPath: [String: [String: DBusValue]]]
        do {
            objects = try await connection.managedObjects(destination: BlueZ.busName, path: "/", timeout: .seconds(10))
        } catch let error as DBusError where BlueZError(error).kind == .bluetoothdNotRunning {
            logger.info("bluetoothd left the bus while being mirrored")
            return
        } catch let error as DBusError {
            throw BlueZError(error)
        }
        let tree = BlueZObjectTree(objects: objects)
        let observers = state.withLock { state in
            state.owner = owner
            state.tree = tree
            return initial ? [] : state.audience
        }
        publish(.bluetoothdStarted, to: observers)
        logger.info(
            "mirrored org.bluez",
            metadata: ["owner": "\(owner)", "adapters": "\(tree.adapters.count)", "devices": "\(tree.devices().count)"])
    }

    private func handle(_ message: DBusMessage) async {
        if let change = DBusNameOwnerChange(message) {
            await ownerChanged(change)
            return
        }
        let published = state.withLock { state -> (BlueZChange, [AsyncStream<BlueZChange>.Continuation])? in
            guard let owner = state.owner, message.sender == owner else { return nil }
            guard let change = state.tree.apply(message) else { return nil }
            return (change, state.audience)
        }
        if let (change, observers) = published { publish(change, to: observers) }
    }

    private func ownerChanged(_ change: DBusNameOwnerChange) async {
        let current = state.withLock { $0.owner }
        if change.newOwner == current, current != nil { return }
        if current != nil {
            logger.warning("bluetoothd left the bus; dropping the BlueZ mirror")
            let observers = state.withLock { state in
                state.owner = nil
                state.tree = BlueZObjectTree()
                return state.audience
            }
            publish(.bluetoothdStopped, to: observers)
        }
        if let newOwner = change.newOwner {
            logger.info("bluetoothd is on the bus; mirroring again", metadata: ["owner": "\(newOwner)"])
            do {
                try await mirror(owner: newOwner, initial: false)
            } catch {
                logger.error("cannot mirror org.bluez: \(error)")
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
    /// advertisement data keep updating for heart-rate straps.
    public func setDiscoveryFilter(
        on adapter: DBusObjectPath,
        uuids: [String] = [BlueZ.heartRateService],
        transport: String = "le",
        duplicateData: Bool = false,
        timeout: Duration = .seconds(5)
    ) async throws {
        let filter = DBusValue.properties([
            "UUIDs": .stringArray(uuids), "Transport": .string(transport), "DuplicateData": .boolean(duplicateData),
        ])
        _ = try await call(adapter, BlueZ.adapterInterface, "SetDiscoveryFilter", [filter], timeout: timeout)
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
