import Foundation
import Testing

/// The face detector's OpenCV side is a library of its own (libHRGatewayOpenCV.so), opened when a camera needs it:
/// a session without a camera maps no OpenCV, and one with a camera finds the library beside the executable.
@Suite struct FaceDetectorLoadingTests {
    /// The libraries mapped by a running process.
    func mappedLibraries(_ pid: Int32) throws -> Set<String> {
        // /proc files have no size: read to the end rather than trust one read.
        let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/\(pid)/maps"))
        defer { try? handle.close() }
        let maps = String(decoding: try handle.readToEnd() ?? Data(), as: UTF8.self)
        return Set(maps.split(separator: "\n").compactMap { line in
            line.split(separator: " ", omittingEmptySubsequences: true).last.flatMap {
                $0.hasPrefix("/") ? String($0.split(separator: "/").last!) : nil
            }
        })
    }

    @Test func aSessionWithoutACameraMapsNoOpenCV() throws {
        let cli = try RunningCLI(["stream", "--simulate", "--format", "jsonl", "--no-record-db"])
        defer { cli.signal(SIGKILL) }
        #expect(cli.readLine()?.contains("\"session_started\"") == true)
        let libraries = try mappedLibraries(cli.process.processIdentifier)
        #expect(libraries.contains("libc.so.6"), "the maps were read: \(libraries.sorted())")
        #expect(!libraries.contains { $0.contains("opencv") || $0.contains("HRGatewayOpenCV") }, "\(libraries.sorted())")
    }

    @Test func theFaceDetectorLibraryIsFoundBesideTheExecutable() throws {
        let dir = CLI.executable.deletingLastPathComponent().path
        #expect(FileManager.default.fileExists(atPath: dir + "/libHRGatewayOpenCV.so"),
                "swift build --build-tests builds the HRGatewayOpenCV product beside hr-gateway")
        // doctor loads the default cascade through it (opencv-data is installed by scripts/test).
        let r = try CLI.run(["doctor"])
        #expect(r.stdout.split(separator: "\n").contains { $0.hasPrefix("ok    face detector") }, "\(r.stdout)")
    }
}
