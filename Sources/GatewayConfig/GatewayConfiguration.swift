import Foundation
import GatewayEngine
import SystemCalls
import TOMLKit

/// Log verbosity, from the most to the least talkative (swift-log's levels).
public enum LogLevelSetting: String, Sendable, CaseIterable {
    case trace, debug, info, notice, warning, error, critical
}

/// The settings hr-gateway reads from its configuration file and environment. Every field starts at its default.
public struct GatewayConfiguration: Sendable, Equatable {
    public var logLevel: LogLevelSetting = .info
    /// nil: resolved by `StateDirectory` (environment, systemd, XDG).
    public var stateDir: String?
    /// Record every session into the session store.
    public var record = true
    /// Delete sessions older than this many days before each session; nil keeps them forever.
    public var keepDays: Int?
    public var mode: SessionMode = .focus
    /// Paced-breathing pattern for breathing sessions (`session.pattern`); nil: none.
    public var breathingPattern: BreathingPattern?
    public var windowSec = 60
    public var emitIntervalSec = 5
    /// Webhook receiving each session_summary (store-and-forward); nil: none.
    public var webhookURL: String?
    /// Also post the samples, in batches of `webhookBatchSize`.
    public var webhookSamples = false
    public var webhookBatchSize = 60
    /// Seconds one POST may take.
    public var webhookTimeoutSec = 10
    /// Seconds `stream` keeps retrying after the session before leaving the rest in the outbox.
    public var webhookGraceSec = 10
    /// First retry delay in milliseconds; each retry doubles it, up to `webhookBackoffMaxSec`.
    public var webhookBackoffBaseMs = 1_000
    public var webhookBackoffMaxSec = 300
    /// Undelivered items kept; beyond, the oldest are dropped with a warning.
    public var webhookMaxItems = 10_000
    /// MQTT broker (`mqtt://[user[:password]@]HOST[:PORT]` or `mqtts://…`); nil: none.
    public var mqttURL: String?
    /// The gateway's ID in MQTT topics; nil: the host name.
    public var mqttGatewayId: String?
    /// CA certificate (PEM) for `mqtts://`; nil: the system's.
    public var mqttCAFile: String?
    /// File holding the broker password (first line).
    public var mqttPasswordFile: String?
    /// Seconds to wait at the end for the broker's acknowledgements.
    public var mqttGraceSec = 10
    /// BLE heart-rate straps (addresses, name prefixes or `auto`) streamed when the command line names no source.
    public var strapDevices: [String] = []
    /// Bluetooth adapter (`hciN`); nil: the first powered one.
    public var strapAdapter: String?
    /// Also stream raw ECG from a Polar strap.
    public var strapECG = false
    /// Polar accelerometer rate in Hz; nil: not streamed.
    public var strapAccHz: Int?
    /// "a" or "an" before a TOML type's name ("an integer", "a string").
    static func article(_ type: some CustomStringConvertible) -> String {
        "aeiou".contains(String(describing: type).prefix(1).lowercased()) ? "an" : "a"
    }

    /// Webcam (V4L2 node) for rPPG, streamed when the command line names no source.
    public var cameraDevice: String?
    public var cameraWidth: UInt32 = 640
    public var cameraHeight: UInt32 = 480
    public var cameraFps: Double = 30
    /// Mains frequency for the anti-flicker control: 50 or 60.
    public var cameraMainsHz = 50
    /// OpenCV face cascade; nil: the one from Debian's opencv-data.
    public var cameraFaceCascade: String?
    /// Withhold camera pulse readings whose colour change does not look like blood's (`--colour-check`).
    public var cameraColourCheck = false
    /// Where the relay listens (`HOST:PORT`); nil: no relay.
    public var relayListen: String?
    /// `[metrics] listen`: the Prometheus endpoint without a token (`--metrics-listen`), nil for none.
    public var metricsListen: String?
    /// Serve wss:// with the self-signed pair in the state directory.
    public var relayTLS = false
    /// Serve wss:// with this certificate and key instead.
    public var relayTLSCert: String?
    public var relayTLSKey: String?
    /// The file these values came from, if any.
    public var sourcePath: String?

    public init() {}

    /// The file to read: `explicit` (`--config`), else `$HR_GATEWAY_CONFIG`, else the user's
    /// `$XDG_CONFIG_HOME/hr-gateway/hr-gateway.toml` (`~/.config/…`) when it exists, else
    /// `/etc/hr-gateway/hr-gateway.toml` when it exists, else none (defaults).
    public static func locate(
        explicit: String?, environment: [String: String] = ProcessInfo.processInfo.environment,
        exists: (String) -> Bool = { FileManager.default.fileExists(atPath: $0) }
    ) -> String? {
        if let explicit, !explicit.isEmpty { return explicit }
        if let env = environment["HR_GATEWAY_CONFIG"], !env.isEmpty { return env }
        let configHome = environment["XDG_CONFIG_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? (environment["HOME"] ?? NSHomeDirectory()) + "/.config"
        for candidate in [configHome + "/hr-gateway/hr-gateway.toml", "/etc/hr-gateway/hr-gateway.toml"]
        where exists(candidate) {
            return candidate
        }
        return nil
    }

    /// Reads `path` over the defaults.
    public static func load(path: String) throws(ConfigurationError) -> (GatewayConfiguration, warnings: [String]) {
        let bytes: [UInt8]
        do {
            bytes = try SystemCall.readFile(path, notA: "a configuration file (give the .toml file in it)", limit: 1 << 20)
        } catch {
            throw ConfigurationError(path: path, line: nil, message: error.reason)
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw ConfigurationError(path: path, line: nil, message: "not UTF-8 text")
        }
        return try parse(text, path: path)
    }

    /// The TOML parser's message in the words of the rest of `config check`: "Error while parsing key-value pair:
    /// cannot redefine existing string 'log_level'" becomes "log_level is set twice: …"; a line's end is said so,
    /// not shown as '\n'.
    static func plainSyntaxMessage(_ message: String) -> String {
        var text = message
        var within: String?
        if text.hasPrefix("Error while parsing "), let colon = text.range(of: ": ") {
            within = String(text[text.index(text.startIndex, offsetBy: 20)..<colon.lowerBound])
            text = String(text[colon.upperBound...])
        }
        if text.hasPrefix("cannot redefine existing "), let open = text.firstIndex(of: "'"), text.hasSuffix("'"),
            open < text.index(before: text.endIndex)
        {
            let key = text[text.index(after: open)..<text.index(before: text.endIndex)]
            return "\(key) is set twice (a key or table may appear once): keep one"
        }
        text = text.replacingOccurrences(of: "'\\n'", with: "the end of the line")
            .replacingOccurrences(of: "'\n'", with: "the end of the line")
        if let within { text += " (in a \(within)); TOML is key = value, strings in quotes, [section] headers" }
        return text
    }

    /// Every key the file may hold, by section ("" for the top level): what an unknown key is compared with.
    public static let knownKeys: [String: [String]] = [
        "": ["log_level"],
        "store": ["state_dir", "record", "keep_days"],
        "session": ["mode", "pattern", "window_sec", "emit_interval_sec"],
        "webhook": ["url", "samples", "batch_size", "timeout_sec", "grace_sec", "backoff_base_ms", "backoff_max_sec",
                    "max_items"],
        "mqtt": ["url", "gateway_id", "ca_file", "password_file", "grace_sec"],
        "strap": ["devices", "adapter", "ecg", "acc_hz"],
        "camera": ["device", "width", "height", "fps", "mains_hz", "face_cascade", "colour_check"],
        "relay": ["listen", "tls", "tls_cert", "tls_key"],
        "metrics": ["listen"],
    ]

    /// ", did you mean …?" for an unknown key: a known one a typo away in the same section, the key itself in
    /// another section (a key put under the wrong heading), or a section a typo away. Empty when nothing is close.
    static func suggestion(section: String?, key: String) -> String {
        let lower = key.lowercased()
        func close(_ a: String, _ b: String) -> Bool {
            let shorter = min(a.count, b.count)
            return editDistance(a, b) <= (shorter <= 4 ? 1 : 2) || (shorter >= 4 && (a.hasPrefix(b) || b.hasPrefix(a)))
        }
        if let section {
            if let near = knownKeys[section]?.first(where: { close($0, lower) }) {
                return ", did you mean \(section).\(near)?"
            }
            let elsewhere = knownKeys.filter { $0.key != section && $0.value.contains(lower) }.keys.sorted()
            if elsewhere == [""] { return ": \(key) belongs at the top of the file, before any [section]" }
            if !elsewhere.isEmpty {
                return ": \(key) belongs in \(elsewhere.map { "[\($0)]" }.joined(separator: " or "))"
            }
            return ""
        }
        if let near = knownKeys[""]!.first(where: { close($0, lower) }) { return ", did you mean \(near)?" }
        if let near = knownKeys.keys.sorted().first(where: { !$0.isEmpty && close($0, lower) }) {
            return ", did you mean [\(near)]?"
        }
        let owners = knownKeys.filter { !$0.key.isEmpty && $0.value.contains(lower) }.keys.sorted()
        if !owners.isEmpty {
            return ": \(key) belongs in \(owners.map { "[\($0)]" }.joined(separator: " or ")), not at the top level"
        }
        return ""
    }

    /// Levenshtein distance (insertions, deletions, substitutions), on characters.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let x = Array(a), y = Array(b)
        if x.isEmpty || y.isEmpty { return max(x.count, y.count) }
        var previous = Array(0...y.count)
        var current = [Int](repeating: 0, count: y.count + 1)
        for i in 1...x.count {
            current[0] = i
            for j in 1...y.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x[i - 1] == y[j - 1] ? 0 : 1))
            }
            swap(&previous, &current)
        }
        return previous[y.count]
    }

    /// Parses TOML text over the defaults. Unknown sections and keys are errors (a typo must not pass silently).
    public static func parse(_ text: String, path: String) throws(ConfigurationError) -> (GatewayConfiguration, warnings: [String]) {
        let table: TOMLTable
        do { table = try TOMLTable(string: text) } catch let e as TOMLParseError {
            throw ConfigurationError(path: path, line: e.source.begin.line, message: plainSyntaxMessage(e.description))
        } catch {
            throw ConfigurationError(path: path, line: nil, message: "\(error)")
        }
        var c = GatewayConfiguration()
        c.sourcePath = path
        // No setting warns today; the list is kept for those that will (a deprecated key, say).
        let lines = SourceLines(text)

        func fail(_ section: String?, _ key: String?, _ message: String) -> ConfigurationError {
            ConfigurationError(path: path, line: lines.locate(section: section, key: key), message: message)
        }
        func name(_ section: String?, _ key: String) -> String { section.map { "\($0).\(key)" } ?? key }
        func string(_ v: any TOMLValueConvertible, _ section: String?, _ key: String) throws(ConfigurationError) -> String {
            guard let s = v.string else { throw fail(section, key, "\(name(section, key)) must be a string, got \(v.type)") }
            return s
        }
        func positive(_ v: any TOMLValueConvertible, _ section: String?, _ key: String, allowZero: Bool = false,
                      max: Int = .max) throws(ConfigurationError) -> Int
        {
            guard v.type == .int, let i = v.int, allowZero ? i >= 0 : i > 0 else {
                throw fail(section, key, "\(name(section, key)) must be \(allowZero ? "0 or a positive" : "a positive") "
                    + "integer, got \(v.type == .int ? v.debugDescription : "a \(v.type)")")
            }
            guard i <= max else { throw fail(section, key, "\(name(section, key)) must be at most \(max), got \(i)") }
            return i
        }

        /// A HOST:PORT address to listen on; "" is none.
        func listen(_ v: any TOMLValueConvertible, _ section: String, _ key: String, examples: String)
            throws(ConfigurationError) -> String?
        {
            let l = try string(v, section, key)
            guard l.isEmpty || Self.splitListen(l) != nil else {
                throw fail(section, key, "\(section).\(key) must be HOST:PORT, such as \(examples), got \"\(l)\"")
            }
            return l.isEmpty ? nil : l
        }

        var errors: [ConfigurationError] = []
        // Every key is checked, and every error reported (in line order), not only the first.
        func collect(_ body: () throws(ConfigurationError) -> Void) {
            do { try body() } catch { errors.append(error) }
        }

        for (key, value) in table {
            collect { () throws(ConfigurationError) in
                switch key {
                case "log_level":
                    let s = try string(value, nil, key)
                    guard let level = LogLevelSetting(rawValue: s) else {
                        throw fail(nil, key, "log_level must be one of \(LogLevelSetting.allCases.map(\.rawValue).joined(separator: ", ")), got \"\(s)\"")
                    }
                    c.logLevel = level
                case "store", "session", "webhook", "mqtt", "relay", "strap", "camera", "metrics":
                    guard let section = value.table else {
                        throw fail(nil, key, "\(key) must be a table ([\(key)]), got a \(value.type)")
                    }
                    for (k, v) in section {
                        collect { () throws(ConfigurationError) in
                            switch (key, k) {
                            case ("store", "state_dir"):
                                let s = try string(v, key, k)
                                guard s.isEmpty || s.hasPrefix("/") else { throw fail(key, k, "store.state_dir must be an absolute path") }
                                c.stateDir = s.isEmpty ? nil : s
                            case ("store", "record"):
                                guard let b = v.bool, v.type == .bool else { throw fail(key, k, "store.record must be true or false, got \(Self.article(v.type)) \(v.type)") }
                                c.record = b
                            case ("store", "keep_days"):
                                let days = try positive(v, key, k, allowZero: true)
                                c.keepDays = days == 0 ? nil : days
                            case ("session", "mode"):
                                let s = try string(v, key, k)
                                guard let m = SessionMode(rawValue: s) else {
                                    throw fail(key, k, "session.mode must be focus, breathing or typing, got \"\(s)\"")
                                }
                                c.mode = m
                            case ("session", "pattern"):
                                let s = try string(v, key, k)
                                if s.isEmpty {
                                    c.breathingPattern = nil
                                } else {
                                    do throws(SessionError) { c.breathingPattern = try BreathingPattern(parsing: s) } catch {
                                        throw fail(key, k, "session.pattern: \(error.message)")
                                    }
                                }
                            case ("session", "window_sec"):
                                c.windowSec = try positive(v, key, k, max: SessionConfig.maxWindowSec)
                            case ("session", "emit_interval_sec"):
                                c.emitIntervalSec = try positive(v, key, k, max: SessionConfig.maxWindowSec)
                            case ("webhook", "url"):
                                let u = try string(v, key, k)
                                guard u.isEmpty || Self.isWebhookURL(u) else {
                                    throw fail(key, k, "webhook.url must be an http:// or https:// URL with a host, such as "
                                        + "\"http://127.0.0.1:8080/hook\", got \"\(u)\"")
                                }
                                c.webhookURL = u.isEmpty ? nil : u
                            case ("webhook", "samples"):
                                guard let b = v.bool, v.type == .bool else { throw fail(key, k, "webhook.samples must be true or false, got \(Self.article(v.type)) \(v.type)") }
                                c.webhookSamples = b
                            case ("webhook", "batch_size"):
                                c.webhookBatchSize = try positive(v, key, k)
                            case ("webhook", "timeout_sec"):
                                c.webhookTimeoutSec = try positive(v, key, k)
                            case ("webhook", "grace_sec"):
                                c.webhookGraceSec = try positive(v, key, k, allowZero: true)
                            case ("webhook", "backoff_base_ms"):
                                c.webhookBackoffBaseMs = try positive(v, key, k)
                            case ("webhook", "backoff_max_sec"):
                                c.webhookBackoffMaxSec = try positive(v, key, k)
                            case ("webhook", "max_items"):
                                c.webhookMaxItems = try positive(v, key, k)
                            case ("mqtt", "url"):
                                let u = try string(v, key, k)
                                guard u.isEmpty || Self.isMQTTURL(u) else {
                                    throw fail(key, k, "mqtt.url must be mqtt://[user[:password]@]HOST[:PORT] or mqtts://…, "
                                        + "got \"\(u)\"")
                                }
                                c.mqttURL = u.isEmpty ? nil : u
                            case ("mqtt", "gateway_id"):
                                let id = try string(v, key, k)
                                guard Self.isGatewayId(id) else {
                                    throw fail(key, k, "mqtt.gateway_id must not contain '/', '+' or '#', got \"\(id)\"")
                                }
                                c.mqttGatewayId = id.isEmpty ? nil : id
                            case ("mqtt", "ca_file"):
                                let f = try string(v, key, k)
                                c.mqttCAFile = f.isEmpty ? nil : f
                            case ("mqtt", "password_file"):
                                let f = try string(v, key, k)
                                c.mqttPasswordFile = f.isEmpty ? nil : f
                            case ("mqtt", "grace_sec"):
                                c.mqttGraceSec = try positive(v, key, k, allowZero: true)
                            case ("strap", "devices"):
                                let entries = v.string.map { [$0] } ?? v.array.map { $0.map(\.string) }
                                guard let entries, entries.allSatisfy({ $0?.isEmpty == false }) else {
                                    throw fail(key, k, "strap.devices must be a list of addresses, name prefixes or \"auto\", "
                                        + "such as [\"auto\"] or [\"AA:BB:CC:DD:EE:FF\", \"Polar H10\"]; got \(v.debugDescription)")
                                }
                                c.strapDevices = entries.compactMap { $0 }
                            case ("strap", "adapter"):
                                let a = try string(v, key, k)
                                guard a.isEmpty || Self.isAdapterName(a) else {
                                    throw fail(key, k, "strap.adapter must be a controller name such as \"hci0\" (see `hr-gateway scan`), got \"\(a)\"")
                                }
                                c.strapAdapter = a.isEmpty ? nil : a
                            case ("strap", "ecg"):
                                guard let b = v.bool, v.type == .bool else { throw fail(key, k, "strap.ecg must be true or false, got \(Self.article(v.type)) \(v.type)") }
                                c.strapECG = b
                            case ("strap", "acc_hz"):
                                let hz = try positive(v, key, k, allowZero: true)
                                guard hz == 0 || Self.strapAccRates.contains(hz) else {
                                    throw fail(key, k, "strap.acc_hz must be 0 (off), 25, 50, 100 or 200, the rates a Polar H10 offers; got \(hz)")
                                }
                                c.strapAccHz = hz == 0 ? nil : hz
                            case ("camera", "device"):
                                let d = try string(v, key, k)
                                // A service runs from /: a relative path is a mistake, and "AUTO" or " auto" are not auto.
                                let trimmed = d.trimmingCharacters(in: .whitespaces)
                                guard d.isEmpty || d == "auto" || (d.hasPrefix("/") && trimmed == d) else {
                                    let hint = trimmed.lowercased() == "auto" ? " (did you mean auto?)"
                                        : d.hasPrefix("/") ? " (with spaces at its end?)" : ""
                                    throw fail(key, k, "camera.device must be auto (the first camera that works) or a device "
                                        + "path such as /dev/video0 (see `hr-gateway cameras`), got \"\(d)\"" + hint)
                                }
                                c.cameraDevice = d.isEmpty ? nil : d
                            case ("camera", "width"), ("camera", "height"):
                                let px = try positive(v, key, k)
                                guard px <= 16_384 else { throw fail(key, k, "camera.\(k) must be at most 16384 pixels, got \(px)") }
                                if k == "width" { c.cameraWidth = UInt32(px) } else { c.cameraHeight = UInt32(px) }
                            case ("camera", "fps"):
                                guard v.type == .int || v.type == .double, let fps = v.double ?? v.int.map(Double.init),
                                    fps > 0 && fps <= 240
                                else {
                                    throw fail(key, k, "camera.fps must be a frame rate above 0 and at most 240, got \(v.debugDescription)")
                                }
                                c.cameraFps = fps
                            case ("camera", "mains_hz"):
                                guard v.type == .int, let hz = v.int, hz == 50 || hz == 60 else {
                                    throw fail(key, k, "camera.mains_hz must be 50 (most of Europe, Asia, Africa, Oceania) or 60 "
                                        + "(the Americas, Taiwan, parts of Japan), got \(v.debugDescription)")
                                }
                                c.cameraMainsHz = hz
                            case ("camera", "face_cascade"):
                                let f = try string(v, key, k)
                                c.cameraFaceCascade = f.isEmpty ? nil : f
                            case ("camera", "colour_check"):
                                guard let b = v.bool, v.type == .bool else {
                                    throw fail(key, k, "camera.colour_check must be true or false, got \(Self.article(v.type)) \(v.type)")
                                }
                                c.cameraColourCheck = b
                            case ("relay", "listen"):
                                c.relayListen = try listen(
                                    v, key, k, examples: "\"127.0.0.1:8765\" or \"0.0.0.0:8765\" (\"\" for no relay)")
                            case ("relay", "tls"):
                                guard let b = v.bool, v.type == .bool else { throw fail(key, k, "relay.tls must be true or false, got \(Self.article(v.type)) \(v.type)") }
                                c.relayTLS = b
                            case ("relay", "tls_cert"):
                                let f = try string(v, key, k)
                                c.relayTLSCert = f.isEmpty ? nil : f
                            case ("relay", "tls_key"):
                                let f = try string(v, key, k)
                                c.relayTLSKey = f.isEmpty ? nil : f
                            case ("metrics", "listen"):
                                c.metricsListen = try listen(v, key, k, examples: "\"127.0.0.1:9464\" (\"\" for none)")
                            default:
                                throw fail(key, k, "unknown option \(key).\(k)" + Self.suggestion(section: key, key: k)
                                    + " (see the example config/hr-gateway.toml)")
                            }
                        }
                    }
                default:
                    throw fail(nil, key, "unknown option \(key)" + Self.suggestion(section: nil, key: key)
                        + " (see the example config/hr-gateway.toml)")
                }
            }
        }
        if (c.relayTLSCert == nil) != (c.relayTLSKey == nil) {
            let given = c.relayTLSCert == nil ? "tls_key" : "tls_cert"
            errors.append(fail("relay", given, "relay.tls_cert and relay.tls_key go together: give both (a PEM certificate "
                + "chain and its private key), or neither for relay.tls's self-signed pair"))
        }
        let sorted = errors.sorted(by: ConfigurationError.lineOrder)
        if var first = sorted.first {
            first.more = Array(sorted.dropFirst())
            throw first
        }
        return (c, [])
    }

    /// Applies the `HR_GATEWAY_*` environment variables, which override the file. Every variable is checked and
    /// every error reported (the first thrown with the others in `more`), not only the first.
    /// (`HR_GATEWAY_STATE_DIR` is applied by `StateDirectory`.)
    public mutating func applyEnvironment(_ env: [String: String]) throws(ConfigurationError) {
        var errors: [ConfigurationError] = []
        func bad(_ name: String, _ message: String) {
            errors.append(ConfigurationError(path: "environment variable \(name)", line: nil, message: message))
        }
        func value(_ name: String) -> String? { env[name].flatMap { $0.isEmpty ? nil : $0 } }
        func positive(_ name: String, allowZero: Bool = false, max: Int = .max) -> Int? {
            guard let s = value(name) else { return nil }
            guard let i = Int(s), allowZero ? i >= 0 : i > 0 else {
                bad(name, "must be \(allowZero ? "0 or a positive" : "a positive") integer, got \"\(s)\"")
                return nil
            }
            guard i <= max else {
                bad(name, "must be at most \(max), got \(i)")
                return nil
            }
            return i
        }
        if let s = value("HR_GATEWAY_LOG_LEVEL") {
            if let l = LogLevelSetting(rawValue: s.lowercased()) { logLevel = l } else {
                bad("HR_GATEWAY_LOG_LEVEL",
                    "must be one of \(LogLevelSetting.allCases.map(\.rawValue).joined(separator: ", ")), got \"\(s)\"")
            }
        }
        if let s = value("HR_GATEWAY_RECORD") {
            switch s.lowercased() {
            case "1", "true", "yes", "on": record = true
            case "0", "false", "no", "off": record = false
            default: bad("HR_GATEWAY_RECORD", "must be 1 or 0 (true or false), got \"\(s)\"")
            }
        }
        if let d = positive("HR_GATEWAY_KEEP_DAYS", allowZero: true) { keepDays = d == 0 ? nil : d }
        if let s = value("HR_GATEWAY_MODE") {
            if let m = SessionMode(rawValue: s) { mode = m } else {
                bad("HR_GATEWAY_MODE", "must be focus, breathing or typing, got \"\(s)\"")
            }
        }
        if let w = positive("HR_GATEWAY_WINDOW_SEC", max: SessionConfig.maxWindowSec) { windowSec = w }
        if let u = value("HR_GATEWAY_WEBHOOK") {
            if Self.isWebhookURL(u) { webhookURL = u } else {
                bad("HR_GATEWAY_WEBHOOK", "must be an http:// or https:// URL with a host, got \"\(u)\"")
            }
        }
        if let e = positive("HR_GATEWAY_EMIT_INTERVAL_SEC", max: SessionConfig.maxWindowSec) { emitIntervalSec = e }
        if let u = value("HR_GATEWAY_MQTT") {
            if Self.isMQTTURL(u) { mqttURL = u } else {
                bad("HR_GATEWAY_MQTT", "must be mqtt://[user[:password]@]HOST[:PORT] or mqtts://…, got \"\(u)\"")
            }
        }
        if let id = value("HR_GATEWAY_GATEWAY_ID") {
            if Self.isGatewayId(id) { mqttGatewayId = id } else {
                bad("HR_GATEWAY_GATEWAY_ID", "must not contain '/', '+' or '#', got \"\(id)\"")
            }
        }
        if var first = errors.first {
            first.more = Array(errors.dropFirst())
            throw first
        }
    }
}

extension GatewayConfiguration {
    /// The accelerometer rates a Polar H10 offers (`PolarStreams.accRates`; a test keeps the two the same).
    public static let strapAccRates = [25, 50, 100, 200]

    /// A Bluetooth controller name: `hci` and its index.
    public static func isAdapterName(_ name: String) -> Bool { name.hasPrefix("hci") && Int(name.dropFirst(3)) != nil }

    /// `HOST:PORT` (an IPv6 host in brackets; an empty host is 0.0.0.0), or nil when it is not one.
    public static func splitListen(_ listen: String) -> (host: String, port: Int)? {
        guard let colon = listen.lastIndex(of: ":"), let port = Int(listen[listen.index(after: colon)...]),
            (0...65535).contains(port)
        else { return nil }
        var host = String(listen[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return (host.isEmpty ? "0.0.0.0" : host, port)
    }

    /// Usable as one level of an MQTT topic: no level separator or wildcard.
    public static func isGatewayId(_ id: String) -> Bool { !id.contains { "/+#\u{0}".contains($0) } }

    /// `mqtt://` or `mqtts://` with a host.
    public static func isMQTTURL(_ text: String) -> Bool {
        guard let c = URLComponents(string: text), let scheme = c.scheme?.lowercased(), let host = c.host else { return false }
        return (scheme == "mqtt" || scheme == "mqtts") && !host.isEmpty
    }

    /// An absolute http or https URL with a host.
    public static func isWebhookURL(_ text: String) -> Bool {
        guard let c = URLComponents(string: text), let scheme = c.scheme?.lowercased(), let host = c.host else { return false }
        return (scheme == "http" || scheme == "https") && !host.isEmpty
    }
}

/// A configuration that cannot be used: where (file and line when known) and why. A file with several errors
/// throws the first (in line order) with the others in `more`, in line order too.
public struct ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    public let path: String
    public let line: Int?
    public let message: String
    /// The file's other errors, after this one.
    public var more: [ConfigurationError] = []

    public init(path: String, line: Int?, message: String) {
        self.path = path
        self.line = line
        self.message = message
    }

    /// This error and the others, in line order.
    public var all: [ConfigurationError] {
        var first = self
        first.more = []
        return [first] + more
    }

    /// One line per error.
    public var description: String {
        all.map { e in e.line.map { "\(e.path) line \($0): \(e.message)" } ?? "\(e.path): \(e.message)" }
            .joined(separator: "\n")
    }

    /// Errors with a line first, by line; those without keep their order after them.
    static func lineOrder(_ a: ConfigurationError, _ b: ConfigurationError) -> Bool {
        (a.line ?? Int.max) < (b.line ?? Int.max)
    }
}

/// Finds the line of a key in TOML text (TOMLKit does not report where a value was), for error messages.
struct SourceLines {
    private let lines: [Substring]

    init(_ text: String) { lines = text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) }

    /// The 1-based line of `key` in `[section]` (or at the top level), or of the section header when `key` is nil.
    func locate(section: String?, key: String?) -> Int? {
        var current: String?
        var headerLine: Int?
        for (i, raw) in lines.enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("[") {
                current = line.dropFirst().prefix { $0 != "]" }.trimmingCharacters(in: .whitespaces)
                if current == section { headerLine = i + 1 }
                if section == nil, let key, current == key { return i + 1 }
                continue
            }
            guard current == section, let key else { continue }
            let name = line.prefix { $0 != "=" }.trimmingCharacters(in: .whitespaces)
            if name == key || name == "\"\(key)\"" { return i + 1 }
        }
        if let section, let key {
            // A dotted key at the top level (`session.mode = …`).
            for (i, raw) in lines.enumerated() {
                let name = raw.prefix { $0 != "=" }.trimmingCharacters(in: .whitespaces)
                if name == "\(section).\(key)" { return i + 1 }
            }
        }
        return headerLine
    }
}
