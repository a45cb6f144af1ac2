import CDBus

/// A received D-Bus message, fully decoded (it holds no libdbus memory).
public struct DBusMessage: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        case methodCall, methodReturn, error, signal
    }

    public var kind: Kind
    public var serial: UInt32
    public var replySerial: UInt32
    /// Unique name of the sender (e.g. `:1.42`); `nil` for messages the library made itself.
    public var sender: String?
    public var destination: String?
    public var path: DBusObjectPath?
    public var interface: String?
    public var member: String?
    public var errorName: String?
    public var signature: DBusSignature
    /// The arguments.
    public var body: [DBusValue]
    /// When the connection read the message from the bus socket (monotonic; for messages built locally, when they
    /// were built).
    public var receivedAt: ContinuousClock.Instant

    public init(
        kind: Kind,
        serial: UInt32 = 0,
        replySerial: UInt32 = 0,
        sender: String? = nil,
        destination: String? = nil,
        path: DBusObjectPath? = nil,
        interface: String? = nil,
        member: String? = nil,
        errorName: String? = nil,
        body: [DBusValue] = []
    ) {
        self.kind = kind
        self.serial = serial
        self.replySerial = replySerial
        self.sender = sender
        self.destination = destination
        self.path = path
        self.interface = interface
        self.member = member
        self.errorName = errorName
        self.signature = DBusSignature(body.map(\.signature.rawValue).joined())
        self.body = body
        self.receivedAt = .now
    }

    public var description: String {
        let target = [path?.rawValue, [interface, member].compactMap(\.self).joined(separator: ".")]
            .compactMap(\.self).joined(separator: " ")
        return "\(kind) \(target) (\(signature)) from \(sender ?? "-")"
    }

    /// The message as a `DBusError`, for error replies.
    var asError: DBusError {
        DBusError(name: errorName ?? DBusError.failed, message: body.first?.string ?? "")
    }

    /// Decodes a libdbus message read at `receivedAt`.
    init(decoding message: OpaquePointer, receivedAt: ContinuousClock.Instant = .now) {
        func text(_ pointer: UnsafePointer<CChar>?) -> String? { pointer.map { String(cString: $0) } }
        let kind: Kind
        switch dbus_message_get_type(message) {
        case DBUS_MESSAGE_TYPE_METHOD_CALL: kind = .methodCall
        case DBUS_MESSAGE_TYPE_METHOD_RETURN: kind = .methodReturn
        case DBUS_MESSAGE_TYPE_ERROR: kind = .error
        default: kind = .signal
        }
        self.kind = kind
        self.serial = dbus_message_get_serial(message)
        self.replySerial = dbus_message_get_reply_serial(message)
        self.sender = text(dbus_message_get_sender(message))
        self.destination = text(dbus_message_get_destination(message))
        self.path = text(dbus_message_get_path(message)).map(DBusObjectPath.init(rawValue:))
        self.interface = text(dbus_message_get_interface(message))
        self.member = text(dbus_message_get_member(message))
        self.errorName = text(dbus_message_get_error_name(message))
        self.signature = DBusSignature(text(dbus_message_get_signature(message)) ?? "")
        self.body = Marshalling.read(message)
        self.receivedAt = receivedAt
    }
}

/// A D-Bus match rule, as passed to `AddMatch` (e.g. `type='signal',interface='org.freedesktop.DBus.Properties'`).
///
/// Set the fields you want to match on; `nil` fields match anything.
public struct DBusMatchRule: Sendable, Hashable, CustomStringConvertible {
    public var type: DBusMessage.Kind? = .signal
    /// A unique or well-known bus name. Well-known names are resolved by the bus; locally, a well-known `sender` is
    /// not checked again (signals carry the owner's unique name).
    public var sender: String?
    public var interface: String?
    public var member: String?
    public var path: DBusObjectPath?
    /// Matches `path` itself and every path below it.
    public var pathNamespace: DBusObjectPath?
    public var destination: String?
    /// The first argument, when it is a string, equals this.
    public var arg0: String?
    /// The first argument (a string or object path) equals this, or one of the two ends in `/` and is a prefix of
    /// the other (the D-Bus `arg0path` rule).
    public var arg0Path: String?

    public init(
        type: DBusMessage.Kind? = .signal,
        sender: String? = nil,
        interface: String? = nil,
        member: String? = nil,
        path: DBusObjectPath? = nil,
        pathNamespace: DBusObjectPath? = nil,
        destination: String? = nil,
        arg0: String? = nil,
        arg0Path: String? = nil
    ) {
        self.type = type
        self.sender = sender
        self.interface = interface
        self.member = member
        self.path = path
        self.pathNamespace = pathNamespace
        self.destination = destination
        self.arg0 = arg0
        self.arg0Path = arg0Path
    }

    /// The rule string sent to the bus.
    public var description: String {
        var parts: [String] = []
        func add(_ key: String, _ value: String?) {
            guard let value else { return }
            let escaped = value.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''")
            parts.append("\(key)='\(escaped)'")
        }
        let typeName: String? =
            switch type {
            case .signal: "signal"
            case .methodCall: "method_call"
            case .methodReturn: "method_return"
            case .error: "error"
            case nil: nil
            }
        add("type", typeName)
        add("sender", sender)
        add("interface", interface)
        add("member", member)
        add("path", path?.rawValue)
        add("path_namespace", pathNamespace?.rawValue)
        add("destination", destination)
        add("arg0", arg0)
        add("arg0path", arg0Path)
        return parts.joined(separator: ",")
    }

    /// Whether `message` satisfies the rule (as the bus would decide, except for well-known sender names).
    public func matches(_ message: DBusMessage) -> Bool {
        if let type, message.kind != type { return false }
        if let sender, sender.hasPrefix(":"), message.sender != sender { return false }
        if let interface, message.interface != interface { return false }
        if let member, message.member != member { return false }
        if let path, message.path != path { return false }
        if let pathNamespace {
            guard let messagePath = message.path, messagePath.isEqualOrDescendant(of: pathNamespace) else {
                return false
            }
        }
        if let destination, message.destination != destination { return false }
        if let arg0 {
            guard case .string(let first)? = message.body.first, first == arg0 else { return false }
        }
        if let arg0Path {
            let first: String
            switch message.body.first {
            case .string(let text)?: first = text
            case .objectPath(let path)?: first = path.rawValue
            default: return false
            }
            let prefixMatch =
                first == arg0Path || (arg0Path.hasSuffix("/") && first.hasPrefix(arg0Path))
                || (first.hasSuffix("/") && arg0Path.hasPrefix(first))
            if !prefixMatch { return false }
        }
        return true
    }
}
