import Foundation
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

extension SessionStore {
    /// Session `id` (exactly) in `format`.
    public func export(id: String, format: SessionExport.Format) throws(StoreError) -> String {
        guard let s = try session(id: id) else { throw .sessionNotFound(id) }
        let samples = try samples(sessionId: id)
        switch format {
        case .csv: return SessionExport.csv(sessionId: id, samples: samples)
        case .jsonl: return SessionExport.jsonl(samples: samples)
        case .json: return SessionExport.json(session: s, samples: samples, events: try events(sessionId: id))
        }
    }

    /// What paced a breathing session, for lists: "4-7-8 adherence 92 % RSA 8.1 bpm" for a pattern,
    /// "resonance 5.5/min" for a resonance assessment ("resonance ?" when it found none); nil otherwise.
    public func pacingSummary(_ s: RecordedSession) -> String? {
        let lastSummary = { (try? self.events(sessionId: s.id))?.last { $0.type == "session_summary" }
            .flatMap { try? JSONValue(parsing: $0.json) } }
        if s.config?["resonance_assessment"] != nil {
            let rate = lastSummary()?["metrics"]?["resonance_assessment"]?["resonance_rate_bpm"]?.doubleValue
            return "resonance " + (rate.map { String(format: "%g/min", $0) } ?? "?")
        }
        guard let pattern = s.config?["pattern"]?.stringValue else { return nil }
        var text = pattern
        let summary = lastSummary()
        if let a = summary?["metrics"]?["breathing_adherence"]?.doubleValue {
            text += " adherence \(Int((a * 100).rounded())) %"
        }
        if let r = summary?["metrics"]?["rsa_amplitude_bpm"]?.doubleValue { text += " RSA \(String(format: "%.1f", r)) bpm" }
        return text
    }
}
