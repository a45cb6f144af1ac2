import Testing
import V4L2Capture

#if canImport(Glibc)
import Glibc
#endif

/// The first capture device on this machine, if any (none on CI; vivid or v4l2loopback in the VM lane).
private let firstCamera: String? = V4L2Camera.listDevices().first { probe in
    if case .success = probe.result { return true }
    return false
}?.path

@Suite struct RealSystemTests {
    @Test func missingNodeThroughLibv4l2() {
        let error = #expect(throws: V4L2Error.self) { try V4L2Camera.open("/dev/video-hr-gateway-missing") }
        #expect(error?.code == .noSuchDevice)
        #expect(error?.errno == ENOENT)
    }

    @Test func characterDeviceThatIsNotVideo() {
        let error = #expect(throws: V4L2Error.self) { try V4L2Camera.open("/dev/null") }
        #expect(error?.code == .notAVideoDevice)
    }

    @Test(.enabled(if: firstCamera != nil, "needs a /dev/video* capture device (vivid, v4l2loopback or a webcam)"))
    func capturesFramesFromARealDevice() async throws {
        let path = try #require(firstCamera)
        var config = CaptureConfiguration()
        var policy = ControlPolicy()
        policy.settleFrames = 5
        config.controls = policy
        config.frameBufferLimit = 64
        let camera = try V4L2Camera.open(path, configuration: config)
        let frames = try camera.startStreaming()
        var received: [CapturedFrame] = []
        for try await frame in frames {
            received.append(frame)
            if received.count == 20 { break }
        }
        await camera.stop()
        #expect(received.count == 20)
        for (previous, next) in zip(received, received.dropFirst()) {
            #expect(next.timestamp > previous.timestamp)
            #expect(next.sequence > previous.sequence)
        }
        for frame in received {
            #expect(frame.width == camera.format.width && frame.height == camera.format.height)
            if frame.bytesPerLine > 0 { #expect(frame.bytes.count >= frame.bytesPerLine * frame.height) }
        }
        #expect(await camera.controlLockReport() != nil)

        // The device was released: it opens and streams again.
        let again = try V4L2Camera.open(path, configuration: config)
        _ = try again.startStreaming()
        await again.stop()
    }
}
