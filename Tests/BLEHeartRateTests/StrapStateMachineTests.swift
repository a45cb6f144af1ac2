import BLEHeartRate
import GatewayEngine
import Testing

/// The per-strap machine alone: events in, actions out (no bus).
struct StrapStateMachineTests {
    static let path = "/org/bluez/hci0/dev_A0_9E_1A_00_00_01"
    static let hrm = path + "/service000c/char000d"
    static let address = "A0:9E:1A:00:00:01"

    func device(connected: Bool = false, resolved: Bool = false) -> StrapDevice {
        StrapDevice(path: Self.path, address: Self.address, name: "Polar H10 0001", connected: connected,
                    servicesResolved: resolved)
    }

    func states(_ actions: [StrapAction]) -> [SensorStatus.State] {
        actions.compactMap { if case .status(let s) = $0 { s.state } else { nil } }
    }

    func token(_ timer: StrapTimer, in actions: [StrapAction]) -> UInt64? {
        for a in actions { if case let .schedule(t, _, token) = a, t == timer { return token } }
        return nil
    }

    func delay(_ timer: StrapTimer, in actions: [StrapAction]) -> Int64? {
        for a in actions { if case let .schedule(t, ms, _) = a, t == timer { return ms } }
        return nil
    }

    func samples(_ actions: [StrapAction]) -> [BiosignalSample] {
        actions.compactMap { if case .sample(let s) = $0 { s } else { nil } }
    }

    /// Drives the machine to streaming; returns it.
    func streaming(policy: StrapPolicy = StrapPolicy()) -> StrapStateMachine {
        var m = StrapStateMachine(spec: .address(Self.address), policy: policy)
        _ = m.handle(.start)
        _ = m.handle(.deviceSeen(device()))
        _ = m.handle(.connectReturned(nil))
        _ = m.handle(.connectedChanged(path: Self.path, true))
        _ = m.handle(.servicesResolvedChanged(path: Self.path, true))
        _ = m.handle(.heartRateCharacteristic(path: Self.hrm))
        _ = m.handle(.startNotifyReturned(nil))
        return m
    }

    func notify(_ m: inout StrapStateMachine, _ bytes: [UInt8] = [0x10, 0x48, 0x2c, 0x03]) -> [StrapAction] {
        m.handle(.notification(charPath: Self.hrm, bytes: bytes, monotonicNs: 1, wallMs: 1000))
    }

    @Test func anUnchangedBatteryReadingRepeatsNoStatus() {
        var m = streaming()
        func percents(_ actions: [StrapAction]) -> [Int?] {
            actions.compactMap { if case .status(let s) = $0 { s.batteryPercent } else { nil } }
        }
        #expect(percents(m.handle(.battery(percent: 80))) == [80])
        #expect(m.handle(.battery(percent: 80)).isEmpty, "the same percentage again is no news")
        #expect(percents(m.handle(.battery(percent: 79))) == [79])
    }

    @Test func happyPath() {
        var m = StrapStateMachine(spec: .address(Self.address))
        #expect(m.handle(.start).contains(.startDiscovery))
        #expect(m.handle(.deviceSeen(device())).contains(.connect(path: Self.path)))
        #expect(m.phase == .connecting)
        _ = m.handle(.connectReturned(nil))
        #expect(m.phase == .resolving)
        #expect(m.handle(.servicesResolvedChanged(path: Self.path, true))
            .contains(.lookUpHeartRateCharacteristic(devicePath: Self.path)))
        let a = m.handle(.heartRateCharacteristic(path: Self.hrm))
        #expect(a.contains(.startNotify(charPath: Self.hrm)))
        #expect(a.contains(.readDetails(devicePath: Self.path)))
        #expect(states(m.handle(.startNotifyReturned(nil))) == [.connected])
        let n = notify(&m)
        let samples = n.compactMap { if case .sample(let s) = $0 { s } else { nil } }
        #expect(samples.count == 1)
        #expect(samples.first?.rrRaw1024 == [812])
        #expect(samples.first?.deviceId == Self.address)
        #expect(samples.first?.gapBefore == false)
    }

    /// bluetoothd 5.66 can accept a StartDiscovery and scan nothing: while the strap is not seen, discovery is
    /// restarted every `discoveryRefreshMs`; once it is, the refresh stops.
    @Test func aSearchThatFindsNothingRestartsDiscovery() throws {
        var m = StrapStateMachine(spec: .address(Self.address))
        let start = m.handle(.start)
        #expect(delay(.discoveryRefresh, in: start) == StrapPolicy().discoveryRefreshMs)
        var t = try #require(token(.discoveryRefresh, in: start))
        for _ in 0..<3 {
            let fired = m.handle(.timer(.discoveryRefresh, token: t))
            #expect(fired.contains(.restartDiscovery))
            t = try #require(token(.discoveryRefresh, in: fired))
        }
        _ = m.handle(.deviceSeen(device()))
        #expect(m.phase == .connecting)
        #expect(!m.handle(.timer(.discoveryRefresh, token: t)).contains(.restartDiscovery))
        var never = StrapPolicy()
        never.discoveryRefreshMs = nil
        var quiet = StrapStateMachine(spec: .address(Self.address), policy: never)
        #expect(token(.discoveryRefresh, in: quiet.handle(.start)) == nil)
    }

    @Test func pitfall7_connectedFalseWhileResolvingRetries() {
        var m = StrapStateMachine(spec: .address(Self.address))
        _ = m.handle(.start)
        _ = m.handle(.deviceSeen(device()))
        _ = m.handle(.connectReturned(nil))
        _ = m.handle(.connectedChanged(path: Self.path, true))
        let a = m.handle(.connectedChanged(path: Self.path, false))
        #expect(m.phase == .backoff)
        #expect(states(a) == [.reconnecting])
        let t = token(.backoff, in: a)
        #expect(m.handle(.timer(.backoff, token: t!)).contains(.connect(path: Self.path)))
    }

    @Test func pitfall7_resolveTimeoutDisconnectsAndRetries() {
        var m = StrapStateMachine(spec: .address(Self.address))
        _ = m.handle(.start)
        _ = m.handle(.deviceSeen(device()))
        let a = m.handle(.connectReturned(nil))
        let t = token(.resolve, in: a)!
        let b = m.handle(.timer(.resolve, token: t))
        #expect(b.contains(.disconnect(path: Self.path)))
        #expect(m.phase == .backoff)
    }

    @Test func pitfall8_missingCharacteristicDisconnectsAndRetries() {
        var m = StrapStateMachine(spec: .address(Self.address))
        _ = m.handle(.start)
        _ = m.handle(.deviceSeen(device()))
        _ = m.handle(.connectReturned(nil))
        _ = m.handle(.servicesResolvedChanged(path: Self.path, true))
        let a = m.handle(.heartRateCharacteristic(path: nil))
        #expect(a.contains(.disconnect(path: Self.path)))
        #expect(m.phase == .backoff)
    }

    @Test func pitfall4_abortWaitsForDisconnectThenRetries() {
        var m = StrapStateMachine(spec: .address(Self.address))
        _ = m.handle(.start)
        _ = m.handle(.deviceSeen(device()))
        _ = m.handle(.connectedChanged(path: Self.path, true))
        let a = m.handle(.connectReturned(.abortByLocal))
        #expect(!a.contains(.connect(path: Self.path)), "must not retry before Connected=false")
        #expect(m.handle(.connectedChanged(path: Self.path, false)).contains(.connect(path: Self.path)))
    }

    @Test func pitfall4_abortRetriesAfterWaitIfDisconnectWasMissed() {
        var m = StrapStateMachine(spec: .address(Self.address))
        _ = m.handle(.start)
        _ = m.handle(.deviceSeen(device()))
        let a = m.handle(.connectReturned(.abortByLocal))
        let t = token(.disconnectWait, in: a)!
        #expect(m.handle(.timer(.disconnectWait, token: t)).contains(.connect(path: Self.path)))
    }

    /// BlueZ connects to a bonded device encrypted; a strap that lost its keys fails that, which BlueZ 5.66 reports
    /// as le-connection-abort-by-local (device.c att_connect_cb) on every try, the device still Paired.
    @Test func aPairedStrapThatKeepsAbortingHasItsBondRemovedOnce() {
        var m = StrapStateMachine(spec: .address(Self.address))
        _ = m.handle(.start)
        var paired = device()
        paired.paired = true
        _ = m.handle(.deviceSeen(paired))
        var last: [StrapAction] = []
        for _ in 0...StrapPolicy().maxAbortRetries {
            last = m.handle(.connectReturned(.abortByLocal))
            if last.contains(.connect(path: Self.path)) || last.contains(.removeDevice(path: Self.path)) { continue }
            last = m.handle(.connectedChanged(path: Self.path, false))
        }
        #expect(last.contains(.removeDevice(path: Self.path)), "\(last)")
        #expect(last.contains(.startDiscovery))
        let said = last.compactMap { if case .status(let s) = $0 { s.message } else { nil } }.joined()
        #expect(said.contains("refuses this computer's pairing"), "\(said)")
        // Found again (no longer paired), it connects without encryption.
        #expect(m.handle(.deviceSeen(device())).contains(.connect(path: Self.path)))
        // Should the same happen again, it is not removed a second time: it backs off as for any strap.
        _ = m.handle(.deviceSeen(paired))
        for _ in 0...StrapPolicy().maxAbortRetries {
            last = m.handle(.connectReturned(.abortByLocal))
            if last.contains(.connect(path: Self.path)) { continue }
            last = m.handle(.connectedChanged(path: Self.path, false))
        }
        #expect(!last.contains(.removeDevice(path: Self.path)))
    }

    @Test func anUnpairedStrapThatKeepsAbortingBacksOffAndKeepsItsDevice() {
        var m = StrapStateMachine(spec: .address(Self.address))
        _ = m.handle(.start)
        _ = m.handle(.deviceSeen(device()))
        var all: [StrapAction] = []
        for _ in 0...StrapPolicy().maxAbortRetries {
            all += m.handle(.connectReturned(.abortByLocal))
            all += m.handle(.connectedChanged(path: Self.path, false))
        }
        #expect(!all.contains(.removeDevice(path: Self.path)))
        #expect(m.phase == .backoff)
    }

    @Test func pitfall3_inProgressCancelsWithDisconnectThenBacksOff() {
        var m = StrapStateMachine(spec: .address(Self.address))
        _ = m.handle(.start)
        _ = m.handle(.deviceSeen(device()))
        let a = m.handle(.connectReturned(.inProgress))
        #expect(a.contains(.disconnect(path: Self.path)))
        #expect(m.phase == .backoff)
    }

    @Test func pitfall9_unknownObjectRescans() {
        var m = StrapStateMachine(spec: .address(Self.address))
        _ = m.handle(.start)
        _ = m.handle(.deviceSeen(device()))
        let a = m.handle(.connectReturned(.unknownObject))
        #expect(a.contains(.startDiscovery))
        #expect(m.phase == .discovering)
        #expect(m.device == nil)
    }

    @Test func pitfall1and2_reconnectReusesTheArmedNotifySession() {
        var m = streaming()
        _ = notify(&m)
        let drop = m.handle(.connectedChanged(path: Self.path, false))
        let t = token(.backoff, in: drop)!
        #expect(m.handle(.timer(.backoff, token: t + 100)).isEmpty, "a stale timer token is ignored")
        #expect(m.handle(.timer(.backoff, token: t)).contains(.connect(path: Self.path)))
        _ = m.handle(.connectReturned(nil))
        _ = m.handle(.servicesResolvedChanged(path: Self.path, true))
        // BlueZ re-arms our session on reconnect: no second StartNotify (and so no second handler).
        let a = m.handle(.heartRateCharacteristic(path: Self.hrm))
        #expect(!a.contains(.startNotify(charPath: Self.hrm)))
        #expect(m.phase == .streaming)
        // The first sample after the drop says beats may be missing.
        let s = notify(&m).compactMap { if case .sample(let s) = $0 { s } else { nil } }
        #expect(s.map(\.gapBefore) == [true])
        #expect(s.first?.sequence == 2)
    }

    @Test func pitfall2_notificationBeforeStartNotifyReturnsIsKept() {
        var m = StrapStateMachine(spec: .address(Self.address))
        _ = m.handle(.start)
        _ = m.handle(.deviceSeen(device()))
        _ = m.handle(.connectReturned(nil))
        _ = m.handle(.servicesResolvedChanged(path: Self.path, true))
        _ = m.handle(.heartRateCharacteristic(path: Self.hrm))
        let a = notify(&m)
        #expect(a.contains { if case .sample = $0 { true } else { false } })
        #expect(m.phase == .streaming)
    }

    @Test func pitfall19_staleThenStreamingAgain() {
        var m = streaming()
        let a = notify(&m)
        let t = token(.stale, in: a)!
        #expect(states(m.handle(.timer(.stale, token: t))) == [.stale])
        #expect(m.phase == .stale)
        let b = notify(&m)
        #expect(states(b) == [.streaming])
        #expect(m.phase == .streaming)
    }

    @Test func pitfall11_reusesAnExistingConnectionAndDisconnectsOnStop() {
        var m = StrapStateMachine(spec: .address(Self.address))
        _ = m.handle(.start)
        let a = m.handle(.deviceSeen(device(connected: true, resolved: true)))
        #expect(!a.contains(.connect(path: Self.path)))
        #expect(a.contains(.lookUpHeartRateCharacteristic(devicePath: Self.path)))
        let s = m.handle(.stop)
        #expect(s.contains(.disconnect(path: Self.path)))
        #expect(m.phase == .stopped)
    }

    @Test func pitfall15_bluetoothdRestartStartsOver() {
        var m = streaming()
        _ = notify(&m)
        #expect(states(m.handle(.bluezVanished)) == [.reconnecting])
        #expect(m.device == nil && m.notifyArmedPath == nil)
        #expect(m.handle(.bluezAppeared).contains(.startDiscovery))
        _ = m.handle(.deviceSeen(device()))
        _ = m.handle(.connectReturned(nil))
        _ = m.handle(.servicesResolvedChanged(path: Self.path, true))
        // Sessions died with the old daemon: StartNotify again.
        #expect(m.handle(.heartRateCharacteristic(path: Self.hrm)).contains(.startNotify(charPath: Self.hrm)))
    }

    @Test func malformedPayloadIsReportedNotFatal() {
        var m = streaming()
        let a = notify(&m, [0x10])
        #expect(a == [.malformed(.truncatedHeartRate(payloadLength: 1, needed: 2))])
        #expect(m.phase == .streaming)
    }

    @Test func backoffGrows() {
        var m = StrapStateMachine(spec: .address(Self.address))
        _ = m.handle(.start)
        _ = m.handle(.deviceSeen(device()))
        var delays: [Int64] = []
        for _ in 0..<4 {
            let a = m.handle(.connectReturned(.other(name: "org.bluez.Error.Failed", message: "le-connection-timeout")))
            for x in a { if case let .schedule(.backoff, ms, tok) = x { delays.append(ms); _ = m.handle(.timer(.backoff, token: tok)) } }
        }
        #expect(delays == [250, 1000, 2000, 4000])
    }

    @Test func errorClassification() {
        #expect(StrapBusFailure(errorName: "org.bluez.Error.Failed", message: "le-connection-abort-by-local") == .abortByLocal)
        #expect(StrapBusFailure(errorName: "org.bluez.Error.InProgress", message: "In Progress") == .inProgress)
        #expect(StrapBusFailure(errorName: "org.freedesktop.DBus.Error.UnknownObject", message: "") == .unknownObject)
        #expect(StrapBusFailure(errorName: "org.bluez.Error.NotReady", message: "Resource Not Ready") == .notReady)
    }

    @Test func specs() throws {
        #expect(try StrapSpec(parsing: "a0:9e:1a:00:00:01") == .address("A0:9E:1A:00:00:01"))
        #expect(try StrapSpec(parsing: "auto") == .auto)
        #expect(try StrapSpec(parsing: "Polar H10") == .name("Polar H10"))
        #expect(throws: StrapSpecError.self) { try StrapSpec(parsing: "  ") }
        // A mistyped address was taken as a name and searched for for ever.
        // Other ways of writing an address (Windows, Android, bare hex) are the address, not a name.
        #expect(try StrapSpec(parsing: "a0-9e-1a-00-00-01") == .address("A0:9E:1A:00:00:01"))
        #expect(try StrapSpec(parsing: "A09E1A000001") == .address("A0:9E:1A:00:00:01"))
        for typo in ["AA:BB:CC:DD:EE", "A0:9E:1A:12:34:5G", "a0:9e:1a:00:00:01:02", "A0-9E-1A-12-34-5G", "AA-BB-CC-DD-EE",
                     "AABBCCDDEEF", "AABBCCDDEEFF0"] {
            #expect { try StrapSpec(parsing: typo) } throws: { ($0 as? StrapSpecError)?.notAnAddress == true }
        }
        #expect(BLEHeartRateError.invalidSpec("AA:BB:CC:DD:EE").description.contains("`hr-gateway scan` lists"))
        #expect(try StrapSpec(parsing: "HRM-Pro:123") == .name("HRM-Pro:123"))
        #expect(try StrapSpec(parsing: "HR-1-2-3") == .name("HR-1-2-3"), "a name with dashes")
        #expect(StrapSpec.auto.matches(address: "X", name: "TICKR 1", uuids: []))
        #expect(!StrapSpec.auto.matches(address: "X", name: "Mouse", uuids: []))
    }
}

extension StrapStateMachineTests {
    @Test func pitfall4_abortAfterTheDisconnectWasAlreadySeenRetriesAtOnce() {
        var m = StrapStateMachine(spec: .address(Self.address))
        _ = m.handle(.start)
        _ = m.handle(.deviceSeen(device()))
        _ = m.handle(.connectedChanged(path: Self.path, true))
        _ = m.handle(.connectedChanged(path: Self.path, false))
        #expect(m.handle(.connectReturned(.abortByLocal)).contains(.connect(path: Self.path)))
    }
}

extension StrapStateMachineTests {
    @Test func pitfall10_secondMissingCharacteristicRemovesTheDevice() {
        var m = StrapStateMachine(spec: .address(Self.address))
        _ = m.handle(.start)
        _ = m.handle(.deviceSeen(device()))
        _ = m.handle(.connectReturned(nil))
        _ = m.handle(.servicesResolvedChanged(path: Self.path, true))
        let first = m.handle(.heartRateCharacteristic(path: nil))
        #expect(!first.contains(.removeDevice(path: Self.path)))
        let t = token(.backoff, in: first)!
        _ = m.handle(.timer(.backoff, token: t))
        _ = m.handle(.connectReturned(nil))
        _ = m.handle(.servicesResolvedChanged(path: Self.path, true))
        let second = m.handle(.heartRateCharacteristic(path: nil))
        #expect(second.contains(.removeDevice(path: Self.path)))
        #expect(second.contains(.startDiscovery))
        #expect(m.device == nil)
    }
}

extension StrapStateMachineTests {
    @Test func ownDisconnectIsNotMistakenForALinkLossLater() {
        var m = StrapStateMachine(spec: .address(Self.address))
        _ = m.handle(.start)
        _ = m.handle(.deviceSeen(device()))
        _ = m.handle(.connectReturned(nil))
        _ = m.handle(.connectedChanged(path: Self.path, true))
        _ = m.handle(.servicesResolvedChanged(path: Self.path, true))
        let missing = m.handle(.heartRateCharacteristic(path: nil))
        #expect(missing.contains(.disconnect(path: Self.path)))
        // The backoff fires before BlueZ's Connected=false arrives: connect again, not look up again.
        let t = token(.backoff, in: missing)!
        #expect(m.handle(.timer(.backoff, token: t)).contains(.connect(path: Self.path)))
        _ = m.handle(.connectReturned(nil))
        // The late Connected=false of the old link is no link loss for the new attempt.
        #expect(m.handle(.connectedChanged(path: Self.path, false)).isEmpty)
        #expect(m.phase == .resolving)
    }
}

extension StrapStateMachineTests {
    /// Replies overtake signals in the driver (a reply resumes its caller directly; a signal goes through the BlueZ
    /// mirror first) and bluetoothd itself emits property changes lazily, so the old link's Connected=true and our
    /// own Disconnect's Connected=false may both arrive after the next attempt began.
    @Test func oldLinksLateConnectedSignalsAreNotALinkLossOfTheNextAttempt() {
        var m = StrapStateMachine(spec: .address(Self.address))
        _ = m.handle(.start)
        _ = m.handle(.deviceSeen(device()))
        let resolving = m.handle(.connectReturned(nil))
        let timedOut = m.handle(.timer(.resolve, token: token(.resolve, in: resolving)!))
        #expect(timedOut.contains(.disconnect(path: Self.path)))
        #expect(m.phase == .backoff)
        // The first link's Connected=true, delivered only now.
        _ = m.handle(.connectedChanged(path: Self.path, true))
        let retry = m.handle(.timer(.backoff, token: token(.backoff, in: timedOut)!))
        #expect(retry.contains(.connect(path: Self.path)))
        _ = m.handle(.connectReturned(nil))
        #expect(m.phase == .resolving)
        // Our Disconnect's Connected=false of the first link: not a loss of the second.
        #expect(m.handle(.connectedChanged(path: Self.path, false)).isEmpty)
        #expect(m.phase == .resolving)
        // The second link comes up and streams.
        _ = m.handle(.connectedChanged(path: Self.path, true))
        #expect(m.handle(.servicesResolvedChanged(path: Self.path, true))
            .contains(.lookUpHeartRateCharacteristic(devicePath: Self.path)))
        _ = m.handle(.heartRateCharacteristic(path: Self.hrm))
        #expect(states(m.handle(.startNotifyReturned(nil))) == [.connected])
        // A real loss of the second link is still one.
        #expect(states(m.handle(.connectedChanged(path: Self.path, false))) == [.reconnecting])
        #expect(m.phase == .backoff)
    }
}

extension StrapStateMachineTests {
    @Test func staleForTooLongDisconnectsAndReconnectsWithAGap() {
        var policy = StrapPolicy()
        policy.staleAfterMs = 4_000
        policy.staleReconnectAfterMs = 6_000
        var m = streaming(policy: policy)
        let first = notify(&m)
        #expect(samples(first).map(\.sequence) == [1])
        let stale = m.handle(.timer(.stale, token: token(.stale, in: first)!))
        #expect(states(stale) == [.stale])
        #expect(delay(.staleReconnect, in: stale) == 6_000)
        #expect(!stale.contains(.disconnect(path: Self.path)), "stale alone waits")

        let drop = m.handle(.timer(.staleReconnect, token: token(.staleReconnect, in: stale)!))
        #expect(drop.contains(.disconnect(path: Self.path)))
        #expect(m.phase == .backoff)
        let status = drop.compactMap { if case .status(let s) = $0 { s } else { nil } }.last
        #expect(status?.state == .reconnecting)
        #expect(status?.message?.hasPrefix("no heart-rate notification for 10 s; reconnecting") == true)
        #expect(delay(.backoff, in: drop) == policy.backoffMs.first, "a strap that streamed starts the backoff over")

        #expect(m.handle(.timer(.backoff, token: token(.backoff, in: drop)!)).contains(.connect(path: Self.path)))
        // BlueZ's Connected=false for our Disconnect, arriving late: no second link loss.
        #expect(m.handle(.connectedChanged(path: Self.path, false)).isEmpty)
        _ = m.handle(.connectReturned(nil))
        _ = m.handle(.connectedChanged(path: Self.path, true))
        _ = m.handle(.servicesResolvedChanged(path: Self.path, true))
        // BlueZ re-arms the notify session: streaming again without a second StartNotify.
        let again = m.handle(.heartRateCharacteristic(path: Self.hrm))
        #expect(!again.contains(.startNotify(charPath: Self.hrm)))
        #expect(states(again) == [.connected])
        let next = samples(notify(&m))
        #expect(next.map(\.sequence) == [2])
        #expect(next.map(\.gapBefore) == [true])
    }

    @Test func notificationWhileStaleCancelsTheReconnect() {
        var m = streaming()
        let first = notify(&m)
        let stale = m.handle(.timer(.stale, token: token(.stale, in: first)!))
        let reconnect = token(.staleReconnect, in: stale)!
        let back = notify(&m)
        #expect(back.contains(.cancel(.staleReconnect)))
        #expect(states(back) == [.streaming])
        #expect(samples(back).map(\.gapBefore) == [true])
        // Had the timer already fired (it raced the cancel), it does nothing.
        #expect(m.handle(.timer(.staleReconnect, token: reconnect)).isEmpty)
        #expect(m.phase == .streaming)
    }

    @Test func linkLossWhileStaleCancelsTheStaleReconnect() {
        var m = streaming()
        let first = notify(&m)
        _ = m.handle(.timer(.stale, token: token(.stale, in: first)!))
        let lost = m.handle(.connectedChanged(path: Self.path, false))
        #expect(lost.contains(.cancel(.staleReconnect)))
        #expect(!lost.contains(.disconnect(path: Self.path)))
        #expect(m.phase == .backoff)
    }

    @Test func withoutStaleReconnectStaleWaitsForBlueZ() {
        var policy = StrapPolicy()
        policy.staleReconnectAfterMs = nil
        var m = streaming(policy: policy)
        let first = notify(&m)
        let stale = m.handle(.timer(.stale, token: token(.stale, in: first)!))
        #expect(states(stale) == [.stale])
        #expect(token(.staleReconnect, in: stale) == nil)
        #expect(m.phase == .stale)
    }
}
