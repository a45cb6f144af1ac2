import Crypto
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS

/// Trust for a `wss://` relay by the SHA-256 fingerprint of its certificate (what `hr-gateway token create` and
/// `serve --tls` print), for the gateway's self-signed certificate, which no CA vouches for.
///
/// The certificate is fetched in a first handshake and compared with the pin; the WebSocket connection then trusts
/// that certificate alone, so a different one presented on the second connection fails its handshake.
public enum RelayPinning {
    /// The TLS configuration trusting exactly the certificate at `host:port` whose SHA-256 is `fingerprint`
    /// (hex, colons and case optional).
    public static func configuration(host: String, port: Int, fingerprint: String) async throws(RelayPinningError)
        -> TLSConfiguration
    {
        let wanted = normalized(fingerprint)
        guard wanted.count == 64 else {
            throw RelayPinningError("A SHA-256 fingerprint has 32 bytes (64 hex digits, colons optional); got '\(fingerprint)'.")
        }
        let certificate = try await peerCertificate(host: host, port: port)
        let der: [UInt8]
        do { der = try certificate.toDERBytes() } catch { throw RelayPinningError("Cannot read the certificate of \(host):\(port): \(error).") }
        let got = SHA256.hash(data: der).map { String(format: "%02X", $0) }.joined(separator: ":")
        guard normalized(got) == wanted else {
            throw RelayPinningError(
                "The certificate of \(host):\(port) has SHA-256 \(got), not the pinned one: this is not the gateway you "
                    + "pinned (or its certificate was replaced). Check with `hr-gateway token create` on the gateway.")
        }
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates([certificate])
        // The pin names the certificate; the self-signed one carries the gateway's host name, not the address used.
        tls.certificateVerification = .noHostnameVerification
        return tls
    }

    static func normalized(_ hex: String) -> String {
        String(hex.uppercased().filter { $0.isHexDigit })
    }

    /// The leaf certificate `host:port` presents, unverified.
    static func peerCertificate(host: String, port: Int) async throws(RelayPinningError) -> NIOSSLCertificate {
        var config = TLSConfiguration.makeClientConfiguration()
        config.certificateVerification = .none
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let handshake = loop.makePromise(of: NIOSSLCertificate.self)
        do {
            let context = try NIOSSLContext(configuration: config)
            let channel = try await ClientBootstrap(group: loop)
                .connectTimeout(.seconds(10))
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(
                            NIOSSLClientHandler(context: context, serverHostname: nil))
                        try channel.pipeline.syncOperations.addHandler(PeerCertificateCatcher(handshake))
                    }
                }
                .connect(host: host, port: port).get()
            defer { channel.close(promise: nil) }
            let timeout = loop.scheduleTask(in: .seconds(10)) {
                handshake.fail(RelayPinningError("No TLS handshake from \(host):\(port) within 10 s."))
            }
            defer { timeout.cancel() }
            return try await handshake.futureResult.get()
        } catch let e as RelayPinningError {
            throw e
        } catch {
            handshake.fail(error)
            throw RelayPinningError("Cannot fetch the TLS certificate of \(host):\(port): \(error).")
        }
    }
}

/// Fulfils the promise with the peer's certificate once the handshake completes, or fails it.
private final class PeerCertificateCatcher: ChannelInboundHandler {
    typealias InboundIn = NIOAny
    private let promise: EventLoopPromise<NIOSSLCertificate>

    init(_ promise: EventLoopPromise<NIOSSLCertificate>) { self.promise = promise }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event {
            if let certificate = try? context.pipeline.syncOperations.nioSSL_peerCertificate() {
                promise.succeed(certificate)
            } else {
                promise.fail(RelayPinningError("The server presented no certificate."))
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(RelayPinningError("TLS handshake failed: \(error)."))
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(RelayPinningError("The connection closed before the TLS handshake completed (is it a wss:// port?)."))
        context.fireChannelInactive()
    }
}

/// Why a pinned connection cannot be made.
public struct RelayPinningError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
