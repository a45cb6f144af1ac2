import Foundation
import GatewayEngine
import Testing
import WebhookTestSupport

/// A process whose standard output (and, merged, its standard error) is read line by line while it runs.
final class Spawned {
    let process = Process()
    private let out = Pipe()
    private let lines: PipeLines

    init(_ path: String, _ arguments: [String]) throws {
        lines = PipeLines(out.fileHandleForReading)
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.standardOutput = out
        process.standardError = out
        process.standardInput = FileHandle.nullDevice
        // The test runner's threads may block SIGTERM and SIGINT, and a spawned process inherits that mask: unblock
        // them here so that the broker can be stopped as a service manager stops it.
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGTERM)
        sigaddset(&set, SIGINT)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
        try process.run()
    }

    /// The next line, or nil at end of output.
    func readLine() -> String? { lines.next() }

    /// Reads lines until one satisfies `done`; returns every line read (nil: the output ended first).
    func read(until done: (String) -> Bool) -> [String]? {
        var lines: [String] = []
        while let line = readLine() {
            lines.append(line)
            if done(line) { return lines }
        }
        return nil
    }

    /// Ends it at once (a broker or subscriber started for one test has nothing to save).
    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    deinit { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
}

/// A real mosquitto broker on 127.0.0.1 (Debian's `mosquitto`, installed by scripts/test), started for one test.
final class Broker {
    let port: Int
    private let daemon: Spawned
    private let dir: String

    private let keepDirectory: Bool

    /// - Parameter persistentIn: keep the broker's state (persistent sessions, retained messages) in this folder
    ///   across a restart on the same port.
    init(port: Int = Broker.freePort(), persistentIn folder: String? = nil) throws {
        self.port = port
        keepDirectory = folder != nil
        dir = folder ?? FileManager.default.temporaryDirectory.appendingPathComponent("mqtt-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let config = "\(dir)/mosquitto.conf"
        let persistence = folder == nil ? "persistence false\n" : "persistence true\npersistence_location \(dir)/\n"
        try "listener \(port) 127.0.0.1\nallow_anonymous true\n\(persistence)"
            .write(toFile: config, atomically: true, encoding: .utf8)
        // The broker drops privileges to the mosquitto user when started as root: let it write its state.
        _ = chmod(dir, 0o777)
        daemon = try Spawned("/usr/sbin/mosquitto", ["-c", config, "-v"])
        guard daemon.read(until: { $0.contains(" running") }) != nil else {
            throw BrokerError("mosquitto did not start (is Debian's mosquitto installed? scripts/test installs it)")
        }
    }

    /// `mosquitto_sub` (Debian's mosquitto-clients) on `topic`, returned once the broker has confirmed the
    /// subscription, with the lines read until then; prints `topic payload` lines (and its debug lines). With
    /// `clientId`, a persistent session: the broker keeps the subscription, and QoS 1 messages, while it is away.
    func subscribe(_ topic: String, clientId: String? = nil) throws -> (Spawned, [String]) {
        let session = clientId.map { ["-c", "-i", $0] } ?? []
        // stdbuf: mosquitto_sub writes through stdio, which holds lines back when its output is a pipe.
        let sub = try Spawned("/usr/bin/stdbuf", ["-oL", "/usr/bin/mosquitto_sub", "-h", "127.0.0.1", "-p", "\(port)",
                                                  "-t", topic, "-v", "-d", "-q", "1"] + session)
        guard let lines = sub.read(until: { $0.contains("SUBACK") }) else {
            throw BrokerError("mosquitto_sub did not subscribe")
        }
        return (sub, lines)
    }

    /// Stops the broker as a service manager would (it saves its state).
    func terminate() {
        kill(daemon.process.processIdentifier, SIGTERM)
        daemon.process.waitUntilExit()
    }

    func stop() {
        daemon.stop()
        if !keepDirectory { try? FileManager.default.removeItem(atPath: dir) }
    }

    /// A port nothing listens on yet (`WebhookTestSupport.closedPort`).
    static func freePort() -> Int { closedPort() }
}

struct BrokerError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

/// `stream --mqtt` against a real mosquitto, read by a client we did not write (mosquitto_sub).
@Suite(.serialized) struct MQTTCLITests {
    /// (topic, JSON payload) from mosquitto_sub's `-v` lines, skipping its debug lines.
    func messages(_ lines: [String]) -> [(topic: String, json: JSONValue)] {
        lines.compactMap { line in
            guard line.hasPrefix("hr-gateway/"), let space = line.firstIndex(of: " ") else { return nil }
            guard let json = try? JSONValue(parsing: String(line[line.index(after: space)...])) else { return nil }
            return (String(line[..<space]), json)
        }
    }

    @Test func aSessionIsPublishedWithItsStatusAndEveryEvent() throws {
        let broker = try Broker()
        defer { broker.stop() }
        let (sub, _) = try broker.subscribe("hr-gateway/gw1/#")
        defer { sub.stop() }
        let r = try CLI.run(["stream", "--simulate", "--duration", "3", "--format", "jsonl", "--no-record-db",
                             "--mqtt", "mqtt://127.0.0.1:\(broker.port)", "--gateway-id", "gw1"])
        #expect(r.status == 0, "\(r.stderr)")
        let lines = try #require(sub.read { $0.hasPrefix("hr-gateway/gw1/status") && $0.contains("\"offline\"") })
        let got = messages(lines)
        let status = got.filter { $0.topic == "hr-gateway/gw1/status" }.map { $0.json["state"] }
        #expect(status == [.string("online"), .string("offline")], "\(lines)")
        #expect(got.first?.json["version"] == .string(GatewayVersion.current))
        #expect(try CLI.run(["--version"]).stdout == GatewayVersion.current + "\n", "the status says what --version says")
        #expect(got.first?.json["gateway_id"] == .string("gw1"))
        // Every event the gateway printed, in the same order, unchanged.
        let published = got.filter { $0.topic == "hr-gateway/gw1/event" }.map(\.json)
        let printed = try r.lines.map { try JSONValue(parsing: $0) }
        #expect(published == printed)
        #expect(published.first?["type"] == .string("session_started"))
        #expect(published.last?["type"] == .string("session_summary"))
    }

    @Test func aGatewayKilledMidSessionIsMarkedOfflineByItsLastWill() throws {
        let broker = try Broker()
        defer { broker.stop() }
        let (sub, _) = try broker.subscribe("hr-gateway/gw2/#")
        defer { sub.stop() }
        let cli = try RunningCLI(["stream", "--simulate", "--duration", "60", "--format", "jsonl", "--no-record-db",
                                  "--mqtt", "mqtt://127.0.0.1:\(broker.port)", "--gateway-id", "gw2"])
        let first = try #require(sub.read { $0.contains("\"session_frame\"") })
        #expect(messages(first).first?.json["state"] == .string("online"))
        cli.signal(SIGKILL)
        _ = cli.wait()
        let rest = try #require(sub.read { $0.hasPrefix("hr-gateway/gw2/status") })
        let will = try #require(messages(rest).last)
        #expect(will.json["state"] == .string("offline"))
        #expect(will.json["reason"] == .string("connection lost"))
    }

    /// The broker is down when the session starts and comes back during it: what was published meanwhile is held
    /// and sent in order, and nothing at QoS 1 is lost (read through a persistent subscriber session).
    @Test func whatIsPublishedWhileTheBrokerIsDownArrivesOnceItIsBack() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("mqtt-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let port = Broker.freePort()
        var broker = try Broker(port: port, persistentIn: dir)
        let (probe, _) = try broker.subscribe("hr-gateway/gw3/#", clientId: "probe-gw3")
        probe.stop()
        broker.terminate()

        let cli = try RunningCLI(["stream", "--simulate", "--duration", "4", "--format", "jsonl", "--no-record-db",
                                  "--mqtt", "mqtt://127.0.0.1:\(port)", "--gateway-id", "gw3", "--mqtt-grace", "30"])
        #expect(cli.readLine()?.contains("\"session_started\"") == true, "the session runs without the broker")
        broker = try Broker(port: port, persistentIn: dir)
        defer { broker.stop() }
        var printed: [String] = []
        while let line = cli.readLine() { printed.append(line) }
        #expect(cli.wait() == 0)
        #expect(printed.last?.contains("\"session_summary\"") == true)

        let (sub, early) = try broker.subscribe("hr-gateway/gw3/#", clientId: "probe-gw3")
        defer { sub.stop() }
        var lines = early
        if !messages(lines).contains(where: { $0.topic.hasSuffix("/status") && $0.json["state"] == .string("offline") }) {
            lines += try #require(sub.read { $0.hasPrefix("hr-gateway/gw3/status") && $0.contains("\"offline\"") })
        }
        let got = messages(lines)
        let types = got.map { $0.topic.hasSuffix("/status") ? "status " + ($0.json["state"]?.stringValue ?? "?")
                                                              : $0.json["type"]?.stringValue ?? "?" }
        // The QoS 1 messages, in order (QoS 0 frames are not kept for an absent subscriber).
        #expect(types.filter { $0.hasPrefix("status") || $0 == "session_started" || $0 == "session_summary" }
                == ["status online", "session_started", "session_summary", "status offline"], "\(types)")
    }

    /// No broker at all: the end says what is kept (the reliable events, in the outbox) and what the other messages
    /// not acknowledged were ("7 not acknowledged; 2 events stay" left 5 unexplained).
    @Test func withoutABrokerTheEndSaysWhatIsKeptAndWhatIsNot() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("mqtt-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try CLI.run(["stream", "--simulate", "--duration", "2", "--format", "jsonl", "--state-dir", dir,
                             "--mqtt", "mqtt://127.0.0.1:\(Broker.freePort())", "--gateway-id", "gw-none", "--mqtt-grace", "1"])
        #expect(r.status == 0, "\(r.stderr)")
        let said = try #require(r.stderr.split(separator: "\n").first { $0.contains("QoS 1 message(s) not acknowledged") },
                                "\(r.stderr)")
        #expect(said.contains("2 event(s) stay in ") && said.contains("the other ")
                && said.contains("are the gateway's status and discovery, published afresh when it next connects"), "\(said)")
    }

    /// The broker dies mid-session (SIGKILL, no saved state) and a new one starts on its port: the gateway says
    /// `online` again and its devices' latest states and discovery configs are retained again, so a subscriber (a
    /// fleet view, Home Assistant) that arrives afterwards sees a live gateway. Before, the status was gone (or, with
    /// a broker that kept its state, the last will's `offline`) until the gateway exited.
    @Test func afterTheBrokerRestartsTheGatewayIsOnlineAgainWithItsRetainedState() throws {
        let port = Broker.freePort()
        var broker = try Broker(port: port)
        let (sub, _) = try broker.subscribe("hr-gateway/gw5/#")
        let cli = try RunningCLI(["stream", "--simulate", "--duration", "60", "--format", "jsonl", "--no-record-db",
                                  "--mqtt", "mqtt://127.0.0.1:\(port)", "--gateway-id", "gw5"])
        _ = try #require(sub.read { $0.hasPrefix("hr-gateway/gw5/device/") }, "a device state before the restart")
        sub.stop()
        broker.stop()
        broker = try Broker(port: port)
        defer { broker.stop() }
        // A frame after the reconnection, then what a newcomer gets: retained messages only.
        let (live, _) = try broker.subscribe("hr-gateway/gw5/event")
        _ = try #require(live.read { $0.contains("\"session_frame\"") }, "the gateway publishes to the new broker")
        live.stop()
        let (late, early) = try broker.subscribe("hr-gateway/gw5/#")
        defer { late.stop() }
        var lines = early
        for prefix in ["hr-gateway/gw5/status", "hr-gateway/gw5/device/"]
        where !messages(lines).contains(where: { $0.topic.hasPrefix(prefix) }) {
            lines += try #require(late.read { $0.hasPrefix(prefix) }, "no \(prefix) after the restart: \(lines)")
        }
        let got = messages(lines)
        #expect(got.first { $0.topic == "hr-gateway/gw5/status" }?.json["state"] == .string("online"), "\(lines)")
        #expect(got.contains { $0.topic.hasPrefix("hr-gateway/gw5/device/") && $0.json["hr_bpm"] != nil }, "\(lines)")
        let (ha, haEarly) = try broker.subscribe("homeassistant/sensor/#")
        defer { ha.stop() }
        let configs = haEarly.contains { $0.hasPrefix("homeassistant/sensor/") }
            ? haEarly : try #require(ha.read { $0.hasPrefix("homeassistant/sensor/") })
        #expect(configs.contains { $0.hasPrefix("homeassistant/sensor/") && $0.contains("gw5") }, "\(configs)")
        cli.signal(SIGINT)
        while cli.readLine() != nil {}
        #expect(cli.wait() == 0)
    }

    /// The broker and the ID from the configuration file, overridden by the environment, as a service sets them.
    @Test func theBrokerComesFromTheConfigurationOrTheEnvironment() throws {
        let broker = try Broker()
        defer { broker.stop() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("mqtt-conf-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let config = dir + "/hr-gateway.toml"
        try "[mqtt]\nurl = \"mqtt://127.0.0.1:\(broker.port)\"\ngateway_id = \"from-file\"\ngrace_sec = 5\n"
            .write(toFile: config, atomically: true, encoding: .utf8)
        let (sub, _) = try broker.subscribe("hr-gateway/+/status")
        defer { sub.stop() }
        // Two seconds: the simulated strap's first notification comes after one (a session without a sample fails).
        let r = try CLI.run(["stream", "--simulate", "--duration", "2", "--format", "jsonl", "--no-record-db"],
                            environment: ["HR_GATEWAY_CONFIG": config])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(sub.read { $0.hasPrefix("hr-gateway/from-file/status") && $0.contains("\"offline\"") } != nil)
        let e = try CLI.run(["stream", "--simulate", "--duration", "2", "--format", "jsonl", "--no-record-db"],
                            environment: ["HR_GATEWAY_CONFIG": config, "HR_GATEWAY_GATEWAY_ID": "from-env"])
        #expect(e.status == 0, "\(e.stderr)")
        #expect(sub.read { $0.hasPrefix("hr-gateway/from-env/status") && $0.contains("\"offline\"") } != nil)

        try "[mqtt]\nurl = \"http://127.0.0.1\"\n".write(toFile: config, atomically: true, encoding: .utf8)
        let check = try CLI.run(["config", "check", "--config", config])
        #expect(check.status != 0)
        #expect((check.stdout + check.stderr).contains("mqtt.url must be mqtt://"), "\(check.stdout)\(check.stderr)")
    }

    @Test func aBadBrokerURLIsRefusedWithTheFormExpected() throws {
        let r = try CLI.run(["stream", "--simulate", "--duration", "1", "--mqtt", "http://127.0.0.1:1883"])
        #expect(r.status != 0)
        #expect(r.stderr.contains("mqtt://[user[:password]@]HOST[:PORT]"), "\(r.stderr)")
        let id = try CLI.run(["stream", "--simulate", "--duration", "1", "--mqtt", "mqtt://127.0.0.1", "--gateway-id", "a/b"])
        #expect(id.status != 0)
        #expect(id.stderr.contains("gateway id"), "\(id.stderr)")
    }

    /// No broker given anywhere: a usage error that names what is missing, not the root command's usage.
    @Test func fleetWithoutABrokerSaysWhatItNeeds() throws {
        let config = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-\(UUID().uuidString).toml").path
        try "".write(toFile: config, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: config) }
        let r = try CLI.run(["fleet"], environment: ["HR_GATEWAY_CONFIG": config])
        #expect(r.status == 64)
        #expect(r.stderr.contains("fleet needs the broker: --mqtt mqtt://HOST"), "\(r.stderr)")
        #expect(!r.stderr.contains("SUBCOMMANDS"), "\(r.stderr)")
    }

    /// A script reading `fleet --json` must not take a broker it never reached for an empty fleet.
    @Test func fleetJSONWithoutTheBrokerFailsInsteadOfAnEmptyFleet() throws {
        let r = try CLI.run(["fleet", "--mqtt", "mqtt://127.0.0.1:1", "--json", "--wait", "1"])
        #expect(r.status == 1)
        #expect(r.stdout.isEmpty, "\(r.stdout)")
        #expect(r.stderr.contains("could not be reached in 1 s"), "\(r.stderr)")
        #expect(!r.stderr.contains("Usage:"), "\(r.stderr)")
    }

    /// libmosquitto is opened only for --mqtt: without it, a session without --mqtt runs, --mqtt says how to install
    /// it, and doctor reports it.
    @Test func withoutLibmosquittoOnlyMQTTIsUnavailable() throws {
        let env = ["HR_GATEWAY_LIBMOSQUITTO": "/nonexistent/libmosquitto.so.1"]
        let plain = try CLI.run(["stream", "--simulate", "--duration", "2"], environment: env)
        #expect(plain.status == 0, "\(plain.stderr)")
        let r = try CLI.run(["stream", "--simulate", "--duration", "1", "--mqtt", "mqtt://127.0.0.1:1"], environment: env)
        #expect(r.status != 0)
        #expect(r.stderr.contains("libmosquitto is not available"), "\(r.stderr)")
        #expect(r.stderr.contains("sudo apt install libmosquitto1"), "\(r.stderr)")
        let doctor = try CLI.run(["doctor"], environment: env)
        #expect(doctor.stdout.contains("libmosquitto not found: --mqtt unavailable"), "\(doctor.stdout)")
        let found = try CLI.run(["doctor"])
        #expect(found.stdout.contains("libmosquitto loaded (--mqtt available)"), "\(found.stdout)")
    }
}
