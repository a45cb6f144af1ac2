import Foundation
import GatewayEngine
import Testing

@testable import RelayCore
@testable import RelayStore
@testable import RelayWebServer
@testable import RelayWSClient

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

    @Test func authenticationReadsTheFileOnlyWhenItChanged() throws {
        let directory = NSTemporaryDirectory() + "tokens-" + UUID().uuidString
        let reads = Locked(0)
        let store = RelayTokenStore(directory: directory, readFile: { path in
            reads.withLock { $0 += 1 }
            return FileManager.default.contents(atPath: path).map { [UInt8]($0) }
        })
        // Another process (`hr-gateway token create`, `token revoke`) writes the file.
        let other = RelayTokenStore(directory: directory)
        #expect(store.authenticate("hrg_nothing-yet") == nil)
        #expect(reads.withLock { $0 } == 0, "no file, nothing to read")
        let (first, record) = try other.create(name: "phone", scope: .control, nowMs: 0)
        for _ in 0..<3 { #expect(store.authenticate(first)?.consumerId == record.id) }
        #expect(reads.withLock { $0 } == 1, "an unchanged file is read once, not at every lookup")
        #expect(try store.list().map(\.id) == [record.id])
        #expect(reads.withLock { $0 } == 1)

        let (second, _) = try other.create(name: "dash", scope: .read, nowMs: 1)
        #expect(store.authenticate(second)?.scope == .read, "a token created elsewhere works at once")
        #expect(store.authenticate(first) != nil)
        #expect(reads.withLock { $0 } == 2)
        _ = try other.revoke("phone")
        #expect(store.authenticate(first) == nil, "a token revoked elsewhere is refused at once")
        #expect(store.authenticate(second) != nil)
        #expect(reads.withLock { $0 } == 3)
    }

    @Test func aTokenFileDamagedAfterItWasReadKeepsTheLastRecordsForLookups() throws {
        let directory = NSTemporaryDirectory() + "tokens-" + UUID().uuidString
        let store = RelayTokenStore(directory: directory)
        let (token, _) = try store.create(name: "phone", scope: .control, nowMs: 0)
        #expect(store.authenticate(token) != nil)
        try "{not json".write(toFile: store.path, atomically: true, encoding: .utf8)
        #expect(throws: RelayTokenStoreError.self) { try store.list() }
        #expect(store.authenticate(token) != nil, "a file being rewritten or damaged revokes nothing")
    }

    /// A gateway whose token file goes bad says so once (it kept the last records in silence: a token revoked
    /// meanwhile went on working with nothing in the log), and says when the file reads again.
    @Test func aTokenFileThatCannotBeReadIsSaidOnce() throws {
        let directory = NSTemporaryDirectory() + "tokens-" + UUID().uuidString
        let said = Locked<[String]>([])
        let store = RelayTokenStore(directory: directory, warn: { m in said.withLock { $0.append(m) } })
        let (token, _) = try store.create(name: "phone", scope: .control, nowMs: 0)
        #expect(store.authenticate(token) != nil && said.withLock { $0 }.isEmpty)
        try "{not json".write(toFile: store.path, atomically: true, encoding: .utf8)
        for _ in 0..<3 { #expect(store.authenticate(token) != nil) }
        #expect(said.withLock { $0 }.count == 1)
        #expect(said.withLock { $0 }.first?.contains("is not a token file (not valid JSON)") == true, "\(said.withLock { $0 })")
        #expect(said.withLock { $0 }.first?.contains("a token created or revoked since does not count") == true)
        let fresh = RelayTokenStore(directory: directory + "-2")
        _ = try fresh.create(name: "other", scope: .read, nowMs: 0)
        try FileManager.default.removeItem(atPath: store.path)
        try FileManager.default.copyItem(atPath: fresh.path, toPath: store.path)
        #expect(store.authenticate(token) == nil, "the file as it reads now")
        #expect(said.withLock { $0 }.count == 2 && said.withLock { $0 }.last?.contains("readable again") == true)

        // Damaged before the gateway ever read it: nothing was kept, and the warning no longer says it was.
        let never = Locked<[String]>([])
        let damaged = RelayTokenStore(directory: directory + "-3", warn: { m in never.withLock { $0.append(m) } })
        try FileManager.default.createDirectory(atPath: damaged.directory, withIntermediateDirectories: true)
        try "{not json".write(toFile: damaged.path, atomically: true, encoding: .utf8)
        #expect(damaged.authenticate(token) == nil)
        #expect(never.withLock { $0 }.first?.contains("No token was ever read from it: every consumer is refused") == true,
                "\(never.withLock { $0 })")
    }

    /// Token commands at the same moment (two administrators, a provisioning loop run in parallel) read, change and
    /// write the file in turn: each creation is kept and a revocation stays done. (They wrote over each other through
    /// one temporary name: revocations undone, printed tokens never stored, a corrupt file.)
    @Test func concurrentChangesAreAllKept() throws {
        let directory = NSTemporaryDirectory() + "tokens-" + UUID().uuidString
        let victim = try RelayTokenStore(directory: directory).create(name: "stolen", scope: .control, nowMs: 0)
        let tokens = Locked<[String]>([])
        let failures = Locked<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 24) { k in
            // Each its own store object, as each command is its own process.
            let store = RelayTokenStore(directory: directory)
            do {
                if k == 7 {
                    _ = try store.revoke("stolen")
                } else {
                    let (token, _) = try store.create(name: "phone-\(k)", scope: .control, nowMs: Int64(k))
                    tokens.withLock { $0.append(token) }
                }
            } catch { failures.withLock { $0.append("\(error)") } }
        }
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")
        let store = RelayTokenStore(directory: directory)
        #expect(try store.list().count == 23)
        #expect(store.authenticate(victim.token) == nil, "the revocation stayed done")
        for token in tokens.withLock({ $0 }) { #expect(store.authenticate(token) != nil) }
        let left = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.contains(".tmp") }
        #expect(left.isEmpty, "\(left)")
    }

    /// Root changing the tokens of a service's state directory (`sudo hr-gateway token revoke`) keeps the file the
    /// service's: a new file takes the directory's owner, a rewritten one keeps its owner and mode. (It became
    /// root's, mode 0600: the service could no longer read it.)
    @Test func rootKeepsTheServicesOwnership() throws {
        try #require(geteuid() == 0, "needs root (CI runs as root)")
        let directory = NSTemporaryDirectory() + "tokens-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        #expect(chown(directory, 65534, 65534) == 0)
        let store = RelayTokenStore(directory: directory)
        _ = try store.create(name: "phone", scope: .control, nowMs: 0)
        var st = stat()
        #expect(stat(store.path, &st) == 0 && st.st_uid == 65534 && st.st_gid == 65534 && st.st_mode & 0o777 == 0o600)
        #expect(chmod(store.path, 0o640) == 0 && chown(store.path, 65534, 0) == 0)
        _ = try store.create(name: "dash", scope: .read, nowMs: 0)
        _ = try store.revoke("phone")
        #expect(stat(store.path, &st) == 0 && st.st_uid == 65534 && st.st_gid == 0 && st.st_mode & 0o777 == 0o640)

        // The TLS pair `token create --tls` makes: the directory's owner's too.
        let files = RelayTLSFiles.inStateDirectory(directory)
        try files.createSelfSignedIfMissing()
        for path in [files.keyPath, files.certificatePath, directory + "/tls"] {
            #expect(stat(path, &st) == 0 && st.st_uid == 65534, "\(path) owned by \(st.st_uid)")
        }
    }

    @Test func theSelfSignedCertificateIsMadeOnceWithAPrivateKeyAndLoadsIntoTLS() throws {
        let directory = NSTemporaryDirectory() + "tls-" + UUID().uuidString
        let files = RelayTLSFiles.inStateDirectory(directory)
        try files.createSelfSignedIfMissing()
        let key = try FileManager.default.attributesOfItem(atPath: files.keyPath)
        #expect((key[.posixPermissions] as? Int) == 0o600)
        let pem = try String(contentsOfFile: files.certificatePath, encoding: .utf8)
        #expect(pem.hasPrefix("-----BEGIN CERTIFICATE-----"))
        let der = try #require(RelayTLSFiles.firstCertificateDER(pem))
        let fingerprint = try files.fingerprint()
        #expect(fingerprint == RelayTLSFiles.fingerprint(der: der))
        #expect(fingerprint.split(separator: ":").count == 32)
        // BoringSSL (through NIOSSL) takes the pair as a server identity.
        _ = try files.serverConfiguration()
        // Made once: a second call keeps the certificate (and so the fingerprint clients pinned).
        try files.createSelfSignedIfMissing()
        #expect(try files.fingerprint() == fingerprint)
        // Another state directory, another key.
        let other = RelayTLSFiles.inStateDirectory(directory + "-2")
        try other.createSelfSignedIfMissing()
        #expect(try other.fingerprint() != fingerprint)
    }

    @Test func aChainFileIsPinnedByItsFirstCertificate() throws {
        let a = try RelayTLSFiles.makeSelfSigned(commonName: "a", now: Date())
        let b = try RelayTLSFiles.makeSelfSigned(commonName: "b", now: Date())
        let first = try #require(RelayTLSFiles.firstCertificateDER(a.certificate))
        #expect(RelayTLSFiles.firstCertificateDER(a.certificate + b.certificate) == first)
        #expect(RelayTLSFiles.firstCertificateDER(a.key + a.certificate) == first, "a key block before it is skipped")
        #expect(RelayTLSFiles.firstCertificateDER(a.key) == nil)
        #expect(RelayTLSFiles.firstCertificateDER("no PEM here") == nil)
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

    /// Without a pin, a wss:// address given as an IP address is refused before connecting, saying to pin (the
    /// connection failed on SNI with NIOSSL's words); a name is not.
    @Test func anAddressWithoutAPinIsToldToPin() async throws {
        for url in ["wss://192.168.1.20:8765/v1/relay", "wss://[::1]:8765/v1/relay"] {
            do {
                _ = try await RelayClient.settings(url: url, token: nil, pinnedFingerprint: nil, maxFrameBytes: 1 << 20)
                Issue.record("\(url) was taken")
            } catch {
                #expect("\(error)".contains("--pin SHA256"), "\(error)")
            }
        }
        _ = try await RelayClient.settings(url: "wss://pi.local:8765/v1/relay", token: nil, pinnedFingerprint: nil, maxFrameBytes: 1 << 20)
        _ = try await RelayClient.settings(url: "ws://192.168.1.20:8765/v1/relay", token: nil, pinnedFingerprint: nil, maxFrameBytes: 1 << 20)
        #expect(RelayClient.isAddress("10.0.0.2") && RelayClient.isAddress("fe80::1") && !RelayClient.isAddress("pi.local")
            && !RelayClient.isAddress("cafe"))
    }

    @Test func fingerprintsCompareWhateverTheirSpelling() {
        #expect(RelayPinning.normalized("3a:1f:00") == RelayPinning.normalized("3A1F00"))
        #expect(RelayPinning.normalized("3a:1f:00") != RelayPinning.normalized("3A1F01"))
    }

    /// Plain HTTP on the TLS port (http:// typed for https://) is answered 400 in plain text saying what to use, and
    /// logged; a TLS handshake on the same port still completes (the certificate pinned by its fingerprint).
    @Test func plainHTTPOnTheTLSPortIsToldToUseTLS() async throws {
        let captured = CapturedLog()
        let relay = try await LiveRelay(accessLog: RelayAccessLog(logger: captured.logger), tls: true)
        for _ in 0..<2 {
            let (body, head) = try await httpGet(port: relay.port, path: "/", timeoutSeconds: 10)
            #expect(head.hasPrefix("HTTP/1.1 400 "), "\(head)")
            #expect(body.contains("This port speaks TLS") && body.contains("https://") && body.contains("wss://"), "\(body)")
        }
        #expect(captured.all.filter { $0.contains("plain HTTP from 127.0.0.1 on the TLS port") }.count == 1, "\(captured.all)")
        let fingerprint = try RelayTLSFiles.inStateDirectory(relay.directory).fingerprint()
        _ = try await RelayPinning.configuration(host: "127.0.0.1", port: relay.port, fingerprint: fingerprint)
        await relay.stop()
    }

    @Test func aShortPinIsRefusedBeforeAnyConnection() async {
        await #expect(throws: RelayPinningError.self) {
            _ = try await RelayPinning.configuration(host: "127.0.0.1", port: 9, fingerprint: "AB:CD")
        }
    }
}
