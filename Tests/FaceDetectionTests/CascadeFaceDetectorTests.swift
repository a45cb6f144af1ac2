import FaceDetection
import Foundation
import RPPG
import RPPGSynthetic
import Testing

/// The OpenCV cascade through the shim: loading errors, bad images, and that it finds a rendered face where the
/// skin-blob search is fooled by a skin-coloured wall. Needs opencv-data (scripts/test installs it).
@Suite struct CascadeFaceDetectorTests {
    static func firstFrame(_ v: SyntheticFaceVideo, format: PixelFormat) throws -> VideoFrame {
        var seq = v.frames(format: format)
        let first = seq.next()
        return try #require(first)
    }

    /// `detect` on an array, keeping the typed error.
    static func detect(
        _ d: CascadeFaceDetector, _ pixels: [UInt8], _ width: Int, _ height: Int, bytesPerRow: Int? = nil,
        search: FaceSearch = FaceSearch()
    ) throws(FaceDetectorError) -> [PixelBox] {
        let result = pixels.withUnsafeBufferPointer { buf in
            Result { () throws(FaceDetectorError) in
                try d.detect(pixels: buf, width: width, height: height, bytesPerRow: bytesPerRow, search: search)
            }
        }
        return try result.get()
    }

    /// Luma of an RGB24 frame, as the tracker feeds the detector (without the shrinking).
    static func grey(_ f: VideoFrame) -> [UInt8] {
        (0..<(f.width * f.height)).map { i in
            let r = Int(f.bytes[3 * i]), g = Int(f.bytes[3 * i + 1]), b = Int(f.bytes[3 * i + 2])
            return UInt8((77 * r + 150 * g + 29 * b) >> 8)
        }
    }

    /// A 640x480 scene: the detailed face (semi-axes about 77 x 101 px, centred at (320, 216)) in front of a wall of
    /// the same skin colour that fills the rest of the picture.
    static func skinWallScene() -> SyntheticFaceVideo {
        var v = SyntheticFaceVideo()
        v.width = 640
        v.height = 480
        v.durationSeconds = 3
        v.faceStyle = .detailed
        v.faceScale = 0.75
        v.background = v.skin
        v.breathingRateBpm = nil
        return v
    }

    @Test func missingCascadeNamesThePackage() {
        do {
            _ = try CascadeFaceDetector(cascadePath: "/nonexistent/opencv4/lbpcascade_frontalface.xml")
            Issue.record("a missing cascade loaded")
        } catch {
            #expect(error.code == .cascadeNotFound)
            #expect(error.description.contains("opencv-data"))
            #expect(error.description.contains("/nonexistent/opencv4/lbpcascade_frontalface.xml"))
        }
    }

    @Test func directoryAndGarbageAreNotCascades() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cfd-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(throws: FaceDetectorError(code: .cascadeNotReadable, description: "face cascade \(dir.path): not a readable file")) {
            try CascadeFaceDetector(cascadePath: dir.path)
        }
        let junk = dir.appendingPathComponent("junk.xml")
        try Data("<?xml version=\"1.0\"?>\n<opencv_storage><nothing/></opencv_storage>\n".utf8).write(to: junk)
        do {
            _ = try CascadeFaceDetector(cascadePath: junk.path)
            Issue.record("a file without a cascade loaded")
        } catch {
            #expect(error.code == .invalidCascade)
            #expect(error.description.contains(junk.path))
        }
    }

    @Test func badImagesAndArgumentsAreTypedErrors() throws {
        let d = try CascadeFaceDetector()
        #expect(d.windowSize == 20)  // haarcascade_frontalface_alt2's window
        let pixels = [UInt8](repeating: 128, count: 100 * 80)
        // Buffer too small for the size, zero size, a stride shorter than a row.
        for (w, h, stride) in [(100, 81, 100), (0, 80, 0), (100, 40, 50)] {
            do {
                _ = try Self.detect(d, pixels, w, h, bytesPerRow: stride)
                Issue.record("\(w)x\(h) stride \(stride) was accepted")
            } catch {
                #expect(error.code == .badFrame, "\(error)")
            }
        }
        do {
            _ = try Self.detect(d, pixels, 100, 81)
        } catch {
            #expect(error.description.contains("8100"), "\(error)")
            #expect(error.description.contains("8000"), "\(error)")
        }
        // Smaller than the cascade window, and a search region outside the image.
        do {
            _ = try Self.detect(d, pixels, 19, 19)
            Issue.record("a 19x19 image was searched with a 20 px window")
        } catch {
            #expect(error.code == .badFrame)
        }
        do {
            _ = try Self.detect(d, pixels, 100, 80, search: FaceSearch(region: PixelBox(x: 200, y: 10, width: 50, height: 50)))
            Issue.record("a search region outside the image was accepted")
        } catch {
            #expect(error.code == .badFrame)
        }
        // A flat grey image is searched and holds no face.
        #expect(try Self.detect(d, pixels, 100, 80).isEmpty)
        let bad = try CascadeFaceDetector(scaleFactor: 0.9)
        do {
            _ = try Self.detect(bad, pixels, 100, 80)
            Issue.record("scale factor 0.9 was accepted")
        } catch {
            #expect(error.code == .badArgument)
        }
        // Through the protocol a failure is no face, counted.
        #expect(bad.detectFaces(in: GreyImage(width: 100, height: 80, pixels: pixels), search: FaceSearch()).isEmpty)
        #expect(bad.failures.count == 1)
        #expect(bad.failures.last?.code == .badArgument)
    }

    @Test func findsTheRenderedFace() throws {
        let v = Self.skinWallScene()
        let f = try Self.firstFrame(v, format: .rgb24)
        let d = try CascadeFaceDetector()
        let g = Self.grey(f)
        let faces = try Self.detect(d, g, f.width, f.height)
        let face = try #require(faces.first)
        #expect(abs(face.x + face.width / 2 - 320) < 20, "\(faces)")
        #expect(abs(face.y + face.height / 2 - 216) < 40, "\(faces)")
        #expect(face.width > 100 && face.width < 240, "\(faces)")
    }

    /// The skin-blob search takes the wall for the face; the detector-driven tracker keeps the box on the face.
    @Test(arguments: [PixelFormat.yuyv, .rgb24, .nv12])
    func skinColouredWallDoesNotCaptureTheROI(_ format: PixelFormat) throws {
        let v = Self.skinWallScene()
        let frames = Array(v.frames(format: format).prefix(30))

        var blob = FaceROITracker()
        var blobBox: PixelBox?
        for f in frames { blobBox = blob.measure(f).faceBox }
        let wrong = try #require(blobBox)
        #expect(wrong.width > 400, "the skin-blob box \(wrong) should have grown over the wall")

        var tracker = FaceROITracker(detector: try CascadeFaceDetector())
        var last: ROIMeasurement?
        for f in frames {
            let m = tracker.measure(f)
            #expect(m.faceBox != nil)
            last = m
        }
        let m = try #require(last)
        let box = try #require(m.faceBox)
        #expect(m.status == .ok)
        #expect(abs(box.x + box.width / 2 - 320) < 20, "\(box)")
        #expect(box.width > 100 && box.width < 240, "\(box)")
        #expect(tracker.detectorName.contains("haarcascade_frontalface_alt2.xml"))
        // 30 frames at 30 fps, detection every 0.2 s: 5 detections, the rest tracked.
        #expect(tracker.stats.framesDetected == 5)
        #expect(tracker.stats.framesTracked == 25)
        #expect(tracker.stats.framesNoFace == 0)
        // The box is held still while the detection jitters.
        #expect(m.boxSource == .tracked)
    }
}
