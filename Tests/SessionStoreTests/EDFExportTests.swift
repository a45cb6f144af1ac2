import GatewayEngine
import Testing

@testable import SessionStore

/// `SessionExport.edf` for sessions with more than one strap: each strap's signals apart.
@Suite struct EDFExportTests {
    let t0: Int64 = 1_700_000_000_000

    /// The signals of an EDF file as its header declares them, and their physical values over all records.
    struct Read {
        var labels: [String] = []
        var transducers: [String] = []
        var signals: [[Double]] = []

        init(_ b: [UInt8]) {
            func text(_ at: Int, _ n: Int) -> String {
                String(decoding: b[at..<(at + n)], as: UTF8.self).trimmingCharacters(in: .whitespaces)
            }
            let records = Int(text(236, 8)) ?? 0
            let ns = Int(text(252, 4)) ?? 0
            func field(_ offset: Int, _ width: Int, _ k: Int) -> String { text(256 + ns * offset + k * width, width) }
            labels = (0..<ns).map { field(0, 16, $0) }
            transducers = (0..<ns).map { field(16, 80, $0) }
            let pmin = (0..<ns).map { Double(field(104, 8, $0)) ?? 0 }
            let pmax = (0..<ns).map { Double(field(112, 8, $0)) ?? 0 }
            let dmin = (0..<ns).map { Double(field(120, 8, $0)) ?? 0 }
            let dmax = (0..<ns).map { Double(field(128, 8, $0)) ?? 0 }
            let perRecord = (0..<ns).map { Int(field(216, 8, $0)) ?? 0 }
            signals = Array(repeating: [], count: ns)
            var at = 256 * (ns + 1)
            for _ in 0..<records {
                for k in 0..<ns {
                    for _ in 0..<perRecord[k] {
                        let d = Double(Int16(bitPattern: UInt16(b[at]) | UInt16(b[at + 1]) << 8))
                        signals[k].append((d - dmin[k]) * (pmax[k] - pmin[k]) / (dmax[k] - dmin[k]) + pmin[k])
                        at += 2
                    }
                }
            }
        }

        func signal(_ label: String) -> [Double] { labels.firstIndex(of: label).map { signals[$0] } ?? [] }
    }

    func session(_ samples: [BiosignalSample]) -> RecordedSession {
        RecordedSession(
            id: "two-straps", mode: "strap", configJSON: "{}", startedAtMs: t0, endedAtMs: t0 + 10_000,
            state: .completed, sampleCount: samples.count, eventCount: 0, rrCount: 0, devices: [],
            lastSampleMs: samples.last?.timestampMs)
    }

    /// Two straps streaming ECG at once (a team, a lab comparing placements): before, both went into one `ECG`
    /// channel, each chunk writing over the other's slots.
    @Test func twoStrapsHaveTheirOwnNumberedSignals() {
        let a = "A0:9E:1A:00:00:01"
        let b = "A0:9E:1A:00:00:02"
        var samples: [BiosignalSample] = []
        for sec in 0..<10 {
            samples.append(BiosignalSample(timestampMs: t0 + Int64(sec) * 1000 + 100, bpm: 60, rrIntervalsMs: [1000],
                                           deviceId: a, source: "ble_hrm"))
            samples.append(BiosignalSample(timestampMs: t0 + Int64(sec) * 1000 + 300, bpm: 90, rrIntervalsMs: [667],
                                           deviceId: b, source: "ble_hrm"))
        }
        // Strap A sends 1, 2, 3…; strap B -1, -2, -3…, each in chunks of 73 at 130 Hz, B 20 ms after A.
        for start in stride(from: 0, to: 73 * 14, by: 73) {
            let ms = t0 + 1000 + Int64((Double(start) * 1000 / 130).rounded())
            samples.append(BiosignalSample(timestampMs: ms, bpm: 0, deviceId: a, source: "polar_ecg",
                                           ecgUv: (start..<(start + 73)).map { Int32($0 + 1) }, ecgRateHz: 130))
            samples.append(BiosignalSample(timestampMs: ms + 20, bpm: 0, deviceId: b, source: "polar_ecg",
                                           ecgUv: (start..<(start + 73)).map { -Int32($0 + 1) }, ecgRateHz: 130))
        }
        samples.sort { $0.timestampMs < $1.timestampMs }
        let edf = Read(SessionExport.edf(session: session(samples), samples: samples, events: []))
        #expect(edf.labels == ["HR 1", "HR 2", "ECG 1", "ECG 2", "EDF Annotations"], "\(edf.labels)")
        #expect(edf.transducers[0] == "heart-rate strap (strap's own value) \(a)")
        #expect(edf.transducers[3] == "Polar H10 chest strap electrodes (PMD) \(b)")
        #expect(Set(edf.signal("HR 1").dropFirst(2).prefix(8)) == [60] && Set(edf.signal("HR 2").dropFirst(2).prefix(8)) == [90])
        let sent = (1...(73 * 14)).map(Double.init)
        #expect(edf.signal("ECG 1").filter { $0 != 0 } == sent, "strap A's ECG whole, in order, alone")
        #expect(edf.signal("ECG 2").filter { $0 != 0 } == sent.map { -$0 }, "strap B's ECG whole, in order, alone")
    }

    @Test func oneStrapKeepsItsPlainLabels() {
        let samples = (0..<5).map {
            BiosignalSample(timestampMs: t0 + Int64($0) * 1000, bpm: 60, rrIntervalsMs: [1000], deviceId: "A0", source: "ble_hrm")
        } + [BiosignalSample(timestampMs: t0 + 5000, bpm: 0, deviceId: "A0", source: "polar_ecg",
                             ecgUv: [Int32](repeating: 5, count: 73), ecgRateHz: 130)]
        let edf = Read(SessionExport.edf(session: session(samples), samples: samples, events: []))
        #expect(edf.labels == ["HR", "ECG", "EDF Annotations"], "\(edf.labels)")
        #expect(edf.transducers[1] == "Polar H10 chest strap electrodes (PMD)")
    }

    /// Two straps, neither with skin contact all session: no numbered HR signal, one plain `HR` of zeros.
    @Test func strapsWithoutAReadingLeaveOnePlainHRSignal() {
        let samples = (0..<5).flatMap { k in
            ["A0", "B0"].map {
                BiosignalSample(timestampMs: t0 + Int64(k) * 1000, bpm: 60, deviceId: $0, source: "ble_hrm", contact: .noContact)
            }
        }
        let edf = Read(SessionExport.edf(session: session(samples), samples: samples, events: []))
        #expect(edf.labels == ["HR", "EDF Annotations"], "\(edf.labels)")
        #expect(edf.signal("HR").allSatisfy { $0 == 0 })
    }

    /// A strap's first notification after the start carries beats that ended before it, here 0.6 s before the
    /// session's whole second: the file starts a second earlier so that their annotations are in it (an annotation
    /// before a file's start is lost; before, such a beat was).
    @Test func beatsBeforeTheSessionsStartAreKept() {
        let samples = [
            BiosignalSample(timestampMs: t0 + 300, bpm: 70, rrIntervalsMs: [900, 800], deviceId: "A0", source: "ble_hrm"),
            BiosignalSample(timestampMs: t0 + 1_100, bpm: 70, rrIntervalsMs: [800], deviceId: "A0", source: "ble_hrm"),
        ]
        var s = session(samples)
        s.startedAtMs = t0 + 100
        let bytes = SessionExport.edf(session: s, samples: samples, events: [])
        let beats = BeatTimeline.beats(samples).map(\.timeMs)
        #expect(beats.first.map { $0 < Double(t0) } == true, "the first beat ended before the session's second: \(beats)")
        // EDF's start time field (hh.mm.ss) is a second earlier than the session's whole second.
        let time = String(decoding: bytes[176..<184], as: UTF8.self)
        let second = Int(time.suffix(2)) ?? -1
        #expect(second == Int(((t0 - 1_000) / 1000) % 60), "start \(time)")
        let texts = String(decoding: bytes, as: UTF8.self).components(separatedBy: "\u{14}beat\u{14}").count - 1
        #expect(texts == 3, "all three beats annotated: \(texts)")
    }

    /// A wall clock stepped back an hour 8 s into a session (NTP on a Pi that booted with a clock ahead): the later
    /// samples and the end are stamped before the start. The file's length came out negative and the process
    /// stopped (a dashboard request took `serve` down); now it begins at the earliest sample and holds every one.
    @Test func aClockSteppedBackMidSessionKeepsEverySample() {
        var samples: [BiosignalSample] = []
        for sec in 0..<20 {
            let stepped: Int64 = sec >= 8 ? -3_600_000 : 0
            samples.append(BiosignalSample(timestampMs: t0 + Int64(sec) * 1000 + stepped, bpm: Double(60 + sec),
                                           rrIntervalsMs: [1000], deviceId: "A0", source: "ble_hrm"))
        }
        var s = session(samples)
        s.endedAtMs = t0 + 20_000 - 3_600_000
        let edf = Read(SessionExport.edf(session: s, samples: samples, events: []))
        let hr = edf.signal("HR")
        #expect(hr.count >= 3_599, "an hour back to the first 8 s: \(hr.count) records")
        let found = Set(hr.filter { $0 > 0 })
        #expect(found == Set((60..<80).map(Double.init)), "every reading is in the file: \(found.sorted())")
    }

    /// A lost ECG frame left zeros in the channel, which read as a flat line, with nothing to say so; an interrupted
    /// session had no mark where its recording stops. Both are annotated.
    @Test func gapsAndAnInterruptedEndAreAnnotated() {
        var samples: [BiosignalSample] = []
        for (k, start) in [0, 73, 219, 292].enumerated() {  // the chunk at 146 was lost
            let ms = t0 + Int64((Double(start) * 1000 / 130).rounded())
            samples.append(BiosignalSample(timestampMs: ms, bpm: 0, deviceId: "A0", source: "polar_ecg",
                                           gapBefore: start == 219, ecgUv: [Int32](repeating: Int32(k + 1), count: 73),
                                           ecgRateHz: 130))
        }
        samples.append(BiosignalSample(timestampMs: t0 + 2_500, bpm: 60, rrIntervalsMs: [1000], deviceId: "A0", source: "ble_hrm"))
        var s = session(samples)
        s.state = .interrupted
        let text = String(decoding: SessionExport.edf(session: s, samples: samples, events: []), as: UTF8.self)
        // The gap's start (146/130 s) and length (73/130 s), to the millisecond.
        #expect(text.contains("+1.123\u{15}0.562\u{14}ECG gap\u{14}"))
        #expect(text.components(separatedBy: "ECG gap").count == 2, "one gap")
        #expect(text.contains("\u{14}session interrupted\u{14}"))
        s.state = .completed
        let ended = String(decoding: SessionExport.edf(session: s, samples: samples, events: [
            RecordedEvent(type: "session_summary", json: #"{"type":"session_summary"}"#),
        ]), as: UTF8.self)
        #expect(!ended.contains("session interrupted") && ended.contains("session ended"))
    }

    /// ECG past ±32.767 mV    /// ECG past ±32.767 mV    /// ECG past ±32.767 mV (electrodes off, a loose strap: the strap sends 24 bits) was clipped to the 16-bit range
    /// at one µV per step; the range now widens to the fewest whole µV per step that hold the largest value, and a
    /// session within the usual range keeps one µV per step.
    @Test func ecgBeyondSixteenBitsWidensTheRangeInsteadOfClipping() {
        let values: [Int32] = [0, 100_000, -199_900, 32_767, -5, 1_234_567] + [Int32](repeating: 7, count: 124)
        let samples = [
            BiosignalSample(timestampMs: t0, bpm: 0, deviceId: "A0", source: "polar_ecg", ecgUv: values, ecgRateHz: 130),
            BiosignalSample(timestampMs: t0 + 1_000, bpm: 60, rrIntervalsMs: [1000], deviceId: "A0", source: "ble_hrm"),
        ]
        let wide = Read(SessionExport.edf(session: session(samples), samples: samples, events: []))
        let step = (1_234_567.0 / 32767).rounded(.up)
        let got = Array(wide.signal("ECG").prefix(values.count))
        for (v, g) in zip(values, got) { #expect(abs(Double(v) - g) <= step / 2, "\(v) read back as \(g)") }
        #expect(got.max() ?? 0 > 1_000_000, "not clipped at 32767")

        let usual = samples.map { s -> BiosignalSample in
            var s = s
            s.ecgUv = s.ecgUv.map { $0.map { max(-30_000, min(30_000, $0)) } }
            return s
        }
        let exact = Read(SessionExport.edf(session: session(usual), samples: usual, events: []))
        #expect(Array(exact.signal("ECG").prefix(values.count)) == usual[0].ecgUv!.map(Double.init), "one µV per step")
    }

    /// A sample stamped far before the session (a clock mapping gone wrong, an edited recording) does not make the
    /// file begin there: at most `earliestBeforeStartMs` before the session's start.
    @Test func aSampleFarBeforeTheStartDoesNotMoveTheFilesStartThere() {
        let samples = [
            BiosignalSample(timestampMs: t0 - 86_400_000, bpm: 0, deviceId: "A0", source: "polar_ecg",
                            ecgUv: [Int32](repeating: 1, count: 73), ecgRateHz: 130),
            BiosignalSample(timestampMs: t0 + 1_000, bpm: 60, rrIntervalsMs: [1000], deviceId: "A0", source: "ble_hrm"),
        ]
        let bytes = SessionExport.edf(session: session(samples), samples: samples, events: [])
        let records = Int(String(decoding: bytes[236..<244], as: UTF8.self).trimmingCharacters(in: .whitespaces)) ?? 0
        #expect(records > 0 && records <= 10 + 10 + 2, "\(records) one-second records, not a day's")
        // Left out, it is said: annotated at the file's start, and counted for the export command's note (a
        // replayed recording whose clock stepped back lost half its samples from the EDF without a word).
        #expect(SessionExport.edfLeftOut(session: session(samples), samples: samples) == 1)
        #expect(String(decoding: bytes, as: UTF8.self).contains(
            "1 sample stamped before this file's start left out (csv and jsonl exports hold them)"))
        #expect(SessionExport.edfLeftOut(session: session([samples[1]]), samples: [samples[1]]) == 0)
    }
}
