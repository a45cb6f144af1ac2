import Foundation
import GatewayEngine
import Testing
import V4L2Capture
@testable import hr_gateway

private let webcam = CameraDevice(
    path: "/dev/video0",
    identity: DeviceIdentity(
        driver: "uvcvideo", card: "HD Webcam", busInfo: "usb-0000:00:14.0-2", version: "6.1.0",
        capabilities: [.videoCapture, .streaming]
    ),
    formats: [
        PixelFormatInfo(
            fourcc: .yuyv, description: "YUYV 4:2:2",
            sizes: [
                FrameSize(
                    width: 640, height: 480,
                    intervals: .discrete([FrameInterval(numerator: 1, denominator: 15), FrameInterval(numerator: 1, denominator: 30)])
                ),
                FrameSize(width: 1280, height: 720, intervals: nil),
            ]
        ),
        PixelFormatInfo(
            fourcc: .rgb24, description: "RGB3", isEmulated: true,
            sizes: [
                FrameSize(
                    width: 640, height: 480,
                    intervals: .stepwise(
                        minimum: FrameInterval(numerator: 1, denominator: 30),
                        maximum: FrameInterval(numerator: 1, denominator: 5),
                        step: FrameInterval(numerator: 1, denominator: 1_000_000)
                    )
                )
            ]
        ),
    ],
    controls: [
        ControlInfo(
            id: 0x009A_0901, name: "Auto Exposure", type: .menu, minimum: 0, maximum: 3, step: 1, defaultValue: 3,
            value: 3, flags: [], menu: [ControlMenuItem(index: 1, name: "Manual Mode"), ControlMenuItem(index: 3, name: "Aperture Priority Mode")]
        ),
        ControlInfo(
            id: 0x009A_0902, name: "Exposure Time, Absolute", type: .integer, minimum: 3, maximum: 2047, step: 1,
            defaultValue: 250, value: nil, flags: [.inactive]
        ),
    ]
)

private func containsNull(_ value: JSONValue) -> Bool {
    switch value {
    case .null: true
    case .array(let items): items.contains(where: containsNull)
    case .object(let members): members.values.contains(where: containsNull)
    default: false
    }
}

@Suite struct CamerasCommandRenderingTests {
    @Test func deviceJSONRoundTripsWithoutNulls() throws {
        let text = CamerasCommand.json(for: CameraProbe(path: webcam.path, result: .success(webcam))).jsonString
        #expect(!text.contains("\n"))
        let parsed = try JSONValue(parsing: text)
        #expect(!containsNull(parsed))
        #expect(parsed["path"]?.stringValue == "/dev/video0")
        #expect(parsed["driver"]?.stringValue == "uvcvideo")
        #expect(parsed["card"]?.stringValue == "HD Webcam")
        #expect(parsed["bus"]?.stringValue == "usb-0000:00:14.0-2")
        #expect(parsed["capabilities"]?.arrayValue?.compactMap(\.stringValue) == ["video-capture", "streaming"])

        let formats = try #require(parsed["formats"]?.arrayValue)
        #expect(formats.compactMap { $0["fourcc"]?.stringValue } == ["YUYV", "RGB3"])
        #expect(formats[1]["emulated"]?.boolValue == true)
        let yuyvSizes = try #require(formats[0]["sizes"]?.arrayValue)
        #expect(yuyvSizes[0]["fps"]?.arrayValue?.compactMap(\.doubleValue) == [30, 15])
        #expect(yuyvSizes[1]["fps"] == nil)
        let range = try #require(formats[1]["sizes"]?.arrayValue?.first?["fpsRange"])
        #expect(range["min"]?.doubleValue == 5 && range["max"]?.doubleValue == 30)

        let controls = try #require(parsed["controls"]?.arrayValue)
        #expect(controls[0]["menu"]?.arrayValue?.compactMap { $0["name"]?.stringValue } == ["Manual Mode", "Aperture Priority Mode"])
        #expect(controls[0]["value"]?.intValue == 3)
        #expect(controls[1]["value"] == nil, "an unreadable value is left out, never null")
        #expect(controls[1]["flags"]?.arrayValue?.compactMap(\.stringValue) == ["inactive"])
        #expect(controls[1]["default"]?.intValue == 250)
    }

    @Test func textListsFormatsSizesRatesAndControls() {
        let text = CamerasCommand.text(for: CameraProbe(path: webcam.path, result: .success(webcam)))
        #expect(text.hasPrefix("/dev/video0: HD Webcam (driver uvcvideo 6.1.0, bus usb-0000:00:14.0-2)"))
        #expect(text.contains("YUYV  YUYV 4:2:2"))
        #expect(text.contains("640x480: 30, 15 fps"))
        #expect(text.contains("1280x720: frame rate not listed by the driver"))
        #expect(text.contains("RGB3  RGB3 (converted by libv4l2)"))
        #expect(text.contains("640x480: 5 to 30 fps"))
        #expect(text.contains("Auto Exposure (menu): 0...3, default 3, value 3 {1: Manual Mode, 3: Aperture Priority Mode}"))
        #expect(text.contains("Exposure Time, Absolute (int): 3...2047, default 250 [inactive]"))
    }

    @Test func inaccessibleDeviceShowsTheErrorAndWhatToDo() throws {
        let locked = CameraProbe(
            path: "/dev/video2", result: .failure(V4L2Error(errno: EACCES, operation: "open", devicePath: "/dev/video2"))
        )
        let text = CamerasCommand.text(for: locked)
        #expect(text.hasPrefix("/dev/video2: cannot be opened (permission denied)"))
        #expect(text.contains("sudo usermod -aG video $USER"))
        let json = try JSONValue(parsing: CamerasCommand.json(for: locked).jsonString)
        #expect(json["error"]?["code"]?.stringValue == "permission denied")
        #expect(json["error"]?["errno"]?.intValue == Int64(EACCES))
        #expect(!containsNull(json))
    }

    @Test func captureStatsMeasureRateAndDrops() {
        var stats = CaptureStats()
        let times = [10.0, 10.0 + 1.0 / 30, 10.0 + 2.0 / 30, 10.0 + 5.0 / 30]
        var intervals: [Double?] = []
        for (i, t) in times.enumerated() {
            let frame = CapturedFrame(
                width: 8, height: 4, fourcc: .yuyv, bytesPerLine: 16, bytes: [], timestamp: t,
                timestampSource: .driver, sequence: UInt32([0, 1, 2, 5][i]), droppedFrames: i == 3 ? 2 : 0
            )
            intervals.append(stats.add(frame))
        }
        #expect(intervals[0] == nil)
        #expect(abs((intervals[3] ?? 0) - 3.0 / 30) < 1e-9)
        #expect(stats.dropped == 2)
        #expect(abs((stats.measuredFPS ?? 0) - 18) < 1e-9)  // 3 intervals over 5/30 s
        #expect(stats.summary(requested: 4).hasPrefix("Captured 4 of 4 frames in 0.167 s: 18.000 fps"))
        #expect(String(format3: 0.0005) == "0.001" && String(format6: -1.5) == "-1.500000")
    }
}

/// Runs the built `hr-gateway` next to the test bundle and returns (status, stdout, stderr).
private func runGateway(_ arguments: [String]) throws -> (Int32, String, String) {
    var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    var executable = directory.appendingPathComponent("hr-gateway")
    for _ in 0..<4 where !FileManager.default.isExecutableFile(atPath: executable.path) {
        directory = directory.deletingLastPathComponent()
        executable = directory.appendingPathComponent("hr-gateway")
    }
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    let (out, err) = (Pipe(), Pipe())
    process.standardOutput = out
    process.standardError = err
    process.standardInput = FileHandle.nullDevice
    try process.run()
    // Outputs here are a few hundred bytes, well under a pipe's buffer, so reading one after the other cannot block.
    let stdout = out.fileHandleForReading.readDataToEndOfFile()
    let stderr = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: stdout, as: UTF8.self), String(decoding: stderr, as: UTF8.self))
}

private let machineHasNoVideoNodes = !((try? FileManager.default.contentsOfDirectory(atPath: "/dev")) ?? [])
    .contains { $0.hasPrefix("video") }

@Suite struct CamerasCommandEndToEndTests {
    @Test(.enabled(if: machineHasNoVideoNodes, "needs a machine without /dev/video*"))
    func noCamerasGivesAHint() throws {
        let (status, stdout, _) = try runGateway(["cameras"])
        #expect(status == 0)
        #expect(stdout.hasPrefix("No cameras found"))
        #expect(stdout.contains("modprobe vivid"))
    }

    @Test(.enabled(if: machineHasNoVideoNodes, "needs a machine without /dev/video*"))
    func noCamerasAsJSONPrintsNoObjects() throws {
        let (status, stdout, stderr) = try runGateway(["cameras", "--json"])
        #expect(status == 0)
        #expect(stdout.isEmpty)
        #expect(stderr.contains("No cameras found"))
    }

    @Test func captureFromAMissingNodeFailsWithAdvice() throws {
        let (status, stdout, stderr) = try runGateway(["cameras", "--capture", "/dev/video-does-not-exist", "--json"])
        #expect(status == 1)
        let line = try JSONValue(parsing: stdout.split(separator: "\n").first.map(String.init) ?? "")
        #expect(line["type"]?.stringValue == "error")
        #expect(line["error"]?["code"]?.stringValue == "no such device")
        #expect(stderr.contains("hr-gateway cameras"))
    }

    @Test func invalidOptionsAreRejected() throws {
        let (status, _, stderr) = try runGateway(["cameras", "--mains", "55"])
        #expect(status == 64)
        #expect(stderr.contains("--mains must be 50, 60 or 0"))
    }
}
