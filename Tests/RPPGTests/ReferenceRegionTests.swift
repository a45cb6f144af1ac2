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
        var boxes: [PixelBox] = []
        for i in 0..<45 {
            let m = try tracker.measure(VideoFrame(layout: layout, bytes: bytes, timestampSeconds: Double(i) / 30))
            wholes.append(try #require(m.whole))
            boxes.append(try #require(m.faceBox))
        }
        // The box did move (by more than the stillness margin)...
        #expect(abs(boxes.last!.x - boxes.first!.x) > 20)
        // ... and the measured green stayed where it was, within a rounding unit.
        let greens = wholes.map(\.g)
        #expect(greens.max()! - greens.min()! < 0.5, "\(greens)")
        // The raw patch did change: the same frame through a tracker at the final box alone is brighter.
        var fresh = FaceROITracker(detector: ScriptedDetector(a: boxes.last!, b: boxes.last!, switchAfterCalls: 0))
        let raw = try #require(try fresh.measure(VideoFrame(layout: layout, bytes: bytes, timestampSeconds: 0)).whole)
        #expect(raw.g - greens.first! > 2, "raw \(raw.g) vs held \(greens.first!)")
    }
}
