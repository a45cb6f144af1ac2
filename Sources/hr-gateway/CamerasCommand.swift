import ArgumentParser
import GatewayEngine
import StdoutSink
import V4L2Capture

#if canImport(Glibc)
import Glibc
#endif

struct CamerasCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cameras",
        abstract: "List the V4L2 cameras on this machine, or capture a few frames from one to check it works.",
        discussion: """
            Without options, every /dev/video* node that can capture video is listed with its driver, card name, \
            bus, pixel formats (fourcc and description), frame sizes, frame rates (fps) and controls (range, \
            default and current value). Formats marked "converted by libv4l2" are produced in software from the \
            camera's own format. Nodes that exist but cannot be opened (busy, permission denied) are listed with \
            the reason.

            With --capture, the camera is opened the way the gateway opens it for pulse measurement: YUYV 640x480 \
            at 30 fps if offered (no decoding), otherwise the closest mode, falling back to RGB24 converted by \
            libv4l2 from MJPEG or whatever the camera produces. One line per frame shows the timestamp (seconds on \
            the monotonic clock, from the driver), the interval to the previous frame (ms), the driver's sequence \
            number and the frames dropped before it. After --settle-frames frames, auto exposure, auto white \
            balance and auto gain are locked at their settled values; the power-line (anti-flicker) frequency is \
            set before streaming. What could and could not be locked is reported at the end.

            Examples:
              hr-gateway cameras
              hr-gateway cameras --json | jq .card
              hr-gateway cameras --capture /dev/video0 --frames 90
              hr-gateway cameras --capture /dev/video2 --frames 30 --mains 60 --json
              hr-gateway cameras --capture /dev/video0 --width 320 --height 240
              hr-gateway cameras --capture /dev/video0 --keep-auto-controls --timeout 10

            Permission denied? Add your user to the video group (sudo usermod -aG video $USER, then log in again) \
            or install udev/70-hr-gateway-camera.rules.
            """
    )

    @Flag(help: "Print JSON, one object per line: per device when listing; per frame and a summary with --capture.")
    var json = false

    @Option(name: .customLong("capture"), help: ArgumentHelp(
        "Capture from this device node, or auto for the first one that can capture video and be opened.", valueName: "device"))
    var capturePath: String?

    @Option(parsing: .unconditional, help: "With --capture: how many frames to capture.")
    var frames: Int = 30

    @Option(help: "With --capture: preferred frame width in pixels.")
    var width: UInt32 = 640

    @Option(help: "With --capture: preferred frame height in pixels.")
    var height: UInt32 = 480

    @Option(parsing: .unconditional, help: "With --capture: preferred frame rate in frames per second.")
    var fps: Double = 30

    @Option(
        name: .customLong("format"),
        help: ArgumentHelp(
            "With --capture: a pixel format to prefer, by fourcc; repeat for an order (default: YUYV then RGB3). "
                + "Add MJPG to receive compressed frames undecoded.",
            valueName: "fourcc"
        )
    )
    var formats: [String] = []

    @Option(parsing: .unconditional, help: "With --capture: mains frequency in Hz for the anti-flicker control: 50, 60, or 0 to leave it alone.")
    var mains: Int = 50

    @Option(parsing: .unconditional, help: "With --capture: frames to let auto exposure and white balance settle before they are locked.")
    var settleFrames: Int = 30

    @Flag(help: "With --capture: leave every camera control as it is (no locking, no power-line setting).")
    var keepAutoControls = false

    @Option(parsing: .unconditional, help: "With --capture: give up when no frame arrives for this many seconds.")
    var timeout: Double = 5

    func validate() throws {
        guard frames >= 1 else { throw ValidationError("--frames must be at least 1 (got \(frames)).") }
        if capturePath?.isEmpty == true { throw ValidationError("--capture needs a device path such as /dev/video0, or auto.") }
        if let capturePath, let meant = CameraOptions.meantAutomatic(capturePath, option: "--capture") { throw ValidationError(meant) }
        if let capturePath, let why = CameraOptions.notACamera(capturePath, option: "--capture") { throw ValidationError(why) }
        guard [0, 50, 60].contains(mains) else { throw ValidationError("--mains must be 50, 60 or 0 (got \(mains)).") }
        guard width > 0, height > 0 else { throw ValidationError("--width and --height must be positive.") }
        guard fps > 0, fps.isFinite else { throw ValidationError("--fps must be a positive number (got \(fps)).") }
        guard timeout > 0, timeout.isFinite else { throw ValidationError("--timeout must be positive seconds.") }
        guard settleFrames >= 0 else { throw ValidationError("--settle-frames must not be negative.") }
        for code in formats where FourCC(code) == nil {
            throw ValidationError("--format \(code): a fourcc is exactly four ASCII characters, e.g. YUYV, MJPG, RGB3.")
        }
    }

    func run() async throws {
        if let path = capturePath {
            try await capture(path)
        } else {
            list()
        }
    }

    // MARK: Listing

    private func list() {
        let probes = V4L2Camera.listDevices()
        if probes.isEmpty {
            if json {
                printError(Self.noCamerasMessage)
            } else {
                print(Self.noCamerasMessage)
            }
            return
        }
        for probe in probes {
            if json {
                print(Self.json(for: probe).jsonString)
            } else {
                print(Self.text(for: probe))
            }
        }
    }

    static let noCamerasMessage = """
        No cameras found (no /dev/video* node can capture video).
        Hint: plug in a USB webcam and check `ls -l /dev/video*` (nodes that cannot capture video, such as a \
        webcam's metadata node, are not listed; nodes this user may not open are listed with the reason). \
        In a VM without a camera, \
        load a test driver: `sudo modprobe vivid`, or `sudo modprobe v4l2loopback exclusive_caps=1` (a loopback node \
        shows up as a camera once a producer such as ffmpeg writes to it).
        """

    static func text(for probe: CameraProbe) -> String {
        switch probe.result {
        case .failure(let error):
            return "\(probe.path): cannot be opened (\(error.code))\n  \(error)"
        case .success(let device):
            let id = device.identity
            var lines = ["\(device.path): \(id.card) (driver \(id.driver) \(id.version), bus \(id.busInfo))"]
            lines.append("  capabilities: \(id.capabilities.names.joined(separator: ", "))")
            lines.append(device.formats.isEmpty ? "  formats: none listed" : "  formats:")
            for format in device.formats {
                var notes: [String] = []
                if format.isCompressed { notes.append("compressed") }
                if format.isEmulated { notes.append("converted by libv4l2") }
                let note = notes.isEmpty ? "" : " (\(notes.joined(separator: ", ")))"
                lines.append("    \(format.fourcc)  \(format.description)\(note)")
                if let range = format.sizeRange {
                    lines.append(
                        "      sizes \(range.minWidth)x\(range.minHeight) to \(range.maxWidth)x\(range.maxHeight), "
                            + "step \(range.stepWidth)x\(range.stepHeight); common sizes:"
                    )
                }
                for size in format.sizes {
                    lines.append("      \(size.width)x\(size.height): \(rates(size.intervals))")
                }
            }
            lines.append(device.controls.isEmpty ? "  controls: none" : "  controls:")
            for control in device.controls {
                var text = "    \(control.name) (\(control.type)): \(control.minimum)...\(control.maximum)"
                if control.step > 1 { text += " step \(control.step)" }
                text += ", default \(control.defaultValue)"
                if let value = control.value { text += ", value \(value)" }
                if !control.flags.names.isEmpty { text += " [\(control.flags.names.joined(separator: ", "))]" }
                if !control.menu.isEmpty {
                    text += " {" + control.menu.map { "\($0.index): \($0.name)" }.joined(separator: ", ") + "}"
                }
                lines.append(text)
            }
            return lines.joined(separator: "\n")
        }
    }

    private static func rates(_ intervals: FrameIntervals?) -> String {
        switch intervals {
        case nil:
            return "frame rate not listed by the driver"
        case .discrete(let list)?:
            return list.map(\.framesPerSecond).sorted(by: >).map(fpsText).joined(separator: ", ") + " fps"
        case .stepwise(let minimum, let maximum, _)?:
            return "\(fpsText(maximum.framesPerSecond)) to \(fpsText(minimum.framesPerSecond)) fps"
        }
    }

    static func fpsText(_ fps: Double) -> String {
        fps.rounded() == fps ? String(Int(fps)) : String((fps * 100).rounded() / 100)
    }

    static func json(for probe: CameraProbe) -> JSONValue {
        switch probe.result {
        case .failure(let error):
            return .object(["path": .string(probe.path), "error": json(for: error)])
        case .success(let device):
            return device.jsonValue
        }
    }

    static func json(for error: V4L2Error) -> JSONValue {
        .object([
            "code": .string("\(error.code)"), "errno": .int(Int64(error.errno)), "operation": .string(error.operation),
            "message": .string(error.description),
        ])
    }

    // MARK: Capture

    private func captureConfiguration() -> CaptureConfiguration {
        var config = CaptureConfiguration()
        config.width = width
        config.height = height
        config.framesPerSecond = fps
        config.minimumFramesPerSecond = min(config.minimumFramesPerSecond, fps)
        if !formats.isEmpty { config.formatPreference = formats.compactMap(FourCC.init) }
        config.frameTimeout = .milliseconds(Int64(timeout * 1000))
        config.frameBufferLimit = 8
        if keepAutoControls {
            config.controls = nil
        } else {
            var policy = ControlPolicy()
            policy.settleFrames = settleFrames
            policy.powerLineFrequency = switch mains {
            case 50: .fiftyHertz
            case 60: .sixtyHertz
            default: nil
            }
            config.controls = policy
        }
        return config
    }

    private func capture(_ given: String) async throws {
        let path = try CameraOptions.resolve(given, option: "--capture")
        let camera: V4L2Camera
        let stream: CapturedFrames
        do {
            camera = try V4L2Camera.open(path, configuration: captureConfiguration())
            stream = try camera.startStreaming()
        } catch {
            emitFailure(error)
            throw ExitCode.failure
        }
        if json {
            print(JSONValue.object([
                "type": .string("format"), "path": .string(path), "card": .string(camera.identity.card),
                "driver": .string(camera.identity.driver), "format": Self.json(for: camera.format),
            ]).jsonString)
        } else {
            print("Opened \(path): \(camera.identity.card) (driver \(camera.identity.driver))")
            print("Format: \(camera.format)")
        }

        var stats = CaptureStats()
        var failure: V4L2Error? = nil
        do {
            for try await frame in stream {
                let interval = stats.add(frame)
                if json {
                    print(Self.json(for: frame, index: stats.count, interval: interval).jsonString)
                } else {
                    print(Self.text(for: frame, index: stats.count, interval: interval))
                }
                if stats.count >= frames { break }
            }
        } catch {
            failure = error
        }
        await camera.stop()
        let report = await camera.controlLockReport()

        if json {
            if let report { print(Self.json(for: report).jsonString) }
            print(stats.json(requested: frames).jsonString)
        } else {
            if let report {
                print("Controls locked after \(report.afterFrames) frames:")
                for line in report.description.split(separator: "\n") { print("  \(line)") }
            } else if !keepAutoControls {
                print("Controls: not locked (capture ended before \(settleFrames) frames settled).")
            }
            print(stats.summary(requested: frames))
        }
        if let failure {
            emitFailure(failure)
            throw ExitCode.failure
        }
    }

    private func emitFailure(_ error: V4L2Error) {
        if json { print(JSONValue.object(["type": .string("error"), "error": Self.json(for: error)]).jsonString) }
        printError("Error: \(error)")
    }

    static func json(for format: NegotiatedFormat) -> JSONValue {
        var members: [String: JSONValue] = [
            "fourcc": .string(format.fourcc.description), "width": .int(Int64(format.width)),
            "height": .int(Int64(format.height)), "bytesPerLine": .int(Int64(format.bytesPerLine)),
            "sizeImage": .int(Int64(format.sizeImage)), "converted": .bool(format.isConverted),
        ]
        if let fps = format.framesPerSecond { members["fps"] = .double(fps) }
        return .object(members)
    }

    static func text(for frame: CapturedFrame, index: Int, interval: Double?) -> String {
        let dt = interval.map { String(format3: $0 * 1000) + " ms" } ?? "-"
        let source = frame.timestampSource == .driver ? "" : "  (dequeue time: driver gave no monotonic timestamp)"
        let locked = frame.controlsLocked ? "  locked" : ""
        return "frame \(index)  seq \(frame.sequence)  t=\(String(format6: frame.timestamp)) s  dt=\(dt)  "
            + "dropped \(frame.droppedFrames)  bytes \(frame.bytes.count)\(locked)\(source)"
    }

    static func json(for frame: CapturedFrame, index: Int, interval: Double?) -> JSONValue {
        var members: [String: JSONValue] = [
            "type": .string("frame"), "index": .int(Int64(index)), "sequence": .int(Int64(frame.sequence)),
            "timestamp": .double(frame.timestamp),
            "timestampSource": .string(frame.timestampSource == .driver ? "driver" : "dequeue"),
            "dropped": .int(Int64(frame.droppedFrames)), "bytes": .int(Int64(frame.bytes.count)),
            "controlsLocked": .bool(frame.controlsLocked),
        ]
        if let interval { members["intervalMs"] = .double(interval * 1000) }
        return .object(members)
    }

    static func json(for report: ControlLockReport) -> JSONValue {
        .object([
            "type": .string("controls"), "afterFrames": .int(Int64(report.afterFrames)),
            "entries": .array(report.entries.map { entry in
                var members: [String: JSONValue] = ["control": .string(entry.control), "id": .int(Int64(entry.id))]
                switch entry.outcome {
                case .locked(let detail):
                    members["outcome"] = .string("locked")
                    members["detail"] = .string(detail)
                case .unsupported:
                    members["outcome"] = .string("unsupported")
                case .notAllowed(let reason):
                    members["outcome"] = .string("not allowed")
                    members["detail"] = .string(reason)
                case .failed(let error):
                    members["outcome"] = .string("failed")
                    members["detail"] = .string(error.description)
                }
                return .object(members)
            }),
        ])
    }
}

/// Frame counts and timing of a `cameras --capture` run.
struct CaptureStats {
    var count = 0
    var dropped = 0
    var first: Double? = nil
    var last: Double? = nil
    var minInterval = Double.infinity
    var maxInterval = 0.0

    /// Adds a frame; returns the interval to the previous one in seconds.
    mutating func add(_ frame: CapturedFrame) -> Double? {
        count += 1
        dropped += frame.droppedFrames
        defer { last = frame.timestamp }
        if first == nil { first = frame.timestamp }
        guard let last else { return nil }
        let interval = frame.timestamp - last
        minInterval = min(minInterval, interval)
        maxInterval = max(maxInterval, interval)
        return interval
    }

    /// Frames per second from the timestamps of the first and last frame.
    var measuredFPS: Double? {
        guard let first, let last, count > 1, last > first else { return nil }
        return Double(count - 1) / (last - first)
    }

    func summary(requested: Int) -> String {
        guard count > 0 else { return "Captured no frames (\(requested) requested)." }
        var text = "Captured \(count) of \(requested) frames"
        if let first, let last { text += " in \(String(format3: last - first)) s" }
        if let fps = measuredFPS { text += ": \(String(format3: fps)) fps from timestamps" }
        if count > 1 {
            text += ", intervals \(String(format3: minInterval * 1000))...\(String(format3: maxInterval * 1000)) ms"
        }
        return text + ", \(dropped) dropped."
    }

    func json(requested: Int) -> JSONValue {
        var members: [String: JSONValue] = [
            "type": .string("summary"), "frames": .int(Int64(count)), "requested": .int(Int64(requested)),
            "dropped": .int(Int64(dropped)),
        ]
        if let fps = measuredFPS { members["fps"] = .double(fps) }
        if count > 1 {
            members["minIntervalMs"] = .double(minInterval * 1000)
            members["maxIntervalMs"] = .double(maxInterval * 1000)
        }
        return .object(members)
    }
}

extension CameraDevice {
    /// The device as one JSON object (no nulls: absent values are left out).
    var jsonValue: JSONValue {
        .object([
            "path": .string(path),
            "driver": .string(identity.driver),
            "card": .string(identity.card),
            "bus": .string(identity.busInfo),
            "version": .string(identity.version),
            "capabilities": .array(identity.capabilities.names.map(JSONValue.string)),
            "formats": .array(formats.map(\.jsonValue)),
            "controls": .array(controls.map(\.jsonValue)),
        ])
    }
}

extension PixelFormatInfo {
    var jsonValue: JSONValue {
        var members: [String: JSONValue] = [
            "fourcc": .string(fourcc.description),
            "description": .string(description),
            "compressed": .bool(isCompressed),
            "emulated": .bool(isEmulated),
            "sizes": .array(sizes.map { size in
                var entry: [String: JSONValue] = ["width": .int(Int64(size.width)), "height": .int(Int64(size.height))]
                switch size.intervals {
                case .discrete(let list)?:
                    entry["fps"] = .array(list.map(\.framesPerSecond).sorted(by: >).map(JSONValue.double))
                case .stepwise(let minimum, let maximum, _)?:
                    entry["fpsRange"] = .object([
                        "min": .double(maximum.framesPerSecond), "max": .double(minimum.framesPerSecond),
                    ])
                case nil:
                    break
                }
                return .object(entry)
            }),
        ]
        if let range = sizeRange {
            members["sizeRange"] = .object([
                "minWidth": .int(Int64(range.minWidth)), "maxWidth": .int(Int64(range.maxWidth)),
                "stepWidth": .int(Int64(range.stepWidth)), "minHeight": .int(Int64(range.minHeight)),
                "maxHeight": .int(Int64(range.maxHeight)), "stepHeight": .int(Int64(range.stepHeight)),
            ])
        }
        return .object(members)
    }
}

extension ControlInfo {
    var jsonValue: JSONValue {
        var members: [String: JSONValue] = [
            "id": .int(Int64(id)), "name": .string(name), "type": .string(type.description),
            "minimum": .int(Int64(minimum)), "maximum": .int(Int64(maximum)), "step": .int(Int64(step)),
            "default": .int(Int64(defaultValue)), "flags": .array(flags.names.map(JSONValue.string)),
        ]
        if let value { members["value"] = .int(Int64(value)) }
        if !menu.isEmpty {
            members["menu"] = .array(menu.map { .object(["index": .int(Int64($0.index)), "name": .string($0.name)]) })
        }
        return .object(members)
    }
}

private func printError(_ message: String) {
    StandardStream.error.write(message + "\n")
}

extension String {
    /// Fixed-point text with three decimals, without Foundation.
    init(format3 value: Double) { self = fixed(value, decimals: 3) }
    /// Fixed-point text with six decimals, without Foundation.
    init(format6 value: Double) { self = fixed(value, decimals: 6) }
}

private func fixed(_ value: Double, decimals: Int) -> String {
    guard value.isFinite else { return "-" }
    var scale = 1.0
    for _ in 0..<decimals { scale *= 10 }
    let scaled = (abs(value) * scale).rounded()
    let whole = Int64(scaled / scale)
    let fraction = Int64(scaled - Double(whole) * scale)
    var digits = String(fraction)
    while digits.count < decimals { digits = "0" + digits }
    return (value < 0 && scaled > 0 ? "-" : "") + "\(whole).\(digits)"
}
