import Foundation
import Testing

@Suite struct InstallScriptTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    func install(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/bash")
        p.arguments = [Self.root + "/scripts/install"] + arguments
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        p.standardInput = FileHandle.nullDevice
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    func mode(_ path: String) throws -> Int {
        try #require(FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
    }

    @Test func stagingPutsEveryFileInPlaceAndKeepsAnEditedConfiguration() throws {
        let stage = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-install-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: stage) }
        let r = try install(["--destdir", stage, "--prefix", "/opt/hrg", "--binary", CLI.executable.path])
        #expect(r.status == 0, "\(r.output)")

        let binary = stage + "/opt/hrg/bin/hr-gateway"
        #expect(FileManager.default.isExecutableFile(atPath: binary))
        #expect(try mode(binary) == 0o755)
        // The face detector's library, where the installed binary looks for it (bin/../lib/hr-gateway/).
        #expect(FileManager.default.fileExists(atPath: stage + "/opt/hrg/lib/hr-gateway/libHRGatewayOpenCV.so"))
        let unit = try String(contentsOfFile: stage + "/etc/systemd/system/hr-gateway.service", encoding: .utf8)
        #expect(unit.contains("ExecStart=/opt/hrg/bin/hr-gateway stream $HR_GATEWAY_SOURCE --format events"))
        #expect(!unit.contains("/usr/local/bin"), "every path follows --prefix")
        for line in ["User=hr-gateway", "SupplementaryGroups=bluetooth video", "NoNewPrivileges=yes",
                     "ProtectSystem=strict", "StateDirectory=hr-gateway", "PrivateTmp=yes",
                     "DeviceAllow=char-video4linux rw", "Restart=on-failure"] {
            #expect(unit.split(separator: "\n").contains(Substring(line)), "\(line)")
        }
        #expect(FileManager.default.fileExists(atPath: stage + "/etc/dbus-1/system.d/hr-gateway.conf"))
        #expect(FileManager.default.fileExists(atPath: stage + "/etc/udev/rules.d/70-hr-gateway-camera.rules"))

        // The installed configuration is valid for the installed binary.
        let config = stage + "/etc/hr-gateway/hr-gateway.toml"
        let check = try CLI.run(["config", "check", config])
        #expect(check.status == 0, "\(check.stderr)")

        // A second install keeps an edited configuration and puts the new example beside it.
        try "log_level = \"debug\"\n".write(toFile: config, atomically: true, encoding: .utf8)
        let again = try install(["--destdir", stage, "--prefix", "/opt/hrg", "--binary", CLI.executable.path])
        #expect(again.status == 0, "\(again.output)")
        #expect(try String(contentsOfFile: config, encoding: .utf8) == "log_level = \"debug\"\n")
        #expect(FileManager.default.fileExists(atPath: config + ".example"))
        // That configuration names no source for the service (as one kept from before 0.3.0): said.
        #expect(again.output.contains("names no source"), "\(again.output)")
        // One that names a strap is not questioned.
        try "[strap]\ndevices = [\"auto\"]\n".write(toFile: config, atomically: true, encoding: .utf8)
        let named = try install(["--destdir", stage, "--prefix", "/opt/hrg", "--binary", CLI.executable.path])
        #expect(named.status == 0, "\(named.output)")
        #expect(!named.output.contains("names no source"), "\(named.output)")
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze")))
    func theUnitPassesSystemdAnalyzeVerify() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-unit-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let unit = try String(contentsOfFile: Self.root + "/config/hr-gateway.service", encoding: .utf8)
            .replacingOccurrences(of: "/usr/local/bin/hr-gateway", with: CLI.executable.path)
        try unit.write(toFile: dir + "/hr-gateway.service", atomically: true, encoding: .utf8)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/systemd-analyze")
        p.arguments = ["verify", dir + "/hr-gateway.service"]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try p.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(p.terminationStatus == 0, "\(text)")
        #expect(!text.contains("Unknown"), "\(text)")
    }

    @Test func dryRunChangesNothingAndPrintsEachStep() throws {
        let r = try install(["--dry-run", "--binary", "/nonexistent/hr-gateway", "--prefix", "/opt/x"])
        #expect(r.status == 0, "\(r.output)")
        #expect(r.output.contains("+ install -D -m 0755 /nonexistent/hr-gateway /opt/x/bin/hr-gateway"))
        #expect(r.output.contains(
            "+ install -D -m 0644 /nonexistent/libHRGatewayOpenCV.so /opt/x/lib/hr-gateway/libHRGatewayOpenCV.so"))
        #expect(r.output.contains("/etc/dbus-1/system.d/hr-gateway.conf"))
        #expect(!FileManager.default.fileExists(atPath: "/opt/x/bin/hr-gateway"))
        let bad = try install(["--prefix", "relative"])
        #expect(bad.status == 2)
    }
}
