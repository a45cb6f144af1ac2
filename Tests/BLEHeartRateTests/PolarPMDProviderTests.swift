import BLEHeartRate
import BlueZ
import DBus
import DBusTestSupport
import Foundation
import GatewayEngine
import Logging
import Testing

/// `--ecg` against the fake org.bluez with Polar's measurement service, streaming a real ECG recording
/// (Tests/Fixtures/ecg_mitbih208_130hz.csv) and, like an H10, refusing the control point until the link is encrypted.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct PolarPMDProviderTests {
    static let strap = "A0:9E:1A:00:00:02"

    static func ecg() throws -> [Int32] {
        let text = try String(contentsOfFile: FakeBlueZ.script.replacingOccurrences(
            of: "fake_bluez.py", with: "ecg_mitbih208_130hz.csv"), encoding: .utf8)
        return text.split(separator: "\n").dropFirst().compactMap { Int32($0) }
    }

    struct Rig {
        let fake: FakeBlueZ
        let clock: ManualSessionClock
        let provider: BLEHeartRateProvider
        var statuses: AsyncStream<SensorStatus>.Iterator
        var samples: AsyncStream<BiosignalSample>.Iterator
    }

    /// `realClock`: the provider reads the system's wall clock (chunk times are then comparable with CLOCK_MONOTONIC);
    /// otherwise a manual one, whose retry timers the test runs.
    func rig(
        pmd: Bool = true, requirePairing: Bool = true, realClock: Bool = false,
        streams: PolarStreams = PolarStreams(ecg: true), clock given: (any SessionClock)? = nil
    ) async throws -> Rig {
        let fake = try await FakeBlueZ()
        try await fake.addStrap(Self.strap, rr: Array(try loadNSRDB().rr1024.prefix(60)))
        if pmd {
            try await fake.ctl("AddPMD", [
                .string(Self.strap), .array(elementSignature: "i", try Self.ecg().map(DBusValue.int32)),
                .boolean(requirePairing),
            ])
        }
        let clock = ManualSessionClock()
        let provider = BLEHeartRateProvider(
            spec: .address(Self.strap), bus: fake.bus, clock: given ?? (realClock ? SystemSessionClock() : clock),
            polar: streams,
            monotonicNs: BLEHeartRateProvider.systemMonotonicNs)
        let recorder = Recorder()
        try await provider.startStreaming(into: recorder.sink)
        return Rig(fake: fake, clock: clock, provider: provider,
                   statuses: recorder.statuses.makeAsyncIterator(), samples: recorder.samples.makeAsyncIterator())
    }

    /// ECG values delivered until `count` have arrived (heart-rate samples skipped), and the chunks.
    func ecgValues(_ r: inout Rig, count: Int) async -> (values: [Int32], chunks: [BiosignalSample]) {
        var values: [Int32] = []
        var chunks: [BiosignalSample] = []
        while values.count < count, let s = await r.samples.next() {
            guard let ecg = s.ecgUv else { continue }
            chunks.append(s)
            values += ecg
        }
        return (values, chunks)
    }

    /// Plays the strap's side until a status says `text`: runs each announced retry timer, and sends a heart-rate
    /// packet whenever the strap is connected (it streams then). Returns the messages seen on the way.
    func drive(_ r: inout Rig, until text: String) async throws -> [String] {
        var seen: [String] = []
        while let s = await r.statuses.next() {
            if let m = s.message {
                seen.append(m)
                if m.contains(text) { return seen }
                if let t = m.split(separator: "(retry in ").last?.split(separator: " s)").first, m.contains("(retry in"),
                    let sec = Double(t)
                {
                    r.clock.advance(byMs: Int64((sec * 1000).rounded()))
                }
            }
            if s.state == .connected { try await r.fake.sendPackets(Self.strap, 1) }
        }
        Issue.record("no status said \"\(text)\"; seen: \(seen)")
        return seen
    }

    @Test func ecgArrivesSampleExactAfterPairingOnDemand() async throws {
        var r = try await rig(realClock: true)
        defer { r.fake.stop() }
        _ = try #require(await r.statuses.first(.connected))
        try await r.fake.sendPackets(Self.strap, 1)   // heart rate flows: the strap is streaming
        _ = try #require(await r.statuses.first(.streaming, containing: "pairing with the strap"))
        _ = try #require(await r.statuses.first(.streaming, containing: "ECG streaming at 130 Hz"))
        // Frames as an H10 sends them: one every 73 samples at 130 Hz (561.5 ms), in real time.
        try await r.fake.ctl("StreamECG", [.string(Self.strap), .uint32(5), .uint32(562)])
        let (values, chunks) = await ecgValues(&r, count: 5 * 73)
        #expect(values == Array(try Self.ecg().prefix(5 * 73)), "every µV value once, in order")
        #expect(chunks.count == 5 && chunks.allSatisfy {
            $0.source == polarECGSource && $0.deviceId == Self.strap && $0.ecgRateHz == 130 && $0.bpm == 0 && !$0.gapBefore
        })
        // Chunks follow each other by their sample count at 130 Hz on the host clock (within the timers' jitter).
        for (a, b) in zip(chunks, chunks.dropFirst()) {
            let expected = Double(a.ecgUv!.count) * 1000 / 130
            #expect(abs(Double(b.timestampMs - a.timestampMs) - expected) <= 25, "\(a.timestampMs) → \(b.timestampMs)")
        }
        // A burst (frames held back by the link, then delivered at once) loses nothing either.
        let sent = try await r.fake.ctl("SendECG", [.string(Self.strap), .uint32(8)]).first?.uint32
        #expect(sent.map(Int.init) == 8 * 73)
        let burst = await ecgValues(&r, count: 8 * 73)
        #expect(values + burst.values == Array(try Self.ecg().prefix(13 * 73)))
        let calls = try await r.fake.calls()
        let start = "WriteValue " + "0200000182000101" + "0e00"
        #expect(calls.filter { $0.hasPrefix(start) }.count == 2, "refused, paired, written again: \(calls)")
        #expect(calls.filter { $0.hasPrefix("Pair ") }.count == 1)
        // Paired through our NoInputNoOutput agent, which the fake asked to authorize (a refusal fails the pairing).
        #expect(calls.contains { $0.hasPrefix("RegisterAgent NoInputNoOutput ") } && calls.contains { $0.hasPrefix("UnregisterAgent ") })
        #expect(r.provider.polarCounts?.dropped == 0)
        await r.provider.stopStreaming()
    }

    @Test func aStrapThatForgotItsBondIsRemovedPairedAgainAndStreamsOn() async throws {
        var r = try await rig()
        defer { r.fake.stop() }
        _ = try #require(await r.statuses.first(.connected))
        try await r.fake.sendPackets(Self.strap, 1)
        _ = try #require(await r.statuses.first(.streaming, containing: "ECG streaming"))
        try await r.fake.ctl("SendECG", [.string(Self.strap), .uint32(2)])
        let first = await ecgValues(&r, count: 2 * 73)
        // The strap is reset: it forgets the keys and drops the link.
        try await r.fake.ctl("ForgetBond", [.string(Self.strap)])
        try await r.fake.ctl("LinkLoss", [.string(Self.strap)])
        let seen = try await drive(&r, until: "ECG streaming")
        #expect(seen.contains { $0.contains("refuses this computer's pairing") }, "\(seen)")
        #expect(seen.contains { $0.contains("pairing with the strap") }, "\(seen)")
        try await r.fake.ctl("SendECG", [.string(Self.strap), .uint32(3)])
        let (values, chunks) = await ecgValues(&r, count: 3 * 73)
        #expect(first.values + values == Array(try Self.ecg().prefix(5 * 73)))
        #expect(chunks.first?.gapBefore == true && chunks.dropFirst().allSatisfy { !$0.gapBefore },
                "the first chunk after the break says samples may be missing")
        let calls = try await r.fake.calls()
        #expect(calls.filter { $0.hasPrefix("RemoveDevice ") }.count == 1)
        #expect(calls.filter { $0.hasPrefix("Pair ") }.count == 2)
        await r.provider.stopStreaming()
    }

    @Test func aStrapWithoutTheServiceSaysSoAndKeepsStreamingHeartRate() async throws {
        var r = try await rig(pmd: false)
        defer { r.fake.stop() }
        _ = try #require(await r.statuses.first(.connected))
        try await r.fake.sendPackets(Self.strap, 1)
        _ = try #require(await r.statuses.first(.streaming, containing: "no Polar measurement service"))
        try await r.fake.sendPackets(Self.strap, 2)
        let hr = await r.samples.take(3)
        #expect(hr.count == 3 && hr.allSatisfy { $0.ecgUv == nil && $0.bpm > 0 })
        #expect(try await r.fake.calls().filter { $0.hasPrefix("Pair ") || $0.hasPrefix("WriteValue ") }.isEmpty)
        await r.provider.stopStreaming()
    }

    /// The fake's accelerometer frames (int16 milli-g), as the test computes them independently.
    static func accSample(_ i: Int) -> SIMD3<Double> {
        SIMD3(Double(i % 50 - 25), Double((i * 7) % 31 - 15), Double(1000 - i % 3)) / 1000
    }

    /// A real H10's "130 Hz" ECG runs at the strap's own rate, 128–131 Hz (docs/pmd.md, "Sample rate"), while its
    /// settings say 130. Through the decoder (which spaces a frame's samples by the strap's times) and the clock
    /// mapping, the chunks' times keep that rate, so the line through them (`WaveformRate`, what R-peak timing, the
    /// exports and the LSL stamps use) measures it. The fake's frames come at the strap's rate, in real time.
    @Test func aStrapOffItsNominalRateKeepsItsRateInTheChunksTimes() async throws {
        var r = try await rig(realClock: true)
        defer { r.fake.stop() }
        _ = try #require(await r.statuses.first(.connected))
        try await r.fake.sendPackets(Self.strap, 1)
        _ = try #require(await r.statuses.first(.streaming, containing: "ECG streaming at 130 Hz"))
        try await r.fake.ctl("SetECGRate", [.string(Self.strap), .double(128.6)])
        try await r.fake.ctl("StreamECG", [.string(Self.strap), .uint32(12), .uint32(0)])
        let (values, chunks) = await ecgValues(&r, count: 12 * 73)
        #expect(values == Array(try Self.ecg().prefix(12 * 73)))
        #expect(chunks.allSatisfy { $0.ecgRateHz == 130 && !$0.gapBefore }, "the nominal rate, no gap flagged")
        var index = 0
        let starts = chunks.map { c -> (index: Int, timeMs: Double) in
            defer { index += c.ecgUv?.count ?? 0 }
            return (index, Double(c.timestampMs))
        }
        // 6.2 s of chunk times; a late first frame can shift later chunks' times by its delay, hence 0.3 %.
        let rate = try #require(WaveformRate.measured(chunkStarts: starts, nominalHz: 130), "measured: not 130 Hz")
        #expect(abs(rate.rateHz - 128.6) < 0.4, "\(rate.rateHz) Hz for a strap at 128.6 Hz")
        await r.provider.stopStreaming()
    }

    @Test func ecgAndMotionTogether() async throws {
        var r = try await rig(requirePairing: false, streams: PolarStreams(ecg: true, accHz: 50))
        defer { r.fake.stop() }
        _ = try #require(await r.statuses.first(.connected))
        try await r.fake.sendPackets(Self.strap, 1)
        let seen = try await drive(&r, until: "Accelerometer streaming at 50 Hz")
        #expect(!seen.contains { $0.contains("refused") || $0.contains("did not") }, "\(seen)")
        let calls = try await r.fake.calls().filter { $0.hasPrefix("WriteValue ") }
        #expect(calls.map { $0.split(separator: " ")[1] } == ["0200000182000101" + "0e00", "0202000132000101100002010800"],
                "ECG, then the accelerometer at 50 Hz, 16 bit, 8 g: \(calls)")
        try await r.fake.ctl("SendAcc", [.string(Self.strap), .uint32(3)])
        try await r.fake.ctl("SendECG", [.string(Self.strap), .uint32(1)])
        var acc: [SIMD3<Double>] = []
        var chunks: [BiosignalSample] = []
        var ecg = 0
        while acc.count < 3 * 36 || ecg < 73, let s = await r.samples.next() {
            if let a = s.accG {
                acc += a
                chunks.append(s)
            }
            ecg += s.ecgUv?.count ?? 0
        }
        #expect(acc == (0..<(3 * 36)).map(Self.accSample), "every accelerometer sample, in g, in order")
        #expect(chunks.allSatisfy { $0.source == polarAccSource && $0.accRateHz == 50 && $0.bpm == 0 })
        #expect(chunks.first.map { $0.jsonValue["accelerometer"]?["z"]?.doubleValue } == 0.998)
        await r.provider.stopStreaming()
    }

    /// A strap that takes the requests but answers none: each request waits `responseTimeoutMs` on the session
    /// clock (virtual here), is reported, and the next request gets its own wait; heart rate goes on.
    @Test func unansweredRequestsTimeOutOnTheSessionClockOneByOne() async throws {
        let clock = ManualSessionClock()
        var streams = PolarStreams(ecg: true, accHz: 50)
        streams.responseTimeoutMs = 4_321   // told apart from the strap's own timers by its length
        var r = try await rig(requirePairing: false, streams: streams, clock: clock)
        defer { r.fake.stop() }
        try await r.fake.ctl("SilencePMD", [.string(Self.strap), .boolean(true)])
        _ = try #require(await r.statuses.first(.connected))
        try await r.fake.sendPackets(Self.strap, 1)
        _ = await r.samples.take(1)
        var delays = clock.scheduledDelays.makeAsyncIterator()
        for what in ["ECG", "accelerometer"] {
            while let d = await delays.next(), d != 4_321 {}   // this request's wait is set
            try await r.fake.sendPackets(Self.strap, 1)       // heart rate flows meanwhile (the strap is not stale)
            _ = await r.samples.take(1)
            clock.advance(byMs: 4_321)
            _ = try #require(await r.statuses.first(.streaming, containing: "did not answer the \(what) request within 4.3 s"))
        }
        let writes = try await r.fake.calls().filter { $0.hasPrefix("WriteValue ") }.map { $0.split(separator: " ")[1] }
        #expect(writes == ["0200000182000101" + "0e00", "0202000132000101100002010800"], "both asked, one after the other")
        await r.provider.stopStreaming()
    }

    @Test func garbledFramesAreDroppedAndCounted() async throws {
        var r = try await rig(requirePairing: false)
        defer { r.fake.stop() }
        _ = try #require(await r.statuses.first(.connected))
        try await r.fake.sendPackets(Self.strap, 1)
        _ = try #require(await r.statuses.first(.streaming, containing: "ECG streaming"))
        // A cut frame, an unknown frame type, then real frames.
        let data = "/org/bluez/hci0/dev_A0_9E_1A_00_00_02/service0040/char0044"
        for bad: [UInt8] in [[0x00, 0x01, 0x02], [0x00] + Array(repeating: 0, count: 8) + [0x05, 1, 2, 3]] {
            _ = try await r.fake.ctl("NotifyPath", [.string(data), .array(elementSignature: "y", bad.map(DBusValue.byte))])
        }
        try await r.fake.ctl("SendECG", [.string(Self.strap), .uint32(2)])
        let (values, _) = await ecgValues(&r, count: 2 * 73)
        #expect(values == Array(try Self.ecg().prefix(2 * 73)))
        #expect(r.provider.polarCounts?.dropped == 2)
        #expect(r.provider.polarCounts?.samples == 2 * 73)
        await r.provider.stopStreaming()
    }
}

/// The pairing agent answers for the device it pairs, and only that one; it never makes up a PIN.
@Suite struct BlueZAgentTests {
    @Test func theAgentAuthorizesItsDeviceOnly() async throws {
        let fake = try await FakeBlueZ()
        defer { fake.stop() }
        let mine = DBusObjectPath("/org/bluez/hci0/dev_A0_9E_1A_00_00_02")
        let connection = try await DBusConnection.connect(to: fake.bus, logger: Logger(label: "test.agent"))
        defer { connection.close() }
        let agent = try await BlueZAgent.register(on: connection, for: mine)
        let name = connection.uniqueName
        func ask(_ member: String, _ args: [DBusValue]) async -> String? {
            do {
                _ = try await fake.control.call(
                    destination: name, path: BlueZAgent.path, interface: BlueZAgent.interface, member: member,
                    arguments: args, timeout: .seconds(5))
                return nil
            } catch let e as DBusError { return e.name } catch { return "\(error)" }
        }
        #expect(await ask("RequestAuthorization", [.objectPath(mine)]) == nil)
        #expect(await ask("RequestConfirmation", [.objectPath(mine), .uint32(123456)]) == nil)
        let other = DBusObjectPath("/org/bluez/hci0/dev_11_22_33_44_55_66")
        #expect(await ask("RequestAuthorization", [.objectPath(other)]) == "org.bluez.Error.Rejected")
        #expect(await ask("RequestPinCode", [.objectPath(mine)]) == "org.bluez.Error.Rejected")
        #expect(agent.requests == ["RequestAuthorization \(mine.rawValue)", "RequestConfirmation \(mine.rawValue)",
                                   "RequestAuthorization \(other.rawValue)"])
        await agent.unregister()
        #expect(try await fake.calls().contains { $0.hasPrefix("UnregisterAgent ") })
    }
}
