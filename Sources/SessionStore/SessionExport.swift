import GatewayEngine

/// The export formats of a recorded session. Pure: store rows in, text out.
public enum SessionExport {
    public enum Format: String, Sendable, CaseIterable {
        /// One row per beat: `session_id,device_id,beat_time_ms,rr_ms,rr_1024,hr_bpm,contact`.
        case csv
        /// `{"session": …, "samples": […], "events": […]}`.
        case json
        /// One sample per line, the recording format that `stream --replay` reads.
        case jsonl
    }

    public static let csvHeader = "session_id,device_id,beat_time_ms,rr_ms,rr_1024,hr_bpm,contact"

    /// One line per RR interval. A sample's intervals end at its timestamp, oldest first, so a beat's time is the
    /// sample time less the intervals that follow it in the same sample. Samples without RR have no beat rows.
    public static func csv(sessionId: String, samples: [BiosignalSample]) -> String {
        var out = csvHeader + "\n"
        for s in samples {
            guard let rr = s.rrIntervalsMs?.filter(\.isFinite), !rr.isEmpty else { continue }
            let raw = s.rrRaw1024.flatMap { $0.count == rr.count ? $0 : nil }
            var after = 0.0
            var rows: [String] = []
            for i in rr.indices.reversed() {
                let beat = Double(s.timestampMs) - after
                after += rr[i]
                rows.append([
                    field(sessionId), field(s.deviceId ?? s.source), String(Int64(beat.rounded())),
                    number(rr[i]), raw.map { String($0[i]) } ?? "", number(s.bpm), s.contact?.rawValue ?? "",
                ].joined(separator: ","))
            }
            for row in rows.reversed() { out += row + "\n" }
        }
        return out
    }

    public static func json(session: RecordedSession, samples: [BiosignalSample], events: [RecordedEvent]) -> String {
        let evs = events.map { (try? JSONValue(parsing: $0.json)) ?? .object(["type": .string($0.type)]) }
        return JSONValue.object([
            "session": session.jsonValue,
            "samples": .array(samples.map(\.jsonValue)),
            "events": .array(evs),
        ]).jsonString + "\n"
    }

    public static func jsonl(samples: [BiosignalSample]) -> String {
        samples.map { $0.jsonValue.jsonString + "\n" }.joined()
    }

    private static func number(_ v: Double) -> String {
        v == v.rounded() && abs(v) < 1e15 ? String(Int64(v)) : String(v)
    }

    /// RFC 4180 quoting when needed.
    private static func field(_ s: String) -> String {
        guard s.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return s }
        return "\"" + s.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
