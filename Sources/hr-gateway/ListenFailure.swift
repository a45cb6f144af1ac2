import Foundation
import NIOCore

/// Why a server (the relay, the metrics endpoint) could not listen on `address`, in words that say what to do,
/// instead of NIO's `bind(descriptor:ptr:bytes:)` error.
func listenFailure(_ error: any Error, address: String, option: String) -> String {
    guard let io = error as? IOError else { return "\(error)" }
    switch io.errnoCode {
    case EADDRINUSE:
        return "another program already listens on \(address) (`ss -ltnp` shows which); stop it, or choose "
            + "another port with \(option)"
    case EACCES:
        return "ports below 1024 need root or the CAP_NET_BIND_SERVICE capability; choose a port of 1024 or more "
            + "with \(option)"
    case EADDRNOTAVAIL:
        return "\(address) is not an address of this machine; use 0.0.0.0 (every interface), 127.0.0.1 (this "
            + "machine only) or one that `ip addr` shows, with \(option)"
    default:
        return String(cString: strerror(io.errnoCode))
    }
}
