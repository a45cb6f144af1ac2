import DBus
import DBusTestSupport
import Foundation
import GatewayDoctor
import GatewayStorage
import Logging
import Testing

/// Runs the built `hr-gateway` with extra environment; returns status and standard output.
func runGateway(_ arguments: [String], environment: [String: String]) throws -> (status: Int32, stdout: String) {
    var dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    var executable = URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(".build/debug/hr-gateway")
    for _ in 0..<4 {
        let candidate = dir.appendingPathComponent("hr-gateway")
        if FileManager.default.isExecutableFile(atPath: candidate.path) {
            executable = candidate
            break
        }
        dir = dir.deletingLastPathComponent()
    }
    let p = Process()
    p.executableURL = executable
    p.arguments = arguments
    p.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    let out = Pipe()
    p.standardOutput = out
    p.standardError = FileHandle.nullDevice
    p.standardInput = FileHandle.nullDevice
    try p.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return (p.terminationStatus, String(decoding: data, as: UTF8.self))
}

func tempStateDir() -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent("hrg-doctor-\(UUID().uuidString)").path
}

@Suite struct DoctorFactsTests {
    func line(_ checks: [DoctorCheck], _ name: String) -> DoctorCheck? { checks.first { $0.name == name } }

    @Test func aControllerWithoutBluetoothdIsNamed() throws {
        var f = DoctorFacts()
        f.controllers = [.init(name: "hci0", address: "00:1A:7D:DA:71:13", up: true)]
        f.bluetoothdVersion = "5.66"
        let b = try #require(line(f.evaluate(), "bluetoothd"))
        #expect(b.status == .failure)
        #expect(b.detail.contains("hci0 is present but bluetoothd is not running"))
        #expect(b.fix == "sudo systemctl enable --now bluetooth")
        #expect(line(f.evaluate(), "adapters")?.status == .skipped)
    }

    @Test func anUnpoweredAdapterBlockedByRfkillSaysHowToUnblock() throws {
        var f = DoctorFacts()
        f.bluezRunning = true
        f.adapters = [.init(name: "hci0", address: "AA", powered: false)]
        f.rfkill = [.init(name: "hci0", softBlocked: true, hardBlocked: false)]
        let checks = f.evaluate()
        let a = try #require(line(checks, "adapter hci0"))
        #expect(a.status == .failure)
        #expect(a.fix == "sudo rfkill unblock bluetooth")
        #expect(line(checks, "rfkill hci0")?.status == .warning)
        #expect(a.line.hasPrefix("FAIL  adapter hci0      AA, off: blocked by rfkill"))
        // Two spaces at least between the name and its detail, whatever the name's length.
        #expect(DoctorCheck("D-Bus permission", .ok, "fine").line == "ok    D-Bus permission  fine")
        #expect(DoctorCheck("adapter my-long-usb-dongle", .ok, "fine").line == "ok    adapter my-long-usb-dongle  fine")
    }

    @Test func rfkillAlwaysHasALineBlockedOrNot() throws {
        var f = DoctorFacts()
        #expect(line(f.evaluate(), "rfkill")?.status == .ok, "no switch at all is said too")
        #expect(line(f.evaluate(), "rfkill")?.detail.contains("no Bluetooth rfkill switch") == true)
        f.rfkill = [.init(name: "hci0", softBlocked: false, hardBlocked: false),
                    .init(name: "tpacpi_bluetooth_sw", softBlocked: false, hardBlocked: false)]
        let clear = try #require(line(f.evaluate(), "rfkill"))
        #expect(clear.status == .ok)
        #expect(clear.detail == "hci0, tpacpi_bluetooth_sw not blocked")
        f.rfkill[1].hardBlocked = true
        let checks = f.evaluate()
        #expect(line(checks, "rfkill") == nil)
        #expect(line(checks, "rfkill tpacpi_bluetooth_sw")?.detail == "hard-blocked")
    }

    @Test func anAccessDeniedReadIsAPolicyProblem() throws {
        var f = DoctorFacts()
        f.bluezRunning = true
        f.bluezError = "org.freedesktop.DBus.Error.AccessDenied: Rejected send message"
        let p = try #require(line(f.evaluate(), "D-Bus permission"))
        #expect(p.status == .failure)
        #expect(p.fix?.contains("hr-gateway-dbus.conf") == true)
    }

    @Test func inaccessibleCamerasAndStateDirectoriesWarnWithoutBlocking() {
        var f = DoctorFacts()
        f.bluezRunning = true
        f.adapters = [.init(name: "hci0", address: "AA", powered: true)]
        f.controllers = [.init(name: "hci0", address: "AA", up: true)]
        f.cameras = [.init(path: "/dev/video0", accessible: false)]
        f.stateDirError = "permission denied"
        let checks = f.evaluate()
        #expect(!checks.contains { $0.status == .failure }, "\(checks.map(\.line))")
        #expect(checks.contains { $0.name == "camera" && $0.status == .warning && $0.fix?.contains("video group") == true })
    }

    /// A file with unused settings is valid with warnings (doctor used to say only "valid" while config check warned);
    /// an error in a variable points at the variable, one in the file at config check.
    @Test func theConfigurationLineSaysWhereToLook() throws {
        var f = DoctorFacts()
        f.configPath = "/etc/hr-gateway/hr-gateway.toml"
        f.configWarnings = 2
        let warned = try #require(line(f.evaluate(), "configuration"))
        #expect(warned.status == .warning && warned.line.contains("valid, with 2 warnings"), "\(warned.line)")
        f.configError = "environment variable HR_GATEWAY_MODE: must be focus, breathing or typing, got \"zz\""
        #expect(line(f.evaluate(), "configuration")?.fix?.contains("HR_GATEWAY_* variable") == true)
        f.configError = "/etc/hr-gateway/hr-gateway.toml line 3: unknown key"
        #expect(line(f.evaluate(), "configuration")?.fix?.hasPrefix("hr-gateway config check /etc/hr-gateway") == true)
        f.configPath = nil
        f.configError = nil
        f.configWarnings = 0
        #expect(line(f.evaluate(), "configuration")?.status == .ok)
    }

    /// The configured sources are said; a file without any warns (the service's `stream` would have none); the
    /// configured adapter and camera must exist, or the service's session fails.
    @Test func theConfiguredSourcesAdapterAndCameraAreChecked() throws {
        var f = DoctorFacts()
        f.bluezRunning = true
        f.adapters = [.init(name: "hci0", address: "AA", powered: true)]
        #expect(line(f.evaluate(), "sources")?.status == .ok, "no file: commands name their own")
        f.configPath = "/etc/hr-gateway/hr-gateway.toml"
        let none = try #require(line(f.evaluate(), "sources"))
        #expect(none.status == .warning && none.line.contains("names no source"), "\(none.line)")
        #expect(none.fix?.contains("[strap] devices = [\"auto\"]") == true && none.fix?.contains("HR_GATEWAY_SOURCE") == true)
        f.configuredSources = "--strap auto"
        f.configuredSourcesOrigin = "/etc/hr-gateway/hr-gateway.toml"
        let named = try #require(line(f.evaluate(), "sources"))
        #expect(named.status == .ok && named.line.contains("--strap auto (/etc/hr-gateway/hr-gateway.toml)"), "\(named.line)")

        #expect(line(f.evaluate(), "strap.adapter") == nil)
        f.configuredAdapter = "hci0"
        #expect(line(f.evaluate(), "strap.adapter") == nil, "an adapter BlueZ has")
        f.configuredAdapter = "hci1"
        let adapter = try #require(line(f.evaluate(), "strap.adapter"))
        #expect(adapter.status == .failure && adapter.line.contains("hci1 (in /etc/hr-gateway/hr-gateway.toml) is not one "
            + "of BlueZ's adapters (hci0)"), "\(adapter.line)")

        #expect(line(f.evaluate(), "camera.device") == nil)
        f.configuredCamera = .init(path: "/dev/video0", accessible: true)
        #expect(line(f.evaluate(), "camera.device") == nil, "a camera there and open to this user")
        f.configuredCamera = .init(path: "/dev/video0", accessible: false)
        let closed = try #require(line(f.evaluate(), "camera.device"))
        #expect(closed.status == .failure && closed.fix?.contains("video group") == true, "\(closed.line)")
        f.configuredCameraMissing = true
        let missing = try #require(line(f.evaluate(), "camera.device"))
        #expect(missing.status == .failure && missing.line.contains("/dev/video0 (in /etc/hr-gateway/hr-gateway.toml) does "
            + "not exist"), "\(missing.line)")
        #expect(missing.fix?.contains("hr-gateway cameras") == true)

        var auto = DoctorFacts()
        auto.configPath = "/etc/hr-gateway/hr-gateway.toml"
        #expect(line(auto.evaluate(), "camera.device") == nil, "auto with a camera found")
        auto.configuredCameraAutoProblem = "no camera found: no /dev/video* node can capture video"
        let noCamera = try #require(line(auto.evaluate(), "camera.device"))
        #expect(noCamera.status == .failure && noCamera.line.contains("auto (in /etc/hr-gateway/hr-gateway.toml) finds no camera")
            && noCamera.line.contains("no /dev/video* node"), "\(noCamera.line)")
    }

    @Test func aFaceCascadeFromTheConfigurationIsNamedAsItsSetting() throws {
        var f = DoctorFacts()
        f.faceCascade = DoctorFacts.FaceCascade(path: "/tmp/none.xml", loaded: false, errorCode: "cascade_not_found")
        f.faceCascade.chosen = true
        f.faceCascade.chosenBy = "camera.face_cascade"
        let check = try #require(line(f.evaluate(), "face detector"))
        #expect(check.line.contains("camera.face_cascade /tmp/none.xml does not exist"), "\(check.line)")
        #expect(check.fix?.contains("give camera.face_cascade an OpenCV cascade XML") == true)
    }

    /// The binary reads them from the file: `doctor --config` with a camera that is not there.
    @Test func doctorChecksTheSourcesOfTheFileItReads() throws {
        let config = tempStateDir() + ".toml"
        try "[strap]\ndevices = [\"Polar H10\"]\n[camera]\ndevice = \"/dev/hrg-no-camera\"\n"
            .write(toFile: config, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: config) }
        let r = try runGateway(["doctor", "--config", config, "--state-dir", tempStateDir()],
                               environment: ["HR_GATEWAY_SOURCE": ""])
        #expect(r.status == 1)
        #expect(r.stdout.contains("ok    sources           --strap \"Polar H10\" --camera /dev/hrg-no-camera (\(config))"),
                "\(r.stdout)")
        #expect(r.stdout.contains("FAIL  camera.device     /dev/hrg-no-camera (in \(config)) does not exist"), "\(r.stdout)")
    }

    /// A system bus address from DBUS_SYSTEM_BUS_ADDRESS that fails is the variable's to fix, not "start D-Bus".
    @Test func aBadBusAddressFromTheEnvironmentIsNamedAsTheFix() throws {
        var f = DoctorFacts()
        f.busAddress = "garbage"
        f.busError = "Address does not contain a colon"
        f.busAddressFromEnvironment = true
        let check = try #require(line(f.evaluate(), "system bus"))
        #expect(check.fix?.contains("DBUS_SYSTEM_BUS_ADDRESS chose this address") == true, "\(check.line)")
        f.busAddressFromEnvironment = false
        #expect(line(f.evaluate(), "system bus")?.fix == "start D-Bus: sudo systemctl start dbus")
    }

    /// The state directory's line names the path once and its advice once (the store's message carries both), and a
    /// damaged database is told to be moved aside rather than "fix its permissions".
    @Test func theStateDirectoryLineSaysEachThingOnce() throws {
        var f = DoctorFacts()
        f.stateDir = "/srv/x/state"
        f.stateDirError = "cannot create the state directory /srv/x/state: Not a directory (/srv/x/state) "
            + "(\(StateDatabase.directoryAdvice))"
        let check = try #require(line(f.evaluate(), "state directory"))
        #expect(check.line.components(separatedBy: "/srv/x/state").count - 1 == 2, "\(check.line)")  // the path and the reason's
        #expect(check.line.components(separatedBy: "choose another").count - 1 == 1, "\(check.line)")
        f.stateDirError = "session database: cannot open /srv/x/state/sessions.sqlite: file is not a database"
        let damaged = try #require(line(f.evaluate(), "state directory"))
        #expect(damaged.fix?.contains("move it aside") == true, "\(damaged.line)")
        // SQLite's "malformed" is damage too (it was told to fix permissions), and the fix keeps -wal and -shm with
        // the file and names .recover.
        f.stateDirError = "session database: cannot open /srv/x/state/sessions.sqlite: database disk image is malformed"
        let malformed = try #require(line(f.evaluate(), "state directory"))
        #expect(malformed.fix?.contains("with its -wal and -shm") == true && malformed.fix?.contains(".recover") == true,
                "\(String(describing: malformed.fix))")
        // A truncated file reads its migrations table as NULLs: GRDB's words, damage all the same.
        f.stateDirError = "session database: cannot open /srv/x/state/sessions.sqlite: could not decode String from "
            + "database value NULL - column: \"identifier\""
        #expect(line(f.evaluate(), "state directory")?.fix?.contains("move it aside") == true)
        f.stateDirError = "the disk holding it is full (12 KB free)"
        #expect(line(f.evaluate(), "state directory")?.fix?.hasPrefix("free some space on that disk") == true)
        f.stateDirError = "relay.sqlite there is root's, not writable by this user; fix: sudo chown -R hr-gateway: /srv/x/state"
        let owned = try #require(line(f.evaluate(), "state directory"))
        #expect(owned.fix == "sudo chown -R hr-gateway: /srv/x/state", "\(owned.line)")
        #expect(owned.line.components(separatedBy: "chown").count == 2, "the fix said once: \(owned.line)")
    }

    /// A --face-cascade the user gave that does not load is theirs to fix: said in words, without reinstalling a package.
    @Test func aChosenFaceCascadeThatDoesNotLoadIsNamed() throws {
        var f = DoctorFacts()
        f.faceCascade = DoctorFacts.FaceCascade(path: "/tmp/x.xml", loaded: false, errorCode: "invalid_cascade",
                                                error: "OpenCV(4.6.0) persistence.cpp:692: error: (-5:Bad argument)\n…")
        f.faceCascade.chosen = true
        let check = try #require(line(f.evaluate(), "face detector"))
        #expect(check.line.contains("--face-cascade /tmp/x.xml is not an OpenCV cascade XML"), "\(check.line)")
        #expect(!check.line.contains("OpenCV(") && !check.line.contains("\n") && !check.line.contains("reinstall"))
    }

    @Test func faceCascadeIsLoadedOrItsPackageNamed() throws {
        let present = SystemProbe.faceCascade(path: "/usr/share/opencv4/lbpcascades/lbpcascade_frontalface.xml")
        #expect(present.loaded, "\(present.error ?? "") (scripts/test installs opencv-data)")
        let missing = SystemProbe.faceCascade(path: "/nonexistent/lbpcascade_frontalface.xml")
        #expect(!missing.loaded)
        #expect(missing.errorCode == "cascade_not_found")
        var f = DoctorFacts()
        f.faceCascade = missing
        let check = try #require(line(f.evaluate(), "face detector"))
        #expect(check.status == .warning)
        #expect(check.detail.contains("/nonexistent/lbpcascade_frontalface.xml"))
        #expect(check.fix?.contains("apt-get install opencv-data") == true, "\(check.line)")
        f.faceCascade = present
        #expect(line(f.evaluate(), "face detector")?.status == .ok)
    }
}

@Suite(.serialized) struct DoctorBusTests {
    /// doctor looks and makes nothing: it used to create the state directory and an empty sessions.sqlite wherever it
    /// was pointed. A directory not there yet is fine when it can be made; an existing one is probed for writing.
    @Test func doctorLeavesNoStoreBehind() throws {
        let daemon = try PrivateBusDaemon()
        defer { daemon.stop() }
        let parent = tempStateDir()
        try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: parent) }
        let missing = parent + "/a/state"
        let r = try runGateway(["doctor", "--state-dir", missing], environment: ["DBUS_SYSTEM_BUS_ADDRESS": daemon.address])
        #expect(r.stdout.contains("ok    state directory   \(missing) not made yet: the first recorded session makes it "
            + "(\(parent) writable)"), "\(r.stdout)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: parent).isEmpty)

        let existing = try runGateway(["doctor", "--state-dir", parent], environment: ["DBUS_SYSTEM_BUS_ADDRESS": daemon.address])
        #expect(existing.stdout.contains("ok    state directory   \(parent) writable"), "\(existing.stdout)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: parent).isEmpty, "no sessions.sqlite, no locks/")

        try "x".write(toFile: parent + "/f", atomically: true, encoding: .utf8)
        let underFile = try runGateway(["doctor", "--state-dir", parent + "/f/state"],
                                       environment: ["DBUS_SYSTEM_BUS_ADDRESS": daemon.address])
        #expect(underFile.stdout.contains("warn  state directory   \(parent)/f/state: cannot be made: \(parent)/f is a file"),
                "\(underFile.stdout)")
    }

    /// `--json` says the table's checks, one object per line in the same order, with the same exit status (a fleet's
    /// monitoring read the table's columns).
    @Test func doctorSaysItsChecksAsJSONLines() throws {
        let daemon = try PrivateBusDaemon()
        defer { daemon.stop() }
        let state = tempStateDir()
        defer { try? FileManager.default.removeItem(atPath: state) }
        let environment = ["DBUS_SYSTEM_BUS_ADDRESS": daemon.address, "HR_GATEWAY_STATE_DIR": state]
        let table = try runGateway(["doctor"], environment: environment)
        let json = try runGateway(["doctor", "--json"], environment: environment)
        #expect(json.status == table.status && table.status == 1, "no bluetoothd on a private bus fails")
        let objects = try json.stdout.split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: String], "\($0)")
        }
        let lines = table.stdout.split(separator: "\n").map(String.init).filter { $0.hasPrefix("ok ") || $0.hasPrefix("warn ")
            || $0.hasPrefix("FAIL ") || $0.hasPrefix("skip ") }
        #expect(objects.count == lines.count && objects.count > 5, "\(objects.count) objects, \(lines.count) lines")
        for (o, line) in zip(objects, lines) {
            let status = try #require(o["status"]), check = try #require(o["check"]), detail = try #require(o["detail"])
            #expect(["ok", "warn", "fail", "skip"].contains(status))
            #expect(line.lowercased().hasPrefix(status + " ") && line.contains(" \(check) ") && line.contains(detail), "\(line)")
            #expect((o["fix"] != nil) == line.contains(" — fix: "), "\(line)")
        }
        #expect(objects.contains { $0["status"] == "fail" && $0["fix"] != nil })
    }

    /// A wrong HR_GATEWAY_LIBMOSQUITTO is named as the thing to correct (the fix used to say to install the
    /// library, which is there).
    @Test func aWrongLibmosquittoPathIsNamedAsTheFix() throws {
        let daemon = try PrivateBusDaemon()
        defer { daemon.stop() }
        let state = tempStateDir()
        defer { try? FileManager.default.removeItem(atPath: state) }
        let r = try runGateway(["doctor"], environment: [
            "DBUS_SYSTEM_BUS_ADDRESS": daemon.address, "HR_GATEWAY_STATE_DIR": state,
            "HR_GATEWAY_LIBMOSQUITTO": "/nonexistent/libmosquitto.so.1",
        ])
        let line = r.stdout.split(separator: "\n").first { $0.hasPrefix("warn  MQTT") }.map(String.init) ?? ""
        #expect(line.contains("/nonexistent/libmosquitto.so.1"), "\(r.stdout)")
        #expect(line.contains("fix: HR_GATEWAY_LIBMOSQUITTO is set to /nonexistent/libmosquitto.so.1: point it at "
            + "libmosquitto.so.1, or unset it"), "\(r.stdout)")
    }

    @Test func withoutBlueZOnThePrivateBusDoctorFailsOnBluetoothd() throws {
        let daemon = try PrivateBusDaemon()
        defer { daemon.stop() }
        let state = tempStateDir()
        defer { try? FileManager.default.removeItem(atPath: state) }
        let r = try runGateway(["doctor"], environment: ["DBUS_SYSTEM_BUS_ADDRESS": daemon.address, "HR_GATEWAY_STATE_DIR": state])
        #expect(r.status == 1)
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("ok    system bus") }, "\(r.stdout)")
        #expect(lines.contains { $0.hasPrefix("FAIL  bluetoothd") && $0.contains("fix: ") }, "\(r.stdout)")
        #expect(lines.contains { $0.hasPrefix("ok    state directory   \(state)") }, "\(r.stdout)")
        #expect(lines.contains { $0.hasPrefix("ok    rfkill") || $0.hasPrefix("warn  rfkill") }, "\(r.stdout)")
        #expect(lines.contains { $0.hasPrefix("ok    face detector") }, "\(r.stdout)")

        let missing = try runGateway(["doctor", "--face-cascade", "/nonexistent/cascade.xml"],
                                     environment: ["DBUS_SYSTEM_BUS_ADDRESS": daemon.address, "HR_GATEWAY_STATE_DIR": state])
        #expect(missing.stdout.split(separator: "\n").contains {
            $0.hasPrefix("warn  face detector") && $0.contains("/nonexistent/cascade.xml") && $0.contains("opencv-data")
        }, "\(missing.stdout)")

        // The OpenCV side is a library opened at run time: when it cannot be opened, doctor says so and how to fix
        // it (and straps are unaffected).
        let noLibrary = try runGateway(["doctor"], environment: [
            "DBUS_SYSTEM_BUS_ADDRESS": daemon.address, "HR_GATEWAY_STATE_DIR": state,
            "HR_GATEWAY_OPENCV_LIBRARY": "/nonexistent/libHRGatewayOpenCV.so",
        ])
        let said = noLibrary.stdout.split(separator: "\n").first { $0.hasPrefix("warn  face detector") }
        #expect(said?.contains("/nonexistent/libHRGatewayOpenCV.so") == true, "\(noLibrary.stdout)")
        #expect(said?.contains("straps unaffected") == true, "\(noLibrary.stdout)")
        #expect(said?.contains("swift build --product HRGatewayOpenCV") == true, "\(noLibrary.stdout)")
    }

    @Test func withoutASystemBusTheReasonIsOneSentenceWithItsFix() throws {
        let state = tempStateDir()
        defer { try? FileManager.default.removeItem(atPath: state) }
        let socket = "/tmp/hrg-no-bus-\(UUID().uuidString)"
        let r = try runGateway(["doctor"], environment: ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=\(socket)",
                                                         "HR_GATEWAY_STATE_DIR": state])
        #expect(r.status == 1)
        let bus = try #require(r.stdout.split(separator: "\n").first { $0.hasPrefix("FAIL  system bus") })
        #expect(bus.contains(socket), "\(bus)")
        #expect(!bus.contains("org.freedesktop.DBus.Error"), "the reason, not the error's name: \(bus)")
        #expect(bus.filter { $0 == "(" }.count <= 1, "\(bus)")
    }

    @Test(.enabled(if: BlueZMock.available, "python3-dbusmock is not installed"))
    func withAFakeBlueZAndAPoweredAdapterNothingBlocks() async throws {
        let mock = try await BlueZMock()
        defer { mock.tearDown() }
        try await mock.addAdapter("hci0")
        let state = tempStateDir()
        defer { try? FileManager.default.removeItem(atPath: state) }
        let r = try runGateway(["doctor"], environment: ["DBUS_SYSTEM_BUS_ADDRESS": mock.daemon.address, "HR_GATEWAY_STATE_DIR": state])
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("ok    bluetoothd        running") }, "\(r.stdout)")
        #expect(lines.contains { $0.hasPrefix("ok    D-Bus permission") }, "\(r.stdout)")
        #expect(lines.contains { $0.hasPrefix("ok    adapter hci0") && $0.contains("powered") }, "\(r.stdout)")
        #expect(r.status == 0, "\(r.stdout)")
    }

    @Test(.enabled(if: BlueZMock.available, "python3-dbusmock is not installed"))
    func aBusPolicyThatDeniesBlueZIsReported() async throws {
        let dir = tempStateDir()
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let config = dir + "/bus.conf"
        try """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>session</type>
              <listen>unix:tmpdir=\(dir)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
                <allow own="*"/>
                <deny send_destination="org.bluez" send_interface="org.freedesktop.DBus.ObjectManager"/>
              </policy>
            </busconfig>
            """.write(toFile: config, atomically: true, encoding: .utf8)
        let daemon = try PrivateBusDaemon(configFile: config)
        defer { daemon.stop() }
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let control = try await DBusConnection.connect(to: .address(daemon.address), logger: logger)
        defer { control.close() }
        let mock = try await DBusMockProcess(template: "bluez5", busName: "org.bluez", address: daemon.address, observer: control)
        defer { mock.stop() }
        let r = try runGateway(["doctor"], environment: ["DBUS_SYSTEM_BUS_ADDRESS": daemon.address, "HR_GATEWAY_STATE_DIR": dir + "/state"])
        #expect(r.status == 1)
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("FAIL  D-Bus permission") && $0.contains("AccessDenied") }, "\(r.stdout)")
    }
}
