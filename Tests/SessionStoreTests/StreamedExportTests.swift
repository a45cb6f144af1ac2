import Foundation
import GatewayEngine
import Testing

@testable import SessionStore

@Suite struct StreamedExportTests {
    /// An hour of beats and ECG, recorded: each export comes in parts no larger than the flush size and a row, and
    /// the parts put together are the export whole; the JSON document equals the one tree the export was once built
    /// as (sorted keys: beats, events, samples, session), and the beat CSV, read without the ECG values, equals the
    /// CSV of every sample.
    @Test func exportsComeInPartsThatMakeTheWhole() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try SessionStore(directory: dir)
        let recorder = SessionRecorder(store: store, config: SessionConfig(sessionId: "long", mode: .focus, durationSec: 3600)) { _ in }
        var seq: UInt64 = 0
        for second in 0..<3600 {
            seq += 1
            let rr = 850 + Double(second % 7) * 10
            recorder.record(BiosignalSample(
                timestampMs: 1_000_000 + Int64(second) * 1000, bpm: 60_000 / rr, rrIntervalsMs: [rr], deviceId: "A0",
                source: "ble_hrm", contact: .contact, sequence: seq))
            do {  // a chunk a second: the ECG CSV is some 12 MB
                recorder.record(BiosignalSample(
                    timestampMs: 1_000_000 + Int64(second) * 1000, bpm: 0, deviceId: "A0", source: "polar_ecg",
                    ecgUv: (0..<73).map { Int32($0 * 37 % 2000) - 1000 }, ecgRateHz: 130))
            }
        }
        recorder.finish()
        for format in [SessionExport.Format.csv, .jsonl, .json, .ecgCSV] {
            var parts: [[UInt8]] = []
            let output = ExportOutput { parts.append($0) }
            try store.export(id: "long", format: format, into: output)
            try output.finish()
            let whole = try store.export(id: "long", format: format)
            #expect(parts.flatMap { $0 } == whole, "\(format)")
            #expect(parts.dropLast().allSatisfy { $0.count >= ExportOutput.flushBytes && $0.count < ExportOutput.flushBytes + 64_000 }, "\(format): \(parts.map(\.count))")
            if format == .ecgCSV || format == .jsonl { #expect(whole.count > 2 * ExportOutput.flushBytes && parts.count > 2, "\(format): \(whole.count) bytes in \(parts.count) parts") }
        }
        let samples = try store.samples(sessionId: "long")
        let session = try #require(try store.session(id: "long"))
        let events = try store.events(sessionId: "long")
        let tree = JSONValue.object([
            "session": session.jsonValue, "samples": .array(samples.map(\.jsonValue)),
            "beats": SessionExport.beatsJSON(samples: samples),
            "events": .array(events.map { (try? JSONValue(parsing: $0.json)) ?? .object(["type": .string($0.type)]) }),
        ]).jsonString + "\n"
        #expect(String(decoding: try store.export(id: "long", format: .json), as: UTF8.self) == tree)
        #expect(String(decoding: try store.export(id: "long", format: .csv), as: UTF8.self)
            == SessionExport.csv(sessionId: "long", samples: samples))
        // A refused export hands nothing over (not even its header).
        var handed = 0
        let refused = ExportOutput { handed += $0.count }
        #expect(throws: StoreError.self) { try store.export(id: "long", format: .accCSV, into: refused) }
        #expect(handed == 0)
    }
}
