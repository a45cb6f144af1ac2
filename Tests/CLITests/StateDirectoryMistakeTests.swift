import Foundation
import Testing

/// Mistakes about where state lives are said, and make nothing.
@Suite struct StateDirectoryMistakeTests {
    func temp(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("hrg-mistake-\(UUID().uuidString)-\(name)").path
    }

    /// `webhook flush` on a state directory that does not exist (a mistyped --state-dir) says there is no outbox and
    /// creates nothing (it made the directory and an empty outbox, and said "Delivered 0 of 0").
    @Test func webhookFlushOnAMissingStateDirectoryCreatesNothing() throws {
        let dir = temp("state")
        let r = try CLI.run(["webhook", "flush", "--state-dir", dir])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("No webhook outbox in \(dir)"), "\(r.stdout)")
        #expect(!FileManager.default.fileExists(atPath: dir), "webhook flush created \(dir)")
    }

    /// A `--config` file that is not there is said even when the state directory comes from --state-dir or
    /// HR_GATEWAY_STATE_DIR (which need no file: it was ignored without a word); the command still runs.
    @Test func aMissingConfigFileNamedOnTheCommandLineIsSaid() throws {
        let dir = temp("state")
        let missing = temp("hr-gateway.toml")
        let byOption = try CLI.run(["sessions", "list", "--state-dir", dir, "--config", missing])
        #expect(byOption.status == 0)
        #expect(byOption.stderr.contains("warning: --config \(missing): no such file; not needed here, as --state-dir gives the state directory"), "\(byOption.stderr)")
        let byEnvironment = try CLI.run(["token", "list", "--config", missing], environment: ["HR_GATEWAY_STATE_DIR": dir])
        #expect(byEnvironment.stderr.contains("as HR_GATEWAY_STATE_DIR gives the state directory"), "\(byEnvironment.stderr)")
        let existing = temp("present.toml")
        try "".write(toFile: existing, atomically: true, encoding: .utf8)
        let fine = try CLI.run(["sessions", "list", "--state-dir", dir, "--config", existing])
        #expect(!fine.stderr.contains("no such file"), "\(fine.stderr)")
    }
}
