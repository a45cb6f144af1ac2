import Foundation
import GatewayEngine
import SessionStore
import Testing

@Suite struct SessionTrendsTests {
    static let day: Int64 = 86_400_000
    /// 2026-11-01T08:00Z.
    static let t0: Int64 = 1_793_520_000_000

    func summary(rmssd: Double, rr: Int, hr: Double, rsa: Double? = nil) -> JSONValue {
        var m: [String: JSONValue] = ["rmssd_ms": .double(rmssd), "rr_count": .int(Int64(rr)), "hr_mean_bpm": .double(hr)]
        if let rsa { m["rsa_amplitude_bpm"] = .double(rsa) }
        return .object(["type": .string("session_summary"), "metrics": .object(m)])
    }

    @Test func perDayMeansMinimumsAndWhatCounts() {
        let utc = TimeZone(identifier: "UTC")!
        let sessions: [(startedAtMs: Int64, summary: JSONValue)] = [
            (Self.t0, summary(rmssd: 40, rr: 300, hr: 62)),
            (Self.t0 + 3_600_000, summary(rmssd: 60, rr: 300, hr: 58, rsa: 9)),
            (Self.t0 + Self.day, summary(rmssd: 55, rr: 0, hr: 70)),  // no RR: no RMSSD
            (Self.t0 + 2 * Self.day, summary(rmssd: 30, rr: 200, hr: 66, rsa: 5)),
        ]
        let rmssd = SessionTrends.days(.rmssd, sessions: sessions, timeZone: utc)
        #expect(rmssd == [SessionTrends.Day(date: "2026-11-01", value: 50, sessions: 2),
                          SessionTrends.Day(date: "2026-11-03", value: 30, sessions: 1)])
        let resting = SessionTrends.days(.restingHR, sessions: sessions, timeZone: utc)
        #expect(resting.map(\.value) == [58, 70, 66] && resting.map(\.sessions) == [2, 1, 1])
        let rsa = SessionTrends.days(.rsa, sessions: sessions, sinceMs: Self.t0 + Self.day, timeZone: utc)
        #expect(rsa == [SessionTrends.Day(date: "2026-11-03", value: 5, sessions: 1)])
        // The same instants on a clock 10 hours ahead fall on the next local day in the evening.
        let ahead = SessionTrends.days(.restingHR, sessions: [(Self.t0 + 15 * 3_600_000, summary(rmssd: 1, rr: 2, hr: 60))],
                                       timeZone: TimeZone(secondsFromGMT: 10 * 3600)!)
        #expect(ahead.map(\.date) == ["2026-11-02"])
    }

    /// A three-second session (a test, a false start) gave the day its RMSSD from two beats' difference: sessions
    /// shorter than the minimum are left out and counted; one without a duration counts.
    @Test func shortSessionsAreLeftOutAndCounted() {
        let utc = TimeZone(identifier: "UTC")!
        func timed(_ rmssd: Double, _ sec: Int64?) -> JSONValue {
            var s = summary(rmssd: rmssd, rr: 300, hr: 60)
            if case .object(var o) = s, let sec {
                o["duration_actual_sec"] = .int(sec)
                s = .object(o)
            }
            return s
        }
        let sessions: [(startedAtMs: Int64, summary: JSONValue)] = [
            (Self.t0, timed(40, 600)), (Self.t0 + 1, timed(200, 3)), (Self.t0 + 2, timed(60, nil)), (Self.t0 + 3, timed(50, 60)),
        ]
        #expect(SessionTrends.days(.rmssd, sessions: sessions, minDurationSec: 60, timeZone: utc)
            == [SessionTrends.Day(date: "2026-11-01", value: 50, sessions: 3)])
        #expect(SessionTrends.tooShort(.rmssd, sessions: sessions, minDurationSec: 60) == 1)
        #expect(SessionTrends.days(.rmssd, sessions: sessions, timeZone: utc).map(\.sessions) == [4])
        #expect(SessionTrends.tooShort(.rmssd, sessions: sessions, minDurationSec: 0) == 0)
    }

    @Test func theStoreGivesFinishedSessionsSummariesOnly() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try SessionStore(directory: dir)
        let done = SessionRecorder(store: store, config: SessionConfig(sessionId: "done", mode: .focus, durationSec: 5),
                                   nowMs: Self.t0) { _ in }
        var metrics = SessionMetrics()
        metrics.rmssdMs = 42
        metrics.rrCount = 100
        done.record(.summary(sessionId: "done", durationActualSec: 5, metrics: metrics, behavior: nil))
        done.finish()
        SessionRecorder(store: store, config: SessionConfig(sessionId: "failed", mode: .focus, durationSec: 5),
                        nowMs: Self.t0 + 1) { _ in }.finish()
        let summaries = try store.summaries()
        #expect(summaries.count == 1 && summaries.first?.startedAtMs == Self.t0)
        #expect(SessionTrends.days(.rmssd, sessions: summaries).map(\.value) == [42])
    }
}
