import Testing
@testable import V4L2Capture

private func format(
    _ fourcc: FourCC, compressed: Bool = false, emulated: Bool = false, _ sizes: [(UInt32, UInt32, [Double])]
) -> PixelFormatInfo {
    PixelFormatInfo(
        fourcc: fourcc, description: "\(fourcc)", isCompressed: compressed, isEmulated: emulated,
        sizes: sizes.map { w, h, rates in
            FrameSize(
                width: w, height: h,
                intervals: rates.isEmpty ? nil : .discrete(rates.map { FrameInterval(numerator: 1, denominator: UInt32($0)) })
            )
        }
    )
}

@Suite struct NegotiationTests {
    let defaults = CaptureConfiguration()

    @Test func prefersNativeYUYVAt640x480And30fps() throws {
        let formats = [
            format(.mjpeg, compressed: true, [(1280, 720, [30]), (640, 480, [30])]),
            format(.yuyv, [(1280, 720, [10]), (640, 480, [30, 15]), (320, 240, [30])]),
            format(.rgb24, emulated: true, [(640, 480, [30])]),
        ]
        let choice = try #require(FormatNegotiation.choose(from: formats, configuration: defaults))
        #expect(choice == FormatChoice(
            fourcc: .yuyv, width: 640, height: 480, interval: FrameInterval(numerator: 1, denominator: 30),
            isEmulated: false
        ))
    }

    @Test func frameRateOutranksSizeButNotFormat() throws {
        // YUYV 640×480 manages only 10 fps; a smaller YUYV mode at 30 fps beats both the slow mode and RGB24.
        let formats = [
            format(.yuyv, [(640, 480, [10]), (320, 240, [30])]),
            format(.rgb24, emulated: true, [(640, 480, [30])]),
        ]
        let choice = try #require(FormatNegotiation.choose(from: formats, configuration: defaults))
        #expect(choice.fourcc == .yuyv)
        #expect(choice.width == 320 && choice.height == 240)
    }

    @Test func slowYUYVLosesToConvertedRGBThatReachesTheMinimumRate() throws {
        let formats = [
            format(.yuyv, [(640, 480, [10])]),
            format(.rgb24, emulated: true, [(640, 480, [30])]),
        ]
        let choice = try #require(FormatNegotiation.choose(from: formats, configuration: defaults))
        #expect(choice.fourcc == .rgb24)
        #expect(choice.isEmulated)
    }

    @Test func mjpegOnlyCameraFallsBackToLibv4lRGB24() throws {
        let formats = [
            format(.mjpeg, compressed: true, [(640, 480, [30])]),
            format(.rgb24, emulated: true, [(640, 480, [30])]),
            format(.bgr24, emulated: true, [(640, 480, [30])]),
        ]
        let choice = try #require(FormatNegotiation.choose(from: formats, configuration: defaults))
        #expect(choice.fourcc == .rgb24 && choice.isEmulated)
    }

    @Test func compressedFormatsOnlyWhenAskedFor() throws {
        let formats = [format(.mjpeg, compressed: true, [(640, 480, [30])])]
        #expect(FormatNegotiation.choose(from: formats, configuration: defaults) == nil)
        var config = defaults
        config.formatPreference = [.yuyv, .mjpeg, .rgb24]
        #expect(FormatNegotiation.choose(from: formats, configuration: config)?.fourcc == .mjpeg)
    }

    @Test func anyUncompressedNativeFormatIsTheLastResort() throws {
        let formats = [
            format(.h264, compressed: true, [(640, 480, [30])]),
            format(.grey, [(640, 480, [30])]),
        ]
        #expect(FormatNegotiation.choose(from: formats, configuration: defaults)?.fourcc == .grey)
        #expect(FormatNegotiation.choose(from: [formats[0]], configuration: defaults) == nil)
        #expect(FormatNegotiation.choose(from: [], configuration: defaults) == nil)
    }

    @Test func closestRateWinsAndFasterBreaksTies() {
        let rates: FrameIntervals = .discrete([15, 25, 60].map { FrameInterval(numerator: 1, denominator: $0) })
        #expect(FormatNegotiation.bestInterval(in: rates, near: 30).framesPerSecond == 25)
        let tie: FrameIntervals = .discrete([20, 40].map { FrameInterval(numerator: 1, denominator: $0) })
        #expect(FormatNegotiation.bestInterval(in: tie, near: 30).framesPerSecond == 40)
    }

    @Test func stepwiseIntervalsAreClampedToTheRange() {
        let range = FrameIntervals.stepwise(
            minimum: FrameInterval(numerator: 1, denominator: 20),  // fastest: 20 fps
            maximum: FrameInterval(numerator: 1, denominator: 1),
            step: FrameInterval(numerator: 1, denominator: 1_000_000)
        )
        #expect(FormatNegotiation.bestInterval(in: range, near: 30).framesPerSecond == 20)
        #expect(FormatNegotiation.bestInterval(in: range, near: 12.5).framesPerSecond == 12.5)
    }

    @Test func driverWithoutSizeEnumerationGetsThePreferredSize() throws {
        let formats = [PixelFormatInfo(fourcc: .yuyv, description: "YUYV", sizes: [])]
        let choice = try #require(FormatNegotiation.choose(from: formats, configuration: defaults))
        #expect(choice.width == 640 && choice.height == 480 && choice.interval == nil)
    }

    @Test func followsAConfiguredSizeAndRate() throws {
        var config = defaults
        (config.width, config.height, config.framesPerSecond, config.minimumFramesPerSecond) = (1280, 720, 60, 50)
        let formats = [format(.yuyv, [(640, 480, [30, 60]), (1280, 720, [30, 60])])]
        let choice = try #require(FormatNegotiation.choose(from: formats, configuration: config))
        #expect(choice.width == 1280 && choice.interval?.framesPerSecond == 60)
    }
}
