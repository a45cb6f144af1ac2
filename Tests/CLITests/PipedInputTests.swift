import Foundation
import GatewayEngine
import Testing

/// Files given as /dev/stdin, a shell's <(…) or /dev/null: pipes and devices, which have no size to read up to.
@Suite struct PipedInputTests {
    @Test func hrvReadsItsSeriesFromAPipeAsFromTheFile() throws {
        let file = HRVCommandTests.dataFile("rr_nsrdb_short_pyhrv_raw.csv")
        let fromFile = try CLI.run(["hrv", "--json", "--correct", "none", file])
        #expect(fromFile.status == 0, "\(fromFile.stderr)")
        let piped = try CLI.run(
            ["hrv", "--json", "--correct", "none", "/dev/stdin"],
            input: try Data(contentsOf: URL(fileURLWithPath: file)))
        #expect(piped.status == 0, "\(piped.stderr)")
        #expect(!piped.stdout.isEmpty)
        #expect(piped.stdout == fromFile.stdout)
    }

    @Test func aRecordingIsReplayedFromAPipe() throws {
        let recording = FileManager.default.temporaryDirectory
            .appendingPathComponent("hrg-piped-\(UUID().uuidString).jsonl").path
        defer { try? FileManager.default.removeItem(atPath: recording) }
        let recorded = try CLI.run([
            "stream", "--simulate", "--duration", "6", "--format", "jsonl", "--record", recording, "--no-record-db",
            "--seed", "7",
        ])
        #expect(recorded.status == 0, "\(recorded.stderr)")
        let lines = try String(contentsOfFile: recording, encoding: .utf8).split(separator: "\n")
        try #require(lines.count >= 5)

        let replayed = try CLI.run(
            ["stream", "--replay", "/dev/stdin", "--replay-speed", "100", "--format", "jsonl", "--no-record-db"],
            input: try Data(contentsOf: URL(fileURLWithPath: recording)))
        #expect(replayed.status == 0, "\(replayed.stderr)")
        let summary = try JSONValue(parsing: try #require(replayed.lines.last))
        #expect(summary["type"] == .string("session_summary"))
        #expect(summary["metrics"]?["sample_count"]?.intValue == Int64(lines.count))
    }

    @Test func devNullIsAnEmptyConfiguration() throws {
        let r = try CLI.run(["config", "check"], environment: ["HR_GATEWAY_CONFIG": "/dev/null"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("/dev/null: valid"), "\(r.stdout)")
    }
}
