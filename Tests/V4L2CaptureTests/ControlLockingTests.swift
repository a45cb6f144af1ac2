import CV4L2
import Testing
@testable import V4L2Capture
import V4L2TestSupport

#if canImport(Glibc)
import Glibc
#endif

private func settle(after frames: Int, mains: PowerLineFrequency? = .fiftyHertz) -> CaptureConfiguration {
    var config = CaptureConfiguration()
    var policy = ControlPolicy()
    policy.settleFrames = frames
    policy.powerLineFrequency = mains
    config.controls = policy
    config.frameBufferLimit = 16
    return config
}

@Suite struct ControlLockingTests {
    @Test func locksAfterTheSettleFramesAndReportsWhatCouldNotBeLocked() async throws {
        var controls = FakeV4L2.Control.webcam
        controls[controls.firstIndex { $0.id == CV4L2_CID_EXPOSURE_AUTO_PRIORITY }!].flags = UInt32(V4L2_CTRL_FLAG_READ_ONLY)
        let fake = FakeV4L2(nodes: ["/dev/video0": .tiny(controls: controls)])
        let camera = try V4L2Camera.open("/dev/video0", configuration: settle(after: 3), system: fake)
        let frames = try camera.startStreaming()
        fake.deliver((0..<5).map { FakeV4L2.Frame.numbered($0) })
        var received: [CapturedFrame] = []
        for try await frame in frames {
            received.append(frame)
            if received.count == 5 { break }
        }
        let report = try #require(await camera.controlLockReport())
        await camera.stop()

        #expect(report.afterFrames == 3)
        let outcomes = Dictionary(uniqueKeysWithValues: report.entries.map { ($0.control, $0.outcome) })
        #expect(outcomes["power line frequency"] == .locked(detail: "50 Hz"))
        #expect(outcomes["auto exposure"] == .locked(detail: "manual, exposure 156"))
        #expect(outcomes["exposure priority"] == .notAllowed(reason: "read-only"))
        #expect(outcomes["auto white balance"] == .locked(detail: "off, 4650 K"))
        #expect(outcomes["auto gain"] == .unsupported)
        #expect(report.locked.count == 3 && report.notLocked.count == 2)

        #expect(fake.value(of: CV4L2_CID_EXPOSURE_AUTO) == 1)
        #expect(fake.value(of: CV4L2_CID_AUTO_WHITE_BALANCE) == 0)
        #expect(fake.value(of: CV4L2_CID_POWER_LINE_FREQUENCY) == 1)
        #expect(fake.value(of: CV4L2_CID_EXPOSURE_AUTO_PRIORITY) == 1)

        // Mains frequency before streaming; the locks only after the third frame was dequeued.
        let calls = fake.calls
        let streamOn = try #require(calls.firstIndex(of: "VIDIOC_STREAMON"))
        let setControls = calls.indices.filter { calls[$0] == "VIDIOC_S_CTRL" }
        let thirdDequeue = calls.indices.filter { calls[$0] == "VIDIOC_DQBUF" }[2]
        #expect(setControls.first! < streamOn)
        #expect(setControls.dropFirst().allSatisfy { $0 > thirdDequeue })
        let firstWrite = try #require(fake.controlWrites.first)
        #expect(firstWrite.id == CV4L2_CID_POWER_LINE_FREQUENCY && firstWrite.value == 1)

        #expect(received.map(\.controlsLocked) == [false, false, false, true, true])
    }

    @Test func sixtyHertzMains() async throws {
        let fake = FakeV4L2(nodes: ["/dev/video0": .tiny(controls: FakeV4L2.Control.webcam)])
        let camera = try V4L2Camera.open("/dev/video0", configuration: settle(after: 0, mains: .sixtyHertz), system: fake)
        _ = try camera.startStreaming()
        let report = try #require(await camera.controlLockReport())
        await camera.stop()
        #expect(report.afterFrames == 0)
        #expect(report.entries.first?.outcome == .locked(detail: "60 Hz"))
        #expect(fake.value(of: CV4L2_CID_POWER_LINE_FREQUENCY) == 2)
    }

    @Test func driverRefusalIsReportedWithItsError() async throws {
        let fake = FakeV4L2(nodes: ["/dev/video0": .tiny(controls: FakeV4L2.Control.webcam)])
        let camera = try V4L2Camera.open("/dev/video0", configuration: settle(after: 0, mains: nil), system: fake)
        fake.inject(.init(operation: "VIDIOC_S_CTRL", errno: EBUSY))
        _ = try camera.startStreaming()
        let report = try #require(await camera.controlLockReport())
        await camera.stop()
        guard case .failed(let error) = report.entries.first(where: { $0.control == "auto exposure" })?.outcome else {
            Issue.record("auto exposure should have failed: \(report)")
            return
        }
        #expect(error.code == .busy && error.operation == "VIDIOC_S_CTRL")
        #expect(report.description.contains("auto exposure: failed (EBUSY"))
    }

    @Test func menuWithoutManualModeCannotBeLocked() async throws {
        var controls = FakeV4L2.Control.webcam
        controls[controls.firstIndex { $0.id == CV4L2_CID_EXPOSURE_AUTO }!].menu = [0: "Auto Mode", 3: "Aperture Priority Mode"]
        let fake = FakeV4L2(nodes: ["/dev/video0": .tiny(controls: controls)])
        let camera = try V4L2Camera.open("/dev/video0", configuration: settle(after: 0, mains: nil), system: fake)
        _ = try camera.startStreaming()
        let report = try #require(await camera.controlLockReport())
        await camera.stop()
        guard case .notAllowed(let reason) = report.entries.first(where: { $0.control == "auto exposure" })?.outcome else {
            Issue.record("expected notAllowed: \(report)")
            return
        }
        #expect(reason.contains("not offered"))
        #expect(fake.value(of: CV4L2_CID_EXPOSURE_AUTO) == 3)
    }

    @Test func captureEndingBeforeSettlingGivesNoReport() async throws {
        let fake = FakeV4L2(nodes: ["/dev/video0": .tiny(controls: FakeV4L2.Control.webcam)])
        let camera = try V4L2Camera.open("/dev/video0", configuration: settle(after: 100), system: fake)
        _ = try camera.startStreaming()
        await camera.stop()
        #expect(await camera.controlLockReport() == nil)
        #expect(fake.value(of: CV4L2_CID_EXPOSURE_AUTO) == 3)
    }

    @Test func noPolicyTouchesNoControl() async throws {
        let fake = FakeV4L2(nodes: ["/dev/video0": .tiny(controls: FakeV4L2.Control.webcam)])
        var config = CaptureConfiguration()
        config.controls = nil
        let camera = try V4L2Camera.open("/dev/video0", configuration: config, system: fake)
        let frames = try camera.startStreaming()
        fake.deliver([.numbered(0)])
        var iterator = frames.makeAsyncIterator()
        _ = try await iterator.next()
        await camera.stop()
        #expect(fake.controlWrites.isEmpty)
        #expect(await camera.controlLockReport() == nil)
    }
}
