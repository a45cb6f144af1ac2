import Foundation

/// Where the broker is: `mqtt://[user[:password]@]HOST[:PORT]` (1883) or `mqtts://…` (8883, TLS).
public struct MQTTBrokerURL: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var tls: Bool
    public var username: String?
    public var password: String?

    public init(host: String, port: Int? = nil, tls: Bool = false, username: String? = nil, password: String? = nil) {
        self.host = host
        self.tls = tls
        self.port = port ?? (tls ? 8883 : 1883)
        self.username = username
        self.password = password
    }

    /// Parses the `--mqtt` value; errors say what is wrong and show the form expected.
    public init(parsing text: String) throws(MQTTError) {
        let form = "expected mqtt://[user[:password]@]HOST[:PORT] or mqtts://…"
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased() else {
            throw MQTTError(.invalidURL, "\(text) is not a URL; \(form)")
        }
        guard scheme == "mqtt" || scheme == "mqtts" else {
            throw MQTTError(.invalidURL, "\(text): scheme \(scheme) is not mqtt or mqtts; \(form)")
        }
        guard let host = components.host, !host.isEmpty else { throw MQTTError(.invalidURL, "\(text) has no host; \(form)") }
        if let port = components.port, !(1...65535).contains(port) {
            throw MQTTError(.invalidURL, "\(text): port \(port) is out of range")
        }
        if !components.path.isEmpty && components.path != "/" {
            throw MQTTError(.invalidURL, "\(text): a broker URL has no path (topics are hr-gateway/<ID>/…)")
        }
        self.init(host: host, port: components.port, tls: scheme == "mqtts", username: components.user,
                  password: components.password)
    }

    /// `host:port`, the key under which the outbox keeps this broker's messages.
    public var destination: String { "\(host):\(port)" }

    /// The URL without the password.
    public var description: String {
        let user = username.map { "\($0)\(password == nil ? "" : ":***")@" } ?? ""
        return "\(tls ? "mqtts" : "mqtt")://\(user)\(host):\(port)"
    }
}

/// An MQTT failure as a value: a stable code and a sentence that says what to do.
public struct MQTTError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable {
        case invalidURL = "invalid_url"
        case library = "library"
        case connect = "connect"
        case tls = "tls"
        /// The durable outbox in the state directory cannot be opened or written.
        case outbox = "outbox"
    }

    public let code: Code
    public let description: String

    public init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }
}
