#if canImport(Glibc)
import Glibc
#endif

/// Why a camera operation failed: what happened (``code``), the errno behind it, the operation and the device path,
/// and (in ``description``) what to do about it.
///
/// Match on ``code``: `catch let error as V4L2Error where error.code == .busy`.
public struct V4L2Error: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure. New kinds may be added; switch with a `default` case.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        fileprivate enum Kind: Hashable {
            case busy
            case permissionDenied
            case noSuchDevice
            case deviceGone
            case notAVideoDevice
            case notACaptureDevice
            case streamingUnsupported
            case noUsableFormat
            case noBuffers
            case ioError
            case timedOut
            case rejected
            case other
        }

        fileprivate let kind: Kind

        /// EBUSY: another application is using the camera.
        public static let busy = Code(kind: .busy)
        /// EACCES or EPERM: the user may not open the device node.
        public static let permissionDenied = Code(kind: .permissionDenied)
        /// ENOENT, ENXIO, or ENODEV when opening: there is no such device.
        public static let noSuchDevice = Code(kind: .noSuchDevice)
        /// ENODEV after opening: the camera was unplugged or its driver went away.
        public static let deviceGone = Code(kind: .deviceGone)
        /// ENOTTY when opening (libv4l2 queries the device) or on VIDIOC_QUERYCAP: the path is not a V4L2 device.
        public static let notAVideoDevice = Code(kind: .notAVideoDevice)
        /// The device has no VIDEO_CAPTURE capability (a metadata node, an output or a codec).
        public static let notACaptureDevice = Code(kind: .notACaptureDevice)
        /// The device cannot stream through mmap buffers.
        public static let streamingUnsupported = Code(kind: .streamingUnsupported)
        /// None of the device's formats can be delivered.
        public static let noUsableFormat = Code(kind: .noUsableFormat)
        /// VIDIOC_REQBUFS granted no buffers.
        public static let noBuffers = Code(kind: .noBuffers)
        /// EIO: the device or its link failed.
        public static let ioError = Code(kind: .ioError)
        /// No frame arrived within the configured timeout.
        public static let timedOut = Code(kind: .timedOut)
        /// EINVAL, ERANGE and similar: the driver rejected the request.
        public static let rejected = Code(kind: .rejected)
        /// Any other errno.
        public static let other = Code(kind: .other)

        public var description: String {
            switch kind {
            case .busy: "busy"
            case .permissionDenied: "permission denied"
            case .noSuchDevice: "no such device"
            case .deviceGone: "device gone"
            case .notAVideoDevice: "not a video device"
            case .notACaptureDevice: "not a capture device"
            case .streamingUnsupported: "streaming unsupported"
            case .noUsableFormat: "no usable format"
            case .noBuffers: "no buffers"
            case .ioError: "I/O error"
            case .timedOut: "timed out"
            case .rejected: "rejected by driver"
            case .other: "system error"
            }
        }
    }

    /// What failed.
    public let code: Code
    /// The errno value, or 0 when the failure did not come from a system call.
    public let errno: CInt
    /// The operation that failed: `open`, `mmap`, `poll` or an ioctl name such as `VIDIOC_S_FMT`.
    public let operation: String
    /// The device node, for example `/dev/video0`.
    public let devicePath: String
    /// Extra detail for failures that are not plain errnos (the formats offered, the timeout).
    public let detail: String?

    /// An error of a given kind, e.g. to test how a consumer handles `.deviceGone` without a camera.
    public init(code: Code, errno: CInt = 0, operation: String, devicePath: String, detail: String? = nil) {
        self.code = code
        self.errno = errno
        self.operation = operation
        self.devicePath = devicePath
        self.detail = detail
    }

    /// Classifies an errno returned by `operation` (`open`, `mmap`, `poll` or an ioctl name) on `devicePath`.
    public init(errno: CInt, operation: String, devicePath: String) {
        let code: Code
        switch errno {
        case EBUSY: code = .busy
        case EACCES, EPERM: code = .permissionDenied
        case ENOENT, ENXIO: code = .noSuchDevice
        case ENODEV: code = operation == "open" ? .noSuchDevice : .deviceGone
        case ENOTTY: code = operation == "VIDIOC_QUERYCAP" || operation == "open" ? .notAVideoDevice : .rejected
        case EIO: code = .ioError
        case EINVAL, ERANGE: code = .rejected
        default: code = .other
        }
        self.init(code: code, errno: errno, operation: operation, devicePath: devicePath)
    }

    /// The errno's symbolic name and text, e.g. `EBUSY, Device or resource busy`.
    public var errnoDescription: String {
        guard errno != 0 else { return "" }
        let text = strerror(errno).map { String(cString: $0) } ?? "errno \(errno)"
        if let name = Self.errnoNames[errno] { return "\(name), \(text)" }
        return "errno \(errno), \(text)"
    }

    public var description: String {
        let path = devicePath
        let cause = errno == 0 ? "" : " (\(errnoDescription))"
        let extra = detail.map { ": \($0)" } ?? ""
        switch code.kind {
        case .busy:
            return "\(path) is busy\(cause) during \(operation): another application is using the camera. "
                + "Close it (`fuser -v \(path)` shows which process holds it) and try again."
        case .permissionDenied:
            return "Permission denied opening \(path)\(cause) during \(operation). Add your user to the video group "
                + "(`sudo usermod -aG video $USER`, then log out and back in) or install the udev rule shipped in "
                + "udev/70-hr-gateway-camera.rules (`sudo cp udev/70-hr-gateway-camera.rules /etc/udev/rules.d/ && "
                + "sudo udevadm control --reload && sudo udevadm trigger`)."
        case .noSuchDevice:
            return "No such device \(path)\(cause). Run `hr-gateway cameras` to list the cameras this machine has."
        case .deviceGone:
            return "The camera at \(path) went away\(cause) during \(operation): it was unplugged or its driver was "
                + "unloaded. Reconnect it and start capture again."
        case .notAVideoDevice:
            return "\(path) is not a V4L2 video device\(cause). Pick a /dev/videoN node listed by `hr-gateway cameras`."
        case .notACaptureDevice:
            return "\(path) cannot capture video (no VIDEO_CAPTURE capability; it may be a metadata or output node)"
                + "\(extra). Pick another node listed by `hr-gateway cameras`."
        case .streamingUnsupported:
            return "\(path) does not support mmap streaming (no STREAMING capability)\(extra). This gateway needs a "
                + "camera driver with streaming I/O."
        case .noUsableFormat:
            return "\(path) offers no pixel format the gateway can use\(extra). Use a camera that offers YUYV or "
                + "MJPEG (libv4l2 converts MJPEG to RGB24); a v4l2loopback device lists formats only while a producer "
                + "(for example ffmpeg) is writing to it."
        case .noBuffers:
            return "\(path) granted no capture buffers during \(operation)\(extra). Another application may hold the "
                + "device's memory; close it and try again."
        case .ioError:
            return "I/O error on \(path)\(cause) during \(operation): the camera or its USB link failed. Reconnect it, "
                + "try another port, or ask for a lower resolution or frame rate."
        case .timedOut:
            return "No frame from \(path)\(extra) during \(operation). Check that the camera is not covered or "
                + "stalled; a v4l2loopback device needs a producer writing to it."
        case .rejected:
            return "\(path) rejected \(operation)\(cause)\(extra). The driver does not support this request or value."
        case .other:
            return "\(operation) failed on \(path)\(cause)\(extra)."
        }
    }

    private static let errnoNames: [CInt: String] = [
        EPERM: "EPERM", ENOENT: "ENOENT", EINTR: "EINTR", EIO: "EIO", ENXIO: "ENXIO", EBADF: "EBADF",
        EAGAIN: "EAGAIN", ENOMEM: "ENOMEM", EACCES: "EACCES", EFAULT: "EFAULT", EBUSY: "EBUSY", ENODEV: "ENODEV",
        EINVAL: "EINVAL", ENOTTY: "ENOTTY", ENOSPC: "ENOSPC", ERANGE: "ERANGE", EPIPE: "EPIPE",
    ]
}

/// Why `auto` found no camera: the capture nodes that could not be opened, each with its error; none at all when
/// the machine has no node that can capture video.
public struct AutomaticCameraError: Error, Sendable, Equatable, CustomStringConvertible {
    public var refused: [V4L2Error]

    public init(refused: [V4L2Error]) { self.refused = refused }

    public var description: String {
        guard !refused.isEmpty else {
            return "no camera found: no /dev/video* node can capture video. Plug in a USB webcam (`ls -l /dev/video*` "
                + "shows the nodes; `hr-gateway cameras` lists what each can do)"
        }
        return "no camera could be opened: " + refused.map(\.description).joined(separator: "; ")
    }
}
