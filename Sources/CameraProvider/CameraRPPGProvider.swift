import FaceDetection
import Foundation
import GatewayEngine
import RPPG
import V4L2Capture

/// Pulse and breathing from a webcam: V4L2 capture into the rPPG estimator, as a session source.
///
/// ```swift
/// let camera = CameraRPPGProvider(devicePath: "/dev/video0")
/// let engine = SessionEngine(providers: [strap, camera])
/// ```
///
/// - `startStreaming` opens and negotiates the device, starts capture and reports `streaming`. A busy, missing or
///   inaccessible device throws a ``SessionError`` (`sensor_unavailable`, or `permission_denied` pointing to the
///   video group and `udev/70-hr-gateway-camera.rules`), so the session ends with that `session_error`.
/// - Frames are analysed on the provider's own task, never under the engine's lock. About once a second, when the
///   estimate is confident, a sample goes to the sink: source `camera_rppg`, device id the device path, `bpm`,
///   `confidence`, and `breathingRateBpm` once breathing is confident. Its time is the frame's driver timestamp
///   (CLOCK_MONOTONIC) mapped to epoch milliseconds with the session clock at the first frame.
/// - Faces are found by OpenCV's cascade detector (``CascadeFaceDetector``, 5 Hz on a downscaled grey frame, the
///   box held steady in between; see ``FaceROITracker``). A missing cascade file fails `startStreaming` with
///   `sensor_unavailable` naming the package to install (opencv-data).
/// - Status changes (state `streaming` with a message, sent only when it changes): no face in view, too dark (add
///   light in front of you), too bright, hold still (the face box keeps moving), no confident pulse, measuring
///   again, once the automatic controls are locked, what could and could not be locked, and, after 5 s, the
///   pace of the frames when it matters (``FramePace``).
/// - A device failing mid-session (unplugged: ENODEV) reports state `error` with `sensor_unavailable`; the camera is
///   released and the session goes on with its other providers.
public final class CameraRPPGProvider: BiosignalProvider {
    /// The sample and status source name (the engine's camera source).
    public static let source = SessionMetrics.cameraSource

    /// The V4L2 device node, e.g. `/dev/video0`.
    public let devicePath: String
    /// How to capture (size, rate, control locking).
    public let capture: CaptureConfiguration
    /// How to estimate (bands, windows, confidence threshold).
    public let rppg: RPPGConfiguration
    /// How faces are found.
    package let faceFinding: FaceFinding

    /// How the provider finds the face.
    package enum FaceFinding: Sendable {
        /// OpenCV's cascade detector with this cascade file (the public initialiser's choice).
        case cascade(path: String)
        /// A given detector; `nil` is the skin-blob search (for tests about the signal on synthetic video).
        case detector((any FaceDetector)?)
    }

    public var name: String { Self.source }

    private let clock: any SessionClock
    private let system: any V4L2System
    private let state = Locked(Phase.idle)

    private enum Phase {
        case idle
        case starting
        case running(camera: V4L2Camera, task: Task<Void, Never>)
    }

    public convenience init(
        devicePath: String,
        capture: CaptureConfiguration = CaptureConfiguration(),
        rppg: RPPGConfiguration = RPPGConfiguration(),
        faceCascadePath: String = CascadeFaceDetector.defaultCascadePath,
        clock: any SessionClock = SystemSessionClock()
    ) {
        self.init(devicePath: devicePath, capture: capture, rppg: rppg, faceFinding: .cascade(path: faceCascadePath),
                  clock: clock, system: LibV4L2System())
    }

    /// For tests: capture through another ``V4L2System`` (e.g. `FakeV4L2`).
    package init(
        devicePath: String,
        capture: CaptureConfiguration = CaptureConfiguration(),
        rppg: RPPGConfiguration = RPPGConfiguration(),
        faceFinding: FaceFinding = .detector(nil),
        clock: any SessionClock,
        system: any V4L2System
    ) {
        self.devicePath = devicePath
        self.capture = capture
        self.rppg = rppg
        self.faceFinding = faceFinding
        self.clock = clock
        self.system = system
    }

    /// Whether the device node is listed among the machine's video nodes.
    public var isAvailable: Bool {
        get async {
            let resolved = URL(fileURLWithPath: devicePath).resolvingSymlinksInPath().path
            return system.deviceNodes().contains { $0 == devicePath || $0 == resolved }
        }
    }

    public func startStreaming(into sink: ProviderSink) async throws {
        try state.withLock { phase throws(SessionError) in
            guard case .idle = phase else { throw .invalidState("The camera \(devicePath) is already streaming") }
            phase = .starting
        }
        do {
            try await start(into: sink)
        } catch {
            state.withLock { $0 = .idle }
            throw error
        }
    }

    private func start(into sink: ProviderSink) async throws(SessionError) {
        let detector: (any FaceDetector)?
        switch faceFinding {
        case .cascade(let path):
            do {
                detector = try CascadeFaceDetector(cascadePath: path)
            } catch {
                throw .sensorUnavailable("Camera pulse needs a face detector: \(error.description)")
            }
        case .detector(let given):
            detector = given
        }
        let estimator: RPPGEstimator
        do {
            estimator = try RPPGEstimator(configuration: rppg, faceDetector: detector)
        } catch {
            throw .invalidState("Camera pulse settings: \(error)")
        }
        let camera: V4L2Camera
        do {
            camera = try V4L2Camera.open(devicePath, configuration: capture, system: system)
        } catch {
            throw SessionError(error)
        }
        guard CameraPipeline.pixelFormat(of: camera.format.fourcc) != nil else {
            await camera.stop()
            throw .sensorUnavailable(
                "\(devicePath) delivers \(camera.format), which the pulse estimator cannot read. Use a camera or mode "
                    + "with YUYV, RGB24, YU12 or NV12 frames (`hr-gateway cameras` lists them)."
            )
        }
        let frames: CapturedFrames
        do {
            frames = try camera.startStreaming()
        } catch {
            await camera.stop()
            throw SessionError(error)
        }

        var pipeline = CameraPipeline(
            devicePath: devicePath, estimator: estimator, framesPerSecond: camera.format.framesPerSecond
        )
        let card = camera.identity.card.isEmpty ? "" : " (\(camera.identity.card))"
        sink.status(pipeline.status(
            .streaming, "Capturing \(camera.format) from \(devicePath)\(card); first pulse reading after about 6 s."
        ))
        let clock = self.clock
        let lockReportWanted = capture.controls != nil
        let task = Task.detached {
            var reportSent = !lockReportWanted
            do throws(V4L2Error) {
                for try await frame in frames {
                    for output in pipeline.process(frame, receivedAtMs: clock.nowMs) {
                        switch output {
                        case .sample(let sample): sink.send(sample)
                        case .status(let status): sink.status(status)
                        }
                    }
                    if !reportSent, frame.controlsLocked {
                        reportSent = true
                        if let report = await camera.controlLockReport() {
                            sink.status(pipeline.status(.streaming, report.statusMessage))
                        }
                    }
                }
                // Stopped: the last status is not `streaming` (the relay's and MQTT's retained state would keep it).
                sink.status(pipeline.status(.disconnected, "Capture stopped."))
            } catch {
                // The capture thread has already released the device.
                sink.status(pipeline.status(
                    .error, error.description + " The session goes on without the camera.",
                    errorCode: SessionError(error).code
                ))
            }
        }
        state.withLock { $0 = .running(camera: camera, task: task) }
    }

    /// Stops capture and releases the device (STREAMOFF, munmap, close); returns when that is done and no more
    /// samples will be sent.
    public func stopStreaming() async {
        let running = state.withLock { phase -> (V4L2Camera, Task<Void, Never>)? in
            guard case .running(let camera, let task) = phase else { return nil }
            phase = .idle
            return (camera, task)
        }
        guard let (camera, task) = running else { return }
        await camera.stop()
        task.cancel()
        await task.value
    }
}

extension SessionError {
    /// A capture failure as a session error: `permission_denied` for EACCES/EPERM, otherwise `sensor_unavailable`,
    /// with the capture error's explanation (which names the device and what to do).
    public init(_ error: V4L2Error) {
        self = error.code == .permissionDenied ? .permissionDenied(error.description) : .sensorUnavailable(error.description)
    }
}
