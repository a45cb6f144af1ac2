import Foundation
import GatewayEngine

/// Per-day trends over recorded sessions, from each finished session's `session_summary` (`sessions trend`).
public enum SessionTrends {
    public enum Metric: String, Sendable, CaseIterable {
        /// Mean RMSSD of the day's sessions that carried RR (ms).
        case rmssd
        /// Mean RSA amplitude of the day's paced breathing sessions (bpm).
        case rsa
        /// The day's lowest session mean heart rate (bpm): a resting value when one session was taken at rest.
        case restingHR = "resting_hr"

        public var unit: String {
            switch self {
            case .rmssd: "ms"
            case .rsa, .restingHR: "bpm"
            }
        }
    }

    /// One day's value.
    public struct Day: Sendable, Equatable {
        /// yyyy-MM-dd in the time zone given.
        public var date: String
        public var value: Double
        /// Sessions that contributed.
        public var sessions: Int

        public init(date: String, value: Double, sessions: Int) {
            self.date = date
            self.value = value
            self.sessions = sessions
        }
    }

    /// The value a session's summary gives for `metric`, if it has one.
    public static func value(_ metric: Metric, summary: JSONValue) -> Double? {
        let m = summary["metrics"]
        func positive(_ key: String) -> Double? { m?[key]?.doubleValue.flatMap { $0.isFinite && $0 > 0 ? $0 : nil } }
        switch metric {
        case .rmssd:
            guard let rr = m?["rr_count"]?.intValue, rr > 1 else { return nil }
            return positive("rmssd_ms")
        case .rsa: return positive("rsa_amplitude_bpm")
        case .restingHR: return positive("hr_mean_bpm")
        }
    }

    /// Whether a summary's session lasted at least `minDurationSec` (one without a duration counts).
    static func longEnough(_ summary: JSONValue, minDurationSec: Int) -> Bool {
        (summary["duration_actual_sec"]?.intValue ?? Int64.max) >= Int64(minDurationSec)
    }

    /// Per day, oldest first: the sessions started at or after `sinceMs` that lasted at least `minDurationSec` and
    /// whose summary has a value for `metric`.
    public static func days(
        _ metric: Metric, sessions: [(startedAtMs: Int64, summary: JSONValue)], sinceMs: Int64 = .min,
        minDurationSec: Int = 0, timeZone: TimeZone = .current
    ) -> [Day] {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        var byDay: [String: [Double]] = [:]
        for s in sessions where s.startedAtMs >= sinceMs && longEnough(s.summary, minDurationSec: minDurationSec) {
            guard let v = value(metric, summary: s.summary) else { continue }
            let c = calendar.dateComponents([.year, .month, .day], from: Date(timeIntervalSince1970: Double(s.startedAtMs) / 1000))
            let key = String(format: "%04d-%02d-%02d", c.year ?? 0, c.month ?? 0, c.day ?? 0)
            byDay[key, default: []].append(v)
        }
        return byDay.keys.sorted().map { key in
            let values = byDay[key]!
            let v = metric == .restingHR ? values.min()! : values.reduce(0, +) / Double(values.count)
            return Day(date: key, value: v, sessions: values.count)
        }
    }

    /// Sessions started at or after `sinceMs` with a value for `metric` that `days` leaves out for lasting less than
    /// `minDurationSec` (a test, a false start: a few beats give an RMSSD that is noise).
    public static func tooShort(
        _ metric: Metric, sessions: [(startedAtMs: Int64, summary: JSONValue)], sinceMs: Int64 = .min,
        minDurationSec: Int
    ) -> Int {
        sessions.count { s in
            s.startedAtMs >= sinceMs && !longEnough(s.summary, minDurationSec: minDurationSec)
                && value(metric, summary: s.summary) != nil
        }
    }
}

extension SessionTrends {
    /// Sessions that had several straps (or other devices but the camera): without a device chosen, each gives its
    /// top level's value, its primary device's, which may be a different person's from one session to the next.
    public static func severalDevices(sessions: [(startedAtMs: Int64, summary: JSONValue, devices: [String])],
                                      sinceMs: Int64 = .min) -> Int {
        sessions.count { $0.startedAtMs >= sinceMs && straps($0.devices).count > 1 }
    }

    /// The devices of a session but the camera (a camera's pulse is never the top level's when a strap sends).
    static func straps(_ devices: [String]) -> [String] {
        devices.filter { !$0.hasPrefix("/dev/") && $0 != SessionMetrics.cameraSource }
    }
}

extension SessionStore {
    /// Each finished session's start and summary (sessions without a summary, interrupted or failed, are left out).
    /// With `device`, only the sessions it took part in (its id compared without regard to case, as a strap's address
    /// may be typed), each with that device's own metrics in place of the summary's.
    public func summaries(device: String? = nil) throws(StoreError) -> [(startedAtMs: Int64, summary: JSONValue)] {
        try summariesWithDevices(device: device).map { ($0.startedAtMs, $0.summary) }
    }

    /// `summaries(device:)` with each session's recorded devices. With `device`, a session whose summary has several
    /// devices gives that device's entry (none: left out); one that had other straps whose summary holds a single
    /// device (the others went quiet before the end) is left out, as its top level may be another strap's.
    public func summariesWithDevices(device: String? = nil) throws(StoreError)
        -> [(startedAtMs: Int64, summary: JSONValue, devices: [String])]
    {
        var out: [(startedAtMs: Int64, summary: JSONValue, devices: [String])] = []
        for s in try list() {
            var id: String?
            if let device {
                guard let match = s.devices.first(where: { $0.caseInsensitiveCompare(device) == .orderedSame }) else { continue }
                id = match
            }
            guard let e = try events(sessionId: s.id).last(where: { $0.type == "session_summary" }),
                var v = try? JSONValue(parsing: e.json)
            else { continue }
            if let id {
                if case .object(var o) = v, case .object(let devices)? = v["metrics"]?["devices"] {
                    guard let own = devices[id] else { continue }
                    o["metrics"] = own
                    v = .object(o)
                } else if SessionTrends.straps(s.devices).count > 1 {
                    continue
                }
            }
            out.append((s.startedAtMs, v, s.devices))
        }
        return out
    }
}
