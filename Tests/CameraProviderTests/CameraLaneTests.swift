import Foundation
import GatewayEngine
import Testing
import V4L2Capture

@testable import CameraProvider

private let environment = ProcessInfo.processInfo.environment
private let inLane = environment["HR_GATEWAY_VM_LANE"] == "1"

private func laneDevice(_ name: String) throws -> String {
    try #require(environment[name].flatMap { $0.isEmpty ? nil : $0 }, "\(name) is not set by the lane")
}

/// Real V4L2 devices through the provider, in the qemu lane (`scripts/vm-lane`): vivid and a v4l2loopback camera
/// fed by ffmpeg. Skipped elsewhere.
@Suite(.enabled(if: inLane, "runs in the qemu lane (scripts/vm-lane) with vivid and v4l2loopback"), .serialized)
struct CameraLaneTests {
    private func start(_ path: String) async throws -> (SessionEngine, StrapProvider, Probe) {
        var capture = CaptureConfiguration()
        capture.width = 320
        capture.height = 240
        capture.minimumFramesPerSecond = 1
        capture.controls?.settleFrames = 10
        let strap = StrapProvider()
        let probe = Probe()
        let engine = SessionEngine(providers: [strap, CameraRPPGProvider(devicePath: path, capture: capture)])
        probe.observe(engine)
        _ = try await engine.startSession(
            SessionConfig(sessionId: "lane", mode: .focus, durationSec: 600,
                          profile: ComputeProfile(windowSec: 60, emitIntervalSec: 300)))
        #expect(probe.events.map(\.type) == ["session_started", "sensor_status"], "\(probe.events.map(\.jsonValue))")
        return (engine, strap, probe)
    }

    /// Waits for the camera's status after the start one (the lock report or a picture-quality change, both of which
    /// need frames); fails on an error status.
    private func awaitFramesFlowing(_ probe: Probe) async throws {
        var seen = 0
        while seen < 2 {
            let status = try #require(await probe.next { seen -> SensorStatus? in
                if case .event(.sensorStatus(_, _, let s)) = seen { s } else { nil }
            })
            #expect(status.state != .error, "\(status.message ?? "")")
            if status.state == .error { return }
            seen += 1
        }
    }

    @Test func loopbackCameraStreamsThroughTheEngineAndIsReleased() async throws {
        let path = try laneDevice("VM_LANE_LOOPBACK_DEVICE")
        let (engine, _, probe) = try await start(path)
        try await awaitFramesFlowing(probe)
        try await engine.stopSession(sessionId: "lane")
        #expect(probe.events.last?.type == "session_summary")
        let again = try V4L2Camera.open(path)
        await again.stop()
    }

    @Test func vividUnplugMidSessionReportsAnErrorAndTheSessionGoesOn() async throws {
        let path = try laneDevice("VM_LANE_VIVID_DEVICE")
        let (engine, strap, probe) = try await start(path)
        try await awaitFramesFlowing(probe)

        let unplug = Process()
        unplug.executableURL = URL(fileURLWithPath: "/usr/bin/v4l2-ctl")
        unplug.arguments = ["-d", path, "-c", "disconnect=1"]
        try unplug.run()
        unplug.waitUntilExit()
        #expect(unplug.terminationStatus == 0)

        let error = try #require(await probe.next { seen -> SensorStatus? in
            if case .event(.sensorStatus(_, _, let s)) = seen, s.state == .error { s } else { nil }
        })
        #expect(error.errorCode == .sensorUnavailable)
        #expect(error.message?.contains(path) == true, "\(error.message ?? "")")
        #expect(engine.getStatus()?.active == true, "the session goes on")

        strap.send(BiosignalSample(timestampMs: Int64(Date().timeIntervalSince1970 * 1000), bpm: 61, source: "ble_hrm"))
        try await engine.stopSession(sessionId: "lane")
        let summary = try #require(probe.events.last)
        #expect(summary.type == "session_summary")
        #expect(summary.metrics?.hrMeanBpm == 61)
        #expect(!probe.events.contains { $0.type == "session_error" })
    }
}
