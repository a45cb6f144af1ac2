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
        // But for the source the service streams when none is named: the first strap found.
        expected.strapDevices = ["auto"]
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

    @Test func unknownKeysAreErrors() throws {
        let typo = try #require(error("[store]\nrecord = true\nkeep_day = 3\n"))
        #expect(typo.line == 3)
        #expect(typo.message.contains("unknown option store.keep_day"))
        let section = try #require(error("[stor]\nrecord = true\n"))
        #expect(section.line == 1)
        for (table, key) in [("relay", "port"), ("strap", "device"), ("camera", "devices")] {
            let unknown = try #require(error("[\(table)]\n\(key) = \"x\"\n"))
            #expect(unknown.line == 2)
            #expect(unknown.message.contains("unknown option \(table).\(key)"), "\(unknown.message)")
        }
    }

    @Test func anUnknownKeySaysWhatWasMeant() throws {
        let cases: [(String, String)] = [
            ("[store]\nkeep_day = 3\n", "did you mean store.keep_days?"),
            ("[stor]\nrecord = true\n", "did you mean [store]?"),
            ("[relay]\nkeep_days = 3\n", "keep_days belongs in [store]"),
            ("[relay]\nurl = \"x\"\n", "url belongs in [mqtt] or [webhook]"),
            ("[session]\nlog_level = \"debug\"\n", "log_level belongs at the top of the file"),
            ("keep_days = 3\n", "keep_days belongs in [store], not at the top level"),
            ("loglevel = \"debug\"\n", "did you mean log_level?"),
            ("[camera]\ndevices = \"/dev/video0\"\n", "did you mean camera.device?"),
            ("[metrics]\nlisten_on = \"127.0.0.1:9464\"\n", "did you mean metrics.listen?"),
        ]
        for (text, said) in cases {
            let e = try #require(error(text))
            #expect(e.message.contains(said), "\(text.debugDescription): \(e.message)")
        }
        // Nothing close: no guess.
        let far = try #require(error("[relay]\nzebra = 1\n"))
        #expect(far.message.hasPrefix("unknown option relay.zebra (see"), "\(far.message)")
    }

    /// camera.device is auto or a device's path: "AUTO" and " auto" were taken as device names (the camera then "not
    /// found" at the session's start, on a service), and a relative path is relative to wherever the service runs.
    @Test func theCameraDeviceIsAutoOrAPath() throws {
        for (device, said) in [("AUTO", "did you mean auto?"), (" auto", "did you mean auto?"), ("video0", "such as /dev/video0"),
                               ("/dev/video0 ", "with spaces at its end?")] {
            let e = try #require(error("[camera]\ndevice = \"\(device)\"\n"), "\(device) was taken")
            #expect(e.line == 2 && e.message.contains("camera.device must be auto") && e.message.contains(said), "\(e.message)")
            if device.hasSuffix("0") || device.hasSuffix(" ") { #expect(!e.message.contains("did you mean auto"), "\(e.message)") }
        }
        for device in ["auto", "/dev/video2", "/dev/v4l/by-id/usb-Logitech_C920-video-index0"] {
            #expect(try GatewayConfiguration.parse("[camera]\ndevice = \"\(device)\"\n", path: "t.toml").0.cameraDevice == device)
        }
        #expect(try GatewayConfiguration.parse("[camera]\ndevice = \"\"\n", path: "t.toml").0.cameraDevice == nil)
    }

    /// `knownKeys` (what a typo is compared with) is what the parser reads: each key is accepted by the parser, and
    /// the documented example holds each one.
    @Test func theKnownKeysAreThoseTheParserReads() throws {
        let example = try String(contentsOfFile: Self.example, encoding: .utf8)
        for (section, keys) in GatewayConfiguration.knownKeys {
            for key in keys {
                let text = (section.isEmpty ? "" : "[\(section)]\n") + "\(key) = 12345\n"
                let message = error(text)?.message ?? ""
                #expect(!message.contains("unknown option"), "\(section).\(key): \(message)")
                #expect(example.contains("\n\(key) = ") || example.contains("\n# \(key) = "), "example lacks \(key)")
            }
        }
        #expect(example.contains("\n[metrics]\n"))
    }

    @Test func metricsListenIsRead() throws {
        let (c, _) = try GatewayConfiguration.parse("[metrics]\nlisten = \"127.0.0.1:9464\"\n", path: "t.toml")
        #expect(c.metricsListen == "127.0.0.1:9464")
        let bad = try #require(error("[metrics]\nlisten = \"9464\"\n"))
        #expect(bad.message.contains("metrics.listen must be HOST:PORT"), "\(bad.message)")
    }

    @Test func sourcesAndRelayAreRead() throws {
        let (c, warnings) = try GatewayConfiguration.parse("""
            [strap]
            devices = ["AA:BB:CC:DD:EE:FF", "Polar H10"]
            adapter = "hci1"
            ecg = true
            acc_hz = 50
            [camera]
            device = "/dev/video2"
            width = 1280
            height = 720
            fps = 29.97
            mains_hz = 60
            face_cascade = "/opt/cascade.xml"
            [relay]
            listen = "[::1]:8765"
            tls = true
            tls_cert = "/etc/ssl/gw.pem"
            tls_key = "/etc/ssl/gw.key"
            """, path: "t.toml")
        #expect(warnings.isEmpty)
        #expect(c.strapDevices == ["AA:BB:CC:DD:EE:FF", "Polar H10"])
        #expect(c.strapAdapter == "hci1")
        #expect(c.strapECG)
        #expect(c.strapAccHz == 50)
        #expect(c.cameraDevice == "/dev/video2")
        #expect(c.cameraWidth == 1280 && c.cameraHeight == 720)
        #expect(c.cameraFps == 29.97)
        #expect(c.cameraMainsHz == 60)
        #expect(c.cameraFaceCascade == "/opt/cascade.xml")
        #expect(c.relayListen == "[::1]:8765")
        let split = try #require(GatewayConfiguration.splitListen(c.relayListen ?? ""))
        #expect(split.host == "::1" && split.port == 8765)
        #expect(c.relayTLS && c.relayTLSCert == "/etc/ssl/gw.pem" && c.relayTLSKey == "/etc/ssl/gw.key")

        // One device may be a plain string; "" and 0 mean none; a whole number of frames per second is a rate too.
        let (d, _) = try GatewayConfiguration.parse("""
            [strap]
            devices = "auto"
            adapter = ""
            acc_hz = 0
            [camera]
            device = ""
            fps = 25
            [relay]
            listen = ""
            """, path: "t.toml")
        #expect(d.strapDevices == ["auto"])
        #expect(d.strapAdapter == nil && d.strapAccHz == nil && d.cameraDevice == nil && d.relayListen == nil)
        #expect(d.cameraFps == 25)
    }

    @Test func aBadSourceOrRelayValueNamesTheKeyAndItsLine() throws {
        let cases: [(String, Int, String)] = [
            ("[strap]\ndevices = [\"auto\", 3]\n", 2, "strap.devices must be a list"),
            ("[strap]\ndevices = [\"\"]\n", 2, "strap.devices must be a list"),
            ("[strap]\nadapter = \"bluetooth0\"\n", 2, "strap.adapter must be a controller name such as \"hci0\""),
            ("[strap]\necg = \"yes\"\n", 2, "strap.ecg must be true or false"),
            ("[strap]\nacc_hz = 30\n", 2, "strap.acc_hz must be 0 (off), 25, 50, 100 or 200"),
            ("[camera]\n\nfps = 0\n", 3, "camera.fps must be a frame rate above 0 and at most 240"),
            ("[camera]\nfps = 241\n", 2, "camera.fps must be a frame rate above 0 and at most 240"),
            ("[camera]\nwidth = 0\n", 2, "camera.width must be a positive integer"),
            ("[camera]\nheight = 100000\n", 2, "camera.height must be at most 16384"),
            ("[camera]\nmains_hz = 55\n", 2, "camera.mains_hz must be 50"),
            ("[relay]\nlisten = \"8765\"\n", 2, "relay.listen must be HOST:PORT"),
            ("[relay]\nlisten = \"0.0.0.0:70000\"\n", 2, "relay.listen must be HOST:PORT"),
            ("[relay]\ntls = 1\n", 2, "relay.tls must be true or false"),
            ("[relay]\ntls = true\ntls_key = \"k.pem\"\n", 3, "relay.tls_cert and relay.tls_key go together"),
        ]
        for (text, line, phrase) in cases {
            let e = try #require(error(text), "\(text)")
            #expect(e.line == line, "\(text)")
            #expect(e.message.contains(phrase), "\(e.message)")
        }
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
