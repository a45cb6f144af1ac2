import Foundation
import Synchronization
import Testing
@testable import RPPG

/// The two guards against light that is not a pulse: a peak the scene beside the face shares is distrusted, and a
/// face box that moves does not put a step into the measured colour.
@Suite struct ReferenceRegionTests {
    /// Face colour with a 1.5 Hz component; `flicker` adds a 1.5 Hz component of the same phase to the background
    /// (a lamp or a screen that lights both), otherwise the background carries a 0.4 Hz drift only.
    static func trace(flicker: Bool, seconds: Double = 20, fs: Double = 30) -> [RPPGSample] {
        (0..<Int(seconds * fs)).map { i in
            let t = Double(i) / fs
            let wave = sin(2 * Double.pi * 1.5 * t)
            let face = RGBMean(r: 150 + 0.3 * wave, g: 110 + 0.6 * wave, b: 95 + 0.2 * wave)
            let bgWave = flicker ? wave : sin(2 * Double.pi * 0.4 * t)
            let background = RGBMean(r: 90 + 0.5 * bgWave, g: 90 + 0.5 * bgWave, b: 90 + 0.5 * bgWave)
            return RPPGSample(tSeconds: t, rgb: face, background: background)
        }
    }

    static func run(_ samples: [RPPGSample]) throws -> [RPPGEstimate] {
        var e = try RPPGEstimator()
        return samples.compactMap { e.append($0) }.filter { $0.windowSeconds >= 9.9 }
    }

    @Test func aPeakTheBackgroundSharesIsNotReported() throws {
        let clean = try Self.run(Self.trace(flicker: false))
        let flickering = try Self.run(Self.trace(flicker: true))
        #expect(!clean.isEmpty && clean.count == flickering.count)
        // Same face signal: read at 90 bpm when the background is quiet at that rate...
        for e in clean {
            let hr = try #require(e.hrBpm, "\(e)")
            #expect(abs(hr - 90) < 1)
            #expect((e.backgroundShare ?? 1) < 0.2)
        }
        // ... and withheld when the background flickers at the same rate.
        for e in flickering {
            #expect(e.hrBpm == nil, "\(e)")
            #expect((e.backgroundShare ?? 0) > 0.9)
            #expect(abs((e.candidateHrBpm ?? 0) - 90) < 1)
        }
    }

    @Test func aQuietWallDoesNotVetoThePulse() throws {
        // The wall's only component sits at the pulse rate (as sensor noise or a faint reflection might), but at a
        // thousandth of the face's amplitude: it cannot explain the face's peak.
        let samples = Self.trace(flicker: false).map { s -> RPPGSample in
            let wave = sin(2 * Double.pi * 1.5 * s.tSeconds)
            let faint = 90 + 0.0005 * wave
            return RPPGSample(tSeconds: s.tSeconds, rgb: s.rgb, background: RGBMean(r: faint, g: faint, b: faint))
        }
        let estimates = try Self.run(samples)
        #expect(!estimates.isEmpty)
        #expect(estimates.allSatisfy { $0.backgroundShare == 0 && $0.hrBpm != nil }, "\(estimates.first!)")
    }

    @Test func withoutABackgroundTheRuleIsNotApplied() throws {
        let samples = Self.trace(flicker: true).map { RPPGSample(tSeconds: $0.tSeconds, rgb: $0.rgb) }
        let estimates = try Self.run(samples)
        #expect(!estimates.isEmpty)
        #expect(estimates.allSatisfy { $0.backgroundShare == nil && $0.hrBpm != nil })
    }

    /// Returns box A until `switchAt` seconds, then box B (given in full-frame pixels; the tracker shrinks frames
    /// by 4 for detection, so the boxes are handed back at a quarter of their size).
    struct ScriptedDetector: FaceDetector {
        let a: PixelBox
        let b: PixelBox
        let switchAfterCalls: Int
        let calls = Counter()
        var name: String { "scripted" }
        func detectFaces(in image: GreyImage, search: FaceSearch) -> [PixelBox] {
            let box = calls.next() < switchAfterCalls ? a : b
            return [PixelBox(x: box.x / 4, y: box.y / 4, width: box.width / 4, height: box.height / 4)]
        }
    }

    /// A thread-safe call counter (the detector protocol is `Sendable`).
    final class Counter: Sendable {
        private let value = Mutex(0)
        func next() -> Int { value.withLock { v in defer { v += 1 }; return v } }
    }

    /// Pixels at the skin test's red limit that drop in and out from frame to frame (a still photo seen by a noisy
    /// sensor) move the per-frame skin mean along red at the rate they flicker; the mean over the mask held with the
    /// box does not follow them.
    @Test func pixelsAtTheSkinLimitDoNotMoveTheHeldMask() throws {
        let width = 640, height = 480
        let layout = FrameLayout(width: width, height: height, format: .rgb24)
        let box = PixelBox(x: 200, y: 120, width: 200, height: 240)
        var tracker = FaceROITracker(detector: ScriptedDetector(a: box, b: box, switchAfterCalls: 0))
        var wholes: [Double] = [], helds: [Double] = []
        for i in 0..<90 {
            let t = Double(i) / 30
            // A patch of the cheek at the limit (a tenth of the face); of its pixels, a share swinging at 1.2 Hz
            // just outside it.
            let outside = 0.5 + 0.4 * sin(2 * Double.pi * 1.2 * t)
            var bytes = [UInt8](repeating: 0, count: width * height * 3)
            for y in 120..<360 {
                for x in 200..<400 {
                    let k = (y * width + x) * 3
                    let atLimit = (240..<300).contains(x) && (220..<280).contains(y)
                    // Skin: Cr 154; at the limit: Cr 173 (in) or 174 (out), one unit of red apart.
                    let out = atLimit && Double((x * 31 + y * 17 + i * 7) % 100) / 100 < outside
                    bytes[k] = atLimit ? (out ? 190 : 189) : 150
                    bytes[k + 1] = 100
                    bytes[k + 2] = 85
                }
            }
            let m = try tracker.measure(VideoFrame(layout: layout, bytes: bytes, timestampSeconds: t))
            wholes.append(try #require(m.whole).r)
            helds.append(try #require(m.frozen).r)
        }
        let wholeSwing = wholes.max()! - wholes.min()!, heldSwing = helds.max()! - helds.min()!
        #expect(wholeSwing > 2, "the per-frame mask's red swings: \(wholeSwing)")
        #expect(heldSwing < wholeSwing / 10, "held \(heldSwing) against per-frame \(wholeSwing)")
    }

    /// A rhythm whose colour change is blood's is kept with the colour check; one along red against green (as the
    /// skin test's limit, or a screen, moves the colour) is withheld with it and kept without it.
    @Test func theColourCheckWithholdsAPulseWhoseColourIsNotBlood() throws {
        func trace(_ direction: (r: Double, g: Double, b: Double)) -> [RPPGSample] {
            (0..<600).map { i in
                let t = Double(i) / 30
                let w = 0.004 * sin(2 * Double.pi * 1.3 * t)
                let c = RGBMean(r: 150 * (1 + direction.r * w), g: 110 * (1 + direction.g * w), b: 95 * (1 + direction.b * w))
                return RPPGSample(tSeconds: t, rgb: c, frozen: c)
            }
        }
        func run(_ samples: [RPPGSample], check: Bool) throws -> [RPPGEstimate] {
            var config = RPPGConfiguration()
            if check { config.colourAngleToleranceDegrees = RPPGConfiguration.colourCheckToleranceDegrees }
            var e = try RPPGEstimator(configuration: config)
            return samples.compactMap { e.append($0) }.filter { $0.windowSeconds >= 9.9 }
        }
        let blood = trace((0.33, 0.77, 0.53)), red = trace((0.8, -0.5, -0.1))
        for (name, samples, kept) in [("blood", blood, true), ("red against green", red, false)] {
            let unchecked = try run(samples, check: false), checked = try run(samples, check: true)
            #expect(!unchecked.isEmpty && unchecked.allSatisfy { abs(($0.hrBpm ?? 0) - 78) < 1 }, "\(name): \(unchecked.first!)")
            let angle = try #require(checked.first?.colourAngleDegrees)
            #expect(kept ? abs(angle) < 5 : abs(angle) > 120, "\(name): \(angle)°")
            #expect(checked.allSatisfy { ($0.hrBpm != nil) == kept }, "\(name): \(checked.first!)")
        }
    }

    @Test func aMovingBoxDoesNotStepTheMeasuredColour() throws {
        // A skin-coloured frame whose brightness rises from left to right: a box moved to the right measures a
        // brighter patch, a step of several units unless the move is compensated.
        let width = 640, height = 480
        var bytes = [UInt8](repeating: 0, count: width * height * 3)
        for y in 0..<height {
            for x in 0..<width {
                let k = (y * width + x) * 3
                let lift = Double(x) / Double(width) * 60
                bytes[k] = UInt8(150 + lift * 0.8)
                bytes[k + 1] = UInt8(100 + lift * 0.6)
                bytes[k + 2] = UInt8(85 + lift * 0.5)
            }
        }
        let layout = FrameLayout(width: width, height: height, format: .rgb24)
        let detector = ScriptedDetector(a: PixelBox(x: 200, y: 120, width: 200, height: 240),
                                        b: PixelBox(x: 260, y: 120, width: 200, height: 240), switchAfterCalls: 3)
        var tracker = FaceROITracker(detector: detector)
        var wholes: [RGBMean] = []
        var helds: [RGBMean] = []
        var boxes: [PixelBox] = []
        for i in 0..<45 {
            let m = try tracker.measure(VideoFrame(layout: layout, bytes: bytes, timestampSeconds: Double(i) / 30))
            wholes.append(try #require(m.whole))
            helds.append(try #require(m.frozen))
            boxes.append(try #require(m.faceBox))
        }
        // The box did move (by more than the stillness margin)...
        #expect(abs(boxes.last!.x - boxes.first!.x) > 20)
        // ... and the measured green stayed where it was, within a rounding unit, on the held mask too.
        let greens = wholes.map(\.g)
        #expect(greens.max()! - greens.min()! < 0.5, "\(greens)")
        let heldGreens = helds.map(\.g)
        #expect(heldGreens.max()! - heldGreens.min()! < 0.5, "\(heldGreens)")
        // The raw patch did change: the same frame through a tracker at the final box alone is brighter.
        var fresh = FaceROITracker(detector: ScriptedDetector(a: boxes.last!, b: boxes.last!, switchAfterCalls: 0))
        let raw = try #require(try fresh.measure(VideoFrame(layout: layout, bytes: bytes, timestampSeconds: 0)).whole)
        #expect(raw.g - greens.first! > 2, "raw \(raw.g) vs held \(greens.first!)")
    }
}
