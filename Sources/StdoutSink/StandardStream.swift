import Foundation
import GatewayEngine
import SystemCalls

/// Standard output or standard error, written with write(2): interrupted writes retried, partial ones finished, and a
/// reader that has gone (EPIPE, once SIGPIPE is ignored) answered with `false` rather than a trap, as
/// `FileHandle.write(_:)` would.
public enum StandardStream: Sendable {
    case output
    case error

    private var descriptor: Int32 { self == .output ? STDOUT_FILENO : STDERR_FILENO }

    /// Writes all of `data`; false when the stream cannot take it (its reader closed it, or another error).
    @discardableResult
    public func write(_ data: Data) -> Bool {
        if self == .output { Self.outputWriteStarted.withLock { $0 = ContinuousClock.now } }
        defer { if self == .output { Self.outputWriteStarted.withLock { $0 = nil } } }
        return data.withUnsafeBytes { raw in
            do throws(SystemCallError) {
                try SystemCall.writeAll(descriptor, raw)
                return true
            } catch {
                if self == .output { Self.noteOutputFailure(error.code) }
                return false
            }
        }
    }

    /// When the write to standard output under way began; nil when none is.
    private static let outputWriteStarted = Locked<ContinuousClock.Instant?>(nil)

    /// How long the write to standard output under way has waited: a reader that stopped reading (a full pipe) blocks
    /// it for ever. Zero when none is under way.
    public static var outputWriteWaiting: Duration {
        outputWriteStarted.withLock { $0 }.map { $0.duration(to: .now) } ?? .zero
    }

    @discardableResult
    public func write(_ text: String) -> Bool { write(Data(text.utf8)) }

    /// The first error a write to standard output met, other than a reader that went away (EPIPE: `| head` has read
    /// what it wanted) or an output closed (EBADF; one closed at start, `>&-`, is /dev/null since: `CSystemCalls`).
    private static let outputFailure = Locked<Int32?>(nil)

    private static func noteOutputFailure(_ code: Int32) {
        guard code != EPIPE, code != EBADF else { return }
        outputFailure.withLock { if $0 == nil { $0 = code } }
    }

    /// Flushes what `print` buffered, then says whether everything written to standard output (through this type or
    /// `print`) reached it: nil if so, else the reason ("No space left on device"), for a command to fail with
    /// rather than exit 0 having lost its output (a full disk behind `> file`).
    public static func outputProblem() -> String? {
        if fflush(nil) != 0 { noteOutputFailure(errno) }  // every stdio stream; standard error is unbuffered
        return outputFailureReason
    }

    /// The reason of the first failed write to standard output so far (see `outputProblem`), without flushing.
    public static var outputFailureReason: String? { outputFailure.withLock { $0 }.map { String(cString: strerror($0)) } }

    /// From now on a write to a closed pipe or socket fails with EPIPE instead of killing the process (the
    /// long-running commands: `stream`, `serve`), so that a session whose standard output is closed can end properly,
    /// recorded and with its summary, and a socket written without `MSG_NOSIGNAL` (OpenSSL's, under libmosquitto's
    /// TLS) cannot end the gateway. Every write to standard output and error goes through `StandardStream` then.
    public static func ignoreBrokenPipe() { signal(SIGPIPE, SIG_IGN) }
}
