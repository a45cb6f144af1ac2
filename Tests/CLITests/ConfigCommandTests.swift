import Foundation
import GatewayEngine
import Testing

@Suite struct ConfigCommandTests {
    func tempDir() -> String {
        let p = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-config-\(UUID().uuidString)").path
        try? FileManager.default.createDirectory(atPath: p, withIntermediateDirectories: true)
        return p
    }

    /// The service runs `hr-gateway stream $HR_GATEWAY_SOURCE` after `config check`: a mistyped source passed both
    /// `config check` and `doctor`, then the service exited 64 every few seconds. Both now say what stream would.
    @Test func aMistypedServiceSourceIsCaughtBeforeTheServiceRuns() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/gw.toml"
        try "[store]\nrecord = true\n".write(toFile: file, atomically: true, encoding: .utf8)
        let bad = try CLI.run(["config", "check", file], environment: ["HR_GATEWAY_SOURCE": "--simulat"])
        #expect(bad.status == 1)
        #expect(bad.stderr.contains("HR_GATEWAY_SOURCE (--simulat): Unknown option '--simulat'. Did you mean '--simulate'?"),
                "\(bad.stderr)")
        let missing = try CLI.run(["config", "check", file], environment: ["HR_GATEWAY_SOURCE": "--strap"])
        #expect(missing.status == 1 && missing.stderr.contains("Missing value for '--strap <strap>'"), "\(missing.stderr)")
        let good = try CLI.run(["config", "check", file], environment: ["HR_GATEWAY_SOURCE": "--simulate"])
        #expect(good.status == 0, "\(good.stderr)")
        #expect(good.stdout.contains("--simulate (HR_GATEWAY_SOURCE"), "\(good.stdout)")
        let doctor = try CLI.run(["doctor", "--config", file], environment: ["HR_GATEWAY_SOURCE": "--simulat"])
        #expect(doctor.stdout.contains("FAIL  sources") && doctor.stdout.contains("Unknown option '--simulat'"),
                "\(doctor.stdout)")
        // And a mistyped option on the command line is named as such, not as a missing source or --listen.
        let stream = try CLI.run(["stream", "--simulat"])
        #expect(stream.status == 64 && stream.stderr.contains("Unknown option '--simulat'"), "\(stream.stderr)")
        let serve = try CLI.run(["serve", "--simulate", "--listne", "127.0.0.1:0"])
        #expect(serve.status == 64 && serve.stderr.contains("Unknown option '--listne'"), "\(serve.stderr)")
    }

    /// A strap `stream` refuses (a mistyped address) fails `config check`, which the unit runs before the service
    /// (it said "valid", and the service failed); `stream` names the address problem, not a generic "invalid spec".
    /// The options other commands take beside --config are taken, and what they set is shown (`--state-dir` was
    /// read as a second FILE: "Give the file once"); two files named say both.
    @Test func theStateDirectoryAndLogLevelOfACommandLineAreShown() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/gw.toml"
        try "log_level = \"warning\"\n[store]\nstate_dir = \"/srv/from-file\"\n".write(toFile: file, atomically: true, encoding: .utf8)
        // The tests' environment names a state directory; unset, the file's is in effect.
        let plain = try CLI.run(["config", "check", "--config", file], environment: ["HR_GATEWAY_STATE_DIR": ""])
        #expect(plain.status == 0 && plain.stdout.contains("/srv/from-file") && plain.stdout.contains("warning"), "\(plain.stdout)\(plain.stderr)")
        let given = try CLI.run(
            ["config", "check", "--config", file, "--state-dir", dir + "/state", "--log-level", "debug"], environment: [:])
        #expect(given.status == 0, "\(given.stderr)")
        #expect(given.stdout.contains("\(dir)/state (--state-dir)") && given.stdout.contains("debug (--log-level)"), "\(given.stdout)")
        #expect(!given.stdout.contains("/srv/from-file"), "\(given.stdout)")
        let two = try CLI.run(["config", "check", file, "--config", dir + "/other.toml"], environment: [:])
        #expect(two.status == 64 && two.stderr.contains("Two files to check: FILE (\(file)) and --config (\(dir)/other.toml)"), "\(two.stderr)")
        // The camera's colour check is a setting: shown when on, refused when not a boolean.
        try "[camera]\ncolour_check = true\n".write(toFile: dir + "/cc.toml", atomically: true, encoding: .utf8)
        let colour = try CLI.run(["config", "check", dir + "/cc.toml"], environment: [:])
        #expect(colour.status == 0 && colour.stdout.contains("camera.colour_check       true"), "\(colour.stdout)\(colour.stderr)")
        try "[camera]\ncolour_check = \"yes\"\n".write(toFile: dir + "/cc.toml", atomically: true, encoding: .utf8)
        let badColour = try CLI.run(["config", "check", dir + "/cc.toml"], environment: [:])
        #expect(badColour.status == 1 && badColour.stderr.contains("camera.colour_check must be true or false, got a string"), "\(badColour.stderr)")
        try "[camera]\ncolour_check = 1\n".write(toFile: dir + "/cc.toml", atomically: true, encoding: .utf8)
        #expect(try CLI.run(["config", "check", dir + "/cc.toml"], environment: [:]).stderr.contains("got an integer"))
        // Values from the environment say so; an invalid one is said before the file is called valid.
        let fromEnvironment = try CLI.run(["config", "check", file], environment: ["HR_GATEWAY_LOG_LEVEL": "error"])
        #expect(fromEnvironment.stdout.contains("error (HR_GATEWAY_LOG_LEVEL)") && fromEnvironment.stdout.contains("(HR_GATEWAY_STATE_DIR)"),
                "\(fromEnvironment.stdout)")
        let badEnvironment = try CLI.run(["config", "check", file], environment: ["HR_GATEWAY_LOG_LEVEL": "loud"])
        #expect(badEnvironment.status == 1 && !badEnvironment.stdout.contains("valid") && badEnvironment.stderr.contains("HR_GATEWAY_LOG_LEVEL"),
                "\(badEnvironment.stdout)\(badEnvironment.stderr)")
        let empty = try CLI.run(["config", "check", file, "--state-dir", ""], environment: [:])
        #expect(empty.status == 64 && empty.stderr.contains("--state-dir is empty"), "\(empty.stderr)")
    }

    @Test func aMistypedStrapAddressFailsTheCheck() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/gw.toml"
        try "[strap]\ndevices = [\"Polar H10\", \"AA-BB-CC-DD-EE\"]\n".write(toFile: file, atomically: true, encoding: .utf8)
        let check = try CLI.run(["config", "check", file])
        #expect(check.status == 1 && !check.stdout.contains("valid"), "\(check.stdout)")
        #expect(check.stderr.contains("strap.devices: \"AA-BB-CC-DD-EE\" is not a Bluetooth address"), "\(check.stderr)")
        try "[strap]\ndevices = [\"Polar H10\", \"AA-BB-CC-DD-EE-FF\"]\n".write(toFile: file, atomically: true, encoding: .utf8)
        #expect(try CLI.run(["config", "check", file]).status == 0)
        let stream = try CLI.run(["stream", "--strap", "AA-BB-CC-DD-EE", "--duration", "1", "--no-record-db"])
        #expect(stream.status != 0 && stream.stderr.contains("\"AA-BB-CC-DD-EE\" is not a Bluetooth address"), "\(stream.stderr)")
    }

    @Test func checkReportsTheLineOfAnError() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/bad.toml"
        try "[session]\nmode = \"focus\"\nwindow_sec = -5\n".write(toFile: file, atomically: true, encoding: .utf8)
        let r = try CLI.run(["config", "check", file])
        #expect(r.status == 1)
        #expect(r.stderr.contains("\(file) line 3: session.window_sec must be a positive integer"), "\(r.stderr)")

        let good = dir + "/good.toml"
        try "[session]\nwindow_sec = 90\n".write(toFile: good, atomically: true, encoding: .utf8)
        let ok = try CLI.run(["config", "check", good], environment: ["HR_GATEWAY_STATE_DIR": dir])
        #expect(ok.status == 0, "\(ok.stderr)")
        #expect(ok.stdout.contains("\(good): valid"))
        #expect(ok.stdout.contains("session.window_sec        90"))
        #expect(ok.stdout.contains("state_dir                 \(dir)"))
        #expect(ok.stdout.contains("mqtt.url                  (none)"))

        // Every setting in effect is shown, MQTT and the breathing pattern included.
        let full = dir + "/full.toml"
        try "[mqtt]\nurl = \"mqtt://broker.lan\"\ngateway_id = \"pi-3\"\n[session]\npattern = \"4-2-6-0\"\n"
            .write(toFile: full, atomically: true, encoding: .utf8)
        let shown = try CLI.run(["config", "check", full], environment: ["HR_GATEWAY_STATE_DIR": dir])
        #expect(shown.status == 0, "\(shown.stderr)")
        #expect(shown.stdout.contains("mqtt.url                  mqtt://broker.lan"), "\(shown.stdout)")
        #expect(shown.stdout.contains("mqtt.gateway_id           pi-3"), "\(shown.stdout)")
        #expect(shown.stdout.contains("session.pattern           4-2-6-0 (paces `breathe`"), "\(shown.stdout)")
    }

    @Test func optionsOverrideTheEnvironmentWhichOverridesTheFile() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/hr-gateway.toml"
        try """
            [store]
            state_dir = "\(dir)/from-file"
            [session]
            mode = "breathing"
            window_sec = 30
            emit_interval_sec = 2
            """.write(toFile: file, atomically: true, encoding: .utf8)
        let r = try CLI.run(["stream", "--simulate", "--model", "sdk-mock", "--duration", "1", "--format", "jsonl",
                             "--config", file, "--emit-interval", "1", "--session-id", "cfg"],
                            environment: ["HR_GATEWAY_WINDOW_SEC": "40", "HR_GATEWAY_STATE_DIR": ""])
        #expect(r.status == 0, "\(r.stderr)")
        let show = try CLI.run(["sessions", "show", "cfg", "--json", "--config", file], environment: ["HR_GATEWAY_STATE_DIR": ""])
        #expect(show.status == 0, "\(show.stderr)")
        let config = try #require(try JSONValue(parsing: show.stdout)["config"])
        #expect(config["mode"] == .string("breathing"), "file")
        #expect(config["profile"]?["window_sec"] == .int(40), "environment over file")
        #expect(config["profile"]?["emit_interval_sec"] == .int(1), "option over file")
        #expect(FileManager.default.fileExists(atPath: dir + "/from-file/sessions.sqlite"), "state_dir from the file")

        try "[store]\nstate_dir = \"\(dir)/off\"\nrecord = false\n".write(toFile: file, atomically: true, encoding: .utf8)
        let off = try CLI.run(["stream", "--simulate", "--model", "sdk-mock", "--duration", "1", "--format", "jsonl",
                               "--config", file], environment: ["HR_GATEWAY_STATE_DIR": ""])
        #expect(off.status == 0, "\(off.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir + "/off/sessions.sqlite"), "record = false")
    }
}
