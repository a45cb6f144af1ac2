import GatewayEngine

/// The export formats of a recorded session. Pure: store rows in, text out.
public enum SessionExport {
    public enum Format: String, Sendable, CaseIterable {
        /// One row per beat: `session_id,device_id,beat_time_ms,rr_ms,rr_1024,hr_bpm,contact`.
        case csv
        /// `{"session": …, "samples": […], "beats": […], "events": […]}`.
        case json
        /// One sample per line, the recording format that `stream --replay` reads.
        case jsonl
    }

    public static let csvHeader = "session_id,device_id,beat_time_ms,rr_ms,rr_1024,hr_bpm,contact"

    /// The `contact` column: `1` skin contact, `0` no skin contact, empty when the strap does not report it.
    public static func contactField(_ c: SensorContact?) -> String {
        switch c {
        case .contact: "1"
        case .noContact: "0"
        case .notSupported, nil: ""
        }
    }

    /// One line per RR interval, in arrival order, with the beat times of `BeatTimeline` (continuous across
    /// notifications, so consecutive beats of a device are their RR apart except across a gap). Samples without RR
    /// have no beat rows.
    public static func csv(sessionId: String, samples: [BiosignalSample]) -> String {
        var out = csvHeader + "\n"
        for beat in BeatTimeline.beats(samples) {
            let s = samples[beat.sampleIndex]
            let raw = s.rrRaw1024.flatMap { $0.count == s.rrIntervalsMs?.count ? $0 : nil }
            out += [
                field(sessionId), field(beat.device), String(Int64(beat.timeMs.rounded())),
                number(beat.rrMs), raw.map { String($0[beat.intervalIndex]) } ?? "", number(s.bpm), contactField(s.contact),
            ].joined(separator: ",") + "\n"
        }
        return out
    }

    /// The beats of `BeatTimeline` as JSON: `device_id`, `beat_time_ms` (integer), `rr_ms`, and `segment_start`
    /// on the first beat after a gap (and the first of each device).
    public static func beatsJSON(samples: [BiosignalSample]) -> JSONValue {
        .array(BeatTimeline.beats(samples).map { b in
            var o: [String: JSONValue] = [
                "device_id": .string(b.device),
                "beat_time_ms": .int(Int64(b.timeMs.rounded())),
                "rr_ms": .double(b.rrMs),
            ]
            if b.startsSegment { o["segment_start"] = .bool(true) }
            return .object(o)
        })
    }

    public static func json(session: RecordedSession, samples: [BiosignalSample], events: [RecordedEvent]) -> String {
        let evs = events.map { (try? JSONValue(parsing: $0.json)) ?? .object(["type": .string($0.type)]) }
        return JSONValue.object([
            "session": session.jsonValue,
            "samples": .array(samples.map(\.jsonValue)),
            "beats": beatsJSON(samples: samples),
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
