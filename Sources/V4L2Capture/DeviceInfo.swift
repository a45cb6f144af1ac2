import CV4L2

/// A frame interval (seconds per frame as a fraction); `1/30` is 30 fps.
public struct FrameInterval: Sendable, Hashable, CustomStringConvertible {
    public var numerator: UInt32
    public var denominator: UInt32

    public init(numerator: UInt32, denominator: UInt32) {
        self.numerator = numerator
        self.denominator = denominator
    }

    /// Frames per second, or 0 when the interval is unknown (a zero numerator or denominator).
    public var framesPerSecond: Double {
        guard numerator > 0, denominator > 0 else { return 0 }
        return Double(denominator) / Double(numerator)
    }

    public var description: String { "\(numerator)/\(denominator) s" }
}

/// The frame intervals a driver offers for one format and size.
public enum FrameIntervals: Sendable, Hashable {
    /// A list of fixed intervals.
    case discrete([FrameInterval])
    /// Any interval from `minimum` (fastest) to `maximum` (slowest) in multiples of `step` (continuous when the step
    /// is 1/1 000 000 s or the driver says so).
    case stepwise(minimum: FrameInterval, maximum: FrameInterval, step: FrameInterval)

    /// The frame rates on offer, fastest first (for stepwise ranges: the two ends).
    public var framesPerSecond: [Double] {
        switch self {
        case .discrete(let intervals): intervals.map(\.framesPerSecond).sorted(by: >)
        case .stepwise(let minimum, let maximum, _): [minimum.framesPerSecond, maximum.framesPerSecond]
        }
    }
}

/// One frame size of a pixel format and the intervals offered at that size.
public struct FrameSize: Sendable, Hashable {
    public var width: UInt32
    public var height: UInt32
    /// `nil` when the driver does not enumerate intervals (the rate is then whatever VIDIOC_S_PARM grants).
    public var intervals: FrameIntervals?

    public init(width: UInt32, height: UInt32, intervals: FrameIntervals?) {
        self.width = width
        self.height = height
        self.intervals = intervals
    }
}

/// A continuous or stepwise size range (VIDIOC_ENUM_FRAMESIZES type STEPWISE or CONTINUOUS).
public struct FrameSizeRange: Sendable, Hashable {
    public var minWidth: UInt32, maxWidth: UInt32, stepWidth: UInt32
    public var minHeight: UInt32, maxHeight: UInt32, stepHeight: UInt32

    public init(
        minWidth: UInt32, maxWidth: UInt32, stepWidth: UInt32,
        minHeight: UInt32, maxHeight: UInt32, stepHeight: UInt32
    ) {
        (self.minWidth, self.maxWidth, self.stepWidth) = (minWidth, maxWidth, stepWidth)
        (self.minHeight, self.maxHeight, self.stepHeight) = (minHeight, maxHeight, stepHeight)
    }

    /// The common sizes (QVGA to 1080p) this range can produce, each snapped to the step; the largest size if none.
    var commonSizes: [(UInt32, UInt32)] {
        let common: [(UInt32, UInt32)] = [(320, 240), (640, 480), (800, 600), (1280, 720), (1920, 1080)]
        let fitting = common.filter { w, h in
            w >= minWidth && w <= maxWidth && h >= minHeight && h <= maxHeight
                && (w - minWidth) % max(stepWidth, 1) == 0 && (h - minHeight) % max(stepHeight, 1) == 0
        }
        return fitting.isEmpty ? [(maxWidth, maxHeight)] : fitting
    }
}

/// A pixel format a device offers (VIDIOC_ENUM_FMT) with its sizes and intervals.
public struct PixelFormatInfo: Sendable, Hashable {
    public var fourcc: FourCC
    /// The driver's description, e.g. "YUYV 4:2:2".
    public var description: String
    public var isCompressed: Bool
    /// Produced by libv4l2's software conversion rather than by the camera (V4L2_FMT_FLAG_EMULATED).
    public var isEmulated: Bool
    /// Discrete sizes; for a stepwise ``sizeRange`` the common sizes inside it.
    public var sizes: [FrameSize]
    public var sizeRange: FrameSizeRange?

    public init(
        fourcc: FourCC, description: String, isCompressed: Bool = false, isEmulated: Bool = false,
        sizes: [FrameSize], sizeRange: FrameSizeRange? = nil
    ) {
        self.fourcc = fourcc
        self.description = description
        self.isCompressed = isCompressed
        self.isEmulated = isEmulated
        self.sizes = sizes
        self.sizeRange = sizeRange
    }
}

/// The kind of a control (`enum v4l2_ctrl_type`).
public struct ControlType: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let integer = ControlType(rawValue: V4L2_CTRL_TYPE_INTEGER.rawValue)
    public static let boolean = ControlType(rawValue: V4L2_CTRL_TYPE_BOOLEAN.rawValue)
    public static let menu = ControlType(rawValue: V4L2_CTRL_TYPE_MENU.rawValue)
    public static let button = ControlType(rawValue: V4L2_CTRL_TYPE_BUTTON.rawValue)
    public static let integer64 = ControlType(rawValue: V4L2_CTRL_TYPE_INTEGER64.rawValue)
    public static let controlClass = ControlType(rawValue: V4L2_CTRL_TYPE_CTRL_CLASS.rawValue)
    public static let string = ControlType(rawValue: V4L2_CTRL_TYPE_STRING.rawValue)
    public static let bitmask = ControlType(rawValue: V4L2_CTRL_TYPE_BITMASK.rawValue)
    public static let integerMenu = ControlType(rawValue: V4L2_CTRL_TYPE_INTEGER_MENU.rawValue)

    public var description: String {
        switch self {
        case .integer: "int"
        case .boolean: "bool"
        case .menu: "menu"
        case .button: "button"
        case .integer64: "int64"
        case .controlClass: "class"
        case .string: "string"
        case .bitmask: "bitmask"
        case .integerMenu: "intmenu"
        default: "type\(rawValue)"
        }
    }
}

/// A control's state flags (`V4L2_CTRL_FLAG_*`).
public struct ControlFlags: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let disabled = ControlFlags(rawValue: UInt32(V4L2_CTRL_FLAG_DISABLED))
    public static let grabbed = ControlFlags(rawValue: UInt32(V4L2_CTRL_FLAG_GRABBED))
    public static let readOnly = ControlFlags(rawValue: UInt32(V4L2_CTRL_FLAG_READ_ONLY))
    public static let inactive = ControlFlags(rawValue: UInt32(V4L2_CTRL_FLAG_INACTIVE))
    public static let writeOnly = ControlFlags(rawValue: UInt32(V4L2_CTRL_FLAG_WRITE_ONLY))

    /// Names of the set flags, e.g. `["inactive"]`.
    public var names: [String] {
        let known: [(ControlFlags, String)] = [
            (.disabled, "disabled"), (.grabbed, "grabbed"), (.readOnly, "read-only"), (.inactive, "inactive"),
            (.writeOnly, "write-only"),
        ]
        return known.filter { contains($0.0) }.map(\.1)
    }
}

/// One entry of a menu control (VIDIOC_QUERYMENU).
public struct ControlMenuItem: Sendable, Hashable {
    public var index: UInt32
    /// The item's name, or for integer menus its value as text.
    public var name: String

    public init(index: UInt32, name: String) {
        self.index = index
        self.name = name
    }
}

/// A camera control (VIDIOC_QUERYCTRL) and its current value.
public struct ControlInfo: Sendable, Hashable {
    public var id: UInt32
    public var name: String
    public var type: ControlType
    public var minimum: Int32
    public var maximum: Int32
    public var step: Int32
    public var defaultValue: Int32
    /// The current value (VIDIOC_G_CTRL), `nil` for write-only, button or unreadable controls.
    public var value: Int32?
    public var flags: ControlFlags
    public var menu: [ControlMenuItem]

    public init(
        id: UInt32, name: String, type: ControlType, minimum: Int32, maximum: Int32, step: Int32,
        defaultValue: Int32, value: Int32?, flags: ControlFlags, menu: [ControlMenuItem] = []
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

/// Device capability bits (`V4L2_CAP_*`) of the opened node.
public struct DeviceCapabilities: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let videoCapture = DeviceCapabilities(rawValue: UInt32(V4L2_CAP_VIDEO_CAPTURE))
    public static let videoCaptureMultiplanar = DeviceCapabilities(rawValue: UInt32(V4L2_CAP_VIDEO_CAPTURE_MPLANE))
    public static let videoOutput = DeviceCapabilities(rawValue: UInt32(V4L2_CAP_VIDEO_OUTPUT))
    public static let metadataCapture = DeviceCapabilities(rawValue: UInt32(V4L2_CAP_META_CAPTURE))
    public static let readWrite = DeviceCapabilities(rawValue: UInt32(V4L2_CAP_READWRITE))
    public static let streaming = DeviceCapabilities(rawValue: UInt32(V4L2_CAP_STREAMING))
    public static let deviceCapabilities = DeviceCapabilities(rawValue: UInt32(V4L2_CAP_DEVICE_CAPS))

    /// Names of the set bits this library knows, e.g. `["video-capture", "streaming"]`.
    public var names: [String] {
        let known: [(DeviceCapabilities, String)] = [
            (.videoCapture, "video-capture"), (.videoCaptureMultiplanar, "video-capture-mplane"),
            (.videoOutput, "video-output"), (.metadataCapture, "metadata-capture"), (.readWrite, "read-write"),
            (.streaming, "streaming"),
        ]
        return known.filter { contains($0.0) }.map(\.1)
    }
}

/// What VIDIOC_QUERYCAP says about a node.
public struct DeviceIdentity: Sendable, Hashable {
    public var driver: String
    public var card: String
    public var busInfo: String
    /// The driver version as `major.minor.patch`.
    public var version: String
    /// The node's own capabilities (`device_caps` when the driver reports them, else `capabilities`).
    public var capabilities: DeviceCapabilities

    public init(driver: String, card: String, busInfo: String, version: String, capabilities: DeviceCapabilities) {
        self.driver = driver
        self.card = card
        self.busInfo = busInfo
        self.version = version
        self.capabilities = capabilities
    }
}

/// A capture device with everything it offers.
public struct CameraDevice: Sendable, Hashable {
    public var path: String
    public var identity: DeviceIdentity
    public var formats: [PixelFormatInfo]
    public var controls: [ControlInfo]

    public init(path: String, identity: DeviceIdentity, formats: [PixelFormatInfo], controls: [ControlInfo]) {
        self.path = path
        self.identity = identity
        self.formats = formats
        self.controls = controls
    }
}

/// One `/dev/video*` node looked at by ``V4L2Camera/listDevices()``: either a capture device or why it could not be
/// examined (busy, permission denied). Nodes that are not capture devices are left out of the list.
public struct CameraProbe: Sendable {
    public var path: String
    public var result: Result<CameraDevice, V4L2Error>

    public init(path: String, result: Result<CameraDevice, V4L2Error>) {
        self.path = path
        self.result = result
    }
}

// MARK: - Querying a handle

/// Reads a fixed-size C `char`/`__u8` array up to its first NUL.
func cString<T>(_ tuple: T) -> String {
    withUnsafeBytes(of: tuple) { raw in String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self) }
}

let captureBufferType = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue

extension DeviceHandle {
    package func queryIdentity() throws(V4L2Error) -> DeviceIdentity {
        var cap = v4l2_capability()
        try ioctl(.queryCapability, &cap)
        let hasDeviceCaps = cap.capabilities & UInt32(V4L2_CAP_DEVICE_CAPS) != 0
        let version = "\(cap.version >> 16 & 0xff).\(cap.version >> 8 & 0xff).\(cap.version & 0xff)"
        return DeviceIdentity(
            driver: cString(cap.driver),
            card: cString(cap.card),
            busInfo: cString(cap.bus_info),
            version: version,
            capabilities: DeviceCapabilities(rawValue: hasDeviceCaps ? cap.device_caps : cap.capabilities)
        )
    }

    package func enumerateFormats() throws(V4L2Error) -> [PixelFormatInfo] {
        var formats: [PixelFormatInfo] = []
        for index in UInt32(0)..<64 {
            var desc = v4l2_fmtdesc()
            desc.index = index
            desc.type = captureBufferType
            guard try ioctlUnlessInvalid(.enumerateFormat, &desc) else { break }
            let fourcc = FourCC(rawValue: desc.pixelformat)
            let (sizes, range) = try enumerateSizes(fourcc)
            formats.append(
                PixelFormatInfo(
                    fourcc: fourcc,
                    description: cString(desc.description),
                    isCompressed: desc.flags & UInt32(V4L2_FMT_FLAG_COMPRESSED) != 0,
                    isEmulated: desc.flags & UInt32(V4L2_FMT_FLAG_EMULATED) != 0,
                    sizes: sizes,
                    sizeRange: range
                )
            )
        }
        return formats
    }

    func enumerateSizes(_ fourcc: FourCC) throws(V4L2Error) -> ([FrameSize], FrameSizeRange?) {
        var sizes: [FrameSize] = []
        for index in UInt32(0)..<256 {
            var size = v4l2_frmsizeenum()
            size.index = index
            size.pixel_format = fourcc.rawValue
            guard try ioctlUnlessInvalid(.enumerateFrameSizes, &size) else { break }
            if size.type == V4L2_FRMSIZE_TYPE_DISCRETE.rawValue {
                let (w, h) = (size.discrete.width, size.discrete.height)
                sizes.append(FrameSize(width: w, height: h, intervals: try enumerateIntervals(fourcc, w, h)))
            } else {
                let s = size.stepwise
                let range = FrameSizeRange(
                    minWidth: s.min_width, maxWidth: s.max_width, stepWidth: s.step_width,
                    minHeight: s.min_height, maxHeight: s.max_height, stepHeight: s.step_height
                )
                var candidates: [FrameSize] = []
                for (w, h) in range.commonSizes {
                    candidates.append(FrameSize(width: w, height: h, intervals: try enumerateIntervals(fourcc, w, h)))
                }
                return (candidates, range)
            }
        }
        return (sizes, nil)
    }

    func enumerateIntervals(_ fourcc: FourCC, _ width: UInt32, _ height: UInt32) throws(V4L2Error) -> FrameIntervals? {
        var discrete: [FrameInterval] = []
        for index in UInt32(0)..<64 {
            var ival = v4l2_frmivalenum()
            ival.index = index
            ival.pixel_format = fourcc.rawValue
            ival.width = width
            ival.height = height
            guard try ioctlUnlessInvalid(.enumerateFrameIntervals, &ival) else { break }
            if ival.type == V4L2_FRMIVAL_TYPE_DISCRETE.rawValue {
                discrete.append(FrameInterval(numerator: ival.discrete.numerator, denominator: ival.discrete.denominator))
            } else {
                let s = ival.stepwise
                return .stepwise(
                    minimum: FrameInterval(numerator: s.min.numerator, denominator: s.min.denominator),
                    maximum: FrameInterval(numerator: s.max.numerator, denominator: s.max.denominator),
                    step: FrameInterval(numerator: s.step.numerator, denominator: s.step.denominator)
                )
            }
        }
        return discrete.isEmpty ? nil : .discrete(discrete)
    }

    package func enumerateControls() throws(V4L2Error) -> [ControlInfo] {
        var controls: [ControlInfo] = []
        var nextID: UInt32 = 0
        for _ in 0..<1024 {
            var query = v4l2_queryctrl()
            query.id = nextID | CV4L2_CTRL_FLAG_NEXT_CTRL
            guard try ioctlUnlessInvalid(.queryControl, &query) else { break }
            nextID = query.id
            if let control = try controlInfo(from: query) { controls.append(control) }
        }
        return controls
    }

    /// Queries one control by id; `nil` if the driver does not have it or has it disabled.
    package func queryControl(_ id: UInt32) throws(V4L2Error) -> ControlInfo? {
        var query = v4l2_queryctrl()
        query.id = id
        guard try ioctlUnlessInvalid(.queryControl, &query) else { return nil }
        return try controlInfo(from: query)
    }

    private func controlInfo(from query: v4l2_queryctrl) throws(V4L2Error) -> ControlInfo? {
        let flags = ControlFlags(rawValue: query.flags)
        let type = ControlType(rawValue: query.type)
        guard !flags.contains(.disabled), type != .controlClass else { return nil }
        var menu: [ControlMenuItem] = []
        if type == .menu || type == .integerMenu, query.minimum >= 0, query.maximum >= query.minimum {
            for index in UInt32(query.minimum)...UInt32(min(query.maximum, query.minimum + 63)) {
                var item = v4l2_querymenu()
                item.id = query.id
                item.index = index
                guard try ioctlUnlessInvalid(.queryMenu, &item) else { continue }
                let name = type == .menu ? cString(item.name) : String(item.value)
                menu.append(ControlMenuItem(index: index, name: name))
            }
        }
        var value: Int32? = nil
        if !flags.contains(.writeOnly), type != .button, type != .integer64, type != .string {
            value = try? getControl(query.id)
        }
        return ControlInfo(
            id: query.id, name: cString(query.name), type: type, minimum: query.minimum, maximum: query.maximum,
            step: query.step, defaultValue: query.default_value, value: value, flags: flags, menu: menu
        )
    }

    package func getControl(_ id: UInt32) throws(V4L2Error) -> Int32 {
        var control = v4l2_control(id: id, value: 0)
        try ioctl(.getControl, &control)
        return control.value
    }

    package func setControl(_ id: UInt32, _ value: Int32) throws(V4L2Error) {
        var control = v4l2_control(id: id, value: value)
        try ioctl(.setControl, &control)
    }
}
