import ArgumentParser
import Foundation
import V4L2Capture
import GatewayConfig
import GatewayDoctor
import GatewayEngine
import GatewayStorage
import MQTTSink
import LSLSink
import SessionStore
import SystemCalls

struct DoctorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Check that this machine can stream: D-Bus, bluetoothd, adapters, permissions, cameras, config.",
        discussion: """
            One line per check: ok, warn (works, but something is missing), FAIL (blocks streaming from a strap) or \
            skip (depends on a check that failed), each problem with its fix. Checks: the system bus; bluetoothd \
            on it and its version; read access to BlueZ's objects (the D-Bus policy); each adapter, powered or \
            not and why (rfkill in /sys/class/rfkill); the kernel's HCI controllers through libbluetooth, so that \
            "hci0 is present but bluetoothd is not running" is told apart from "no adapter"; cameras (/dev/video*) \
            and whether this user may open them; the face cascade of the camera pulse (OpenCV, Debian package \
            opencv-data); the configuration file; the sources a command given none streams (the file's [strap] \
            devices and [camera] device, or HR_GATEWAY_SOURCE as the service passes it), and that the file's \
            strap.adapter and camera.device exist; the state directory.

            The exit status is 1 when a check failed, 0 otherwise. --json prints one object per check instead, \
            {"check":…,"status":"ok"|"warn"|"fail"|"skip","detail":…,"fix":…} ("fix" only with a problem), for a \
            fleet's monitoring; the exit status is the same.

            Examples:
              hr-gateway doctor
              sudo -u hr-gateway hr-gateway doctor      (as the service user)
              hr-gateway doctor --json | jq -c 'select(.status == "fail")'
            """
    )

    @Flag(help: "Print one JSON object per check instead of the table.")
    var json = false

    @OptionGroup var store: StoreOptions

    @Option(help: ArgumentHelp(
        "The face cascade to check (default: the configuration's camera.face_cascade, else the one the camera pulse "
            + "loads).", valueName: "xml"))
    var faceCascade: String?

    func run() async throws {
        var facts = DoctorFacts()
        var settings = GatewayConfiguration()
        facts.configPath = GatewayConfiguration.locate(explicit: store.config)
        if let path = facts.configPath {
            do throws(ConfigurationError) {
                let loaded = try GatewayConfiguration.load(path: path)
                settings = loaded.0
                facts.configWarnings = loaded.warnings.count
            } catch {
                facts.configError = error.all.count > 1 ? "\(error.all[0]) (and \(error.all.count - 1) more)" : "\(error)"
            }
        }
        do { try settings.applyEnvironment(ProcessInfo.processInfo.environment) } catch {
            facts.configError = error.all.count > 1 ? "\(error.all[0]) (and \(error.all.count - 1) more)" : "\(error)"
        }
        StoreOptions.bootstrapLogging(store.logLevel ?? settings.logLevel)
        if let faceCascade = faceCascade ?? settings.cameraFaceCascade {
            facts.faceCascade.path = faceCascade
            facts.faceCascade.chosen = true
            if self.faceCascade == nil { facts.faceCascade.chosenBy = "camera.face_cascade" }
        }
        Self.sources(settings, into: &facts)
        await SystemProbe.probe(into: &facts)
        facts.stateDir = StateDirectory.resolve(option: store.stateDir, configured: settings.stateDir)
        // Looked at, never made: a check leaves no store behind (the first recorded session makes it).
        do {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: facts.stateDir, isDirectory: &isDirectory) {
                guard isDirectory.boolValue else { throw CommandFailure("a file, not a directory") }
                // An existing store is opened, so a damaged one shows here.
                let sessions = try SessionStore.existing(directory: facts.stateDir)
                let probe = facts.stateDir + "/.doctor-\(getpid())"
                guard FileManager.default.createFile(atPath: probe, contents: Data()) else {
                    throw CommandFailure("not writable by this user")
                }
                try? FileManager.default.removeItem(atPath: probe)
                // Writable, but not for a session: a full disk, or a store's file another user made (root typing a
                // command in the service's directory) that this user may not write.
                if let free = StateDatabase.freeBytes(facts.stateDir), free < StateDatabase.fullBelowBytes {
                    throw CommandFailure("the disk holding it is full (\(free / 1024) KB free)")
                }
                // Its directories too: a locks/ or journal/ of root's left every session unrecorded.
                let entries = ["sessions.sqlite", "outbox.sqlite", "relay.sqlite", "mqtt-outbox.sqlite", "tokens.json"]
                    .map { ($0, W_OK) } + ["locks", "journal"].map { ($0, W_OK | X_OK) }
                for (file, mode) in entries {
                    let path = facts.stateDir + "/" + file
                    guard FileManager.default.fileExists(atPath: path), access(path, mode) != 0 else { continue }
                    var st = stat()
                    let owner = stat(path, &st) == 0 ? (getpwuid(st.st_uid).map { String(cString: $0.pointee.pw_name) }
                        ?? "user \(st.st_uid)") : "another user"
                    let me = getpwuid(geteuid()).map { String(cString: $0.pointee.pw_name) } ?? "\(geteuid())"
                    throw CommandFailure("\(file) there is \(owner)'s, not writable by this user; fix: sudo chown -R "
                        + "\(me): \(facts.stateDir)")
                }
                // A damaged outbox is not opened by a check (it would be made); its first bytes say it is none.
                // Every damaged one is named (the first alone was, and the others were found one at a time).
                let damaged = ["outbox.sqlite", "relay.sqlite", "mqtt-outbox.sqlite"].filter { file in
                    let path = facts.stateDir + "/" + file
                    guard let head = FileHandle(forReadingAtPath: path).map({ h in
                        defer { try? h.close() }
                        return h.readData(ofLength: 16)
                    }) else { return false }
                    return !head.isEmpty && head != Data("SQLite format 3\0".utf8)
                }
                if !damaged.isEmpty {
                    let files = damaged.joined(separator: " and ")
                    throw CommandFailure("\(files) there \(damaged.count == 1 ? "is" : "are") damaged (not a database); fix: "
                        + "move \(damaged.count == 1 ? "it" : "them") aside with \(damaged.count == 1 ? "its" : "their") -wal "
                        + "and -shm (cd \(facts.stateDir) && for f in \(damaged.map { $0 + "*" }.joined(separator: " ")); do "
                        + "mv \"$f\" \"damaged-$f\"; done) and new ones are made")
                }
                if let free = StateDatabase.freeBytes(facts.stateDir), facts.stateDirNote == nil {
                    facts.stateDirNote = "writable, " + Self.size(free) + " free"
                }
                // Journals no import takes wait for a person (the commands that open the store say them too).
                if let left = sessions?.journalsLeftOut(), !left.isEmpty {
                    facts.stateDirNote = (facts.stateDirNote.map { $0 + "; " } ?? "") + "\(left.count) journal"
                        + "\(left.count == 1 ? "" : "s") no command imports, to read or move aside by hand: "
                        + left.joined(separator: "; ")
                }
            } else {
                let parent = StateDirectory.nearestExisting(SystemCall.parentDirectory(of: facts.stateDir))
                guard FileManager.default.fileExists(atPath: parent, isDirectory: &isDirectory), isDirectory.boolValue
                else { throw CommandFailure("cannot be made: \(parent) is a file, not a directory") }
                guard access(parent, W_OK) == 0 else {
                    throw CommandFailure("cannot be made: \(parent) is not writable by this user")
                }
                facts.stateDirNote = "not made yet: the first recorded session makes it (\(parent) writable)"
            }
        } catch {
            facts.stateDirError = "\(error)"
        }

        do throws(LSLLibrary.Unavailable) {
            let lsl = try LSLLibrary.load()
            facts.lsl = DoctorFacts.LSLFound(path: lsl.path, version: lsl.version)
        } catch {
            let tried = error.tried.split(separator: "; ").map(String.init)
            facts.lslError = error.configured.map { "HR_GATEWAY_LIBLSL=\($0) did not load: \(tried.first ?? "")" }
                ?? "liblsl not found: --lsl unavailable (tried \(tried.count) place\(tried.count == 1 ? "" : "s"); "
                + "the first: \(tried.first ?? "none"))"
            facts.lslFix = error.fix
        }
        facts.mqttChecked = true
        facts.mqttError = MQTTConnection.libraryProblem()
        if facts.mqttError != nil, ProcessInfo.processInfo.environment["HR_GATEWAY_LIBMOSQUITTO"]?.isEmpty == false {
            facts.mqttFix = MQTTConnection.libraryFix
        }
        let checks = facts.evaluate()
        for c in checks { print(json ? Self.json(c).jsonString : c.line) }
        let failures = checks.filter { $0.status == .failure }
        if !failures.isEmpty {
            if !json {
                print(failures.allSatisfy { $0.name == "camera.device" }
                    ? "The configured camera cannot start: fix the FAIL line above."
                    : "Streaming from a strap is blocked: fix the FAIL lines above.")
            }
            throw ExitCode.failure
        }
    }

    /// A check as `--json` prints it: its status in lower case ("fail", not the table's "FAIL").
    static func json(_ c: DoctorCheck) -> JSONValue {
        var o: [String: JSONValue] = [
            "check": .string(c.name), "status": .string(c.status.rawValue.lowercased()), "detail": .string(c.detail),
        ]
        if let fix = c.fix { o["fix"] = .string(fix) }
        return .object(o)
    }

    /// What a command given no source option streams (the service's `stream`): `HR_GATEWAY_SOURCE` when set (it
    /// replaces the file's), else the configuration's devices; and the configured adapter and camera to check.
    /// "512 MB", "12.3 GB".
    static func size(_ bytes: Int64) -> String {
        bytes >= 1 << 30 ? String(format: "%.1f GB", Double(bytes) / Double(1 << 30)) : "\(bytes >> 20) MB"
    }

    static func sources(_ settings: GatewayConfiguration, into facts: inout DoctorFacts) {
        facts.configuredAdapter = settings.strapAdapter
        let environment = ProcessInfo.processInfo.environment["HR_GATEWAY_SOURCE"]?.trimmingCharacters(in: .whitespaces)
        if let environment, !environment.isEmpty {
            facts.configuredSources = environment
            facts.configuredSourcesOrigin = "HR_GATEWAY_SOURCE"
            facts.configuredSourcesProblem = StreamCommand.problem(withSources: environment)
            return
        }
        // Parsed from no arguments: the options' values exist only once parsed.
        if var file = try? SourceOptions.parse([]) {
            file.adopt(settings)
            if file.fromFile != nil {
                facts.configuredSources = file.described
                facts.configuredSourcesOrigin = settings.sourcePath ?? "the configuration"
            }
        }
        if settings.cameraDevice == CameraOptions.automatic {
            if case .failure(let why) = V4L2Camera.automatic() { facts.configuredCameraAutoProblem = why.description }
        } else if let camera = settings.cameraDevice {
            facts.configuredCamera = DoctorFacts.Camera(path: camera, accessible: access(camera, R_OK | W_OK) == 0)
            facts.configuredCameraMissing = !FileManager.default.fileExists(atPath: camera)
        }
    }
}
