import Foundation
import GatewayStorage

/// One line of `hr-gateway doctor`: what was checked, how it went, and what to do about it.
public struct DoctorCheck: Sendable, Equatable {
    public enum Status: String, Sendable {
        case ok = "ok"
        /// Works, but something is missing or degraded (streaming is still possible).
        case warning = "warn"
        /// Blocks streaming from a strap.
        case failure = "FAIL"
        /// Not checked because something it depends on failed.
        case skipped = "skip"
    }

    public var name: String
    public var status: Status
    public var detail: String
    public var fix: String?

    public init(_ name: String, _ status: Status, _ detail: String, fix: String? = nil) {
        self.name = name
        self.status = status
        self.detail = detail
        self.fix = fix
    }

    /// `FAIL  bluetoothd        not running — fix: …`: columns parted by two spaces at least, for scripts that
    /// split on them (the longest fixed name, "D-Bus permission", had one).
    public var line: String {
        let head = status.rawValue.padding(toLength: 5, withPad: " ", startingAt: 0)
            + " " + name.padding(toLength: max(16, name.count), withPad: " ", startingAt: 0) + "  " + detail
        return fix.map { head + " — fix: " + $0 } ?? head
    }
}

/// What the probes found on the machine. Filled by `SystemProbe` (or by a test), judged by `evaluate()`.
public struct DoctorFacts: Sendable, Equatable {
    public struct Adapter: Sendable, Equatable {
        public var name: String
        public var address: String
        public var powered: Bool
        public init(name: String, address: String, powered: Bool) {
            self.name = name
            self.address = address
            self.powered = powered
        }
    }

    public struct Controller: Sendable, Equatable {
        public var name: String
        public var address: String
        public var up: Bool
        public init(name: String, address: String, up: Bool) {
            self.name = name
            self.address = address
            self.up = up
        }
    }

    public struct RFKill: Sendable, Equatable {
        public var name: String
        public var softBlocked: Bool
        public var hardBlocked: Bool
        public init(name: String, softBlocked: Bool, hardBlocked: Bool) {
            self.name = name
            self.softBlocked = softBlocked
            self.hardBlocked = hardBlocked
        }
    }

    public struct Camera: Sendable, Equatable {
        public var path: String
        public var accessible: Bool
        public init(path: String, accessible: Bool) {
            self.path = path
            self.accessible = accessible
        }
    }

    /// The system bus address tried, and the connection error if it failed.
    public var busAddress = "unix:path=/run/dbus/system_bus_socket"
    public var busError: String?
    /// The address came from DBUS_SYSTEM_BUS_ADDRESS (then that variable is what to check first).
    public var busAddressFromEnvironment = false
    /// Whether some process owns `org.bluez` on the bus.
    public var bluezRunning = false
    /// `bluetoothd -v`, when the binary was found.
    public var bluetoothdVersion: String?
    /// Adapters from BlueZ's object tree (nil when it could not be read).
    public var adapters: [Adapter]?
    /// The D-Bus error when reading BlueZ's objects failed (AccessDenied: policy).
    public var bluezError: String?
    /// Controllers from the kernel through libbluetooth, or why they could not be listed.
    public var controllers: [Controller] = []
    public var controllersError: String?
    public var rfkill: [RFKill] = []
    public var cameras: [Camera] = []
    /// The sources a command given none streams (the service's `stream`), as options: the configuration's
    /// `[strap] devices` and `[camera] device`, or `HR_GATEWAY_SOURCE`, which replaces them; nil: none.
    public var configuredSources: String?
    /// Where `configuredSources` came from (the file, or HR_GATEWAY_SOURCE).
    public var configuredSourcesOrigin = ""
    /// Why `stream` would refuse `configuredSources` (a mistyped option in HR_GATEWAY_SOURCE); nil when it takes them.
    public var configuredSourcesProblem: String?
    /// The configuration's `strap.adapter`, checked against BlueZ's adapters.
    public var configuredAdapter: String?
    /// The configuration's `camera.device`: whether it exists and this user may open it.
    public var configuredCamera: Camera?
    /// The configuration's `camera.device` is missing.
    public var configuredCameraMissing = false
    /// Why the configuration's `camera.device = "auto"` finds no camera; nil when it finds one, or is not auto.
    public var configuredCameraAutoProblem: String?
    public var configPath: String?
    public var configError: String?
    /// Warnings the file gave (keys that are not used, and the like): `config check` lists them.
    public var configWarnings = 0
    public var stateDir = ""
    public var stateDirError: String?
    /// Said on the state directory's line instead of "writable" when it is fine but not there yet.
    public var stateDirNote: String?
    /// liblsl for `--lsl`: where it was loaded from and its version, or why it could not be.
    public var lsl: LSLFound?
    public var lslError: String?
    /// What to do about `lslError` (set by whoever found it: a bad HR_GATEWAY_LIBLSL is fixed differently).
    public var lslFix: String?
    /// libmosquitto for `--mqtt`: nil when it loaded, else why not.
    public var mqttError: String?
    /// What to do about `mqttError` (a bad HR_GATEWAY_LIBMOSQUITTO is fixed differently).
    public var mqttFix: String?
    public var mqttChecked = false

    public struct LSLFound: Sendable, Equatable {
        public var path: String
        /// As liblsl reports it: 118 for 1.18.
        public var version: Int
        public init(path: String, version: Int) {
            self.path = path
            self.version = version
        }
    }
    /// The face cascade the camera pulse uses, and whether it loaded.
    public var faceCascade = FaceCascade(path: "", loaded: false)

    public struct FaceCascade: Sendable, Equatable {
        public var path: String
        public var loaded: Bool
        /// `cascade_not_found`, `cascade_not_readable`, `invalid_cascade`, `library_unavailable` when it did not load.
        public var errorCode: String?
        public var error: String?
        /// The Debian package that provides the file.
        public var package = "opencv-data"
        /// Given with --face-cascade or the configuration's camera.face_cascade (a wrong path is then the user's to
        /// fix, not the package's).
        public var chosen = false
        /// Which of the two chose it.
        public var chosenBy = "--face-cascade"
        public init(path: String, loaded: Bool, errorCode: String? = nil, error: String? = nil) {
            self.path = path
            self.loaded = loaded
            self.errorCode = errorCode
            self.error = error
        }
    }

    public init() {}

    /// One check per line, in the order a person fixes them.
    public func evaluate() -> [DoctorCheck] {
        var checks: [DoctorCheck] = []
        let hciNames = controllers.map(\.name).joined(separator: ", ")

        if let busError {
            checks.append(DoctorCheck("system bus", .failure, "cannot connect to \(busAddress): \(busError)",
                                      fix: busAddressFromEnvironment
                                        ? "DBUS_SYSTEM_BUS_ADDRESS chose this address: correct it (the system bus is usually "
                                            + "unix:path=/run/dbus/system_bus_socket) or unset it"
                                        : "start D-Bus: sudo systemctl start dbus"))
        } else {
            checks.append(DoctorCheck("system bus", .ok, "connected (\(busAddress))"))
        }

        let version = bluetoothdVersion.map { "BlueZ \($0)" } ?? "version unknown (bluetoothd not found in /usr/libexec/bluetooth or /usr/sbin)"
        if busError != nil {
            checks.append(DoctorCheck("bluetoothd", .skipped, "needs the system bus"))
        } else if bluezRunning {
            var status = DoctorCheck.Status.ok
            var detail = "running, \(version)"
            var fix: String?
            if let v = bluetoothdVersion, let major = Double(v.prefix { $0.isNumber || $0 == "." }), major < 5.50 {
                status = .warning
                detail += " (older than 5.50: GATT notifications may be unreliable)"
                fix = "upgrade the bluez package"
            }
            checks.append(DoctorCheck("bluetoothd", status, detail, fix: fix))
        } else {
            let why = controllers.isEmpty ? "not running (org.bluez is not on the system bus)"
                : "\(hciNames) \(controllers.count == 1 ? "is" : "are") present but bluetoothd is not running"
            checks.append(DoctorCheck("bluetoothd", .failure, why + ", \(version)",
                                      fix: bluetoothdVersion == nil ? "sudo apt install bluez && sudo systemctl enable --now bluetooth"
                                        : "sudo systemctl enable --now bluetooth"))
        }

        if busError == nil, bluezRunning {
            if let bluezError {
                let denied = bluezError.contains("AccessDenied")
                checks.append(DoctorCheck(
                    "D-Bus permission", .failure, "cannot read BlueZ's objects: \(bluezError)",
                    fix: denied ? "install config/hr-gateway-dbus.conf into /etc/dbus-1/system.d/ (scripts/install does) "
                        + "or run as a member of the bluetooth group" : "check bluetoothd's log: journalctl -u bluetooth"))
            } else {
                checks.append(DoctorCheck("D-Bus permission", .ok, "BlueZ's objects are readable"))
            }
        } else {
            checks.append(DoctorCheck("D-Bus permission", .skipped, "needs bluetoothd on the system bus"))
        }

        if let adapters {
            if adapters.isEmpty {
                checks.append(DoctorCheck(
                    "adapters", .failure,
                    controllers.isEmpty ? "BlueZ has no adapter" : "BlueZ has no adapter although the kernel has \(hciNames)",
                    fix: "plug in a Bluetooth adapter, or check `rfkill list` and `journalctl -u bluetooth`"))
            } else {
                for a in adapters {
                    let blocked = rfkill.first { $0.softBlocked || $0.hardBlocked }
                    if a.powered {
                        checks.append(DoctorCheck("adapter \(a.name)", .ok, "\(a.address), powered"))
                    } else if let blocked {
                        checks.append(DoctorCheck(
                            "adapter \(a.name)", .failure, "\(a.address), off: blocked by rfkill (\(blocked.name))",
                            fix: blocked.hardBlocked ? "turn on the hardware radio switch" : "sudo rfkill unblock bluetooth"))
                    } else {
                        checks.append(DoctorCheck("adapter \(a.name)", .failure, "\(a.address), not powered",
                                                  fix: "bluetoothctl power on (or AutoEnable=true in /etc/bluetooth/main.conf)"))
                    }
                }
            }
        } else {
            checks.append(DoctorCheck("adapters", .skipped, "needs BlueZ's objects"))
        }
        if let configuredAdapter, let adapters, !adapters.isEmpty, !adapters.contains(where: { $0.name == configuredAdapter }) {
            checks.append(DoctorCheck(
                "strap.adapter", .failure,
                "\(configuredAdapter) (in \(configPath ?? "the configuration")) is not one of BlueZ's adapters "
                    + "(\(adapters.map(\.name).joined(separator: ", ")))",
                fix: "set strap.adapter to one of them, or \"\" for the first powered one"))
        }

        if let controllersError {
            checks.append(DoctorCheck("HCI controllers", .warning, "cannot list them: \(controllersError)"))
        } else if controllers.isEmpty {
            checks.append(DoctorCheck("HCI controllers", .warning, "the kernel has none",
                                      fix: "plug in a Bluetooth adapter; `dmesg | grep -i bluetooth` shows driver errors"))
        } else {
            let list = controllers.map { "\($0.name) \($0.address) \($0.up ? "up" : "down")" }.joined(separator: ", ")
            checks.append(DoctorCheck("HCI controllers", .ok, list))
        }

        // Always one line at least, so that the check is seen to be made.
        if rfkill.isEmpty {
            checks.append(DoctorCheck("rfkill", .ok, "no Bluetooth rfkill switch in /sys/class/rfkill (nothing can block the radio)"))
        } else if !rfkill.contains(where: { $0.softBlocked || $0.hardBlocked }) {
            checks.append(DoctorCheck("rfkill", .ok, "\(rfkill.map(\.name).joined(separator: ", ")) not blocked"))
        }
        for r in rfkill where r.softBlocked || r.hardBlocked {
            checks.append(DoctorCheck(
                "rfkill \(r.name)", .warning, r.hardBlocked ? "hard-blocked" : "soft-blocked",
                fix: r.hardBlocked ? "turn on the hardware radio switch" : "sudo rfkill unblock bluetooth"))
        }

        if cameras.isEmpty {
            checks.append(DoctorCheck("cameras", .warning, "no /dev/video* device (camera sources unavailable)",
                                      fix: "plug in a webcam; `hr-gateway cameras` lists what V4L2 sees"))
        } else {
            for c in cameras {
                checks.append(c.accessible
                    ? DoctorCheck("camera", .ok, "\(c.path) readable and writable")
                    : DoctorCheck("camera", .warning, "\(c.path) not accessible to this user",
                                  fix: "add the user to the video group (sudo usermod -aG video $USER) and log in again"))
            }
        }

        if let configuredCamera {
            let file = configPath ?? "the configuration"
            if configuredCameraMissing {
                checks.append(DoctorCheck(
                    "camera.device", .failure, "\(configuredCamera.path) (in \(file)) does not exist: a session with the "
                        + "configured sources fails",
                    fix: "`hr-gateway cameras` lists the cameras: set camera.device to one (a /dev/v4l/by-id/ name stays "
                        + "the same across reboots and ports), or \"\" for none"))
            } else if !configuredCamera.accessible {
                checks.append(DoctorCheck(
                    "camera.device", .failure, "\(configuredCamera.path) (in \(file)) cannot be opened by this user: a "
                        + "session with the configured sources fails",
                    fix: "add the user to the video group (sudo usermod -aG video $USER) and log in again"))
            }
        }

        if let why = configuredCameraAutoProblem {
            checks.append(DoctorCheck(
                "camera.device", .failure, "auto (in \(configPath ?? "the configuration")) finds no camera: a session "
                    + "with the configured sources fails: \(why)",
                fix: "plug in a webcam, or set camera.device to \"\" for none"))
        }

        if faceCascade.loaded {
            checks.append(DoctorCheck("face detector", .ok, "\(faceCascade.path) loaded (camera pulse)"))
        } else if faceCascade.chosen, faceCascade.errorCode != "library_unavailable" {
            let what = switch faceCascade.errorCode {
            case "cascade_not_found": "does not exist"
            case "cascade_not_readable": "cannot be read (permission)"
            default: "is not an OpenCV cascade XML (it did not load)"
            }
            checks.append(DoctorCheck(
                "face detector", .warning,
                "\(faceCascade.chosenBy) \(faceCascade.path) \(what): camera pulse cannot find faces (straps unaffected)",
                fix: "give \(faceCascade.chosenBy) an OpenCV cascade XML, such as "
                    + "/usr/share/opencv4/lbpcascades/lbpcascade_frontalface.xml (package \(faceCascade.package))"))
        } else if faceCascade.errorCode == "cascade_not_found" {
            checks.append(DoctorCheck(
                "face detector", .warning,
                "face cascade \(faceCascade.path) missing: camera pulse cannot find faces (straps unaffected)",
                fix: "sudo apt-get install \(faceCascade.package) (it provides /usr/share/opencv4/), "
                    + "or pass --face-cascade FILE"))
        } else if faceCascade.errorCode == "library_unavailable" {
            checks.append(DoctorCheck(
                "face detector", .warning,
                "the face detector's OpenCV library did not load: camera pulse cannot find faces (straps unaffected). "
                    + (faceCascade.error ?? ""),
                fix: "installed from the Debian package: sudo apt-get install libopencv-objdetect406 opencv-data "
                    + "(its Recommends); built from source: build libHRGatewayOpenCV.so beside hr-gateway "
                    + "(swift build --product HRGatewayOpenCV) and install OpenCV's libraries "
                    + "(sudo apt-get install libopencv-objdetect-dev)"))
        } else if !faceCascade.path.isEmpty {
            checks.append(DoctorCheck(
                "face detector", .warning,
                "face cascade \(faceCascade.path) did not load (damaged?): camera pulse cannot find faces (straps unaffected)",
                fix: "reinstall \(faceCascade.package) (sudo apt-get install --reinstall \(faceCascade.package)), "
                    + "or pass --face-cascade FILE with an OpenCV cascade XML"))
        }

        if let configError {
            let fromFile = configPath.map { configError.hasPrefix($0) } ?? false
            checks.append(DoctorCheck("configuration", .failure, configError,
                                      fix: fromFile ? "hr-gateway config check \(configPath ?? "") shows each error"
                                        : "correct the HR_GATEWAY_* variable named, or unset it (hr-gateway config check lists them all)"))
        } else if let configPath, configWarnings > 0 {
            checks.append(DoctorCheck(
                "configuration", .warning,
                "\(configPath) valid, with \(configWarnings) warning\(configWarnings == 1 ? "" : "s") (settings that are not used)",
                fix: "hr-gateway config check \(configPath) lists them"))
        } else {
            checks.append(DoctorCheck("configuration", .ok, configPath.map { "\($0) valid" } ?? "no file, defaults apply"))
        }

        if let configuredSources, let problem = configuredSourcesProblem {
            checks.append(DoctorCheck(
                "sources", .failure, "\(configuredSources) (\(configuredSourcesOrigin)): \(problem)",
                fix: "correct HR_GATEWAY_SOURCE (`sudo systemctl edit hr-gateway`): the service runs `hr-gateway stream` "
                    + "with it and would exit at once"))
        } else if let configuredSources {
            checks.append(DoctorCheck(
                "sources", .ok, "\(configuredSources) (\(configuredSourcesOrigin)), for a command given no source option"))
        } else if let configPath {
            checks.append(DoctorCheck(
                "sources", .warning, "\(configPath) names no source: `hr-gateway stream` given none (the service's) has "
                    + "nothing to stream",
                fix: "set [strap] devices = [\"auto\"] (or [camera] device) in \(configPath), or HR_GATEWAY_SOURCE through "
                    + "`sudo systemctl edit hr-gateway`"))
        } else {
            checks.append(DoctorCheck(
                "sources", .ok, "none configured (no configuration file): each command names its own, such as --strap auto"))
        }

        if let stateDirError {
            // The store's own advice is the fix here, said once; the path once.
            let advice = " (\(StateDatabase.directoryAdvice))"
            var reason = stateDirError.replacingOccurrences(of: advice, with: "")
            reason = reason.replacingOccurrences(of: "cannot create the state directory \(stateDir): ", with: "cannot create it: ")
            // A fix the check found itself (whose files to give to whom) comes after "; fix: ".
            var given: String?
            if let r = reason.range(of: "; fix: ") {
                given = String(reason[r.upperBound...])
                reason = String(reason[..<r.lowerBound])
            }
            let damaged = StateDatabase.isDamage(reason)
            let fix: String
            if let given {
                fix = given
            } else if damaged {
                // Permissions have nothing to do with a damaged file; its -wal and -shm go with it, and SQLite's
                // .recover may save the sessions it holds.
                fix = "sessions.sqlite there is damaged: move it aside with its -wal and -shm (cd \(stateDir) && for f in "
                    + "sessions.sqlite*; do mv \"$f\" \"damaged-$f\"; done) and a new one is made; `sqlite3 "
                    + "damaged-sessions.sqlite .recover | sqlite3 recovered.sqlite` may save its sessions"
            } else if reason.contains("full") {
                fix = "free some space on that disk, or choose another state directory with --state-dir or "
                    + "HR_GATEWAY_STATE_DIR"
            } else {
                fix = StateDatabase.directoryAdvice
            }
            // A damaged session database leaves the directory writable: sessions wait in their journals. A damaged
            // outbox keeps sessions recorded: only what it holds goes (it said journals, for a relay.sqlite).
            let consequence = damaged && reason.contains("sessions.sqlite")
                ? "sessions are recorded into journal files only, imported once the database is replaced"
                : damaged
                ? "sessions are recorded; what that outbox keeps (the relay's reliable events, MQTT or webhook "
                    + "deliveries) is not kept until it is replaced"
                : "sessions will not be recorded"
            checks.append(DoctorCheck("state directory", .warning, "\(stateDir): \(reason) (\(consequence))", fix: fix))
        } else {
            checks.append(DoctorCheck("state directory", .ok, "\(stateDir) \(stateDirNote ?? "writable")"))
        }
        if let lsl {
            checks.append(DoctorCheck(
                "Lab Streaming", .ok, "liblsl \(lsl.version / 100).\(lsl.version % 100) at \(lsl.path) (--lsl available)"))
        } else if let lslError {
            checks.append(DoctorCheck(
                "Lab Streaming", .warning, lslError,
                fix: lslFix ?? "pip install pylsl (its wheel carries liblsl), or set HR_GATEWAY_LIBLSL to liblsl.so's path"))
        }
        if mqttChecked {
            if let mqttError {
                checks.append(DoctorCheck(
                    "MQTT", .warning, "libmosquitto not found: --mqtt unavailable (\(mqttError.prefix(200)))",
                    fix: mqttFix ?? "sudo apt install libmosquitto1, or set HR_GATEWAY_LIBMOSQUITTO to libmosquitto.so.1's path"))
            } else {
                checks.append(DoctorCheck("MQTT", .ok, "libmosquitto loaded (--mqtt available)"))
            }
        }
        return checks
    }
}
