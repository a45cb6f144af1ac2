import GatewayEngine

/// Which strap a provider follows: `ADDRESS` (`AA:BB:CC:DD:EE:FF`), a name (prefix, case-insensitive), or `auto`
/// (the first heart-rate strap discovery finds).
public enum StrapSpec: Sendable, Equatable, CustomStringConvertible {
    case address(String)
    case name(String)
    case auto

    /// Parses `AA:BB:CC:DD:EE:FF`, `auto`, or anything else as a name prefix. Throws on an empty spec.
    public init(parsing text: String) throws(StrapSpecError) {
        let t = text.trimmingCharacters(in: " \t")
        if t.isEmpty { throw StrapSpecError(spec: text) }
        if t.lowercased() == "auto" {
            self = .auto
        } else if Self.isAddress(t) {
            self = .address(t.uppercased())
        } else if let colons = Self.colonForm(t), Self.isAddress(colons) {
            // Windows and Android write AA-BB-CC-DD-EE-FF, some tools AABBCCDDEEFF: searched for as names for ever.
            self = .address(colons.uppercased())
        } else if Self.looksLikeAddress(t) || Self.looksLikeAddress(t.replacingOccurrences(of: "-", with: ":")) {
            // A mistyped address read as a name was searched for for ever.
            throw StrapSpecError(spec: text, notAnAddress: true)
        } else {
            self = .name(t)
        }
    }

    static func isAddress(_ s: String) -> Bool {
        let parts = s.split(separator: ":", omittingEmptySubsequences: false)
        return parts.count == 6 && parts.allSatisfy { $0.count == 2 && $0.allSatisfy(\.isHexDigit) }
    }

    /// `AA-BB-CC-DD-EE-FF` or `AABBCCDDEEFF` written with colons; nil for anything else.
    static func colonForm(_ s: String) -> String? {
        if s.count == 17, s.split(separator: "-", omittingEmptySubsequences: false).count == 6 {
            return s.replacingOccurrences(of: "-", with: ":")
        }
        if s.count == 12, s.allSatisfy(\.isHexDigit) {
            let c = Array(s)
            return stride(from: 0, to: 12, by: 2).map { String(c[$0...$0 + 1]) }.joined(separator: ":")
        }
        return nil
    }

    /// Meant as an address (a name has words): four parts or more between colons (or dashes), none longer than two
    /// characters and all but one a pair of hex digits (`AA:BB:CC:DD:EE`, `A0:9E:1A:12:34:5G`), or 10 to 14 hex
    /// digits alone (`AABBCCDDEEF`, one short). `HR-1-2-3` is a name.
    static func looksLikeAddress(_ s: String) -> Bool {
        if (10...14).contains(s.count), s.allSatisfy(\.isHexDigit) { return true }
        let parts = s.split(separator: ":", omittingEmptySubsequences: false)
        let pairs = parts.filter { $0.count == 2 && $0.allSatisfy(\.isHexDigit) }.count
        return parts.count >= 4 && !s.contains(" ") && parts.allSatisfy { $0.count <= 2 } && pairs >= parts.count - 1
    }

    /// Whether a discovered device is the one this spec asks for.
    public func matches(address: String, name: String?, uuids: [String]) -> Bool {
        switch self {
        case .address(let a): return address.uppercased() == a
        case .name(let prefix): return name?.lowercased().hasPrefix(prefix.lowercased()) ?? false
        case .auto: return StrapRecognizer.match(uuids: uuids, name: name) != nil
        }
    }

    public var description: String {
        switch self {
        case .address(let a): a
        case .name(let n): "name \"\(n)\""
        case .auto: "auto"
        }
    }
}

/// An empty strap spec.
public struct StrapSpecError: Error, Sendable, Equatable, CustomStringConvertible {
    public var spec: String
    /// Meant as an address, and not one (five pairs, a letter past F).
    public var notAnAddress = false
    public var description: String {
        if notAnAddress {
            return "\"\(spec)\" is not a Bluetooth address: an address is six pairs of hex digits (AA:BB:CC:DD:EE:FF); "
                + "`hr-gateway scan` lists the straps in range with theirs"
        }
        return "empty strap spec \"\(spec)\": give an address (AA:BB:CC:DD:EE:FF), a name prefix (\"Polar H10\") or auto"
    }
}

extension String {
    fileprivate func trimmingCharacters(in set: String) -> String {
        String(drop(while: { set.contains($0) }).reversed().drop(while: { set.contains($0) }).reversed())
    }
}

/// What BlueZ answered, classified by what the gateway does about it (ble.md §3.3, §4).
public enum StrapBusFailure: Sendable, Equatable {
    /// `org.bluez.Error.Failed` "le-connection-abort-by-local": it did connect; wait for the disconnect, then retry.
    case abortByLocal
    /// `org.bluez.Error.InProgress`: a pending Connect (maybe from a dead client); Disconnect cancels it.
    case inProgress
    /// `org.freedesktop.DBus.Error.UnknownObject`: the device object is gone; rescan.
    case unknownObject
    case alreadyConnected
    /// `org.bluez.Error.NotReady` or not powered: the adapter is off or blocked.
    case notReady
    case notConnected
    /// No reply within the call's timeout.
    case timeout
    /// Anything else, with BlueZ's name and message.
    case other(name: String, message: String)

    /// Classifies a D-Bus error name and message.
    public init(errorName: String, message: String) {
        switch errorName {
        case "org.bluez.Error.Failed" where message.contains("le-connection-abort-by-local"): self = .abortByLocal
        case "org.bluez.Error.Failed" where message.contains("adapter-not-powered"): self = .notReady
        case "org.bluez.Error.InProgress": self = .inProgress
        case "org.freedesktop.DBus.Error.UnknownObject", "org.freedesktop.DBus.Error.UnknownMethod",
            "org.bluez.Error.DoesNotExist":
            self = .unknownObject
        case "org.bluez.Error.AlreadyConnected": self = .alreadyConnected
        case "org.bluez.Error.NotReady": self = .notReady
        case "org.bluez.Error.NotConnected": self = .notConnected
        case "org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Timeout": self = .timeout
        default: self = .other(name: errorName, message: message)
        }
    }
}

/// A discovered device as the machine needs it.
public struct StrapDevice: Sendable, Equatable {
    public var path: String
    public var address: String
    public var name: String?
    public var connected: Bool
    public var servicesResolved: Bool
    /// BlueZ holds a bond (keys) for it.
    public var paired: Bool

    public init(path: String, address: String, name: String?, connected: Bool, servicesResolved: Bool,
                paired: Bool = false) {
        self.path = path
        self.address = address
        self.name = name
        self.connected = connected
        self.servicesResolved = servicesResolved
        self.paired = paired
    }
}

/// Timers of one strap.
public enum StrapTimer: Sendable, Hashable {
    /// Connect took too long (the call itself has a longer D-Bus timeout as a safety net).
    case connect
    /// ServicesResolved did not come.
    case resolve
    /// After le-connection-abort-by-local: the Connected=false we wait for did not come.
    case disconnectWait
    /// No notification for `staleAfterMs`.
    case stale
    /// Still stale after `staleReconnectAfterMs`: disconnect and reconnect.
    case staleReconnect
    /// Time to try again.
    case backoff
    /// Still discovering without having seen the strap: restart discovery.
    case discoveryRefresh
}

/// Inputs of the per-strap state machine.
public enum StrapEvent: Sendable, Equatable {
    case start
    /// A device matching the spec is in BlueZ's object tree (found, or its properties changed).
    case deviceSeen(StrapDevice)
    case deviceRemoved(path: String)
    case connectReturned(StrapBusFailure?)
    case connectedChanged(path: String, Bool)
    case servicesResolvedChanged(path: String, Bool)
    /// Answer to `.lookUpHeartRateCharacteristic`: the 2A37 object path under the device, if exported.
    case heartRateCharacteristic(path: String?)
    case startNotifyReturned(StrapBusFailure?)
    /// A `Value` change of the 2A37 characteristic.
    case notification(charPath: String, bytes: [UInt8], monotonicNs: UInt64, wallMs: Int64)
    case battery(percent: Int)
    case timer(StrapTimer, token: UInt64)
    /// `org.bluez` lost its owner (bluetoothd stopped or restarted).
    case bluezVanished
    /// `org.bluez` has an owner again.
    case bluezAppeared
    case stop
}

/// What the driver must do.
public enum StrapAction: Sendable, Equatable {
    /// SetDiscoveryFilter (0x180D, le) + StartDiscovery if not running, then report matching devices already known.
    case startDiscovery
    case stopDiscovery
    /// StopDiscovery, then as `startDiscovery`: bluetoothd 5.66 can accept a StartDiscovery and scan nothing (after
    /// a StopDiscovery the kernel refused, its state stays "discovering" with the same filter), until the session is
    /// stopped and started again.
    case restartDiscovery
    case connect(path: String)
    /// Also cancels a pending Connect; results of Connect calls made before it are to be dropped.
    case disconnect(path: String)
    /// `Adapter1.RemoveDevice`: drops BlueZ's (possibly stale) GATT cache for the device.
    case removeDevice(path: String)
    case lookUpHeartRateCharacteristic(devicePath: String)
    case startNotify(charPath: String)
    /// Body Sensor Location, battery (Battery1, else 2A19), Device Information strings.
    case readDetails(devicePath: String)
    case schedule(StrapTimer, afterMs: Int64, token: UInt64)
    case cancel(StrapTimer)
    case status(SensorStatus)
    case sample(BiosignalSample)
    /// A payload that could not be decoded (nothing else is lost).
    case malformed(HeartRateMeasurementError)
}

/// Timings and retry limits of the reconnect loop.
public struct StrapPolicy: Sendable, Equatable {
    public var connectTimeoutMs: Int64 = 30_000
    public var resolveTimeoutMs: Int64 = 20_000
    public var disconnectWaitMs: Int64 = 5_000
    /// No notification for this long → `stale` (straps notify at ~1 Hz).
    public var staleAfterMs: Int64 = 5_000
    /// Still `stale` this long after becoming stale → Disconnect, then reconnect through the backoff; nil leaves it
    /// to BlueZ to notice the link loss. A strap notifies every second, with or without a beat, so 20 s of silence in
    /// all is no passing radio gap; yet BlueZ was seen to keep such a dead link `Connected` for about 40 s, and a
    /// Polar strap itself lets go 20–30 s after losing skin contact. 15 s reconnects well before BlueZ gives up and
    /// costs nothing extra: the samples are already flagged as after a gap since `stale`.
    public var staleReconnectAfterMs: Int64? = 15_000
    /// Delays before successive retries; the last one repeats.
    public var backoffMs: [Int64] = [250, 1_000, 2_000, 4_000, 8_000, 15_000, 30_000]
    /// Immediate retries after le-connection-abort-by-local before falling back to the backoff.
    public var maxAbortRetries = 3
    /// Connections in a row without a 2A37 object before the device is removed from BlueZ (stale GATT cache).
    public var missingCharacteristicLimit = 2
    /// Discovering this long without seeing the strap → `restartDiscovery`, and again every as long; nil never. A
    /// strap advertises several times a second, so a scan that finds nothing for 10 s is one that does not run, or a
    /// strap that is off (where a restart costs nothing).
    public var discoveryRefreshMs: Int64? = 10_000

    public init() {}
}

/// The per-strap state machine (ble.md §9): discovering → connecting → resolving → subscribing → streaming, with
/// stale and backoff, and every §5 pitfall that applies to a central. Pure: events in, actions out; the driver
/// does the I/O and feeds results back as events. Not thread-safe; one driver task owns it.
public struct StrapStateMachine: Sendable {
    public enum Phase: String, Sendable, Equatable {
        case idle, discovering, connecting, resolving, subscribing, streaming, stale, backoff
        /// bluetoothd is gone; waiting for it to come back.
        case waitingForBluez = "waiting_for_bluez"
        case stopped
    }

    public let spec: StrapSpec
    public let policy: StrapPolicy
    public private(set) var phase: Phase = .idle
    public private(set) var device: StrapDevice? {
        didSet { if device?.path != oldValue?.path { awaitingDisconnectEcho = false } }
    }
    public private(set) var heartRatePath: String?
    /// The characteristic our D-Bus connection holds a notify session on. BlueZ keeps it across disconnects and
    /// re-arms it on reconnect, so it is not requested again (no duplicate sessions or callbacks).
    public private(set) var notifyArmedPath: String?
    public private(set) var batteryPercent: Int?
    public private(set) var failures = 0
    private var abortRetries = 0
    /// A bond the strap refused was removed (once per session).
    private var staleBondRemoved = false
    private var awaitingAbortDisconnect = false
    private var missingCharacteristic = 0
    /// Connected went false while this Connect was pending.
    private var droppedDuringAttempt = false
    /// We disconnected a link BlueZ may still hold up, and its Connected=false has not arrived yet. Replies overtake
    /// signals (in the driver, and bluetoothd emits property changes lazily), so that link's Connected=true may also
    /// still be on its way, even after the next attempt began: until the Connected=false comes, Connected=true is the
    /// old link's and Connected=false is no link loss. Should it never come, one real loss is missed and the resolve
    /// or stale timers catch it.
    private var awaitingDisconnectEcho = false
    private var detailsRead = false
    private var sequencer = NotificationSequencer()
    private var tokens: [StrapTimer: UInt64] = [:]
    private var nextToken: UInt64 = 0
    private var lastMessage: String?

    public init(spec: StrapSpec, policy: StrapPolicy = StrapPolicy()) {
        self.spec = spec
        self.policy = policy
    }

    /// Number of notifications turned into samples so far.
    public var sequence: UInt64 { sequencer.lastSequence }

    public mutating func handle(_ event: StrapEvent) -> [StrapAction] {
        var out: [StrapAction] = []
        if phase == .stopped { return out }
        switch event {
        case .start:
            guard phase == .idle else { break }
            discover(&out, state: .searching, message: "looking for \(spec)")

        case .deviceSeen(let d):
            if let current = device, current.path != d.path, phase != .discovering { break }
            if phase != .discovering, let current = device {
                // Link state comes from Connected/ServicesResolved changes once we follow the device; an
                // advertisement (or a snapshot taken a moment ago) must not undo them.
                device = StrapDevice(path: d.path, address: d.address, name: d.name ?? current.name,
                                     connected: current.connected, servicesResolved: current.servicesResolved,
                                     paired: d.paired)
                break
            }
            device = d
            if phase == .discovering {
                if d.connected {
                    // Left connected by an earlier run or another client (pitfall 11): reuse the link.
                    if d.servicesResolved {
                        enterLookUp(&out)
                    } else {
                        phase = .resolving
                        schedule(.resolve, policy.resolveTimeoutMs, &out)
                    }
                    status(.connecting, "reusing the existing connection", &out)
                } else {
                    connect(&out)
                }
            }

        case .deviceRemoved(let path):
            guard device?.path == path else { break }
            device = nil
            heartRatePath = nil
            notifyArmedPath = nil
            if phase != .idle, phase != .waitingForBluez {
                linkLost(&out)
                discover(&out, state: .reconnecting, message: "device removed by BlueZ; scanning again")
            }

        case .connectReturned(let failure):
            guard phase == .connecting else { break }
            cancel(.connect, &out)
            switch failure {
            case nil, .alreadyConnected?:
                if device?.servicesResolved == true {
                    enterLookUp(&out)
                } else {
                    phase = .resolving
                    schedule(.resolve, policy.resolveTimeoutMs, &out)
                    status(lastState == .reconnecting ? .reconnecting : .connecting, "connected; resolving services", &out)
                }
            case .abortByLocal?:
                // It did connect; wait for Connected=false before trying again (pitfall 4).
                abortRetries += 1
                if abortRetries > policy.maxAbortRetries, let d = device, d.paired, !staleBondRemoved {
                    // BlueZ encrypts the link to a bonded device as it connects; a strap that has lost its keys
                    // (reset, or paired with a phone since) fails that, and BlueZ reports it as this abort, again
                    // and again, with the device still Paired. Remove the bond once and connect afresh.
                    abortRetries = 0
                    staleBondRemoved = true
                    cancel(.disconnectWait, &out)
                    out.append(.removeDevice(path: d.path))
                    device = nil
                    heartRatePath = nil
                    notifyArmedPath = nil
                    discover(&out, state: .reconnecting,
                             message: "the strap refuses this computer's pairing (it was reset or paired with another "
                                + "device): removed the old pairing from BlueZ and scanning again; ECG and motion "
                                + "pair again when asked")
                } else if abortRetries > policy.maxAbortRetries {
                    abortRetries = 0
                    backoff(&out, message: "le-connection-abort-by-local repeatedly")
                } else if droppedDuringAttempt {
                    // The Connected=false already went by (signals and the reply race): retry now.
                    connect(&out)
                } else {
                    awaitingAbortDisconnect = true
                    schedule(.disconnectWait, policy.disconnectWaitMs, &out)
                }
            case .inProgress?:
                // A Connect is pending elsewhere (maybe from a crashed client): cancel it, then retry (pitfall 3).
                disconnect(&out)
                backoff(&out, message: "another connection attempt was in progress; cancelled it")
            case .unknownObject?:
                // BlueZ dropped the temporary device (pitfall 9): rescan.
                device = nil
                discover(&out, state: .searching, message: "device object gone; scanning again")
            case .notReady?:
                backoff(&out, message: "adapter is off or blocked (rfkill); retrying")
            case let failure?:
                backoff(&out, message: "connect failed: \(Self.describe(failure))" + Self.hint(failure))
            }

        case .connectedChanged(let path, let connected):
            guard device?.path == path else { break }
            if awaitingDisconnectEcho {
                // The link we disconnected: a late Connected=true of it, or the Connected=false we caused.
                if !connected {
                    awaitingDisconnectEcho = false
                    device?.connected = false
                    device?.servicesResolved = false
                }
                break
            }
            // Our own Disconnect already marked the device down, so its late Connected=false is no transition.
            let wasConnected = device?.connected ?? false
            device?.connected = connected
            if !connected { device?.servicesResolved = false }
            if connected { break }
            if phase == .connecting, wasConnected { droppedDuringAttempt = true }
            if phase == .connecting, awaitingAbortDisconnect {
                awaitingAbortDisconnect = false
                cancel(.disconnectWait, &out)
                connect(&out)
            } else if wasConnected, [.resolving, .subscribing, .streaming, .stale].contains(phase) {
                // Link lost, or lost while waiting for services (pitfall 7): our own reconnect loop (pitfall 20).
                linkLost(&out)
                backoff(&out, message: "link lost; reconnecting", state: .reconnecting)
            }

        case .servicesResolvedChanged(let path, let resolved):
            guard device?.path == path else { break }
            device?.servicesResolved = resolved
            if resolved, phase == .resolving {
                cancel(.resolve, &out)
                enterLookUp(&out)
            }

        case .heartRateCharacteristic(let path):
            guard phase == .resolving || phase == .subscribing else { break }
            guard let path else {
                // ServicesResolved but no 2A37 object (pitfall 8): disconnect, retry. Again and again: BlueZ's GATT
                // cache may be stale (pitfall 10): remove the device and rediscover it.
                missingCharacteristic += 1
                disconnect(&out)
                if missingCharacteristic >= policy.missingCharacteristicLimit, let p = device?.path {
                    missingCharacteristic = 0
                    for t in [StrapTimer.resolve, .connect] { cancel(t, &out) }
                    out.append(.removeDevice(path: p))
                    device = nil
                    heartRatePath = nil
                    notifyArmedPath = nil
                    discover(&out, state: .reconnecting,
                             message: "no Heart Rate Measurement characteristic again; removed the device from BlueZ "
                                + "(stale GATT cache) and scanning again")
                } else {
                    backoff(&out, message: "Heart Rate Measurement characteristic missing after services resolved")
                }
                break
            }
            missingCharacteristic = 0
            heartRatePath = path
            phase = .subscribing
            if !detailsRead, let p = device?.path {
                detailsRead = true
                out.append(.readDetails(devicePath: p))
            }
            if notifyArmedPath == path {
                enterStreaming(&out)
            } else {
                out.append(.startNotify(charPath: path))
            }

        case .startNotifyReturned(let failure):
            guard phase == .subscribing else { break }
            switch failure {
            case nil, .inProgress?:
                // InProgress from StartNotify means "arming": treat as pending/ok.
                notifyArmedPath = heartRatePath
                enterStreaming(&out)
            case let failure?:
                disconnect(&out)
                backoff(&out, message: "StartNotify failed: \(Self.describe(failure))")
            }

        case let .notification(charPath, bytes, monotonicNs, wallMs):
            // Re-armed sessions may deliver before StartNotify returns (pitfall 2): accept them.
            guard charPath == heartRatePath, [.subscribing, .streaming, .stale].contains(phase),
                let d = device
            else { break }
            let measurement: HeartRateMeasurement
            do { measurement = try HeartRateMeasurement(decoding: bytes) } catch {
                out.append(.malformed(error))
                break
            }
            let n = sequencer.next(measurement, deviceId: d.address, monotonicNs: monotonicNs, wallMs: wallMs)
            out.append(.sample(n.sample))
            if phase == .subscribing {
                notifyArmedPath = heartRatePath
                enterStreaming(&out)
            }
            if phase == .stale {
                phase = .streaming
                cancel(.staleReconnect, &out)
                status(.streaming, nil, &out)
            } else if lastMessage != nil || lastState != .streaming {
                status(.streaming, nil, &out)
            }
            schedule(.stale, policy.staleAfterMs, &out)

        case .battery(let percent):
            // An unchanged reading (Battery1 and a 2A19 read, or a repeated signal) says nothing new.
            guard percent != batteryPercent else { break }
            batteryPercent = percent
            if let s = lastState { status(s, lastMessage, &out) }

        case let .timer(timer, token):
            guard tokens[timer] == token else { break }
            tokens[timer] = nil
            onTimer(timer, &out)

        case .bluezVanished:
            // bluetoothd restart (pitfall 15): every object and session is gone.
            for t in tokens.keys { out.append(.cancel(t)) }
            tokens = [:]
            if [.streaming, .stale, .subscribing].contains(phase) { sequencer.markGap() }
            device = nil
            heartRatePath = nil
            notifyArmedPath = nil
            awaitingAbortDisconnect = false
            phase = .waitingForBluez
            status(.reconnecting, "bluetoothd is not running; waiting for it", &out)

        case .bluezAppeared:
            guard phase == .waitingForBluez else { break }
            discover(&out, state: .searching, message: "bluetoothd is back; looking for \(spec)")

        case .stop:
            for t in tokens.keys { out.append(.cancel(t)) }
            tokens = [:]
            if let d = device, d.connected || [.connecting, .resolving, .subscribing, .streaming, .stale].contains(phase) {
                out.append(.disconnect(path: d.path))   // never leave the strap connected (pitfall 11)
            }
            out.append(.stopDiscovery)
            phase = .stopped
            status(.disconnected, nil, &out)
        }
        return out
    }

    // MARK: Steps

    private var lastState: SensorStatus.State?

    private mutating func status(_ state: SensorStatus.State, _ message: String?, _ out: inout [StrapAction]) {
        lastState = state
        lastMessage = message
        out.append(.status(SensorStatus(
            source: BLEHeartRate.source, deviceId: device?.address ?? specAddress, state: state,
            batteryPercent: batteryPercent, message: message)))
    }

    private var specAddress: String? {
        if case .address(let a) = spec { return a }
        return nil
    }

    private mutating func schedule(_ timer: StrapTimer, _ ms: Int64, _ out: inout [StrapAction]) {
        nextToken += 1
        tokens[timer] = nextToken
        out.append(.schedule(timer, afterMs: ms, token: nextToken))
    }

    private mutating func cancel(_ timer: StrapTimer, _ out: inout [StrapAction]) {
        if tokens.removeValue(forKey: timer) != nil { out.append(.cancel(timer)) }
    }

    private mutating func discover(_ out: inout [StrapAction], state: SensorStatus.State, message: String) {
        phase = .discovering
        // Armed before the status is reported, as the backoff is: whoever sees the status can move the clock past it.
        if let ms = policy.discoveryRefreshMs { schedule(.discoveryRefresh, ms, &out) }
        status(state, message, &out)
        out.append(.startDiscovery)
    }

    /// Disconnects (or cancels a pending Connect) and records the device as down at once, so that decisions taken
    /// before BlueZ's Connected=false arrives do not act on a link that is going away.
    private mutating func disconnect(_ out: inout [StrapAction]) {
        guard let p = device?.path else { return }
        out.append(.disconnect(path: p))
        if device?.connected == true || [.resolving, .subscribing, .streaming, .stale].contains(phase) {
            awaitingDisconnectEcho = true
        }
        device?.connected = false
        device?.servicesResolved = false
    }

    private mutating func connect(_ out: inout [StrapAction]) {
        guard let d = device else { return }
        phase = .connecting
        droppedDuringAttempt = false
        status(lastState == .reconnecting ? .reconnecting : .connecting, "connecting to \(d.address)", &out)
        out.append(.connect(path: d.path))
        schedule(.connect, policy.connectTimeoutMs, &out)
    }

    private mutating func enterLookUp(_ out: inout [StrapAction]) {
        guard let d = device else { return }
        phase = .resolving
        out.append(.lookUpHeartRateCharacteristic(devicePath: d.path))
    }

    private mutating func enterStreaming(_ out: inout [StrapAction]) {
        phase = .streaming
        failures = 0
        abortRetries = 0
        status(.connected, nil, &out)
        schedule(.stale, policy.staleAfterMs, &out)
    }

    private mutating func linkLost(_ out: inout [StrapAction]) {
        for t in [StrapTimer.stale, .staleReconnect, .resolve, .connect] { cancel(t, &out) }
        if sequencer.lastSequence > 0 { sequencer.markGap() }
    }

    private mutating func backoff(_ out: inout [StrapAction], message: String, state: SensorStatus.State = .reconnecting) {
        for t in [StrapTimer.stale, .staleReconnect, .resolve, .connect, .disconnectWait] { cancel(t, &out) }
        awaitingAbortDisconnect = false
        let delay = policy.backoffMs[min(failures, policy.backoffMs.count - 1)]
        failures += 1
        phase = .backoff
        status(state, "\(message) (retry in \(Self.seconds(delay)) s)", &out)
        schedule(.backoff, delay, &out)
    }

    private mutating func onTimer(_ timer: StrapTimer, _ out: inout [StrapAction]) {
        switch (timer, phase) {
        case (.connect, .connecting):
            disconnect(&out)   // cancels the pending Connect
            backoff(&out, message: "connect timed out")
        case (.resolve, .resolving):
            disconnect(&out)
            backoff(&out, message: "services not resolved in time")
        case (.disconnectWait, .connecting):
            awaitingAbortDisconnect = false
            connect(&out)
        case (.stale, .streaming):
            // Never a frozen number (pitfall 19): say the values are not current.
            phase = .stale
            sequencer.markGap()
            status(.stale, "no heart-rate notification for \(Self.seconds(policy.staleAfterMs)) s", &out)
            if let ms = policy.staleReconnectAfterMs { schedule(.staleReconnect, ms, &out) }
        case (.staleReconnect, .stale):
            // BlueZ may keep a dead link Connected for tens of seconds: drop it ourselves and reconnect.
            let silent = policy.staleAfterMs + (policy.staleReconnectAfterMs ?? 0)
            disconnect(&out)
            linkLost(&out)
            backoff(&out, message: "no heart-rate notification for \(Self.seconds(silent)) s; reconnecting")
        case (.discoveryRefresh, .discovering):
            out.append(.restartDiscovery)
            if let ms = policy.discoveryRefreshMs { schedule(.discoveryRefresh, ms, &out) }
        case (.backoff, .backoff):
            if let d = device {
                if d.connected, d.servicesResolved {
                    enterLookUp(&out)
                } else {
                    connect(&out)
                }
            } else {
                discover(&out, state: .reconnecting, message: "looking for \(spec)")
            }
        default:
            break
        }
    }

    /// `1500` → "1.5", `20000` → "20".
    static func seconds(_ ms: Int64) -> String {
        ms % 1000 == 0 ? "\(ms / 1000)" : "\(Double(ms) / 1000)"
    }

    /// What a user can do about a failure that usually means the strap is not reachable.
    static func hint(_ f: StrapBusFailure) -> String {
        let text = describe(f).lowercased()
        guard f == .timeout || text.contains("timeout") || text.contains("timed out") else { return "" }
        return "; is the strap worn (it advertises only with skin contact), in range, and not held by a phone app?"
    }

    static func describe(_ f: StrapBusFailure) -> String {
        switch f {
        case .abortByLocal: "le-connection-abort-by-local"
        case .inProgress: "operation in progress"
        case .unknownObject: "device object gone"
        case .alreadyConnected: "already connected"
        case .notReady: "adapter not ready (off or rfkill-blocked)"
        case .notConnected: "not connected"
        case .timeout: "no reply in time"
        case let .other(name, message): message.isEmpty ? name : "\(name): \(message)"
        }
    }
}
