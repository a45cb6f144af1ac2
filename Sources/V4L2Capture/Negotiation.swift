/// The mode picked from what a device offers, before the driver has had its say.
public struct FormatChoice: Sendable, Hashable {
    public var fourcc: FourCC
    public var width: UInt32
    public var height: UInt32
    /// `nil` when the driver does not enumerate intervals.
    public var interval: FrameInterval?
    /// The format comes from libv4l2's software conversion.
    public var isEmulated: Bool

    public init(fourcc: FourCC, width: UInt32, height: UInt32, interval: FrameInterval?, isEmulated: Bool) {
        self.fourcc = fourcc
        self.width = width
        self.height = height
        self.interval = interval
        self.isEmulated = isEmulated
    }
}

/// Picks a capture mode from a device's formats: pure logic, no I/O.
public enum FormatNegotiation {
    /// Chooses the format, size and frame interval that best fit `configuration`.
    ///
    /// Candidates are ranked, in order, by: reaching ``CaptureConfiguration/minimumFramesPerSecond``; position in
    /// ``CaptureConfiguration/formatPreference`` (formats not listed are used only if native and uncompressed);
    /// native before emulated; closeness of the pixel count to the preferred size; closeness of the frame rate to
    /// the preferred one. Returns `nil` when no format is usable.
    public static func choose(from formats: [PixelFormatInfo], configuration: CaptureConfiguration) -> FormatChoice? {
        var best: (score: [Double], choice: FormatChoice)? = nil
        for format in formats {
            let rank: Double
            if let index = configuration.formatPreference.firstIndex(of: format.fourcc) {
                rank = Double(index)
            } else if !format.isCompressed && !format.isEmulated {
                rank = Double(configuration.formatPreference.count)
            } else {
                continue
            }
            let sizes = format.sizes.isEmpty
                ? [FrameSize(width: configuration.width, height: configuration.height, intervals: nil)]
                : format.sizes
            for size in sizes {
                let interval = size.intervals.map { bestInterval(in: $0, near: configuration.framesPerSecond) }
                let fps = interval?.framesPerSecond ?? 0
                let tooSlow: Double = fps > 0 && fps < configuration.minimumFramesPerSecond - 0.01 ? 1 : 0
                let targetArea = Double(configuration.width) * Double(configuration.height)
                let area = Double(size.width) * Double(size.height)
                let sizeDistance = abs(area - targetArea) / max(targetArea, 1)
                let edgeDistance = abs(Double(size.width) - Double(configuration.width))
                    + abs(Double(size.height) - Double(configuration.height))
                let fpsDistance = fps > 0 ? abs(fps - configuration.framesPerSecond) : 1e6
                let score = [tooSlow, rank, format.isEmulated ? 1 : 0, sizeDistance, edgeDistance, fpsDistance]
                let choice = FormatChoice(
                    fourcc: format.fourcc, width: size.width, height: size.height,
                    interval: interval, isEmulated: format.isEmulated
                )
                if best == nil || score.lexicographicallyPrecedes(best!.score) { best = (score, choice) }
            }
        }
        return best?.choice
    }

    /// The offered interval whose rate is closest to `fps` (the faster one on a tie); for ranges, `fps` clamped to
    /// the range.
    static func bestInterval(in intervals: FrameIntervals, near fps: Double) -> FrameInterval {
        switch intervals {
        case .discrete(let list):
            return list.min { a, b in
                let (da, db) = (abs(a.framesPerSecond - fps), abs(b.framesPerSecond - fps))
                return da == db ? a.framesPerSecond > b.framesPerSecond : da < db
            } ?? FrameInterval(numerator: 1, denominator: UInt32(fps.rounded()))
        case .stepwise(let minimum, let maximum, _):
            let fastest = minimum.framesPerSecond
            let slowest = maximum.framesPerSecond
            let clamped = min(max(fps, slowest), fastest > 0 ? fastest : fps)
            if clamped.rounded() == clamped { return FrameInterval(numerator: 1, denominator: UInt32(clamped)) }
            return FrameInterval(numerator: 1000, denominator: UInt32((clamped * 1000).rounded()))
        }
    }
}
