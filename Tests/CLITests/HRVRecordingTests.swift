import Foundation
import GatewayEngine
import Testing

/// `hrv FILE` on a recording (JSON lines, as `stream --record` writes it): the RR of its strap, as from an RR file.
@Suite struct HRVRecordingTests {
    /// The real NSRDB series (Tests/HRVAnalysisTests/Data) as a strap's notifications: one or two intervals per
    /// sample, with a camera's samples (no RR) and an event line between them, and a second strap's samples after.
    func recording(secondStrap: Bool) throws -> (path: String, rr: [Double]) {
        let csv = try String(contentsOfFile: HRVCommandTests.dataFile("rr_nsrdb_short_pyhrv_raw.csv"), encoding: .utf8)
        let rr = csv.split(separator: "\n").dropFirst().compactMap { Double($0.split(separator: ",")[2]) }
        var lines: [String] = []
        var t: Int64 = 1_700_000_000_000
        var i = 0
        while i < rr.count {
            let chunk = Array(rr[i..<min(i + 1 + i % 2, rr.count)])
            t += Int64(chunk.reduce(0, +))
            lines.append(BiosignalSample(timestampMs: t, bpm: 60_000 / chunk[0], rrIntervalsMs: chunk, deviceId: "A0:9E",
                                         source: "ble_hrm").jsonValue.jsonString)
            if i % 50 == 0 {
                lines.append(BiosignalSample(timestampMs: t + 10, bpm: 70, source: "camera_rppg", confidence: 0.8)
                    .jsonValue.jsonString)
                if secondStrap {
                    lines.append(BiosignalSample(timestampMs: t + 20, bpm: 90, rrIntervalsMs: [667], deviceId: "C0:FF",
                                                 source: "ble_hrm").jsonValue.jsonString)
                }
            }
            i += chunk.count
        }
        lines.insert(#"{"type":"session_started","session_id":"x"}"#, at: 3)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-hrv-rec-\(UUID().uuidString).jsonl").path
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return (path, rr)
    }

    @Test func aRecordingGivesTheSameMetricsAsItsRRFile() throws {
        let (path, rr) = try recording(secondStrap: false)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let values = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-hrv-rr-\(UUID().uuidString).txt").path
        defer { try? FileManager.default.removeItem(atPath: values) }
        try (rr.map { String($0) }.joined(separator: "\n") + "\n").write(toFile: values, atomically: true, encoding: .utf8)

        let fromRecording = try CLI.run(["hrv", "--json", path])
        let fromValues = try CLI.run(["hrv", "--json", values])
        #expect(fromRecording.status == 0, "\(fromRecording.stderr)")
        #expect(fromValues.status == 0, "\(fromValues.stderr)")
        #expect(!fromRecording.stdout.isEmpty && fromRecording.stdout == fromValues.stdout)
        #expect(fromRecording.stderr.contains("1 event line (not samples) skipped"), "\(fromRecording.stderr)")

        let table = try CLI.run(["hrv", path])
        #expect(table.stdout.contains("\(rr.count) RR intervals (column rr_intervals_ms of A0:9E)"), "\(table.stdout)")
        // From a pipe too.
        let piped = try CLI.run(["hrv", "--json", "-"], input: try Data(contentsOf: URL(fileURLWithPath: path)))
        #expect(piped.stdout == fromValues.stdout)
    }

    @Test func severalStrapsNeedADevice() throws {
        let (path, rr) = try recording(secondStrap: true)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let both = try CLI.run(["hrv", path])
        #expect(both.status == 1)
        #expect(both.stderr.contains("RR from 2 devices (A0:9E, C0:FF): choose one with --device"), "\(both.stderr)")
        let one = try CLI.run(["hrv", "--json", "--device", "A0:9E", path])
        #expect(one.status == 0, "\(one.stderr)")
        #expect(try JSONValue(parsing: one.stdout)["rr_count"]?.intValue ?? 0 >= Int64(rr.count) - 10)
        let other = try CLI.run(["hrv", "--device", "AA:AA", path])
        #expect(other.status == 1)
        #expect(other.stderr.contains("no RR from device AA:AA in the recording (it holds RR from A0:9E, C0:FF)"))
        let notARecording = try CLI.run(["hrv", "--device", "A0:9E", HRVCommandTests.dataFile("rr_nsrdb_short_pyhrv_raw.csv")])
        #expect(notARecording.status == 1)
        #expect(notARecording.stderr.contains("--device applies to a recording"), "\(notARecording.stderr)")
    }
}
