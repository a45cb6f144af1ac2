import Foundation
import GatewayEngine
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore
import RelayCore
import Synchronization

/// Who connects to the relay, and who is refused: one line when a consumer connects and one when it leaves (its
/// token's name, scope and address, how long it stayed), and one for a request refused for its token, with the
/// address it came from. An operator sees which phone is on and finds a device with a revoked or mistyped token;
/// nothing was logged before.
///
/// Refusals are counted per address and said at most once a minute for each: a client retrying every second with a
/// wrong token (or someone guessing) makes one line a minute with the count, not a line a second in the journal.
/// Tokens themselves are never logged.
public final class RelayAccessLog: Sendable {
    private let logger: Logger
    private let now: @Sendable () -> ContinuousClock.Instant
    /// Refusals from one address are said at most this often.
    public let refusalInterval: Duration

    private struct Refusals {
        var lastSaid: ContinuousClock.Instant
        /// Refusals since `lastSaid` not logged: with a token this gateway does not have, and without one.
        var unsaidWrong = 0
        var unsaidNone = 0
    }

    /// Addresses whose refusals are being counted; the oldest is forgotten beyond `maxAddresses`.
    private let refusals = Mutex([String: Refusals]())
    static let maxAddresses = 1024

    public init(
        logger: Logger = Logger(label: "hr-gateway.relay"), refusalInterval: Duration = .seconds(60),
        now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }
    ) {
        self.logger = logger
        self.refusalInterval = refusalInterval
        self.now = now
    }

    /// A consumer's WebSocket was accepted.
    public func connected(_ principal: RelayPrincipal, from address: SocketAddress?) {
        logger.info("consumer connected: \(Self.describe(principal)) from \(Self.describe(address))")
    }

    /// A consumer's WebSocket ended after `duration`.
    public func disconnected(_ principal: RelayPrincipal, from address: SocketAddress?, after duration: Duration) {
        let seconds = Int(duration.components.seconds)
        logger.info(
            "consumer left: \(Self.describe(principal)) from \(Self.describe(address)) after \(Self.describe(seconds: seconds))")
    }

    /// A request to `path` was refused for its token: none given, or one no token of this gateway has.
    public func refused(path: String, tokenGiven: Bool, from address: SocketAddress?) {
        let key = address?.ipAddress ?? "an unknown address"
        let at = now()
        let earlier: Refusals?? = refusals.withLock { table -> Refusals?? in
            if var entry = table[key] {
                guard entry.lastSaid.duration(to: at) >= refusalInterval else {
                    if tokenGiven { entry.unsaidWrong += 1 } else { entry.unsaidNone += 1 }
                    table[key] = entry
                    return .none
                }
                table[key] = Refusals(lastSaid: at)
                return .some(entry)
            }
            if table.count >= Self.maxAddresses, let oldest = table.min(by: { $0.value.lastSaid < $1.value.lastSaid }) {
                table.removeValue(forKey: oldest.key)
            }
            table[key] = Refusals(lastSaid: at)
            return .some(nil)
        }
        guard let earlier else { return }
        let why = tokenGiven
            ? "a token this gateway does not have (mistyped, or revoked: `hr-gateway token list`)"
            : "no token (Authorization: Bearer TOKEN, ?token=, or the bearer. subprotocol)"
        // What came since the last line from there, however long ago it was (it was said as "in the last 60 s"), by
        // kind (wrong-token refusals were said under a "no token" line).
        var more = ""
        if let e = earlier, e.unsaidWrong + e.unsaidNone > 0 {
            let kinds = [(e.unsaidWrong, "with a token it does not have"), (e.unsaidNone, "without a token")]
                .filter { $0.0 > 0 }.map { "\($0.0) \($0.1)" }.joined(separator: ", ")
            let ago = Self.describe(seconds: Int(e.lastSaid.duration(to: at).components.seconds))
            more = "; since its line \(ago) ago, \(kinds) not logged"
        }
        logger.warning("refused \(String(path.prefix(64))) from \(key): \(why)\(more)")
    }

    /// Connections closed at once (too many from their address, or plain HTTP on the TLS port), by kind and
    /// address: said at most once per `refusalInterval` each, with how many since the last line.
    private let closedEarly = Mutex([String: (lastSaid: ContinuousClock.Instant, unsaid: Int)]())

    /// How many like it were not said since the last line for `key`, or nil when this one is not to be said.
    private func sayClosed(_ key: String) -> Int? {
        let at = now()
        return closedEarly.withLock { table -> Int? in
            if let entry = table[key], entry.lastSaid.duration(to: at) < refusalInterval {
                table[key] = (entry.lastSaid, entry.unsaid + 1)
                return nil
            }
            if table[key] == nil, table.count >= Self.maxAddresses,
                let oldest = table.min(by: { $0.value.lastSaid < $1.value.lastSaid }) {
                table.removeValue(forKey: oldest.key)
            }
            let earlier = table[key]?.unsaid ?? 0
            table[key] = (at, 0)
            return earlier
        }
    }

    /// A connection from `address` was closed as soon as it was accepted (`ConnectionSlots`).
    func closedOverLimit(_ refusal: ConnectionSlots.Refusal, from address: SocketAddress?) {
        let key = Self.describe(address)
        guard let unsaid = sayClosed("limit " + key) else { return }
        let why = switch refusal {
        case .address(let open): "it holds \(Self.connections(open)) already, the most one address may (closing some lets it in again)"
        case .total(let open): "the relay holds \(Self.connections(open)) already, the most it takes (raise `ulimit -n`, LimitNOFILE in the unit, to allow more)"
        }
        let more = unsaid > 0 ? "; \(unsaid) more closed since its last line" : ""
        logger.warning("closed a connection from \(key) as it was accepted: \(why)\(more)")
    }

    static func connections(_ n: Int) -> String { n == 1 ? "1 connection" : "\(n) connections" }

    /// The file limit leaves the relay fewer connections than a few phones and dashboards need: said at start.
    func fewConnections(total: Int, fileLimit: Int) {
        let said = "the relay takes at most \(Self.connections(total)) at once: `ulimit -n` is \(fileLimit), of which a "
            + "quarter (at least 64) is kept for the gateway's own files; raise it (LimitNOFILE= in the unit) to allow more"
        logger.warning("\(said)")
    }

    /// A connection from `address` to the TLS port spoke plain HTTP, and was answered 400 saying so.
    func plainHTTPOnTLSPort(from address: SocketAddress?) {
        let key = Self.describe(address)
        guard let unsaid = sayClosed("plain " + key) else { return }
        let more = unsaid > 0 ? "; \(unsaid) more since its last line" : ""
        logger.warning(
            "plain HTTP from \(key) on the TLS port: answered 400 (its address should start https:// or wss://)\(more)")
    }

    static func describe(_ principal: RelayPrincipal) -> String {
        principal == .anonymous ? "anonymous (--no-auth)"
            : "token \"\(principal.name)\" (\(principal.scope == .read ? "read-only" : "control"), consumer \(principal.consumerId))"
    }

    static func describe(_ address: SocketAddress?) -> String { address?.ipAddress ?? "an unknown address" }

    static func describe(seconds: Int) -> String {
        seconds < 120 ? "\(seconds) s" : seconds < 7200 ? "\(seconds / 60) min" : "\(seconds / 3600) h \(seconds % 3600 / 60) min"
    }
}

/// The request context of the relay's HTTP routes and WebSocket upgrade: Hummingbird's, with the peer's address
/// (for `RelayAccessLog`).
struct RelayRequestContext: RequestContext, WebSocketRequestContext, RemoteAddressRequestContext {
    var coreContext: CoreRequestContextStorage
    let webSocket: WebSocketHandlerReference<Self>
    let remoteAddress: SocketAddress?
    /// The connection, to tell a client that went while its answer was being made (an export's first bytes).
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        webSocket = .init()
        remoteAddress = source.channel.remoteAddress
        channel = source.channel
    }
}
