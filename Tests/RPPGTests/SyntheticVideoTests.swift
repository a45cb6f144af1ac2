import RPPG
import RPPGSynthetic
import Testing

/// End-to-end runs on rendered face videos whose pulse and breathing rates are known exactly.
@Suite struct SyntheticVideoTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var format: PixelFormat
        var video: SyntheticFaceVideo
        var testDescription: String { "\(name) (\(format.rawValue))" }
    }

    static func base(hr: Double?, br: Double?) -> SyntheticFaceVideo {
        var v = SyntheticFaceVideo()
        v.width = 240
        v.height = 180
        v.durationSeconds = 34
        v.heartRateBpm = hr
        v.breathingRateBpm = br
        return v
    }

    static let cases: [Case] = {
        var list: [Case] = []
        list.append(Case(name: "clean", format: .yuyv, video: base(hr: 72, br: 15)))
        var v = base(hr: 96, br: 12)
        v.swayPixels = 5
        v.swayHz = 0.3
        v.illuminationSteps = [(9, 0.85), (17, 1.15), (26, 0.9)]
        v.framesPerSecond = 29.5
        v.flickerHz = 120  // aliases to 2.0 Hz (120 bpm) at 29.5 fps
        v.flickerAmplitude = 0.01
        v.noiseSigma = 3
        list.append(Case(name: "motion, illumination steps, 120 Hz flicker aliased into the band", format: .rgb24, video: v))
        v = base(hr: 58, br: 18)
        v.timestampJitterSeconds = 0.008
        v.dropProbability = 0.1
        v.pulseAmplitude = 0.004
        list.append(Case(name: "8 ms jitter, 10 % dropped frames, weaker pulse", format: .i420, video: v))
        v = base(hr: 132, br: 9)
        v.skin = RGBMean(r: 120, g: 80, b: 60)
        v.noiseSigma = 3
        list.append(Case(name: "dark skin, fast pulse, slow breathing", format: .nv12, video: v))
        return list
    }()

    static func run(_ video: SyntheticFaceVideo, format: PixelFormat) throws -> [RPPGEstimate] {
        var estimator = try RPPGEstimator()
        var out: [RPPGEstimate] = []
        for frame in video.frames(format: format) {
            if let e = estimator.process(frame) { out.append(e) }
        }
        return out
    }

    @Test(arguments: cases)
    func pulseAndBreathingMatchTruth(_ c: Case) throws {
        let estimates = try Self.run(c.video, format: c.format)
        let truthHR = try #require(c.video.heartRateBpm)
        let truthBR = try #require(c.video.breathingRateBpm)
        let late = estimates.filter { $0.tSeconds >= 10 }
        #expect(late.count >= 20)
        let confident = late.compactMap(\.hrBpm)
        #expect(Double(confident.count) >= 0.9 * Double(late.count), "confident \(confident.count) of \(late.count)")
        for hr in confident {
            #expect(abs(hr - truthHR) <= 3, "HR \(hr) vs truth \(truthHR)")
        }
        let breathing = estimates.filter { $0.tSeconds >= 30 }
        #expect(!breathing.isEmpty)
        for e in breathing {
            let br = try #require(e.breathingRateBpm, "no breathing reading at \(e.tSeconds) s (confidence \(e.breathingConfidence))")
            #expect(abs(br - truthBR) <= 2, "breathing \(br) vs truth \(truthBR)")
        }
    }

    @Test func firstReadingWithinSixSecondsOfGoodFrames() throws {
        var v = Self.base(hr: 80, br: 15)
        v.durationSeconds = 7
        let estimates = try Self.run(v, format: .yuyv)
        let first = try #require(estimates.first { $0.hrBpm != nil })
        #expect(first.tSeconds <= 6.0)
        #expect(abs(try #require(first.hrBpm) - 80) <= 3)
        // Nothing is claimed before the minimum window has filled.
        for e in estimates where e.tSeconds < 4.99 {
            #expect(e.hrBpm == nil)
            #expect(e.confidence == 0)
        }
    }

    @Test func pulseFreeVideoGivesNoReading() throws {
        var v = Self.base(hr: nil, br: 15)
        v.durationSeconds = 30
        v.swayPixels = 3
        v.illuminationSteps = [(12, 0.9)]
        let estimates = try Self.run(v, format: .yuyv)
        #expect(estimates.count >= 28)
        for e in estimates {
            #expect(e.hrBpm == nil, "claimed \(e.hrBpm ?? 0) bpm at \(e.tSeconds) s with confidence \(e.confidence)")
            #expect(e.confidence < RPPGConfiguration().confidenceThreshold)
        }
    }

    @Test func noBreathingReadingWithoutBreathingMotion() throws {
        var v = Self.base(hr: 70, br: nil)
        v.durationSeconds = 34
        let estimates = try Self.run(v, format: .yuyv)
        let late = estimates.filter { $0.tSeconds >= 25 }
        #expect(!late.isEmpty)
        for e in late {
            #expect(e.breathingRateBpm == nil, "breathing \(e.breathingRateBpm ?? 0) claimed at \(e.tSeconds) s")
        }
        // The pulse itself is still read.
        #expect(late.allSatisfy { $0.hrBpm.map { abs($0 - 70) <= 3 } ?? false })
    }

    @Test func faceLossRestartsTheWindow() throws {
        // 12 s of face, 2 s of empty background frames, then the face again with a 0.3 s dropout at 17 s
        // (short enough to be bridged).
        var v = Self.base(hr: 75, br: 15)
        v.durationSeconds = 22
        var estimator = try RPPGEstimator()
        var estimates: [RPPGEstimate] = []
        let blank = [UInt8](repeating: 0, count: v.width * v.height * 3).enumerated().map { i, _ in
            UInt8([70, 100, 160][i % 3])
        }
        for frame in v.frames(format: .rgb24) {
            let t = frame.timestampSeconds
            let input = (12..<14).contains(t) || (17..<17.3).contains(t)
                ? try VideoFrame(width: v.width, height: v.height, format: .rgb24, bytes: blank, timestampSeconds: t)
                : frame
            if let e = estimator.process(input) { estimates.append(e) }
            if (12.5..<14).contains(t) { #expect(estimator.lastMeasurement?.status == .noFace) }
        }
        let during = estimates.filter { (13...18.9).contains($0.tSeconds) }
        #expect(!during.isEmpty)
        for e in during { #expect(e.hrBpm == nil, "reading at \(e.tSeconds) s less than 5 s after the face came back") }
        let after = estimates.filter { $0.tSeconds >= 20 }
        #expect(!after.isEmpty)
        for e in after { #expect(e.hrBpm.map { abs($0 - 75) <= 3 } ?? false) }
    }
}
