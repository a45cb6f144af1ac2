/// One frame copied out of a driver buffer.
public struct CapturedFrame: Sendable {
    /// Where ``CapturedFrame/timestamp`` came from.
    public enum TimestampSource: Sendable, Hashable {
        /// The driver's buffer timestamp (V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC): when the frame was captured.
        case driver
        /// CLOCK_MONOTONIC when the buffer was dequeued: the driver gave no monotonic timestamp.
        case dequeue
    }

    public var width: Int
    public var height: Int
    public var fourcc: FourCC
    /// Bytes per row for packed formats; 0 for compressed ones.
    public var bytesPerLine: Int
    /// The frame data (`bytesused` bytes of the buffer).
    public var bytes: [UInt8]
    /// Seconds on CLOCK_MONOTONIC.
    public var timestamp: Double
    public var timestampSource: TimestampSource
    /// The driver's frame counter (`v4l2_buffer.sequence`).
    public var sequence: UInt32
    /// Frames lost just before this one (a gap in ``sequence``): dropped by the driver or by a slow consumer.
    ///
    /// A jump right after a first frame with sequence 0 is not counted: v4l2loopback hands out one stale buffer
    /// (sequence 0) before the live ones, whose numbers continue from what its producer already wrote.
    public var droppedFrames: Int
    /// Frames lost since streaming started.
    public var totalDroppedFrames: Int
    /// The ``ControlPolicy`` locks were applied before this frame was captured.
    public var controlsLocked: Bool

    public init(
        width: Int, height: Int, fourcc: FourCC, bytesPerLine: Int, bytes: [UInt8], timestamp: Double,
        timestampSource: TimestampSource, sequence: UInt32, droppedFrames: Int = 0, totalDroppedFrames: Int = 0,
        controlsLocked: Bool = false
    ) {
        self.width = width
        self.height = height
        self.fourcc = fourcc
        self.bytesPerLine = bytesPerLine
        self.bytes = bytes
        self.timestamp = timestamp
        self.timestampSource = timestampSource
        self.sequence = sequence
        self.droppedFrames = droppedFrames
        self.totalDroppedFrames = totalDroppedFrames
        self.controlsLocked = controlsLocked
    }
}

enum CaptureEvent: Sendable {
    case frame(CapturedFrame)
    case failure(V4L2Error)
}

/// The frames of a streaming camera, in capture order. Single consumer.
///
/// The sequence ends (returns `nil`) when capture is stopped or the consuming task is cancelled, and throws when the
/// device fails (for example ``V4L2Error/Code/deviceGone`` when the camera is unplugged). Ending iteration early
/// stops capture: the device is released in the background; `await camera.stop()` waits for that.
public struct CapturedFrames: AsyncSequence, Sendable {
    public typealias Element = CapturedFrame
    public typealias Failure = V4L2Error

    let stream: AsyncStream<CaptureEvent>

    public func makeAsyncIterator() -> Iterator {
        Iterator(base: stream.makeAsyncIterator())
    }

    public struct Iterator: AsyncIteratorProtocol {
        public typealias Element = CapturedFrame
        public typealias Failure = V4L2Error

        var base: AsyncStream<CaptureEvent>.Iterator
        var lastSequence: UInt32? = nil
        var totalDropped = 0
        var deliveredFrames = 0

        public mutating func next(isolation actor: isolated (any Actor)? = #isolation) async throws(V4L2Error)
            -> CapturedFrame?
        {
            guard let event = await base.next(isolation: actor) else { return nil }
            switch event {
            case .failure(let error):
                throw error
            case .frame(var frame):
                if let last = lastSequence {
                    let step = frame.sequence &- last
                    let staleFirstBuffer = deliveredFrames == 1 && last == 0
                    frame.droppedFrames = step == 0 || step > UInt32(Int32.max) || staleFirstBuffer ? 0 : Int(step) - 1
                }
                deliveredFrames += 1
                totalDropped += frame.droppedFrames
                frame.totalDroppedFrames = totalDropped
                lastSequence = frame.sequence
                return frame
            }
        }

        public mutating func next() async throws(V4L2Error) -> CapturedFrame? {
            try await next(isolation: nil)
        }
    }
}
