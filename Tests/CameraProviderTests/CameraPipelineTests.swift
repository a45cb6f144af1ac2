import FaceDetection
import GatewayEngine
import RPPG
import RPPGSynthetic
import Testing
import V4L2Capture

@testable import CameraProvider

#if canImport(Glibc)
import Glibc
#endif

/// The per-frame logic on its own: captured frames in, samples and status changes out.
@Suite struct CameraPipelineTests {
    private func captured(_ frame: VideoFrame, sequence: Int) -> CapturedFrame {
        CapturedFrame(
            width: frame.width, height: frame.height, fourcc: .yuyv, bytesPerLine: frame.width * 2, bytes: frame.bytes,
            timestamp: 50 + frame.timestampSeconds, timestampSource: .driver, sequence: UInt32(sequence)
        )
    }

    private func run(
        _ video: SyntheticFaceVideo, sceneless: Bool = false, skinWall: Bool = false,
        detector: (any FaceDetector)? = nil
    ) throws -> [CameraPipeline.Output] {
        var pipeline = CameraPipeline(devicePath: "/dev/video3", estimator: try RPPGEstimator(faceDetector: detector))
        var out: [CameraPipeline.Output] = []
        for (i, frame) in video.frames(format: .yuyv).enumerated() {
            var c = captured(frame, sequence: i)
            // A grey picture: no skin anywhere.
            if sceneless { c.bytes = [UInt8](repeating: 128, count: c.bytes.count) }
            // A flat skin-coloured wall and no face (Y 150, Cb 110, Cr 150 passes the skin test).
            if skinWall { c.bytes = (0..<c.bytes.count).map { [150, 110, 150, 150][$0 % 4] } }
            out += pipeline.process(c, receivedAtMs: { 1_000_000 })
        }
        return out
    }

    private func messages(_ out: [CameraPipeline.Output]) -> [String] {
        out.compactMap { if case .status(let s) = $0 { s.message } else { nil } }
    }

    private func samples(_ out: [CameraPipeline.Output]) -> [BiosignalSample] {
        out.compactMap { if case .sample(let s) = $0 { s } else { nil } }
    }

    @Test func noFaceIsReportedOnceWithoutANumber() throws {
        let out = try run(faceVideo(heartRate: 72, seconds: 3), sceneless: true)
        #expect(samples(out).isEmpty)
        #expect(messages(out) == [SignalQuality.noFace.message])
        #expect(out.allSatisfy { if case .status(let s) = $0 { s.state == .streaming && s.deviceId == "/dev/video3" } else { false } })
    }

    @Test func pulseFreeVideoGivesLowConfidenceAndNoSample() throws {
        let out = try run(faceVideo(heartRate: nil, seconds: 7))
        #expect(samples(out).isEmpty)
        #expect(messages(out) == [SignalQuality.lowConfidence.message])
    }

    @Test func samplesCarryPulseConfidenceAndFrameTimes() throws {
        let out = try run(faceVideo(heartRate: 90, seconds: 8))
        let s = samples(out)
        #expect(s.count >= 2)
        for sample in s {
            #expect(abs(sample.bpm - 90) < 3)
            #expect(sample.source == "camera_rppg" && sample.deviceId == "/dev/video3")
            #expect((sample.confidence ?? 0) >= 0.5)
            // First frame at 50 s mapped to 1 000 000 ms; estimates on whole seconds after it.
            #expect((sample.timestampMs - 1_000_000) % 1000 == 0 && sample.timestampMs >= 1_005_000)
        }
        #expect(messages(out) == [SignalQuality.measuring.message])
    }

    @Test func skinColouredWallWithoutAFaceIsNoFaceForTheDetector() throws {
        let out = try run(faceVideo(heartRate: 72, seconds: 3), skinWall: true, detector: try CascadeFaceDetector())
        #expect(samples(out).isEmpty)
        #expect(messages(out) == [SignalQuality.noFace.message])
        #expect(SignalQuality.noFace.message.hasPrefix("No face in view"))
    }

    @Test func aHeadThatKeepsMovingIsAskedToHoldStill() throws {
        var v = SyntheticFaceVideo()
        v.width = 320
        v.height = 240
        v.durationSeconds = 4
        v.faceStyle = .detailed
        v.faceScale = 0.8
        // Up to 23 px (about a quarter of the face box) between detections 0.2 s apart, at least 14 px.
        v.swayPixels = 20
        v.swayHz = 1
        let out = try run(v, detector: try CascadeFaceDetector())
        #expect(messages(out).contains(SignalQuality.holdStill.message), "\(messages(out))")
        #expect(SignalQuality.holdStill.message.hasPrefix("Hold still"))
        #expect(SignalQuality.tooDark.message.hasPrefix("Too dark: add light in front of you"))
    }

    @Test func tallyNamesTheMostFrequentFailureOnlyWhenMostFramesFail() {
        var tally = ROITally()
        for _ in 0..<5 { tally.count(.ok) }
        for _ in 0..<4 { tally.count(.tooDark) }
        #expect(tally.dominantFailure == nil)
        for _ in 0..<3 { tally.count(.noFace) }
        #expect(tally.dominantFailure == .tooDark)
    }

    @Test func lockReportNamesWhatCouldNotBeLocked() {
        let report = ControlLockReport(entries: [
            .init(control: "auto exposure", id: 1, outcome: .locked(detail: "manual, exposure 156")),
            .init(control: "auto gain", id: 2, outcome: .unsupported),
            .init(control: "exposure priority", id: 3, outcome: .notAllowed(reason: "read-only")),
            .init(control: "auto white balance", id: 4, outcome: .failed(
                V4L2Error(errno: EIO, operation: "VIDIOC_S_CTRL", devicePath: "/dev/video3"))),
        ], afterFrames: 60)
        #expect(report.statusMessage.hasPrefix(
            "Camera controls after 60 frames: locked auto exposure (manual, exposure 156); not offered by the driver: "
                + "auto gain; could not lock exposure priority (read-only), auto white balance (EIO, "))
        #expect(report.statusMessage.contains("slow drifts"))
        let nothingToLock = ControlLockReport(entries: [report.entries[1]], afterFrames: 10)
        #expect(nothingToLock.statusMessage
            == "Camera controls after 10 frames: nothing locked; not offered by the driver: auto gain.")
    }

    /// Every other frame of a 30 fps video: a camera slowed to 15 fps in dim light (frames numbered one after the
    /// other), or frames lost before the estimator (a gap of one in the driver's numbers each time). Said once,
    /// after 5 s, when the driver reports 30 fps; nothing said when it reports 15. The pulse stays right.
    @Test func aPaceWellBelowTheDriversRateIsSaidOnceWithItsCause() throws {
        let video = faceVideo(heartRate: 90, seconds: 10)
        #expect(video.framesPerSecond == 30)
        let cases: [(reported: Double, gaps: Bool, said: String?)] = [
            (30, false, "The camera delivers 15.0 fps, not the 30.0 fps its driver reports: webcams slow down in dim "
                + "light (longer exposure), so add steady light in front of you. Pulse readings use each frame's own "
                + "time, so they stay right."),
            (30, true, "Only 15.0 of the camera's 30.0 fps reach the pulse estimator (75 frames skipped in 5.0 s): "
                + "the CPU is too busy for this mode; choose a smaller one (--camera-width, --camera-height). Pulse "
                + "readings use each frame's own time, so they stay right."),
            (15, false, nil),
        ]
        for (reported, gaps, said) in cases {
            var pipeline = CameraPipeline(
                devicePath: "/dev/video3", estimator: try RPPGEstimator(), framesPerSecond: reported
            )
            var out: [CameraPipeline.Output] = []
            var paceSaidAt: Double?
            for (i, frame) in video.frames(format: .yuyv).enumerated() where i % 2 == 0 {
                var c = captured(frame, sequence: gaps ? i : i / 2)
                c.droppedFrames = gaps && i > 0 ? 1 : 0
                let step = pipeline.process(c, receivedAtMs: { 1_000_000 })
                if paceSaidAt == nil, !pace(step).isEmpty { paceSaidAt = frame.timestampSeconds }
                out += step
            }
            #expect(pace(out) == (said.map { [$0] } ?? []))
            if said != nil { #expect(paceSaidAt.map { abs($0 - FramePace.span) < 0.1 } == true) }
            let bpm = samples(out).map(\.bpm)
            #expect(!bpm.isEmpty && bpm.allSatisfy { abs($0 - 90) < 3 })
        }
    }

    private func pace(_ out: [CameraPipeline.Output]) -> [String] {
        messages(out).filter { $0.hasPrefix("The camera delivers") || $0.hasPrefix("Only ") }
    }

    @Test func aPaceTooSlowForAPulseIsSaidEvenWithoutADriverRate() {
        #expect(FramePace.message(received: 29.5, delivered: 29.5, reported: 30, skipped: 0, seconds: 5) == nil)
        #expect(FramePace.message(received: 12, delivered: 12, reported: nil, skipped: 0, seconds: 5) == nil)
        var pace = FramePace(reported: nil)
        var said: [String] = []
        for i in 0...60 {  // 6 fps for 10 s
            if let m = pace.count(timestamp: 100 + Double(i) / 6, skipped: 0) { said.append(m) }
        }
        #expect(said == ["The camera delivers 6.0 fps. Below 8.0 fps a pulse cannot be read reliably."])
    }
}
