import Foundation
import GatewayEngine
import RelayWebServer
import SessionStore
import Testing

@testable import hr_gateway

/// The relay's view of the session store: a download names its session by the whole id or by the start of one id,
/// as the command line does, and is refused before anything is made when it cannot be made.
@Suite struct StoreSessionArchiveTests {
    @Test func aDownloadNamesItsSessionAsTheCommandLineDoes() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-archive-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try SessionStore(directory: dir)
        // Recent: a session ends at the wall clock's time (an EDF spanning years is refused).
        let t0 = Int64(Date().timeIntervalSince1970 * 1000) - 600_000
        for (id, at) in [("7f3a91c2-0001", t0), ("7f3a91c2-0002", t0 + 100_000), ("b41", t0 + 200_000)] {
            let r = SessionRecorder(store: store, config: SessionConfig(sessionId: id, mode: .focus, durationSec: 60), nowMs: at) { _ in }
            r.record(BiosignalSample(timestampMs: at + 1000, bpm: 61, rrIntervalsMs: [983], deviceId: "A0", source: "ble_hrm"))
            r.finish()
        }
        let archive = StoreSessionArchive(directory: dir)
        let plan = try #require(try archive.plan(id: "7f3a91c2-0001", format: "csv"))
        #expect(plan == ExportPlan(id: "7f3a91c2-0001", format: "csv", contentType: "text/csv; charset=utf-8",
                                   filename: "session-7f3a91c2-0001.csv"))
        #expect(try archive.plan(id: "b", format: "edf")?.id == "b41")
        #expect(try archive.plan(id: "7f3a91c2-0002", format: "jsonl")?.filename == "session-7f3a91c2-0002.jsonl")
        #expect(try archive.plan(id: "nosuch", format: "csv") == nil)
        // SQLite's `=` took a trailing NUL for the id's end: the stored id is what the export carries.
        #expect(try archive.plan(id: "b41\u{0}", format: "csv")?.id == "b41")
        #expect(throws: SessionArchiveError.self) { try archive.plan(id: "7f3a", format: "csv") }
        do { _ = try archive.plan(id: "7f3a", format: "csv") } catch {
            #expect("\(error)" == "7f3a starts 2 session ids: 7f3a91c2-0001, 7f3a91c2-0002; give more of the id.")
        }
        do { _ = try archive.plan(id: "b41", format: "ecg-csv"); Issue.record("an ECG CSV of a session without ECG") } catch {
            #expect("\(error)".contains("holds no raw ECG"), "\(error)")
        }
        do { _ = try archive.plan(id: "b41", format: "xml"); Issue.record("an export as xml") } catch {
            #expect("\(error)".contains("use format=csv"), "\(error)")
        }
        // The export made from a plan is the command line's export of the whole id.
        let body = ExportBody(spoolDirectory: dir)
        #expect(try archive.export(try #require(try archive.plan(id: "b", format: "csv")), into: body))
        body.end(.finished)
        let made = try body.read(at: 0, count: 1 << 20)
        #expect(made == (try store.export(id: "b41", format: .csv)) && !made.isEmpty)
    }
}
