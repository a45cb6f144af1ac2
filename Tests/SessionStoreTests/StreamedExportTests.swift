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
        // An export nobody wants any more (a download's client went) stops at the next part: at most the part being
        // made is handed over after the first (the whole was made and handed to a sink that dropped it).
        for format in [SessionExport.Format.jsonl, .json, .ecgCSV] {
            var parts: [[UInt8]] = []
            let output = ExportOutput(sink: { parts.append($0) }, cancelled: { !parts.isEmpty })
            try store.export(id: "long", format: format, into: output)
            try output.finish()
            let whole = try store.export(id: "long", format: format).count
            #expect(parts.count <= 2 && parts.reduce(0) { $0 + $1.count } < min(whole, 2 * ExportOutput.flushBytes + 64_000),
                    "\(format): \(parts.map(\.count)) of \(whole)")
        }
        // A refused export hands nothing over (not even its header).
        var handed = 0
        let refused = ExportOutput { handed += $0.count }
        #expect(throws: StoreError.self) { try store.export(id: "long", format: .accCSV, into: refused) }
        #expect(handed == 0)
    }

    /// The waveform CSVs are written a chunk at a time as the store reads them, placed from the chunks' heads (their
    /// values unread), and the EDF's grids filled so: the same bytes as placing every sample held at once, for two straps' ECG and accelerometer
    /// interleaved, a lost frame, a clock reset, a rate change, an empty chunk and one without a rate; the tracks
    /// `sessions show` prints from the heads are those of the samples.
    @Test func waveformCSVsAreWrittenAChunkAtATime() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try SessionStore(directory: dir)
        let t0: Int64 = 1_700_000_000_000
        let recorder = SessionRecorder(store: store, config: SessionConfig(sessionId: "w", mode: .focus, durationSec: 600), nowMs: t0,
                                       clock: ManualSessionClock(startMs: t0 + 300_000)) { _ in }
        for k in 0..<400 {
            let ms = t0 + Int64((Double(k) * 73 / 130 * 1000).rounded()) + Int64(k % 5) - 2
            let reset: Int64 = k >= 300 ? 7_000 : 0  // the strap's clock reset
            let rate: Double = k >= 350 ? 250 : 130  // a new rate
            recorder.record(BiosignalSample(
                timestampMs: ms + reset, bpm: 0, deviceId: "A0", source: "polar_ecg", gapBefore: k == 120,
                ecgUv: k == 200 ? [] : (0..<73).map { Int32(($0 + k) * 37 % 2000) - 1000 }, ecgRateHz: k == 210 ? 0 : rate))
            recorder.record(BiosignalSample(
                timestampMs: ms + 3, bpm: 0, deviceId: "B1", source: "polar_ecg",
                ecgUv: (0..<73).map { Int32($0 * k % 900) }, ecgRateHz: 130))
            if k % 2 == 0 {
                recorder.record(BiosignalSample(
                    timestampMs: t0 + Int64(k) * 1280, bpm: 0, deviceId: "A0", source: "polar_acc",
                    accG: (0..<64).map { SIMD3(Double($0) / 64, -Double(k) / 400, 0.981) }, accRateHz: 50))
            }
            if k % 3 == 0 {
                recorder.record(BiosignalSample(timestampMs: ms, bpm: 60, rrIntervalsMs: [1000], deviceId: "A0", source: "ble_hrm"))
            }
        }
        recorder.finish()
        let samples = try store.samples(sessionId: "w")
        for (format, waveform) in [(SessionExport.Format.ecgCSV, SessionExport.Waveform.ecg), (.accCSV, .acc)] {
            let streamed = String(decoding: try store.export(id: "w", format: format), as: UTF8.self)
            let whole = try #require(SessionExport.waveformCSV(sessionId: "w", samples: samples, waveform: waveform))
            #expect(streamed == whole, "\(format): \(streamed.count) against \(whole.count) characters")
            #expect(streamed.split(separator: "\n").count > (waveform == .ecg ? 50_000 : 12_000), "\(format)")
            let heads = try store.waveformHeads(sessionId: "w", waveform: waveform)
            #expect(SessionExport.waveformTracks(heads: heads) == SessionExport.waveformTracks(samples: samples, waveform: waveform))
        }
        // The EDF likewise: its grids filled a chunk at a time as the store reads them, the same bytes.
        let session = try #require(try store.session(id: "w"))
        #expect(try store.export(id: "w", format: .edf)
            == SessionExport.edf(session: session, samples: samples, events: try store.events(sessionId: "w")))
        let tracks = SessionExport.waveformTracks(heads: try store.waveformHeads(sessionId: "w", waveform: .ecg))
        #expect(tracks.map { "\($0.device)@\(Int($0.rateHz))" } == ["A0@130", "B1@130", "A0@250"], "\(tracks)")
        // A new segment after the lost frame, after each of the two chunks that are none (their samples missing), and
        // at the clock reset.
        #expect(tracks[0].segments == 5, "\(tracks[0])")
    }
}
