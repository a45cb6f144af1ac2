import GatewayEngine
import RPPG
import RPPGSynthetic
import Testing
import V4L2Capture
import V4L2TestSupport

@testable import CameraProvider

#if canImport(Glibc)
import Glibc
#endif

private let stopSequence = ["VIDIOC_STREAMOFF", "munmap", "munmap", "munmap", "munmap", "VIDIOC_REQBUFS", "close"]

private func session(_ id: String) -> SessionConfig {
    SessionConfig(sessionId: id, mode: .focus, durationSec: 600, profile: ComputeProfile(windowSec: 60, emitIntervalSec: 30))
}

@Suite struct CameraRPPGProviderTests {
    @Test func cameraPulseGoesUnderTheCameraKeysWhileTheStrapKeepsHrMean() async throws {
        let truth = 72.0
        let fake = FakeV4L2(nodes: ["/dev/video0": cameraNode(width: 160, height: 120)])
        let clock = ManualSessionClock()
        let startMs = clock.nowMs()
        let camera = CameraRPPGProvider(
            // The fake runs dry once its frames are read; a long timeout keeps that from reading as an unplug
            // while a loaded machine is still estimating.
            devicePath: "/dev/video0", capture: captureConfiguration(width: 160, height: 120, frameTimeout: .seconds(600)),
            clock: clock, system: fake
        )
        let strap = StrapProvider()
        let probe = Probe()
        let engine = SessionEngine(providers: [strap, probe.tap(camera)], clock: clock)
        probe.observe(engine)
        _ = try await engine.startSession(session("cam-1"))

        fake.deliver(driverFrames(faceVideo(heartRate: truth, seconds: 12)))
        for i in 0..<12 {
            strap.send(BiosignalSample(timestampMs: startMs + Int64(i) * 1000, bpm: 60, rrIntervalsMs: [1000],
                                       deviceId: "AA:BB", source: "ble_hrm"))
        }
        // Five confident camera samples (readings start after a 5 s window), or the camera's error if none come.
        var cameraSamples: [BiosignalSample] = []
        while cameraSamples.count < 5 {
            let next = await probe.next { seen -> Result<BiosignalSample, CameraFailed>? in
                switch seen {
                case .sample(let s) where s.source == "camera_rppg": .success(s)
                case .event(.sensorStatus(_, _, let s)) where s.state == .error: .failure(CameraFailed(status: s))
                default: nil
                }
            }
            cameraSamples.append(try #require(next).get())
        }

        for s in cameraSamples {
            #expect(abs(s.bpm - truth) < 3, "camera \(s.bpm) bpm, truth \(truth)")
            #expect(s.deviceId == "/dev/video0")
            let confidence = try #require(s.confidence)
            #expect(confidence >= 0.5 && confidence <= 1)
            // Driver timestamps (one hop per second from the first frame) mapped onto the session clock.
            let offset = s.timestampMs - startMs
            #expect(offset % 1000 == 0 && (5_000...12_000).contains(offset), "offset \(offset) ms")
        }

        clock.advance(byMs: 30_000)
        let frame = try #require(probe.events.first { $0.type == "session_frame" })
        let m = try #require(frame.metrics)
        #expect(m.hrMeanBpm == 60, "hr_mean_bpm stays the strap's")
        let cameraHr = try #require(m.cameraHrBpm)
        #expect(abs(cameraHr - truth) < 3)
        #expect(m.cameraConfidence != nil)
        #expect((m.cameraSampleCount ?? 0) >= 5)
        let json = frame.jsonValue
        #expect(json["metrics"]?["camera_hr_bpm"]?.doubleValue == cameraHr)
        #expect(json["metrics"]?["hr_mean_bpm"]?.doubleValue == 60)

        try await engine.stopSession(sessionId: "cam-1")
        #expect(Array(fake.calls.suffix(stopSequence.count)) == stopSequence)
        #expect(fake.openDescriptors == 0)
        #expect(Set(fake.unmapped) == Set(fake.mapped))
        #expect(probe.events.last?.type == "session_summary")

        let statuses = probe.statuses.filter { $0.source == "camera_rppg" }
        #expect(statuses.first?.state == .streaming)
        #expect(statuses.first?.message?.contains("YUYV 160x120") == true)
        #expect(statuses.contains { $0.message == SignalQuality.measuring.message })
        // The webcam fake has no auto gain: the report after the settle frames says so, once.
        let reports = statuses.filter { $0.message?.hasPrefix("Camera controls after 30 frames") == true }
        #expect(reports.count == 1)
        #expect(reports.first?.message?.contains("not offered by the driver: auto gain") == true)
        #expect(reports.first?.message?.contains("auto exposure (manual, exposure 156)") == true)
        #expect(reports.first?.message?.contains("locked power line frequency (50 Hz)") == true)
        #expect(statuses.allSatisfy { $0.state != .error })
    }

    @Test(arguments: [
        (FakeV4L2.Node.failing(EBUSY), "/dev/video0", SessionErrorCode.sensorUnavailable, ["/dev/video0 is busy", "fuser"]),
        (FakeV4L2.Node.failing(EACCES), "/dev/video0", .permissionDenied,
         ["/dev/video0", "video group", "udev/70-hr-gateway-camera.rules"]),
        (FakeV4L2.Node(), "/dev/video7", .sensorUnavailable, ["No such device /dev/video7", "hr-gateway cameras"]),
    ])
    func unusableDeviceAtStartEndsTheSessionWithItsCode(
        node: FakeV4L2.Node, path: String, code: SessionErrorCode, phrases: [String]
    ) async throws {
        let fake = FakeV4L2(nodes: ["/dev/video0": node])
        let clock = ManualSessionClock()
        let strap = StrapProvider()
        let camera = CameraRPPGProvider(devicePath: path, clock: clock, system: fake)
        let probe = Probe()
        let engine = SessionEngine(providers: [strap, camera], clock: clock)
        probe.observe(engine)
        _ = try await engine.startSession(session("cam-2"))

        #expect(probe.events.map(\.type) == ["session_started", "session_error"])
        guard case .error(_, let gotCode, let message) = probe.events.last else {
            Issue.record("no session_error")
            return
        }
        #expect(gotCode == code)
        for phrase in phrases { #expect(message.contains(phrase), "\(message)") }
        #expect(probe.events.last?.jsonValue["error_code"] == .string(code.rawValue))
        #expect(strap.stops == 1, "the provider that did start is stopped")
        #expect(fake.openDescriptors == 0)
        #expect(engine.getStatus() == nil)
    }

    @Test func unpluggedMidSessionReportsAnErrorAndTheStrapCarriesOn() async throws {
        let fake = FakeV4L2(nodes: ["/dev/video0": cameraNode(width: 160, height: 120)])
        let clock = ManualSessionClock()
        let startMs = clock.nowMs()
        let camera = CameraRPPGProvider(
            devicePath: "/dev/video0", capture: captureConfiguration(width: 160, height: 120), clock: clock,
            system: fake
        )
        let strap = StrapProvider()
        let probe = Probe()
        let engine = SessionEngine(providers: [strap, camera], clock: clock)
        probe.observe(engine)
        _ = try await engine.startSession(session("cam-3"))

        let frames = driverFrames(faceVideo(heartRate: 72, seconds: 1))
        fake.inject(.init(operation: "VIDIOC_DQBUF", errno: ENODEV, skip: frames.count, times: 1000))
        fake.deliver(frames + frames.prefix(1).map { var f = $0; f.sequence = UInt32(frames.count); return f })
        let error = try #require(await probe.next { seen -> SensorStatus? in
            if case .event(.sensorStatus(_, _, let s)) = seen, s.state == .error { s } else { nil }
        })
        #expect(error.source == "camera_rppg")
        #expect(error.deviceId == "/dev/video0")
        #expect(error.errorCode == .sensorUnavailable)
        #expect(error.message?.contains("/dev/video0 went away") == true, "\(error.message ?? "")")
        #expect(error.message?.contains("ENODEV") == true)
        #expect(probe.events.last?.jsonValue["state"] == .string("error"))
        #expect(Array(fake.calls.suffix(stopSequence.count)) == stopSequence, "released before reporting")
        #expect(fake.openDescriptors == 0)

        for i in 0..<10 {
            strap.send(BiosignalSample(timestampMs: startMs + Int64(i) * 1000, bpm: 64, source: "ble_hrm"))
        }
        clock.advance(byMs: 30_000)
        // Events are delivered outside the engine's lock by whichever thread holds delivery (here possibly the
        // capture thread finishing its error report), so the frame is awaited rather than read back at once.
        let frame = try #require(await probe.next { seen -> SessionEvent? in
            if case .event(let e) = seen, e.type == "session_frame" { e } else { nil }
        })
        #expect(frame.type == "session_frame", "the session goes on")
        #expect(frame.metrics?.hrMeanBpm == 64)
        #expect(frame.metrics?.sampleCount == 10)
        #expect(frame.metrics?.cameraHrBpm == nil)

        try await engine.stopSession(sessionId: "cam-3")
        #expect(probe.events.last?.type == "session_summary")
        #expect(!probe.events.contains { $0.type == "session_error" })
    }

    @Test func stoppingBeforeAnyFrameReleasesTheDevice() async throws {
        let fake = FakeV4L2(nodes: ["/dev/video0": cameraNode(width: 160, height: 120)])
        let camera = CameraRPPGProvider(
            devicePath: "/dev/video0", capture: captureConfiguration(width: 160, height: 120),
            clock: ManualSessionClock(), system: fake
        )
        let statuses = Locked<[SensorStatus]>([])
        try await camera.startStreaming(into: ProviderSink(onSample: { _ in }, onStatus: { s in
            statuses.withLock { $0.append(s) }
        }))
        #expect(fake.calls.contains("VIDIOC_STREAMON"))
        await camera.stopStreaming()
        #expect(Array(fake.calls.suffix(stopSequence.count)) == stopSequence)
        #expect(fake.openDescriptors == 0)
        // Stopped: the last status is not `streaming` (a relay's or MQTT's retained state would keep it).
        #expect(statuses.withLock { $0.map(\.state) } == [.streaming, .disconnected])

        // The provider can stream again after a stop.
        try await camera.startStreaming(into: ProviderSink(onSample: { _ in }))
        await camera.stopStreaming()
        #expect(fake.openDescriptors == 0)
        #expect(fake.calls.filter { $0 == "open" }.count == 2)
    }

    @Test func availabilityFollowsTheDeviceNodes() async {
        let fake = FakeV4L2(nodes: ["/dev/video0": FakeV4L2.Node()])
        let present = CameraRPPGProvider(devicePath: "/dev/video0", clock: ManualSessionClock(), system: fake)
        let absent = CameraRPPGProvider(devicePath: "/dev/video9", clock: ManualSessionClock(), system: fake)
        #expect(await present.isAvailable)
        #expect(await !absent.isAvailable)
        #expect(present.name == "camera_rppg")
    }
}

struct CameraFailed: Error, CustomStringConvertible {
    let status: SensorStatus
    var description: String { "camera error before enough samples: \(status.message ?? "")" }
}

extension FakeV4L2.Node {
    static func failing(_ errno: CInt) -> Self {
        var node = Self()
        node.openErrno = errno
        return node
    }
}
