import CV4L2
import Foundation
import V4L2Capture

/// A scripted V4L2 driver behind the ``V4L2System`` seam: formats, controls, buffers and frames in memory, with
/// injectable errnos and a trace of every call. For tests of code that captures from a camera:
///
/// ```swift
/// let fake = FakeV4L2(nodes: ["/dev/video0": .tiny()])
/// let camera = try V4L2Camera.open("/dev/video0", configuration: config, system: fake)
/// let frames = try camera.startStreaming()
/// fake.deliver([.numbered(0), .numbered(1)])
/// ```
// @unchecked Sendable: all mutable state is guarded by `condition` (an NSCondition used as the lock).
package final class FakeV4L2: V4L2System, @unchecked Sendable {
    package struct Format {
        package var fourcc: FourCC
        package var description: String
        package var flags: UInt32 = 0
        /// (width, height, intervals as (numerator, denominator)).
        package var sizes: [(UInt32, UInt32, [(UInt32, UInt32)])]

        package init(
            fourcc: FourCC, description: String, flags: UInt32 = 0, sizes: [(UInt32, UInt32, [(UInt32, UInt32)])]
        ) {
            self.fourcc = fourcc
            self.description = description
            self.flags = flags
            self.sizes = sizes
        }
    }

    package struct Control {
        package var id: UInt32
        package var name: String
        package var type: ControlType
        package var minimum: Int32
        package var maximum: Int32
        package var step: Int32 = 1
        package var defaultValue: Int32
        package var value: Int32
        package var flags: UInt32 = 0
        package var menu: [UInt32: String] = [:]

        package init(
            id: UInt32, name: String, type: ControlType, minimum: Int32, maximum: Int32, step: Int32 = 1,
            defaultValue: Int32, value: Int32, flags: UInt32 = 0, menu: [UInt32: String] = [:]
        ) {
            self.id = id
            self.name = name
            self.type = type
            self.minimum = minimum
            self.maximum = maximum
            self.step = step
            self.defaultValue = defaultValue
            self.value = value
            self.flags = flags
            self.menu = menu
        }
    }

    package struct Node {
        package var capabilities: UInt32 = UInt32(V4L2_CAP_VIDEO_CAPTURE | V4L2_CAP_STREAMING)
        package var driver = "fakecam"
        package var card = "Fake Camera"
        package var bus = "usb-0000:00:14.0-1"
        package var formats: [Format] = [
            Format(fourcc: .yuyv, description: "YUYV 4:2:2", sizes: [(640, 480, [(1, 30), (1, 15)]), (320, 240, [(1, 30)])]),
            Format(
                fourcc: .mjpeg, description: "Motion-JPEG", flags: UInt32(V4L2_FMT_FLAG_COMPRESSED),
                sizes: [(1280, 720, [(1, 30)])]
            ),
        ]
        package var controls: [Control] = []
        package var openErrno: CInt? = nil
        package var maxBuffers: UInt32 = 8

        package init() {}

        /// A camera with one tiny YUYV mode (8×4 at 30 fps) so frames are 64 bytes.
        package static func tiny(controls: [Control] = []) -> Self {
            var node = Self()
            node.formats = [Format(fourcc: .yuyv, description: "YUYV 4:2:2", sizes: [(8, 4, [(1, 30)])])]
            node.controls = controls
            return node
        }
    }

    package struct Frame {
        package var sequence: UInt32
        package var bytes: [UInt8]
        package var flags: UInt32 = UInt32(V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC)
        package var timestamp: (Int, Int) = (0, 0)

        package init(
            sequence: UInt32, bytes: [UInt8], flags: UInt32 = UInt32(V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC),
            timestamp: (Int, Int) = (0, 0)
        ) {
            self.sequence = sequence
            self.bytes = bytes
            self.flags = flags
            self.timestamp = timestamp
        }

        /// A 64-byte frame whose bytes and timestamp (1000 + sequence + 0.5 s) derive from its sequence number.
        package static func numbered(
            _ sequence: UInt32, flags: UInt32 = UInt32(V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC)
        ) -> Self {
            Self(
                sequence: sequence, bytes: (0..<64).map { UInt8(truncatingIfNeeded: Int(sequence) * 3 + $0) },
                flags: flags, timestamp: (1000 + Int(sequence), 500_000)
            )
        }
    }

    /// Fail the `skip + 1`-th call of `operation` (and the `times - 1` after it) with `errno`.
    package struct Injection {
        package var operation: String
        package var errno: CInt
        package var skip: Int = 0
        package var times: Int = 1

        package init(operation: String, errno: CInt, skip: Int = 0, times: Int = 1) {
            self.operation = operation
            self.errno = errno
            self.skip = skip
            self.times = times
        }
    }

    private let condition = NSCondition()
    private var nodes: [String: Node]
    private var openFDs: [CInt: String] = [:]
    private var nextFD: CInt = 10
    private var injections: [Injection] = []
    private var pending: [Frame] = []
    private var alwaysReadable = false
    private var forcedPollEvents: CShort? = nil
    private var format = v4l2_format()
    private var timePerFrame = v4l2_fract(numerator: 1, denominator: 30)
    private var bufferLength = 0
    private var bufferCount: UInt32 = 0
    private var queued: [UInt32] = []
    private var mappings: [Int64: UnsafeMutableRawPointer] = [:]
    private var streaming = false
    private var _trace: [String] = []
    private var _controlWrites: [(id: UInt32, value: Int32)] = []
    private var _mapped: [UnsafeMutableRawPointer] = []
    private var _unmapped: [UnsafeMutableRawPointer] = []

    package init(nodes: [String: Node] = ["/dev/video0": Node()]) {
        self.nodes = nodes
    }

    deinit {
        for address in mappings.values { address.deallocate() }
    }

    // MARK: Test controls

    package func inject(_ injection: Injection) { locked { injections.append(injection) } }

    /// Makes frames available to DQBUF and wakes a waiting poll.
    package func deliver(_ frames: [Frame]) {
        locked { pending.append(contentsOf: frames) }
        condition.broadcast()
    }

    /// Poll reports readiness even with no frame pending (so DQBUF runs and injected errors surface).
    package func setAlwaysReadable() {
        locked { alwaysReadable = true }
        condition.broadcast()
    }

    /// Every following poll returns these events at once (e.g. `POLLERR | POLLHUP` for an unplugged camera).
    package func setPollEvents(_ revents: CShort) {
        locked { forcedPollEvents = revents }
        condition.broadcast()
    }

    package var trace: [String] { locked { _trace } }
    /// The trace without polls.
    package var calls: [String] { trace.filter { $0 != "poll" } }
    package var controlWrites: [(id: UInt32, value: Int32)] { locked { _controlWrites } }
    package var mapped: [UnsafeMutableRawPointer] { locked { _mapped } }
    package var unmapped: [UnsafeMutableRawPointer] { locked { _unmapped } }
    package var openDescriptors: Int { locked { openFDs.count } }
    package func value(of control: UInt32) -> Int32? {
        locked { nodes.values.first!.controls.first { $0.id == control }?.value }
    }

    private func locked<T>(_ body: () -> T) -> T {
        condition.lock()
        defer { condition.unlock() }
        return body()
    }

    /// Records the call and returns an injected errno if one is due. Call with the lock held.
    private func record(_ name: String) -> CInt? {
        _trace.append(name)
        for i in injections.indices where injections[i].operation == name {
            if injections[i].skip > 0 {
                injections[i].skip -= 1
                continue
            }
            if injections[i].times > 0 {
                injections[i].times -= 1
                return injections[i].errno
            }
        }
        return nil
    }

    // MARK: V4L2System

    package func deviceNodes() -> [String] { locked { nodes.keys.sorted() } }

    package func open(_ path: String, flags: CInt) -> Result<CInt, Errno> {
        locked {
            if let errno = record("open") { return .failure(Errno(errno)) }
            guard let node = nodes[path] else { return .failure(Errno(ENOENT)) }
            if let errno = node.openErrno { return .failure(Errno(errno)) }
            nextFD += 1
            openFDs[nextFD] = path
            return .success(nextFD)
        }
    }

    package func close(_ fd: CInt) -> Result<Void, Errno> {
        locked {
            if let errno = record("close") { return .failure(Errno(errno)) }
            guard openFDs.removeValue(forKey: fd) != nil else { return .failure(Errno(EBADF)) }
            return .success(())
        }
    }

    package func mmap(_ fd: CInt, length: Int, offset: Int64) -> Result<UnsafeMutableRawPointer, Errno> {
        locked {
            if let errno = record("mmap") { return .failure(Errno(errno)) }
            guard mappings[offset] == nil, length == bufferLength else { return .failure(Errno(EINVAL)) }
            let address = UnsafeMutableRawPointer.allocate(byteCount: length, alignment: 16)
            mappings[offset] = address
            _mapped.append(address)
            return .success(address)
        }
    }

    package func munmap(_ address: UnsafeMutableRawPointer, length: Int) -> Result<Void, Errno> {
        locked {
            if let errno = record("munmap") { return .failure(Errno(errno)) }
            guard let key = mappings.first(where: { $0.value == address })?.key else { return .failure(Errno(EINVAL)) }
            mappings.removeValue(forKey: key)
            address.deallocate()
            _unmapped.append(address)
            return .success(())
        }
    }

    package func poll(_ fd: CInt, timeoutMilliseconds: CInt) -> Result<CShort, Errno> {
        condition.lock()
        defer { condition.unlock() }
        if let errno = record("poll") { return .failure(Errno(errno)) }
        let deadline = Date(timeIntervalSinceNow: Double(timeoutMilliseconds) / 1000)
        while pending.isEmpty && !alwaysReadable && forcedPollEvents == nil {
            if !condition.wait(until: deadline) { return .success(0) }
        }
        if let forcedPollEvents { return .success(forcedPollEvents) }
        return .success(CShort(POLLIN))
    }

    package func monotonicNow() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    package func ioctl(_ fd: CInt, _ request: V4L2Request, _ argument: UnsafeMutableRawPointer) -> Result<Void, Errno> {
        locked {
            if let errno = record(request.name) { return .failure(Errno(errno)) }
            guard let path = openFDs[fd], let node = nodes[path] else { return .failure(Errno(EBADF)) }
            if let errno = handle(request, argument, node: node, path: path) { return .failure(Errno(errno)) }
            return .success(())
        }
    }

    // MARK: Driver behaviour (lock held)

    private func handle(_ request: V4L2Request, _ arg: UnsafeMutableRawPointer, node: Node, path: String) -> CInt? {
        switch request {
        case .queryCapability:
            let cap = arg.assumingMemoryBound(to: v4l2_capability.self)
            cap.pointee = v4l2_capability()
            write(node.driver, to: &cap.pointee.driver)
            write(node.card, to: &cap.pointee.card)
            write(node.bus, to: &cap.pointee.bus_info)
            cap.pointee.version = 6 << 16 | 1 << 8 | 0
            cap.pointee.capabilities = node.capabilities | UInt32(V4L2_CAP_DEVICE_CAPS)
            cap.pointee.device_caps = node.capabilities
            return nil

        case .enumerateFormat:
            let desc = arg.assumingMemoryBound(to: v4l2_fmtdesc.self)
            let index = Int(desc.pointee.index)
            guard index < node.formats.count else { return EINVAL }
            let f = node.formats[index]
            desc.pointee.pixelformat = f.fourcc.rawValue
            desc.pointee.flags = f.flags
            write(f.description, to: &desc.pointee.description)
            return nil

        case .enumerateFrameSizes:
            let size = arg.assumingMemoryBound(to: v4l2_frmsizeenum.self)
            guard let f = node.formats.first(where: { $0.fourcc.rawValue == size.pointee.pixel_format }),
                Int(size.pointee.index) < f.sizes.count
            else { return EINVAL }
            let s = f.sizes[Int(size.pointee.index)]
            size.pointee.type = V4L2_FRMSIZE_TYPE_DISCRETE.rawValue
            size.pointee.discrete = v4l2_frmsize_discrete(width: s.0, height: s.1)
            return nil

        case .enumerateFrameIntervals:
            let ival = arg.assumingMemoryBound(to: v4l2_frmivalenum.self)
            guard let f = node.formats.first(where: { $0.fourcc.rawValue == ival.pointee.pixel_format }),
                let s = f.sizes.first(where: { $0.0 == ival.pointee.width && $0.1 == ival.pointee.height }),
                Int(ival.pointee.index) < s.2.count
            else { return EINVAL }
            let i = s.2[Int(ival.pointee.index)]
            ival.pointee.type = V4L2_FRMIVAL_TYPE_DISCRETE.rawValue
            ival.pointee.discrete = v4l2_fract(numerator: i.0, denominator: i.1)
            return nil

        case .setFormat:
            let fmt = arg.assumingMemoryBound(to: v4l2_format.self)
            let wanted = fmt.pointee.fmt.pix
            let f = node.formats.first { $0.fourcc.rawValue == wanted.pixelformat } ?? node.formats[0]
            let size = f.sizes.first { $0.0 == wanted.width && $0.1 == wanted.height } ?? f.sizes[0]
            var pix = v4l2_pix_format()
            pix.width = size.0
            pix.height = size.1
            pix.pixelformat = f.fourcc.rawValue
            pix.field = V4L2_FIELD_NONE.rawValue
            let bpp: UInt32 = f.fourcc == .rgb24 ? 3 : (f.fourcc == .yuyv ? 2 : 0)
            pix.bytesperline = size.0 * bpp
            pix.sizeimage = bpp > 0 ? size.0 * size.1 * bpp : size.0 * size.1
            fmt.pointee.fmt.pix = pix
            format = fmt.pointee
            bufferLength = Int(pix.sizeimage)
            return nil

        case .setParameters, .getParameters:
            let parm = arg.assumingMemoryBound(to: v4l2_streamparm.self)
            if request == .setParameters { timePerFrame = parm.pointee.parm.capture.timeperframe }
            parm.pointee.parm.capture.capability = UInt32(V4L2_CAP_TIMEPERFRAME)
            parm.pointee.parm.capture.timeperframe = timePerFrame
            return nil

        case .requestBuffers:
            let req = arg.assumingMemoryBound(to: v4l2_requestbuffers.self)
            if req.pointee.count == 0 {
                guard !streaming else { return EBUSY }
                bufferCount = 0
                queued = []
                return nil
            }
            guard bufferLength > 0 else { return EINVAL }
            req.pointee.count = min(req.pointee.count, node.maxBuffers)
            bufferCount = req.pointee.count
            return nil

        case .queryBuffer:
            let buf = arg.assumingMemoryBound(to: v4l2_buffer.self)
            guard buf.pointee.index < bufferCount else { return EINVAL }
            buf.pointee.length = UInt32(bufferLength)
            buf.pointee.m.offset = buf.pointee.index * 0x10_0000
            return nil

        case .queueBuffer:
            let buf = arg.assumingMemoryBound(to: v4l2_buffer.self)
            guard buf.pointee.index < bufferCount, !queued.contains(buf.pointee.index) else { return EINVAL }
            queued.append(buf.pointee.index)
            return nil

        case .dequeueBuffer:
            guard streaming else { return EINVAL }
            guard !pending.isEmpty, !queued.isEmpty else { return EAGAIN }
            let frame = pending.removeFirst()
            let index = queued.removeFirst()
            let buf = arg.assumingMemoryBound(to: v4l2_buffer.self)
            guard let address = mappings[Int64(index) * 0x10_0000] else { return EFAULT }
            let count = min(frame.bytes.count, bufferLength)
            frame.bytes.withUnsafeBytes { address.copyMemory(from: $0.baseAddress!, byteCount: count) }
            buf.pointee.index = index
            buf.pointee.bytesused = UInt32(count)
            buf.pointee.flags = frame.flags
            buf.pointee.sequence = frame.sequence
            buf.pointee.timestamp = timeval(tv_sec: frame.timestamp.0, tv_usec: frame.timestamp.1)
            buf.pointee.length = UInt32(bufferLength)
            return nil

        case .streamOn:
            guard bufferCount > 0 else { return EINVAL }
            streaming = true
            return nil

        case .streamOff:
            streaming = false
            queued = []
            return nil

        case .queryControl:
            let query = arg.assumingMemoryBound(to: v4l2_queryctrl.self)
            let raw = query.pointee.id
            let next = raw & CV4L2_CTRL_FLAG_NEXT_CTRL != 0
            let id = raw & ~CV4L2_CTRL_FLAG_NEXT_CTRL
            let sorted = node.controls.sorted { $0.id < $1.id }
            guard let c = next ? sorted.first(where: { $0.id > id }) : sorted.first(where: { $0.id == id }) else {
                return EINVAL
            }
            query.pointee = v4l2_queryctrl()
            query.pointee.id = c.id
            query.pointee.type = c.type.rawValue
            write(c.name, to: &query.pointee.name)
            query.pointee.minimum = c.minimum
            query.pointee.maximum = c.maximum
            query.pointee.step = c.step
            query.pointee.default_value = c.defaultValue
            query.pointee.flags = c.flags
            return nil

        case .queryMenu:
            let item = arg.assumingMemoryBound(to: v4l2_querymenu.self)
            guard let c = node.controls.first(where: { $0.id == item.pointee.id }),
                let name = c.menu[item.pointee.index]
            else { return EINVAL }
            write(name, to: &item.pointee.name)
            return nil

        case .getControl, .setControl:
            let control = arg.assumingMemoryBound(to: v4l2_control.self)
            guard let i = node.controls.firstIndex(where: { $0.id == control.pointee.id }) else { return EINVAL }
            if request == .getControl {
                control.pointee.value = node.controls[i].value
            } else {
                let c = node.controls[i]
                guard control.pointee.value >= c.minimum, control.pointee.value <= c.maximum else { return ERANGE }
                nodes[path]!.controls[i].value = control.pointee.value
                _controlWrites.append((c.id, control.pointee.value))
            }
            return nil

        default:
            return ENOTTY
        }
    }

    private func write<T>(_ string: String, to tuple: inout T) {
        withUnsafeMutableBytes(of: &tuple) { raw in
            raw.initializeMemory(as: UInt8.self, repeating: 0)
            for (i, byte) in string.utf8.prefix(raw.count - 1).enumerated() { raw[i] = byte }
        }
    }
}

extension FakeV4L2.Control {
    package static let exposureAuto = Self(
        id: CV4L2_CID_EXPOSURE_AUTO, name: "Auto Exposure", type: .menu, minimum: 0, maximum: 3, defaultValue: 3,
        value: 3, menu: [1: "Manual Mode", 3: "Aperture Priority Mode"]
    )
    package static let exposureAbsolute = Self(
        id: CV4L2_CID_EXPOSURE_ABSOLUTE, name: "Exposure Time, Absolute", type: .integer, minimum: 3,
        maximum: 2047, defaultValue: 250, value: 156, flags: UInt32(V4L2_CTRL_FLAG_INACTIVE)
    )
    package static let exposurePriority = Self(
        id: CV4L2_CID_EXPOSURE_AUTO_PRIORITY, name: "Exposure, Dynamic Framerate", type: .boolean, minimum: 0,
        maximum: 1, defaultValue: 0, value: 1
    )
    package static let autoWhiteBalance = Self(
        id: CV4L2_CID_AUTO_WHITE_BALANCE, name: "White Balance, Automatic", type: .boolean, minimum: 0, maximum: 1,
        defaultValue: 1, value: 1
    )
    package static let whiteBalanceTemperature = Self(
        id: CV4L2_CID_WHITE_BALANCE_TEMPERATURE, name: "White Balance Temperature", type: .integer, minimum: 2800,
        maximum: 6500, step: 10, defaultValue: 4600, value: 4650, flags: UInt32(V4L2_CTRL_FLAG_INACTIVE)
    )
    package static let powerLine = Self(
        id: CV4L2_CID_POWER_LINE_FREQUENCY, name: "Power Line Frequency", type: .menu, minimum: 0, maximum: 2,
        defaultValue: 2, value: 2, menu: [0: "Disabled", 1: "50 Hz", 2: "60 Hz"]
    )
    package static let brightness = Self(
        id: CV4L2_CID_BRIGHTNESS, name: "Brightness", type: .integer, minimum: -64, maximum: 64, defaultValue: 0,
        value: 5
    )

    /// A typical UVC webcam's set (no auto gain).
    package static let webcam: [Self] = [
        .brightness, .autoWhiteBalance, .powerLine, .whiteBalanceTemperature, .exposureAuto, .exposureAbsolute,
        .exposurePriority,
    ]
}
