/// A D-Bus object path such as `/org/bluez/hci0`.
public struct DBusObjectPath: RawRepresentable, Hashable, Sendable, Comparable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.rawValue = value }
    public var description: String { rawValue }
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

    /// Whether the path is valid by the D-Bus specification (`/`, or `/`-separated non-empty `[A-Za-z0-9_]` elements).
    public var isValid: Bool {
        if rawValue == "/" { return true }
        guard rawValue.hasPrefix("/"), !rawValue.hasSuffix("/") else { return false }
        return rawValue.dropFirst().split(separator: "/", omittingEmptySubsequences: false).allSatisfy { element in
            !element.isEmpty && element.utf8.allSatisfy { $0 == UInt8(ascii: "_") || $0.isASCIIAlphanumeric }
        }
    }

    /// Whether `self` is `other` or lies below it (`/org/bluez/hci0` is under `/org/bluez` and under `/`).
    public func isEqualOrDescendant(of other: DBusObjectPath) -> Bool {
        if other.rawValue == "/" || other == self { return true }
        return rawValue.hasPrefix(other.rawValue + "/")
    }
}

/// A D-Bus type signature such as `a{sv}`.
public struct DBusSignature: RawRepresentable, Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.rawValue = value }
    public var description: String { rawValue }

    /// Whether this is exactly one complete type (what an array element or a variant needs).
    public var isSingleCompleteType: Bool {
        guard let end = DBusSignature.endOfCompleteType(rawValue.utf8, from: rawValue.utf8.startIndex) else {
            return false
        }
        return end == rawValue.utf8.endIndex
    }

    /// Splits a signature into its complete types (`"sa{sv}i"` → `s`, `a{sv}`, `i`); `nil` if it is malformed.
    public var completeTypes: [DBusSignature]? {
        let utf8 = rawValue.utf8
        var types: [DBusSignature] = []
        var index = utf8.startIndex
        while index < utf8.endIndex {
            guard let end = DBusSignature.endOfCompleteType(utf8, from: index) else { return nil }
            types.append(DBusSignature(String(rawValue[index..<end])))
            index = end
        }
        return types
    }

    private static func endOfCompleteType(_ utf8: String.UTF8View, from start: String.Index) -> String.Index? {
        guard start < utf8.endIndex else { return nil }
        switch utf8[start] {
        case UInt8(ascii: "y"), UInt8(ascii: "b"), UInt8(ascii: "n"), UInt8(ascii: "q"), UInt8(ascii: "i"),
            UInt8(ascii: "u"), UInt8(ascii: "x"), UInt8(ascii: "t"), UInt8(ascii: "d"), UInt8(ascii: "s"),
            UInt8(ascii: "o"), UInt8(ascii: "g"), UInt8(ascii: "h"), UInt8(ascii: "v"):
            return utf8.index(after: start)
        case UInt8(ascii: "a"):
            let next = utf8.index(after: start)
            guard next < utf8.endIndex else { return nil }
            if utf8[next] == UInt8(ascii: "{") {
                let key = utf8.index(after: next)
                guard key < utf8.endIndex, DBusValue.basicTypeCodes.contains(utf8[key]) else { return nil }
                guard let valueEnd = endOfCompleteType(utf8, from: utf8.index(after: key)),
                    valueEnd < utf8.endIndex, utf8[valueEnd] == UInt8(ascii: "}")
                else { return nil }
                return utf8.index(after: valueEnd)
            }
            return endOfCompleteType(utf8, from: next)
        case UInt8(ascii: "("):
            var index = utf8.index(after: start)
            var count = 0
            while index < utf8.endIndex, utf8[index] != UInt8(ascii: ")") {
                guard let end = endOfCompleteType(utf8, from: index) else { return nil }
                index = end
                count += 1
            }
            guard index < utf8.endIndex, count > 0 else { return nil }
            return utf8.index(after: index)
        default:
            return nil
        }
    }
}

/// One D-Bus value with its type: every type BlueZ and the D-Bus standard interfaces use.
///
/// Arrays and dictionaries carry their element signatures, so empty ones marshal with the right type:
/// `.array(elementSignature: "s", [])` is an empty `as`, `.dictionary(keySignature: "s", valueSignature: "v", [:])`
/// an empty `a{sv}`. Use the `DBusValue.stringArray(_:)`, `.bytes(_:)`, `.properties(_:)` helpers to build common
/// shapes and the optional accessors (`string`, `uint32`, `propertyDictionary`, …) to read them.
public indirect enum DBusValue: Hashable, Sendable {
    case byte(UInt8)
    case boolean(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(DBusObjectPath)
    case signature(DBusSignature)
    case variant(DBusValue)
    /// An array whose elements all have type `elementSignature`.
    case array(elementSignature: DBusSignature, [DBusValue])
    /// An `ay`, kept as bytes: read and written in one piece, never boxed byte by byte. Equal (and hashes the same)
    /// to `.array(elementSignature: "y", …)` of the same `.byte`s; received `ay`s always arrive in this form.
    case byteArray([UInt8])
    /// An array of dict entries `a{KV}`; keys are basic values.
    case dictionary(keySignature: DBusSignature, valueSignature: DBusSignature, [DBusValue: DBusValue])
    case structure([DBusValue])

    static let basicTypeCodes: Set<UInt8> = Set("ybnqiuxtdsogh".utf8)

    /// The value's D-Bus signature (one complete type).
    public var signature: DBusSignature {
        switch self {
        case .byte: "y"
        case .boolean: "b"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .double: "d"
        case .string: "s"
        case .objectPath: "o"
        case .signature: "g"
        case .variant: "v"
        case .array(let element, _): DBusSignature("a" + element.rawValue)
        case .byteArray: "ay"
        case .dictionary(let key, let value, _): DBusSignature("a{" + key.rawValue + value.rawValue + "}")
        case .structure(let fields): DBusSignature("(" + fields.map(\.signature.rawValue).joined() + ")")
        }
    }

    /// A problem that makes the value impossible to marshal, or `nil` if it is well formed.
    public var marshallingProblem: String? {
        switch checkedSignature() {
        case .success: nil
        case .failure(let problem): problem.text
        }
    }

    private struct Problem: Error {
        let text: String
    }

    /// The signature of a well-formed value, computed in one pass (each node once).
    private func checkedSignature() -> Result<String, Problem> {
        switch self {
        case .objectPath(let path):
            return path.isValid ? .success("o") : .failure(Problem(text: "invalid object path \"\(path.rawValue)\""))
        case .signature(let signature):
            return signature.completeTypes == nil
                ? .failure(Problem(text: "invalid signature \"\(signature.rawValue)\"")) : .success("g")
        case .string(let text):
            return text.utf8.contains(0) ? .failure(Problem(text: "string contains a NUL byte")) : .success("s")
        case .variant(let inner):
            return inner.checkedSignature().map { _ in "v" }
        case .array(let element, let items):
            guard element.isSingleCompleteType else {
                return .failure(Problem(text: "invalid array element signature \"\(element)\""))
            }
            for item in items {
                switch item.checkedSignature() {
                case .failure(let problem): return .failure(problem)
                case .success(let signature) where signature != element.rawValue:
                    return .failure(Problem(text: "array of \(element) holds a \(signature) element"))
                case .success: continue
                }
            }
            return .success("a" + element.rawValue)
        case .dictionary(let key, let value, let entries):
            guard key.rawValue.utf8.count == 1, let code = key.rawValue.utf8.first, Self.basicTypeCodes.contains(code)
            else { return .failure(Problem(text: "dictionary key signature \"\(key)\" is not a basic type")) }
            guard value.isSingleCompleteType else {
                return .failure(Problem(text: "invalid dictionary value signature \"\(value)\""))
            }
            for (entryKey, entryValue) in entries {
                switch entryKey.checkedSignature() {
                case .failure(let problem): return .failure(problem)
                case .success(let signature) where signature != key.rawValue:
                    return .failure(Problem(text: "dictionary with \(key) keys holds a \(signature) key"))
                case .success: break
                }
                switch entryValue.checkedSignature() {
                case .failure(let problem): return .failure(problem)
                case .success(let signature) where signature != value.rawValue:
                    return .failure(Problem(text: "dictionary with \(value) values holds a \(signature) value"))
                case .success: break
                }
            }
            return .success("a{" + key.rawValue + value.rawValue + "}")
        case .structure(let fields):
            if fields.isEmpty { return .failure(Problem(text: "empty struct")) }
            var signature = "("
            for field in fields {
                switch field.checkedSignature() {
                case .failure(let problem): return .failure(problem)
                case .success(let fieldSignature): signature += fieldSignature
                }
            }
            return .success(signature + ")")
        default:
            return .success(self.signature.rawValue)
        }
    }
}

// MARK: - Equality

extension DBusValue {
    /// The bytes of an `ay` in either form, else `nil`.
    private var byteArrayForm: [UInt8]? {
        switch self {
        case .byteArray(let bytes): return bytes
        case .array(let element, let items) where element == "y":
            var bytes: [UInt8] = []
            bytes.reserveCapacity(items.count)
            for item in items {
                guard case .byte(let b) = item else { return nil }
                bytes.append(b)
            }
            return bytes
        default: return nil
        }
    }

    public static func == (lhs: DBusValue, rhs: DBusValue) -> Bool {
        switch (lhs, rhs) {
        case let (.byte(a), .byte(b)): a == b
        case let (.boolean(a), .boolean(b)): a == b
        case let (.int16(a), .int16(b)): a == b
        case let (.uint16(a), .uint16(b)): a == b
        case let (.int32(a), .int32(b)): a == b
        case let (.uint32(a), .uint32(b)): a == b
        case let (.int64(a), .int64(b)): a == b
        case let (.uint64(a), .uint64(b)): a == b
        case let (.double(a), .double(b)): a == b
        case let (.string(a), .string(b)): a == b
        case let (.objectPath(a), .objectPath(b)): a == b
        case let (.signature(a), .signature(b)): a == b
        case let (.variant(a), .variant(b)): a == b
        case let (.byteArray(a), .byteArray(b)): a == b
        case (.byteArray, .array), (.array, .byteArray): lhs.byteArrayForm.map { $0 == rhs.byteArrayForm } ?? false
        case let (.array(ea, a), .array(eb, b)): ea == eb && a == b
        case let (.dictionary(ka, va, a), .dictionary(kb, vb, b)): ka == kb && va == vb && a == b
        case let (.structure(a), .structure(b)): a == b
        default: false
        }
    }

    public func hash(into hasher: inout Hasher) {
        if let bytes = byteArrayForm {
            hasher.combine(13)
            hasher.combine(bytes)
            return
        }
        switch self {
        case .byte(let v): hasher.combine(0); hasher.combine(v)
        case .boolean(let v): hasher.combine(1); hasher.combine(v)
        case .int16(let v): hasher.combine(2); hasher.combine(v)
        case .uint16(let v): hasher.combine(3); hasher.combine(v)
        case .int32(let v): hasher.combine(4); hasher.combine(v)
        case .uint32(let v): hasher.combine(5); hasher.combine(v)
        case .int64(let v): hasher.combine(6); hasher.combine(v)
        case .uint64(let v): hasher.combine(7); hasher.combine(v)
        case .double(let v): hasher.combine(8); hasher.combine(v)
        case .string(let v): hasher.combine(9); hasher.combine(v)
        case .objectPath(let v): hasher.combine(10); hasher.combine(v)
        case .signature(let v): hasher.combine(11); hasher.combine(v)
        case .variant(let v): hasher.combine(12); hasher.combine(v)
        case .array(let e, let items): hasher.combine(14); hasher.combine(e); hasher.combine(items)
        case .byteArray(let bytes): hasher.combine(13); hasher.combine(bytes)
        case .dictionary(let k, let v, let entries):
            hasher.combine(15); hasher.combine(k); hasher.combine(v); hasher.combine(entries)
        case .structure(let fields): hasher.combine(16); hasher.combine(fields)
        }
    }
}

// MARK: - Building

extension DBusValue {
    /// An `as`.
    public static func stringArray(_ strings: [String]) -> DBusValue {
        .array(elementSignature: "s", strings.map(DBusValue.string))
    }

    /// An `ao`.
    public static func objectPathArray(_ paths: [DBusObjectPath]) -> DBusValue {
        .array(elementSignature: "o", paths.map(DBusValue.objectPath))
    }

    /// An `ay`.
    public static func bytes(_ bytes: some Sequence<UInt8>) -> DBusValue {
        .byteArray(Array(bytes))
    }

    /// An `a{sv}` (each value is wrapped in a variant).
    public static func properties(_ properties: [String: DBusValue]) -> DBusValue {
        var entries: [DBusValue: DBusValue] = [:]
        for (key, value) in properties { entries[.string(key)] = .variant(value) }
        return .dictionary(keySignature: "s", valueSignature: "v", entries)
    }
}

// MARK: - Reading

extension DBusValue {
    /// The value inside any number of variant wrappers.
    public var unwrapped: DBusValue {
        if case .variant(let inner) = self { return inner.unwrapped }
        return self
    }

    public var string: String? {
        if case .string(let value) = unwrapped { return value }
        return nil
    }

    public var bool: Bool? {
        if case .boolean(let value) = unwrapped { return value }
        return nil
    }

    public var byte: UInt8? {
        if case .byte(let value) = unwrapped { return value }
        return nil
    }

    public var int16: Int16? {
        if case .int16(let value) = unwrapped { return value }
        return nil
    }

    public var uint16: UInt16? {
        if case .uint16(let value) = unwrapped { return value }
        return nil
    }

    public var int32: Int32? {
        if case .int32(let value) = unwrapped { return value }
        return nil
    }

    public var uint32: UInt32? {
        if case .uint32(let value) = unwrapped { return value }
        return nil
    }

    public var int64: Int64? {
        if case .int64(let value) = unwrapped { return value }
        return nil
    }

    public var uint64: UInt64? {
        if case .uint64(let value) = unwrapped { return value }
        return nil
    }

    public var double: Double? {
        if case .double(let value) = unwrapped { return value }
        return nil
    }

    public var objectPath: DBusObjectPath? {
        if case .objectPath(let value) = unwrapped { return value }
        return nil
    }

    /// Array elements (also the entries of nothing else: dictionaries answer `nil`).
    public var arrayElements: [DBusValue]? {
        switch unwrapped {
        case .array(_, let items): items
        case .byteArray(let bytes): bytes.map(DBusValue.byte)
        default: nil
        }
    }

    /// The fields of a struct.
    public var structFields: [DBusValue]? {
        if case .structure(let fields) = unwrapped { return fields }
        return nil
    }

    /// The entries of a dictionary.
    public var dictionaryEntries: [DBusValue: DBusValue]? {
        if case .dictionary(_, _, let entries) = unwrapped { return entries }
        return nil
    }

    /// An `as` as strings.
    public var stringArray: [String]? {
        guard let items = arrayElements else { return nil }
        let strings = items.compactMap(\.string)
        return strings.count == items.count ? strings : nil
    }

    /// An `ao` as paths.
    public var objectPathArray: [DBusObjectPath]? {
        guard let items = arrayElements else { return nil }
        let paths = items.compactMap(\.objectPath)
        return paths.count == items.count ? paths : nil
    }

    /// An `ay` as bytes.
    public var bytes: [UInt8]? {
        if case .byteArray(let bytes) = unwrapped { return bytes }
        guard let items = arrayElements else { return nil }
        let bytes = items.compactMap(\.byte)
        return bytes.count == items.count ? bytes : nil
    }

    /// An `a{sv}` (or any dictionary with string keys) as `[String: DBusValue]`, variants unwrapped.
    public var propertyDictionary: [String: DBusValue]? {
        guard let entries = dictionaryEntries else { return nil }
        var result: [String: DBusValue] = [:]
        for (key, value) in entries {
            guard let name = key.string else { return nil }
            result[name] = value.unwrapped
        }
        return result
    }

    /// An `a{sa{sv}}` as interface name → properties.
    public var interfacesAndProperties: [String: [String: DBusValue]]? {
        guard let entries = dictionaryEntries else { return nil }
        var result: [String: [String: DBusValue]] = [:]
        for (key, value) in entries {
            guard let name = key.string, let properties = value.propertyDictionary else { return nil }
            result[name] = properties
        }
        return result
    }

    /// An `a{oa{sa{sv}}}` (the reply of `GetManagedObjects`) as path → interface → properties.
    public var managedObjects: [DBusObjectPath: [String: [String: DBusValue]]]? {
        guard let entries = dictionaryEntries else { return nil }
        var result: [DBusObjectPath: [String: [String: DBusValue]]] = [:]
        for (key, value) in entries {
            guard let path = key.objectPath, let interfaces = value.interfacesAndProperties else { return nil }
            result[path] = interfaces
        }
        return result
    }
}

extension UInt8 {
    fileprivate var isASCIIAlphanumeric: Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self)
    }
}
