import Foundation
import GatewayEngine
import Testing

@Suite struct RelayCommandTests {
    func stateDir() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("hrg-relay-\(UUID().uuidString)").path
    }

    /// For scripts: `token create --json` gives the token with its record, `token list --json` the records (never a
    /// token), `[]` when there are none.
    @Test func tokenCreateAndListSpeakJSON() throws {
        let dir = stateDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let none = try CLI.run(["token", "list", "--json", "--state-dir", dir])
        #expect(none.status == 0 && none.stdout == "[]\n", "\(none.stdout) \(none.stderr)")
        let created = try CLI.run(["token", "create", "--json", "--read-only", "--name", "dash", "--state-dir", dir])
        #expect(created.status == 0, "\(created.stderr)")
        let record = try JSONValue(parsing: created.stdout)
        let token = try #require(record["token"]?.stringValue)
        #expect(token.hasPrefix("hrg_") && record["name"]?.stringValue == "dash" && record["scope"]?.stringValue == "read-only")
        let list = try CLI.run(["token", "list", "--json", "--state-dir", dir])
        let listed = try #require(try JSONValue(parsing: list.stdout).arrayValue)
        #expect(listed.count == 1 && listed.first?["id"] == record["id"] && listed.first?["created_at_ms"] == record["created_at_ms"])
        #expect(!list.stdout.contains(token))
    }

    @Test func tokenCreatePrintsTheTokenLastAndListAndRevokeNeverShowIt() throws {
        let dir = stateDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let created = try CLI.run(["token", "create", "--name", "phone", "--state-dir", dir])
        #expect(created.status == 0, "\(created.stderr)")
        let token = try #require(created.lines.last)
        #expect(token.hasPrefix("hrg_"))
        let readOnly = try CLI.run(["token", "create", "--read-only", "--name", "obs"], environment: ["HR_GATEWAY_STATE_DIR": dir])
        #expect(readOnly.stdout.contains("read-only"))
        let list = try CLI.run(["token", "list", "--state-dir", dir])
        #expect(list.lines.count == 2)
        #expect(list.lines.contains { $0.contains("control") && $0.hasSuffix("phone") })
        #expect(list.lines.contains { $0.contains("read-only") && $0.hasSuffix("obs") })
        #expect(!list.stdout.contains(token))
        let stored = try String(contentsOfFile: dir + "/tokens.json", encoding: .utf8)
        #expect(!stored.contains(token))
        let revoked = try CLI.run(["token", "revoke", "phone", "--state-dir", dir])
        #expect(revoked.status == 0)
        #expect(try CLI.run(["token", "list", "--state-dir", dir]).lines.count == 1)
        let missing = try CLI.run(["token", "revoke", "phone", "--state-dir", dir])
        #expect(missing.status != 0)
        #expect(missing.stderr.contains("token list"))
    }

    @Test func tokenNamesAreOnePerTokenAndNeverEmpty() throws {
        let dir = stateDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(try CLI.run(["token", "create", "--name", "phone", "--state-dir", dir]).status == 0)
        let again = try CLI.run(["token", "create", "--name", "phone", "--state-dir", dir])
        #expect(again.status == 1)
        #expect(again.stderr.contains("A token named 'phone' exists already"), "\(again.stderr)")
        #expect(again.stderr.contains("token revoke phone"))
        #expect(!again.stdout.contains("hrg_"), "no token is printed that was not stored")
        for bad in ["", "  ", "two\nlines", " phone", "phone ", "line\u{2028}break"] {
            let refused = try CLI.run(["token", "create", "--name", bad, "--state-dir", dir])
            #expect(refused.status == 64, "name \(bad.debugDescription): \(refused.stderr)")
        }
        // The default name nobody chose is numbered instead.
        for _ in 0..<2 { #expect(try CLI.run(["token", "create", "--state-dir", dir]).status == 0) }
        let names = try CLI.run(["token", "list", "--state-dir", dir]).lines.compactMap { $0.split(separator: " ").last }
        #expect(names.sorted() == ["consumer", "consumer-2", "phone"])
        // Each name revokes exactly its token.
        #expect(try CLI.run(["token", "revoke", "consumer", "--state-dir", dir]).status == 0)
        let left = try CLI.run(["token", "list", "--state-dir", dir]).lines.compactMap { $0.split(separator: " ").last }
        #expect(left.sorted() == ["consumer-2", "phone"])
        // A name that begins another token's id revokes its own token, not a guess between the two.
        let listed = try CLI.run(["token", "list", "--state-dir", dir]).lines
        let phoneId = try #require(listed.first { $0.hasSuffix(" phone") }?.split(separator: " ").first.map(String.init))
        let prefix = String(phoneId.prefix(4))
        #expect(try CLI.run(["token", "create", "--name", prefix, "--state-dir", dir]).status == 0)
        let byName = try CLI.run(["token", "revoke", prefix, "--state-dir", dir])
        #expect(byName.status == 0 && byName.stdout.contains("'\(prefix)'"), "\(byName.stdout)\(byName.stderr)")
        #expect(try CLI.run(["token", "list", "--state-dir", dir]).stdout.contains(" phone"))
    }

    @Test func tokensLiveInTheSameStateDirectoryAsEverythingElse() throws {
        let dir = stateDir()
        let configDir = stateDir()
        defer {
            try? FileManager.default.removeItem(atPath: dir)
            try? FileManager.default.removeItem(atPath: configDir)
        }
        try FileManager.default.createDirectory(atPath: configDir, withIntermediateDirectories: true)
        let config = configDir + "/hr-gateway.toml"
        try "[store]\nstate_dir = \"\(dir)\"\n".write(toFile: config, atomically: true, encoding: .utf8)
        let created = try CLI.run(["token", "create", "--name", "phone", "--config", config],
                                  environment: ["HR_GATEWAY_STATE_DIR": ""])
        #expect(created.status == 0, "\(created.stderr)")
        #expect(FileManager.default.fileExists(atPath: dir + "/tokens.json"), "the configuration's state_dir")
        let service = stateDir()
        defer { try? FileManager.default.removeItem(atPath: service) }
        let empty = configDir + "/empty.toml"
        try "".write(toFile: empty, atomically: true, encoding: .utf8)
        let underSystemd = try CLI.run(["token", "create", "--name", "svc", "--config", empty],
                                       environment: ["HR_GATEWAY_STATE_DIR": "", "STATE_DIRECTORY": service])
        #expect(underSystemd.status == 0, "\(underSystemd.stderr)")
        #expect(FileManager.default.fileExists(atPath: service + "/tokens.json"), "systemd's $STATE_DIRECTORY")
    }

    @Test func tokenCreateWithTLSMakesTheCertificateOnceAndPrintsItsFingerprintBeforeTheToken() throws {
        let dir = stateDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let plain = try CLI.run(["token", "create", "--name", "a", "--state-dir", dir])
        #expect(!plain.stdout.contains("SHA-256"), "no certificate yet, none made without --tls")
        let first = try CLI.run(["token", "create", "--name", "b", "--tls", "--state-dir", dir])
        #expect(first.status == 0, "\(first.stderr)")
        let pin = try #require(first.lines.first { $0.contains("SHA-256") }?.split(separator: " ").last)
        #expect(pin.split(separator: ":").count == 32)
        #expect(first.lines.last?.hasPrefix("hrg_") == true, "the token stays the last line")
        let second = try CLI.run(["token", "create", "--name", "c", "--tls", "--state-dir", dir])
        #expect(second.lines.first { $0.contains("SHA-256") }?.hasSuffix(String(pin)) == true, "made once, then kept")
    }

    @Test func dialingOutChecksItsOptionsBeforeStarting() throws {
        let tokenAlone = try CLI.run(["stream", "--simulate", "--token", "secret"])
        #expect(tokenAlone.status != 0)
        #expect(tokenAlone.stderr.contains("--connect"))
        let notWebSocket = try CLI.run(["stream", "--simulate", "--connect", "http://phone.local/gw"])
        #expect(notWebSocket.status != 0)
        #expect(notWebSocket.stderr.contains("ws://"))
        let pinWithoutTLS = try CLI.run(["attach", "ws://127.0.0.1:1/v1/relay", "--pin", "AB"])
        #expect(pinWithoutTLS.status != 0)
        #expect(pinWithoutTLS.stderr.contains("wss://"))
        // serve keeps the older spelling of the token option.
        let serveHelp = try CLI.run(["serve", "--help"])
        #expect(serveHelp.stdout.contains("--connect-token"))
    }

    /// Under a low file limit the relay takes fewer connections (a quarter of the descriptors, at least 64, kept
    /// for the gateway's own files), and says so at start, with how many.
    @Test func aLowFileLimitIsSaidAtStart() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-nofile-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let server = try RunningCLI(["serve", "--simulate", "--listen", "127.0.0.1:0", "--no-auth", "--state-dir", dir],
                                    under: ["/usr/bin/prlimit", "--nofile=90:90", "--"], errorTo: dir + "/stderr")
        let listening = try #require(server.readLine())
        #expect(listening.contains("ws://127.0.0.1:"), "\(listening)")
        server.signal(SIGTERM)
        _ = server.wait()
        let said = (try? String(contentsOfFile: dir + "/stderr", encoding: .utf8)) ?? ""
        #expect(said.contains("the relay takes at most 26 connections at once: `ulimit -n` is 90"), "\(said)")
    }

    @Test func serveRefusesNoAuthOffLoopbackAndNeedsListenAndASource() throws {
        let offLoopback = try CLI.run(["serve", "--simulate", "--listen", "0.0.0.0:0", "--no-auth"])
        #expect(offLoopback.status != 0)
        #expect(offLoopback.stderr.contains("loopback"))
        let noListen = try CLI.run(["serve", "--simulate"])
        #expect(noListen.status != 0)
        #expect(noListen.stderr.contains("--listen"))
        let badListen = try CLI.run(["serve", "--simulate", "--listen", "8765"])
        #expect(badListen.stderr.contains("HOST:PORT"))
        let noSource = try CLI.run(["serve", "--listen", "127.0.0.1:0"])
        #expect(noSource.stderr.contains("--simulate or --replay"))
    }

    /// A session a consumer starts on `serve` is recorded into the session store as `stream`'s are (serve recorded
    /// nothing: `sessions list` stayed empty, and after `kill -9` nothing of a phone's session existed anywhere);
    /// one killed mid-session stays as `interrupted` with its samples; --no-record-db records nothing.
    @Test func serveRecordsTheSessionsConsumersStart() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-serve-rec-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let token = try #require(try CLI.run(["token", "create", "--name", "phone", "--state-dir", dir]).lines.last)
        func serve(_ extra: [String] = []) throws -> (RunningCLI, String) {
            let server = try RunningCLI(["serve", "--simulate", "--listen", "127.0.0.1:0", "--state-dir", dir] + extra)
            let listening = try #require(server.readLine())
            return (server, try #require(listening.split(separator: " ").last.map(String.init)))
        }
        var (server, url) = try serve()
        let run = try CLI.run(["attach", url, "--token", token, "--start", "focus", "--duration", "3", "--session-id", "ph-1"])
        #expect(run.status == 0, "\(run.stderr)")
        // A second session on the same gateway, killed while it runs.
        let consumer = try RunningCLI(["attach", url, "--token", token, "--start", "focus", "--duration", "600",
                                       "--session-id", "ph-2"])
        var framed = false
        while !framed, let line = consumer.readLine() { framed = line.contains("\"biosignal_frame\"") }
        #expect(framed)
        server.signal(SIGKILL)
        _ = server.wait()
        let list = try CLI.run(["sessions", "list", "--json", "--state-dir", dir])
        let sessions = try JSONValue(parsing: list.stdout).arrayValue ?? []
        let byId = Dictionary(uniqueKeysWithValues: sessions.compactMap { s in s["session_id"]?.stringValue.map { ($0, s) } })
        #expect(byId["ph-1"]?["state"] == .string("completed"), "\(list.stdout)")
        #expect((byId["ph-1"]?["sample_count"]?.intValue ?? 0) >= 2, "\(list.stdout)")
        #expect(byId["ph-2"]?["state"] == .string("interrupted"), "\(list.stdout)")
        #expect((byId["ph-2"]?["sample_count"]?.intValue ?? 0) >= 1, "\(list.stdout)")

        // Stopped with SIGTERM while a session runs: its summary is written before the gateway exits.
        (server, url) = try serve()
        // A session id already recorded is refused, as stream refuses it (it ran, was reported ok and was not
        // recorded), and the earlier recording is kept.
        let again = try CLI.run(["attach", url, "--token", token, "--start", "focus", "--duration", "2",
                                 "--session-id", "ph-1"])
        #expect(again.status != 0, "\(again.stdout)")
        #expect(again.stderr.contains("Session ph-1 is already recorded on this gateway"), "\(again.stderr)")
        #expect(!again.stdout.contains("\"session_started\""), "\(again.stdout)")
        // A long session id runs (its command id made the start command's id longer than the relay takes, and attach
        // waited for ever on a refusal it did not recognise); one over 200 bytes is refused before connecting.
        let long = String(repeating: "a", count: 190)
        let longRun = try CLI.run(["attach", url, "--token", token, "--start", "focus", "--duration", "2", "--session-id", long])
        #expect(longRun.status == 0 && longRun.stdout.contains("\"session_summary\""), "\(longRun.stderr)")
        let tooLong = try CLI.run(["attach", url, "--token", token, "--start", "focus", "--duration", "2",
                                   "--session-id", long + String(repeating: "a", count: 11)])
        #expect(tooLong.status == 64 && tooLong.stderr.contains("--session-id must be 1 to 200 bytes"), "\(tooLong.stderr)")
        let stopped = try RunningCLI(["attach", url, "--token", token, "--start", "focus", "--duration", "600",
                                      "--session-id", "ph-4"])
        framed = false
        while !framed, let line = stopped.readLine() { framed = line.contains("\"biosignal_frame\"") }
        server.signal(SIGTERM)
        #expect(server.wait() == 0)
        let after = try JSONValue(parsing: try CLI.run(["sessions", "list", "--json", "--state-dir", dir]).stdout)
        let ph4 = after.arrayValue?.first { $0["session_id"] == .string("ph-4") }
        #expect(ph4?["state"] == .string("completed"), "\(String(describing: ph4))")

        (server, url) = try serve(["--no-record-db"])
        let unrecorded = try CLI.run(["attach", url, "--token", token, "--start", "focus", "--duration", "2",
                                      "--session-id", "ph-3"])
        #expect(unrecorded.status == 0, "\(unrecorded.stderr)")
        server.signal(SIGTERM)
        _ = server.wait()
        #expect(!(try CLI.run(["sessions", "list", "--state-dir", dir])).stdout.contains("ph-3"))
    }

    @Test func attachExplainsARefusedConnection() throws {
        let r = try CLI.run(["attach", "http://127.0.0.1:1/v1/relay"])
        #expect(r.status != 0)
        #expect(r.stderr.contains("ws://"))
        // Nothing listening: said so, with what to check, not a NIO error dump.
        let closed = try CLI.run(["attach", "ws://127.0.0.1:1/v1/relay"])
        #expect(closed.status == 1)
        #expect(closed.stderr.contains("nothing answers on 127.0.0.1:1 (Connection refused)"), "\(closed.stderr)")
        #expect(!closed.stderr.contains("SingleConnectionFailure"), "\(closed.stderr)")
        // A relay that refuses the token: said so, with where tokens come from.
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-attach-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let server = try RunningCLI(["serve", "--simulate", "--listen", "127.0.0.1:0", "--state-dir", dir])
        let listening = try #require(server.readLine())
        let url = try #require(listening.split(separator: " ").last.map(String.init), "\(listening)")
        #expect(url.hasPrefix("ws://127.0.0.1:"), "\(listening)")
        let refused = try CLI.run(["attach", url, "--token", "not-a-token"])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("the relay refused the WebSocket connection: the token is wrong or revoked"),
                "\(refused.stderr)")
        // Each cause of a refusal said as itself (one message said all three).
        let untokened = try CLI.run(["attach", url], environment: ["HR_GATEWAY_TOKEN": ""])
        #expect(untokened.stderr.contains("no token was given (--token T, or $HR_GATEWAY_TOKEN)"), "\(untokened.stderr)")
        let elsewhere = try CLI.run(["attach", url.replacingOccurrences(of: "/v1/relay", with: "/relay"), "--token", "t"])
        #expect(elsewhere.stderr.contains("its path is /v1/relay, not /relay"), "\(elsewhere.stderr)")
        server.signal(SIGTERM)
        _ = server.wait()

        // A gateway that answers, over TLS its client does not trust yet (no --pin): not "nothing answers"; by its
        // address, told to pin before connecting.
        let tls = try RunningCLI(["serve", "--simulate", "--listen", "127.0.0.1:0", "--tls", "--state-dir", dir])
        var secure: String?
        while secure == nil, let line = tls.readLine() { secure = line.split(separator: " ").last.map(String.init).flatMap { $0.hasPrefix("wss://") ? $0 : nil } }
        let wss = try #require(secure)
        let untrusted = try CLI.run(["attach", wss, "--token", "not-a-token"])
        #expect(untrusted.status == 1)
        #expect(!untrusted.stderr.contains("nothing answers"), "\(untrusted.stderr)")
        #expect(untrusted.stderr.contains("names the relay by its address") && untrusted.stderr.contains("--pin SHA256"),
                "\(untrusted.stderr)")
        let byName = try CLI.run(["attach", wss.replacingOccurrences(of: "127.0.0.1", with: "localhost"), "--token", "not-a-token"])
        #expect(byName.status == 1)
        #expect(byName.stderr.contains("no certificate authority of this machine vouches for the relay's certificate")
                && byName.stderr.contains("add --pin SHA256") && !byName.stderr.contains("BoringSSL"), "\(byName.stderr)")
        tls.signal(SIGTERM)
        _ = tls.wait()
    }
}
