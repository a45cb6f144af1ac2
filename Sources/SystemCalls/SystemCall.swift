#if canImport(Glibc)
import CSystemCalls
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The POSIX calls made in more than one place, each made once here (as swift-nio makes every call through
/// `NIOPosix/System.swift`): an interrupted call (EINTR) is made again, a short write finished, and a failure comes
/// back as a value with its errno (`SystemCallError`), not a global to read in time.
public enum SystemCall {
    /// Writes all of `bytes` to `fd`: interrupted writes are retried and short ones finished. A write that fails
    /// stops there (what it wrote before stays written).
    public static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(SystemCallError) {
        guard var p = bytes.baseAddress else { return }
        var left = bytes.count
        while left > 0 {
            let n = retryingInterrupts { write(fd, p, left) }
            // 0 for a count above 0 is not a write's answer; taken as an I/O error rather than tried for ever.
            guard n > 0 else { throw SystemCallError(call: "write", code: n == 0 ? EIO : errno) }
            p += n
            left -= n
        }
    }

    /// Writes all of `text` as UTF-8 in as few writes as the descriptor takes (one for a line to a pipe or a file,
    /// so lines written by several threads with O_APPEND, or to a pipe, do not interleave).
    public static func writeAll(_ fd: Int32, _ text: String) throws(SystemCallError) {
        var text = text
        try text.withUTF8 { utf8 in
            Result { () throws(SystemCallError) in try writeAll(fd, UnsafeRawBufferPointer(utf8)) }
        }.get()
    }

    /// Whether the kernel counts the system clock as synchronized: an NTP client (systemd-timesyncd, chrony, ntpd)
    /// disciplines it, what `timedatectl` shows as "System clock synchronized: yes". A board without a real-time
    /// clock, or with no time service, is not, and its date may be anything. `adjtimex` with no mode set only reads.
    public static func clockIsSynchronized() -> Bool {
        #if canImport(Glibc)
        var t = timex()
        let state = adjtimex(&t)
        return state >= 0 && state != TIME_ERROR
        #else
        return false
        #endif
    }

    /// Whether the process started with standard input (0), output (1) or error (2) closed (`<&-`, `>&-`): such a
    /// descriptor was opened on /dev/null before anything else ran (`CSystemCalls`).
    public static func startedClosed(_ fd: Int32) -> Bool {
        #if canImport(Glibc)
        return fd >= 0 && fd <= 2 && hrg_closed_standard_descriptors() & (1 << fd) != 0
        #else
        return false
        #endif
    }

    /// This machine's host name ("gateway" when it has none): it names a gateway to fleets (MQTT) and labs (LSL).
    public static func hostName() -> String {
        var name = [CChar](repeating: 0, count: 256)
        guard gethostname(&name, name.count - 1) == 0 else { return "gateway" }
        let host = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return host.isEmpty ? "gateway" : host
    }

    /// A new file without a name in `directory` (`O_TMPFILE`), read-write, for this process only: gone with its
    /// last descriptor, whatever happens to the process. Nil when the file system cannot make one (errno says why).
    public static func unnamedFile(in directory: String) -> Int32? {
        let fd = retryingInterrupts { open(directory, hrg_o_tmpfile() | O_RDWR | O_CLOEXEC, 0o600) }
        return fd >= 0 ? fd : nil
    }

    /// Makes `call` (a system call answering -1 or another negative value, with errno set, on failure) again for as
    /// long as a signal interrupts it; errno is left as the last call set it.
    public static func retryingInterrupts<T: SignedInteger>(_ call: () -> T) -> T {
        while true {
            let result = call()
            if result < 0 && errno == EINTR { continue }
            return result
        }
    }
}

/// A system call that failed, and the errno that says why.
public struct SystemCallError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The C function, such as "write".
    public let call: String
    public let code: Int32

    public init(call: String, code: Int32) {
        self.call = call
        self.code = code
    }

    /// The errno's own words ("No space left on device").
    public var reason: String { String(cString: strerror(code)) }

    public var description: String { "\(call): \(reason)" }
}
