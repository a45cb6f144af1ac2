import RPPG
import RPPGSynthetic
import Testing

@Suite struct ROITests {
    static func frame(_ v: SyntheticFaceVideo, at index: Int, format: PixelFormat) -> VideoFrame? {
        var seq = v.frames(format: format)
        var f: VideoFrame?
        for _ in 0...index { f = seq.next() }
        return f
    }

    @Test func badBuffersAreRejectedWithAReason() {
        #expect(throws: VideoFrameError.self) {
            try VideoFrame(width: 641, height: 480, format: .yuyv, bytes: [UInt8](repeating: 0, count: 641 * 480 * 2), timestampSeconds: 0)
        }
        do {
            _ = try VideoFrame(width: 640, height: 480, format: .rgb24, bytes: [UInt8](repeating: 0, count: 1000), timestampSeconds: 0)
            Issue.record("a short buffer was accepted")
        } catch {
            #expect(error.description.contains("921600"))
        }
        #expect(throws: VideoFrameError.self) {
            try VideoFrame(width: 64, height: 63, format: .i420, bytes: [UInt8](repeating: 0, count: 64 * 64 * 2), timestampSeconds: 0)
        }
    }

    @Test(arguments: PixelFormat.allCases)
    func faceBoxAndSkinColourInEveryFormat(_ format: PixelFormat) throws {
        var v = SyntheticFaceVideo()
        v.width = 320
        v.height = 240
        v.breathingRateBpm = nil
        v.heartRateBpm = nil
        v.skin = RGBMean(r: 190, g: 140, b: 110)
        var tracker = FaceROITracker()
        let f = try #require(Self.frame(v, at: 0, format: format))
        let m = tracker.measure(f)
        #expect(m.status == .ok)
        let box = try #require(m.faceBox)
        // The generator's face ellipse: centre (160, 108), semi-axes 51 x 67 px.
        #expect(abs(box.x + box.width / 2 - 160) <= 16)
        #expect(box.width >= 70 && box.width <= 150)
        #expect(box.y >= 108 - 67 - 24 && box.y <= 108 - 67 + 24)
        let whole = try #require(m.whole)
        // Skin texture averages to the base colour; allow for chroma subsampling and rounding.
        #expect(abs(whole.r - 190) <= 6)
        #expect(abs(whole.g - 140) <= 6)
        #expect(abs(whole.b - 110) <= 6)
        #expect(m.forehead != nil && m.leftCheek != nil && m.rightCheek != nil)
        #expect(m.skinSamples > 500)
    }

    @Test func verticalPositionFollowsHeadMotion() throws {
        var v = SyntheticFaceVideo()
        v.width = 320
        v.height = 240
        v.heartRateBpm = nil
        v.breathingRateBpm = 15  // 4 s period: frame 30 is +amplitude, frame 90 is -amplitude
        v.breathingMotionPixels = 3
        v.noiseSigma = 1
        var tracker = FaceROITracker()
        var positions: [Int: Double] = [:]
        var index = 0
        for f in v.frames(format: .yuyv) {
            let m = tracker.measure(f)
            if index == 30 || index == 90 { positions[index] = m.verticalPosition }
            index += 1
            if index > 90 { break }
        }
        let down = try #require(positions[30]), up = try #require(positions[90])
        #expect(abs((down - up) - 6) <= 1.5, "moved \(down - up) px, expected 6")
    }

    @Test func callerOwnedBuffersGiveTheSameResultAsOwnedFrames() throws {
        var v = SyntheticFaceVideo()
        v.width = 160
        v.height = 120
        let f = try #require(Self.frame(v, at: 3, format: .yuyv))
        var a = FaceROITracker(), b = FaceROITracker()
        let owned = a.measure(f)
        let borrowed = try f.bytes.withUnsafeBytes { raw in
            try b.measure(bytes: raw, layout: f.layout, timestampSeconds: f.timestampSeconds)
        }
        #expect(owned == borrowed)
        #expect(owned.status == .ok)
        var estimator = try RPPGEstimator()
        #expect(throws: VideoFrameError.self) {
            try [UInt8](repeating: 0, count: 100).withUnsafeBytes { raw in
                try estimator.process(bytes: raw, layout: FrameLayout(width: 160, height: 120, format: .yuyv), timestampSeconds: 0)
            }
        }
    }

    @Test func blankFrameHasNoFace() throws {
        var tracker = FaceROITracker()
        let bytes = [UInt8](repeating: 0, count: 160 * 120 * 2).enumerated().map { i, _ in UInt8(i % 2 == 0 ? 120 : 160) }
        let m = tracker.measure(try VideoFrame(width: 160, height: 120, format: .yuyv, bytes: bytes, timestampSeconds: 0))
        #expect(m.status == .noFace)
        #expect(m.sample.rgb == nil)
    }
}
