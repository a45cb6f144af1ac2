import GatewayEngine
import RPPG
import RPPGSynthetic
import V4L2Capture
import V4L2TestSupport

/// A strap-like provider the test drives by hand.
final class StrapProvider: BiosignalProvider {
    private struct State {
        var sink: ProviderSink?
        var stops = 0
    }

    private let state = Locked(State())
    var name: String { "strap" }
    var isAvailable: Bool { true }

    func startStreaming(into sink: ProviderSink) async throws { state.withLock { $0.sink = sink } }
    func stopStreaming() async { state.withLock { $0.stops += 1 } }

    func send(_ sample: BiosignalSample) { state.withLock { $0.sink }?.send(sample) }
    var stops: Int { state.withLock { $0.stops } }
}

/// Everything the engine emits and every camera sample, in one ordered stream the test can await.
final class Probe: Sendable {
    enum Seen: Sendable {
        case event(SessionEvent)
        case sample(BiosignalSample)
    }

    private let continuation: AsyncStream<Seen>.Continuation
    private let stream: AsyncStream<Seen>
    private let seen = Locked<[Seen]>([])
    private let token = Locked<ObservationToken?>(nil)

    init() { (stream, continuation) = AsyncStream.makeStream(of: Seen.self) }

    /// `provider` with its samples recorded after the engine has taken them, so that an awaited sample is already
    /// in the session's window.
    func tap(_ provider: any BiosignalProvider) -> any BiosignalProvider { AfterEngineTap(base: provider, probe: self) }

    private struct AfterEngineTap: BiosignalProvider {
        let base: any BiosignalProvider
        let probe: Probe
        var name: String { base.name }
        var isAvailable: Bool { get async { await base.isAvailable } }

        func startStreaming(into sink: ProviderSink) async throws {
            let probe = probe
            try await base.startStreaming(into: ProviderSink(
                session: sink.session,
                onSample: { sample in
                    sink.send(sample)
                    probe.record(.sample(sample))
                },
                onStatus: { sink.status($0) }
            ))
        }

        func stopStreaming() async { await base.stopStreaming() }
    }

    func observe(_ engine: SessionEngine) {
        let t = engine.observe { [weak self] in self?.record(.event($0)) }
        token.withLock { $0 = t }
    }

    fileprivate func record(_ item: Seen) {
        seen.withLock { $0.append(item) }
        continuation.yield(item)
    }

    var events: [SessionEvent] {
        seen.withLock { $0.compactMap { if case .event(let e) = $0 { e } else { nil } } }
    }

    var samples: [BiosignalSample] {
        seen.withLock { $0.compactMap { if case .sample(let s) = $0 { s } else { nil } } }
    }

    var statuses: [SensorStatus] {
        events.compactMap { if case .sensorStatus(_, _, let s) = $0 { s } else { nil } }
    }

    /// Consumes, in order, what was seen and not yet consumed by an earlier call, until `match` accepts an item.
    func next<T>(_ match: (Seen) -> T?) async -> T? {
        for await item in stream { if let hit = match(item) { return hit } }
        return nil
    }
}

/// A camera node with one YUYV mode of the given size at 30 fps, and a typical webcam's controls.
func cameraNode(width: UInt32, height: UInt32) -> FakeV4L2.Node {
    var node = FakeV4L2.Node()
    node.formats = [.init(fourcc: .yuyv, description: "YUYV 4:2:2", sizes: [(width, height, [(1, 30)])])]
    node.controls = FakeV4L2.Control.webcam
    return node
}

/// Capture settings for tests: the node's size, every frame kept for the slow debug-build estimator, and a short
/// frame timeout so that a test waiting for samples that never come ends with an error status instead of hanging.
func captureConfiguration(
    width: UInt32, height: UInt32, settleFrames: Int = 30, frameTimeout: Duration = .seconds(3)
) -> CaptureConfiguration {
    var config = CaptureConfiguration()
    config.width = width
    config.height = height
    config.frameBufferLimit = 10_000
    config.frameTimeout = frameTimeout
    var policy = ControlPolicy()
    policy.settleFrames = settleFrames
    config.controls = policy
    return config
}

/// Driver frames of a synthetic face video; timestamps start at `startSeconds` on the monotonic clock.
func driverFrames(_ video: SyntheticFaceVideo, startSeconds: Double = 100) -> [FakeV4L2.Frame] {
    var frames: [FakeV4L2.Frame] = []
    for (i, frame) in video.frames(format: .yuyv).enumerated() {
        let micros = Int(((startSeconds + frame.timestampSeconds) * 1e6).rounded())
        frames.append(FakeV4L2.Frame(
            sequence: UInt32(i), bytes: frame.bytes, timestamp: (micros / 1_000_000, micros % 1_000_000)
        ))
    }
    return frames
}

func faceVideo(heartRate: Double?, seconds: Double, width: Int = 160, height: Int = 120) -> SyntheticFaceVideo {
    var video = SyntheticFaceVideo()
    video.width = width
    video.height = height
    video.durationSeconds = seconds
    video.heartRateBpm = heartRate
    video.breathingRateBpm = 15
    return video
}

extension SessionEvent {
    var metrics: SessionMetrics? {
        switch self {
        case .frame(_, _, _, let m, _), .summary(_, _, let m, _): m
        default: nil
        }
    }
}
