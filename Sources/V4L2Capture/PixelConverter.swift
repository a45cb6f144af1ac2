import CV4L2

/// Converts frame buffers between pixel formats with libv4lconvert, without a device (for example MJPEG or YUYV to
/// RGB24).
///
/// Not thread-safe: use one converter per thread or task.
public final class PixelConverter {
    private let converter: OpaquePointer

    /// Returns `nil` if libv4lconvert cannot be set up.
    public init?() {
        guard let converter = CV4L2_converter_create() else { return nil }
        self.converter = converter
    }

    deinit { CV4L2_converter_destroy(converter) }

    /// Converts one frame to `destination` (default RGB24) at the same size.
    ///
    /// - Parameter bytesPerLine: the source row stride; 0 lets libv4lconvert assume packed rows.
    /// - Returns: the converted bytes, or `nil` with ``lastError`` set when libv4lconvert fails (a corrupt JPEG, an
    ///   unsupported pair of formats).
    public func convert(
        _ source: [UInt8], fourcc: FourCC, width: Int, height: Int, bytesPerLine: Int = 0,
        to destination: FourCC = .rgb24
    ) -> [UInt8]? {
        var sourceFormat = v4l2_format()
        sourceFormat.type = captureBufferType
        sourceFormat.fmt.pix.width = UInt32(width)
        sourceFormat.fmt.pix.height = UInt32(height)
        sourceFormat.fmt.pix.pixelformat = fourcc.rawValue
        sourceFormat.fmt.pix.field = V4L2_FIELD_NONE.rawValue
        sourceFormat.fmt.pix.bytesperline = UInt32(bytesPerLine)
        sourceFormat.fmt.pix.sizeimage = UInt32(source.count)

        let bytesPerPixel = destination == .rgb24 || destination == .bgr24 ? 3 : 2
        var destinationFormat = sourceFormat
        destinationFormat.fmt.pix.pixelformat = destination.rawValue
        destinationFormat.fmt.pix.bytesperline = UInt32(width * bytesPerPixel)
        destinationFormat.fmt.pix.sizeimage = UInt32(width * height * bytesPerPixel)

        var output = [UInt8](repeating: 0, count: width * height * bytesPerPixel)
        let written = source.withUnsafeBytes { src in
            output.withUnsafeMutableBytes { dst in
                CV4L2_converter_convert(
                    converter, &sourceFormat, &destinationFormat, src.baseAddress, CInt(src.count),
                    dst.baseAddress, CInt(dst.count)
                )
            }
        }
        guard written >= 0 else { return nil }
        return Array(output.prefix(Int(written)))
    }

    /// libv4lconvert's message for the last failure.
    public var lastError: String {
        CV4L2_converter_error(converter).map { String(cString: $0) } ?? ""
    }
}
