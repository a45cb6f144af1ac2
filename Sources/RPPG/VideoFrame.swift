/// Pixel layouts a camera or decoder can hand to the estimator.
public enum PixelFormat: String, Sendable, CaseIterable {
    /// Packed 4:2:2, bytes `Y0 U Y1 V` per pixel pair (V4L2 `YUYV`). Read without conversion.
    case yuyv
    /// Packed 8-bit `R G B` per pixel (ffmpeg `rgb24`, V4L2 `RGB3`).
    case rgb24
    /// Planar 4:2:0: full-size Y plane, then quarter-size U plane, then quarter-size V plane (V4L2 `YU12`).
    case i420
    /// Semi-planar 4:2:0: full-size Y plane, then one quarter-size plane of interleaved `U V` pairs.
    case nv12

    /// Bytes per pixel of the first (or only) plane.
    var bytesPerPixel: Int {
        switch self {
        case .yuyv: return 2
        case .rgb24: return 3
        case .i420, .nv12: return 1
        }
    }
}

/// Size and memory layout of one frame, without the pixels.
public struct FrameLayout: Sendable, Equatable {
    public var width: Int
    public var height: Int
    public var format: PixelFormat
    /// Bytes from the start of one row of the first plane to the next (V4L2 `bytesperline`).
    /// Planar formats must be tightly packed (`bytesPerRow == width`).
    public var bytesPerRow: Int

    public init(width: Int, height: Int, format: PixelFormat, bytesPerRow: Int? = nil) {
        self.width = width
        self.height = height
        self.format = format
        self.bytesPerRow = bytesPerRow ?? width * format.bytesPerPixel
    }

    /// Bytes a buffer must hold for this layout.
    public var byteCount: Int {
        switch format {
        case .yuyv, .rgb24: return bytesPerRow * height
        case .i420, .nv12: return width * height + 2 * ((width / 2) * (height / 2))
        }
    }

    /// Checks the layout against a buffer size; the error says which rule is broken.
    public func validate(bufferCount: Int) throws(VideoFrameError) {
        guard width >= 16, height >= 16, width <= 16384, height <= 16384 else {
            throw VideoFrameError("frame size \(width)x\(height) is outside 16x16 ... 16384x16384")
        }
        switch format {
        case .yuyv:
            guard width % 2 == 0 else { throw VideoFrameError("YUYV frames need an even width, got \(width)") }
        case .i420, .nv12:
            guard width % 2 == 0, height % 2 == 0 else {
                throw VideoFrameError("\(format.rawValue) frames need an even width and height, got \(width)x\(height)")
            }
            guard bytesPerRow == width else {
                throw VideoFrameError("\(format.rawValue) frames must be tightly packed (bytesPerRow \(bytesPerRow) != width \(width))")
            }
        case .rgb24:
            break
        }
        guard bytesPerRow >= width * format.bytesPerPixel else {
            throw VideoFrameError("bytesPerRow \(bytesPerRow) is smaller than one row of \(format.rawValue) pixels (\(width * format.bytesPerPixel))")
        }
        guard bufferCount >= byteCount else {
            throw VideoFrameError("a \(width)x\(height) \(format.rawValue) frame needs \(byteCount) bytes, the buffer has \(bufferCount)")
        }
    }
}

/// A frame whose buffer does not match its declared layout.
public struct VideoFrameError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// One raw camera frame with its capture time. Owns its bytes; a capture loop that must avoid the copy can call
/// ``RPPGEstimator/process(bytes:layout:timestampSeconds:)`` on its own buffer instead.
public struct VideoFrame: Sendable {
    public let layout: FrameLayout
    public let bytes: [UInt8]
    /// Capture time in seconds on any monotonic clock (V4L2 buffer timestamp, or frame index / fps offline).
    public let timestampSeconds: Double

    public var width: Int { layout.width }
    public var height: Int { layout.height }
    public var format: PixelFormat { layout.format }

    /// Wraps a buffer, checking that it is large enough for the layout.
    public init(layout: FrameLayout, bytes: [UInt8], timestampSeconds: Double) throws(VideoFrameError) {
        try layout.validate(bufferCount: bytes.count)
        guard timestampSeconds.isFinite else { throw VideoFrameError("timestamp \(timestampSeconds) is not finite") }
        self.layout = layout
        self.bytes = bytes
        self.timestampSeconds = timestampSeconds
    }

    public init(
        width: Int, height: Int, format: PixelFormat, bytes: [UInt8], timestampSeconds: Double
    ) throws(VideoFrameError) {
        try self.init(layout: FrameLayout(width: width, height: height, format: format), bytes: bytes,
                      timestampSeconds: timestampSeconds)
    }
}
