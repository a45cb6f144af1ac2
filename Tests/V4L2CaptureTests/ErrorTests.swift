import CV4L2
import Testing
@testable import V4L2Capture
import V4L2TestSupport

#if canImport(Glibc)
import Glibc
#endif

private func noControls() -> CaptureConfiguration {
    var config = CaptureConfiguration()
    config.controls = nil
    return config
}

@Suite struct ErrorTests {
    @Test func busyOnOpen() throws {
        var node = FakeV4L2.Node.tiny()
        node.openErrno = EBUSY
        let fake = FakeV4L2(nodes: ["/dev/video0": node])
        let error = #expect(throws: V4L2Error.self) {
            try V4L2Camera.open("/dev/video0", configuration: noControls(), system: fake)
        }
        #expect(error?.code == .busy)
        #expect(error?.errno == EBUSY)
        #expect(error?.operation == "open")
        #expect(error?.devicePath == "/dev/video0")
        #expect(error?.description.contains("another application is using the camera") == true)
        #expect(error?.description.contains("EBUSY") == true)
    }

    @Test func permissionDeniedPointsToTheVideoGroupAndUdevRule() throws {
        var node = FakeV4L2.Node.tiny()
        node.openErrno = EACCES
        let fake = FakeV4L2(nodes: ["/dev/video0": node])
        let error = #expect(throws: V4L2Error.self) {
            try V4L2Camera.open("/dev/video0", configuration: noControls(), system: fake)
        }
        #expect(error?.code == .permissionDenied)
        let text = error?.description ?? ""
        #expect(text.contains("sudo usermod -aG video $USER"))
        #expect(text.contains("udev/70-hr-gateway-camera.rules"))
    }

    @Test func missingNodeIsNoSuchDevice() throws {
        let fake = FakeV4L2(nodes: [:])
        let error = #expect(throws: V4L2Error.self) {
            try V4L2Camera.open("/dev/video7", configuration: noControls(), system: fake)
        }
        #expect(error?.code == .noSuchDevice)
        #expect(error?.errno == ENOENT)
        #expect(error?.description.contains("hr-gateway cameras") == true)
    }

    @Test func enodevWhileOpeningIsNoSuchDeviceNotDeviceGone() throws {
        let fake = FakeV4L2(nodes: ["/dev/video0": .tiny()])
        fake.inject(.init(operation: "open", errno: ENODEV))
        let error = #expect(throws: V4L2Error.self) {
            try V4L2Camera.open("/dev/video0", configuration: noControls(), system: fake)
        }
        #expect(error?.code == .noSuchDevice)
    }

    @Test func busyWhileSettingTheFormatClosesTheDevice() throws {
        let fake = FakeV4L2(nodes: ["/dev/video0": .tiny()])
        fake.inject(.init(operation: "VIDIOC_S_FMT", errno: EBUSY))
        let error = #expect(throws: V4L2Error.self) {
            try V4L2Camera.open("/dev/video0", configuration: noControls(), system: fake)
        }
        #expect(error?.code == .busy)
        #expect(error?.operation == "VIDIOC_S_FMT")
        #expect(fake.calls.last == "close")
        #expect(fake.openDescriptors == 0)
    }

    @Test func busyWhenRequestingBuffersLeavesTheCameraStoppable() async throws {
        let fake = FakeV4L2(nodes: ["/dev/video0": .tiny()])
        let camera = try V4L2Camera.open("/dev/video0", configuration: noControls(), system: fake)
        fake.inject(.init(operation: "VIDIOC_REQBUFS", errno: EBUSY))
        let error = #expect(throws: V4L2Error.self) { try camera.startStreaming() }
        #expect(error?.code == .busy)
        #expect(error?.operation == "VIDIOC_REQBUFS")
        await camera.stop()
        #expect(fake.openDescriptors == 0)
    }

    @Test func failureInStreamOnUnmapsEverything() async throws {
        let fake = FakeV4L2(nodes: ["/dev/video0": .tiny()])
        let camera = try V4L2Camera.open("/dev/video0", configuration: noControls(), system: fake)
        fake.inject(.init(operation: "VIDIOC_STREAMON", errno: EIO))
        let error = #expect(throws: V4L2Error.self) { try camera.startStreaming() }
        #expect(error?.code == .ioError)
        #expect(fake.mapped.count == 4 && Set(fake.unmapped) == Set(fake.mapped))
        await camera.stop()
        #expect(fake.openDescriptors == 0)
    }

    @Test func nonV4L2NodeIsNotAVideoDevice() throws {
        let fake = FakeV4L2(nodes: ["/dev/video0": .tiny()])
        fake.inject(.init(operation: "VIDIOC_QUERYCAP", errno: ENOTTY))
        let error = #expect(throws: V4L2Error.self) {
            try V4L2Camera.open("/dev/video0", configuration: noControls(), system: fake)
        }
        #expect(error?.code == .notAVideoDevice)
        #expect(fake.openDescriptors == 0)
    }

    @Test func metadataNodeIsNotACaptureDevice() throws {
        var node = FakeV4L2.Node.tiny()
        node.capabilities = UInt32(V4L2_CAP_META_CAPTURE | V4L2_CAP_STREAMING)
        let fake = FakeV4L2(nodes: ["/dev/video1": node])
        let error = #expect(throws: V4L2Error.self) {
            try V4L2Camera.open("/dev/video1", configuration: noControls(), system: fake)
        }
        #expect(error?.code == .notACaptureDevice)
        #expect(error?.description.contains("metadata-capture") == true)
    }

    @Test func readOnlyDriverWithoutStreaming() throws {
        var node = FakeV4L2.Node.tiny()
        node.capabilities = UInt32(V4L2_CAP_VIDEO_CAPTURE | V4L2_CAP_READWRITE)
        let fake = FakeV4L2(nodes: ["/dev/video0": node])
        let error = #expect(throws: V4L2Error.self) {
            try V4L2Camera.open("/dev/video0", configuration: noControls(), system: fake)
        }
        #expect(error?.code == .streamingUnsupported)
    }

    @Test func cameraWithOnlyH264HasNoUsableFormat() throws {
        var node = FakeV4L2.Node.tiny()
        node.formats = [
            FakeV4L2.Format(
                fourcc: .h264, description: "H.264", flags: UInt32(V4L2_FMT_FLAG_COMPRESSED), sizes: [(640, 480, [(1, 30)])]
            )
        ]
        let fake = FakeV4L2(nodes: ["/dev/video0": node])
        let error = #expect(throws: V4L2Error.self) {
            try V4L2Camera.open("/dev/video0", configuration: noControls(), system: fake)
        }
        #expect(error?.code == .noUsableFormat)
        #expect(error?.description.contains("H264 (compressed)") == true)
    }

    @Test func unknownErrnoKeepsItsNumberAndText() {
        let error = V4L2Error(errno: ENOMEM, operation: "mmap", devicePath: "/dev/video0")
        #expect(error.code == .other)
        #expect(error.description.contains("ENOMEM"))
        #expect(error.description.hasPrefix("mmap failed on /dev/video0"))
    }
}

@Suite struct DeviceListingTests {
    /// `--camera auto`: the first node that can capture and be opened; none says why (each refusal, or no node).
    @Test func automaticIsTheFirstCameraThatOpens() {
        var metadata = FakeV4L2.Node.tiny()
        metadata.capabilities = UInt32(V4L2_CAP_META_CAPTURE | V4L2_CAP_STREAMING)
        var locked = FakeV4L2.Node.tiny()
        locked.openErrno = EACCES
        let three = FakeV4L2(nodes: ["/dev/video0": locked, "/dev/video1": metadata, "/dev/video2": FakeV4L2.Node()])
        #expect(V4L2Camera.automatic(system: three) == .success("/dev/video2"))
        #expect(three.openDescriptors == 0)

        let none = V4L2Camera.automatic(system: FakeV4L2(nodes: ["/dev/video0": locked, "/dev/video1": metadata]))
        guard case .failure(let refused) = none else {
            Issue.record("a locked node and a metadata node gave \(none)")
            return
        }
        #expect(refused.refused.map(\.code) == [.permissionDenied])
        #expect(refused.description.contains("/dev/video0") && refused.description.lowercased().contains("permission denied"), "\(refused)")

        guard case .failure(let empty) = V4L2Camera.automatic(system: FakeV4L2(nodes: [:])) else {
            Issue.record("no node gave a camera")
            return
        }
        #expect(empty.refused.isEmpty && empty.description.hasPrefix("no camera found"), "\(empty)")
    }

    @Test func listsOnlyCaptureDevicesAndKeepsInaccessibleOnes() throws {
        var webcam = FakeV4L2.Node()
        webcam.controls = FakeV4L2.Control.webcam
        var metadata = FakeV4L2.Node.tiny()
        metadata.capabilities = UInt32(V4L2_CAP_META_CAPTURE | V4L2_CAP_STREAMING)
        var locked = FakeV4L2.Node.tiny()
        locked.openErrno = EACCES
        let fake = FakeV4L2(nodes: ["/dev/video0": webcam, "/dev/video1": metadata, "/dev/video2": locked])

        let probes = V4L2Camera.listDevices(system: fake)
        #expect(probes.map(\.path) == ["/dev/video0", "/dev/video2"])
        #expect(fake.openDescriptors == 0)
        guard case .failure(let error) = probes[1].result else {
            Issue.record("expected /dev/video2 to fail")
            return
        }
        #expect(error.code == .permissionDenied)

        let device = try probes[0].result.get()
        #expect(device.identity.driver == "fakecam")
        #expect(device.identity.card == "Fake Camera")
        #expect(device.identity.busInfo == "usb-0000:00:14.0-1")
        #expect(device.identity.version == "6.1.0")
        #expect(device.identity.capabilities.names == ["video-capture", "streaming"])
        #expect(device.formats.map(\.fourcc) == [.yuyv, .mjpeg])
        #expect(device.formats[1].isCompressed)
        #expect(device.formats[0].sizes.map { "\($0.width)x\($0.height)" } == ["640x480", "320x240"])
        #expect(device.formats[0].sizes[0].intervals?.framesPerSecond == [30, 15])

        let exposure = try #require(device.controls.first { $0.id == CV4L2_CID_EXPOSURE_AUTO })
        #expect(exposure.type == .menu)
        #expect(exposure.menu.map(\.name) == ["Manual Mode", "Aperture Priority Mode"])
        #expect(exposure.value == 3)
        let brightness = try #require(device.controls.first { $0.id == CV4L2_CID_BRIGHTNESS })
        #expect((brightness.minimum, brightness.maximum, brightness.defaultValue, brightness.value) == (-64, 64, 0, 5))
        #expect(device.controls.count == FakeV4L2.Control.webcam.count)
        #expect(device.controls.map(\.id) == device.controls.map(\.id).sorted())
    }
}
