import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

/// Wraps the WebSocket upgrade channel so that a refused upgrade says why (401 without a valid token, 404 on another
/// path, 400 naming the subprotocol), not the bare 400 the upgrader answers: the gate strips the `Upgrade` header
/// of such a request before the upgrader sees it, so it is answered as a plain `GET` by the HTTP router.
struct UpgradeGateChannel: ServerChildChannel {
    typealias Value = HTTP1WebSocketUpgradeChannel.Value

    let inner: HTTP1WebSocketUpgradeChannel
    let admits: @Sendable (HTTPRequestHead) -> Bool
    let unused: UnusedConnections
    /// A connection whose first request head has not come by then is closed (the upgrader's idle timeout starts
    /// only after that head).
    let firstRequestTimeout: TimeAmount
    /// Connections open per address and in all; one over either limit is closed as soon as it is set up.
    let slots: ConnectionSlots
    let accessLog: RelayAccessLog
    /// The port speaks TLS (the server builder put its handler first): a request in plain text is answered 400.
    let speaksTLS: Bool

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let negotiated = inner.setup(channel: channel, logger: logger)
        let peer = channel.remoteAddress
        if let refusal = slots.take(peer?.ipAddress) {
            accessLog.closedOverLimit(refusal, from: peer)
            // Closed once registered and active (the channel is neither while it is set up), and set up all the
            // same (its handler then sees the negotiation fail and returns): a setup that fails would be an error
            // of the listening socket's.
            try? channel.pipeline.syncOperations.addHandler(CloseWhenActive(), position: .first)
            return negotiated
        }
        channel.closeFuture.whenComplete { [slots] _ in slots.release(peer?.ipAddress) }
        do {
            if speaksTLS {
                try channel.pipeline.syncOperations.addHandler(PlainHTTPOnTLSPort(accessLog: accessLog), position: .first)
            }
            let decoder = try channel.pipeline.syncOperations.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            try channel.pipeline.syncOperations.addHandler(UpgradeGate(admits: admits), position: .after(decoder))
            unused.track(channel)
            let timeout = channel.eventLoop.scheduleTask(in: firstRequestTimeout) { UnusedConnections.closeIfUnused(channel) }
            channel.closeFuture.whenComplete { _ in timeout.cancel() }
        } catch {
            channel.close(promise: nil)
        }
        return negotiated
    }

    func handle(value: Value, logger: Logger) async {
        let channel = value.channel
        await withTaskCancellationHandler {
            await inner.handle(value: value, logger: logger)
        } onCancel: {
            // Until the first request head the upgrade negotiation ignores cancellation, so a connection that never
            // sends one (a browser's preconnect) would hold up the server's shutdown forever. The gate leaves the
            // pipeline at that head: while it is there no request has started, and closing loses nothing.
            channel.eventLoop.execute {
                if (try? channel.pipeline.syncOperations.handler(type: UpgradeGate.self)) != nil {
                    channel.close(promise: nil)
                }
            }
        }
    }
}

/// Sees the first request head only (an upgrade can only happen there), then leaves the pipeline.
final class UpgradeGate: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    private let admits: @Sendable (HTTPRequestHead) -> Bool

    init(admits: @escaping @Sendable (HTTPRequestHead) -> Bool) { self.admits = admits }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        guard case .head(var head) = part else {
            context.fireChannelRead(data)
            return
        }
        let upgrading = head.headers[canonicalForm: "upgrade"].contains { $0.lowercased() == "websocket" }
        if upgrading && !admits(head) {
            head.headers.remove(name: "upgrade")
            head.headers.replaceOrAdd(name: "connection", value: "close")
        }
        context.fireChannelRead(wrapInboundOut(.head(head)))
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}

// The gate's state is immutable and it runs on its channel's event loop only.
extension UpgradeGate: @unchecked Sendable {}

/// Closes its connection as soon as it is active: one refused by `ConnectionSlots`.
final class CloseWhenActive: ChannelInboundHandler {
    typealias InboundIn = NIOAny

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { context.close(promise: nil) }
    }

    func channelActive(context: ChannelHandlerContext) {
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
}

/// On a `--tls` port, answers a connection whose first bytes are a plain HTTP request (`http://` typed for
/// `https://`, `ws://` for `wss://`) with a 400 that says so, in plain text, and closes it: the TLS handshake failed
/// on it and the client was closed without a word (curl: "Empty reply from server"), the log saying nothing. A TLS
/// connection starts with a handshake record (0x16); a request starts with its method's capital letter.
final class PlainHTTPOnTLSPort: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let accessLog: RelayAccessLog
    /// Answered already: the rest of the request is dropped while the connection closes.
    private var answered = false

    init(accessLog: RelayAccessLog) { self.accessLog = accessLog }

    static let answer: String = {
        let body = "This port speaks TLS (hr-gateway serve --tls): use https:// for the dashboard and wss:// for the "
            + "relay, trusting the certificate by the SHA-256 fingerprint serve printed.\n"
        return "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: \(body.utf8.count)\r\n"
            + "Connection: close\r\n\r\n" + body
    }()

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if answered { return }
        let bytes = unwrapInboundIn(data)
        guard let first = bytes.getInteger(at: bytes.readerIndex, as: UInt8.self), (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(first)
        else {
            context.fireChannelRead(data)
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            return
        }
        answered = true
        accessLog.plainHTTPOnTLSPort(from: context.channel.remoteAddress)
        // Written from the front of the pipeline: straight to the socket, not through TLS.
        let answer = context.channel.allocator.buffer(string: Self.answer)
        context.writeAndFlush(wrapOutboundOut(answer)).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }
}

/// Every connection from its setup until it closes, so that stopping the server closes those that never sent a
/// request: also one accepted but not yet handed to its handler when the server stopped (the accepted connections
/// reach their handlers in the order their setup completes, not the order they arrived), which no handler's
/// cancellation would reach.
final class UnusedConnections: Sendable {
    private struct State {
        var channels: [ObjectIdentifier: any Channel] = [:]
        var stopping = false
    }

    private let state = Mutex(State())

    init() {}

    /// Tracks `channel` until it closes; one set up once the server is stopping is closed at once when unused.
    func track(_ channel: any Channel) {
        let key = ObjectIdentifier(channel)
        let stopping = state.withLock { s -> Bool in
            if !s.stopping { s.channels[key] = channel }
            return s.stopping
        }
        if stopping { Self.closeIfUnused(channel) } else {
            channel.closeFuture.whenComplete { [self] _ in _ = state.withLock { $0.channels.removeValue(forKey: key) } }
        }
    }

    /// How many connections are tracked (open, or closing).
    var count: Int { state.withLock { $0.channels.count } }

    /// Closes every tracked connection that has not sent a request head (the gate is still in its pipeline: no
    /// request has started, and closing loses nothing).
    func closeAll() {
        let channels = state.withLock { s -> [any Channel] in
            s.stopping = true
            return Array(s.channels.values)
        }
        channels.forEach(Self.closeIfUnused)
    }

    static func closeIfUnused(_ channel: any Channel) {
        channel.eventLoop.execute {
            if (try? channel.pipeline.syncOperations.handler(type: UpgradeGate.self)) != nil {
                channel.close(promise: nil)
            }
        }
    }
}
