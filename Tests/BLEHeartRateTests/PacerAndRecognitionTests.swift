import BLEHeartRate
import HRVAnalysis
import Foundation
import GatewayEngine
import Testing

func loadNSRDB() throws -> RRSeries {
    let url = try #require(Bundle.module.url(forResource: "Data/rr_nsrdb_short_pyhrv_raw", withExtension: "csv"))
    return try RRSeries(parsing: String(contentsOf: url, encoding: .utf8), name: url.lastPathComponent)
}

struct PacerTests {
    @Test func realSeriesIsDeliveredCompletelyInOrderAtOneHertz() throws {
        let series = try loadNSRDB()
        #expect(series.rr1024.count == 337)
        #expect(series.rr1024.prefix(2) == [880, 888])
        let packets = Array(HeartRatePacer(rr1024: series.rr1024))
        // Every interval arrives exactly once, in order, each packet decodes to what was sent.
        var delivered: [UInt16] = []
        for (i, p) in packets.enumerated() {
            #expect(p.offsetMs == Int64(i + 1) * 1000)
            let decoded = try HeartRateMeasurement(decoding: p.payload)
            #expect(decoded.rrIntervals1024 == p.measurement.rrIntervals1024)
            #expect(decoded.contact == .contact)
            delivered += decoded.rrIntervals1024
        }
        #expect(delivered == series.rr1024)
        // ≈ 300 s of beats in ≈ 300 one-second packets; some carry 0 or 2 RR as real straps do.
        let total1024 = series.rr1024.reduce(0) { $0 + Int($1) }
        #expect(packets.count == (total1024 * 1000 + 1024 * 1000 - 1) / (1024 * 1000))
        #expect(packets.contains { $0.measurement.rrIntervals1024.count >= 2 })
        #expect(packets.allSatisfy { $0.measurement.rrIntervals1024.count <= 9 })
    }

    @Test func eachBeatIsSentInTheSecondItEnds() {
        // Beats end at 0.5, 1.0, 1.5, 3.5 s (512 = 0.5 s, 2048 = 2 s).
        let packets = Array(HeartRatePacer(rr1024: [512, 512, 512, 2048]))
        #expect(packets.map(\.measurement.rrIntervals1024) == [[512, 512], [512], [], [2048]])
        // The reported rate follows the recent RR: 120 bpm while beats are 0.5 s apart.
        #expect(packets[0].measurement.heartRate == 120)
    }

    @Test func overflowCarriesToTheNextPacket() {
        let packets = Array(HeartRatePacer(rr1024: Array(repeating: 100, count: 25), maxRRPerPacket: 9))
        #expect(packets.map(\.measurement.rrIntervals1024.count) == [9, 9, 7])
    }

    @Test func loopingNeverEnds() {
        var pacer = HeartRatePacer(rr1024: [1024], loops: true)
        for i in 1...500 { #expect(pacer.next()?.measurement.rrIntervals1024 == [1024], "packet \(i)") }
    }

    @Test func emptyInputYieldsNothing() {
        #expect(Array(HeartRatePacer(rr1024: [])).isEmpty)
        #expect(Array(HeartRatePacer(rr1024: [0, 0])).isEmpty)
    }
}

struct RRFileTests {
    @Test func plainMillisecondsPerLine() throws {
        let s = try RRSeries(parsing: "# resting\n800\n\n812.5\n1000\n")
        #expect(s.rr1024 == [819, 832, 1024])
    }

    @Test func csvWithMsColumnOnly() throws {
        let s = try RRSeries(parsing: "t,rr_ms\n0.8,800\n1.8,1000\n")
        #expect(s.rr1024 == [819, 1024])
    }

    /// Files saved on Windows ("\r\n", a single Character in Swift) and quoted fields as R writes them.
    @Test func windowsLineEndingsAndQuotedFields() throws {
        #expect(try RRSeries(parsing: "t,rr_ms\r\n0.8,800\r\n1.8,1000\r\n").rr1024 == [819, 1024])
        #expect(try RRSeries(parsing: "800\r\n812.5\r\n\r\n1000").rr1024 == [819, 832, 1024])
        #expect(try RRSeries(parsing: "\"\",\"rr_ms\"\r\n\"1\",800\n\"2\",\"1000\"\n").rr1024 == [819, 1024])
        let error = #expect(throws: RRFileError.self) { try RRSeries(parsing: "rr_ms\r\n800\r\nabc\r\n") }
        #expect(error?.line == 3)
    }

    @Test func badLineIsNamedWithItsNumber() {
        #expect(throws: RRFileError(line: 3, message: "'abc' is not a number", name: "x.txt")) {
            try RRSeries(parsing: "800\n900\nabc\n", name: "x.txt")
        }
    }

    /// The one parser's rule: with both columns, the strap emulator takes the exact 1/1024 s counts.
    @Test func bothColumnsPreferTheCounts() throws {
        let s = try RRSeries(parsing: "rr_ms,rr_1024\n800.8,820\n")
        #expect(s.rr1024 == [820])
    }

    @Test func outOfRangeIsRejected() {
        #expect(throws: RRFileError.self) { try RRSeries(parsing: "800\n-5\n") }
        #expect(throws: RRFileError.self) { try RRSeries(parsing: "i,rr_1024\n0,70000\n") }
    }

    @Test func headerWithoutRRColumnIsRejected() {
        let error = #expect(throws: RRFileError.self) { try RRSeries(parsing: "a,b\n1,2\n") }
        #expect(error?.line == 1)
        #expect(error?.name == "RR file")
        #expect(error?.message.contains("no rr_ms, rr_1024 or rr_s column") == true)
    }

    /// A decimal comma in a comma-separated file split the value in two and the first part was read (605,5556 as
    /// 605): now an error that says so. Semicolon- and tab-separated files (a spreadsheet in such a locale, the
    /// Polar Sensor Logger's layout) are read, their decimal commas as points. Hexadecimal is no RR value.
    @Test func decimalCommasAndOtherSeparators() throws {
        let comma = #expect(throws: RRFileError.self) { try RRSeries(parsing: "rr_ms\n605,5556\n580,5556\n") }
        #expect(comma?.line == 2 && comma?.message.contains("decimal comma") == true, "\(String(describing: comma))")
        #expect(throws: RRFileError.self) { try RRSeries(parsing: "605,5\n580,5\n") }
        #expect(try RRSeries(parsing: "t;rr_ms\n0,6;605,5\n1,2;580\n").rr1024 == [620, 594])
        #expect(try RRSeries(parsing: "Phone timestamp\tRR-interval [ms]\trr_ms\n2024-01-01T00:00:00\t805\t805\n").rr1024 == [824])
        #expect(throws: RRFileError(line: 2, message: "'0x320' is not a number", name: "RR file")) {
            try RRSeries(parsing: "rr_ms\n0x320\n")
        }
    }

    @Test func emptyFileIsRejected() {
        let error = #expect(throws: RRFileError.self) { try RRSeries(parsing: "# nothing\n") }
        #expect(error?.line == nil)
        #expect(error?.message.hasPrefix("the file is empty") == true)
    }
}

struct RecognitionTests {
    @Test func heartRateServiceInAnySpelling() {
        for uuid in ["0000180d-0000-1000-8000-00805f9b34fb", "0000180D-0000-1000-8000-00805F9B34FB", "180d", "0x180D"] {
            #expect(StrapRecognizer.match(uuids: ["0000180f-0000-1000-8000-00805f9b34fb", uuid], name: nil) == .heartRateService)
        }
    }

    @Test func knownNamesWithoutUUID() {
        #expect(StrapRecognizer.match(uuids: [], name: "Polar H10 8C4D2B2A") == .knownName(prefix: "Polar H10"))
        #expect(StrapRecognizer.match(uuids: [], name: "Polar OH1 A1B2C3D4") == .knownName(prefix: "Polar OH1"))
        #expect(StrapRecognizer.match(uuids: [], name: "Polar Verity Sense 0A1B2C3D") == .knownName(prefix: "Polar Verity"))
        #expect(StrapRecognizer.match(uuids: [], name: "TICKR 1A2B") == .knownName(prefix: "TICKR"))
        #expect(StrapRecognizer.match(uuids: [], name: "HRM-Pro:123456") == .knownName(prefix: "HRM-Pro"))
        #expect(StrapRecognizer.match(uuids: [], name: "polar h9 12345678") == .knownName(prefix: "Polar H9"))
    }

    @Test func otherDevicesAreNotStraps() {
        #expect(StrapRecognizer.match(uuids: ["0000180f-0000-1000-8000-00805f9b34fb"], name: "Keyboard K380") == nil)
        #expect(StrapRecognizer.match(uuids: [], name: nil) == nil)
        #expect(StrapRecognizer.match(uuids: ["fb005c80-02e7-f387-1cad-8acd2d8df0c8"], name: "Polar Loop") == nil)
    }

    @Test func uuidForms() {
        #expect(GATTUUID.full(0x2A37) == "00002a37-0000-1000-8000-00805f9b34fb")
        #expect(GATTUUID.short("00002a37-0000-1000-8000-00805f9b34fb") == 0x2A37)
        #expect(GATTUUID.short("fb005c80-02e7-f387-1cad-8acd2d8df0c8") == nil)
        #expect(GATTUUID.short("zz") == nil)
    }
}

struct PolarBroadcastTests {
    @Test func homeAssistantExample() throws {
        // ble_monitor #985: 6B 00 | 33 00 00 38 → contact, slow average 56 bpm.
        let b = try #require(PolarBroadcast(withCompanyId: [0x6B, 0x00, 0x33, 0x00, 0x00, 0x38]))
        #expect(b.contact)
        #expect(b.batteryOK)
        #expect(b.broadcast)
        #expect(b.frameCounter == 4)
        #expect(b.slowAverageHR == 56)
        #expect(b.heartRate == 56)
        #expect(b.fastAverageHR == 0)
    }

    @Test func fromBlueZManufacturerDataMap() throws {
        let b = try #require(PolarBroadcast(manufacturerData: [0x006B: [0x31, 0x00, 0x48]]))
        #expect(!b.contact)
        #expect(b.slowAverageHR == nil)
        #expect(b.heartRate == 72)
    }

    @Test func rejectsOtherCompaniesAndShortData() {
        #expect(PolarBroadcast(manufacturerData: [0x004C: [0x33, 0x00, 0x00, 0x38]]) == nil)
        #expect(PolarBroadcast(manufacturerData: [0x006B: [0x33, 0x00]]) == nil)
        #expect(PolarBroadcast(withCompanyId: [0x4C, 0x00, 0x33, 0x00, 0x00, 0x38]) == nil)
    }

    @Test func bodySensorLocation() {
        #expect(BodySensorLocation(bytes: [1]) == .chest)
        #expect(BodySensorLocation(bytes: [7]) == nil)
        #expect(BodySensorLocation(bytes: []) == nil)
    }
}
