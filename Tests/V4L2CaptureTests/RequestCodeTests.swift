import CV4L2
import Testing
@testable import V4L2Capture

/// The kernel's `_IOC` encoding (asm-generic/ioctl.h): direction in bits 30–31, size in 16–29, type in 8–15,
/// number in 0–7. Direction: 1 = write (_IOW), 2 = read (_IOR), 3 = both (_IOWR).
private func ioc(_ direction: UInt, _ number: UInt, _ size: Int) -> UInt {
    direction << 30 | UInt(size) << 16 | UInt(UInt8(ascii: "V")) << 8 | number
}

private let (write, read, readWrite): (UInt, UInt, UInt) = (1, 2, 3)

@Suite struct RequestCodeTests {
    @Test func structureSizesMatchTheKernelABI() {
        // Sizes from the x86-64 / arm64 kernel ABI (videodev2.h with 64-bit longs and timevals).
        #expect(MemoryLayout<v4l2_capability>.size == 104)
        #expect(MemoryLayout<v4l2_fmtdesc>.size == 64)
        #expect(MemoryLayout<v4l2_format>.size == 208)
        #expect(MemoryLayout<v4l2_buffer>.size == 88)
        #expect(MemoryLayout<v4l2_requestbuffers>.size == 20)
        #expect(MemoryLayout<v4l2_streamparm>.size == 204)
        #expect(MemoryLayout<v4l2_querymenu>.size == 44)
    }

    @Test(arguments: [
        (V4L2Request.queryCapability, ioc(read, 0, MemoryLayout<v4l2_capability>.size)),
        (.enumerateFormat, ioc(readWrite, 2, MemoryLayout<v4l2_fmtdesc>.size)),
        (.getFormat, ioc(readWrite, 4, MemoryLayout<v4l2_format>.size)),
        (.setFormat, ioc(readWrite, 5, MemoryLayout<v4l2_format>.size)),
        (.requestBuffers, ioc(readWrite, 8, MemoryLayout<v4l2_requestbuffers>.size)),
        (.queryBuffer, ioc(readWrite, 9, MemoryLayout<v4l2_buffer>.size)),
        (.queueBuffer, ioc(readWrite, 15, MemoryLayout<v4l2_buffer>.size)),
        (.dequeueBuffer, ioc(readWrite, 17, MemoryLayout<v4l2_buffer>.size)),
        (.streamOn, ioc(write, 18, MemoryLayout<CInt>.size)),
        (.streamOff, ioc(write, 19, MemoryLayout<CInt>.size)),
        (.getParameters, ioc(readWrite, 21, MemoryLayout<v4l2_streamparm>.size)),
        (.setParameters, ioc(readWrite, 22, MemoryLayout<v4l2_streamparm>.size)),
        (.getControl, ioc(readWrite, 27, MemoryLayout<v4l2_control>.size)),
        (.setControl, ioc(readWrite, 28, MemoryLayout<v4l2_control>.size)),
        (.queryControl, ioc(readWrite, 36, MemoryLayout<v4l2_queryctrl>.size)),
        (.queryMenu, ioc(readWrite, 37, MemoryLayout<v4l2_querymenu>.size)),
        (.enumerateFrameSizes, ioc(readWrite, 74, MemoryLayout<v4l2_frmsizeenum>.size)),
        (.enumerateFrameIntervals, ioc(readWrite, 75, MemoryLayout<v4l2_frmivalenum>.size)),
    ])
    func requestCodeMatchesIOCEncoding(request: V4L2Request, expected: UInt) {
        #expect(request.code == expected, "\(request.name)")
    }

    @Test func wellKnownRequestValues() {
        // As printed by the kernel docs and strace for 64-bit builds.
        #expect(V4L2Request.queryCapability.code == 0x8068_5600)
        #expect(V4L2Request.streamOn.code == 0x4004_5612)
        #expect(V4L2Request.dequeueBuffer.code == 0xC058_5611)
    }

    @Test(arguments: [
        (FourCC.yuyv, "YUYV"), (.uyvy, "UYVY"), (.mjpeg, "MJPG"), (.jpeg, "JPEG"), (.rgb24, "RGB3"), (.bgr24, "BGR3"),
        (.yuv420, "YU12"), (.nv12, "NV12"), (.grey, "GREY"), (.h264, "H264"),
    ])
    func fourccMatchesKernelDefinition(fourcc: FourCC, code: String) {
        #expect(FourCC(code) == fourcc)
        #expect(fourcc.description == code)
    }

    @Test func fourccPacksLittleEndian() {
        #expect(FourCC.yuyv.rawValue == 0x5659_5559)
        #expect(FourCC("YUY") == nil)
        #expect(FourCC("YUYVV") == nil)
        #expect(FourCC(rawValue: 0x0000_0001).description == "0x1")
    }

    @Test func controlIDsMatchKernelValues() {
        // V4L2_CID_BASE = 0x00980900 (user class), V4L2_CID_CAMERA_CLASS_BASE = 0x009a0900.
        #expect(CV4L2_CID_BRIGHTNESS == 0x0098_0900)
        #expect(CV4L2_CID_AUTO_WHITE_BALANCE == 0x0098_0900 + 12)
        #expect(CV4L2_CID_EXPOSURE == 0x0098_0900 + 17)
        #expect(CV4L2_CID_AUTOGAIN == 0x0098_0900 + 18)
        #expect(CV4L2_CID_GAIN == 0x0098_0900 + 19)
        #expect(CV4L2_CID_POWER_LINE_FREQUENCY == 0x0098_0900 + 24)
        #expect(CV4L2_CID_WHITE_BALANCE_TEMPERATURE == 0x0098_0900 + 26)
        #expect(CV4L2_CID_BACKLIGHT_COMPENSATION == 0x0098_0900 + 28)
        #expect(CV4L2_CID_EXPOSURE_AUTO == 0x009A_0901)
        #expect(CV4L2_CID_EXPOSURE_ABSOLUTE == 0x009A_0902)
        #expect(CV4L2_CID_EXPOSURE_AUTO_PRIORITY == 0x009A_0903)
        #expect(CV4L2_CTRL_FLAG_NEXT_CTRL == 0x8000_0000)
    }
}
