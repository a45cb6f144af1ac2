import CDBus
import Dispatch
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A connection to a D-Bus bus, driven by libdbus on one serial dispatch queue.
///
/// libdbus's read watch is a thread of its own that reads on the connection's queue (`SocketReader`), its write watch
/// and timeouts are `DispatchSource`s on that queue, and every libdbus call for the
/// connection runs there, so replies, signals and incoming calls are handled as soon as their bytes arrive.
///
/// ```swift
/// let bus = try await DBusConnection.connect(to: .system, logger: logger)
/// defer { bus.close() }
/// let reply = try await bus.call(
///     destination: "org.bluez", path: "/org/bluez/hci0", interface: "org.bluez.Adapter1",
///     member: "SetDiscoveryFilter", arguments: [.properties(["Transport": .string("le")])], timeout: .seconds(5))
/// let changes = try await bus.messages(matching: DBusMatchRule(
///     interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged", pathNamespace: "/org/bluez"))
/// for await signal in changes { print(signal.path, signal.body) }
/// ```
///
/// Exported method handlers run as tasks started on the connection's queue (they should not block it: hand heavy
/// work to another task); `DBusProperty.didSet` runs on the queue too.
///
/// - Important: Call `close()` when done; it is synchronous and safe from any thread, including from handlers.
// @unchecked Sendable: all mutable state and every use of `raw` is confined to `queue` (checked by `onQueue`).
public final class DBusConnection: @unchecked Sendable {
    /// The unique name the bus gave this connection (e.g. `:1.42`).
    public let uniqueName: String
    /// Where the connection goes.
    public let bus: DBusBus
    let logger: Logger
    let queue: DispatchQueue
    private static let queueKey = DispatchSpecificKey<ObjectIdentifier>()

    // Everything below is touched on `queue` only.
    private var raw: OpaquePointer?
    private var subscriptions: [UInt64: Subscriber] = [:]
    private var nextSubscriptionID: UInt64 = 0
    private var pendingCalls: [ObjectIdentifier: PendingCall] = [:]
    private var objects: [DBusObjectPath: [String: DBusInterface]] = [:]
    private var objectManagers: Set<DBusObjectPath> = []
    private var closeWaiters: [CheckedContinuation<Void, Never>] = []
    private var dispatchScheduled = false
    /// A watch or timeout is being handled on the queue and a drain follows it (or runs): a dispatch status change
    /// meanwhile needs no drain of its own, which would wake another thread for every message read.
    private var drainFollows = false
    private var drainsScheduledCount = 0
    /// How many parties asked to stop reading the socket (`pauseReading()`).
    private var readPausers = 0
    private var watches: [WeakWatch] = []
    /// Every reader thread started for this connection whose thread still runs (a reader is released by its thread
    /// when the thread ends, after `stop()`).
    private var readers: [WeakReader] = []
    /// When the socket was last read: the arrival time of the messages that read brought.
    fileprivate var lastReadAt: ContinuousClock.Instant?
    private let droppedCount = Atomic<Int>(0)

    private struct Subscriber {
        var rules: [DBusMatchRule]
        /// Called on the queue, in arrival order.
        var deliver: (DBusMessage) -> Void
        var finish: () -> Void
    }

    private struct WeakWatch {
        weak var handler: WatchHandler?
    }

    private struct WeakReader {
        weak var reader: SocketReader?
    }

    fileprivate func started(_ reader: SocketReader) {
        readers.removeAll { $0.reader == nil }
        readers.append(WeakReader(reader: reader))
    }

    /// Reader threads of this connection still running: 1 while it reads, 0 soon after `pauseReading()` or `close()`
    /// (tests: no thread is left behind).
    var readerThreadsRunning: Int {
        onQueueSync {
            readers.removeAll { $0.reader == nil }
            return readers.count
        }
    }

    /// Drains scheduled as blocks of their own on the queue (tests: a message read from the socket is dispatched by the
    /// reader that read it, with no second thread woken for it).
    var drainsScheduled: Int { onQueueSync { drainsScheduledCount } }

    /// Messages dropped because a subscription's buffer was full (`subscribe(anyOf:bufferLimit:transform:)`).
    public var droppedMessages: Int { droppedCount.load(ordering: .relaxed) }

    // MARK: Connecting

    /// Connects to `bus` and registers with it (`Hello`).
    ///
    /// Throws a `DBusError` whose `advice` says what to check (address, policy, group) when the bus cannot be reached
    /// or refuses us.
    public static func connect(to bus: DBusBus, logger: Logger) async throws -> DBusConnection {
        let handle = try await withCheckedThrowingContinuation {
            (continuation: CheckedContinuation<RawHandle, any Error>) in
            DispatchQueue.global().async {
                continuation.resume(with: Result { () throws(DBusError) in try openRaw(bus) })
            }
        }
        return DBusConnection(handle: handle, bus: bus, logger: logger)
    }

    /// Holds a freshly opened connection pointer while it moves to its queue.
    // @unchecked Sendable: the pointer is used by exactly one owner at a time (the opener, then the queue).
    private struct RawHandle: @unchecked Sendable {
        let pointer: OpaquePointer
        let uniqueName: String
    }

    private static let threadsInitialised: Bool = dbus_threads_init_default() != 0

    /// The address of `bus`: the explicit one, `DBUS_SYSTEM_BUS_ADDRESS` (default
    /// `unix:path=/run/dbus/system_bus_socket`) or `DBUS_SESSION_BUS_ADDRESS`.
    static func address(of bus: DBusBus) throws(DBusError) -> String {
        switch bus {
        case .address(let address):
            return address
        case .system:
            return getenv("DBUS_SYSTEM_BUS_ADDRESS").map { String(cString: $0) }
                ?? "unix:path=/run/dbus/system_bus_socket"
        case .session:
            guard let address = getenv("DBUS_SESSION_BUS_ADDRESS").map({ String(cString: $0) }), !address.isEmpty
            else {
                throw DBusError(
                    name: DBusError.badAddress, message: "DBUS_SESSION_BUS_ADDRESS is not set",
                    advice: "run inside a login session or under dbus-run-session, or connect to an explicit address")
            }
            return address
        }
    }

    private static func openRaw(_ bus: DBusBus) throws(DBusError) -> RawHandle {
        _ = threadsInitialised
        let address = try address(of: bus)
        let name = bus == .address(address) ? "bus at \(address)" : "\(bus) bus at \(address)"
        var error = CDBus.DBusError()
        dbus_error_init(&error)
        guard let connection = dbus_connection_open_private(address, &error) else {
            throw DBusError.take(&error).withConnectAdvice(bus: name)
        }
        dbus_connection_set_exit_on_disconnect(connection, 0)
        guard dbus_bus_register(connection, &error) != 0 else {
            var failure = DBusError.take(&error)
            if dbus_connection_get_is_connected(connection) == 0 {
                failure.advice = "the \(name) closed the connection while registering: its policy refuses this user "
                    + "(uid \(getuid())); check the <policy> rules of the bus configuration (for the system bus, "
                    + "/etc/dbus-1/system.d/; for BlueZ, membership of group 'bluetooth')"
            } else {
                failure = failure.withConnectAdvice(bus: name)
            }
            dbus_connection_close(connection)
            dbus_connection_unref(connection)
            throw failure
        }
        dbus_error_free(&error)
        let unique = dbus_bus_get_unique_name(connection).map { String(cString: $0) } ?? ""
        return RawHandle(pointer: connection, uniqueName: unique)
    }

    private init(handle: RawHandle, bus: DBusBus, logger: Logger) {
        self.uniqueName = handle.uniqueName
        self.bus = bus
        self.logger = logger
        self.queue = DispatchQueue(label: "hr-gateway.dbus.\(handle.uniqueName)")
        queue.setSpecific(key: Self.queueKey, value: ObjectIdentifier(self))
        queue.sync { install(handle.pointer) }
        logger.debug("D-Bus connected", metadata: ["bus": "\(bus)", "unique-name": "\(uniqueName)"])
    }

    deinit {
        onQueueSync { closeOnQueue() }
    }

    var onQueue: Bool { DispatchQueue.getSpecific(key: Self.queueKey) == ObjectIdentifier(self) }

    private func onQueueSync<R>(_ body: () -> R) -> R {
        onQueue ? body() : queue.sync(execute: body)
    }

    private func install(_ connection: OpaquePointer) {
        raw = connection
        let me = Unmanaged.passUnretained(self).toOpaque()
        dbus_connection_set_watch_functions(connection, watchAdd, watchRemove, watchToggled, me, nil)
        dbus_connection_set_timeout_functions(connection, timeoutAdd, timeoutRemove, timeoutToggled, me, nil)
        dbus_connection_set_dispatch_status_function(connection, dispatchStatusChanged, me, nil)
        dbus_connection_add_filter(connection, messageFilter, me, nil)
        scheduleDispatch()
    }

    // MARK: Closing

    /// Whether the connection is still open.
    public var isConnected: Bool {
        onQueueSync { raw.map { dbus_connection_get_is_connected($0) != 0 } ?? false }
    }

    /// Closes the connection: fails calls in flight, ends every subscription and releases libdbus. Synchronous and
    /// idempotent.
    public func close() {
        onQueueSync { closeOnQueue() }
    }

    /// Returns once the connection is closed (by `close()` or because the bus went away).
    public func waitUntilClosed() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                if self.raw == nil {
                    continuation.resume()
                } else {
                    self.closeWaiters.append(continuation)
                }
            }
        }
    }

    private func closeOnQueue() {
        guard let connection = raw else { return }
        raw = nil
        dbus_connection_remove_filter(connection, messageFilter, Unmanaged.passUnretained(self).toOpaque())
        dbus_connection_set_dispatch_status_function(connection, nil, nil, nil)
        for call in pendingCalls.values {
            call.finish(.failure(DBusError.closed))
        }
        pendingCalls.removeAll()
        dbus_connection_close(connection)
        dbus_connection_set_watch_functions(connection, nil, nil, nil, nil, nil)
        dbus_connection_set_timeout_functions(connection, nil, nil, nil, nil, nil)
        dbus_connection_unref(connection)
        let subscribers = subscriptions.values
        subscriptions.removeAll()
        watches.removeAll()
        for subscriber in subscribers { subscriber.finish() }
        let waiters = closeWaiters
        closeWaiters.removeAll()
        for waiter in waiters { waiter.resume() }
        logger.debug("D-Bus connection closed", metadata: ["unique-name": "\(uniqueName)"])
    }

    // MARK: Dispatching

    fileprivate func scheduleDispatch() {
        guard !dispatchScheduled, !drainFollows else { return }
        dispatchScheduled = true
        drainsScheduledCount += 1
        queue.async { [weak self] in
            guard let self else { return }
            self.dispatchScheduled = false
            self.drain()
        }
    }

    fileprivate func drain() {
        while let connection = raw, dbus_connection_dispatch(connection) == DBUS_DISPATCH_DATA_REMAINS {}
    }

    /// Runs `handle` (libdbus reading the socket or handling a timeout, which may queue messages), then dispatches
    /// every queued message, on the calling thread (on the queue).
    fileprivate func handleThenDrain(_ handle: () -> Void) {
        let outer = drainFollows
        drainFollows = true
        defer { drainFollows = outer }
        handle()
        // Dispatches until libdbus says nothing remains, so a status change during the drain needs nothing either.
        drain()
    }

    fileprivate func handle(_ pointer: OpaquePointer) -> DBusHandlerResult {
        let message = DBusMessage(decoding: pointer, receivedAt: lastReadAt ?? .now)
        switch message.kind {
        case .signal:
            if message.interface == "org.freedesktop.DBus.Local", message.member == "Disconnected" {
                logger.info("D-Bus connection lost", metadata: ["unique-name": "\(uniqueName)"])
                queue.async { self.closeOnQueue() }
                return DBUS_HANDLER_RESULT_HANDLED
            }
            for subscriber in subscriptions.values where subscriber.rules.contains(where: { $0.matches(message) }) {
                subscriber.deliver(message)
            }
            return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
        case .methodCall:
            return handleMethodCall(message, pointer: pointer)
        default:
            return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
        }
    }

    // MARK: Calling

    /// Calls a method and returns the reply's arguments.
    ///
    /// - Parameter timeout: how long to wait for the reply; past it the call throws a `DBusError` named
    ///   `org.freedesktop.DBus.Error.NoReply` (`isTimeout` is true).
    /// - Throws: `DBusError` with the peer's error name and message, or `CancellationError` when the task is
    ///   cancelled (the reply is then ignored).
    public func call(
        destination: String?,
        path: DBusObjectPath,
        interface: String?,
        member: String,
        arguments: [DBusValue] = [],
        timeout: Duration = .seconds(25)
    ) async throws -> [DBusValue] {
        let message = try Self.makeMethodCall(destination, path, interface, member, arguments)
        let call = PendingCall()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[DBusValue], any Error>) in
                queue.async {
                    call.attach(continuation)
                    self.start(call, message: message, timeout: timeout)
                }
            }
        } onCancel: {
            queue.async {
                if let pending = call.pending { dbus_pending_call_cancel(pending) }
                self.pendingCalls[ObjectIdentifier(call)] = nil
                call.finish(.failure(CancellationError()))
            }
        }
    }

    /// Sends a method call without waiting for (or wanting) a reply.
    public func callNoReply(
        destination: String?,
        path: DBusObjectPath,
        interface: String?,
        member: String,
        arguments: [DBusValue] = []
    ) throws {
        let message = try Self.makeMethodCall(destination, path, interface, member, arguments)
        dbus_message_set_no_reply(message.pointer, 1)
        send(message)
    }

    private func start(_ call: PendingCall, message: MessageRef, timeout: Duration) {
        defer { dbus_message_unref(message.pointer) }
        guard !call.finished else { return }
        guard let connection = raw else {
            call.finish(.failure(DBusError.closed))
            return
        }
        var pending: OpaquePointer?
        guard dbus_connection_send_with_reply(connection, message.pointer, &pending, Self.milliseconds(timeout)) != 0
        else {
            call.finish(.failure(DBusError.outOfMemory))
            return
        }
        guard let pending else {
            call.finish(.failure(DBusError.closed))
            return
        }
        call.pending = pending
        pendingCalls[ObjectIdentifier(call)] = call
        let box = Unmanaged.passRetained(PendingCallBox(connection: self, call: call)).toOpaque()
        dbus_pending_call_set_notify(pending, pendingCallNotify, box, pendingCallBoxFree)
        if dbus_pending_call_get_completed(pending) != 0 { complete(call) }
    }

    fileprivate func complete(_ call: PendingCall) {
        pendingCalls[ObjectIdentifier(call)] = nil
        guard let pending = call.pending, !call.finished else { return }
        guard let reply = dbus_pending_call_steal_reply(pending) else {
            call.finish(.failure(DBusError(name: DBusError.noReply, message: "no reply")))
            return
        }
        defer { dbus_message_unref(reply) }
        let message = DBusMessage(decoding: reply)
        if message.kind == .error {
            call.finish(.failure(message.asError))
        } else {
            call.finish(.success(message.body))
        }
    }

    private static func milliseconds(_ duration: Duration) -> Int32 {
        let (seconds, attoseconds) = duration.components
        let ms = Double(seconds) * 1000 + Double(attoseconds) / 1e15
        if ms >= Double(Int32.max) { return CDBus_TIMEOUT_INFINITE }
        return Int32(max(1, ms.rounded(.up)))
    }

    private static func makeMethodCall(
        _ destination: String?,
        _ path: DBusObjectPath,
        _ interface: String?,
        _ member: String,
        _ arguments: [DBusValue]
    ) throws(DBusError) -> MessageRef {
        guard path.isValid else {
            throw DBusError(name: DBusError.invalidArgs, message: "invalid object path \"\(path.rawValue)\"")
        }
        guard dbus_validate_member(member, nil) != 0 else {
            throw DBusError(name: DBusError.invalidArgs, message: "invalid member name \"\(member)\"")
        }
        if let interface, dbus_validate_interface(interface, nil) == 0 {
            throw DBusError(name: DBusError.invalidArgs, message: "invalid interface name \"\(interface)\"")
        }
        if let destination, dbus_validate_bus_name(destination, nil) == 0 {
            throw DBusError(name: DBusError.invalidArgs, message: "invalid bus name \"\(destination)\"")
        }
        guard let message = dbus_message_new_method_call(destination, path.rawValue, interface, member) else {
            throw DBusError.outOfMemory
        }
        do {
            try Marshalling.append(arguments, to: message)
        } catch {
            dbus_message_unref(message)
            throw error
        }
        return MessageRef(pointer: message)
    }

    /// Sends and releases `message` on the queue.
    private func send(_ message: MessageRef) {
        queue.async {
            if let connection = self.raw {
                dbus_connection_send(connection, message.pointer, nil)
            }
            dbus_message_unref(message.pointer)
        }
    }

    // MARK: Signals

    /// Emits a signal from `path`.
    public func emitSignal(
        path: DBusObjectPath,
        interface: String,
        member: String,
        arguments: [DBusValue] = [],
        destination: String? = nil
    ) throws {
        guard path.isValid else {
            throw DBusError(name: DBusError.invalidArgs, message: "invalid object path \"\(path.rawValue)\"")
        }
        guard dbus_validate_interface(interface, nil) != 0, dbus_validate_member(member, nil) != 0 else {
            throw DBusError(name: DBusError.invalidArgs, message: "invalid signal name \"\(interface).\(member)\"")
        }
        guard let message = dbus_message_new_signal(path.rawValue, interface, member) else {
            throw DBusError.outOfMemory
        }
        if let destination { dbus_message_set_destination(message, destination) }
        do {
            try Marshalling.append(arguments, to: message)
        } catch {
            dbus_message_unref(message)
            throw error
        }
        send(MessageRef(pointer: message))
    }

    /// Subscribes to messages matching `rule`: registers the rule with the bus (`AddMatch`) before returning, so no
    /// signal sent after this returns is missed. The rule is removed (`RemoveMatch`) when iteration ends.
    public func messages(matching rule: DBusMatchRule) async throws -> DBusSubscription<DBusMessage> {
        try await subscribe(rule) { $0 }
    }

    /// `NameOwnerChanged` signals, for one name or (if `name` is nil) for all.
    public func nameOwnerChanges(of name: String? = nil) async throws -> DBusSubscription<DBusNameOwnerChange> {
        let rule = DBusMatchRule(
            sender: "org.freedesktop.DBus",
            interface: "org.freedesktop.DBus",
            member: "NameOwnerChanged",
            path: "/org/freedesktop/DBus",
            arg0: name
        )
        return try await subscribe(rule) { DBusNameOwnerChange($0) }
    }

    /// Subscribes to messages matching `rule`, keeping those `transform` turns into elements.
    public func subscribe<Element: Sendable>(
        _ rule: DBusMatchRule,
        transform: @escaping @Sendable (DBusMessage) -> Element?
    ) async throws -> DBusSubscription<Element> {
        try await subscribe(anyOf: [rule], transform: transform)
    }

    /// Subscribes to messages matching any of `rules`, in the order they arrive, keeping those `transform` turns
    /// into elements. Every rule is added to the bus before this returns.
    ///
    /// At most `bufferLimit` messages wait for the reader; later ones are dropped and counted in `droppedMessages`
    /// (a warning is logged for the first). For a path that must not lose anything, use
    /// `receive(anyOf:handler:)` and `pauseReading()`.
    public func subscribe<Element: Sendable>(
        anyOf rules: [DBusMatchRule],
        bufferLimit: Int = 4096,
        transform: @escaping @Sendable (DBusMessage) -> Element?
    ) async throws -> DBusSubscription<Element> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: DBusMessage.self, bufferingPolicy: .bufferingOldest(bufferLimit))
        let subscriber = Subscriber(
            rules: rules,
            deliver: { [weak self] message in
                if case .dropped = continuation.yield(message) { self?.countDrop(message) }
            },
            finish: { continuation.finish() })
        let id: UInt64
        do {
            id = try await register(subscriber, rules: rules)
        } catch {
            continuation.finish()
            throw error
        }
        continuation.onTermination = { [weak self] _ in self?.unregister(id, rules: rules) }
        return DBusSubscription(stream: stream, continuation: continuation, transform: transform)
    }

    /// Calls `handler` on the connection's queue for each message matching any of `rules`, in arrival order, with
    /// no buffer or task in between: the handler must be short and must not block (it runs where libdbus
    /// dispatches). Every rule is added to the bus before this returns; `cancel()` on the result (or dropping it)
    /// removes them. To hold back a fast sender, call `pauseReading()` from the handler.
    public func receive(
        anyOf rules: [DBusMatchRule],
        handler: @escaping @Sendable (DBusMessage) -> Void
    ) async throws -> DBusHandlerRegistration {
        let id = try await register(Subscriber(rules: rules, deliver: handler, finish: {}), rules: rules)
        return DBusHandlerRegistration { [weak self] in self?.unregister(id, rules: rules) }
    }

    private func register(_ subscriber: Subscriber, rules: [DBusMatchRule]) async throws -> UInt64 {
        let id = onQueueSync { () -> UInt64? in
            guard raw != nil else { return nil }
            nextSubscriptionID += 1
            subscriptions[nextSubscriptionID] = subscriber
            return nextSubscriptionID
        }
        guard let id else { throw DBusError.closed }
        var added: [DBusMatchRule] = []
        do {
            for rule in rules {
                _ = try await busCall("AddMatch", [.string(rule.description)])
                added.append(rule)
            }
        } catch {
            let addedRules = added
            queue.async {
                self.subscriptions[id] = nil
                self.removeMatches(addedRules)
            }
            throw error
        }
        return id
    }

    private func unregister(_ id: UInt64, rules: [DBusMatchRule]) {
        queue.async {
            guard self.subscriptions.removeValue(forKey: id) != nil else { return }
            self.removeMatches(rules)
        }
    }

    private func countDrop(_ message: DBusMessage) {
        if droppedCount.add(1, ordering: .relaxed).oldValue == 0 {
            logger.warning(
                "a D-Bus subscription's buffer is full; dropping messages (counted in droppedMessages)",
                metadata: ["message": "\(message)"])
        }
    }

    // MARK: Flow control

    /// Stops reading the bus socket until a matching `resumeReading()`, so a fast sender is held back by the bus
    /// (and the kernel) instead of piling up here. Messages already read are still dispatched, so expect a few more
    /// after this call; replies that arrive meanwhile wait in the socket too (a call times out as usual). Callable
    /// from any thread; pauses nest.
    public func pauseReading() {
        onQueueOrAsync {
            self.readPausers += 1
            if self.readPausers == 1 { self.updateWatches() }
        }
    }

    /// Undoes one `pauseReading()`.
    public func resumeReading() {
        onQueueOrAsync {
            guard self.readPausers > 0 else { return }
            self.readPausers -= 1
            if self.readPausers == 0 { self.updateWatches() }
        }
    }

    /// Whether reading is paused (for tests).
    public var isReadingPaused: Bool { onQueueSync { readPausers > 0 } }

    fileprivate var readingAllowed: Bool { readPausers == 0 }

    private func updateWatches() {
        watches.removeAll { $0.handler == nil }
        for watch in watches { watch.handler?.update() }
    }

    private func onQueueOrAsync(_ body: @escaping @Sendable () -> Void) {
        if onQueue { body() } else { queue.async(execute: body) }
    }

    /// Runs `body` on the connection's queue, after every message dispatched so far (and before later ones), and
    /// returns its result. For keeping state that `receive(anyOf:handler:)` handlers also touch in order.
    public func onQueue<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: body()) }
        }
    }

    private func removeMatches(_ rules: [DBusMatchRule]) {
        for rule in rules {
            try? callNoReply(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                interface: "org.freedesktop.DBus", member: "RemoveMatch", arguments: [.string(rule.description)])
        }
    }

    // MARK: Bus methods

    private func busCall(_ member: String, _ arguments: [DBusValue] = []) async throws -> [DBusValue] {
        try await call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: member, arguments: arguments, timeout: .seconds(10))
    }

    /// Names currently on the bus (`ListNames`).
    public func listNames() async throws -> [String] {
        guard let names = try await busCall("ListNames").first?.stringArray else {
            throw DBusError(name: DBusError.failed, message: "ListNames reply is not an array of strings")
        }
        return names
    }

    /// The unique name owning `name`, or `nil` if nobody does.
    public func nameOwner(of name: String) async throws -> String? {
        do {
            return try await busCall("GetNameOwner", [.string(name)]).first?.string
        } catch let error as DBusError where error.name == DBusError.nameHasNoOwner {
            return nil
        }
    }

    /// Asks the bus for a well-known name (`RequestName`).
    public func requestName(_ name: String, flags: DBusRequestNameFlags = [.doNotQueue]) async throws
        -> DBusRequestNameReply
    {
        let reply = try await busCall("RequestName", [.string(name), .uint32(flags.rawValue)])
        guard let code = reply.first?.uint32, let result = DBusRequestNameReply(rawValue: code) else {
            throw DBusError(name: DBusError.failed, message: "unexpected RequestName reply \(reply)")
        }
        return result
    }

    /// Gives a well-known name back (`ReleaseName`).
    public func releaseName(_ name: String) async throws {
        _ = try await busCall("ReleaseName", [.string(name)])
    }

    // MARK: Remote properties and objects

    /// `org.freedesktop.DBus.Properties.Get`, variant unwrapped.
    public func property(
        _ name: String,
        interface: String,
        destination: String,
        path: DBusObjectPath,
        timeout: Duration = .seconds(25)
    ) async throws -> DBusValue {
        let reply = try await call(
            destination: destination, path: path, interface: "org.freedesktop.DBus.Properties", member: "Get",
            arguments: [.string(interface), .string(name)], timeout: timeout)
        guard let value = reply.first else {
            throw DBusError(name: DBusError.failed, message: "empty reply to Get \(interface).\(name)")
        }
        return value.unwrapped
    }

    /// `org.freedesktop.DBus.Properties.GetAll`, variants unwrapped.
    public func allProperties(
        interface: String,
        destination: String,
        path: DBusObjectPath,
        timeout: Duration = .seconds(25)
    ) async throws -> [String: DBusValue] {
        let reply = try await call(
            destination: destination, path: path, interface: "org.freedesktop.DBus.Properties", member: "GetAll",
            arguments: [.string(interface)], timeout: timeout)
        guard let properties = reply.first?.propertyDictionary else {
            throw DBusError(name: DBusError.failed, message: "GetAll reply is not a{sv}")
        }
        return properties
    }

    /// `org.freedesktop.DBus.Properties.Set` (the value is wrapped in a variant for you).
    public func setProperty(
        _ name: String,
        interface: String,
        to value: DBusValue,
        destination: String,
        path: DBusObjectPath,
        timeout: Duration = .seconds(25)
    ) async throws {
        _ = try await call(
            destination: destination, path: path, interface: "org.freedesktop.DBus.Properties", member: "Set",
            arguments: [.string(interface), .string(name), .variant(value.unwrapped)], timeout: timeout)
    }

    /// `org.freedesktop.DBus.ObjectManager.GetManagedObjects`: path → interface → properties.
    public func managedObjects(
        destination: String,
        path: DBusObjectPath = "/",
        timeout: Duration = .seconds(25)
    ) async throws -> [DBusObjectPath: [String: [String: DBusValue]]] {
        let reply = try await call(
            destination: destination, path: path, interface: "org.freedesktop.DBus.ObjectManager",
            member: "GetManagedObjects", timeout: timeout)
        guard let objects = reply.first?.managedObjects else {
            throw DBusError(name: DBusError.failed, message: "GetManagedObjects reply is not a{oa{sa{sv}}}")
        }
        return objects
    }

    // MARK: Exporting objects

    /// Exports an object at `path` with `interfaces` (replacing what was there). Properties, ObjectManager (if an
    /// object manager is exported at or above `path`, `InterfacesAdded` is emitted) and Introspectable are served
    /// by the connection.
    public func export(_ path: DBusObjectPath, interfaces: [DBusInterface]) throws {
        guard path.isValid else {
            throw DBusError(name: DBusError.invalidArgs, message: "invalid object path \"\(path.rawValue)\"")
        }
        let added = onQueueSync { () -> [DBusObjectPath] in
            var map: [String: DBusInterface] = [:]
            for interface in interfaces { map[interface.name] = interface }
            objects[path] = map
            return managers(above: path)
        }
        for manager in added {
            let payload = DBusValue.dictionary(
                keySignature: "s", valueSignature: "a{sv}",
                Dictionary(
                    uniqueKeysWithValues: interfaces.map {
                        (DBusValue.string($0.name), DBusValue.properties($0.propertyValues))
                    }))
            try emitSignal(
                path: manager, interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesAdded",
                arguments: [.objectPath(path), payload])
        }
    }

    /// Removes the object at `path`, emitting `InterfacesRemoved` under an object manager.
    public func unexport(_ path: DBusObjectPath) throws {
        let (removed, managers) = onQueueSync { () -> ([String], [DBusObjectPath]) in
            let removed = objects.removeValue(forKey: path).map { Array($0.keys) } ?? []
            return (removed, self.managers(above: path))
        }
        guard !removed.isEmpty else { return }
        for manager in managers {
            try emitSignal(
                path: manager, interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesRemoved",
                arguments: [.objectPath(path), .stringArray(removed.sorted())])
        }
    }

    /// Serves `org.freedesktop.DBus.ObjectManager` at `path` for the objects exported below it.
    public func exportObjectManager(at path: DBusObjectPath) {
        onQueueSync { _ = objectManagers.insert(path) }
    }

    /// Changes an exported property and emits `PropertiesChanged`.
    public func setExportedProperty(
        _ name: String,
        interface: String,
        to value: DBusValue,
        at path: DBusObjectPath
    ) throws {
        let changed = onQueueSync { () -> Bool in
            guard objects[path]?[interface] != nil else { return false }
            if var property = objects[path]?[interface]?.properties[name] {
                property.value = value
                objects[path]?[interface]?.properties[name] = property
            } else {
                objects[path]?[interface]?.properties[name] = DBusProperty(value)
            }
            return true
        }
        guard changed else {
            throw DBusError(name: DBusError.unknownInterface, message: "no interface \(interface) exported at \(path)")
        }
        try emitPropertiesChanged(path: path, interface: interface, changed: [name: value])
    }

    private func emitPropertiesChanged(
        path: DBusObjectPath,
        interface: String,
        changed: [String: DBusValue]
    ) throws {
        try emitSignal(
            path: path, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
            arguments: [.string(interface), .properties(changed), .stringArray([])])
    }

    private func managers(above path: DBusObjectPath) -> [DBusObjectPath] {
        objectManagers.filter { path != $0 && path.isEqualOrDescendant(of: $0) }.sorted()
    }

    private func handleMethodCall(_ message: DBusMessage, pointer: OpaquePointer) -> DBusHandlerResult {
        guard let path = message.path, let member = message.member else { return DBUS_HANDLER_RESULT_NOT_YET_HANDLED }
        dbus_message_ref(pointer)
        let request = MessageRef(pointer: pointer)
        let result = answerBuiltIn(message, path: path, member: member)
        switch result {
        case .reply(let values):
            reply(to: request, with: .success(values))
        case .error(let error):
            reply(to: request, with: .failure(error))
        case .run(let method, let call):
            // Starts on this queue: a handler that does not suspend answers without a thread hop.
            Task.immediate {
                let outcome: Result<[DBusValue], DBusError>
                do {
                    outcome = .success(try await method.handler(call))
                } catch let error as DBusError {
                    outcome = .failure(error)
                } catch {
                    outcome = .failure(DBusError(name: DBusError.failed, message: "\(error)"))
                }
                if self.onQueue {
                    self.reply(to: request, with: outcome)
                } else {
                    self.queue.async { self.reply(to: request, with: outcome) }
                }
            }
        case .notHandled:
            dbus_message_unref(pointer)
            return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
        }
        return DBUS_HANDLER_RESULT_HANDLED
    }

    private enum Answer {
        case reply([DBusValue])
        case error(DBusError)
        case run(DBusMethod, DBusMethodCall)
        case notHandled
    }

    private func answerBuiltIn(_ message: DBusMessage, path: DBusObjectPath, member: String) -> Answer {
        let interface = message.interface
        let args = message.body
        if interface == "org.freedesktop.DBus.Introspectable", member == "Introspect" {
            return .reply([.string(Introspection.xml(path: path, objects: objects, managers: objectManagers))])
        }
        if interface == "org.freedesktop.DBus.ObjectManager", objectManagers.contains(path) {
            guard member == "GetManagedObjects" else { return .error(unknownMethod(message)) }
            var result: [DBusValue: DBusValue] = [:]
            for (objectPath, interfaces) in objects where objectPath != path && objectPath.isEqualOrDescendant(of: path)
            {
                var perInterface: [DBusValue: DBusValue] = [:]
                for (name, exported) in interfaces {
                    perInterface[.string(name)] = .properties(exported.propertyValues)
                }
                result[.objectPath(objectPath)] = .dictionary(
                    keySignature: "s", valueSignature: "a{sv}", perInterface)
            }
            return .reply([.dictionary(keySignature: "o", valueSignature: "a{sa{sv}}", result)])
        }
        guard let object = objects[path] else {
            if objectManagers.contains(path) || interface == "org.freedesktop.DBus.Peer" {
                return .notHandled
            }
            return .error(DBusError(name: DBusError.unknownObject, message: "no object at \(path)"))
        }
        if interface == "org.freedesktop.DBus.Properties" {
            return answerProperties(member: member, args: args, path: path, object: object, message: message)
        }
        let exported: DBusInterface?
        if let interface {
            guard let found = object[interface] else {
                return .error(
                    DBusError(name: DBusError.unknownInterface, message: "no interface \(interface) at \(path)"))
            }
            exported = found
        } else {
            exported = object.values.first { $0.methods[member] != nil }
        }
        guard let exported, let method = exported.methods[member] else { return .error(unknownMethod(message)) }
        if let expected = method.inputSignature, message.signature != expected {
            return .error(
                DBusError(
                    name: DBusError.invalidArgs,
                    message: "\(exported.name).\(member) takes (\(expected)), got (\(message.signature))"))
        }
        let call = DBusMethodCall(
            sender: message.sender, path: path, interface: exported.name, member: member, arguments: args)
        return .run(method, call)
    }

    private func unknownMethod(_ message: DBusMessage) -> DBusError {
        DBusError(
            name: DBusError.unknownMethod,
            message: "no method \(message.interface ?? "").\(message.member ?? "") (\(message.signature)) "
                + "at \(message.path?.rawValue ?? "")")
    }

    private func answerProperties(
        member: String,
        args: [DBusValue],
        path: DBusObjectPath,
        object: [String: DBusInterface],
        message: DBusMessage
    ) -> Answer {
        func lookup(_ name: String?) -> DBusInterface? { name.flatMap { object[$0] } }
        switch (member, args.count) {
        case ("Get", 2):
            guard let interfaceName = args[0].string, let name = args[1].string else { break }
            guard let interface = lookup(interfaceName) else {
                return .error(DBusError(name: DBusError.unknownInterface, message: "no interface \(interfaceName)"))
            }
            guard let property = interface.properties[name] else {
                return .error(
                    DBusError(name: DBusError.unknownProperty, message: "no property \(interfaceName).\(name)"))
            }
            return .reply([.variant(property.value)])
        case ("GetAll", 1):
            guard let interfaceName = args[0].string else { break }
            guard let interface = lookup(interfaceName) else {
                return .error(DBusError(name: DBusError.unknownInterface, message: "no interface \(interfaceName)"))
            }
            return .reply([.properties(interface.propertyValues)])
        case ("Set", 3):
            guard let interfaceName = args[0].string, let name = args[1].string, case .variant(let value) = args[2]
            else { break }
            guard let property = lookup(interfaceName)?.properties[name] else {
                return .error(
                    DBusError(name: DBusError.unknownProperty, message: "no property \(interfaceName).\(name)"))
            }
            guard property.writable else {
                return .error(
                    DBusError(name: DBusError.propertyReadOnly, message: "\(interfaceName).\(name) is read-only"))
            }
            guard value.signature == property.value.signature else {
                return .error(
                    DBusError(
                        name: DBusError.invalidArgs,
                        message: "\(interfaceName).\(name) has type \(property.value.signature), got \(value.signature)"
                    ))
            }
            objects[path]?[interfaceName]?.properties[name]?.value = value
            property.didSet?(value)
            try? emitPropertiesChanged(path: path, interface: interfaceName, changed: [name: value])
            return .reply([])
        default:
            break
        }
        return .error(
            DBusError(
                name: DBusError.invalidArgs,
                message: "org.freedesktop.DBus.Properties.\(member) does not take (\(message.signature))"))
    }

    private func reply(to request: MessageRef, with result: Result<[DBusValue], DBusError>) {
        defer { dbus_message_unref(request.pointer) }
        guard let connection = raw, dbus_message_get_no_reply(request.pointer) == 0 else { return }
        var reply: OpaquePointer?
        switch result {
        case .success(let values):
            reply = dbus_message_new_method_return(request.pointer)
            if let message = reply {
                do {
                    try Marshalling.append(values, to: message)
                } catch {
                    dbus_message_unref(message)
                    reply = dbus_message_new_error(request.pointer, error.name, error.message)
                }
            }
        case .failure(let error):
            let name = dbus_validate_error_name(error.name, nil) != 0 ? error.name : DBusError.failed
            reply = dbus_message_new_error(request.pointer, name, error.message)
        }
        guard let reply else { return }
        dbus_connection_send(connection, reply, nil)
        dbus_message_unref(reply)
    }

    // MARK: Watches and timeouts (called by libdbus on the queue)

    fileprivate func addWatch(_ watch: OpaquePointer) -> Bool {
        let handler = WatchHandler(watch: watch, connection: self)
        watches.removeAll { $0.handler == nil }
        watches.append(WeakWatch(handler: handler))
        dbus_watch_set_data(watch, Unmanaged.passRetained(handler).toOpaque(), releaseHandler)
        handler.update()
        return true
    }

    fileprivate func addTimeout(_ timeout: OpaquePointer) -> Bool {
        let handler = TimeoutHandler(timeout: timeout, connection: self)
        dbus_timeout_set_data(timeout, Unmanaged.passRetained(handler).toOpaque(), releaseHandler)
        handler.update()
        return true
    }
}

// MARK: - Queue-confined helpers

/// A libdbus message reference moved to the connection queue.
// @unchecked Sendable: the message is not shared; it is used by one party at a time and released once.
struct MessageRef: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// A method call in flight. Finishing may happen before the continuation is attached (a task cancelled before the
/// call reached the queue); the result then waits for it.
// @unchecked Sendable: all fields are touched on the connection queue only.
final class PendingCall: @unchecked Sendable {
    private var continuation: CheckedContinuation<[DBusValue], any Error>?
    private var result: Result<[DBusValue], any Error>?
    var pending: OpaquePointer?
    var finished: Bool { result != nil }

    func attach(_ continuation: CheckedContinuation<[DBusValue], any Error>) {
        if let result {
            continuation.resume(with: result)
        } else {
            self.continuation = continuation
        }
    }

    func finish(_ result: Result<[DBusValue], any Error>) {
        guard self.result == nil else { return }
        self.result = result
        continuation?.resume(with: result)
        continuation = nil
        if let pending {
            self.pending = nil
            dbus_pending_call_unref(pending)
        }
    }
}

private final class PendingCallBox {
    weak var connection: DBusConnection?
    let call: PendingCall
    init(connection: DBusConnection, call: PendingCall) {
        self.connection = connection
        self.call = call
    }
}

/// The reader thread and the write source for one libdbus watch.
// @unchecked Sendable: created, updated and cancelled on the connection queue; its reader reads and its write source
// fires on that queue.
private final class WatchHandler: @unchecked Sendable {
    let watch: OpaquePointer
    weak var connection: DBusConnection?
    var reader: SocketReader?
    var writeSource: (any DispatchSourceWrite)?

    init(watch: OpaquePointer, connection: DBusConnection) {
        self.watch = watch
        self.connection = connection
    }

    func update() {
        guard let connection else { return }
        let enabled = dbus_watch_get_enabled(watch) != 0
        let flags = dbus_watch_get_flags(watch)
        let fd = dbus_watch_get_unix_fd(watch)
        let wantRead = enabled && flags & DBUS_WATCH_READABLE.rawValue != 0 && connection.readingAllowed
        let wantWrite = enabled && flags & DBUS_WATCH_WRITABLE.rawValue != 0
        if wantRead, reader == nil {
            let queue = connection.queue
            reader = SocketReader(fd: fd) { [weak self] reader in
                queue.sync {
                    // Still this watch's reader, and still wanted: update() and cancel() run on the queue too.
                    guard let self, self.reader === reader else { return }
                    self.handle(DBUS_WATCH_READABLE.rawValue)
                }
            }
            if let reader {
                connection.started(reader)
            } else {
                connection.logger.error("cannot start the D-Bus reader thread (pipe or pthread_create failed)",
                                        metadata: ["unique-name": "\(connection.uniqueName)", "errno": "\(errno)"])
            }
        } else if !wantRead, let reader {
            reader.stop()
            self.reader = nil
        }
        if wantWrite, writeSource == nil {
            let source = DispatchSource.makeWriteSource(fileDescriptor: fd, queue: connection.queue)
            source.setEventHandler { [weak self] in self?.handle(DBUS_WATCH_WRITABLE.rawValue) }
            source.resume()
            writeSource = source
        } else if !wantWrite, let source = writeSource {
            source.cancel()
            writeSource = nil
        }
    }

    func cancel() {
        reader?.stop()
        writeSource?.cancel()
        reader = nil
        writeSource = nil
    }

    private func handle(_ flags: UInt32) {
        if flags & DBUS_WATCH_READABLE.rawValue != 0 { connection?.lastReadAt = .now }
        guard let connection else {
            dbus_watch_handle(watch, flags)
            return
        }
        connection.handleThenDrain { _ = dbus_watch_handle(watch, flags) }
    }
}

/// A thread that waits in `poll` for the bus socket to become readable and then runs the read on the connection's
/// queue from itself: `DispatchQueue.sync` on an idle serial queue runs the block on the calling thread, so one thread
/// wakes between the kernel and the message handlers. (A dispatch read source wakes two: libdispatch's event thread,
/// which then hands the queue to a worker.) The queue stays the one place where libdbus is called; while another
/// block runs there, the read waits for it like any other block.
///
/// `stop()` is asynchronous: the thread leaves at its next wake-up (a byte down a pipe makes one at once) and releases
/// the reader, which closes the pipe.
/// After `stop()` it calls `onReadable` at most once more, which the caller's check on the queue turns away.
final class SocketReader: Sendable {
    private let fd: Int32
    /// A pipe: `stop()` writes to `wakeWrite`, the thread polls `wake`.
    private let wake: Int32
    private let wakeWrite: Int32
    private let stopped = Atomic<Bool>(false)
    private let onReadable: @Sendable (SocketReader) -> Void

    init?(fd: Int32, onReadable: @escaping @Sendable (SocketReader) -> Void) {
        var pipeFds: [Int32] = [-1, -1]
        guard pipe(&pipeFds) == 0 else { return nil }
        for end in pipeFds {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, O_NONBLOCK)
        }
        self.fd = fd
        self.wake = pipeFds[0]
        self.wakeWrite = pipeFds[1]
        self.onReadable = onReadable
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        // The default stack size (8 MB of address space, resident only as used): the whole dispatch runs on this
        // thread, handlers and all (the strap's state machine, the engine's ingest), as it ran on dispatch's workers.
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        var thread = pthread_t()
        let box = Unmanaged.passRetained(self).toOpaque()
        let created = pthread_create(&thread, &attributes, { box in
            let reader = Unmanaged<SocketReader>.fromOpaque(box!).takeRetainedValue()
            reader.run()
            return nil
        }, box)
        guard created == 0 else {
            Unmanaged<SocketReader>.fromOpaque(box).release()
            return nil
        }
    }

    func stop() {
        stopped.store(true, ordering: .sequentiallyConsistent)
        var one: UInt8 = 1
        _ = write(wakeWrite, &one, 1)
    }

    deinit {
        close(wake)
        close(wakeWrite)
    }

    private func run() {
        var fds = [pollfd(fd: wake, events: Int16(POLLIN), revents: 0), pollfd(fd: fd, events: Int16(POLLIN), revents: 0)]
        while !stopped.load(ordering: .sequentiallyConsistent) {
            fds[0].revents = 0
            fds[1].revents = 0
            if poll(&fds, 2, -1) < 0 {
                if errno == EINTR { continue }
                return
            }
            if fds[0].revents != 0 {
                var bytes: (UInt64, UInt64) = (0, 0)
                _ = withUnsafeMutableBytes(of: &bytes) { read(wake, $0.baseAddress, $0.count) }
            }
            if fds[1].revents & Int16(POLLNVAL) != 0 {
                // The socket is closed and the watch about to go: wait for stop() without polling it.
                fds[1].fd = -1
            } else if fds[1].revents != 0, !stopped.load(ordering: .sequentiallyConsistent) {
                onReadable(self)
            }
        }
    }
}

/// The dispatch timer for one libdbus timeout.
// @unchecked Sendable: created, updated and cancelled on the connection queue; its timer fires on that queue.
private final class TimeoutHandler: @unchecked Sendable {
    let timeout: OpaquePointer
    weak var connection: DBusConnection?
    var source: (any DispatchSourceTimer)?

    init(timeout: OpaquePointer, connection: DBusConnection) {
        self.timeout = timeout
        self.connection = connection
    }

    func update() {
        source?.cancel()
        source = nil
        guard let connection, dbus_timeout_get_enabled(timeout) != 0 else { return }
        let interval = DispatchTimeInterval.milliseconds(Int(dbus_timeout_get_interval(timeout)))
        let timer = DispatchSource.makeTimerSource(queue: connection.queue)
        timer.schedule(deadline: .now() + interval, repeating: interval)
        timer.setEventHandler { [weak self] in
            guard let self else { return }
            guard let connection = self.connection else {
                dbus_timeout_handle(self.timeout)
                return
            }
            connection.handleThenDrain { _ = dbus_timeout_handle(self.timeout) }
        }
        timer.resume()
        source = timer
    }

    func cancel() {
        source?.cancel()
        source = nil
    }
}

// MARK: - C callbacks

private func connection(_ data: UnsafeMutableRawPointer?) -> DBusConnection? {
    data.map { Unmanaged<DBusConnection>.fromOpaque($0).takeUnretainedValue() }
}

private let releaseHandler: @convention(c) (UnsafeMutableRawPointer?) -> Void = { data in
    guard let data else { return }
    let object = Unmanaged<AnyObject>.fromOpaque(data).takeRetainedValue()
    (object as? WatchHandler)?.cancel()
    (object as? TimeoutHandler)?.cancel()
}

private let watchAdd: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?) -> dbus_bool_t = { watch, data in
    guard let watch, let connection = connection(data) else { return 0 }
    return connection.addWatch(watch) ? 1 : 0
}

private let watchRemove: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?) -> Void = { watch, _ in
    guard let watch, let data = dbus_watch_get_data(watch) else { return }
    Unmanaged<WatchHandler>.fromOpaque(data).takeUnretainedValue().cancel()
}

private let watchToggled: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?) -> Void = { watch, _ in
    guard let watch, let data = dbus_watch_get_data(watch) else { return }
    Unmanaged<WatchHandler>.fromOpaque(data).takeUnretainedValue().update()
}

private let timeoutAdd: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?) -> dbus_bool_t = { timeout, data in
    guard let timeout, let connection = connection(data) else { return 0 }
    return connection.addTimeout(timeout) ? 1 : 0
}

private let timeoutRemove: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?) -> Void = { timeout, _ in
    guard let timeout, let data = dbus_timeout_get_data(timeout) else { return }
    Unmanaged<TimeoutHandler>.fromOpaque(data).takeUnretainedValue().cancel()
}

private let timeoutToggled: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?) -> Void = { timeout, _ in
    guard let timeout, let data = dbus_timeout_get_data(timeout) else { return }
    Unmanaged<TimeoutHandler>.fromOpaque(data).takeUnretainedValue().update()
}

private let dispatchStatusChanged: @convention(c) (OpaquePointer?, DBusDispatchStatus, UnsafeMutableRawPointer?) -> Void
= { _, status, data in
    guard status == DBUS_DISPATCH_DATA_REMAINS, let connection = connection(data) else { return }
    connection.scheduleDispatch()
}

private let messageFilter:
    @convention(c) (OpaquePointer?, OpaquePointer?, UnsafeMutableRawPointer?) -> DBusHandlerResult = {
        _, message, data in
        guard let message, let connection = connection(data) else { return DBUS_HANDLER_RESULT_NOT_YET_HANDLED }
        return connection.handle(message)
    }

private let pendingCallNotify: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?) -> Void = { _, data in
    guard let data else { return }
    let box = Unmanaged<PendingCallBox>.fromOpaque(data).takeUnretainedValue()
    box.connection?.complete(box.call)
}

private let pendingCallBoxFree: @convention(c) (UnsafeMutableRawPointer?) -> Void = { data in
    guard let data else { return }
    Unmanaged<PendingCallBox>.fromOpaque(data).release()
}
