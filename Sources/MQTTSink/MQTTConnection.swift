import CMosquitto
import Foundation
import Synchronization

/// One connection to an MQTT broker through libmosquitto: its network thread (`mosquitto_loop_start`) connects,
/// keeps alive, reconnects with backoff and retransmits unacknowledged QoS 1 messages; this class publishes and
/// counts what the broker has acknowledged, reporting each acknowledged message's tag (the sink's outbox row).
/// Subscriptions are made again on every connection (the session is clean) and their messages handed to
/// `onMessage`; connection changes (up, refused, lost) go to `onLink`.
///
/// Thread safety: after `start()`, libmosquitto's own locks make `mosquitto_publish` and `mosquitto_subscribe` safe
/// from any thread while its network thread runs; the callbacks run on that thread and touch only `state` and
/// `handlers` (Mutexes). Handlers are called outside the locks.
public final class MQTTConnection: Sendable {
    private struct State: ~Copyable {
        var connected = false
        /// QoS 1 messages sent and not yet acknowledged, by message id, with their tags.
        var pending: [Int32: Int64?] = [:]
        /// QoS 0 messages queued whose send libmosquitto has not reported yet.
        var unreported: Set<Int32> = []
        /// Reports that arrived before `publish` had recorded the id (the network thread was faster).
        var early: Set<Int32> = []
        var lastError: String?
        var waiters: [CheckedContinuation<Void, Never>] = []
        var refused = 0
        var stopped = false
        /// Messages published while not connected, sent in order once the broker accepts the connection.
        var held: [Held] = []
        /// The latest retained message of each topic, sent again after a reconnection, before what was held: a
        /// broker that restarted without its state has lost them, and one that kept them holds the broker's last
        /// will (`offline`) on the status topic.
        var retained: [String: Held] = [:]
        var everConnected = false

        var unacknowledged: Int { pending.count + held.reduce(0) { $0 + ($1.qos > 0 ? 1 : 0) } }

        mutating func hold(_ message: Held) {
            if held.count >= MQTTConnection.holdLimit {
                let victim = held.firstIndex { $0.qos == 0 } ?? 0
                held.remove(at: victim)
                refused += 1
                lastError = "more than \(MQTTConnection.holdLimit) messages held while the broker was unreachable"
            }
            held.append(message)
        }
    }

    private struct Held {
        var topic: String
        var payload: [UInt8]
        var qos: Int32
        var retain: Bool
        var tag: Int64?
    }

    /// What happened to the link, for the sink's log.
    public enum LinkEvent: Sendable, Equatable {
        case connected
        /// The broker answered CONNACK with a refusal (bad user name or password, not authorised, …).
        case refused(code: Int32, reason: String)
        case lost(reason: String)
        /// libmosquitto reported an error on the link (a TLS handshake that failed, a name that does not resolve…).
        case failed(reason: String)
    }

    private struct Handlers: Sendable {
        var acknowledged: (@Sendable (Int64) -> Void)?
        var message: (@Sendable (String, [UInt8], Bool) -> Void)?
        var link: (@Sendable (LinkEvent) -> Void)?
        var subscriptions: [String] = []
    }

    /// Messages held while the broker is unreachable, at most; past it the oldest QoS 0 message (a frame) goes
    /// first, counted in `refused`.
    public static let holdLimit = 10_000

    /// The libmosquitto client. `nonisolated(unsafe)`: libmosquitto serialises access itself (see above), and the
    /// handle is destroyed only in `deinit`, after `stop()` has joined the network thread.
    nonisolated(unsafe) private let handle: OpaquePointer
    private let state = Mutex(State())
    private let handlers = Mutex(Handlers())
    /// Retries the first connection (see `start()`).
    private let retry = Mutex<Task<Void, Never>?>(nil)
    public let broker: MQTTBrokerURL
    private let keepAliveSec: Int32

    /// Opens libmosquitto (once per process; see CMosquitto.h). Throws `MQTTError` with code `library`, saying how to
    /// install it, when it cannot be opened.
    public static func loadLibrary() throws(MQTTError) {
        if let reason = libraryProblem() {
            throw MQTTError(.library, "libmosquitto is not available (\(reason)): \(libraryFix)")
        }
    }

    /// What to do when libmosquitto cannot be opened: install it, or correct HR_GATEWAY_LIBMOSQUITTO when that is what
    /// pointed the loader at something else.
    public static var libraryFix: String {
        if let path = ProcessInfo.processInfo.environment["HR_GATEWAY_LIBMOSQUITTO"], !path.isEmpty {
            return "HR_GATEWAY_LIBMOSQUITTO is set to \(path): point it at libmosquitto.so.1, or unset it to use the "
                + "system's (sudo apt install libmosquitto1)"
        }
        return "install it with `sudo apt install libmosquitto1`, or set HR_GATEWAY_LIBMOSQUITTO to libmosquitto.so.1's path"
    }

    /// Why libmosquitto cannot be opened (the loader's message), or nil once it is open (`hr-gateway doctor`).
    public static func libraryProblem() -> String? {
        var why = [CChar](repeating: 0, count: 512)
        guard hrm_load(&why, why.count) == 1 else { return why.withUnsafeBufferPointer { String(cString: $0.baseAddress!) } }
        return nil
    }

    /// - Parameters:
    ///   - will: published by the broker, retained, if the connection drops without a clean disconnect.
    ///   - caFile: trust anchors for `mqtts://` (PEM); nil uses the system's.
    public init(
        clientId: String, broker: MQTTBrokerURL, will: (topic: String, payload: String)? = nil, caFile: String? = nil,
        keepAliveSec: Int32 = 30
    ) throws(MQTTError) {
        try Self.loadLibrary()
        guard let h = hrm_new(clientId, true, nil) else {
            throw MQTTError(.library, "libmosquitto could not create a client (out of memory or a bad client id)")
        }
        handle = h
        self.broker = broker
        self.keepAliveSec = keepAliveSec
        hrm_user_data_set(h, Unmanaged.passUnretained(self).toOpaque())
        _ = hrm_int_option(h, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V311)
        _ = hrm_reconnect_delay_set(h, 1, 30, true)
        if let user = broker.username {
            try check(hrm_username_pw_set(h, user, broker.password), "user name and password")
        }
        if broker.tls {
            let ca = caFile ?? "/etc/ssl/certs/ca-certificates.crt"
            guard FileManager.default.isReadableFile(atPath: ca) else {
                throw MQTTError(.tls, "mqtts: CA file \(ca) is not readable (--mqtt-ca FILE names one)")
            }
            try check(hrm_tls_set(h, ca, nil, nil, nil, nil), "TLS with CA file \(ca)", code: .tls)
        }
        if let will {
            let bytes = Array(will.payload.utf8)
            try check(hrm_will_set(h, will.topic, Int32(bytes.count), bytes, 1, true), "last will")
        }
        hrm_connect_callback_set(h) { _, object, rc in
            guard let object else { return }
            Unmanaged<MQTTConnection>.fromOpaque(object).takeUnretainedValue().connected(rc)
        }
        hrm_disconnect_callback_set(h) { _, object, rc in
            guard let object else { return }
            Unmanaged<MQTTConnection>.fromOpaque(object).takeUnretainedValue().disconnected(rc)
        }
        hrm_publish_callback_set(h) { _, object, mid in
            guard let object else { return }
            Unmanaged<MQTTConnection>.fromOpaque(object).takeUnretainedValue().acknowledged(mid)
        }
        hrm_log_callback_set(h) { _, object, level, text in
            guard let object, let text, level & Int32(MOSQ_LOG_ERR) != 0 else { return }
            Unmanaged<MQTTConnection>.fromOpaque(object).takeUnretainedValue().logged(String(cString: text))
        }
        hrm_message_callback_set(h) { _, object, message in
            guard let object, let message, let topic = message.pointee.topic else { return }
            let count = Int(max(0, message.pointee.payloadlen))
            let bytes = message.pointee.payload.map {
                Array(UnsafeRawBufferPointer(start: $0, count: count))
            } ?? []
            Unmanaged<MQTTConnection>.fromOpaque(object).takeUnretainedValue()
                .received(String(cString: topic), bytes, retained: message.pointee.retain)
        }
    }

    /// Called with the tag of each message the broker has acknowledged (QoS 1) or libmosquitto has sent (QoS 0),
    /// on the network thread: it must not block.
    public func onAcknowledged(_ handler: @escaping @Sendable (Int64) -> Void) {
        handlers.withLock { $0.acknowledged = handler }
    }

    /// Called for each message on a subscribed topic, on the network thread: it must not block. `retained`: the
    /// broker kept it from before this subscription (sent again at every connection).
    public func onMessage(_ handler: @escaping @Sendable (_ topic: String, _ payload: [UInt8], _ retained: Bool) -> Void) {
        handlers.withLock { $0.message = handler }
    }

    /// Called when the link comes up, is refused, or is lost, on the network thread.
    public func onLink(_ handler: @escaping @Sendable (LinkEvent) -> Void) {
        handlers.withLock { $0.link = handler }
    }

    /// Subscribes to `topic` (QoS 1) now if connected, and again on every connection.
    public func subscribe(_ topic: String) {
        handlers.withLock { $0.subscriptions.append(topic) }
        if isConnected { _ = hrm_subscribe(handle, nil, topic, 1) }
    }

    deinit {
        stop()
        // A retry that started the network thread while stop() ran would leave it running: end it for sure.
        _ = hrm_loop_stop(handle, true)
        hrm_destroy(handle)
    }

    private func check(_ rc: Int32, _ what: String, code: MQTTError.Code = .library) throws(MQTTError) {
        guard rc == MOSQ_ERR_SUCCESS.rawValue else {
            throw MQTTError(code, "\(what): \(String(cString: hrm_strerror(rc)))")
        }
    }

    /// Starts connecting in the background. Once connected, libmosquitto's network thread keeps the link and
    /// reconnects with backoff (1 s doubling to 30 s) after a loss; until the first connection (a broker that is
    /// down, a name that does not resolve yet) this class retries with the same backoff. Messages published
    /// meanwhile are held. Returns why the first attempt failed, for a warning.
    @discardableResult
    public func start() throws(MQTTError) -> String? {
        guard let failure = attemptConnection() else { return nil }
        let task = Task { [weak self] in
            var delayMs = 1_000
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(delayMs))
                guard let self, !Task.isCancelled, !self.state.withLock({ $0.stopped }) else { return }
                if self.attemptConnection() == nil { return }
                delayMs = min(delayMs * 2, 30_000)
            }
        }
        retry.withLock { $0 = task }
        return failure
    }

    /// One connection attempt and, when it is under way, the network thread; nil on success, else why not.
    private func attemptConnection() -> String? {
        let rc = hrm_connect_async(handle, broker.host, Int32(broker.port), keepAliveSec)
        guard rc == MOSQ_ERR_SUCCESS.rawValue else {
            return rc == MOSQ_ERR_ERRNO.rawValue ? String(cString: strerror(errno)) : String(cString: hrm_strerror(rc))
        }
        let loop = hrm_loop_start(handle)
        return loop == MOSQ_ERR_SUCCESS.rawValue ? nil : String(cString: hrm_strerror(loop))
    }

    /// Queues a message; while the broker is unreachable it is held and sent, in order, on connection. QoS 1
    /// messages are counted until the broker acknowledges them (libmosquitto retransmits them after a
    /// reconnection); libmosquitto reports QoS 0 ones when sent. Returns false when it was refused (counted in
    /// `refused`).
    @discardableResult
    public func publish(topic: String, payload: String, qos: Int32, retain: Bool, tag: Int64? = nil) -> Bool {
        let message = Held(topic: topic, payload: Array(payload.utf8), qos: qos, retain: retain, tag: tag)
        let hold = state.withLock { s -> Bool in
            if retain { s.retained[topic] = Held(topic: topic, payload: message.payload, qos: qos, retain: true) }
            guard !s.connected else { return false }
            s.hold(message)
            return true
        }
        return hold ? true : send(message)
    }

    /// Hands one message to libmosquitto; one refused for want of a connection (it just dropped) is held.
    private func send(_ message: Held) -> Bool {
        var mid: Int32 = 0
        let rc = hrm_publish(
            handle, &mid, message.topic, Int32(message.payload.count), message.payload, message.qos, message.retain)
        let qos = message.qos
        if rc == MOSQ_ERR_NO_CONN.rawValue {
            state.withLock { $0.hold(message) }
            return true
        }
        guard rc == MOSQ_ERR_SUCCESS.rawValue else {
            state.withLock {
                $0.refused += 1
                $0.lastError = String(cString: hrm_strerror(rc))
            }
            return false
        }
        // Each id goes into one set by whichever side comes first and out of it by the other, so none stays.
        let alreadyAcknowledged = state.withLock { s -> Bool in
            if s.early.remove(mid) != nil { return true }
            if qos > 0 { s.pending[mid] = .some(message.tag) } else { s.unreported.insert(mid) }
            return false
        }
        if alreadyAcknowledged, let tag = message.tag { handlers.withLock { $0.acknowledged }?(tag) }
        return true
    }

    /// QoS 1 messages not acknowledged yet (sent, or held for want of a connection).
    public var unacknowledged: Int { state.withLock { $0.unacknowledged } }
    /// Messages libmosquitto refused to queue, and why the last one was.
    public var refused: (count: Int, lastError: String?) { state.withLock { ($0.refused, $0.lastError) } }
    public var isConnected: Bool { state.withLock { $0.connected } }

    /// Waits until every QoS 1 message is acknowledged or `timeoutMs` has passed; returns how many are left.
    public func waitForAcknowledgements(timeoutMs: Int64) async -> Int {
        let timer = Task { [weak self] in
            try? await Task.sleep(for: .milliseconds(timeoutMs))
            self?.wakeWaiters()
        }
        defer { timer.cancel() }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let done = state.withLock { s -> Bool in
                if s.unacknowledged == 0 || s.stopped { return true }
                s.waiters.append(c)
                return false
            }
            if done { c.resume() }
        }
        return unacknowledged
    }

    private func wakeWaiters() {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            defer { s.waiters = [] }
            return s.waiters
        }
        for w in waiters { w.resume() }
    }

    /// Disconnects cleanly (the broker then does not publish the will) and joins the network thread. Idempotent.
    public func stop() {
        let first = state.withLock { s -> Bool in
            defer { s.stopped = true }
            return !s.stopped
        }
        guard first else { return }
        retry.withLock { $0 }?.cancel()
        _ = hrm_disconnect(handle)
        _ = hrm_loop_stop(handle, false)
        wakeWaiters()
    }

    // MARK: Callbacks (libmosquitto's network thread)

    private func connected(_ rc: Int32) {
        let link = handlers.withLock { $0.link }
        guard rc == 0 else {
            var reason = String(cString: hrm_connack_string(rc))
            while reason.hasSuffix(".") { reason.removeLast() }
            state.withLock { $0.lastError = reason }
            link?(.refused(code: rc, reason: reason))
            return
        }
        link?(.connected)
        for topic in handlers.withLock({ $0.subscriptions }) { _ = hrm_subscribe(handle, nil, topic, 1) }
        // A reconnection: every topic's latest retained message first (the status `online` again), then what was
        // held, which is newer where it has the same topic.
        state.withLock { s in
            if s.everConnected { s.held = s.retained.values.sorted { $0.topic < $1.topic } + s.held }
            s.everConnected = true
        }
        // Send what was held, in order; `connected` flips only once nothing is left, so that a message published
        // meanwhile queues behind the held ones instead of overtaking them.
        while true {
            let batch = state.withLock { s -> [Held] in
                if s.held.isEmpty { s.connected = true }
                defer { s.held = [] }
                return s.held
            }
            if batch.isEmpty { return }
            for message in batch { _ = send(message) }
        }
    }

    private func disconnected(_ rc: Int32) {
        let (wasConnected, stopped) = state.withLock { s -> (Bool, Bool) in
            defer { s.connected = false }
            return (s.connected, s.stopped)
        }
        // rc 0 is our own disconnect; a refused connection was reported as such already.
        if wasConnected && !stopped && rc != 0 {
            handlers.withLock { $0.link }?(.lost(reason: String(cString: hrm_strerror(rc))))
        }
    }

    private func acknowledged(_ mid: Int32) {
        let (wake, tag) = state.withLock { s -> (Bool, Int64?) in
            var tag: Int64?
            if s.unreported.remove(mid) == nil {
                if let entry = s.pending.removeValue(forKey: mid) { tag = entry } else { s.early.insert(mid) }
            }
            return (s.unacknowledged == 0 && !s.waiters.isEmpty, tag)
        }
        if let tag { handlers.withLock { $0.acknowledged }?(tag) }
        if wake { wakeWaiters() }
    }

    private func logged(_ error: String) {
        state.withLock { $0.lastError = error }
        handlers.withLock { $0.link }?(.failed(reason: error))
    }

    private func received(_ topic: String, _ payload: [UInt8], retained: Bool) {
        handlers.withLock { $0.message }?(topic, payload, retained)
    }
}
