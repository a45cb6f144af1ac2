import Foundation
import GatewayConfig
import GatewayEngine
import Testing

@Suite struct GatewayConfigTests {
    static let example = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("config/hr-gateway.toml").path

    @Test func theDocumentedExampleHoldsExactlyTheDefaults() throws {
        let (c, warnings) = try GatewayConfiguration.load(path: Self.example)
        var expected = GatewayConfiguration()
        expected.sourcePath = Self.example
        #expect(c == expected)
        #expect(warnings.isEmpty)
    }

    @Test func valuesAreRead() throws {
        let (c, _) = try GatewayConfiguration.parse("""
            log_level = "debug"
            [store]
            state_dir = "/srv/hrg"
            record = false
            keep_days = 30
            [session]
            mode = "breathing"
            window_sec = 120
            emit_interval_sec = 10
            """, path: "t.toml")
        #expect(c.logLevel == .debug)
        #expect(c.stateDir == "/srv/hrg")
        #expect(c.record == false)
        #expect(c.keepDays == 30)
        #expect(c.mode == .breathing)
        #expect(c.windowSec == 120)
        #expect(c.emitIntervalSec == 10)
    }

    func error(_ text: String) -> ConfigurationError? {
        do {
            _ = try GatewayConfiguration.parse(text, path: "t.toml")
            return nil
        } catch { return error }
    }

    @Test func aSyntaxErrorNamesItsLine() throws {
        let e = try #require(error("log_level = \"info\"\n[session]\nwindow_sec = = 3\n"))
        #expect(e.line == 3)
        #expect(e.description.hasPrefix("t.toml line 3: "))
    }

    /// The parser's own phrasing ("Error while parsing key-value pair: cannot redefine existing string", a line's end
    /// shown as '\n') is put in plain words.
    @Test func syntaxErrorsAreSaidPlainly() throws {
        let twice = try #require(error("log_level = \"info\"\nlog_level = \"debug\"\n"))
        #expect(twice.description == "t.toml line 2: log_level is set twice (a key or table may appear once): keep one")
        let header = try #require(error("[webhook\nurl = \"\"\n"))
        #expect(header.line == 1)
        #expect(header.message.contains("the end of the line") && !header.message.contains("\\n"), "\(header.message)")
        #expect(!header.message.contains("Error while parsing"), "\(header.message)")
        #expect(header.message.hasSuffix("(in a table header); TOML is key = value, strings in quotes, [section] headers"))
    }

    @Test func aWrongTypeOrValueNamesTheKeyAndItsLine() throws {
        let type = try #require(error("# comment\n[session]\nmode = \"focus\"\nwindow_sec = \"60\"\n"))
        #expect(type.line == 4)
        #expect(type.message.contains("session.window_sec must be a positive integer"))
        let zero = try #require(error("[session]\nemit_interval_sec = 0\n"))
        #expect(zero.line == 2)
        let mode = try #require(error("\n\n[session]\nmode = \"sleep\"\n"))
        #expect(mode.line == 4)
        #expect(mode.message.contains("focus, breathing or typing"))
        let level = try #require(error("log_level = \"loud\"\n"))
        #expect(level.line == 1)
        let relative = try #require(error("[store]\nstate_dir = \"var/lib\"\n"))
        #expect(relative.message.contains("absolute path"))
    }

    @Test func unknownKeysAreErrorsAndPlaceholderSectionsWarnings() throws {
        let typo = try #require(error("[store]\nrecord = true\nkeep_day = 3\n"))
        #expect(typo.line == 3)
        #expect(typo.message.contains("unknown option store.keep_day"))
        let section = try #require(error("[stor]\nrecord = true\n"))
        #expect(section.line == 1)
        let (_, warnings) = try GatewayConfiguration.parse("[relay]\nlisten = \"0.0.0.0:1\"\n", path: "t.toml")
        #expect(warnings.count == 1)
        #expect(warnings.first?.contains("line 2") == true)
        #expect(warnings.first?.contains("not used by this version") == true)
    }

    @Test func theEnvironmentOverridesTheFile() throws {
        var (c, _) = try GatewayConfiguration.parse("[session]\nwindow_sec = 30\nmode = \"typing\"\n", path: "t.toml")
        try c.applyEnvironment(["HR_GATEWAY_WINDOW_SEC": "45", "HR_GATEWAY_RECORD": "0", "HR_GATEWAY_LOG_LEVEL": "WARNING"])
        #expect(c.windowSec == 45)
        #expect(c.mode == .typing, "not set in the environment: the file's value stays")
        #expect(c.record == false)
        #expect(c.logLevel == .warning)
        #expect(throws: ConfigurationError.self) { try c.applyEnvironment(["HR_GATEWAY_KEEP_DAYS": "soon"]) }
        do { try c.applyEnvironment(["HR_GATEWAY_EMIT_INTERVAL_SEC": "-1"]) } catch {
            #expect(error.path.contains("HR_GATEWAY_EMIT_INTERVAL_SEC"))
        }
        // Several bad variables: every one reported, each with the value it got.
        do {
            try c.applyEnvironment(["HR_GATEWAY_WINDOW_SEC": "-5", "HR_GATEWAY_EMIT_INTERVAL_SEC": "abc", "HR_GATEWAY_MODE": "zz"])
            Issue.record("bad variables accepted")
        } catch {
            #expect(error.all.map(\.path) == ["environment variable HR_GATEWAY_MODE", "environment variable HR_GATEWAY_WINDOW_SEC",
                                               "environment variable HR_GATEWAY_EMIT_INTERVAL_SEC"], "\(error)")
            #expect(error.all.allSatisfy { $0.message.contains("got \"") }, "\(error)")
        }
    }

    @Test func theFileIsFoundInOrder() {
        let env = ["HOME": "/home/u"]
        let both: Set = ["/home/u/.config/hr-gateway/hr-gateway.toml", "/etc/hr-gateway/hr-gateway.toml"]
        #expect(GatewayConfiguration.locate(explicit: "/x.toml", environment: env, exists: both.contains) == "/x.toml")
        #expect(GatewayConfiguration.locate(explicit: nil, environment: env.merging(["HR_GATEWAY_CONFIG": "/e.toml"]) { $1 },
                                            exists: both.contains) == "/e.toml")
        #expect(GatewayConfiguration.locate(explicit: nil, environment: env, exists: both.contains)
                == "/home/u/.config/hr-gateway/hr-gateway.toml")
        #expect(GatewayConfiguration.locate(explicit: nil, environment: env, exists: { $0.hasPrefix("/etc") })
                == "/etc/hr-gateway/hr-gateway.toml")
        #expect(GatewayConfiguration.locate(explicit: nil, environment: env, exists: { _ in false }) == nil)
    }
}
