import CDBus

#if canImport(Glibc)
import Glibc
#endif

/// Writing and reading `DBusValue`s through libdbus message iterators. Runs on the connection queue or on
/// messages nobody else holds yet.
enum Marshalling {
    /// Appends `values` to the body of `message`.
    static func append(_ values: [DBusValue], to message: OpaquePointer) throws(DBusError) {
        for value in values {
            if let problem = value.marshallingProblem {
                throw DBusError(name: DBusError.invalidArgs, message: "cannot marshal \(value.signature): \(problem)")
            }
        }
        var iter = DBusMessageIter()
        dbus_message_iter_init_append(message, &iter)
        for value in values {
            guard append(value, to: &iter) else { throw DBusError.outOfMemory }
        }
    }

    private static func appendBasic<T>(_ type: Int32, _ value: T, to iter: inout DBusMessageIter) -> Bool {
        var copy = value
        return withUnsafePointer(to: &copy) { CDBus_iter_append_basic(&iter, type, $0) } != 0
    }

    private static func appendString(_ type: Int32, _ text: String, to iter: inout DBusMessageIter) -> Bool {
        text.withCString { cString in
            var pointer: UnsafePointer<CChar>? = cString
            return withUnsafePointer(to: &pointer) { CDBus_iter_append_basic(&iter, type, $0) } != 0
        }
    }

    private static func appendContainer(
        _ type: Int32,
        signature: String?,
        to iter: inout DBusMessageIter,
        _ body: (inout DBusMessageIter) -> Bool
    ) -> Bool {
        var sub = DBusMessageIter()
        let opened: Bool
        if let signature {
            opened = signature.withCString { dbus_message_iter_open_container(&iter, type, $0, &sub) } != 0
        } else {
            opened = dbus_message_iter_open_container(&iter, type, nil, &sub) != 0
        }
        guard opened else { return false }
        guard body(&sub) else {
            dbus_message_iter_abandon_container(&iter, &sub)
            return false
        }
        return dbus_message_iter_close_container(&iter, &sub) != 0
    }

    private static func append(_ value: DBusValue, to iter: inout DBusMessageIter) -> Bool {
        switch value {
        case .byte(let v): return appendBasic(CDBus_TYPE_BYTE, v, to: &iter)
        case .boolean(let v): return appendBasic(CDBus_TYPE_BOOLEAN, dbus_bool_t(v ? 1 : 0), to: &iter)
        case .int16(let v): return appendBasic(CDBus_TYPE_INT16, v, to: &iter)
        case .uint16(let v): return appendBasic(CDBus_TYPE_UINT16, v, to: &iter)
        case .int32(let v): return appendBasic(CDBus_TYPE_INT32, v, to: &iter)
        case .uint32(let v): return appendBasic(CDBus_TYPE_UINT32, v, to: &iter)
        case .int64(let v): return appendBasic(CDBus_TYPE_INT64, v, to: &iter)
        case .uint64(let v): return appendBasic(CDBus_TYPE_UINT64, v, to: &iter)
        case .double(let v): return appendBasic(CDBus_TYPE_DOUBLE, v, to: &iter)
        case .string(let v): return appendString(CDBus_TYPE_STRING, v, to: &iter)
        case .objectPath(let v): return appendString(CDBus_TYPE_OBJECT_PATH, v.rawValue, to: &iter)
        case .signature(let v): return appendString(CDBus_TYPE_SIGNATURE, v.rawValue, to: &iter)
        case .variant(let inner):
            return appendContainer(CDBus_TYPE_VARIANT, signature: inner.signature.rawValue, to: &iter) { sub in
                append(inner, to: &sub)
            }
        case .byteArray(let bytes):
            return appendContainer(CDBus_TYPE_ARRAY, signature: "y", to: &iter) { sub in
                bytes.withUnsafeBufferPointer { buffer in
                    // libdbus takes the address of a pointer to the elements.
                    var start: UnsafePointer<UInt8>? = buffer.baseAddress
                    return withUnsafePointer(to: &start) {
                        dbus_message_iter_append_fixed_array(&sub, CDBus_TYPE_BYTE, $0, Int32(buffer.count))
                    } != 0
                }
            }
        case .array(let element, let items):
            return appendContainer(CDBus_TYPE_ARRAY, signature: element.rawValue, to: &iter) { sub in
                items.allSatisfy { append($0, to: &sub) }
            }
        case .dictionary(let key, let valueSignature, let entries):
            let entrySignature = "{" + key.rawValue + valueSignature.rawValue + "}"
            return appendContainer(CDBus_TYPE_ARRAY, signature: entrySignature, to: &iter) { sub in
                entries.allSatisfy { entry in
                    appendContainer(CDBus_TYPE_DICT_ENTRY, signature: nil, to: &sub) { pair in
                        append(entry.key, to: &pair) && append(entry.value, to: &pair)
                    }
                }
            }
        case .structure(let fields):
            return appendContainer(CDBus_TYPE_STRUCT, signature: nil, to: &iter) { sub in
                fields.allSatisfy { append($0, to: &sub) }
            }
        }
    }

    // MARK: Reading

    /// Reads the whole body of `message`.
    static func read(_ message: OpaquePointer) -> [DBusValue] {
        var iter = DBusMessageIter()
        guard dbus_message_iter_init(message, &iter) != 0 else { return [] }
        var values: [DBusValue] = []
        while dbus_message_iter_get_arg_type(&iter) != CDBus_TYPE_INVALID {
            if let value = readValue(&iter) { values.append(value) }
            dbus_message_iter_next(&iter)
        }
        return values
    }

    private static func basic<T>(_ iter: inout DBusMessageIter, _ zero: T) -> T {
        var value = zero
        withUnsafeMutablePointer(to: &value) { dbus_message_iter_get_basic(&iter, $0) }
        return value
    }

    private static func basicString(_ iter: inout DBusMessageIter) -> String {
        var pointer: UnsafePointer<CChar>? = nil
        withUnsafeMutablePointer(to: &pointer) { dbus_message_iter_get_basic(&iter, $0) }
        return pointer.map { String(cString: $0) } ?? ""
    }

    private static func signature(of iter: inout DBusMessageIter) -> String {
        guard let raw = dbus_message_iter_get_signature(&iter) else { return "" }
        defer { dbus_free(raw) }
        return String(cString: raw)
    }

    private static func readValue(_ iter: inout DBusMessageIter) -> DBusValue? {
        let type = dbus_message_iter_get_arg_type(&iter)
        switch type {
        case CDBus_TYPE_BYTE: return .byte(basic(&iter, UInt8(0)))
        case CDBus_TYPE_BOOLEAN: return .boolean(basic(&iter, dbus_bool_t(0)) != 0)
        case CDBus_TYPE_INT16: return .int16(basic(&iter, Int16(0)))
        case CDBus_TYPE_UINT16: return .uint16(basic(&iter, UInt16(0)))
        case CDBus_TYPE_INT32: return .int32(basic(&iter, Int32(0)))
        case CDBus_TYPE_UINT32: return .uint32(basic(&iter, UInt32(0)))
        case CDBus_TYPE_INT64: return .int64(basic(&iter, Int64(0)))
        case CDBus_TYPE_UINT64: return .uint64(basic(&iter, UInt64(0)))
        case CDBus_TYPE_DOUBLE: return .double(basic(&iter, Double(0)))
        case CDBus_TYPE_UNIX_FD:
            // File descriptors are not negotiated by this layer; libdbus hands out a dup we close at once.
            let fd = basic(&iter, Int32(-1))
            if fd >= 0 { _ = close(fd) }
            return nil
        case CDBus_TYPE_STRING: return .string(basicString(&iter))
        case CDBus_TYPE_OBJECT_PATH: return .objectPath(DBusObjectPath(basicString(&iter)))
        case CDBus_TYPE_SIGNATURE: return .signature(DBusSignature(basicString(&iter)))
        case CDBus_TYPE_VARIANT:
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            return readValue(&sub).map(DBusValue.variant)
        case CDBus_TYPE_STRUCT:
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            var fields: [DBusValue] = []
            while dbus_message_iter_get_arg_type(&sub) != CDBus_TYPE_INVALID {
                if let field = readValue(&sub) { fields.append(field) }
                dbus_message_iter_next(&sub)
            }
            return .structure(fields)
        case CDBus_TYPE_ARRAY:
            let arraySignature = signature(of: &iter)
            var sub = DBusMessageIter()
            if dbus_message_iter_get_element_type(&iter) == CDBus_TYPE_DICT_ENTRY {
                // "a{KV}": one key code, then the value's complete type.
                let inner = arraySignature.dropFirst(2).dropLast()
                let key = DBusSignature(String(inner.prefix(1)))
                let value = DBusSignature(String(inner.dropFirst()))
                dbus_message_iter_recurse(&iter, &sub)
                var entries: [DBusValue: DBusValue] = [:]
                while dbus_message_iter_get_arg_type(&sub) == CDBus_TYPE_DICT_ENTRY {
                    var pair = DBusMessageIter()
                    dbus_message_iter_recurse(&sub, &pair)
                    if let k = readValue(&pair), dbus_message_iter_next(&pair) != 0, let v = readValue(&pair) {
                        entries[k] = v
                    }
                    dbus_message_iter_next(&sub)
                }
                return .dictionary(keySignature: key, valueSignature: value, entries)
            }
            let element = DBusSignature(String(arraySignature.dropFirst()))
            dbus_message_iter_recurse(&iter, &sub)
            if dbus_message_iter_get_element_type(&iter) == CDBus_TYPE_BYTE {
                var pointer: UnsafePointer<UInt8>? = nil
                var count: Int32 = 0
                withUnsafeMutablePointer(to: &pointer) { dbus_message_iter_get_fixed_array(&sub, $0, &count) }
                // One copy into the array, no per-byte boxing (notifications arrive this way).
                return .byteArray(pointer.map { Array(UnsafeBufferPointer(start: $0, count: Int(count))) } ?? [])
            }
            var items: [DBusValue] = []
            while dbus_message_iter_get_arg_type(&sub) != CDBus_TYPE_INVALID {
                if let item = readValue(&sub) { items.append(item) }
                dbus_message_iter_next(&sub)
            }
            return .array(elementSignature: element, items)
        default:
            return nil
        }
    }
}
