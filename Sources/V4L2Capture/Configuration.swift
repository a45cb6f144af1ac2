/// How to open and stream a camera. The defaults suit pulse-from-video: YUYV 640×480 at 30 fps, auto controls locked
/// after two seconds, 50 Hz mains.
public struct CaptureConfiguration: Sendable, Hashable {
    /// Preferred frame width in pixels (default 640).
    public var width: UInt32 = 640
    /// Preferred frame height in pixels (default 480).
    public var height: UInt32 = 480
    /// Preferred frame rate (default 30 fps).
    public var framesPerSecond: Double = 30
    /// Modes slower than this (default 25 fps) are chosen only when nothing faster exists, even if that means a
    /// less preferred format or size.
    public var minimumFramesPerSecond: Double = 25
    /// Pixel formats in order of preference (default YUYV, then RGB24). A format the camera produces itself beats one
    /// libv4l2 converts in software (for example RGB24 decoded from MJPEG). Add ``FourCC/mjpeg`` to receive
    /// compressed frames undecoded. If nothing listed is available, any uncompressed native format is used.
    public var formatPreference: [FourCC] = [.yuyv, .rgb24]
    /// Driver buffers to request (default 4).
    public var bufferCount: UInt32 = 4
    /// Frames held for a slow consumer before the oldest are dropped (default 4); drops show in
    /// ``CapturedFrame/droppedFrames``.
    public var frameBufferLimit: Int = 4
    /// The frame sequence ends with ``V4L2Error/Code/timedOut`` when no frame arrives for this long (default 5 s).
    public var frameTimeout: Duration = .seconds(5)
    /// Camera controls to set for stable colour and exposure; `nil` leaves every control alone.
    public var controls: ControlPolicy? = ControlPolicy()

    public init() {}
}

/// Mains frequency for the camera's anti-flicker control (`V4L2_CID_POWER_LINE_FREQUENCY`).
public enum PowerLineFrequency: Int32, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    case disabled = 0
    case fiftyHertz = 1
    case sixtyHertz = 2
    case automatic = 3

    public var description: String {
        switch self {
        case .disabled: "disabled"
        case .fiftyHertz: "50 Hz"
        case .sixtyHertz: "60 Hz"
        case .automatic: "auto"
        }
    }
}

/// Which automatic camera controls to turn off once the picture has settled.
///
/// Automatic exposure, gain and white balance add slow steps to the colour signal that pulse extraction cannot
/// separate from blood volume changes, so they are switched to manual at their settled values.
public struct ControlPolicy: Sendable, Hashable {
    /// Frames to let the automatic controls settle before locking them (default 60, two seconds at 30 fps).
    public var settleFrames: Int = 60
    /// Set before streaming starts so auto-exposure settles with it; `nil` leaves it alone (default 50 Hz).
    public var powerLineFrequency: PowerLineFrequency? = .fiftyHertz
    /// Switch `V4L2_CID_EXPOSURE_AUTO` to manual, keeping the settled exposure time.
    public var lockExposure = true
    /// Turn off `V4L2_CID_EXPOSURE_AUTO_PRIORITY` so the driver may not lower the frame rate in dim light.
    public var keepFrameRate = true
    /// Turn off `V4L2_CID_AUTO_WHITE_BALANCE`, keeping the settled colour temperature.
    public var lockWhiteBalance = true
    /// Turn off `V4L2_CID_AUTOGAIN`, keeping the settled gain.
    public var lockGain = true

    public init() {}
}
