import CV4L2
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The capture mode in effect after the driver adjusted the request (VIDIOC_S_FMT and VIDIOC_S_PARM read back).
public struct NegotiatedFormat: Sendable, Hashable, CustomStringConvertible {
    public var fourcc: FourCC
    public var width: Int
    public var height: Int
    public var bytesPerLine: Int
    /// The largest frame the driver will deliver, in bytes.
    public var sizeImage: Int
    /// `nil` when the driver does not report a frame interval.
    public var interval: FrameInterval?
    /// libv4l2 converts every frame in software (from the camera's own format).
    public var isConverted: Bool
    /// What negotiation asked for.
    public var requested: FormatChoice

    public var framesPerSecond: Double? { interval.map(\.framesPerSecond).flatMap { $0 > 0 ? $0 : nil } }

    public var description: String {
        let fps = framesPerSecond.map { " at \(Self.format($0)) fps" } ?? " (frame rate not reported)"
        let converted = isConverted ? ", converted by libv4l2" : ""
        let stride = bytesPerLine > 0 ? ", \(bytesPerLine) bytes/line" : ", up to \(sizeImage) bytes/frame"
        return "\(fourcc) \(width)x\(height)\(fps)\(stride)\(converted)"
    }

    static func format(_ fps: Double) -> String {
        fps.rounded() == fps ? String(Int(fps)) : String((fps * 100).rounded() / 100)
    }
}

/// A V4L2 capture device opened for streaming.
///
/// ```swift
/// let camera = try V4L2Camera.open("/dev/video0")
/// print(camera.format)                       // YUYV 640x480 at 30 fps, 1280 bytes/line
/// let frames = try camera.startStreaming()
/// for try await frame in frames {            // throws V4L2Error, e.g. .deviceGone when unplugged
///     process(frame.bytes, frame.timestamp)
///     if done { break }
/// }
/// await camera.stop()                        // STREAMOFF, munmap, REQBUFS 0, close (also when iteration ends early)
/// print(await camera.controlLockReport() ?? "controls not locked")
/// ```
///
/// - Important: Frames are dequeued on a dedicated thread (never on the Swift concurrency pool) and handed over through
///   a bounded buffer, so a slow consumer loses the oldest frames rather than growing memory.
public final class V4L2Camera: Sendable {
    /// The device node.
    public let path: String
    /// What VIDIOC_QUERYCAP reported.
    public let identity: DeviceIdentity
    /// The formats the device offers (including libv4l2 conversions).
    public let formats: [PixelFormatInfo]
    /// The mode in effect.
    public let format: NegotiatedFormat
    public let configuration: CaptureConfiguration

    let handle: DeviceHandle
    let shared: SharedState

    private init(
        handle: DeviceHandle, identity: DeviceIdentity, formats: [PixelFormatInfo], format: NegotiatedFormat,
        configuration: CaptureConfiguration
    ) {
        self.path = handle.path
        self.handle = handle
        self.identity = identity
        self.formats = formats
        self.format = format
        self.configuration = configuration
        self.shared = SharedState()
    }

    deinit {
        // Only an unstarted camera can still be open here: a streaming one is kept alive by its capture thread.
        if shared.takeUnstartedForClose() { try? handle.close() }
    }

    // MARK: Discovery

    /// Every `/dev/video*` node that can capture video, with its formats, sizes, intervals and controls. Nodes that
    /// could not be opened (busy, permission denied) are included with their error; other nodes (metadata, output,
    /// codecs) are left out.
    public static func listDevices() -> [CameraProbe] {
        listDevices(system: LibV4L2System())
    }

    package static func listDevices(system: any V4L2System) -> [CameraProbe] {
        system.deviceNodes().compactMap { path in
            do throws(V4L2Error) {
                return CameraProbe(path: path, result: .success(try describe(path, system: system)))
            } catch where error.code == .notACaptureDevice || error.code == .notAVideoDevice {
                return nil
            } catch {
                return CameraProbe(path: path, result: .failure(error))
            }
        }
    }

    /// What `auto` stands for as a camera: the first node, by number, that can capture video and be opened, or
    /// why there is none: each node that can capture and could not be opened, with its error (busy, permission
    /// denied), or no such node at all (an empty list).
    public static func automatic() -> Result<String, AutomaticCameraError> { automatic(system: LibV4L2System()) }

    package static func automatic(system: any V4L2System) -> Result<String, AutomaticCameraError> {
        var refused: [V4L2Error] = []
        for probe in listDevices(system: system) {
            switch probe.result {
            case .success: return .success(probe.path)
            case .failure(let error): refused.append(error)
            }
        }
        return .failure(AutomaticCameraError(refused: refused))
    }

    /// Everything one capture device offers.
    public static func describe(_ path: String) throws(V4L2Error) -> CameraDevice {
        try describe(path, system: LibV4L2System())
    }

    package static func describe(_ path: String, system: any V4L2System) throws(V4L2Error) -> CameraDevice {
        let handle = try DeviceHandle.open(path, system: system)
        defer { try? handle.close() }
        let identity = try handle.queryIdentity()
        guard identity.capabilities.contains(.videoCapture) else {
            throw V4L2Error(
                code: .notACaptureDevice, operation: "VIDIOC_QUERYCAP", devicePath: path,
                detail: "capabilities: \(identity.capabilities.names.joined(separator: ", "))"
            )
        }
        return CameraDevice(
            path: path, identity: identity, formats: try handle.enumerateFormats(),
            controls: try handle.enumerateControls()
        )
    }

    // MARK: Opening

    /// Opens `path`, checks it can capture and stream, and negotiates a mode (VIDIOC_QUERYCAP, VIDIOC_ENUM_FMT,
    /// VIDIOC_S_FMT, VIDIOC_S_PARM). No frames flow until ``startStreaming()``.
    ///
    /// - Throws: ``V4L2Error`` — `.busy`, `.permissionDenied`, `.noSuchDevice`, `.notACaptureDevice`,
    ///   `.streamingUnsupported`, `.noUsableFormat` and so on; its description says what to do.
    public static func open(
        _ path: String,
        configuration: CaptureConfiguration = CaptureConfiguration()
    ) throws(V4L2Error) -> V4L2Camera {
        try open(path, configuration: configuration, system: LibV4L2System())
    }

    package static func open(
        _ path: String,
        configuration: CaptureConfiguration,
        system: any V4L2System
    ) throws(V4L2Error) -> V4L2Camera {
        let handle = try DeviceHandle.open(path, system: system)
        do throws(V4L2Error) {
            let identity = try handle.queryIdentity()
            let caps = identity.capabilities.names.joined(separator: ", ")
            guard identity.capabilities.contains(.videoCapture) else {
                throw V4L2Error(
                    code: .notACaptureDevice, operation: "VIDIOC_QUERYCAP", devicePath: path,
                    detail: "capabilities: \(caps)"
                )
            }
            guard identity.capabilities.contains(.streaming) else {
                throw V4L2Error(
                    code: .streamingUnsupported, operation: "VIDIOC_QUERYCAP", devicePath: path,
                    detail: "capabilities: \(caps)"
                )
            }
            let formats = try handle.enumerateFormats()
            guard let choice = FormatNegotiation.choose(from: formats, configuration: configuration) else {
                let offered = formats.map { "\($0.fourcc)\($0.isCompressed ? " (compressed)" : "")" }
                throw V4L2Error(
                    code: .noUsableFormat, operation: "VIDIOC_ENUM_FMT", devicePath: path,
                    detail: offered.isEmpty ? "it lists no formats" : "it offers \(offered.joined(separator: ", "))"
                )
            }
            let format = try handle.apply(choice)
            return V4L2Camera(
                handle: handle, identity: identity, formats: formats, format: format, configuration: configuration
            )
        } catch {
            try? handle.close()
            throw error
        }
    }

    // MARK: Streaming

    /// Maps the driver's buffers, starts streaming (VIDIOC_REQBUFS, VIDIOC_QUERYBUF + mmap, VIDIOC_QBUF,
    /// VIDIOC_STREAMON) and returns the frames. Call once.
    ///
    /// If ``CaptureConfiguration/controls`` is set, the power-line frequency is applied first and the automatic
    /// controls are locked after ``ControlPolicy/settleFrames`` frames; ``controlLockReport()`` returns the result.
    public func startStreaming() throws(V4L2Error) -> CapturedFrames {
        guard shared.beginStreaming() else {
            throw V4L2Error(
                code: .rejected, operation: "startStreaming", devicePath: path,
                detail: "streaming was already started or the camera is stopped"
            )
        }
        var preStreamEntries: [ControlLockReport.Entry] = []
        if let frequency = configuration.controls?.powerLineFrequency {
            preStreamEntries.append(handle.applyPowerLineFrequency(frequency))
        }
        let buffers: [MappedBuffer]
        do throws(V4L2Error) {
            buffers = try handle.mapBuffers(count: configuration.bufferCount)
        } catch {
            abandonStart()
            throw error
        }
        do throws(V4L2Error) {
            for buffer in buffers {
                var buf = buffer.descriptor()
                try handle.ioctl(.queueBuffer, &buf)
            }
            var type = CInt(captureBufferType)
            try handle.ioctl(.streamOn, &type)
        } catch {
            handle.unmap(buffers)
            abandonStart()
            throw error
        }

        let (stream, continuation) = AsyncStream.makeStream(
            of: CaptureEvent.self,
            bufferingPolicy: .bufferingNewest(max(configuration.frameBufferLimit, 1))
        )
        let shared = self.shared
        continuation.onTermination = { _ in shared.requestStop() }
        let loop = CaptureLoop(
            handle: handle, buffers: buffers, format: format, configuration: configuration,
            preStreamEntries: preStreamEntries, shared: shared, continuation: continuation
        )
        let thread = Thread { loop.run() }
        thread.name = String("v4l2 \(path.split(separator: "/").last ?? "")".prefix(15))  // Linux limit: 15 bytes
        thread.start()
        return CapturedFrames(stream: stream)
    }

    /// Back to the opened state after a failed start, or closed if ``stop()`` was called meanwhile.
    private func abandonStart() {
        if shared.streamingFailedToStart() {
            try? handle.close()
            shared.finish(report: nil)
        }
    }

    /// The result of the control locks, once ``ControlPolicy/settleFrames`` frames have been captured; `nil` if
    /// capture ended before that or no ``ControlPolicy`` was configured.
    public func controlLockReport() async -> ControlLockReport? {
        guard configuration.controls != nil else { return nil }
        return await shared.waitForReport()
    }

    /// Stops capture and releases the device: VIDIOC_STREAMOFF, munmap of every buffer, VIDIOC_REQBUFS 0, close.
    /// Returns when that is done. Safe to call more than once and after the frame sequence has ended.
    public func stop() async {
        if shared.takeUnstartedForClose() {
            try? handle.close()
            shared.finish(report: nil)
            return
        }
        shared.requestStop()
        await shared.waitUntilClosed()
    }
}

// MARK: - Negotiation against the driver

extension DeviceHandle {
    /// Sets the chosen format and frame interval, then reads back what the driver granted.
    func apply(_ choice: FormatChoice) throws(V4L2Error) -> NegotiatedFormat {
        var format = v4l2_format()
        format.type = captureBufferType
        format.fmt.pix.width = choice.width
        format.fmt.pix.height = choice.height
        format.fmt.pix.pixelformat = choice.fourcc.rawValue
        format.fmt.pix.field = V4L2_FIELD_ANY.rawValue
        try ioctl(.setFormat, &format)

        var interval: FrameInterval? = nil
        var parameters = v4l2_streamparm()
        parameters.type = captureBufferType
        if let wanted = choice.interval {
            parameters.parm.capture.timeperframe = v4l2_fract(numerator: wanted.numerator, denominator: wanted.denominator)
            if try ioctlUnlessInvalid(.setParameters, &parameters) {
                let granted = parameters.parm.capture.timeperframe
                interval = FrameInterval(numerator: granted.numerator, denominator: granted.denominator)
            }
        } else if try ioctlUnlessInvalid(.getParameters, &parameters) {
            let current = parameters.parm.capture.timeperframe
            interval = FrameInterval(numerator: current.numerator, denominator: current.denominator)
        }
        if let known = interval, known.framesPerSecond == 0 { interval = nil }

        let pix = format.fmt.pix
        return NegotiatedFormat(
            fourcc: FourCC(rawValue: pix.pixelformat), width: Int(pix.width), height: Int(pix.height),
            bytesPerLine: Int(pix.bytesperline), sizeImage: Int(pix.sizeimage), interval: interval,
            isConverted: choice.isEmulated, requested: choice
        )
    }

    /// VIDIOC_REQBUFS, then VIDIOC_QUERYBUF and mmap for each granted buffer.
    func mapBuffers(count: UInt32) throws(V4L2Error) -> [MappedBuffer] {
        var request = v4l2_requestbuffers()
        request.count = max(count, 1)
        request.type = captureBufferType
        request.memory = V4L2_MEMORY_MMAP.rawValue
        try ioctl(.requestBuffers, &request)
        guard request.count > 0 else {
            throw V4L2Error(code: .noBuffers, operation: "VIDIOC_REQBUFS", devicePath: path, detail: "0 granted")
        }
        var buffers: [MappedBuffer] = []
        do throws(V4L2Error) {
            for index in 0..<request.count {
                var buf = v4l2_buffer()
                buf.index = index
                buf.type = captureBufferType
                buf.memory = V4L2_MEMORY_MMAP.rawValue
                try ioctl(.queryBuffer, &buf)
                let address = try mmap(length: Int(buf.length), offset: Int64(buf.m.offset))
                buffers.append(MappedBuffer(index: index, address: address, length: Int(buf.length)))
            }
        } catch {
            unmap(buffers)
            throw error
        }
        return buffers
    }

    /// Unmaps `buffers` and frees them in the driver (VIDIOC_REQBUFS 0), ignoring errors (the device may be gone).
    func unmap(_ buffers: [MappedBuffer]) {
        for buffer in buffers { try? munmap(buffer.address, length: buffer.length) }
        var request = v4l2_requestbuffers()
        request.count = 0
        request.type = captureBufferType
        request.memory = V4L2_MEMORY_MMAP.rawValue
        _ = try? ioctl(.requestBuffers, &request)
    }
}

/// A driver buffer mapped into our address space.
// @unchecked Sendable: after startStreaming hands the buffers to the capture thread, only that thread reads or unmaps them.
struct MappedBuffer: @unchecked Sendable {
    let index: UInt32
    let address: UnsafeMutableRawPointer
    let length: Int

    func descriptor() -> v4l2_buffer {
        var buf = v4l2_buffer()
        buf.index = index
        buf.type = captureBufferType
        buf.memory = V4L2_MEMORY_MMAP.rawValue
        return buf
    }
}

// MARK: - Shared state between the camera, the frame sequence and the capture thread

final class SharedState: Sendable {
    enum Phase { case opened, streaming, closed }

    struct State {
        var phase = Phase.opened
        var stopRequested = false
        var closeWaiters: [CheckedContinuation<Void, Never>] = []
        var reportDone = false
        var report: ControlLockReport? = nil
        var reportWaiters: [CheckedContinuation<ControlLockReport?, Never>] = []
    }

    private let state = Mutex(State())

    var stopRequested: Bool { state.withLock { $0.stopRequested } }

    func requestStop() { state.withLock { $0.stopRequested = true } }

    /// `true` (and the camera marked closed) if streaming never started, so the caller must close the descriptor.
    func takeUnstartedForClose() -> Bool {
        state.withLock { state in
            guard state.phase == .opened else { return false }
            state.phase = .closed
            return true
        }
    }

    func beginStreaming() -> Bool {
        state.withLock { state in
            guard state.phase == .opened else { return false }
            state.phase = .streaming
            return true
        }
    }

    /// Returns the camera to `.opened` after a failed start; `true` if a stop was requested meanwhile, in which case
    /// it stays claimed and the caller must close it and call ``finish(report:)``.
    func streamingFailedToStart() -> Bool {
        state.withLock { state in
            if state.stopRequested || !state.closeWaiters.isEmpty { return true }
            state.phase = .opened
            return false
        }
    }

    func publish(report: ControlLockReport) {
        let waiters = state.withLock { state in
            state.report = report
            state.reportDone = true
            defer { state.reportWaiters = [] }
            return state.reportWaiters
        }
        for waiter in waiters { waiter.resume(returning: report) }
    }

    /// Marks the camera closed and wakes everyone waiting.
    func finish(report: ControlLockReport?) {
        let (closeWaiters, reportWaiters, finalReport) = state.withLock { state in
            state.phase = .closed
            if !state.reportDone {
                state.reportDone = true
                state.report = report
            }
            defer {
                state.closeWaiters = []
                state.reportWaiters = []
            }
            return (state.closeWaiters, state.reportWaiters, state.report)
        }
        for waiter in closeWaiters { waiter.resume() }
        for waiter in reportWaiters { waiter.resume(returning: finalReport) }
    }

    func waitUntilClosed() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let closed = state.withLock { state in
                if state.phase == .closed { return true }
                state.closeWaiters.append(continuation)
                return false
            }
            if closed { continuation.resume() }
        }
    }

    func waitForReport() async -> ControlLockReport? {
        await withCheckedContinuation { (continuation: CheckedContinuation<ControlLockReport?, Never>) in
            let ready: ControlLockReport?? = state.withLock { state in
                if state.reportDone { return .some(state.report) }
                state.reportWaiters.append(continuation)
                return .none
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

// MARK: - The capture thread

/// Dequeues, copies and requeues buffers until stopped or failed, then releases the device in order.
struct CaptureLoop: Sendable {
    let handle: DeviceHandle
    let buffers: [MappedBuffer]
    let format: NegotiatedFormat
    let configuration: CaptureConfiguration
    let preStreamEntries: [ControlLockReport.Entry]
    let shared: SharedState
    let continuation: AsyncStream<CaptureEvent>.Continuation

    static let pollMilliseconds: CInt = 100

    func run() {
        let system = handle.system
        var lastFrameAt = system.monotonicNow()
        let timeout = Double(configuration.frameTimeout.components.seconds)
            + Double(configuration.frameTimeout.components.attoseconds) / 1e18
        var frameCount = 0
        var controlsLocked = false
        var report: ControlLockReport? = nil
        var failure: V4L2Error? = nil

        if let policy = configuration.controls, policy.settleFrames <= 0 {
            report = lockControls(policy, afterFrames: 0)
            controlsLocked = true
        }

        while !shared.stopRequested {
            do throws(V4L2Error) {
                let revents = try handle.poll(timeoutMilliseconds: Self.pollMilliseconds)
                if revents & CShort(POLLNVAL) != 0 {
                    throw V4L2Error(code: .other, errno: EBADF, operation: "poll", devicePath: handle.path)
                }
                var buf = v4l2_buffer()
                buf.type = captureBufferType
                buf.memory = V4L2_MEMORY_MMAP.rawValue
                let dequeued = revents == 0 ? false : try handle.ioctl(.dequeueBuffer, &buf, wouldBlockIsExpected: true)
                guard dequeued else {
                    if revents & CShort(POLLERR | POLLHUP) != 0 {
                        throw V4L2Error(
                            code: .ioError, operation: "poll", devicePath: handle.path,
                            detail: "the driver signalled an error or hang-up (POLLERR/POLLHUP) with no buffer ready"
                        )
                    }
                    if system.monotonicNow() - lastFrameAt > timeout {
                        throw V4L2Error(
                            code: .timedOut, operation: "VIDIOC_DQBUF", devicePath: handle.path,
                            detail: " within \(configuration.frameTimeout)"
                        )
                    }
                    continue
                }
                lastFrameAt = system.monotonicNow()
                guard let buffer = buffers.first(where: { $0.index == buf.index }) else {
                    throw V4L2Error(
                        code: .other, operation: "VIDIOC_DQBUF", devicePath: handle.path,
                        detail: "the driver returned unknown buffer index \(buf.index)"
                    )
                }
                let frame = makeFrame(from: buf, buffer: buffer, dequeuedAt: lastFrameAt, locked: controlsLocked)
                var requeue = buffer.descriptor()
                try handle.ioctl(.queueBuffer, &requeue)
                guard let frame else { continue }  // V4L2_BUF_FLAG_ERROR: skipped, shows as a sequence gap
                frameCount += 1
                if case .terminated = continuation.yield(.frame(frame)) { break }
                if let policy = configuration.controls, !controlsLocked, frameCount >= policy.settleFrames {
                    let lockReport = lockControls(policy, afterFrames: frameCount)
                    report = lockReport
                    controlsLocked = true
                    shared.publish(report: lockReport)
                }
            } catch {
                failure = error
                break
            }
        }

        var type = CInt(captureBufferType)
        _ = try? handle.ioctl(.streamOff, &type)
        handle.unmap(buffers)
        try? handle.close()
        if let failure { continuation.yield(.failure(failure)) }
        continuation.finish()
        shared.finish(report: report)
    }

    private func lockControls(_ policy: ControlPolicy, afterFrames: Int) -> ControlLockReport {
        ControlLockReport(entries: preStreamEntries + handle.lockAutomaticControls(policy), afterFrames: afterFrames)
    }

    private func makeFrame(
        from buf: v4l2_buffer, buffer: MappedBuffer, dequeuedAt: Double, locked: Bool
    ) -> CapturedFrame? {
        guard buf.flags & UInt32(V4L2_BUF_FLAG_ERROR) == 0 else { return nil }
        let used = buf.bytesused > 0 ? Int(buf.bytesused) : format.sizeImage
        let count = min(used, buffer.length)
        let bytes = [UInt8](UnsafeRawBufferPointer(start: buffer.address, count: count))
        let monotonic = buf.flags & UInt32(V4L2_BUF_FLAG_TIMESTAMP_MASK) == UInt32(V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC)
        let driverTime = Double(buf.timestamp.tv_sec) + Double(buf.timestamp.tv_usec) / 1e6
        let useDriver = monotonic && driverTime > 0
        return CapturedFrame(
            width: format.width, height: format.height, fourcc: format.fourcc, bytesPerLine: format.bytesPerLine,
            bytes: bytes, timestamp: useDriver ? driverTime : dequeuedAt,
            timestampSource: useDriver ? .driver : .dequeue, sequence: buf.sequence, controlsLocked: locked
        )
    }
}
