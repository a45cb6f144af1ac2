/// A JSON document as a value: what every event, config and command is encoded to and decoded from.
///
/// Serialisation is deterministic (object keys sorted) and keeps the wire types the Synheart SDKs expect:
/// integers print without a decimal point, doubles always with one (`72.0`), and non-finite doubles are
/// never produced: an object member or array element holding one is left out (and counted in `NonFiniteValues`),
/// never written as a made-up number. `null` exists only so that input containing it can be represented and rejected with a
/// precise message; the gateway never writes one.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])
}

extension JSONValue {
    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// An integer, also from a double with no fractional part (`30.0`), as Darwin's NSNumber bridging allows.
    public var intValue: Int64? {
        switch self {
        case .int(let i): return i
        case .double(let d) where d.rounded() == d && abs(d) < 9.0e15: return Int64(d)
        default: return nil
        }
    }

    /// A number of either wire type as a Double.
    public var doubleValue: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }

    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    public var objectValue: [String: JSONValue]? {
        if case .object(let o) = self { return o }
        return nil
    }

    /// A Foundation-free `[String: Any]`-style view: Int64, Double, Bool, String, arrays and dictionaries.
    public var anyValue: Any {
        switch self {
        case .null: return Optional<Any>.none as Any
        case .bool(let b): return b
        case .int(let i): return i
        case .double(let d): return d
        case .string(let s): return s
        case .array(let a): return a.map(\.anyValue)
        case .object(let o): return o.mapValues(\.anyValue)
        }
    }

    /// Converts a dictionary built by an SDK-style caller (`[String: Any]` with Int, Int64, Double, Bool, String,
    /// arrays and nested dictionaries) into a value. Anything else becomes `nil`.
    public init?(any: Any) {
        switch any {
        case let v as Bool: self = .bool(v)
        case let v as Int: self = .int(Int64(v))
        case let v as Int64: self = .int(v)
        case let v as Int32: self = .int(Int64(v))
        case let v as UInt8: self = .int(Int64(v))
        case let v as UInt16: self = .int(Int64(v))
        case let v as UInt32: self = .int(Int64(v))
        case let v as Double: self = .double(v)
        case let v as Float: self = .double(Double(v))
        case let v as String: self = .string(v)
        case let v as [Any]:
            var items: [JSONValue] = []
            for element in v {
                guard let j = JSONValue(any: element) else { return nil }
                items.append(j)
            }
            self = .array(items)
        case let v as [String: Any]:
            var members: [String: JSONValue] = [:]
            for (k, element) in v {
                guard let j = JSONValue(any: element) else { return nil }
                members[k] = j
            }
            self = .object(members)
        default: return nil
        }
    }
}

// MARK: - Serialisation

extension JSONValue {
    /// Compact JSON text with sorted keys.
    public var jsonString: String {
        var out = ""
        write(to: &out)
        return out
    }

    func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .int(let i): out += String(i)
        case .double(let d): out += JSONValue.format(d)
        case .string(let s): JSONValue.writeString(s, to: &out)
        case .array(let items):
            out += "["
            var first = true
            for item in items where item.isWritable(at: "array element") {
                if !first { out += "," }
                first = false
                item.write(to: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            var first = true
            for key in members.keys.sorted() where members[key]!.isWritable(at: key) {
                if !first { out += "," }
                first = false
                JSONValue.writeString(key, to: &out)
                out += ":"
                members[key]!.write(to: &out)
            }
            out += "}"
        }
    }

    /// False (and counted) for a non-finite double, which is left out of the text.
    private func isWritable(at place: String) -> Bool {
        if case .double(let d) = self, !d.isFinite {
            NonFiniteValues.drop(place)
            return false
        }
        return true
    }

    /// Shortest round-trip text, always with a decimal point or exponent so the value stays a double on the wire.
    static func format(_ d: Double) -> String {
        // Reached only for a non-finite value at the top level; members and elements are left out before this.
        guard d.isFinite else { return "null" }
        // −0 (a negative value rounded to zero, say) is written as 0: "-0.0" reads as a sign that is not there.
        if d == 0 { return "0.0" }
        let text = "\(d)"
        // Byte by byte: `String.contains(_:)` with Foundation imported is NSString's search, costly on every number.
        if text.utf8.contains(where: { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") }) {
            return text
        }
        return text + ".0"
    }

    static func writeString(_ s: String, to out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case let c where c.value < 0x20:
                let hex = String(c.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}

// MARK: - Parsing

/// Why a JSON text could not be read, with the byte offset where reading stopped.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public let offset: Int
    public let reason: String
    public var description: String { "invalid JSON at byte \(offset): \(reason)" }
}

extension JSONValue {
    /// Parses one JSON value. Strict (RFC 8259): no comments, no trailing commas, no trailing garbage.
    /// `maxDepth` bounds nesting so hostile input cannot exhaust the stack.
    public init(parsing text: String, maxDepth: Int = 64) throws(JSONParseError) {
        var parser = JSONParser(bytes: Array(text.utf8), maxDepth: maxDepth)
        self = try parser.parseDocument()
    }

    public init(parsing bytes: [UInt8], maxDepth: Int = 64) throws(JSONParseError) {
        var parser = JSONParser(bytes: bytes, maxDepth: maxDepth)
        self = try parser.parseDocument()
    }
}

private struct JSONParser {
    let bytes: [UInt8]
    let maxDepth: Int
    var i = 0

    init(bytes: [UInt8], maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    func fail(_ reason: String) -> JSONParseError { JSONParseError(offset: i, reason: reason) }

    mutating func skipSpace() {
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0A || bytes[i] == 0x0D || bytes[i] == 0x09 { i += 1 }
    }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        skipSpace()
        let v = try parseValue(depth: 0)
        skipSpace()
        guard i == bytes.count else { throw fail("unexpected data after the value") }
        return v
    }

    mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth < maxDepth else { throw fail("nesting deeper than \(maxDepth)") }
        guard i < bytes.count else { throw fail("unexpected end of input") }
        switch bytes[i] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth)
        case UInt8(ascii: "["): return try parseArray(depth: depth)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw fail(unexpectedCharacter())
        }
    }

    /// The character at `i` named for a person: decoded from its UTF-8 bytes (a byte read alone as Latin-1 showed a
    /// byte order mark as 'ï'), with its code point when it is not printable ASCII.
    func unexpectedCharacter() -> String {
        var decoder = UTF8()
        var rest = bytes[i...].makeIterator()
        guard case .scalarValue(let scalar) = decoder.decode(&rest) else {
            return "a byte (0x\(String(bytes[i], radix: 16, uppercase: true))) that is not UTF-8"
        }
        if scalar == "\u{FEFF}" { return "a byte order mark (U+FEFF): send the JSON without it" }
        let hex = String(scalar.value, radix: 16, uppercase: true)
        let code = "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
        if scalar.isASCII && scalar.value >= 0x20 && scalar.value < 0x7F { return "unexpected character '\(scalar)'" }
        return scalar.properties.generalCategory == .control
            ? "unexpected character \(code)" : "unexpected character '\(scalar)' (\(code))"
    }

    mutating func literal(_ word: String) throws(JSONParseError) {
        for b in word.utf8 {
            guard i < bytes.count, bytes[i] == b else { throw fail("invalid literal, expected \(word)") }
            i += 1
        }
    }

    mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONValue {
        i += 1
        var members: [String: JSONValue] = [:]
        skipSpace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
        while true {
            skipSpace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
            let key = try parseString()
            skipSpace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw fail("expected ':' after key") }
            i += 1
            skipSpace()
            members[key] = try parseValue(depth: depth + 1)
            skipSpace()
            guard i < bytes.count else { throw fail("unterminated object") }
            if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            if bytes[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
            throw fail("expected ',' or '}' in object")
        }
    }

    mutating func parseArray(depth: Int) throws(JSONParseError) -> JSONValue {
        i += 1
        var items: [JSONValue] = []
        skipSpace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
        while true {
            skipSpace()
            items.append(try parseValue(depth: depth + 1))
            skipSpace()
            guard i < bytes.count else { throw fail("unterminated array") }
            if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            if bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
            throw fail("expected ',' or ']' in array")
        }
    }

    mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard i + 4 <= bytes.count else { throw fail("truncated \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[i]
            let d: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = UInt32(c - UInt8(ascii: "A") + 10)
            default: throw fail("invalid hex digit in \\u escape")
            }
            v = v * 16 + d
            i += 1
        }
        return v
    }

    mutating func parseString() throws(JSONParseError) -> String {
        i += 1
        var scalars = String.UnicodeScalarView()
        var run = i
        var utf8: [UInt8] = []
        func flush(_ from: Int, _ to: Int) { utf8.append(contentsOf: bytes[from..<to]) }
        while true {
            guard i < bytes.count else { throw fail("unterminated string") }
            let c = bytes[i]
            if c == UInt8(ascii: "\"") {
                flush(run, i)
                i += 1
                break
            }
            if c < 0x20 { throw fail("control character in string") }
            if c == UInt8(ascii: "\\") {
                flush(run, i)
                i += 1
                guard i < bytes.count else { throw fail("unterminated escape") }
                let e = bytes[i]
                i += 1
                var append: Unicode.Scalar?
                switch e {
                case UInt8(ascii: "\""): append = "\""
                case UInt8(ascii: "\\"): append = "\\"
                case UInt8(ascii: "/"): append = "/"
                case UInt8(ascii: "b"): append = "\u{08}"
                case UInt8(ascii: "f"): append = "\u{0C}"
                case UInt8(ascii: "n"): append = "\n"
                case UInt8(ascii: "r"): append = "\r"
                case UInt8(ascii: "t"): append = "\t"
                case UInt8(ascii: "u"):
                    var code = try parseHex4()
                    if (0xD800...0xDBFF).contains(code) {
                        guard i + 6 <= bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else {
                            throw fail("unpaired surrogate")
                        }
                        i += 2
                        let low = try parseHex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw fail("invalid low surrogate") }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(code) {
                        throw fail("unpaired surrogate")
                    }
                    append = Unicode.Scalar(code)
                default: throw fail("invalid escape")
                }
                guard let scalar = append else { throw fail("invalid escape") }
                utf8.append(contentsOf: Array(String(Character(scalar)).utf8))
                run = i
                continue
            }
            i += 1
        }
        guard let s = String(validating: utf8, as: UTF8.self) else { throw fail("invalid UTF-8 in string") }
        scalars.append(contentsOf: s.unicodeScalars)
        return String(scalars)
    }

    mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = i
        var isInteger = true
        if bytes[i] == UInt8(ascii: "-") { i += 1 }
        guard i < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i]) else { throw fail("invalid number") }
        if bytes[i] == UInt8(ascii: "0") {
            i += 1
        } else {
            while i < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i]) { i += 1 }
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
            isInteger = false
            i += 1
            guard i < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i]) else { throw fail("invalid fraction") }
            while i < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i]) { i += 1 }
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            isInteger = false
            i += 1
            if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
            guard i < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i]) else { throw fail("invalid exponent") }
            while i < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i]) { i += 1 }
        }
        let text = String(decoding: bytes[start..<i], as: UTF8.self)
        if isInteger, let v = Int64(text) { return .int(v) }
        guard let d = Double(text), d.isFinite else { throw JSONParseError(offset: start, reason: "number out of range") }
        return .double(d)
    }
}
