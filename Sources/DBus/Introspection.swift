/// Builds `org.freedesktop.DBus.Introspectable.Introspect` XML for exported objects.
enum Introspection {
    static func xml(
        path: DBusObjectPath,
        objects: [DBusObjectPath: [String: DBusInterface]],
        managers: Set<DBusObjectPath>
    ) -> String {
        var lines = [
            #"<!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN""#,
            #" "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">"#,
            "<node>",
        ]
        var standard = ["org.freedesktop.DBus.Introspectable"]
        if objects[path] != nil { standard.append("org.freedesktop.DBus.Properties") }
        if managers.contains(path) { standard.append("org.freedesktop.DBus.ObjectManager") }
        for name in standard { lines.append(#"  <interface name="\#(name)"/>"#) }
        for interface in (objects[path] ?? [:]).values.sorted(by: { $0.name < $1.name }) {
            lines.append(#"  <interface name="\#(escape(interface.name))">"#)
            for (name, method) in interface.methods.sorted(by: { $0.key < $1.key }) {
                lines.append(#"    <method name="\#(escape(name))">"#)
                for type in method.inputSignature?.completeTypes ?? [] {
                    lines.append(#"      <arg type="\#(escape(type.rawValue))" direction="in"/>"#)
                }
                for type in method.outputSignature.completeTypes ?? [] {
                    lines.append(#"      <arg type="\#(escape(type.rawValue))" direction="out"/>"#)
                }
                lines.append("    </method>")
            }
            for (name, signature) in interface.signals.sorted(by: { $0.key < $1.key }) {
                lines.append(#"    <signal name="\#(escape(name))">"#)
                for type in signature.completeTypes ?? [] {
                    lines.append(#"      <arg type="\#(escape(type.rawValue))"/>"#)
                }
                lines.append("    </signal>")
            }
            for (name, property) in interface.properties.sorted(by: { $0.key < $1.key }) {
                let access = property.writable ? "readwrite" : "read"
                let type = escape(property.value.signature.rawValue)
                lines.append(#"    <property name="\#(escape(name))" type="\#(type)" access="\#(access)"/>"#)
            }
            lines.append("  </interface>")
        }
        for child in children(of: path, among: Set(objects.keys).union(managers)) {
            lines.append(#"  <node name="\#(escape(child))"/>"#)
        }
        lines.append("</node>")
        return lines.joined(separator: "\n")
    }

    /// Names of the direct children of `path` that lead to exported objects.
    static func children(of path: DBusObjectPath, among paths: Set<DBusObjectPath>) -> [String] {
        let prefix = path.rawValue == "/" ? "/" : path.rawValue + "/"
        var names: Set<String> = []
        for candidate in paths where candidate.rawValue.hasPrefix(prefix) && candidate != path {
            let rest = candidate.rawValue.dropFirst(prefix.count)
            if let first = rest.split(separator: "/").first { names.insert(String(first)) }
        }
        return names.sorted()
    }

    private static func escape(_ text: String) -> String {
        var result = ""
        for character in text {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            default: result.append(character)
            }
        }
        return result
    }
}
