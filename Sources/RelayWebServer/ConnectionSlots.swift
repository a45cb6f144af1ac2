import Foundation
import Synchronization

/// The relay's open connections, counted per peer address, so that one host on the network cannot hold them all.
///
/// Every connection takes a file descriptor and some memory before it has said anything: without a limit one
/// client on the LAN opened 8,655 connections to a service (its memory went from 63 to 172 MB and stayed), and at a
/// lower file limit took every descriptor, so that a phone could not connect and the gateway could not open a file.
/// A connection over either limit is closed as soon as it is accepted, and said in the journal (at most once a
/// minute per address, with a count).
///
/// Loopback peers are not counted when `exemptsLoopback` (a reverse proxy on this machine brings every client
/// from 127.0.0.1; a local user could use the descriptors anyway).
final class ConnectionSlots: Sendable {
    /// Open connections one address may hold.
    let perAddress: Int
    /// Open connections from all addresses together.
    let total: Int
    let exemptsLoopback: Bool

    private struct State {
        var open: [String: Int] = [:]
        var openTotal = 0
    }

    private let state = Mutex(State())

    init(perAddress: Int, total: Int, exemptsLoopback: Bool) {
        self.perAddress = perAddress
        self.total = total
        self.exemptsLoopback = exemptsLoopback
    }

    /// Why a connection was refused.
    enum Refusal: Equatable, Sendable {
        /// Its address holds `perAddress` connections already.
        case address(open: Int)
        /// The relay holds `total` connections already.
        case total(open: Int)
    }

    /// Takes a slot for a connection from `address` (its IP address as text; nil when unknown), or says why not. A
    /// slot taken is given back with `release(_:)` when the connection closes.
    func take(_ address: String?) -> Refusal? {
        let key = address ?? "unknown"
        if exemptsLoopback, let address, RelayServerConfiguration.isLoopbackName(address) { return nil }
        return state.withLock { s -> Refusal? in
            let mine = s.open[key, default: 0]
            if mine >= perAddress { return .address(open: mine) }
            if s.openTotal >= total { return .total(open: s.openTotal) }
            s.open[key] = mine + 1
            s.openTotal += 1
            return nil
        }
    }

    /// Gives back the slot `take(address)` gave.
    func release(_ address: String?) {
        let key = address ?? "unknown"
        if exemptsLoopback, let address, RelayServerConfiguration.isLoopbackName(address) { return }
        state.withLock { s in
            guard let mine = s.open[key] else { return }
            s.open[key] = mine > 1 ? mine - 1 : nil
            s.openTotal -= 1
        }
    }

    /// Open connections counted from `address`.
    func open(from address: String?) -> Int { state.withLock { $0.open[address ?? "unknown", default: 0] } }

    /// The total limit that leaves this process `reserve` of its file descriptors (a quarter, at least 64) for its
    /// own files, D-Bus and journal: `configured`, or less under a low `ulimit -n`, so that the accept loop does
    /// not meet EMFILE (it then backs off for a second at a time, refusing everyone).
    static func total(configured: Int, fileLimit: Int? = currentFileLimit()) -> Int {
        guard let fileLimit else { return configured }
        let reserve = max(64, fileLimit / 4)
        return max(1, min(configured, fileLimit - reserve))
    }

    /// The soft `RLIMIT_NOFILE`, or nil when unlimited (RLIM_INFINITY, all ones) or unreadable.
    static func currentFileLimit() -> Int? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max else { return nil }
        return Int(clamping: limit.rlim_cur)
    }
}
