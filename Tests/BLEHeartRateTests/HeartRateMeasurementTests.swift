import BLEHeartRate
import GatewayEngine
import Testing

private func bytes(_ hex: String) -> [UInt8] {
    hex.split(separator: " ").map { UInt8($0, radix: 16)! }
}

/// Every capture of ble.md §2.3, with the values the document decodes by hand.
struct CaptureTests {
    struct Capture: Sendable, CustomTestStringConvertible {
        let hex: String
        let hr: UInt16
        let contact: SensorContact
        let energy: UInt16?
        let rr: [UInt16]
        let rrMs: [Double]
        var testDescription: String { hex }
    }

    static let captures: [Capture] = [
        Capture(hex: "10 48 2c 03", hr: 72, contact: .notSupported, energy: nil, rr: [812], rrMs: [793.0]),
        Capture(hex: "10 49 5e 03 96 03", hr: 73, contact: .notSupported, energy: nil, rr: [862, 918], rrMs: [841.8, 896.5]),
        Capture(hex: "10 3b 53 04", hr: 59, contact: .notSupported, energy: nil, rr: [1107], rrMs: [1081.1]),
        Capture(hex: "16 4d 16 03", hr: 77, contact: .contact, energy: nil, rr: [790], rrMs: [771.5]),
        Capture(hex: "06 3c", hr: 60, contact: .contact, energy: nil, rr: [], rrMs: []),
        Capture(hex: "16 3c 11 04", hr: 60, contact: .contact, energy: nil, rr: [1041], rrMs: [1016.6]),
        Capture(hex: "16 3c f5 03", hr: 60, contact: .contact, energy: nil, rr: [1013], rrMs: [989.3]),
        Capture(hex: "10 c3 3c 01 3c 01 3c 01", hr: 195, contact: .notSupported, energy: nil, rr: [316, 316, 316],
                rrMs: [308.6, 308.6, 308.6]),
        Capture(hex: "19 4b 00 e8 03 00 04", hr: 75, contact: .notSupported, energy: 1000, rr: [1024], rrMs: [1000.0]),
    ]

    @Test(arguments: captures)
    func decodesDocumentedValues(_ c: Capture) throws {
        let m = try HeartRateMeasurement(decoding: bytes(c.hex))
        #expect(m.heartRate == c.hr)
        #expect(m.contact == c.contact)
        #expect(m.energyExpendedKJ == c.energy)
        #expect(m.rrIntervals1024 == c.rr)
        #expect(m.rrIntervalsMs.count == c.rrMs.count)
        for (got, want) in zip(m.rrIntervalsMs, c.rrMs) { #expect(abs(got - want) < 0.05) }
        #expect(!m.droppedTrailingByte)
    }

    @Test func oddTailCaptureKeepsHeartRate() throws {
        let m = try HeartRateMeasurement(decoding: bytes("10 48 2c"))
        #expect(m.heartRate == 72)
        #expect(m.rrIntervals1024.isEmpty)
        #expect(m.rrFlag)
        #expect(m.droppedTrailingByte)
    }

    @Test func uint16CaptureKeepsFormat() throws {
        let m = try HeartRateMeasurement(decoding: bytes("19 4b 00 e8 03 00 04"))
        #expect(m.isUInt16Format)
        #expect(m.encoded() == bytes("19 4b 00 e8 03 00 04"))
    }
}

struct SyntheticMeasurementTests {
    @Test func uint16HeartRateAboveUInt8() throws {
        let m = try HeartRateMeasurement(decoding: [0x01, 0x2C, 0x01])
        #expect(m.heartRate == 300)
        #expect(m.rrIntervals1024.isEmpty)
        #expect(m.energyExpendedKJ == nil)
    }

    @Test func energyAndSeveralRR() throws {
        // uint8 HR 150, EE 0xFFFF (saturated), RR 400, 410, 420.
        let m = try HeartRateMeasurement(decoding: [0x18, 150, 0xFF, 0xFF, 0x90, 0x01, 0x9A, 0x01, 0xA4, 0x01])
        #expect(m.heartRate == 150)
        #expect(m.energyExpendedKJ == 0xFFFF)
        #expect(m.rrIntervals1024 == [400, 410, 420])
    }

    @Test func oddTrailingByteAfterRRKeepsTheWholeIntervals() throws {
        let m = try HeartRateMeasurement(decoding: [0x10, 70, 0x00, 0x04, 0x10, 0x04, 0x7F])
        #expect(m.rrIntervals1024 == [1024, 1040])
        #expect(m.droppedTrailingByte)
        #expect(m.heartRate == 70)
    }

    @Test(arguments: [
        (UInt8(0x00), SensorContact.notSupported),
        (UInt8(0x02), SensorContact.notSupported),
        (UInt8(0x04), SensorContact.noContact),
        (UInt8(0x06), SensorContact.contact),
    ])
    func contactField(flags: UInt8, expected: SensorContact) throws {
        let m = try HeartRateMeasurement(decoding: [flags, 80])
        #expect(m.contact == expected)
    }

    @Test func reservedBitsAreIgnored() throws {
        let plain = try HeartRateMeasurement(decoding: bytes("16 4d 16 03"))
        let noisy = try HeartRateMeasurement(decoding: [0x16 | 0xE0, 0x4d, 0x16, 0x03])
        #expect(noisy == plain)
    }

    @Test func rrFlagWithoutBytesIsAnEmptyList() throws {
        let m = try HeartRateMeasurement(decoding: [0x10, 55])
        #expect(m.rrFlag)
        #expect(m.rrIntervals1024.isEmpty)
        #expect(!m.droppedTrailingByte)
    }

    @Test func zeroRRDoesNotStopTheList() throws {
        let m = try HeartRateMeasurement(decoding: [0x10, 60, 0x00, 0x00, 0x00, 0x04])
        #expect(m.rrIntervals1024 == [0, 1024])
    }

    @Test func rrBytesWithoutFlagAreNotRR() throws {
        let m = try HeartRateMeasurement(decoding: [0x00, 60, 0x00, 0x04])
        #expect(m.rrIntervals1024.isEmpty)
        #expect(!m.rrFlag)
    }

    @Test func emptyPayloadThrows() {
        #expect(throws: HeartRateMeasurementError.empty) { try HeartRateMeasurement(decoding: [UInt8]()) }
    }

    @Test func flagsOnlyThrows() {
        #expect(throws: HeartRateMeasurementError.truncatedHeartRate(payloadLength: 1, needed: 2)) {
            try HeartRateMeasurement(decoding: [0x10])
        }
    }

    @Test func uint16WithOneByteThrows() {
        #expect(throws: HeartRateMeasurementError.truncatedHeartRate(payloadLength: 2, needed: 3)) {
            try HeartRateMeasurement(decoding: [0x01, 0x48])
        }
    }

    @Test func energyCutShortThrows() {
        #expect(throws: HeartRateMeasurementError.truncatedEnergyExpended(payloadLength: 3, needed: 4)) {
            try HeartRateMeasurement(decoding: [0x08, 0x48, 0x01])
        }
    }

    @Test func errorsSayWhatIsWrong() {
        let text = "\(HeartRateMeasurementError.truncatedEnergyExpended(payloadLength: 3, needed: 4))"
        #expect(text.contains("Energy Expended"))
        #expect(text.contains("3 byte"))
    }

    @Test func decodesFromASlice() throws {
        let buffer: [UInt8] = [0xAA, 0x10, 0x48, 0x2c, 0x03]
        let m = try HeartRateMeasurement(decoding: buffer[1...])
        #expect(m.heartRate == 72)
        #expect(m.rrIntervals1024 == [812])
    }

    @Test func maxRRCountPerMTU() {
        #expect(HeartRateMeasurement.maxRRCount(uint16Format: false, energyExpended: false) == 9)
        #expect(HeartRateMeasurement.maxRRCount(uint16Format: true, energyExpended: false) == 8)
        #expect(HeartRateMeasurement.maxRRCount(uint16Format: false, energyExpended: true) == 8)
        #expect(HeartRateMeasurement.maxRRCount(uint16Format: true, energyExpended: true) == 7)
    }
}

struct EncoderTests {
    @Test func encodesTheDocumentedCaptures() {
        #expect(HeartRateMeasurement(heartRate: 72, rrIntervals1024: [812]).encoded() == bytes("10 48 2c 03"))
        #expect(HeartRateMeasurement(heartRate: 77, contact: .contact, rrIntervals1024: [790]).encoded()
            == bytes("16 4d 16 03"))
        #expect(HeartRateMeasurement(heartRate: 60, contact: .contact).encoded() == bytes("06 3c"))
    }

    @Test func roundTripsEveryShape() throws {
        for hr: UInt16 in [0, 1, 59, 255, 256, 300, 0xFFFF] {
            for contact in SensorContact.allCases {
                for energy: UInt16? in [nil, 0, 1000, 0xFFFF] {
                    for rr: [UInt16] in [[], [1], [812, 0xFFFF], [316, 316, 316, 400, 500, 600, 700]] {
                        let m = HeartRateMeasurement(heartRate: hr, contact: contact, energyExpendedKJ: energy, rrIntervals1024: rr)
                        let back = try HeartRateMeasurement(decoding: m.encoded())
                        #expect(back.heartRate == hr)
                        #expect(back.contact == contact)
                        #expect(back.energyExpendedKJ == energy)
                        #expect(back.rrIntervals1024 == rr)
                        #expect(back.isUInt16Format == (hr > 255))
                    }
                }
            }
        }
    }

    @Test func msConversionsAgree() {
        #expect(HeartRateMeasurement.raw1024(fromMilliseconds: 1000) == 1024)
        #expect(HeartRateMeasurement.raw1024(fromMilliseconds: 859) == 880)
        #expect(HeartRateMeasurement.milliseconds(fromRaw1024: 1024) == 1000)
        #expect(HeartRateMeasurement.raw1024(fromMilliseconds: -5) == 0)
        #expect(HeartRateMeasurement.raw1024(fromMilliseconds: 1e9) == .max)
    }
}

struct NotificationTests {
    @Test func beatTimesAreRebuiltBackwardsFromArrival() throws {
        let m = try HeartRateMeasurement(decoding: bytes("10 49 5e 03 96 03"))  // RR 862, 918
        let n = HeartRateNotification(
            measurement: m, deviceId: "A0:9E:1A:00:00:01", arrivalMonotonicNs: 10_000_000_000,
            arrivalWallMs: 1_700_000_010_000, sequence: 1)
        // Last beat ends at arrival; the one before ends 918/1024 s earlier.
        #expect(n.beatMonotonicNs == [10_000_000_000 - 896_484_375, 10_000_000_000])
        let wall = n.beatWallMs
        #expect(wall.count == 2)
        #expect(wall[1] == 1_700_000_010_000)
        #expect(abs(wall[0] - (1_700_000_010_000 - 896.484375)) < 1e-6)
    }

    @Test func beatTimesNeverWrapBelowZero() {
        #expect(HeartRateNotification.beatTimes(endingAt: 100, rr1024: [1024, 1024]) == [0, 100])
    }

    @Test func sampleCarriesEveryField() throws {
        let m = try HeartRateMeasurement(decoding: bytes("19 4b 00 e8 03 00 04"))
        var seq = NotificationSequencer()
        let first = seq.next(m, deviceId: "AA:BB:CC:DD:EE:FF", monotonicNs: 1, wallMs: 5000)
        seq.markGap()
        let second = seq.next(m, deviceId: "AA:BB:CC:DD:EE:FF", monotonicNs: 2, wallMs: 6000)
        let third = seq.next(m, deviceId: "AA:BB:CC:DD:EE:FF", monotonicNs: 3, wallMs: 7000)
        #expect([first.sequence, second.sequence, third.sequence] == [1, 2, 3])
        #expect([first.gapBefore, second.gapBefore, third.gapBefore] == [false, true, false])

        let s = second.sample
        #expect(s.source == "ble_hrm")
        #expect(s.deviceId == "AA:BB:CC:DD:EE:FF")
        #expect(s.timestampMs == 6000)
        #expect(s.bpm == 75)
        #expect(s.rrIntervalsMs == [1000])
        #expect(s.rrRaw1024 == [1024])
        #expect(s.energyKJ == 1000)
        #expect(s.contact == .notSupported)
        #expect(s.sequence == 2)
        #expect(s.gapBefore)
    }

    @Test func sampleWithoutRRHasNoRRFields() throws {
        let m = try HeartRateMeasurement(decoding: bytes("06 3c"))
        let s = HeartRateNotification(measurement: m, deviceId: "X", arrivalMonotonicNs: 0, arrivalWallMs: 0, sequence: 1).sample
        #expect(s.rrIntervalsMs == nil)
        #expect(s.rrRaw1024 == nil)
        #expect(s.contact == .contact)
    }

    @Test func gapBeforeTheFirstNotificationIsNotFlagged() {
        var seq = NotificationSequencer()
        seq.markGap()
        let n = seq.next(HeartRateMeasurement(heartRate: 60), deviceId: "X", monotonicNs: 0, wallMs: 0)
        #expect(!n.gapBefore)
    }
}
