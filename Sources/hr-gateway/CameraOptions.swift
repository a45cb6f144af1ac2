import Foundation
import ArgumentParser
import CameraProvider
import FaceDetection
import GatewayConfig
import GatewayEngine
import RPPG
import StdoutSink
import V4L2Capture

/// The webcam source of `stream`: `--camera /dev/videoN` and how to capture from it.
struct CameraOptions: ParsableArguments {
    @Option(help: ArgumentHelp(
        """
        Webcam for camera pulse and breathing (rPPG): a V4L2 node such as /dev/video0 (`hr-gateway cameras` lists \
        them), or auto for the first one that can capture video and be opened. Readings appear once a second when \
        confident, under camera_hr_bpm, camera_confidence and breathing_rate_bpm; hr_mean_bpm stays the strap's \
        when a strap-like source runs too.
        """,
        valueName: "device"))
    var camera: String?

    @Option(help: ArgumentHelp(
        "Camera frame width in pixels (the closest size the camera offers is used). Default: the configuration's "
            + "camera.width, else 640.", valueName: "px"))
    var cameraWidth: UInt32?

    @Option(help: ArgumentHelp("Camera frame height in pixels. Default: camera.height, else 480.", valueName: "px"))
    var cameraHeight: UInt32?

    @Option(parsing: .unconditional, help: ArgumentHelp(
        "Camera frame rate in frames per second (25-30 recommended: below 25 the pulse is less reliable). Default: "
            + "camera.fps, else 30.",
        valueName: "fps"))
    var cameraFps: Double?

    @Option(help: ArgumentHelp(
        "Mains frequency in Hz for the camera's anti-flicker control: 50 (most of Europe, Asia, Africa, Oceania) or 60 (the Americas, Taiwan, parts of Japan). Default: camera.mains_hz, else 50.",
        valueName: "hz"))
    var mains: Mains?

    @Option(help: ArgumentHelp(
        "OpenCV face cascade file for the camera (Debian package opencv-data). Default: camera.face_cascade, else "
            + "\(CascadeFaceDetector.defaultCascadePath).", valueName: "xml"))
    var faceCascade: String?

    @Flag(help: ArgumentHelp(
        "Withhold camera pulse readings whose colour change does not look like blood's: fewer wrong readings from a "
            + "photo, a screen or heavily compressed video, and fewer readings (`hr-gateway analyze --help`, COLOUR "
            + "CHECK). Default: camera.colour_check, else off."))
    var colourCheck = false

    enum Mains: String, ExpressibleByArgument, CaseIterable {
        case fifty = "50"
        case sixty = "60"
    }

    /// The camera that stands for the first one found.
    static let automatic = "auto"

    /// What to say of a device name that was meant as `auto` ("AUTO", " auto"), else nil.
    static func meantAutomatic(_ device: String, option: String = "--camera") -> String? {
        guard device != automatic, device.trimmingCharacters(in: .whitespaces).lowercased() == automatic else { return nil }
        return "\(option) \"\(device)\": did you mean auto (the first camera that works)?"
    }

    /// What to say of a device that is a regular file (a recording given as a camera) or a directory, else nil: the
    /// session started and ended at once with "not a V4L2 video device".
    static func notACamera(_ device: String, option: String = "--camera") -> String? {
        var st = stat()
        guard device != automatic else { return nil }
        // A missing device is the session's error (exit status 1), as a camera unplugged before it opens is.
        guard stat(device, &st) == 0 else { return nil }
        if (st.st_mode & S_IFMT) == S_IFDIR {
            return "\(option) \(device) is a directory, not a camera: cameras are /dev/videoN nodes (`hr-gateway cameras` lists them)."
        }
        guard (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        let csv = device.lowercased().hasSuffix(".csv")
        return "\(option) \(device) is a file, not a camera: a recorded \(csv ? "trace" : "video") is read by `hr-gateway "
            + "analyze \(device)`; cameras are /dev/videoN nodes (`hr-gateway cameras` lists them)."
    }

    /// `auto` as the first camera that can be opened (said on standard error), any other device as given.
    static func resolve(_ device: String, option: String = "--camera") throws -> String {
        guard device == automatic else { return device }
        switch V4L2Camera.automatic() {
        case .success(let path):
            StandardStream.error.write(Data("note: \(option) auto: using \(path)\n".utf8))
            return path
        case .failure(let error):
            throw CommandFailure("\(option) auto: \(error).")
        }
    }

    func check() throws {
        if let camera, camera.isEmpty { throw ValidationError("--camera needs a device path such as /dev/video0, or auto.") }
        if let camera, let meant = Self.meantAutomatic(camera) { throw ValidationError(meant) }
        if let camera, let why = Self.notACamera(camera) { throw ValidationError(why) }
        if cameraWidth == 0 || cameraHeight == 0 {
            throw ValidationError("--camera-width and --camera-height must be positive numbers of pixels.")
        }
        if let cameraFps, !(cameraFps > 0 && cameraFps <= 240) {
            throw ValidationError("--camera-fps must be a frame rate above 0 and at most 240 (frames per second).")
        }
    }

    /// Takes the configuration's `[camera]` settings for the options not given (its device is a source: `SourceOptions.adopt`).
    mutating func adopt(_ settings: GatewayConfiguration) {
        cameraWidth = cameraWidth ?? settings.cameraWidth
        cameraHeight = cameraHeight ?? settings.cameraHeight
        cameraFps = cameraFps ?? settings.cameraFps
        mains = mains ?? (settings.cameraMainsHz == 60 ? .sixty : .fifty)
        faceCascade = faceCascade ?? settings.cameraFaceCascade
        colourCheck = colourCheck || settings.cameraColourCheck
    }

    /// The camera provider, or `nil` without `--camera`. `auto` is the first camera that can be opened, said on
    /// standard error; none is an error that says why.
    func provider(clock: any SessionClock) throws -> (any BiosignalProvider)? {
        guard let given = camera else { return nil }
        let camera = try Self.resolve(given)
        let defaults = GatewayConfiguration()
        var capture = CaptureConfiguration()
        capture.width = cameraWidth ?? defaults.cameraWidth
        capture.height = cameraHeight ?? defaults.cameraHeight
        capture.framesPerSecond = cameraFps ?? defaults.cameraFps
        capture.minimumFramesPerSecond = min(capture.minimumFramesPerSecond, capture.framesPerSecond)
        var controls = ControlPolicy()
        controls.powerLineFrequency = mains == .sixty ? .sixtyHertz : .fiftyHertz
        capture.controls = controls
        var rppg = RPPGConfiguration()
        if colourCheck { rppg.colourAngleToleranceDegrees = RPPGConfiguration.colourCheckToleranceDegrees }
        return CameraRPPGProvider(
            devicePath: camera, capture: capture, rppg: rppg,
            faceCascadePath: faceCascade ?? CascadeFaceDetector.defaultCascadePath, clock: clock)
    }
}
