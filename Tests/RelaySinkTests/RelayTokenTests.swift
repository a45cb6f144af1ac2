import Foundation
import Testing

@testable import RelaySink

@Suite struct RelayTokenTests {
    func tempStore() -> RelayTokenStore {
        RelayTokenStore(directory: NSTemporaryDirectory() + "tokens-" + UUID().uuidString + "/nested")
    }

    @Test func tokensAreStoredOnlyAsHashesWithPrivatePermissions() throws {
        let store = tempStore()
        let (token, record) = try store.create(name: "phone", scope: .control, nowMs: 42)
        #expect(token.hasPrefix("hrg_") && token.count > 40)
        let text = try String(contentsOfFile: store.path, encoding: .utf8)
        #expect(!text.contains(token))
        #expect(!text.contains(String(token.dropFirst(4).prefix(16))))
        #expect(text.contains(record.sha256))
        let attributes = try FileManager.default.attributesOfItem(atPath: store.path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        #expect(record.sha256.count == 64)
        #expect(record.id == String(record.sha256.prefix(12)))
    }

    @Test func authenticationFindsTheRightScopeAndRefusesEverythingElse() throws {
        let store = tempStore()
        let (control, c) = try store.create(name: "phone", scope: .control, nowMs: 0)
        let (read, r) = try store.create(name: "dash", scope: .read, nowMs: 0)
        #expect(store.authenticate(control) == RelayPrincipal(consumerId: c.id, name: "phone", scope: .control))
        #expect(store.authenticate(read)?.scope == .read)
        #expect(store.authenticate(read)?.consumerId == r.id)
        #expect(store.authenticate("") == nil)
        #expect(store.authenticate(String(control.dropLast())) == nil)
        #expect(store.authenticate(control + "x") == nil)
        #expect(store.authenticate(c.sha256) == nil, "the stored hash is not a token")
        let removed = try store.revoke(String(c.id.prefix(6)))
        #expect(removed.name == "phone")
        #expect(store.authenticate(control) == nil)
        #expect(try store.list().map(\.name) == ["dash"])
        #expect(throws: RelayTokenStoreError.self) { try store.revoke("nobody") }
    }

    @Test func aCorruptTokenFileIsReportedNotIgnored() throws {
        let store = tempStore()
        try FileManager.default.createDirectory(atPath: store.directory, withIntermediateDirectories: true)
        try "{not json".write(toFile: store.path, atomically: true, encoding: .utf8)
        #expect(throws: RelayTokenStoreError.self) { try store.list() }
        #expect(store.authenticate("hrg_x") == nil)
    }

    @Test func constantTimeComparisonComparesWholeArrays() {
        #expect(RelayTokenStore.constantTimeEqual([1, 2, 3], [1, 2, 3]))
        #expect(!RelayTokenStore.constantTimeEqual([1, 2, 3], [1, 2, 4]))
        #expect(!RelayTokenStore.constantTimeEqual([9, 2, 3], [1, 2, 3]))
        #expect(!RelayTokenStore.constantTimeEqual([1, 2], [1, 2, 3]))
    }
}

@Suite struct RelayPinningTests {
    @Test func theTLSEndpointOfAWSSAddress() {
        #expect(RelayClient.tlsEndpoint("wss://pi.local:8765/v1/relay")! == ("pi.local", 8765))
        #expect(RelayClient.tlsEndpoint("wss://pi.local/v1/relay")! == ("pi.local", 443))
        #expect(RelayClient.tlsEndpoint("wss://[::1]:9000/v1/relay")! == ("::1", 9000))
        #expect(RelayClient.tlsEndpoint("wss://10.0.0.2:1?token=x")! == ("10.0.0.2", 1))
        #expect(RelayClient.tlsEndpoint("ws://pi.local:8765/v1/relay") == nil)
        #expect(RelayClient.tlsEndpoint("wss://:8765/") == nil)
        #expect(RelayClient.tlsEndpoint("wss://pi.local:port/") == nil)
    }

    @Test func fingerprintsCompareWhateverTheirSpelling() {
        #expect(RelayPinning.normalized("3a:1f:00") == RelayPinning.normalized("3A1F00"))
        #expect(RelayPinning.normalized("3a:1f:00") != RelayPinning.normalized("3A1F01"))
    }

    @Test func aShortPinIsRefusedBeforeAnyConnection() async {
        await #expect(throws: RelayPinningError.self) {
            _ = try await RelayPinning.configuration(host: "127.0.0.1", port: 9, fingerprint: "AB:CD")
        }
    }
}
