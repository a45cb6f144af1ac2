import Testing
import V4L2Capture

@Suite struct ConverterTests {
    /// One YUYV macropixel (two pixels) per entry: Y0 U Y1 V.
    private func yuyv(_ pixels: [(UInt8, UInt8, UInt8, UInt8)]) -> [UInt8] {
        pixels.flatMap { [$0.0, $0.1, $0.2, $0.3] }
    }

    @Test func neutralChromaKeepsLumaInAllChannels() throws {
        let converter = try #require(PixelConverter())
        // 4×2 frame, U = V = 128 (no colour), varied luma.
        let lumas: [UInt8] = [16, 60, 128, 200, 235, 90, 30, 255]
        let source = yuyv(stride(from: 0, to: 8, by: 2).map { (lumas[$0], 128, lumas[$0 + 1], 128) })
        let rgb = try #require(converter.convert(source, fourcc: .yuyv, width: 4, height: 2, bytesPerLine: 8),
                               "\(converter.lastError)")
        #expect(rgb.count == 4 * 2 * 3)
        for (i, y) in lumas.enumerated() {
            #expect(Array(rgb[i * 3..<i * 3 + 3]) == [y, y, y], "pixel \(i)")
        }
    }

    /// libv4lconvert uses shift-and-add approximations of the BT.601 coefficients, so the chroma contribution is
    /// checked to within 15 % (plus rounding) rather than exactly.
    @Test func chromaFollowsBT601Approximately() throws {
        let converter = try #require(PixelConverter())
        // Strong red chroma (V high, U low) and strong blue chroma on mid grey.
        let source = yuyv([(128, 90, 128, 200), (128, 200, 128, 90), (128, 128, 128, 128), (128, 128, 128, 128)])
        let rgb = try #require(converter.convert(source, fourcc: .yuyv, width: 4, height: 2, bytesPerLine: 8))
        func bt601(_ y: Double, _ u: Double, _ v: Double) -> [Double] {
            [y + 1.402 * (v - 128), y - 0.344 * (u - 128) - 0.714 * (v - 128), y + 1.772 * (u - 128)]
                .map { min(max($0, 0), 255) }
        }
        let expectations = [bt601(128, 90, 200), bt601(128, 200, 90)]
        for (pixel, expected) in [(0, expectations[0]), (2, expectations[1])] {
            let got = rgb[pixel * 3..<pixel * 3 + 3].map(Double.init)
            for channel in 0..<3 {
                let tolerance = 0.15 * abs(expected[channel] - 128) + 2
                #expect(abs(got[channel] - expected[channel]) <= tolerance, "pixel \(pixel) channel \(channel): \(got) vs \(expected)")
            }
        }
        #expect(rgb[0] > rgb[2], "red chroma must make R exceed B")
        #expect(rgb[8] > rgb[6], "blue chroma must make B exceed R")
    }

    @Test func truncatedSourceFailsWithAMessage() throws {
        let converter = try #require(PixelConverter())
        let result = converter.convert([1, 2, 3], fourcc: .mjpeg, width: 640, height: 480)
        #expect(result == nil)
        #expect(!converter.lastError.isEmpty)
    }
}
