import Foundation
import GatewayEngine
import ReplayProvider
import SimulatedProvider
import Testing

@Suite struct SimulatedProviderTests {
    func collect(_ p: SimulatedBiosignalProvider, clock: ManualSessionClock, seconds: Int64) async throws -> [BiosignalSample] {
        let got = Locked<[BiosignalSample]>([])
        try await p.startStreaming(into: ProviderSink(onSample: { s in got.withLock { $0.append(s) } }))
        clock.advance(byMs: seconds * 1000)
        await p.stopStreaming()
        clock.advance(byMs: 10_000)
        return got.withLock { $0 }
    }

    @Test func sdkMockEmitsAtOnceThenEverySecondWithinTheFormulaBounds() async throws {
        let clock = ManualSessionClock(startMs: 0)
        let samples = try await collect(SimulatedBiosignalProvider(model: .sdkMock, seed: 3, clock: clock), clock: clock, seconds: 20)
        #expect(samples.map(\.timestampMs) == (0...20).map { Int64($0) * 1000 })
        for s in samples {
            let t = Double(s.timestampMs) / 1000
            let center = 72 + 5 * sin(2 * Double.pi * t / 4)
            #expect(abs(s.bpm - center) <= 2.0 + 1e-9)
            #expect(s.rrIntervalsMs == [60000 / s.bpm])
            #expect(s.source == "mock")
            #expect(s.deviceId == nil)
        }
    }

    /// As a strap's does, the simulated strap's last status is `disconnected` once it is stopped: a relay's
    /// `gateway_status`, MQTT's retained device state and the dashboard said `streaming` after the session had ended.
    @Test func stoppingSaysDisconnected() async throws {
        let clock = ManualSessionClock(startMs: 0)
        let states = Locked<[SensorStatus.State]>([])
        let p = SimulatedBiosignalProvider(seed: 2, clock: clock)
        try await p.startStreaming(into: ProviderSink(onSample: { _ in }, onStatus: { s in states.withLock { $0.append(s.state) } }))
        clock.advance(byMs: 3_000)
        await p.stopStreaming()
        #expect(states.withLock { $0 } == [.streaming, .disconnected])
        await p.stopStreaming()
        #expect(states.withLock { $0 }.count == 2, "a second stop says nothing more")
    }

    @Test func aSeedRepeatsExactlyAndAnotherSeedDoesNot() async throws {
        func run(_ seed: UInt64) async throws -> [Double] {
            let clock = ManualSessionClock(startMs: 0)
            return try await collect(SimulatedBiosignalProvider(model: .realistic, seed: seed, clock: clock), clock: clock, seconds: 30)
                .flatMap { $0.rrIntervalsMs ?? [] }
        }
        let a = try await run(7)
        #expect(a == (try await run(7)))
        #expect(a != (try await run(8)))
    }

    @Test func realisticBeatsAddUpToTheElapsedTimeAndVaryWithBreathing() async throws {
        let clock = ManualSessionClock(startMs: 0)
        let physiology = SimulatedBiosignalProvider.Physiology(meanHeartRateBpm: 60, breathingRateBpm: 15, ectopicProbability: 0)
        let samples = try await collect(
            SimulatedBiosignalProvider(model: .realistic, physiology: physiology, seed: 1, clock: clock), clock: clock, seconds: 120)
        let rr = samples.flatMap { $0.rrIntervalsMs ?? [] }
        let total = rr.reduce(0, +)
        #expect(total <= 120_000 && total > 118_000)
        #expect(abs(60000 / (total / Double(rr.count)) - 60) < 4)
        #expect((rr.max()! - rr.min()!) > 50, "respiratory sinus arrhythmia modulates the intervals")
        #expect(samples.allSatisfy { $0.rrRaw1024?.count == $0.rrIntervalsMs?.count })
        #expect(samples.map(\.sequence) == (1...120).map { UInt64($0) })
    }

    @Test func realisticNotificationsCarryTheBeatsOfThePastSecondLikeAStrap() async throws {
        // Around 60 bpm the intervals straddle one second: a strap then sends 0, 1 or 2 RR per notification.
        let clock = ManualSessionClock(startMs: 0)
        let physiology = SimulatedBiosignalProvider.Physiology(meanHeartRateBpm: 60, ectopicProbability: 0.02)
        let samples = try await collect(
            SimulatedBiosignalProvider(model: .realistic, physiology: physiology, seed: 4, clock: clock), clock: clock, seconds: 300)
        let sizes = samples.map { $0.rrIntervalsMs?.count ?? 0 }
        #expect(Set(sizes) == [0, 1, 2], "\(Dictionary(grouping: sizes, by: { $0 }).mapValues(\.count))")
        // Each beat (the running sum of the intervals from the start) ended within the second before the
        // notification that reports it: the intervals follow the clock, whatever their length.
        var beat = 0.0
        for s in samples {
            for rr in s.rrIntervalsMs ?? [] {
                beat += rr
                #expect(beat <= Double(s.timestampMs) && beat > Double(s.timestampMs) - 1000, "\(beat) in \(s.timestampMs)")
            }
        }
        // A beat that spans a notification keeps the interval drawn for it: every compensatory pause (about 1.3 s
        // here) follows its premature beat (about 0.7 s), never a normal one.
        let rr = samples.flatMap { $0.rrIntervalsMs ?? [] }
        let pauses = rr.indices.filter { rr[$0] > 1200 }
        #expect(!pauses.isEmpty)
        #expect(pauses.allSatisfy { $0 > 0 && rr[$0 - 1] < 800 }, "\(pauses.map { rr[max(0, $0 - 1)...$0] })")
    }
}

@Suite struct ReplayProviderTests {
    func tempFile(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("hrg-\(UUID().uuidString)-\(name)").path
    }

    @Test func recordingThenReplayGivesTheSameSamplesShiftedToNow() async throws {
        let path = tempFile("rec.jsonl")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try SampleFileWriter(path: path)
        let original = (0..<5).map { i in
            BiosignalSample(timestampMs: 50_000 + Int64(i) * 1000, bpm: 60 + Double(i), rrIntervalsMs: [1000 - Double(i)],
                            deviceId: "AA", source: "ble_hrm")
        }
        for s in original { writer.append(s) }
        writer.close()

        let clock = ManualSessionClock(startMs: 1_000_000)
        let replay = ReplayBiosignalProvider(path: path, speed: 2, clock: clock)
        let got = Locked<[BiosignalSample]>([])
        let states = Locked<[SensorStatus.State]>([])
        try await replay.startStreaming(into: ProviderSink(
            onSample: { s in got.withLock { $0.append(s) } }, onStatus: { s in states.withLock { $0.append(s.state) } }))
        #expect(got.withLock { $0.count } == 1)
        clock.advance(toMs: 1_000_000 + 1_999)
        #expect(got.withLock { $0.count } == 4, "at speed 2, four seconds of recording arrive in two")
        clock.advance(toMs: 1_000_000 + 2_000)
        let replayed = got.withLock { $0 }
        #expect(replayed.map(\.timestampMs) == (0..<5).map { 1_000_000 + Int64($0) * 1000 })
        #expect(replayed.map(\.rrIntervalsMs) == original.map(\.rrIntervalsMs))
        #expect(states.withLock { $0 } == [.streaming, .disconnected])
    }

    /// A line that is not a sample is skipped and counted, naming the first (one bad line no longer throws the whole
    /// recording away); a file with no sample at all is an error naming its first bad line, or, for the standard
    /// output of `stream`, saying what to replay instead. A truncated tail and a byte order mark are taken in stride.
    @Test func badLinesAreSkippedAndCountedAndATruncatedTailIsSkipped() async throws {
        let bad = tempFile("bad.jsonl")
        let cut = tempFile("cut.jsonl")
        let garbage = tempFile("garbage.jsonl")
        let events = tempFile("events.jsonl")
        defer { for p in [bad, cut, garbage, events] { try? FileManager.default.removeItem(atPath: p) } }
        try "\u{FEFF}{\"timestamp_ms\":1,\"bpm\":60}\n\n{\"timestamp_ms\":2,\"bpm\":\"x\"}\nnot json\n{\"timestamp_ms\":3,\"bpm\":60}\n"
            .write(toFile: bad, atomically: true, encoding: .utf8)
        let read = try SampleFile.read(path: bad)
        #expect(read.samples.map(\.timestampMs) == [1, 3])
        #expect(read.unreadable == 2)
        #expect(read.firstUnreadable == SampleFile.ReadError(path: bad, line: 3, reason: "missing or non-numeric bpm"))
        #expect(read.notes == ["2 unreadable lines skipped (first: line 3, missing or non-numeric bpm)"])

        try "{\"timestamp_ms\":1,\"bpm\":60}\n{\"timestamp_ms\":2,\"bp".write(toFile: cut, atomically: true, encoding: .utf8)
        let tail = try SampleFile.read(path: cut)
        #expect(tail.samples.count == 1)
        #expect(tail.truncatedTail && tail.unreadable == 0)

        try "a,b\n1,2\n".write(toFile: garbage, atomically: true, encoding: .utf8)
        #expect(throws: SampleFile.ReadError.self) { try SampleFile.read(path: garbage) }
        do { _ = try SampleFile.read(path: garbage) } catch { #expect(error.line == 1, "\(error)") }
        let provider = ReplayBiosignalProvider(path: garbage, clock: ManualSessionClock())
        await #expect(throws: SessionError.self) { try await provider.startStreaming(into: ProviderSink(onSample: { _ in })) }

        try "{\"type\":\"session_started\",\"session_id\":\"s\"}\n{\"type\":\"session_frame\",\"seq\":1}\n"
            .write(toFile: events, atomically: true, encoding: .utf8)
        do {
            _ = try SampleFile.read(path: events)
            Issue.record("an event log read as a recording")
        } catch {
            #expect(error.reason.contains("not a recording of samples: record with --record FILE"), "\(error)")
        }
    }

    /// What a recording may hold that cannot be replayed as written: an RR of zero or less is removed and counted, a
    /// sample far behind the ones before it is kept and counted, both said in the replay's status; a timestamp that
    /// is not epoch milliseconds makes its line unreadable (it used to overflow the arithmetic and trap).
    @Test func impossibleValuesInARecordingAreCountedAndSaid() async throws {
        let path = tempFile("odd.jsonl")
        let huge = tempFile("huge.jsonl")
        defer {
            try? FileManager.default.removeItem(atPath: path)
            try? FileManager.default.removeItem(atPath: huge)
        }
        let lines = [
            #"{"timestamp_ms":1000000,"bpm":60,"rr_intervals_ms":[1000]}"#,
            #"{"timestamp_ms":1001000,"bpm":60,"rr_intervals_ms":[-1000,0,990]}"#,
            #"{"timestamp_ms":1000500,"bpm":60}"#,  // behind, but within the tolerance: two devices crossing
            #"{"timestamp_ms":901000,"bpm":60,"rr_intervals_ms":[1000]}"#,
            #"{"timestamp_ms":1002000,"bpm":60,"rr_intervals_ms":[-5,99999]}"#,
        ]
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        let read = try SampleFile.read(path: path)
        #expect(read.samples.count == 5)
        #expect(read.samples.map(\.rrIntervalsMs) == [[1000], [990], nil, [1000], []])
        #expect(read.impossibleRR == 4 && read.impossibleRRFirstLine == 2)
        #expect(read.unreadable == 0 && read.eventLines == 0 && !read.truncatedTail)
        #expect(read.late == 1 && read.lateFirstLine == 4)

        let statuses = Locked<[String]>([])
        let provider = ReplayBiosignalProvider(path: path, clock: ManualSessionClock(startMs: 5_000_000))
        try await provider.startStreaming(into: ProviderSink(
            onSample: { _ in }, onStatus: { s in statuses.withLock { $0.append(s.message ?? "") } }))
        #expect(statuses.withLock { $0.first } == "\(path): 4 RR values of zero or less or over 60 s dropped (first on "
            + "line 2); 1 sample is more than 5 s earlier than one before (first on line 4): replayed in file order and "
            + "recorded, but outside the window of the later samples")
        await provider.stopStreaming()

        try "{\"timestamp_ms\":1,\"bpm\":60}\n{\"timestamp_ms\":-9223372036854775808,\"bpm\":60}\n"
            .write(toFile: huge, atomically: true, encoding: .utf8)
        let odd = try SampleFile.read(path: huge)
        #expect(odd.samples.count == 1)
        #expect(odd.firstUnreadable == SampleFile.ReadError(
            path: huge, line: 2, reason: "timestamp_ms -9223372036854775808 is not epoch milliseconds between 1970 and 9999"))

        // More RR intervals in one sample than a notification carries (a million made every window's sample
        // entropy run for hours, under the engine's lock): skipped and said.
        let many = "[" + Array(repeating: "1000", count: SampleFile.maxRRPerSample + 1).joined(separator: ",") + "]"
        try "{\"timestamp_ms\":1000,\"bpm\":60,\"rr_intervals_ms\":\(many)}\n{\"timestamp_ms\":2000,\"bpm\":60,\"rr_intervals_ms\":[1000]}\n"
            .write(toFile: huge, atomically: true, encoding: .utf8)
        let overfull = try SampleFile.read(path: huge)
        #expect(overfull.samples.map(\.rrIntervalsMs) == [[1000]])
        #expect(overfull.notes.first == "1 sample with more than 128 RR intervals (more than a notification carries) "
            + "skipped (first on line 1)", "\(overfull.notes)")
    }

    /// A line that repeats a sample (a file joined to itself, an editor's paste) was replayed twice, counting its
    /// beats twice; a negative heart rate was taken as one; a ten-hour gap was waited out in silence. Now the repeat is
    /// dropped and counted, the rate makes its line unreadable, and the gap is said.
    @Test func repeatedSamplesImpossibleRatesAndLongGapsAreSaid() throws {
        let path = tempFile("repeats.jsonl")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let lines = [
            #"{"timestamp_ms":1000000,"bpm":60,"rr_intervals_ms":[1000],"device_id":"AA"}"#,
            #"{"timestamp_ms":1001000,"bpm":61,"rr_intervals_ms":[990],"device_id":"AA"}"#,
            #"{"timestamp_ms":1001000,"bpm":61,"rr_intervals_ms":[990],"device_id":"AA"}"#,  // repeated
            #"{"timestamp_ms":1001000,"bpm":70,"device_id":"BB"}"#,  // same time, another device: kept
            #"{"timestamp_ms":1001000,"bpm":62,"rr_intervals_ms":[980],"device_id":"AA"}"#,  // same time, other values: kept
            #"{"timestamp_ms":1002000,"bpm":-5,"device_id":"AA"}"#,
            #"{"timestamp_ms":37002000,"bpm":60,"rr_intervals_ms":[1000],"device_id":"AA"}"#,  // ten hours on
            #"{"timestamp_ms":1000000,"bpm":60,"rr_intervals_ms":[1000],"device_id":"AA"}"#,  // the first again
            #"{"timestamp_ms":37003000,"bpm":60,"rr_intervals_ms":[0,1000],"device_id":"AA"}"#,
            #"{"timestamp_ms":37003000,"bpm":60,"rr_intervals_ms":[0,1000],"device_id":"AA"}"#,  // its 0 counted once
        ]
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        let read = try SampleFile.read(path: path)
        #expect(read.samples.map(\.bpm) == [60, 61, 70, 62, 60, 60])
        #expect(read.repeated == 3 && read.repeatedFirstLine == 3)
        #expect(read.impossibleRR == 1 && read.impossibleRRFirstLine == 9)
        #expect(read.unreadable == 1)
        #expect(read.firstUnreadable?.reason == "bpm -5 is not a heart rate (0 to 1000)")
        #expect(read.longestGapMs == 36_001_000 && read.longestGapLine == 7)
        #expect(read.notes.contains("3 repeated samples (the same as one before) dropped (first on line 3)"), "\(read.notes)")
        #expect(read.notes.contains("a gap of 10 h 0 min before line 7: the replay waits it out (--replay-speed plays it "
            + "faster)"), "\(read.notes)")
        // Read by `hrv`, which plays nothing in time: no replay advice.
        #expect(read.notes(replaying: false).contains("a gap of 10 h 0 min before line 7 (no samples in it)"))
        #expect(!read.notes(replaying: false).contains { $0.contains("replay") })

        // The JSON export (one object holding the session) is named, with the format to use.
        let export = #"{"beats":[],"events":[],"samples":[{"timestamp_ms":1000,"bpm":60}],"session":{"id":"s"}}"#
        try (export + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        #expect(throws: SampleFile.ReadError(path: path, line: 1, reason: "a JSON export (sessions export --format json: "
            + "the whole session in one object), not a recording of one sample per line: export it with --format jsonl "
            + "(or csv, for hr-gateway hrv)")) { try SampleFile.read(path: path) }
    }


    /// A full disk while recording (/dev/full answers every write with ENOSPC): said once in words, every later
    /// sample counted, no crash; and the device is written to, not replaced by a regular file.
    @Test func aRecordingOnAFullDiskStopsSayingWhyAndCountsWhatIsNotWritten() throws {
        let reports = Locked<[String]>([])
        let writer = try SampleFileWriter(path: "/dev/full") { m in reports.withLock { $0.append(m) } }
        for i in 0..<3 { writer.append(BiosignalSample(timestampMs: Int64(i) * 1000, bpm: 60, source: "ble_hrm")) }
        #expect(writer.unwritten == 3)
        writer.close()
        let said = reports.withLock { $0 }
        #expect(said.count == 2, "\(said)")
        #expect(said.first?.contains("/dev/full: No space left on device; the recording stops here") == true, "\(said)")
        #expect(said.last == "--record /dev/full: 3 samples not written to it")
        var st = stat()
        #expect(stat("/dev/full", &st) == 0 && (st.st_mode & S_IFMT) == S_IFCHR, "/dev/full is still the device")
    }
}
