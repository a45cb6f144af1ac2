/// An 8-bit grey image, row-major and tightly packed: what a face detector looks at.
public struct GreyImage: Sendable, Equatable {
    public var width: Int
    public var height: Int
    public var pixels: [UInt8]

    public init(width: Int, height: Int, pixels: [UInt8]) {
        self.width = width
        self.height = height
        self.pixels = pixels
    }
}

/// Where and at which sizes a detector should look, in the grey image's pixels.
public struct FaceSearch: Sendable, Equatable {
    /// The part of the image to search; `nil` searches the whole image.
    public var region: PixelBox?
    /// Smallest face side to report, pixels (0: the detector's own minimum).
    public var minimumSize: Int
    /// Largest face side to report, pixels (0: no limit).
    public var maximumSize: Int

    public init(region: PixelBox? = nil, minimumSize: Int = 0, maximumSize: Int = 0) {
        self.region = region
        self.minimumSize = minimumSize
        self.maximumSize = maximumSize
    }
}

/// Finds faces in a downscaled grey frame. ``FaceROITracker`` calls it a few times per second and holds the box in
/// between. The `FaceDetection` target implements it with OpenCV's cascade classifier; tests can inject their own.
public protocol FaceDetector: Sendable {
    /// Short name for reports, e.g. `opencv-cascade haarcascade_frontalface_alt2.xml`.
    var name: String { get }
    /// Faces in `image` within `search`, in the image's pixels. A detector that fails on an image reports no face
    /// (and counts the failure itself).
    func detectFaces(in image: GreyImage, search: FaceSearch) -> [PixelBox]
}

/// What the tracker did so far, for summaries (`analyze --json`) and benchmarks.
public struct FaceTrackingStats: Sendable, Equatable {
    /// Frames measured.
    public var frames = 0
    /// Calls to the face detector (a tracking search that misses is followed by a whole-frame search: two calls).
    public var detectorCalls = 0
    /// Frames on which the detector ran and found the face.
    public var framesDetected = 0
    /// Frames measured in a box held from an earlier detection (between detections, or over a brief miss).
    public var framesTracked = 0
    /// Frames without a face box.
    public var framesNoFace = 0
    /// Frames with status ``ROIStatus/moving``.
    public var framesMoving = 0
    /// Frames with a face box whose forehead and cheeks too few samples passed the skin-colour test (a greyscale
    /// video, a strong colour cast, coloured light): status ``ROIStatus/tooFewSkinPixels``.
    public var framesTooFewSkinPixels = 0
    /// Frames whose skin was too dark to measure (``ROIStatus/tooDark``).
    public var framesTooDark = 0
    /// Frames whose face box was clipped white (``ROIStatus/tooBright``).
    public var framesTooBright = 0

    public init() {}
}
