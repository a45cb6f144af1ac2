import CV4L2

#if canImport(Glibc)
import Glibc
#endif

/// An ioctl request code together with its name (for traces and error messages).
package struct V4L2Request: Sendable, Hashable, CustomStringConvertible {
    package let code: UInt
    package let name: String

    package var description: String { name }

    package static let queryCapability = V4L2Request(code: CV4L2_VIDIOC_QUERYCAP, name: "VIDIOC_QUERYCAP")
    package static let enumerateFormat = V4L2Request(code: CV4L2_VIDIOC_ENUM_FMT, name: "VIDIOC_ENUM_FMT")
    package static let getFormat = V4L2Request(code: CV4L2_VIDIOC_G_FMT, name: "VIDIOC_G_FMT")
    package static let setFormat = V4L2Request(code: CV4L2_VIDIOC_S_FMT, name: "VIDIOC_S_FMT")
    package static let requestBuffers = V4L2Request(code: CV4L2_VIDIOC_REQBUFS, name: "VIDIOC_REQBUFS")
    package static let queryBuffer = V4L2Request(code: CV4L2_VIDIOC_QUERYBUF, name: "VIDIOC_QUERYBUF")
    package static let queueBuffer = V4L2Request(code: CV4L2_VIDIOC_QBUF, name: "VIDIOC_QBUF")
    package static let dequeueBuffer = V4L2Request(code: CV4L2_VIDIOC_DQBUF, name: "VIDIOC_DQBUF")
    package static let streamOn = V4L2Request(code: CV4L2_VIDIOC_STREAMON, name: "VIDIOC_STREAMON")
    package static let streamOff = V4L2Request(code: CV4L2_VIDIOC_STREAMOFF, name: "VIDIOC_STREAMOFF")
    package static let getParameters = V4L2Request(code: CV4L2_VIDIOC_G_PARM, name: "VIDIOC_G_PARM")
    package static let setParameters = V4L2Request(code: CV4L2_VIDIOC_S_PARM, name: "VIDIOC_S_PARM")
    package static let getControl = V4L2Request(code: CV4L2_VIDIOC_G_CTRL, name: "VIDIOC_G_CTRL")
    package static let setControl = V4L2Request(code: CV4L2_VIDIOC_S_CTRL, name: "VIDIOC_S_CTRL")
    package static let queryControl = V4L2Request(code: CV4L2_VIDIOC_QUERYCTRL, name: "VIDIOC_QUERYCTRL")
    package static let queryMenu = V4L2Request(code: CV4L2_VIDIOC_QUERYMENU, name: "VIDIOC_QUERYMENU")
    package static let enumerateFrameSizes = V4L2Request(
        code: CV4L2_VIDIOC_ENUM_FRAMESIZES,
        name: "VIDIOC_ENUM_FRAMESIZES"
    )
    package static let enumerateFrameIntervals = V4L2Request(
        code: CV4L2_VIDIOC_ENUM_FRAMEINTERVALS,
        name: "VIDIOC_ENUM_FRAMEINTERVALS"
    )
}

/// An errno value returned by a ``V4L2System`` call.
package struct Errno: Error, Sendable, Hashable {
    package let rawValue: CInt
    package init(_ rawValue: CInt) { self.rawValue = rawValue }
}

/// The system calls the capture code makes: the seam where tests put a fake device.
///
/// Every call returns the errno instead of setting the global one, so fakes stay simple. The capture code never calls
/// these directly: they go through ``DeviceHandle``, which retries EINTR and throws ``V4L2Error``.
package protocol V4L2System: Sendable {
    /// The candidate device nodes (`/dev/video*`), sorted.
    func deviceNodes() -> [String]
    /// The corresponding C function is `v4l2_open`.
    func open(_ path: String, flags: CInt) -> Result<CInt, Errno>
    /// The corresponding C function is `v4l2_close`.
    func close(_ fd: CInt) -> Result<Void, Errno>
    /// The corresponding C function is `v4l2_ioctl`. `argument` points at the request's structure.
    func ioctl(_ fd: CInt, _ request: V4L2Request, _ argument: UnsafeMutableRawPointer) -> Result<Void, Errno>
    /// The corresponding C function is `v4l2_mmap` (shared, read-write).
    func mmap(_ fd: CInt, length: Int, offset: Int64) -> Result<UnsafeMutableRawPointer, Errno>
    /// The corresponding C function is `v4l2_munmap`.
    func munmap(_ address: UnsafeMutableRawPointer, length: Int) -> Result<Void, Errno>
    /// The corresponding C function is `poll` for POLLIN on one descriptor; returns `revents` (0 on timeout).
    func poll(_ fd: CInt, timeoutMilliseconds: CInt) -> Result<CShort, Errno>
    /// CLOCK_MONOTONIC in seconds, the clock V4L2 drivers stamp buffers with.
    func monotonicNow() -> Double
}

/// The real system: libv4l2 for the device calls (so format conversion is available), libc for the rest.
package struct LibV4L2System: V4L2System {
    package init() {
        CV4L2_silence_log()
    }

    package func deviceNodes() -> [String] {
        guard let dir = opendir("/dev") else { return [] }
        defer { closedir(dir) }
        var nodes: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name.hasPrefix("video"), Int(name.dropFirst(5)) != nil { nodes.append("/dev/" + name) }
        }
        return nodes.sorted { lhs, rhs in
            (Int(lhs.dropFirst(10)) ?? 0) < (Int(rhs.dropFirst(10)) ?? 0)
        }
    }

    package func open(_ path: String, flags: CInt) -> Result<CInt, Errno> {
        // A path that is not a character device cannot be a V4L2 node: answered here as libv4l2 would (ENOTTY),
        // without libv4l2 first printing its own "Failed to query video capabilities" to standard error.
        var st = stat()
        if stat(path, &st) == 0, (st.st_mode & S_IFMT) != S_IFCHR { return .failure(Errno(ENOTTY)) }
        let fd = CV4L2_open(path, flags)
        return fd >= 0 ? .success(fd) : .failure(Errno(Glibc.errno))
    }

    package func close(_ fd: CInt) -> Result<Void, Errno> {
        CV4L2_close(fd) == 0 ? .success(()) : .failure(Errno(Glibc.errno))
    }

    package func ioctl(_ fd: CInt, _ request: V4L2Request, _ argument: UnsafeMutableRawPointer) -> Result<Void, Errno> {
        CV4L2_ioctl(fd, request.code, argument) == -1 ? .failure(Errno(Glibc.errno)) : .success(())
    }

    package func mmap(_ fd: CInt, length: Int, offset: Int64) -> Result<UnsafeMutableRawPointer, Errno> {
        guard let address = CV4L2_mmap(fd, length, offset) else { return .failure(Errno(Glibc.errno)) }
        return .success(address)
    }

    package func munmap(_ address: UnsafeMutableRawPointer, length: Int) -> Result<Void, Errno> {
        CV4L2_munmap(address, length) == 0 ? .success(()) : .failure(Errno(Glibc.errno))
    }

    package func poll(_ fd: CInt, timeoutMilliseconds: CInt) -> Result<CShort, Errno> {
        var descriptor = pollfd(fd: fd, events: CShort(POLLIN), revents: 0)
        let result = Glibc.poll(&descriptor, 1, timeoutMilliseconds)
        if result < 0 { return .failure(Errno(Glibc.errno)) }
        return .success(result == 0 ? 0 : descriptor.revents)
    }

    package func monotonicNow() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
}

/// An open device node and the one place its system calls go through.
///
/// Every call retries EINTR and turns any other errno into a ``V4L2Error`` naming the operation and the path.
package struct DeviceHandle: Sendable {
    package let fd: CInt
    package let path: String
    package let system: any V4L2System

    /// Opens `path` read-write and non-blocking.
    package static func open(_ path: String, system: any V4L2System) throws(V4L2Error) -> DeviceHandle {
        let fd = try retrying(operation: "open", path: path) { system.open(path, flags: O_RDWR | O_NONBLOCK) }
        return DeviceHandle(fd: fd, path: path, system: system)
    }

    /// Runs `body` until it returns something other than EINTR.
    package static func retrying<T>(
        operation: String,
        path: String,
        _ body: () -> Result<T, Errno>
    ) throws(V4L2Error) -> T {
        while true {
            switch body() {
            case .success(let value):
                return value
            case .failure(let errno) where errno.rawValue == EINTR:
                continue
            case .failure(let errno):
                throw V4L2Error(errno: errno.rawValue, operation: operation, devicePath: path)
            }
        }
    }

    /// Issues `request` with `value` as its argument structure.
    ///
    /// - Returns: `false` if the call would block (EAGAIN) and `wouldBlockIsExpected` is set; `true` otherwise.
    /// - Throws: ``V4L2Error`` for every other errno (EINTR is retried).
    @discardableResult
    package func ioctl<T>(
        _ request: V4L2Request,
        _ value: inout T,
        wouldBlockIsExpected: Bool = false
    ) throws(V4L2Error) -> Bool {
        let system = self.system
        let fd = self.fd
        while true {
            let result = withUnsafeMutableBytes(of: &value) { raw in
                system.ioctl(fd, request, raw.baseAddress!)
            }
            switch result {
            case .success:
                return true
            case .failure(let errno) where errno.rawValue == EINTR:
                continue
            case .failure(let errno) where errno.rawValue == EAGAIN && wouldBlockIsExpected:
                return false
            case .failure(let errno):
                throw V4L2Error(errno: errno.rawValue, operation: request.name, devicePath: path)
            }
        }
    }

    /// Like ``ioctl(_:_:wouldBlockIsExpected:)`` but returns `nil` instead of throwing when the driver answers EINVAL,
    /// the way enumerations (formats, sizes, controls) signal their end or an unsupported request.
    package func ioctlUnlessInvalid<T>(_ request: V4L2Request, _ value: inout T) throws(V4L2Error) -> Bool {
        do throws(V4L2Error) {
            return try ioctl(request, &value)
        } catch where error.errno == EINVAL || error.errno == ENOTTY {
            return false
        }
    }

    package func mmap(length: Int, offset: Int64) throws(V4L2Error) -> UnsafeMutableRawPointer {
        let (system, fd) = (self.system, self.fd)
        return try Self.retrying(operation: "mmap", path: path) { system.mmap(fd, length: length, offset: offset) }
    }

    package func munmap(_ address: UnsafeMutableRawPointer, length: Int) throws(V4L2Error) {
        let system = self.system
        try Self.retrying(operation: "munmap", path: path) { system.munmap(address, length: length) }
    }

    /// Waits up to `timeoutMilliseconds` for a buffer; returns `revents` (0 on timeout).
    package func poll(timeoutMilliseconds: CInt) throws(V4L2Error) -> CShort {
        let (system, fd) = (self.system, self.fd)
        return try Self.retrying(operation: "poll", path: path) {
            system.poll(fd, timeoutMilliseconds: timeoutMilliseconds)
        }
    }

    /// Closes the descriptor. EINTR is not retried: on Linux the descriptor is gone either way.
    package func close() throws(V4L2Error) {
        if case .failure(let errno) = system.close(fd), errno.rawValue != EINTR {
            throw V4L2Error(errno: errno.rawValue, operation: "close", devicePath: path)
        }
    }
}
