import BLEHeartRate
import DBus
import DBusTestSupport
import Foundation
import GatewayEngine
import HRVAnalysis
import Testing

/// The provider against the scripted fake org.bluez on a private bus, one test per applicable ble.md §5 pitfall.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct BlueZProviderTests {
    static let strap = "A0:9E:1A:00:00:01"
    static let devicePath = "/org/bluez/hci0/dev_A0_9E_1A_00_00_01"

    /// The first 60 RR of the NSRDB excerpt (1/1024 s).
    static func rr() throws -> [UInt16] { Array(try loadNSRDB().rr1024.prefix(60)) }

    struct Rig {
        let fake: FakeBlueZ
        let clock: ManualSessionClock
        let provider: BLEHeartRateProvider
        let recorder: Recorder
        var statuses: AsyncStream<SensorStatus>.Iterator
        var samples: AsyncStream<BiosignalSample>.Iterator
    }

    func rig(spec: StrapSpec = .address(strap), fake given: FakeBlueZ? = nil, addStrap: Bool = true) async throws -> Rig {
        let fake: FakeBlueZ
        if let given { fake = given } else { fake = try await FakeBlueZ() }
        if addStrap { try await fake.addStrap(Self.strap, rr: Self.rr()) }
        let clock = ManualSessionClock()
        let mono = FakeMonotonic()
        let provider = BLEHeartRateProvider(spec: spec, bus: fake.bus, clock: clock, monotonicNs: { mono.next() })
        let recorder = Recorder()
        return Rig(fake: fake, clock: clock, provider: provider, recorder: recorder,
                   statuses: recorder.statuses.makeAsyncIterator(), samples: recorder.samples.makeAsyncIterator())
    }

    /// Starts the provider and waits until it is subscribed.
    func streaming(_ r: inout Rig) async throws {
        try await r.provider.startStreaming(into: r.recorder.sink)
        _ = try #require(await r.statuses.first(.connected))
    }

    /// Lets the backoff that `status` announces ("… (retry in 0.25 s)") run out. The timer is scheduled before its
    /// status is reported, so it is pending now, whatever delay the machine chose.
    func advancePastRetry(_ r: inout Rig, announcedBy status: SensorStatus?) throws {
        let message = try #require(status?.message)
        let text = try #require(message.split(separator: "(retry in ").last?.split(separator: " s)").first,
                                "no retry delay in \"\(message)\"")
        let seconds = try #require(Double(text), "no retry delay in \"\(message)\"")
        r.clock.advance(byMs: Int64((seconds * 1000).rounded()))
    }

    /// Waits for `.connected`; another backoff announced first is a failure (not a wait for a timer nobody fires).
    /// `announced` itself may come again: a battery reading repeats the current status with the percentage.
    func connectedWithoutAnotherRetry(_ r: inout Rig, announced: SensorStatus?) async throws {
        let s = try #require(await r.statuses.first {
            $0.state == .connected
                || ($0.message?.contains("(retry in") == true && $0.message != announced?.message)
        })
        try #require(s.state == .connected, "retried again: \(s.message ?? "")")
    }

    /// Advances past the announced backoff and waits for `.connected`.
    func reconnects(_ r: inout Rig, after status: SensorStatus?) async throws {
        try advancePastRetry(&r, announcedBy: status)
        try await connectedWithoutAnotherRetry(&r, announced: status)
    }

    /// RR (1/1024 s) the fake sends in its first `n` packets, from the Swift pacer (an independent implementation).
    func expectedPackets(_ n: Int) throws -> [[UInt16]] {
        Array(HeartRatePacer(rr1024: try Self.rr()).prefix(n)).map(\.measurement.rrIntervals1024)
    }

    @Test func happyPathDeliversEveryRRWithDetails() async throws {
        var r = try await rig()
        defer { r.fake.stop() }
        try await streaming(&r)
        try await r.fake.sendPackets(Self.strap, 6)
        let samples = await r.samples.take(6)
        #expect(samples.map { $0.rrRaw1024 ?? [] } == (try expectedPackets(6)))
        #expect(samples.allSatisfy { $0.source == "ble_hrm" && $0.deviceId == Self.strap && $0.contact == .contact })
        #expect(samples.map(\.sequence) == (1...6).map { UInt64($0) })
        #expect(samples.allSatisfy { !$0.gapBefore })
        // Battery1 and the reads arrive as a status with the battery and as details.
        _ = try #require(await r.statuses.first { $0.batteryPercent == 85 })
        let d = r.provider.details
        #expect(d.bodySensorLocation == .chest)
        #expect(d.deviceInformation[0x2A29] == "Polar Electro Oy")
        #expect(d.deviceInformation[0x2A26] == "3.1.1")
        let calls = try await r.fake.calls()
        #expect(calls.contains("StartDiscovery /org/bluez/hci0"))
        #expect(calls.filter { $0.hasPrefix("Connect ") }.count == 1)
        await r.provider.stopStreaming()
    }

    /// A StartDiscovery that bluetoothd accepts and that scans nothing (bluetoothd 5.66 after a StopDiscovery the
    /// kernel refused) is restarted after `discoveryRefreshMs` of searching, and the strap is found.
    @Test func aDiscoveryThatScansNothingIsRestarted() async throws {
        var r = try await rig()
        defer { r.fake.stop() }
        _ = try await r.fake.ctl("ScriptStartDiscovery", [.string("hci0"), .array(elementSignature: "s", [.string("stale")])])
        try await r.provider.startStreaming(into: r.recorder.sink)
        _ = try #require(await r.statuses.first(.searching))
        r.clock.advance(byMs: try #require(StrapPolicy().discoveryRefreshMs))
        _ = try #require(await r.statuses.first(.connected))
        let calls = try await r.fake.calls()
        #expect(calls.filter { $0 == "StartDiscovery /org/bluez/hci0" }.count == 2, "\(calls)")
        #expect(calls.contains("StopDiscovery /org/bluez/hci0"), "\(calls)")
        await r.provider.stopStreaming()
    }

    @Test func batteryFallsBackTo2A19WithoutBattery1() async throws {
        let fake = try await FakeBlueZ()
        try await fake.addStrap(Self.strap, rr: Self.rr(), battery: 42, battery1: false)
        var r = try await rig(fake: fake, addStrap: false)
        defer { r.fake.stop() }
        try await streaming(&r)
        _ = try #require(await r.statuses.first { $0.batteryPercent == 42 })
        await r.provider.stopStreaming()
    }

    @Test func pitfall4_abortByLocalWaitsForDisconnectThenRetries() async throws {
        var r = try await rig()
        defer { r.fake.stop() }
        try await r.fake.ctl("ScriptConnect", [.string(Self.strap), .stringArray(["abort"])])
        try await streaming(&r)
        #expect(try await r.fake.count("Connect") == 2)
        try await r.fake.sendPackets(Self.strap, 1)
        #expect(await r.samples.take(1).count == 1)
        await r.provider.stopStreaming()
    }

    @Test func pitfall3_inProgressIsCancelledWithDisconnectThenRetried() async throws {
        var r = try await rig()
        defer { r.fake.stop() }
        try await r.fake.ctl("SetPendingForeignConnect", [.string(Self.strap), .boolean(true)])
        try await r.provider.startStreaming(into: r.recorder.sink)
        let retry = await r.statuses.first(.reconnecting, containing: "in progress")
        try await reconnects(&r, after: retry)
        let calls = try await r.fake.calls().filter { $0.hasPrefix("Connect ") || $0.hasPrefix("Disconnect ") }
        #expect(calls.map { $0.split(separator: " ")[0] } == ["Connect", "Disconnect", "Connect"])
        await r.provider.stopStreaming()
    }

    @Test func pitfall7_linkLostWhileResolvingRetries() async throws {
        var r = try await rig()
        defer { r.fake.stop() }
        try await r.fake.ctl("ScriptConnect", [.string(Self.strap), .stringArray(["noresolve"])])
        try await r.provider.startStreaming(into: r.recorder.sink)
        _ = try #require(await r.statuses.first(.connecting, containing: "resolving"))
        try await r.fake.ctl("LinkLoss", [.string(Self.strap)])
        let retry = await r.statuses.first(.reconnecting, containing: "link lost")
        try await reconnects(&r, after: retry)
        await r.provider.stopStreaming()
    }

    @Test func pitfall7_servicesNeverResolvedTimesOut() async throws {
        var r = try await rig()
        defer { r.fake.stop() }
        try await r.fake.ctl("ScriptConnect", [.string(Self.strap), .stringArray(["noresolve"])])
        try await r.provider.startStreaming(into: r.recorder.sink)
        _ = try #require(await r.statuses.first(.connecting, containing: "resolving"))
        r.clock.advance(byMs: StrapPolicy().resolveTimeoutMs)
        let retry = await r.statuses.first(.reconnecting, containing: "not resolved")
        try await reconnects(&r, after: retry)
        #expect(try await r.fake.count("Disconnect") >= 1)
        await r.provider.stopStreaming()
    }

    @Test func pitfall8_resolvedWithoutCharacteristicDisconnectsAndRetries() async throws {
        var r = try await rig()
        defer { r.fake.stop() }
        try await r.fake.ctl("ScriptConnect", [.string(Self.strap), .stringArray(["nogatt"])])
        try await r.provider.startStreaming(into: r.recorder.sink)
        let retry = await r.statuses.first(.reconnecting, containing: "characteristic missing")
        try await reconnects(&r, after: retry)
        try await r.fake.sendPackets(Self.strap, 1)
        #expect(await r.samples.take(1).first?.rrRaw1024 == (try expectedPackets(1)).first)
        await r.provider.stopStreaming()
    }

    @Test func pitfall10_repeatedMissingCharacteristicRemovesTheDevice() async throws {
        var r = try await rig()
        defer { r.fake.stop() }
        try await r.fake.ctl("ScriptConnect", [.string(Self.strap), .stringArray(["nogatt", "nogatt"])])
        try await r.provider.startStreaming(into: r.recorder.sink)
        let retry = await r.statuses.first(.reconnecting, containing: "characteristic missing")
        try advancePastRetry(&r, announcedBy: retry)
        _ = try #require(await r.statuses.first(.reconnecting, containing: "removed the device"))
        #expect(try await r.fake.calls().contains("RemoveDevice /org/bluez/hci0"))
        try await r.fake.ctl("SetAdvertising", [.string(Self.strap), .boolean(true)])
        _ = try #require(await r.statuses.first(.connected))
        await r.provider.stopStreaming()
    }

    @Test func pitfall22_hungConnectTimesOutIsCancelledAndRetried() async throws {
        var r = try await rig()
        defer { r.fake.stop() }
        try await r.fake.ctl("ScriptConnect", [.string(Self.strap), .stringArray(["hang"])])
        try await r.provider.startStreaming(into: r.recorder.sink)
        _ = try #require(await r.statuses.first(.connecting, containing: "connecting to"))
        r.clock.advance(byMs: StrapPolicy().connectTimeoutMs)
        let retry = await r.statuses.first(.reconnecting, containing: "connect timed out")
        // Disconnect cancelled the pending Connect; its late error answer is not taken for the next attempt's.
        try await reconnects(&r, after: retry)
        let calls = try await r.fake.calls().filter { $0.hasPrefix("Connect ") || $0.hasPrefix("Disconnect ") }
        #expect(calls.map { $0.split(separator: " ")[0] } == ["Connect", "Disconnect", "Connect"])
        await r.provider.stopStreaming()
    }

    @Test func pitfall12_unreachableStrapSaysWhatToCheck() async throws {
        var r = try await rig()
        defer { r.fake.stop() }
        try await r.fake.ctl("ScriptConnect", [.string(Self.strap), .stringArray(["failed:le-connection-timeout"])])
        try await r.provider.startStreaming(into: r.recorder.sink)
        let s = try #require(await r.statuses.first(.reconnecting, containing: "le-connection-timeout"))
        #expect(s.message?.contains("not held by a phone app") == true)
        try await reconnects(&r, after: s)
        await r.provider.stopStreaming()
    }

    @Test func pitfall1_2_20_linkLossReconnectsWithoutDuplicateNotifications() async throws {
        var r = try await rig()
        defer { r.fake.stop() }
        try await streaming(&r)
        try await r.fake.sendPackets(Self.strap, 3)
        _ = await r.samples.take(3)
        try await r.fake.ctl("LinkLoss", [.string(Self.strap)])
        let retry = await r.statuses.first(.reconnecting, containing: "link lost")
        try await reconnects(&r, after: retry)
        try await r.fake.sendPackets(Self.strap, 4)
        let after = await r.samples.take(4)
        // One sample per packet (sequence has no repeats), the first flagged as after a gap.
        #expect(after.map(\.sequence) == [4, 5, 6, 7])
        #expect(after.map(\.gapBefore) == [true, false, false, false])
        #expect(after.map { $0.rrRaw1024 ?? [] } == Array(try expectedPackets(7).suffix(4)))
        // BlueZ re-armed the session; it was not requested twice.
        #expect(try await r.fake.count("StartNotify") == 1)
        #expect(try await r.fake.ctl("NotifySessions", [.string(Self.strap)]).first?.uint32 == 1)
        await r.provider.stopStreaming()
    }

    @Test func pitfall19_staleWhenNotificationsStopThenStreamingAgain() async throws {
        var r = try await rig()
        defer { r.fake.stop() }
        try await streaming(&r)
        try await r.fake.sendPackets(Self.strap, 1)
        _ = await r.samples.take(1)
        _ = try #require(await r.statuses.first(.streaming))
        r.clock.advance(byMs: StrapPolicy().staleAfterMs)
        let stale = try #require(await r.statuses.first { $0.state != .streaming })
        #expect(stale.state == .stale)
        try await r.fake.sendPackets(Self.strap, 1)
        #expect(await r.samples.take(1).first?.gapBefore == true)
        _ = try #require(await r.statuses.first(.streaming))
        await r.provider.stopStreaming()
    }

    /// Every notification moves the stale deadline five seconds ahead, but does not set a clock timer: one set
    /// earlier is kept and sets itself again when it fires early. The strap still goes stale exactly
    /// `staleAfterMs` after its last notification.
    @Test func notificationsDoNotSetATimerEachYetStaleFollowsTheLastOne() async throws {
        let clock = ManualSessionClock()
        let fake = try await FakeBlueZ()
        defer { fake.stop() }
        try await fake.addStrap(Self.strap, rr: Self.rr())
        let mono = FakeMonotonic()
        let provider = BLEHeartRateProvider(spec: .address(Self.strap), bus: fake.bus, clock: clock,
                                            monotonicNs: { mono.next() })
        let recorder = Recorder()
        var statuses = recorder.statuses.makeAsyncIterator()
        var samples = recorder.samples.makeAsyncIterator()
        try await provider.startStreaming(into: recorder.sink)
        _ = try #require(await statuses.first(.connected))
        try await fake.sendPackets(Self.strap, 1)
        _ = await samples.take(1)
        let before = clock.scheduledCount
        for _ in 0..<30 {   // a notification a second for 30 s
            clock.advance(byMs: 1000)
            try await fake.sendPackets(Self.strap, 1)
            #expect(await samples.take(1).first?.gapBefore == false)
        }
        let set = clock.scheduledCount - before
        #expect(set <= 8, "\(set) clock timers for 30 notifications (one per 5 s expected, not one per notification)")
        let policy = StrapPolicy()
        clock.advance(byMs: policy.staleAfterMs - 1)
        try await fake.sendPackets(Self.strap, 1)
        #expect(await samples.take(1).first?.gapBefore == false, "not stale 1 ms before the deadline")
        clock.advance(byMs: policy.staleAfterMs)
        _ = try #require(await statuses.first { $0.state != .streaming && $0.state != .connected })
        try await fake.sendPackets(Self.strap, 1)
        #expect(await samples.take(1).first?.gapBefore == true, "stale after staleAfterMs without a notification")
        await provider.stopStreaming()
    }

    @Test func staleForTooLongDisconnectsAndReconnects() async throws {
        var r = try await rig()
        defer { r.fake.stop() }
        try await streaming(&r)
        try await r.fake.sendPackets(Self.strap, 2)
        _ = await r.samples.take(2)
        _ = try #require(await r.statuses.first(.streaming))
        // The link dies and BlueZ keeps it Connected: what the strap sends is lost, no Connected=false comes.
        try await r.fake.ctl("StallLink", [.string(Self.strap)])
        #expect(try await r.fake.sendPackets(Self.strap, 1) == 0)
        let policy = StrapPolicy()
        let reconnectAfter = try #require(policy.staleReconnectAfterMs)
        r.clock.advance(byMs: policy.staleAfterMs)
        _ = try #require(await r.statuses.first(.stale))
        #expect(try await r.fake.count("Disconnect") == 0)
        r.clock.advance(byMs: reconnectAfter)
        let silent = (policy.staleAfterMs + reconnectAfter) / 1000
        let retry = await r.statuses.first(
            .reconnecting, containing: "no heart-rate notification for \(silent) s; reconnecting")
        #expect(try await r.fake.count("Disconnect") == 1)
        try await reconnects(&r, after: retry)
        #expect(try await r.fake.count("Connect") == 2)
        try await r.fake.sendPackets(Self.strap, 1)
        let after = try #require(await r.samples.take(1).first)
        // The packet lost on the dead link is skipped, the next one follows a flagged gap.
        #expect(after.sequence == 3)
        #expect(after.gapBefore)
        #expect(after.rrRaw1024 == (try expectedPackets(4)).last)
        #expect(try await r.fake.count("StartNotify") == 1)
        await r.provider.stopStreaming()
    }

    @Test func notificationWhileStaleCancelsTheReconnect() async throws {
        var r = try await rig()
        defer { r.fake.stop() }
        try await streaming(&r)
        try await r.fake.sendPackets(Self.strap, 1)
        _ = await r.samples.take(1)
        _ = try #require(await r.statuses.first(.streaming))
        let policy = StrapPolicy()
        let reconnectAfter = try #require(policy.staleReconnectAfterMs)
        r.clock.advance(byMs: policy.staleAfterMs)
        _ = try #require(await r.statuses.first(.stale))
        try await r.fake.sendPackets(Self.strap, 1)
        #expect(await r.samples.take(1).first?.gapBefore == true)
        _ = try #require(await r.statuses.first(.streaming))
        // Keep the strap talking until well past the moment the reconnect was due.
        var elapsed: Int64 = 0
        while elapsed <= reconnectAfter + policy.staleAfterMs {
            r.clock.advance(byMs: policy.staleAfterMs - 1)
            elapsed += policy.staleAfterMs - 1
            try await r.fake.sendPackets(Self.strap, 1)
            #expect(await r.samples.take(1).first?.gapBefore == false)
        }
        #expect(r.provider.phase == .streaming)
        await r.provider.stopStreaming()
        var later: [SensorStatus] = []
        while let s = await r.statuses.next(), s.state != .disconnected { later.append(s) }
        #expect(later.allSatisfy { $0.state != .reconnecting && $0.state != .stale }, "\(later)")
        #expect(try await r.fake.count("Disconnect") == 1, "only the one on stop")
        #expect(try await r.fake.count("Connect") == 1)
    }

    @Test func pitfall9_unknownObjectRescans() async throws {
        var r = try await rig()
        defer { r.fake.stop() }
        try await streaming(&r)
        try await r.fake.ctl("LinkLoss", [.string(Self.strap)])
        try await r.fake.ctl("SetAdvertising", [.string(Self.strap), .boolean(false)])
        let retry = await r.statuses.first(.reconnecting, containing: "link lost")
        try await r.fake.ctl("ExpireStrap", [.string(Self.strap)])
        try advancePastRetry(&r, announcedBy: retry)
        _ = try #require(await r.statuses.first { $0.message?.contains("gone; scanning again") ?? false })
        try await r.fake.ctl("SetAdvertising", [.string(Self.strap), .boolean(true)])
        _ = try #require(await r.statuses.first(.connected))
        await r.provider.stopStreaming()
    }

    @Test func deviceRemovedThenRediscovered() async throws {
        var r = try await rig()
        defer { r.fake.stop() }
        try await streaming(&r)
        try await r.fake.ctl("SetAdvertising", [.string(Self.strap), .boolean(false)])
        try await r.fake.ctl("RemoveStrap", [.string(Self.strap)])
        _ = try #require(await r.statuses.first(.reconnecting, containing: "removed"))
        try await r.fake.ctl("SetAdvertising", [.string(Self.strap), .boolean(true)])
        _ = try #require(await r.statuses.first(.connected))
        try await r.fake.sendPackets(Self.strap, 1)
        #expect(await r.samples.take(1).first?.sequence == 1)
        await r.provider.stopStreaming()
    }

    @Test func pitfall15_bluetoothdRestart() async throws {
        var r = try await rig()
        defer { r.fake.stop() }
        try await streaming(&r)
        try await r.fake.sendPackets(Self.strap, 1)
        _ = await r.samples.take(1)
        try await r.fake.ctl("RestartDaemon")
        _ = try #require(await r.statuses.first(.reconnecting, containing: "bluetoothd is not running"))
        _ = try #require(await r.statuses.first(.connected))
        try await r.fake.sendPackets(Self.strap, 1)
        let s = try #require(await r.samples.take(1).first)
        #expect(s.gapBefore)
        #expect(s.sequence == 2)
        // The old notify session died with the daemon: subscribed again.
        #expect(try await r.fake.count("StartNotify") == 2)
        await r.provider.stopStreaming()
    }

    @Test func pitfall11_disconnectOnStopAndReuseOfAnOpenConnection() async throws {
        var r = try await rig()
        defer { r.fake.stop() }
        try await streaming(&r)
        await r.provider.stopStreaming()
        #expect(try await r.fake.ctl("IsConnected", [.string(Self.strap)]).first?.bool == false)
        #expect(try await r.fake.count("Disconnect") == 1)

        // A strap left connected (by a crashed run) is reused, not connected again.
        var r2 = try await rig(fake: r.fake, addStrap: false)
        let client = try await DBusConnection.connect(to: r.fake.bus, logger: .init(label: "other"))
        defer { client.close() }
        _ = try await client.call(destination: "org.bluez", path: "/org/bluez/hci0", interface: "org.bluez.Adapter1",
                                  member: "StartDiscovery")
        _ = try await client.call(destination: "org.bluez", path: DBusObjectPath(Self.devicePath),
                                  interface: "org.bluez.Device1", member: "Connect")
        let connectsBefore = try await r.fake.count("Connect")
        try await streaming(&r2)
        #expect(try await r.fake.count("Connect") == connectsBefore)
        await r2.provider.stopStreaming()
    }

    @Test func twoStrapsAtOnce() async throws {
        let fake = try await FakeBlueZ()
        defer { fake.stop() }
        let other = "C0:68:02:26:00:02"
        try await fake.addStrap(Self.strap, rr: Self.rr())
        try await fake.addStrap(other, name: "TICKR 0002", rr: [1024, 1024, 1024], advertiseUUID: false)
        var a = try await rig(fake: fake, addStrap: false)
        var b = try await rig(spec: .name("TICKR"), fake: fake, addStrap: false)
        try await streaming(&a)
        try await streaming(&b)
        try await fake.sendPackets(other, 2)
        try await fake.sendPackets(Self.strap, 2)
        let fromA = await a.samples.take(2)
        let fromB = await b.samples.take(2)
        #expect(fromA.allSatisfy { $0.deviceId == Self.strap })
        #expect(fromB.allSatisfy { $0.deviceId == other })
        #expect(fromB.map { $0.rrRaw1024 ?? [] } == [[1024], [1024]])
        await a.provider.stopStreaming()
        await b.provider.stopStreaming()
    }

    @Test func twoAutoProvidersFollowDifferentStraps() async throws {
        let fake = try await FakeBlueZ()
        defer { fake.stop() }
        let other = "C0:68:02:26:00:02"
        try await fake.addStrap(Self.strap, rr: [1024, 1024])
        try await fake.addStrap(other, name: "TICKR 0002", rr: [512, 512, 512, 512])
        let claims = StrapClaims()
        let clock = ManualSessionClock()
        let providers = [
            BLEHeartRateProvider(spec: .auto, bus: fake.bus, clock: clock, claims: claims),
            BLEHeartRateProvider(spec: .auto, bus: fake.bus, clock: clock, claims: claims),
        ]
        var ids: [String] = []
        for p in providers {
            let recorder = Recorder()
            var statuses = recorder.statuses.makeAsyncIterator()
            try await p.startStreaming(into: recorder.sink)
            ids.append(try #require(await statuses.first(.connected)?.deviceId))
        }
        #expect(Set(ids) == [Self.strap, other])
        #expect(claims.claimed == [Self.strap, other])
        for p in providers { await p.stopStreaming() }
        #expect(claims.claimed.isEmpty)
    }

    @Test func autoFindsAStrapByNameWithoutTheServiceUUID() async throws {
        let fake = try await FakeBlueZ()
        defer { fake.stop() }
        try await fake.addStrap(Self.strap, name: "Polar H9 1234ABCD", rr: [900, 900], advertiseUUID: false)
        var r = try await rig(spec: .auto, fake: fake, addStrap: false)
        try await streaming(&r)
        try await fake.sendPackets(Self.strap, 1)
        #expect(await r.samples.take(1).first?.deviceId == Self.strap)
        await r.provider.stopStreaming()
    }

    // MARK: Start-up errors

    @Test func noBluetoothd() async throws {
        let daemon = try PrivateBusDaemonForTests()
        defer { daemon.stop() }
        let p = BLEHeartRateProvider(spec: .auto, bus: .address(daemon.address), clock: ManualSessionClock())
        await #expect(throws: BLEHeartRateError.noBluetoothd) { try await p.startStreaming(into: Recorder().sink) }
        #expect(await p.isAvailable == false)
    }

    @Test func adapterErrors() async throws {
        let fake = try await FakeBlueZ(adapters: ["hci0=00:AA:01:00:00:01", "hci1=00:AA:01:00:00:02"])
        defer { fake.stop() }
        let missing = BLEHeartRateProvider(spec: .auto, adapter: "hci7", bus: fake.bus, clock: ManualSessionClock())
        await #expect(throws: BLEHeartRateError.adapterNotFound("hci7", available: ["hci0", "hci1"])) {
            try await missing.startStreaming(into: Recorder().sink)
        }
        try await fake.ctl("SetPowered", [.string("hci1"), .boolean(false)])
        let off = BLEHeartRateProvider(spec: .auto, adapter: "hci1", bus: fake.bus, clock: ManualSessionClock())
        await #expect(throws: BLEHeartRateError.adapterOff("hci1")) { try await off.startStreaming(into: Recorder().sink) }
        #expect("\(BLEHeartRateError.adapterOff("hci1"))".contains("rfkill unblock bluetooth"))

        let none = try await FakeBlueZ(adapters: ["none"])
        defer { none.stop() }
        let p = BLEHeartRateProvider(spec: .auto, bus: none.bus, clock: ManualSessionClock())
        await #expect(throws: BLEHeartRateError.noAdapter) { try await p.startStreaming(into: Recorder().sink) }
    }

    // MARK: End to end

    @Test func providerIntoSessionEngineYieldsHRAndHRVOfTheInjectedRR() async throws {
        let fake = try await FakeBlueZ()
        defer { fake.stop() }
        let rr = try Self.rr()
        try await fake.addStrap(Self.strap, rr: rr)
        let clock = ManualSessionClock()
        let mono = FakeMonotonic()
        let strap = BLEHeartRateProvider(spec: .address(Self.strap), bus: fake.bus, clock: clock, monotonicNs: { mono.next() })
        let recorder = Recorder()
        var statuses = recorder.statuses.makeAsyncIterator()
        var samples = recorder.samples.makeAsyncIterator()
        let engine = SessionEngine(providers: [TeeProvider(inner: strap, recorder: recorder)], clock: clock, correction: .none)
        let events = try await engine.startSession(SessionConfig(
            sessionId: "s1", mode: .focus, durationSec: 600, profile: ComputeProfile(windowSec: 60, emitIntervalSec: 5)))
        _ = try #require(await statuses.first(.connected))

        let packets = 40
        var delivered: [BiosignalSample] = []
        for _ in 0..<packets {
            try await fake.sendPackets(Self.strap, 1)
            delivered += await samples.take(1)
            clock.advance(byMs: 1000)
        }
        try await engine.stopSession(sessionId: "s1")
        var frames: [SessionMetrics] = []
        for await e in events { if case let .frame(_, _, _, metrics, _) = e { frames.append(metrics) } }
        let last = try #require(frames.last)

        // What the fake sent, straight from its RR list (1/1024 s → ms): one uninterrupted run of beats, packets
        // without RR included (no beat ended in that second; they do not split the run).
        let sent = Array(HeartRatePacer(rr1024: rr).prefix(packets)).map(\.measurement.rrIntervals1024)
        #expect(delivered.map { $0.rrRaw1024 ?? [] } == sent)
        #expect(sent.contains { $0.isEmpty }, "the series has seconds without a beat ending")
        let allMs = sent.flatMap { $0 }.map { Double($0) * 1000 / 1024 }
        let diffs = (1..<allMs.count).map { allMs[$0] - allMs[$0 - 1] }
        let rmssd = (diffs.map { $0 * $0 }.reduce(0, +) / Double(diffs.count)).squareRoot()
        let hr = 60000 / (allMs.reduce(0, +) / Double(allMs.count))

        #expect(last.rrCount == allMs.count)
        #expect(abs((last.hrFromRRBpm ?? 0) - hr) <= 0.05)
        #expect(abs(last.rmssdMs - rmssd) < 1e-6)
        #expect(rmssd > 20, "the real series varies beat to beat")
        await engine.dispose()
    }
}

/// A bare private bus with nobody on it.
typealias PrivateBusDaemonForTests = DBusTestSupport.PrivateBusDaemon
