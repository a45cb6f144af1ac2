import GatewayEngine
import RelayCore
import HTTPTypes
import HummingbirdWSClient
import Logging
import NIOCore
import NIOPosix
import NIOSSL

/// A relay consumer: connects to `ws://HOST:PORT/v1/relay` with a token and hands every message to a callback.
public struct RelayClient: Sendable {
    public var url: String
    public var token: String?
    public var maxFrameBytes = 1 << 20
    /// For `wss://`: trust only the certificate with this SHA-256 fingerprint (see `RelayPinning`); nil uses the
    /// system's CAs.
    public var pinnedFingerprint: String?
    /// How long to wait for the first message (`welcome`) before giving up on the address.
    public var welcomeTimeout: Duration = .seconds(15)

    public init(url: String, token: String?, pinnedFingerprint: String? = nil) {
        self.url = url
        self.token = token
        self.pinnedFingerprint = pinnedFingerprint
    }

    /// What the callback asks the client to do next.
    public enum Action: Sendable {
        case `continue`
        case send([JSONValue])
        case sendThenClose([JSONValue])
        case close
    }

    /// Connects, sends `initial`, and calls `onMessage` for each message until it returns `.close` or the server closes.
    public func run(
        initial: [JSONValue] = [],
        onMessage: @escaping @Sendable (JSONValue) async -> Action
    ) async throws {
        var logger = Logger(label: "hr-gateway.attach")
        logger.logLevel = .warning
        let (configuration, tls) = try await Self.settings(
            url: url, token: token, pinnedFingerprint: pinnedFingerprint, maxFrameBytes: maxFrameBytes)
        let welcomed = Locked(false)
        let (url, maxFrameBytes, timeout) = (self.url, self.maxFrameBytes, welcomeTimeout)
        let (wsConfiguration, tlsConfiguration, wsLogger) = (configuration, tls, logger)
        // The connection attempt is raced against the timeout without waiting for it to notice cancellation: a
        // TLS port spoken to in plain text never answers, and the connect does not return on cancellation then.
        let outcome = Locked<CheckedContinuation<Void, any Error>?>(nil)
        let finish = { @Sendable (result: Result<Void, any Error>) in
            outcome.withLock { c -> CheckedContinuation<Void, any Error>? in
                defer { c = nil }
                return c
            }?.resume(with: result)
        }
        var attempt: Task<Void, Never>?
        var watchdog: Task<Void, Never>?
        defer {
            attempt?.cancel()
            watchdog?.cancel()
        }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            outcome.withLock { $0 = continuation }
            attempt = Task {
                do {
                    try await WebSocketClient.connect(
                        url: url,
                        configuration: wsConfiguration,
                        tlsConfiguration: tlsConfiguration,
                        logger: wsLogger
                    ) { inbound, outbound, _ in
                        for m in initial { try await outbound.write(.text(m.jsonString)) }
                        for try await message in inbound.messages(maxSize: maxFrameBytes) {
                            welcomed.withLock { $0 = true }
                            guard case .text(let text) = message, let value = try? JSONValue(parsing: text) else { continue }
                            switch await onMessage(value) {
                            case .continue: break
                            case .send(let values): for v in values { try await outbound.write(.text(v.jsonString)) }
                            case .sendThenClose(let values):
                                for v in values { try await outbound.write(.text(v.jsonString)) }
                                try await outbound.close(.normalClosure, reason: nil)
                                return
                            case .close:
                                try await outbound.close(.normalClosure, reason: nil)
                                return
                            }
                        }
                    }
                    finish(.success(()))
                } catch {
                    finish(.failure(error))
                }
            }
            watchdog = Task {
                guard (try? await Task.sleep(for: timeout)) != nil, !welcomed.withLock({ $0 }) else { return }
                finish(.failure(RelayClientError(
                    "Nothing from \(url) within \(timeout): not an hr-gateway relay, or a wss:// port addressed as "
                        + "ws:// (or the other way round).")))
            }
        }
    }

    /// The WebSocket and TLS settings for a connection to `url`: the bearer token as a header, and with a pin, TLS
    /// trusting only the pinned certificate (fetched and compared first).
    static func settings(url: String, token: String?, pinnedFingerprint: String?, maxFrameBytes: Int) async throws
        -> (WebSocketClientConfiguration, TLSConfiguration?)
    {
        var headers = HTTPFields()
        if let token { headers[.authorization] = "Bearer \(token)" }
        var configuration = WebSocketClientConfiguration(maxFrameSize: maxFrameBytes, additionalHeaders: headers)
        guard let pinnedFingerprint else {
            // Trusted by the system's CAs, the certificate is checked against the host's name, sent in SNI, where an
            // address may not go (it failed with NIOSSL's cannotUseIPAddressInSNI).
            if let (host, _) = Self.tlsEndpoint(url), Self.isAddress(host) {
                throw RelayPinningError(
                    "\(url) names the relay by its address, which no certificate name can be checked against: pin the "
                        + "gateway's certificate with --pin SHA256 (the fingerprint `serve --tls` and `token create` "
                        + "print), or use the host name its certificate was made for.")
            }
            return (configuration, nil)
        }
        guard let (host, port) = Self.tlsEndpoint(url) else {
            throw RelayPinningError("A pinned fingerprint needs a wss:// address with a host; got \(url).")
        }
        let tls = try await RelayPinning.configuration(host: host, port: port, fingerprint: pinnedFingerprint)
        // TLS forbids an IP address as server name; the pin, not the name, identifies the peer.
        if Self.isAddress(host) { configuration.sniHostname = "hr-gateway" }
        return (configuration, tls)
    }

    /// Whether `host` is an IPv4 or IPv6 address rather than a name.
    static func isAddress(_ host: String) -> Bool {
        var v4 = in_addr(), v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }

    /// Host and port of a `wss://` address (port 443 when absent).
    static func tlsEndpoint(_ url: String) -> (String, Int)? {
        guard url.lowercased().hasPrefix("wss://") else { return nil }
        let rest = url.dropFirst("wss://".count)
        let authority = rest.prefix { $0 != "/" && $0 != "?" }
        var host = Substring(authority)
        var port = 443
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if after.hasPrefix(":") { guard let p = Int(after.dropFirst()) else { return nil }; port = p }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            guard let p = Int(authority[authority.index(after: colon)...]) else { return nil }
            port = p
        }
        return host.isEmpty ? nil : (String(host), port)
    }
}

/// Why a relay client gave up.
extension RelayClient {
    /// The path of a ws:// or wss:// URL ("/" when it has none), without its query.
    static func path(of url: String) -> String? {
        guard let scheme = url.range(of: "://") else { return nil }
        let rest = url[scheme.upperBound...]
        guard let slash = rest.firstIndex(of: "/") else { return "/" }
        return String(rest[slash...].prefix { $0 != "?" && $0 != "#" })
    }

    /// What went wrong connecting to a relay, in words that say what to do (not the WebSocket or NIO error dump).
    /// With `url` and `tokenGiven`, a refused upgrade says which of its causes it is: no token given, another path
    /// than the relay's, or else the token (one message said all three).
    public static func explain(_ error: any Error, url: String? = nil, tokenGiven: Bool = true) -> String {
        if let e = error as? WebSocketClientError, e == .webSocketUpgradeFailed {
            let tokens = "(`hr-gateway token list` on the gateway shows them, `hr-gateway token create --name phone` "
                + "makes one)"
            if !tokenGiven {
                return "the relay refused the WebSocket connection: no token was given (--token T, or "
                    + "$HR_GATEWAY_TOKEN) \(tokens)"
            }
            if let url, let path = path(of: url), path != "/v1/relay" {
                return "the relay refused the WebSocket connection: its path is /v1/relay, not \(path)"
            }
            return "the relay refused the WebSocket connection: the token is wrong or revoked \(tokens)"
        }
        if let e = error as? NIOConnectionError {
            if let dns = e.dnsAError ?? e.dnsAAAAError { return "\(e.host) does not resolve (\(dns))" }
            let reasons = e.connectionErrors.map { failure -> String in
                if let io = failure.error as? IOError { return String(cString: strerror(io.errnoCode)) }
                return "\(failure.error)"
            }
            let said = Array(Set(reasons)).sorted().joined(separator: "; ")
            // Only a refused or unreachable socket means nothing answers; a failure past it (TLS) is the connection's.
            guard e.connectionErrors.allSatisfy({ $0.error is IOError }) else {
                return "the connection to \(e.host):\(e.port) failed (\(said))"
            }
            return "nothing answers on \(e.host):\(e.port) (\(said)): check that the gateway runs with --listen on that "
                + "address"
        }
        // BoringSSL's words for a certificate no CA of this machine vouches for (the gateway's own, self-signed).
        if case NIOSSLError.handshakeFailed(let inner) = error, "\(inner)".contains("CERTIFICATE_VERIFY_FAILED") {
            return "the TLS handshake failed: no certificate authority of this machine vouches for the relay's certificate"
        }
        return "\(error)"
    }
}

public struct RelayClientError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
