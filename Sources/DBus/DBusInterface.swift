import Synchronization

/// An incoming method call on an exported object.
public struct DBusMethodCall: Sendable {
    /// Unique name of the caller.
    public var sender: String?
    public var path: DBusObjectPath
    public var interface: String
    public var member: String
    public var arguments: [DBusValue]
}

/// A method of an exported interface.
public struct DBusMethod: Sendable {
    /// Signature the arguments must have (checked before the handler runs; a mismatch answers `InvalidArgs`);
    /// `nil` accepts any arguments.
    public var inputSignature: DBusSignature?
    /// Signature of the reply (used for introspection).
    public var outputSignature: DBusSignature
    /// Produces the reply values. Throw a `DBusError` to answer with that error; any other error answers
    /// `org.freedesktop.DBus.Error.Failed` with its description.
    public var handler: @Sendable (DBusMethodCall) async throws -> [DBusValue]

    public init(
        input: DBusSignature? = "",
        output: DBusSignature = "",
        handler: @escaping @Sendable (DBusMethodCall) async throws -> [DBusValue]
    ) {
        self.inputSignature = input
        self.outputSignature = output
        self.handler = handler
    }
}

/// A property of an exported interface. The connection keeps its current value; see
/// `DBusConnection.setExportedProperty(_:interface:to:at:)`.
public struct DBusProperty: Sendable {
    public var value: DBusValue
    /// Whether `org.freedesktop.DBus.Properties.Set` may change it (the new value must have the same signature).
    public var writable: Bool
    /// Called on the connection's queue after a remote `Set` changed the value; keep it short.
    public var didSet: (@Sendable (DBusValue) -> Void)?

    public init(_ value: DBusValue, writable: Bool = false, didSet: (@Sendable (DBusValue) -> Void)? = nil) {
        self.value = value
        self.writable = writable
        self.didSet = didSet
    }
}

/// An interface of an exported object: methods, properties and (for introspection) signal signatures.
public struct DBusInterface: Sendable {
    public var name: String
    public var methods: [String: DBusMethod]
    public var properties: [String: DBusProperty]
    public var signals: [String: DBusSignature]

    public init(
        _ name: String,
        methods: [String: DBusMethod] = [:],
        properties: [String: DBusProperty] = [:],
        signals: [String: DBusSignature] = [:]
    ) {
        self.name = name
        self.methods = methods
        self.properties = properties
        self.signals = signals
    }

    var propertyValues: [String: DBusValue] { properties.mapValues(\.value) }
}

/// A change of owner of a bus name (the `NameOwnerChanged` signal).
public struct DBusNameOwnerChange: Sendable, Hashable {
    public var name: String
    /// The previous owner's unique name, `nil` if the name was free.
    public var oldOwner: String?
    /// The new owner's unique name, `nil` if the name is now free.
    public var newOwner: String?

    public init(name: String, oldOwner: String?, newOwner: String?) {
        self.name = name
        self.oldOwner = oldOwner
        self.newOwner = newOwner
    }

    /// Reads a `NameOwnerChanged` signal's arguments; `nil` for any other shape.
    public init?(_ message: DBusMessage) {
        guard message.member == "NameOwnerChanged", message.body.count == 3, let name = message.body[0].string,
            let old = message.body[1].string,
            let new = message.body[2].string
        else { return nil }
        self.init(name: name, oldOwner: old.isEmpty ? nil : old, newOwner: new.isEmpty ? nil : new)
    }
}

/// The answer to `RequestName`.
public enum DBusRequestNameReply: UInt32, Sendable {
    case primaryOwner = 1
    case inQueue = 2
    case exists = 3
    case alreadyOwner = 4
}

/// Flags for `RequestName`.
public struct DBusRequestNameFlags: OptionSet, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public static let allowReplacement = Self(rawValue: 0x1)
    public static let replaceExisting = Self(rawValue: 0x2)
    public static let doNotQueue = Self(rawValue: 0x4)
}

/// Which bus to connect to.
public enum DBusBus: Sendable, Hashable, CustomStringConvertible {
    /// The system bus: `DBUS_SYSTEM_BUS_ADDRESS` if set, else `unix:path=/run/dbus/system_bus_socket`.
    case system
    /// The session bus: `DBUS_SESSION_BUS_ADDRESS`.
    case session
    /// A bus at an explicit address such as `unix:path=/tmp/bus`.
    case address(String)

    public var description: String {
        switch self {
        case .system: "system"
        case .session: "session"
        case .address(let address): address
        }
    }
}

/// A stream of values decoded from matching messages; iteration ends when the connection closes. When the last
/// copy of the subscription and its iterators are gone (or iteration is cancelled), the match rules are removed from
/// the bus.
public struct DBusSubscription<Element: Sendable>: AsyncSequence, Sendable {
    let stream: AsyncStream<DBusMessage>
    let token: Token
    let transform: @Sendable (DBusMessage) -> Element?

    /// Ends the stream when no subscription or iterator refers to it any more.
    final class Token: Sendable {
        let continuation: AsyncStream<DBusMessage>.Continuation
        init(_ continuation: AsyncStream<DBusMessage>.Continuation) { self.continuation = continuation }
        deinit { continuation.finish() }
    }

    init(
        stream: AsyncStream<DBusMessage>,
        continuation: AsyncStream<DBusMessage>.Continuation,
        transform: @escaping @Sendable (DBusMessage) -> Element?
    ) {
        self.stream = stream
        self.token = Token(continuation)
        self.transform = transform
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<DBusMessage>.AsyncIterator
        let token: Token
        let transform: @Sendable (DBusMessage) -> Element?

        public mutating func next() async -> Element? {
            while let message = await base.next() {
                if let element = transform(message) { return element }
            }
            return nil
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async -> Element? {
            while let message = await base.next(isolation: actor) {
                if let element = transform(message) { return element }
            }
            return nil
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: stream.makeAsyncIterator(), token: token, transform: transform)
    }

    /// Ends the subscription now (iteration then returns `nil`) and removes its match rules.
    public func cancel() { token.continuation.finish() }
}

/// A handler registered with `DBusConnection.receive(anyOf:handler:)`. `cancel()` (or releasing the last reference)
/// stops the calls and removes the match rules.
public final class DBusHandlerRegistration: Sendable {
    private let cancellation: OnceAction

    init(cancel: @escaping @Sendable () -> Void) { cancellation = OnceAction(cancel) }

    public func cancel() { cancellation.run() }

    deinit { cancel() }
}

/// An action that runs at most once, whichever thread asks first; later calls do nothing. The action runs outside
/// the lock, so it may call back into its owner. Used by the registrations that `cancel()` hands back.
public final class OnceAction: Sendable {
    private let action: Mutex<(@Sendable () -> Void)?>

    public init(_ action: @escaping @Sendable () -> Void) { self.action = Mutex(action) }

    public func run() {
        let body = action.withLock { body -> (@Sendable () -> Void)? in
            defer { body = nil }
            return body
        }
        body?()
    }
}
