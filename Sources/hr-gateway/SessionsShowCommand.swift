import ArgumentParser
import GatewayEngine
import SessionStore
import StdoutSink

struct SessionsShowCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Show one recorded session: state, times, configuration, devices, its summary metrics and the HRV of every beat.",
        discussion: """
            ID is a session id or its first characters (enough to name one session).

            The summary's metrics are those of the session's last window (60 s unless its profile says otherwise), \
            as the Synheart SDK's summary is; the "recorded" line is the time-domain HRV of every recorded beat \
            (each strap's own line with several), as `hr-gateway hrv` gives it for the CSV export (--json: \
            "recorded_hrv", by device).

            Raw ECG and accelerometer (Polar straps) are counted per device: samples, rate, time span and \
            segments (more than one: frames were lost or the strap's clock was reset), and the rate the strap \
            really sampled at when its chunks' times say it is not the nominal one ("at 130 Hz (sampled at \
            130.17 Hz)"); --json has them under "waveform_tracks".

            Examples:
              hr-gateway sessions show 3f2a9c1e
              hr-gateway sessions show 3f2a9c1e --json
            """
    )

    @Argument(help: "The session id, or its first characters (see `hr-gateway sessions list`).")
    var id: String

    func validate() throws {
        if id.trimmingCharacters(in: .whitespaces).isEmpty {
            throw ValidationError("A session id is empty: give one, or its first characters (see hr-gateway sessions list).")
        }
    }

    @Flag(help: "Print the session as JSON (with its last session_summary or session_error under \"end\").")
    var json = false

    @OptionGroup var store: StoreOptions

    func run() throws {
        let sessions = try store.openForReading()
        let id: String
        do { id = try sessions.resolve(self.id) } catch { throw CommandFailure("\(error)") }
        guard let s = try sessions.session(id: id) else { throw CommandFailure("\(StoreError.sessionNotFound(id))") }
        let events = try sessions.events(sessionId: id)
        let end = events.last(where: { $0.type == "session_summary" || $0.type == "session_error" })
            .flatMap { try? JSONValue(parsing: $0.json) }
        // Raw ECG and accelerometer: what a researcher checks before an export (every sample there, in one segment),
        // from the chunks' heads (their values unread: a day of ECG is some 11 million). Read only for a session
        // that recorded some (the store says so without reading its samples). And every beat, for the whole
        // session's HRV beside the summary's (its last window's).
        let samples = s.rrCount == 0 ? [] : try sessions.beatSamples(sessionId: id)
        let recorded = BeatTimeline.recordedHRV(samples)
        let waveforms: [(name: String, tracks: [SessionExport.WaveformTrack])] = try [
            ("ecg", SessionExport.Waveform.ecg), ("acc", .acc),
        ].filter { s.waveforms.contains($0.0) }.map { name, waveform in
            (name, SessionExport.waveformTracks(heads: try sessions.waveformHeads(sessionId: id, waveform: waveform)))
        }.filter { !$0.tracks.isEmpty }
        if json {
            guard case .object(var o) = s.jsonValue else { return }
            if let end { o["end"] = end }
            if !recorded.isEmpty {
                o["recorded_hrv"] = .object(Dictionary(recorded.map { ($0.device, JSONValue.object(HRVCommand.metrics($0.result))) },
                    uniquingKeysWith: { a, _ in a }))
            }
            if !waveforms.isEmpty {
                o["waveform_tracks"] = .object(Dictionary(uniqueKeysWithValues: waveforms.map { w in
                    (w.name, JSONValue.array(w.tracks.map { t in
                        var track: [String: JSONValue] = [
                            "device_id": .string(t.device), "rate_hz": .double(t.rateHz), "samples": .int(Int64(t.samples)),
                            "segments": .int(Int64(t.segments)), "first_ms": .double(t.firstMs), "last_ms": .double(t.lastMs),
                        ]
                        if !t.measuredRatesHz.isEmpty {
                            track["measured_rates_hz"] =
                                .array(t.measuredRatesHz.map { .double(($0 * 1000).rounded() / 1000) })
                        }
                        return .object(track)
                    }))
                }))
            }
            print(JSONValue.object(o).jsonString)
            return
        }
        print("session   \(s.id)")
        print("state     \(s.state.rawValue)")
        print("mode      \(s.mode)")
        print("started   \(SessionText.time(s.startedAtMs))")
        print("ended     \(s.endedAtMs.map(SessionText.time) ?? "-")")
        print("duration  \(SessionText.duration(s))\(s.plannedDurationSec == nil ? " (run until stopped)" : "")")
        print("samples   \(s.sampleCount) (\(s.rrCount) RR intervals), \(s.eventCount) events")
        print("devices   \(s.devices.isEmpty ? "-" : s.devices.joined(separator: ", "))")
        print("config    \(s.config?.jsonString ?? s.configJSON)")
        for w in waveforms {
            for t in w.tracks { print("\(w.name == "ecg" ? "ecg       " : "motion    ")\(t.text)") }
        }
        if let end {
            if let m = end["metrics"]?.objectValue {
                func pairs(_ o: [String: JSONValue]) -> String {
                    o.keys.sorted().filter { $0 != "resonance_assessment" && $0 != "devices" }
                        .map { "\($0)=\(o[$0]!.jsonString)" }.joined(separator: " ")
                }
                // The SDK's summary is its last window's, not the whole session's: said, with the window.
                let window = s.config?["profile"]?["window_sec"]?.intValue ?? Int64(ComputeProfile().windowSec)
                print("summary   (the last \(window) s window, as the SDK's) " + pairs(m))
                // Several devices: each one's own values on its own line (the top level is `primary_device`'s).
                for (device, values) in (m["devices"]?.objectValue ?? [:]).sorted(by: { $0.key < $1.key }) {
                    print("  \(device)  " + pairs(values.objectValue ?? [:]))
                }
                if let assessment = m["resonance_assessment"] { ResonanceReport.lines(assessment).forEach { print($0) } }
            } else if let message = end["message"]?.stringValue {
                print("error     \(message)")
            }
        }
        // Every session with beats, ended or not (a session killed with -9 has no summary, and had no line: its
        // beats are all there).
        for (device, r) in recorded {
            let o = HRVCommand.metrics(r)
            let keys = ["rr_count", "artifact_count", "hr_from_rr_bpm", "hr_sdnn_ms", "rmssd_ms", "pnn50"]
            let values = keys.compactMap { k in o[k].map { v in
                if case .double(let d) = v { "\(k)=" + String(format: "%.2f", d) } else { "\(k)=\(v.jsonString)" }
            } }
            let whose = recorded.count > 1 ? " of \(device)" : ""
            print("recorded  (every beat\(whose), Kubios-corrected, as `hr-gateway hrv` on the export) "
                + values.joined(separator: " "))
        }
    }
}
