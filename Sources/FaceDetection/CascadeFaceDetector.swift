import CFaceDetect
import RPPG
import Synchronization

/// Why a cascade could not be loaded or run. `code` is stable for scripts and tests; `description` says what to do.
public struct FaceDetectorError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable, Equatable {
        /// The cascade file does not exist (Debian: install opencv-data).
        case cascadeNotFound = "cascade_not_found"
        /// The cascade file exists but cannot be read.
        case cascadeNotReadable = "cascade_not_readable"
        /// The file is not an OpenCV cascade.
        case invalidCascade = "invalid_cascade"
        /// The image size, stride or search region is impossible.
        case badFrame = "bad_frame"
        /// A detection parameter is out of range.
        case badArgument = "bad_argument"
        /// OpenCV raised an error while detecting.
        case openCVError = "opencv_error"
        /// The detector's OpenCV library (libHRGatewayOpenCV.so, or OpenCV's own libraries) could not be loaded.
        case libraryUnavailable = "library_unavailable"
    }

    public let code: Code
    public let description: String

    public init(code: Code, description: String) {
        self.code = code
        self.description = description
    }
}

/// OpenCV's cascade face detector (objdetect: LBP or Haar cascades) through the `CFaceDetect` shim.
///
/// The cascade files come from Debian's `opencv-data` under `/usr/share/opencv4/`. The default is the Haar `alt2`
/// frontal face cascade (20 px window): about 3x the LBP cascade's time per call, but it keeps real faces that the
/// LBP cascade loses, and at 5 Hz the whole per-frame path still runs at about 1 700 frames/s on one core
/// (docs/rppg.md, "Measured speed"). OpenCV runs single-threaded (the shim sets
/// `cv::setNumThreads(1)` for the process): detection takes time from the frame loop, not from other cores.
///
/// Calls are serialised by a mutex; one detector may be shared, but trackers on different threads then wait
/// for each other.
public final class CascadeFaceDetector: FaceDetector {
    /// The Debian package that installs the cascade files.
    public static let cascadePackage = "opencv-data"
    /// The SwiftPM product holding the OpenCV side, loaded on the first cascade (libHRGatewayOpenCV.so).
    public static let libraryProduct = "HRGatewayOpenCV"
    /// The Debian package with OpenCV's objdetect libraries (and headers, for building).
    public static let libraryPackage = "libopencv-objdetect-dev"
    /// The cascade used when none is configured.
    /// Haar `alt2`: on the real dev videos at 160x120 it finds the face on 84-96 % of calls where the LBP cascade
    /// finds 15-85 % (docs/rppg.md, "Cascade choice"), for about 3x the time per call.
    public static let defaultCascadePath = "/usr/share/opencv4/haarcascades/haarcascade_frontalface_alt2.xml"
    /// Other frontal-face cascades from the same package (for `--face-cascade`): the LBP cascade is about 3x
    /// faster but misses more faces; `lbpcascade_frontalface_improved` needs a larger detection image.
    public static let alternativeCascadePaths = [
        "/usr/share/opencv4/lbpcascades/lbpcascade_frontalface.xml",
        "/usr/share/opencv4/lbpcascades/lbpcascade_frontalface_improved.xml",
    ]

    public let cascadePath: String
    public let name: String
    /// Cascade window: the smallest face found, pixels of the image it is given.
    public let windowSize: Int
    /// Pyramid step between scales searched.
    public let scaleFactor: Double
    /// Overlapping hits needed for a face (higher: fewer false faces, more misses).
    public let minimumNeighbours: Int
    /// The loaded cascade. Used only while `state`'s lock is held: OpenCV's classifier must not run two detections
    /// at once. Closed in `deinit`, when no call can be running.
    nonisolated(unsafe) private let cascade: OpaquePointer
    /// Failure counts, and the lock that serialises detection.
    private let state = Mutex(State())

    private struct State {
        var failures = 0
        var lastError: FaceDetectorError?
    }

    /// Loads a cascade file; throws `cascadeNotFound` (with the package to install), `cascadeNotReadable` or
    /// `invalidCascade`.
    public init(
        cascadePath: String = CascadeFaceDetector.defaultCascadePath, scaleFactor: Double = 1.1,
        minimumNeighbours: Int = 3
    ) throws(FaceDetectorError) {
        var handle: OpaquePointer?
        var message = [CChar](repeating: 0, count: 512)
        let rc = cfd_cascade_open(cascadePath, &handle, &message, message.count)
        let text = String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard rc == Int32(CFD_OK.rawValue), let handle else {
            throw Self.error(rc, text, path: cascadePath)
        }
        self.cascadePath = cascadePath
        self.scaleFactor = scaleFactor
        self.minimumNeighbours = minimumNeighbours
        self.windowSize = Int(cfd_cascade_window(handle))
        self.name = "opencv-cascade " + (cascadePath.split(separator: "/").last.map(String.init) ?? cascadePath)
        self.cascade = handle
    }

    deinit { cfd_cascade_close(cascade) }

    /// Detector calls that failed so far, and the last failure.
    public var failures: (count: Int, last: FaceDetectorError?) {
        state.withLock { ($0.failures, $0.lastError) }
    }

    /// Faces in a grey image (`bytesPerRow` bytes per row) inside `search`, largest first. Throws `badFrame` for an
    /// impossible size or a search region smaller than the cascade window, `badArgument` for bad parameters.
    public func detect(
        pixels: UnsafeBufferPointer<UInt8>, width: Int, height: Int, bytesPerRow: Int? = nil,
        search: FaceSearch = FaceSearch()
    ) throws(FaceDetectorError) -> [PixelBox] {
        let stride = bytesPerRow ?? width
        guard width > 0, height > 0, stride >= width, pixels.count >= stride * (height - 1) + width,
              let base = pixels.baseAddress else {
            throw FaceDetectorError(
                code: .badFrame,
                description: "a \(width)x\(height) grey image with \(stride) bytes per row needs "
                    + "\(max(0, stride * (height - 1) + width)) bytes, the buffer has \(pixels.count)")
        }
        let region = search.region ?? PixelBox(x: 0, y: 0, width: Double(width), height: Double(height))
        guard region.x.isFinite, region.y.isFinite, region.width.isFinite, region.height.isFinite else {
            throw FaceDetectorError(code: .badArgument, description: "search region \(region) is not finite")
        }
        // Clip to the image; a region cut smaller than the window at an edge is widened back to the window.
        func span(_ lo: Double, _ length: Double, _ limit: Int) -> (Int, Int) {
            var a = max(0, Int(max(-1e9, lo).rounded(.down))), b = min(limit, Int(min(1e9, lo + length).rounded(.up)))
            if b > a, b - a < windowSize {
                b = min(limit, a + windowSize)
                a = max(0, b - windowSize)
            }
            return (a, b)
        }
        let (x0, x1) = span(region.x, region.width, width)
        let (y0, y1) = span(region.y, region.height, height)
        let rect = cfd_rect(x: Int32(clamping: x0), y: Int32(clamping: y0), width: Int32(clamping: max(0, x1 - x0)),
                            height: Int32(clamping: max(0, y1 - y0)))
        let minSize = max(windowSize, search.minimumSize)
        let maxSize = search.maximumSize > 0 ? max(minSize, search.maximumSize) : 0
        var boxes = [cfd_rect](repeating: cfd_rect(), count: 16)
        var count: Int32 = 0
        var message = [CChar](repeating: 0, count: 512)
        let cascade = self.cascade
        let rc = state.withLock { _ in
            cfd_cascade_detect(
                cascade, base, Int32(clamping: width), Int32(clamping: height), Int32(clamping: stride), rect,
                Int32(clamping: minSize), Int32(clamping: maxSize), scaleFactor, Int32(clamping: minimumNeighbours),
                &boxes, Int32(boxes.count), &count, &message, message.count)
        }
        guard rc == Int32(CFD_OK.rawValue) else {
            let text = String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            throw Self.error(rc, text, path: cascadePath)
        }
        return boxes.prefix(Int(min(count, Int32(boxes.count))))
            .map { PixelBox(x: Double($0.x), y: Double($0.y), width: Double($0.width), height: Double($0.height)) }
            .sorted { $0.width * $0.height > $1.width * $1.height }
    }

    /// ``FaceDetector``: a failed call (for example a search region smaller than the window at the image edge)
    /// reports no face and is counted in ``failures``.
    public func detectFaces(in image: GreyImage, search: FaceSearch) -> [PixelBox] {
        let result = image.pixels.withUnsafeBufferPointer { buf in
            Result { () throws(FaceDetectorError) in
                try detect(pixels: buf, width: image.width, height: image.height, search: search)
            }
        }
        switch result {
        case .success(let boxes):
            return boxes
        case .failure(let error):
            state.withLock {
                $0.failures += 1
                $0.lastError = error
            }
            return []
        }
    }

    static func error(_ rc: Int32, _ message: String, path: String) -> FaceDetectorError {
        switch UInt32(bitPattern: rc) {
        case CFD_FILE_NOT_FOUND.rawValue:
            return FaceDetectorError(
                code: .cascadeNotFound,
                description: "face cascade \(path) not found. It comes with the Debian package \(cascadePackage): "
                    + "sudo apt-get install \(cascadePackage) (or point --face-cascade at another OpenCV cascade file)")
        case CFD_FILE_NOT_READABLE.rawValue:
            return FaceDetectorError(code: .cascadeNotReadable, description: "face cascade \(message)")
        case CFD_INVALID_CASCADE.rawValue:
            return FaceDetectorError(code: .invalidCascade, description: "face cascade \(message)")
        case CFD_BAD_FRAME.rawValue:
            return FaceDetectorError(code: .badFrame, description: message)
        case CFD_BAD_ARGUMENT.rawValue:
            return FaceDetectorError(code: .badArgument, description: message)
        case CFD_LIBRARY_UNAVAILABLE.rawValue:
            return FaceDetectorError(
                code: .libraryUnavailable,
                description: message + ". It is built beside hr-gateway by `swift build` (or `swift build "
                    + "--product \(libraryProduct)`) and needs OpenCV's libraries: sudo apt-get install "
                    + "\(libraryPackage); HR_GATEWAY_OPENCV_LIBRARY=PATH names it explicitly")
        default:
            return FaceDetectorError(code: .openCVError, description: message)
        }
    }
}
