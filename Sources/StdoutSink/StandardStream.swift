import Foundation

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
        data.withUnsafeBytes { raw in
            guard var p = raw.baseAddress else { return true }
            var left = raw.count
            while left > 0 {
                let n = Glibc.write(descriptor, p, left)
                if n < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                p += n
                left -= n
            }
            return true
        }
    }

    @discardableResult
    public func write(_ text: String) -> Bool { write(Data(text.utf8)) }

    /// From now on a write to a closed pipe or socket fails with EPIPE instead of killing the process (the
    /// long-running commands: `stream`, `serve`), so that a session whose standard output is closed can end properly,
    /// recorded and with its summary, and a socket written without `MSG_NOSIGNAL` (OpenSSL's, under libmosquitto's
    /// TLS) cannot end the gateway. Every write to standard output and error goes through `StandardStream` then.
    public static func ignoreBrokenPipe() { signal(SIGPIPE, SIG_IGN) }
}
