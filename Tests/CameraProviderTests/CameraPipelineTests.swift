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
}
