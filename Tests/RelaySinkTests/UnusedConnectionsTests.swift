import NIOCore
import NIOEmbedded
import NIOHTTP1
@testable import RelayWebServer
import Testing

/// Stopping the relay closes the connections that never sent a request, whether or not their handler has started.
@Suite struct UnusedConnectionsTests {
    func connection() async throws -> NIOAsyncTestingChannel {
        let channel = await NIOAsyncTestingChannel(handler: UpgradeGate(admits: { _ in true }))
        try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1))
        return channel
    }

    @Test func stoppingClosesOnlyTheConnectionsThatSentNoRequest() async throws {
        let unused = UnusedConnections()
        let idle = try await connection()
        let used = try await connection()
        unused.track(idle)
        unused.track(used)
        try await used.writeInbound(HTTPServerRequestPart.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: "/")))
        _ = try await used.readInbound(as: HTTPServerRequestPart.self)

        unused.closeAll()
        await idle.testingEventLoop.run()
        await used.testingEventLoop.run()
        #expect(!idle.isActive)
        // The request on the other one has started: it is left to finish.
        #expect(used.isActive)
        _ = try await used.finish()
    }

    @Test func aConnectionSetUpOnceTheServerIsStoppingIsClosedAtOnce() async throws {
        let unused = UnusedConnections()
        unused.closeAll()
        let late = try await connection()
        unused.track(late)
        await late.testingEventLoop.run()
        #expect(!late.isActive)
    }

    @Test func aClosedConnectionIsForgotten() async throws {
        let unused = UnusedConnections()
        let gone = try await connection()
        unused.track(gone)
        #expect(unused.count == 1)
        try await gone.close()
        #expect(unused.count == 0)
    }
}
