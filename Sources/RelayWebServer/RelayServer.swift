import Foundation
import GatewayEngine
import GatewayStorage
import RelayCore
import RelayStore
import SystemCalls
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import NIOSSL
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

/// How the relay listens.
public struct RelayServerConfiguration: Sendable {
    public var host: String
    /// 0 picks a free port (see `RelayServer.run(onListening:)`).
    public var port: Int
    /// Accept connections without a token. Only allowed when `host` is a loopback address.
    public var allowAnonymous = false
    /// Largest WebSocket frame accepted; a bigger one closes the connection (1009). Commands over the hub's
    /// `maxCommandBytes` but under this get a `payload_too_large` result instead.
    public var maxFrameBytes = 1 << 20
    public var heartbeat: Duration = .seconds(5)
    /// Serve `wss://` with this PEM certificate chain and private key.
    public var tls: RelayTLSFiles?
    public var ping: Duration = .seconds(10)
    /// A connection that has not sent its first request head within this is closed (1,100 connections that sent
    /// half a request held every file descriptor of a service, locking every client out, for ever); one idle this
    /// long between HTTP requests is closed too. WebSockets keep their own ping.
    public var requestTimeout: Duration = .seconds(30)
    /// Connections one peer address may hold open (WebSockets and HTTP requests together; a dashboard takes two or
    /// three), and all peers together (less under a low `ulimit -n`: `ConnectionSlots.total`). One over either is
    /// closed as soon as it is accepted, and said in the log.
    public var maxConnectionsPerAddress = 32
    public var maxConnections = 1024
    /// Loopback peers are not held to `maxConnectionsPerAddress` nor counted in `maxConnections` (a reverse proxy
    /// on this machine brings every client from 127.0.0.1).
    public var connectionLimitsExemptLoopback = true
    /// How often the token store is read again to end the connections of revoked tokens.
    public var tokenRecheck: Duration = .seconds(2)
    /// Serves `GET /metrics` (with the same token as the relay) with this Prometheus text; nil: no such page.
    public var metrics: (@Sendable () -> String)?
    /// Serves `GET /v1/sessions` and `GET /v1/sessions/ID/export?format=F` (with the relay's token) from these
    /// recorded sessions, for the dashboard's session list; nil: 404.
    public var sessions: (any SessionArchive)?

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    public var isLoopback: Bool { Self.isLoopbackName(host) }

    /// Whether `name` names this machine's loopback: `localhost`, an IPv4 address in 127.0.0.0/8 or `::1`. A host
    /// name that only starts like one (`127.0.0.1.example.com`, `127.attacker.net`) resolves to whatever its owner
    /// chooses, and is not.
    public static func isLoopbackName(_ name: String) -> Bool {
        var name = name.lowercased()
        if name.hasSuffix(".") { name.removeLast() }
        if name.hasPrefix("[") && name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        if name == "localhost" { return true }
        var v4 = in_addr()
        if inet_pton(AF_INET, name, &v4) == 1 { return UInt32(bigEndian: v4.s_addr) >> 24 == 127 }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, name, &v6) == 1 {
            let bytes = withUnsafeBytes(of: &v6) { Array($0) }
            // ::1, or an IPv4 loopback address mapped (a dual-stack socket sees 127.0.0.1 as ::ffff:127.0.0.1).
            return bytes == Array(repeating: 0, count: 15) + [1]
                || (bytes.prefix(10).allSatisfy { $0 == 0 } && bytes[10] == 0xff && bytes[11] == 0xff && bytes[12] == 127)
        }
        return false
    }

    /// The host of an HTTP authority (`Host` header, or an `Origin` without its scheme): `name`, `name:port`,
    /// `[v6]` or `[v6]:port`; nil for anything else (`[::1]evil.com`, a port that is not a number).
    static func hostOfAuthority(_ authority: Substring) -> String? {
        func isPort(_ s: Substring) -> Bool { s.allSatisfy { $0.isASCII && $0.isNumber } }
        if authority.hasPrefix("[") {
            guard let end = authority.firstIndex(of: "]") else { return nil }
            let rest = authority[authority.index(after: end)...]
            guard rest.isEmpty || (rest.first == ":" && isPort(rest.dropFirst())) else { return nil }
            return String(authority[...end])
        }
        let parts = authority.split(separator: ":", omittingEmptySubsequences: false)
        switch parts.count {
        case 1: return String(authority)
        case 2: return isPort(parts[1]) ? String(parts[0]) : nil
        default: return String(authority)  // an IPv6 address without brackets: inet_pton decides
        }
    }

    /// Whether a request without a token may be served in no-auth mode, from its `Host` and `Origin` headers. A
    /// page on any web site the user visits can open a WebSocket to 127.0.0.1 (the browser sends its own Origin), or
    /// have its own name resolve to 127.0.0.1 after loading (DNS rebinding: its Host is then that name): either
    /// would control the session and read every recorded one. Programs that send no Origin (scripts, `attach`)
    /// and the dashboard served from the relay itself are let in.
    ///
    /// Only the forms a browser sends are judged: one `Host`, at most one `Origin`, and a request target that is a
    /// path (an absolute URL as target names its own host, which would have to be judged instead).
    static func isLocalRequest(hosts: [String], origins: [String], target: String) -> Bool {
        guard target.hasPrefix("/"), hosts.count <= 1, origins.count <= 1 else { return false }
        if let host = hosts.first, !host.isEmpty {
            guard let name = hostOfAuthority(Substring(host)), isLoopbackName(name) else { return false }
        }
        guard let origin = origins.first else { return true }
        guard let scheme = origin.range(of: "://") else { return false }  // "null": a sandboxed or file: page
        let authority = origin[scheme.upperBound...].prefix { $0 != "/" }
        guard let name = hostOfAuthority(authority) else { return false }
        return isLoopbackName(name)
    }
}

/// A relay configuration that cannot run.
public struct RelayServerError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Serves a `RelayHub` at `ws://HOST:PORT/v1/relay` (Hummingbird + WebSocket).
///
/// The upgrade is refused with 401 without a valid token, taken from `Authorization: Bearer T`, the `token` query
/// parameter, or a `bearer.T` entry of `Sec-WebSocket-Protocol` (browsers).
public struct RelayServer: Sendable {
    public let hub: RelayHub
    public let tokens: RelayTokenStore?
    public let configuration: RelayServerConfiguration
    public var logger: Logger
    /// Consumers connecting and leaving, and requests refused for their token.
    public let accessLog: RelayAccessLog

    public init(
        hub: RelayHub, tokens: RelayTokenStore?, configuration: RelayServerConfiguration, logger: Logger? = nil,
        accessLog: RelayAccessLog = RelayAccessLog()
    ) {
        self.hub = hub
        self.tokens = tokens
        self.configuration = configuration
        self.accessLog = accessLog
        var l = logger ?? Logger(label: "hr-gateway.relay")
        // The server logs a cancelled connection at error level on every shutdown; only failures are worth a line.
        if logger == nil { l.logLevel = .critical }
        self.logger = l
    }

    /// Runs until the task is cancelled. `onListening` gets the bound port once the server accepts connections.
    public func run(onListening: @escaping @Sendable (Int) async -> Void = { _ in }) async throws {
        if configuration.allowAnonymous && !configuration.isLoopback {
            throw RelayServerError(
                "No-auth mode only listens on a loopback address (localhost, 127.0.0.0/8, ::1); got \(configuration.host). "
                    + "Create a token with `hr-gateway token create` instead.")
        }
        if !configuration.allowAnonymous && tokens == nil {
            throw RelayServerError("The relay needs a token store, or no-auth mode on loopback.")
        }
        let server = self
        // Plain HTTP: what a refused upgrade falls through to, and the index page.
        let router = Router(context: RelayRequestContext.self)
        router.add(middleware: PageSecurityMiddleware())
        // Every page answers HEAD too: its GET's status and headers (NIO's encoder sends no body after a HEAD).
        let getAndHead = { (path: RouterPath, handler: @escaping @Sendable (Request, RelayRequestContext) async throws -> Response) in
            router.get(path, use: handler)
            router.head(path, use: handler)
        }
        let dashboardHeaders = PageSecurity.headers(for: DashboardPage.html, frameable: false)
        let overlayHeaders = PageSecurity.headers(for: OverlayPage.html, frameable: true)
        getAndHead("/") { _, _ -> Response in
            Response(
                status: .ok,
                headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"] + dashboardHeaders,
                body: .init(byteBuffer: ByteBuffer(string: DashboardPage.html)))
        }
        getAndHead("/relay.js") { _, _ -> Response in
            Response(
                status: .ok,
                headers: [.contentType: "text/javascript; charset=utf-8", .cacheControl: "no-store"],
                body: .init(byteBuffer: ByteBuffer(string: RelayClientScript.javascript)))
        }
        if let archive = configuration.sessions {
            getAndHead("/v1/sessions") { request, context -> Response in
                guard server.authenticate(request, context) != nil else {
                    throw HTTPError(.unauthorized, message: "A valid relay token is required (Authorization: Bearer TOKEN); create one with `hr-gateway token create`.")
                }
                // Said, not clamped: ?limit=0 gave one session without a word.
                try Self.atMostOnce(["limit", "before"], in: request)
                let asked = request.uri.queryParameters.get("limit")
                let limit = asked.map { Int($0) } ?? 50
                guard let limit, (1...500).contains(limit) else {
                    throw HTTPError(.badRequest, message: "limit must be a whole number from 1 to 500, got \((asked ?? "").prefix(20))")
                }
                // The next page: the sessions that started before the last one listed (its whole id).
                let before = request.uri.queryParameters.get("before").map { String($0.removingPercentEncoding ?? $0) }
                let found: String?
                do { found = try await Self.archiveRead { try archive.listJSON(limit: limit, before: before) } } catch {
                    throw HTTPError(.internalServerError, message: "The session store cannot be read: \(error)")
                }
                guard let text = found else {
                    throw HTTPError(.badRequest, message: "before names no recorded session (\((before ?? "").prefix(64))): give the "
                        + "whole session_id of the last session of the previous page.")
                }
                return Response(
                    status: .ok, headers: [.contentType: "application/json", .cacheControl: "no-store"],
                    body: .init(byteBuffer: ByteBuffer(string: text)))
            }
            getAndHead("/v1/sessions/:id/export") { request, context -> Response in
                guard server.authenticate(request, context) != nil else {
                    throw HTTPError(.unauthorized, message: "A valid relay token is required (Authorization: Bearer TOKEN); create one with `hr-gateway token create`.")
                }
                // The page encodes the ID (`encodeURIComponent`): spaces, accents, quotes and slashes arrive escaped.
                let raw = context.parameters.get("id") ?? ""
                let id = raw.removingPercentEncoding ?? raw
                try Self.atMostOnce(["format"], in: request)
                let format = request.uri.queryParameters.get("format") ?? "csv"
                // Checked first, without making the export (on the list's lane: a plan reads a few rows): a HEAD is
                // answered from its plan alone, and a GET's status is known before the export is made.
                let found: ExportPlan?
                do { found = try await Self.archiveRead { try archive.plan(id: id, format: format) } } catch {
                    throw Self.exportRefusal(error)
                }
                guard let plan = found else {
                    throw HTTPError(.notFound, message: "No recorded session \(id.prefix(64)): see GET /v1/sessions.")
                }
                let headers: HTTPFields = [
                    .contentType: plan.contentType, .cacheControl: "no-store",
                    .contentDisposition: Self.attachment(plan.filename),
                ]
                if request.method == .head {
                    return Response(status: .ok, headers: headers, body: ResponseBody { writer in try await writer.finish(nil) })
                }
                // Made on a lane of its own as the client reads it (below); the answer waits for its first bytes, so
                // that an export refused after all (its session deleted since the plan) still gets its status.
                let body = ExportBody(spoolDirectory: archive.spoolDirectory)
                Self.submitExport {
                    // Its client went while it waited for the lane: nothing to make.
                    guard !body.isCancelled else { return body.end(.failed(ExportBody.Cancelled())) }
                    do { body.end(try archive.export(plan, into: body) ? .finished : .notFound) } catch {
                        body.end(.failed(error))
                    }
                }
                let channel = context.channel
                let (first, client) = await Self.progress(of: body, beyond: 0, client: channel, until: [.closedItsSide, .gone])
                if client == .gone {
                    body.cancel()  // the maker stops at its next check; nobody to answer
                    Self.abandonedExports.add(1, ordering: .relaxed)
                    throw HTTPError(.init(code: 499, reasonPhrase: "Client Closed Request"))
                }
                // A client that closed its side before the first bytes has gone, or half-closed its connection and
                // waits for the answer (HTTP allows it: `nc -N`): answered at once, without waiting for the first
                // bytes; a gone client's kernel then resets the connection, which stops the export (below).
                let early = client == .closedItsSide
                if !early, first.size == 0 {
                    switch first.end {
                    case .notFound?:
                        throw HTTPError(.notFound, message: "No recorded session \(id.prefix(64)): see GET /v1/sessions.")
                    case .failed(let error)?:
                        throw Self.exportRefusal(error)
                    case .finished?, nil:
                        break
                    }
                }
                // Its length when it is already made; else sent as it is made (chunked).
                let length: Int? = if !early, case .finished? = first.end { first.size } else { nil }
                let logger = server.logger
                return Response(status: .ok, headers: headers, body: ResponseBody(contentLength: length) { writer in
                    // However the sending ends, nothing more is made for it.
                    defer { body.cancel() }
                    var offset = 0
                    while true {
                        let (now, client) = await Self.progress(
                            of: body, beyond: offset, client: channel, until: [.gone],
                            firstCheck: early && offset == 0 ? .milliseconds(5) : Self.clientCheckInterval)
                        if client == .gone {
                            if offset == 0 { Self.abandonedExports.add(1, ordering: .relaxed) }
                            throw ExportBody.Cancelled()
                        }
                        if now.size > offset {
                            let at = offset
                            let part = try await Self.downloadLane.run { () throws(SystemCallError) in
                                try body.read(at: at, count: Self.spoolPartBytes)
                            }
                            guard !part.isEmpty else { throw SystemCallError(call: "pread", code: EIO) }
                            try await writer.write(ByteBuffer(bytes: part))
                            offset += part.count
                            continue
                        }
                        switch now.end {
                        case .finished?:
                            try await writer.finish(nil)
                            return
                        case .failed(let error)?:
                            // Its status went with its first bytes (or before them, to a client that half-closed):
                            // the connection is closed without the end of the body, so that the client sees the
                            // export cut short.
                            logger.error("the export of session \(plan.id.prefix(64)) (format \(plan.format)) failed after \(offset) bytes were sent: \(error)")
                            throw error
                        case .notFound?:
                            // Deleted since its plan, its answer begun early (a client that half-closed): cut short.
                            logger.error("the export of session \(plan.id.prefix(64)) (format \(plan.format)) found the session gone after its answer started")
                            throw ExportBody.Cancelled()
                        case nil:
                            throw ExportBody.Cancelled()
                        }
                    }
                })
            }
        }
        getAndHead("/overlay") { _, _ -> Response in
            Response(
                status: .ok,
                headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"] + overlayHeaders,
                body: .init(byteBuffer: ByteBuffer(string: OverlayPage.html)))
        }
        if let metrics = configuration.metrics {
            getAndHead("/metrics") { request, context -> Response in
                guard server.authenticate(request, context) != nil else {
                    throw HTTPError(.unauthorized, message: "A valid relay token is required (Authorization: Bearer TOKEN); create one with `hr-gateway token create`.")
                }
                return Response(
                    status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                    body: .init(byteBuffer: ByteBuffer(string: metrics())))
            }
        }
        router.get("/v1/relay") { request, context -> Response in
            guard server.authenticate(request, context) != nil else {
                throw HTTPError(.unauthorized, message: "A valid relay token is required (Authorization: Bearer TOKEN); create one with `hr-gateway token create`.")
            }
            if !Self.speaksOurProtocol(Self.offeredProtocols(request)) {
                throw HTTPError(.badRequest, message: Self.protocolRefusal)
            }
            return Response(status: .upgradeRequired)
        }
        let wsRouter = Router(context: RelayRequestContext.self)
        wsRouter.ws("/v1/relay") { request, _ in
            guard server.authenticate(request) != nil else { return .dontUpgrade }
            return .upgrade(server.selectedProtocol(request))
        } onUpgrade: { inbound, outbound, context in
            guard let principal = server.authenticate(context.request) else { return }
            let address = context.requestContext.remoteAddress
            server.accessLog.connected(principal, from: address)
            let start = ContinuousClock.now
            defer { server.accessLog.disconnected(principal, from: address, after: start.duration(to: .now)) }
            try await server.serve(principal: principal, inbound: inbound, outbound: outbound)
        }
        let wsResponder = wsRouter.buildResponder()
        let unused = UnusedConnections()
        let fileLimit = ConnectionSlots.currentFileLimit()
        let slots = ConnectionSlots(
            perAddress: configuration.maxConnectionsPerAddress,
            total: ConnectionSlots.total(configured: configuration.maxConnections, fileLimit: fileLimit),
            exemptsLoopback: configuration.connectionLimitsExemptLoopback)
        if let fileLimit, slots.total < min(32, configuration.maxConnections) {
            accessLog.fewConnections(total: slots.total, fileLimit: fileLimit)
        }
        let plain = HTTPServerBuilder { responder in
            UpgradeGateChannel(
                inner: HTTP1WebSocketUpgradeChannel(
                    responder: responder,
                    webSocketResponder: wsResponder,
                    configuration: .init(
                        http1: .init(idleTimeout: TimeAmount(configuration.requestTimeout)),
                        ws: .init(
                            maxFrameSize: configuration.maxFrameBytes, autoPing: .enabled(timePeriod: configuration.ping),
                            // A text frame that is not UTF-8 closes with 1007 (RFC 6455 §8.1), not read as U+FFFD.
                            validateUTF8: true))
                ),
                admits: { head in server.admitsUpgrade(head) },
                unused: unused,
                firstRequestTimeout: TimeAmount(configuration.requestTimeout),
                slots: slots,
                accessLog: accessLog,
                speaksTLS: configuration.tls != nil
            )
        }
        let builder = try configuration.tls.map { try HTTPServerBuilder.tls(plain, tlsConfiguration: $0.serverConfiguration()) }
            ?? plain
        let app = Application(
            router: router,
            server: builder,
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: nil),
            onServerRunning: { channel in await onListening(channel.localAddress?.port ?? 0) },
            logger: logger
        )
        let hub = self.hub
        let tokens = self.tokens
        let recheck = configuration.tokenRecheck
        try await withTaskCancellationHandler {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await app.run() }
                if let tokens {
                    group.addTask {
                        // Ends quietly when cancelled: only the server's own failure is an error.
                        while (try? await Task.sleep(for: recheck)) != nil {
                            // An unreadable store (being rewritten, damaged) revokes nothing.
                            guard let records = try? tokens.list() else { continue }
                            hub.closeRevoked(validConsumerIds: Set(records.map(\.id)))
                        }
                    }
                }
                try await group.next()
                group.cancelAll()
            }
        } onCancel: {
            // Open WebSockets would hold up the graceful shutdown: end them (consumers reconnect and resume); and
            // close the connections that never sent a request (a browser's preconnect).
            hub.closeAll()
            unused.closeAll()
        }
    }

    /// `authenticate`, saying a refusal in the access log (a refused WebSocket upgrade is answered here too).
    func authenticate(_ request: Request, _ context: RelayRequestContext) -> RelayPrincipal? {
        if let principal = authenticate(request) { return principal }
        accessLog.refused(path: request.uri.path, tokenGiven: Self.token(in: request) != nil, from: context.remoteAddress)
        return nil
    }

    func authenticate(_ request: Request) -> RelayPrincipal? {
        // A valid token is its holder, in no-auth mode too (a proxy's name in Host is then no obstacle); any other
        // request is anonymous where no-auth mode lets it be.
        if let token = Self.token(in: request), let tokens, let principal = tokens.authenticate(token) { return principal }
        let hosts = request.head.authority.map { $0.split(separator: ",").map(String.init) } ?? []
        guard configuration.allowAnonymous,
            RelayServerConfiguration.isLocalRequest(
                hosts: hosts + request.headers[values: Self.hostHeader], origins: request.headers[values: Self.originHeader],
                target: request.head.path ?? "")
        else { return nil }
        return .anonymous
    }

    static let originHeader = HTTPField.Name("Origin")!
    /// A second `Host` header (the first is the request's authority).
    static let hostHeader = HTTPField.Name("Host")!

    /// Whether the upgrade gate lets a WebSocket upgrade through: to the relay's path, offering the relay's
    /// subprotocol (or none), with a valid token. Any other is answered as a plain `GET` says: 404 for another path,
    /// 400 naming the subprotocol, 401 for the token.
    func admitsUpgrade(_ head: HTTPRequestHead) -> Bool {
        let path = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        guard path == "/v1/relay" || path == "/v1/relay/" else { return false }
        let offered = head.headers["sec-websocket-protocol"].flatMap { $0.split(separator: ",") }
            .map { $0.trimmingCharacters(in: .whitespaces) }
        return Self.speaksOurProtocol(offered) && authorizes(head)
    }

    /// The one subprotocol the relay speaks.
    static let relayProtocol = "hrrelay.v1"

    /// A client that offers subprotocols must offer ours (`bearer.TOKEN` is a token, not a protocol): answering with
    /// another (a future `hrrelay.v2`), or echoing a token back, would tell it something false.
    static func speaksOurProtocol(_ offered: [String]) -> Bool {
        offered.isEmpty || offered.contains(relayProtocol)
    }

    static let protocolRefusal = "This relay speaks the WebSocket subprotocol \(relayProtocol) only: offer it in "
        + "Sec-WebSocket-Protocol (\"\(relayProtocol), bearer.TOKEN\" when the token goes there), or offer none."

    /// The same decision as `authenticate`, on the raw request head the upgrade gate sees.
    func authorizes(_ head: HTTPRequestHead) -> Bool {
        var token: String?
        if let auth = head.headers["authorization"].first {
            let parts = auth.split(separator: " ", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "bearer" { token = parts[1].trimmingCharacters(in: .whitespaces) }
        }
        if token == nil, let query = head.uri.split(separator: "?", maxSplits: 1).dropFirst().first {
            for pair in query.split(separator: "&") where pair.hasPrefix("token=") {
                token = String(pair.dropFirst("token=".count)).removingPercentEncoding
            }
        }
        if token == nil {
            let offered = head.headers["sec-websocket-protocol"].flatMap { $0.split(separator: ",") }
                .map { $0.trimmingCharacters(in: .whitespaces) }
            token = offered.first { $0.hasPrefix("bearer.") }.map { String($0.dropFirst("bearer.".count)) }
        }
        if let token, let tokens, tokens.authenticate(token) != nil { return true }
        return configuration.allowAnonymous
            && RelayServerConfiguration.isLocalRequest(hosts: head.headers["host"], origins: head.headers["origin"], target: head.uri)
    }

    static let protocolHeader = HTTPField.Name("Sec-WebSocket-Protocol")!

    /// Session lists and exports read SQLite synchronously: a long export, or another process holding the store's
    /// lock (up to its 10 s busy timeout), would hold a thread of the concurrency pool, of which a Pi has as many as
    /// cores, and stall the relay with it. They run on lanes of their own instead: the lists on one, so that they
    /// never wait behind an export, and the exports on `exportLanes`, each on the one with the least to do.
    private static let archiveLane = DatabaseLane(label: "hr-gateway.relay.sessions")
    private static let exportLanes = (1...2).map { DatabaseLane(label: "hr-gateway.relay.export.\($0)") }
    /// Reads of the exports' files as they are sent (never behind a store's lock).
    private static let downloadLane = DatabaseLane(label: "hr-gateway.relay.downloads")

    /// The answer to an export refused before its first byte.
    static func exportRefusal(_ error: any Error) -> HTTPError {
        switch error {
        case SessionArchiveError.nothingToExport: HTTPError(.notFound, message: "\(error)")
        case let error as SessionArchiveError: HTTPError(.badRequest, message: "\(error)")
        default: HTTPError(.internalServerError, message: "The session store cannot be read: \(error)")
        }
    }

    /// Session lists waiting on their lane or running there (for tests).
    static var archiveReadsPending: Int { archiveLane.pending }

    /// Held while a lane is chosen and the export put on it: two downloads answered at once on two event loops both
    /// saw the same lane least busy and queued there, one behind the other, while the other lane idled (the cause of
    /// `theSessionListDoesNotWaitBehindExports` failing now and then).
    private static let choosingLane = Mutex(())

    /// Puts `job` on the export lane with the least to do.
    private static func submitExport(_ job: @escaping @Sendable () -> Void) {
        choosingLane.withLock { _ in (exportLanes.min { $0.pending < $1.pending } ?? exportLanes[0]).submit(job) }
    }

    /// What the kernel says of a download's client: still there, closed its side of the connection (its FIN came:
    /// gone, or half-closed and still reading), or gone for sure (it reset the connection, or the channel closed).
    enum ClientState: Sendable, Equatable { case present, closedItsSide, gone }

    /// Waits until more than `offset` bytes of the export are written or it is over (or cancelled), unless the
    /// client's state becomes one of `until` first, asked of the kernel every `clientCheckInterval`: a download
    /// abandoned before its first bytes (a click on another link, a script's timeout) went on being made up to its
    /// first part (a JSON's beats, an EDF's grids: most of the work), or waited for a lane and was then made, holding
    /// the downloads behind it (eight EDF downloads abandoned at 0.3 s held the next one's first byte 14 s).
    /// The first check comes after `firstCheck` (an answer begun for a client that closed its side: its kernel's
    /// reset, if it has gone, is back within a round trip).
    static func progress(
        of body: ExportBody, beyond offset: Int, client channel: any Channel, until: Set<ClientState>,
        firstCheck: Duration = clientCheckInterval
    ) async -> (ExportBody.Progress, ClientState) {
        // Made faster than it is sent (the usual case): no watcher for a part already there.
        let now = body.progressNow
        if now.size > offset || now.end != nil { return (now, .present) }
        return await withTaskGroup(of: (ExportBody.Progress, ClientState)?.self) { group in
            group.addTask { (await body.progress(beyond: offset), .present) }
            group.addTask {
                var wait = firstCheck
                while !Task.isCancelled {
                    try? await Task.sleep(for: wait)
                    wait = clientCheckInterval
                    if Task.isCancelled { break }
                    let state = await clientState(channel)
                    if until.contains(state) { return (body.progressNow, state) }
                }
                return nil
            }
            // The first answer wins; the other task is cancelled (the progress wait returns on cancellation).
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? (body.progressNow, .present)
        }
    }

    /// Downloads whose client went before their first bytes (for tests: the export was cancelled then).
    package static let abandonedExports = Atomic<Int>(0)

    /// Exports waiting for an export lane or being made.
    package static var exportsPending: Int { exportLanes.reduce(0) { $0 + $1.pending } }

    /// How often a download waiting for its export asks whether its client is still there.
    static let clientCheckInterval = Duration.milliseconds(100)

    /// The client of `channel` as the kernel sees it (TCP_INFO).
    static func clientState(_ channel: any Channel) async -> ClientState {
        guard channel.isActive else { return .gone }
        guard let socket = channel as? any SocketOptionProvider, let info = try? await socket.getTCPInfo().get() else {
            return .present
        }
        // Linux's TCP states (netinet/tcp.h): 7 TCP_CLOSE (reset), 8 TCP_CLOSE_WAIT (the client's FIN came),
        // 9 TCP_LAST_ACK (after its FIN, ours sent).
        switch info.tcpi_state {
        case 7: return .gone
        case 8, 9: return .closedItsSide
        default: return .present
        }
    }

    /// How much of an export is read and sent at a time.
    static let spoolPartBytes = 256 * 1024

    static func archiveRead<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await archiveLane.run(body)
    }

    /// A parameter given twice is refused, naming it: `format=csv&format=edf` was a CSV without a word.
    static func atMostOnce(_ names: [String], in request: Request) throws {
        for name in names where request.uri.queryParameters.getAll(name).count > 1 {
            throw HTTPError(.badRequest, message: "\(name) is given more than once: give it once.")
        }
    }

    static func offeredProtocols(_ request: Request) -> [String] {
        request.headers[values: protocolHeader].flatMap { $0.split(separator: ",") }
            .map { $0.trimmingCharacters(in: .whitespaces) }
    }

    /// `hrrelay.v1` when offered (the gate lets no other offer through); nothing when none was.
    func selectedProtocol(_ request: Request) -> HTTPFields {
        guard Self.offeredProtocols(request).contains(Self.relayProtocol) else { return [:] }
        var fields = HTTPFields()
        fields[Self.protocolHeader] = Self.relayProtocol
        return fields
    }

    static func token(in request: Request) -> String? {
        if let auth = request.headers[.authorization] {
            let parts = auth.split(separator: " ", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "bearer" { return String(parts[1]).trimmingCharacters(in: .whitespaces) }
        }
        if let t = request.uri.queryParameters.get("token"), !t.isEmpty { return t }
        for p in offeredProtocols(request) where p.hasPrefix("bearer.") { return String(p.dropFirst("bearer.".count)) }
        return nil
    }

    private func serve(principal: RelayPrincipal, inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter)
        async throws
    {
        try await Self.pump(
            hub: hub, principal: principal, inbound: inbound, outbound: outbound,
            heartbeat: configuration.heartbeat, maxFrame: configuration.maxFrameBytes)
    }

    /// Carries one consumer's frames both ways until either side ends: its queue out, its commands in, heartbeats.
    package static func pump(
        hub: RelayHub, principal: RelayPrincipal, inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter,
        heartbeat: Duration, maxFrame: Int
    ) async throws {
        let connection = hub.connect(principal)
        defer { hub.disconnect(connection) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                while let text = await connection.queue.next() {
                    try await outbound.write(.text(text))
                }
                // Ended by the connection's end (below): the peer closed, or its connection failed, and the
                // WebSocket handler answers with the code that says why (1007 for text that is not UTF-8, 1009 for
                // a message too long), or there is no one left to tell.
                if Task.isCancelled { return }
                switch connection.closeReason.withLock({ $0 }) {
                case .revoked?:
                    try? await outbound.close(.policyViolation, reason: "token revoked; ask for a new one")
                case nil:
                    // Closed by overflow (too slow), by shutdown, or after the peer left.
                    try? await outbound.close(.goingAway, reason: "closed by the gateway; reconnect to resume")
                }
            }
            group.addTask {
                while !Task.isCancelled {
                    try await Task.sleep(for: heartbeat)
                    connection.queue.push(hub.heartbeatText(), droppable: true)
                }
            }
            group.addTask {
                for try await message in inbound.messages(maxSize: maxFrame) {
                    switch message {
                    case .text(let text):
                        await hub.handle(text: text, from: connection)
                    case .binary:
                        connection.queue.push(
                            RelayCommandError("bad_request", "Commands are JSON text frames, not binary.")
                                .result(id: nil, command: nil).jsonString,
                            droppable: false)
                    }
                }
            }
            // The first child to end ends the connection: the peer closed, the queue overflowed, or the peer went
            // without a close frame (a reset, a half frame, a TLS peer vanishing), when reading throws. Then too the
            // queue closes: the writer waits on it, not on cancellation, and would hold the consumer for good.
            defer {
                group.cancelAll()
                connection.queue.close()
            }
            _ = try await group.next()
        }
    }
}

extension RelayServer {
    /// `Content-Disposition` for a download named `filename` (a session id from the network is in it): quotes,
    /// backslashes, path separators and control characters become `_` in the plain name, and the name as given is
    /// in `filename*` (RFC 6266, percent-encoded UTF-8).
    static func attachment(_ filename: String) -> String {
        let plain = String(String.UnicodeScalarView(filename.unicodeScalars.map { c -> Unicode.Scalar in
            c == "\"" || c == "\\" || c == "/" || c.properties.generalCategory == .control || !c.isASCII ? "_" : c
        }))
        let allowed = CharacterSet.alphanumerics.intersection(CharacterSet(charactersIn: Unicode.Scalar(0)...Unicode.Scalar(127)))
            .union(CharacterSet(charactersIn: "-._~"))
        let encoded = filename.addingPercentEncoding(withAllowedCharacters: allowed) ?? plain
        return "attachment; filename=\"\(plain)\"; filename*=UTF-8''\(encoded)"
    }
}
