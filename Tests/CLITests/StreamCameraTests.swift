import Foundation
import GatewayEngine
import Testing

@Suite struct StreamCameraTests {
    @Test func aMissingCameraFailsNamingTheDevice() throws {
        let r = try CLI.run(["stream", "--camera", "/dev/nonexistent", "--format", "jsonl", "--session-id", "cam-cli"])
        #expect(r.status != 0)
        #expect(r.stderr.contains("/dev/nonexistent"), "\(r.stderr)")
        #expect(r.stderr.contains("hr-gateway cameras"), "the message says what to do next")
        let events = try r.lines.map { try JSONValue(parsing: $0) }
        #expect(events.map { $0["type"]?.stringValue } == ["session_started", "session_error"])
        #expect(events.last?["error_code"] == .string("sensor_unavailable"))
        #expect(events.last?["message"]?.stringValue?.contains("/dev/nonexistent") == true)
    }

    /// `--camera auto` takes the first camera that opens and says which; on a machine without one it says so before
    /// any session starts (it was looked for as a device named "auto").
    @Test func cameraAutoTakesTheFirstCameraOrSaysThereIsNone() throws {
        let nodes = ((try? FileManager.default.contentsOfDirectory(atPath: "/dev")) ?? []).filter { $0.hasPrefix("video") }
        let r = try CLI.run(["stream", "--camera", "auto", "--duration", "2", "--format", "jsonl"])
        if nodes.isEmpty {
            #expect(r.status != 0)
            #expect(r.stderr.contains("--camera auto: no camera found") && r.stderr.contains("hr-gateway cameras"), "\(r.stderr)")
            #expect(r.stdout.isEmpty, "no session was started: \(r.stdout)")
        } else {
            #expect(r.stderr.contains("--camera auto: using /dev/video") || r.stderr.contains("--camera auto: no camera could be opened"),
                    "\(r.stderr)")
            #expect(!r.stderr.contains("No such device auto"), "\(r.stderr)")
        }
    }

    /// `cameras --capture auto` takes the camera `--camera auto` takes (it was looked for as a device named "auto").
    @Test func captureAutoTakesTheFirstCameraOrSaysThereIsNone() throws {
        let nodes = ((try? FileManager.default.contentsOfDirectory(atPath: "/dev")) ?? []).filter { $0.hasPrefix("video") }
        let r = try CLI.run(["cameras", "--capture", "auto", "--frames", "1", "--timeout", "5"])
        if nodes.isEmpty {
            #expect(r.status == 1)
            #expect(r.stderr.contains("--capture auto: no camera found") && r.stderr.contains("hr-gateway cameras"), "\(r.stderr)")
        } else {
            #expect(r.stderr.contains("--capture auto: using /dev/video") || r.stderr.contains("--capture auto: no camera could be opened"),
                    "\(r.stderr)")
        }
        #expect(!r.stderr.contains("No such device auto"), "\(r.stderr)")
        let empty = try CLI.run(["cameras", "--capture", ""])
        #expect(empty.status == 64 && empty.stderr.contains("--capture needs a device path"), "\(empty.stderr)")
        let shouted = try CLI.run(["cameras", "--capture", "Auto"])
        #expect(shouted.status == 64 && shouted.stderr.contains("--capture \"Auto\": did you mean auto"), "\(shouted.stderr)")
        let file = try CLI.run(["cameras", "--capture", "/etc/passwd"])
        #expect(file.status == 64 && file.stderr.contains("--capture /etc/passwd is a file, not a camera"), "\(file.stderr)")
    }

    @Test func aMissingCameraNextToASimulatedStrapStillEndsTheSession() throws {
        let r = try CLI.run(["stream", "--simulate", "--camera", "/dev/nonexistent", "--format", "jsonl"])
        #expect(r.status != 0)
        #expect(r.stderr.contains("/dev/nonexistent"))
        #expect(r.lines.last.map { $0.contains("\"session_error\"") } == true)
    }

    @Test(arguments: [
        (["--camera", "/dev/video0", "--camera-fps", "0"], "--camera-fps"),
        (["--camera", "/dev/video0", "--camera-width", "0"], "--camera-width"),
        (["--camera", "/dev/video0", "--mains", "55"], "--mains"),
        (["--camera", ""], "--camera needs a device path"),
        (["--camera", "AUTO"], "--camera \"AUTO\": did you mean auto"),
        // A recording given as a camera (the session started, then ended: "not a V4L2 video device").
        (["--camera", "/etc/passwd"], "--camera /etc/passwd is a file, not a camera: a recorded video is read by `hr-gateway analyze /etc/passwd`"),
        (["--camera", "/etc"], "--camera /etc is a directory, not a camera"),
    ])
    func badCameraSettingsAreRefusedBeforeOpening(arguments: [String], phrase: String) throws {
        let r = try CLI.run(["stream"] + arguments)
        #expect(r.status != 0)
        #expect(r.stderr.contains(phrase), "\(r.stderr)")
        #expect(r.stdout.isEmpty, "no session was started")
    }

    @Test func helpTeachesTheCameraSource() throws {
        let r = try CLI.run(["stream", "--help"])
        #expect(r.status == 0)
        for phrase in ["--camera <device>", "--camera-width", "--camera-height", "--camera-fps", "--mains",
                       "hr-gateway stream --camera /dev/video0", "camera_hr_bpm"] {
            #expect(r.stdout.contains(phrase), "\(phrase)")
        }
    }
}
