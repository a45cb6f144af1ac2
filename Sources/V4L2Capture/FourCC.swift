import CV4L2

/// A V4L2 pixel format code: four ASCII characters packed little-endian (`V4L2_PIX_FMT_*`).
public struct FourCC: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: UInt32

    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// Packs four ASCII characters, e.g. `FourCC("YUYV")`. Returns `nil` unless `code` is exactly four ASCII bytes.
    public init?(_ code: String) {
        let bytes = Array(code.utf8)
        guard bytes.count == 4, bytes.allSatisfy({ $0 < 0x80 }) else { return nil }
        rawValue = UInt32(bytes[0]) | UInt32(bytes[1]) << 8 | UInt32(bytes[2]) << 16 | UInt32(bytes[3]) << 24
    }

    /// The four characters, with trailing spaces kept (`"BGR3"`, `"Y8  "` shows as written by the kernel).
    public var description: String {
        let bytes = (0..<4).map { UInt8(truncatingIfNeeded: rawValue >> (8 * $0)) }
        if bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7f }) { return String(decoding: bytes, as: UTF8.self) }
        return "0x" + String(rawValue, radix: 16)
    }

    /// Packed YUV 4:2:2, two bytes per pixel (Y0 U Y1 V). The preferred capture format: no decode, no compression.
    public static let yuyv = FourCC(rawValue: CV4L2_PIX_FMT_YUYV)
    public static let uyvy = FourCC(rawValue: CV4L2_PIX_FMT_UYVY)
    /// Motion JPEG: one JPEG image per buffer, variable size.
    public static let mjpeg = FourCC(rawValue: CV4L2_PIX_FMT_MJPEG)
    public static let jpeg = FourCC(rawValue: CV4L2_PIX_FMT_JPEG)
    /// Three bytes per pixel, R G B.
    public static let rgb24 = FourCC(rawValue: CV4L2_PIX_FMT_RGB24)
    /// Three bytes per pixel, B G R.
    public static let bgr24 = FourCC(rawValue: CV4L2_PIX_FMT_BGR24)
    public static let yuv420 = FourCC(rawValue: CV4L2_PIX_FMT_YUV420)
    public static let nv12 = FourCC(rawValue: CV4L2_PIX_FMT_NV12)
    public static let grey = FourCC(rawValue: CV4L2_PIX_FMT_GREY)
    public static let h264 = FourCC(rawValue: CV4L2_PIX_FMT_H264)
}
