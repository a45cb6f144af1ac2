// Tests of the PMD protocol layer. Inputs are the published byte vectors of Vectors.swift (from the unit tests of
// Polar's BLE SDK, Copyright Polar Electro Oy, Polar SDK License; the source file and test name are given at each
// vector) and frames constructed here for edge cases (marked "constructed").
import PolarPMD
import Testing

@Suite struct PMDControlPointTests {
    // ble.md §2.5, the known-good start commands from polar-ble-sdk issue #207.
    @Test func encodesTheKnownGoodStartCommands() {
        #expect(PMDRequest.start(.ecg, .h10ECG).encoded() == bytes("02 00 00 01 82 00 01 01 0E 00"))
        #expect(
            PMDRequest.start(.acc, .h10Accelerometer(hz: 200, rangeG: 8)).encoded()
                == bytes("02 02 00 01 C8 00 01 01 10 00 02 01 08 00"))
    }

    @Test func encodesGetAndStop() {
        #expect(PMDRequest.getSettings(.ecg).encoded() == [0x01, 0x00])
        #expect(PMDRequest.getSettings(.acc).encoded() == [0x01, 0x02])
        #expect(PMDRequest.stop(.acc).encoded() == [0x03, 0x02])
        #expect(PMDRequest.stop(.ecg).opCode == .stopMeasurement)
        #expect(PMDRequest.start(.acc, .init()).measurementType == .acc)
    }

    // Constructed: every setting type encoded, in type order, values little-endian in their field sizes; the
    // round trip through the TLV decoder (PmdSettingTest.kt testPmdSelectedSerialization checks the same property).
    @Test func encodesEverySettingAndDecodesItBack() throws {
        let s = PMDStreamSettings(
            sampleRate: 0x7FFF, resolution: 0, range: 15, rangeMilliunit: UInt32(Int32.max), channels: 4)
        let wire = s.encoded()
        #expect(wire == bytes("00 01 FF 7F 01 01 00 00 02 01 0F 00 03 01 FF FF FF 7F 04 01 04"))
        let back = try PMDSettings(decoding: wire)
        #expect(back.values == [.sampleRate: [0x7FFF], .resolution: [0], .range: [15], .rangeMilliunit: [0x7FFF_FFFF], .channels: [4]])
        #expect(back.factor == nil)
    }

    // SDK PmdSettingTest.kt, testPmdSettingsWithRange.
    @Test func decodesSettingsWithRange() throws {
        let s = try PMDSettings(decoding: Vectors.settingsWithRange)
        #expect(s.values.count == 4)
        #expect(s.sampleRates == [52])
        #expect(s.resolutions == [16])
        #expect(s.ranges == [245, 500, 1000, 2000])
        #expect(s.channels == [3])
        #expect(s.values[.rangeMilliunit] == nil)
        #expect(s.factor == nil)
    }

    // The offered-settings encoder (the emulated strap's answer) gives back, through the decoder, the SDK's vector.
    @Test func encodesOfferedSettingsAsTheSensorSendsThem() throws {
        let s = try PMDSettings(decoding: Vectors.settingsWithRange)
        #expect(try PMDSettings(decoding: s.encoded()) == s)
        #expect(s.encoded() == Vectors.settingsWithRange)
        var h10 = PMDSettings()
        h10.values[.sampleRate] = [25, 50, 100, 200]
        h10.values[.range] = [2, 4, 8]
        #expect(h10.encoded() == bytes("00 04 19 00 32 00 64 00 C8 00 02 03 02 00 04 00 08 00"))
    }

    // SDK PmdSettingTest.kt, testPmdSettingWithRangeMilliUnit (Kotlin reads FFFFFFFF as -1, Swift iOS as 0xFFFFFFFF).
    @Test func decodesSettingsWithRangeMilliunit() throws {
        let s = try PMDSettings(decoding: Vectors.settingsWithRangeMilliunit)
        #expect(s.values.count == 2)
        #expect(s.values[.rangeMilliunit] == [0xFFFF_FFFF, 0xFF])
        #expect(s.resolutions == [14])
    }

    // SDK iOS PmdSettingTest.swift, testPmdSettingThrows: the same bytes cut inside the resolution value.
    @Test func truncatedOrUnknownSettingsAreErrors() {
        let cut = Array(Vectors.settingsWithRangeMilliunit.dropLast())
        #expect(throws: PMDError.self) { try PMDSettings(decoding: cut) }
        do {
            _ = try PMDSettings(decoding: cut)
        } catch { #expect(error.code == .malformedSettings) }
        // Constructed: unknown setting type 7, and a type with no count byte.
        for bad in [bytes("07 01 00"), bytes("00 01 82 00 01")] {
            do {
                _ = try PMDSettings(decoding: bad)
                Issue.record("accepted \(bad)")
            } catch { #expect(error.code == .malformedSettings) }
        }
        // A single byte is "no settings", as in the SDK.
        #expect((try? PMDSettings(decoding: [0x00]))?.values.isEmpty == true)
    }

    // Constructed: a start response carrying the accelerometer factor (float32 2.44e-4, its bits little-endian).
    @Test func startResponseFactor() throws {
        let bits = Float(2.44e-4).bitPattern
        let params: [UInt8] = [0x05, 0x01] + (0..<4).map { UInt8(truncatingIfNeeded: bits >> (8 * $0)) }
        let r = try PMDControlPointResponse(decoding: [0xF0, 0x02, 0x02, 0x00, 0x00] + params)
        #expect(r.opCode == .startMeasurement)
        #expect(try r.settings().factor == Float(2.44e-4))
    }

    // Constructed: a settings answer whose TLV spans three indications (`more` on the first two), joined as the
    // SDK joins them; a part of another request in between abandons the unfinished one.
    @Test func responsesSpreadOverIndicationsAreJoined() throws {
        let whole: [UInt8] = [0x00, 0x02, 0x19, 0x00, 0x32, 0x00, 0x01, 0x01, 0x10, 0x00, 0x02, 0x03, 0x02, 0x00,
                              0x04, 0x00, 0x08, 0x00]
        let parts = [Array(whole[0..<5]), Array(whole[5..<11]), Array(whole[11...])]
        var assembler = PMDResponseAssembler()
        var joined: PMDControlPointResponse?
        for (i, p) in parts.enumerated() {
            let r = try PMDControlPointResponse(decoding: [0xF0, 0x01, 0x02, 0x00, i < 2 ? 1 : 0] + p)
            let out = assembler.add(r)
            if i < 2 { #expect(out == nil) } else { joined = out }
        }
        let r = try #require(joined)
        #expect(r.parameters == whole)
        #expect(r.more == false)
        let settings = try r.settings()
        #expect(settings.values[.sampleRate] == [25, 50])
        #expect(settings.values[.range] == [2, 4, 8])

        let first = try PMDControlPointResponse(decoding: [0xF0, 0x01, 0x02, 0x00, 0x01] + parts[0])
        #expect(assembler.add(first) == nil)
        let other = try PMDControlPointResponse(decoding: [0xF0, 0x02, 0x00, 0x00, 0x00])
        #expect(assembler.add(other) == other)
        #expect(assembler.abandoned == 1)
        let single = try PMDControlPointResponse(decoding: [0xF0, 0x02, 0x02, 0x00, 0x00])
        #expect(assembler.add(single) == single)
    }

    // SDK BlePmdClientControlPointResponseTest.kt, "success control point response for acc stream settings".
    @Test func decodesSuccessResponse() throws {
        let r = try PMDControlPointResponse(decoding: Vectors.responseAccSettings)
        #expect(r.opCode == .getMeasurementSettings)
        #expect(r.measurementType == .acc)
        #expect(r.status == .success)
        #expect(r.more == false)
        #expect(r.parameters == [0xFF, 0xFF, 0xFF])
        #expect(r.encoded() == Vectors.responseAccSettings)
        // The parameters of that vector are not a valid TLV (type 0xFF): an error value, not a trap.
        do {
            _ = try r.settings()
            Issue.record("FF FF FF decoded as settings")
        } catch { #expect(error.code == .malformedSettings) }
    }

    // SDK BlePmdClientControlPointResponseTest.kt, "failing control point response for mag stream settings".
    @Test func decodesFailureResponse() throws {
        let r = try PMDControlPointResponse(decoding: Vectors.responseMagFailure)
        #expect(r.opCode == .getMeasurementSettings)
        #expect(r.measurementType == .magnetometer)
        #expect(r.status == .invalidResolution)
        #expect(r.status.description == "invalid resolution")
        #expect(r.more == false)
        #expect(r.parameters.isEmpty)
    }

    // SDK iOS BlePmdClientTest.swift, testProcessControlPointResponseWhenStatusIsSuccess: ECG settings, "more" 0,
    // parameters 00 00 00 70 FF — which are not a complete TLV (sample rate with count 0, then sample rate again
    // announcing 0x70 values that are not there).
    @Test func decodesIOSResponse() throws {
        guard case let .response(r) = try PMDControlPointMessage(decoding: Vectors.responseIOS) else {
            Issue.record("not a response")
            return
        }
        #expect(r.opCode == .getMeasurementSettings && r.measurementType == .ecg && r.status == .success)
        #expect(r.more == false)
        #expect(r.parameters == bytes("00 00 00 70 FF"))
        #expect(throws: PMDError.self) { try r.settings() }
    }

    // SDK iOS BlePmdClientTest.swift, testProcessMeasurementStopControlPointCommand.
    @Test func decodesMeasurementStopped() throws {
        #expect(try PMDControlPointMessage(decoding: Vectors.measurementStoppedIOS) == .measurementStopped([.ppg, .acc]))
    }

    @Test func statusNames() {
        #expect(PMDStatus.invalidState.description == "invalid state")
        #expect(PMDStatus.notSupported.description == "not supported")
        #expect(PMDStatus.alreadyInState.description == "already in state")
        #expect(PMDStatus.invalidParameter.description == "invalid parameter")
        #expect(PMDStatus(rawValue: 13).description == "device in charger")
        #expect(PMDStatus(rawValue: 99).description == "status 99")
    }

    // Constructed: responses too short or of another kind.
    @Test func badResponsesAreErrors() {
        for (b, code) in [
            ([UInt8](), PMDError.Code.truncated), ([0xF0, 0x01, 0x00], .truncated), ([0x0F, 0x05], .unexpectedMessage),
        ] {
            do {
                _ = try PMDControlPointResponse(decoding: b)
                Issue.record("accepted \(b)")
            } catch { #expect(error.code == code) }
        }
        do {
            _ = try PMDControlPointMessage(decoding: [0x7E])
            Issue.record("accepted 7E")
        } catch { #expect(error.code == .unexpectedMessage) }
    }

    // Constructed from the bit layout PmdMeasurementType.fromByteArray reads: H10 = ECG (bit 0) and ACC (bit 2).
    @Test func decodesFeatureRead() throws {
        let h10 = try PMDFeatures(decoding: [0x0F, 0x05, 0x00])
        #expect(h10.sorted == [.ecg, .acc])
        let many = try PMDFeatures(decoding: [0x0F, 0xEF, 0x7E])
        #expect(
            many.sorted == [
                .ecg, .ppg, .acc, .ppi, .gyro, .magnetometer, .skinTemperature, .sdkMode, .location, .pressure,
                .temperature, .offlineRecording, .offlineHR,
            ])
        #expect(throws: PMDError.self) { try PMDFeatures(decoding: [0x0F]) }
        #expect(throws: PMDError.self) { try PMDFeatures(decoding: [0xF0, 0x01]) }
    }
}

@Suite struct PMDDeltaCodecTests {
    // SDK BlePmdClientParsersTest.kt, "parse reference sample when resolution16 and type is unsigned int".
    @Test func referenceSample16() throws {
        #expect(try PMDDeltaCodec.decode(Vectors.refSample16x4, channels: 4, referenceBits: 16) == [-1, 0, 32767, -32768])
    }

    // SDK BlePmdClientParsersTest.kt, "parse reference sample when resolution32 and type is decimal IEEE 754".
    @Test func referenceSample32() throws {
        #expect(
            try PMDDeltaCodec.decode(Vectors.refSample32x3, channels: 3, referenceBits: 32)
                == [0, Int32(bitPattern: 0xFFFF_FFFF), Int32(bitPattern: 0x8000_0000)])
    }

    // SDK BlePmdClientParsersTest.kt, test_parseDeltaFrameAllSamples_withResolution32_realVector1.
    @Test func realVector1() throws {
        let s = try PMDDeltaCodec.decode(Vectors.delta32RealVector1, channels: 3, referenceBits: 32)
        #expect(s.count == 3 * (1 + 6 + 3 + 6 + 3))
        // The SDK test's own assertions.
        #expect(Array(s[0..<3]) == [0x3F80_0000, 0x4120_0000, 0x41A0_0000])
        let sample1: [Int32] = [0x3F80_0000 + 0x1A0_0000, 0x4120_0000 + 0x080_0000, 0x41A0_0000 &+ Int32(bitPattern: 0xFDEC_CCCD)]
        #expect(Array(s[3..<6]) == sample1)
        #expect(s == Vectors.delta32RealVector1Expected)
    }

    // SDK BlePmdClientParsersTest.kt, test_parseDeltaFrameAllSamples_withResolution32.
    @Test func resolution32() throws {
        let s = try PMDDeltaCodec.decode(Vectors.delta32, channels: 3, referenceBits: 32)
        #expect(s.count == 3 * 18)
        #expect(Array(s[0..<3]) == [2, Int32(bitPattern: 0xE999_3219), Int32(bitPattern: 0xFFFE_DA00)])
        let c0: Int32 = 2 &+ Int32(bitPattern: 0xE999_3217)
        let c1: Int32 = Int32(bitPattern: 0xE999_3219) &+ 0x1665_A7E7
        let c2: Int32 = Int32(bitPattern: 0xFFFE_DA00) &+ 0x4606_DB38
        #expect(Array(s[3..<6]) == [c0, c1, c2])
        #expect(s == Vectors.delta32Expected)
    }

    // SDK BlePmdClientParsersTest.kt, test_parseDeltaFrameAllSamples_multipleDeltas.
    @Test func multipleBlocks() throws {
        let s = try PMDDeltaCodec.decode(Vectors.delta16MultipleBlocks, channels: 3, referenceBits: 16)
        #expect(s.count == 3 * (1 + 9 + 30 + 10 + 20 + 10 + 30 + 10 + 10 + 10))
        #expect(Array(s[0..<6]) == [-55, 18, 17, -54, 18, 18])
        #expect(s == Vectors.delta16MultipleBlocksExpected)
    }

    // SDK model/AccDataTest.kt, measurementFrameAccType0Short: cut inside its second block.
    @Test func cutBlockIsAnOverrun() {
        do {
            _ = try PMDDeltaCodec.decode(Vectors.accCompressedType0Short, channels: 3, referenceBits: 16)
            Issue.record("decoded a cut frame")
        } catch { #expect(error.code == .deltaOverrun) }
    }

    // Constructed edge cases.
    @Test func hostileBlocks() {
        let ref: [UInt8] = [0, 0, 0, 0, 0, 0]
        let cases: [([UInt8], PMDError.Code)] = [
            ([0, 0, 0], .truncated),  // shorter than the reference sample
            (ref + [0x06], .truncated),  // block header cut after the size byte
            (ref + [0x21, 0x01] + [UInt8](repeating: 0, count: 13), .invalidDeltaSize),  // 33-bit deltas
            (ref + [0xFF, 0xFF], .invalidDeltaSize),
            (ref + [0x20, 0xFF, 0x00], .deltaOverrun),  // 255 samples × 3 × 32 bits announced, 1 byte present
            (ref + [0x01, 0x08, 0x00, 0x00], .deltaOverrun),  // 24 bits need 3 bytes, 2 present
        ]
        for (b, code) in cases {
            do {
                _ = try PMDDeltaCodec.decode(b, channels: 3, referenceBits: 16)
                Issue.record("accepted \(b)")
            } catch { #expect(error.code == code, "\(b)") }
        }
    }

    // Constructed: 32-bit deltas that overflow Int32 wrap (as the SDK's Int does) instead of trapping; 1-bit deltas
    // are -1 or 0; a zero-size block adds no samples; a count of 0 adds none either.
    @Test func wrappingAndTinyDeltas() throws {
        let ref: [UInt8] = [0xFF, 0xFF, 0xFF, 0x7F]  // Int32.max, one channel
        let s = try PMDDeltaCodec.decode(ref + [0x20, 0x01, 0x01, 0x00, 0x00, 0x00], channels: 1, referenceBits: 32)
        #expect(s == [Int32.max, Int32.min])
        let t = try PMDDeltaCodec.decode([0x05, 0x00, 0x01, 0x04, 0b0000_0101, 0x00, 0x09, 0x00, 0x07], channels: 1, referenceBits: 16)
        #expect(t == [5, 4, 4, 3, 3])
    }
}

@Suite struct PMDDataFrameTests {
    // SDK model/EcgDataTest.kt, "process raw ecg data type 0".
    @Test func ecgType0() throws {
        let f = try PMDDataFrame(decoding: Vectors.ecgType0, context: .init(previousTimestampNs: 100))
        #expect(f.header == PMDFrameHeader(measurementType: .ecg, timestampNs: 2_000_000_000, frameType: 0, isCompressed: false))
        guard case let .ecg(s) = f.samples else {
            Issue.record("not ECG")
            return
        }
        #expect(s.map(\.microvolts) == [-32766, 32770])
        // Previous frame at 100 ns, two samples: (100, 2e9] split in two.
        #expect(s.map(\.timestampNs) == [1_000_000_050, 2_000_000_000])
        #expect(f.spacing == .previousFrame)
    }

    // SDK model/EcgDataTest.kt, "process raw ecg data type 1/2/3": ECG frame types the H10 does not send are an
    // error value here.
    @Test func otherECGFrameTypesAreUnsupported() {
        for v in [Vectors.ecgType1, Vectors.ecgType2, Vectors.ecgType3] {
            do {
                _ = try PMDDataFrame(decoding: v, context: .init(previousTimestampNs: 100))
                Issue.record("decoded \(v)")
            } catch { #expect(error.code == .unsupportedFrameType) }
        }
    }

    // SDK model/AccDataTest.kt, "process acc raw data frame type 1": no previous frame, 52 Hz.
    @Test func accRawType1() throws {
        let f = try PMDDataFrame(decoding: Vectors.accRawType1, context: .init(sampleRateHz: 52))
        guard case let .accelerometer(s) = f.samples else {
            Issue.record("not ACC")
            return
        }
        #expect(s.count == 36)
        #expect(s[0].mg == SIMD3(-9, -1, 999))
        #expect(s[1].mg == SIMD3(-8, -2, 997))
        #expect(s.flatMap { [$0.mg.x, $0.mg.y, $0.mg.z] } == Vectors.accRawType1ExpectedMg)
        #expect(s.map(\.timestampNs) == Vectors.accRawType1ExpectedTimes)
        #expect(s.last?.timestampNs == 2_000_000_000)
        #expect(s[0].g == SIMD3(-0.009, -0.001, 0.999))
        #expect(f.spacing == .sampleRate)
    }

    // SDK model/AccDataTest.kt, "process acc compressed data type 0": factor 2.44e-4, previous frame 100 ns.
    @Test func accCompressedType0() throws {
        let factor: Float = 2.44e-4
        let f = try PMDDataFrame(
            decoding: Vectors.accCompressedType0, context: .init(previousTimestampNs: 100, factor: factor))
        guard case let .accelerometer(s) = f.samples else {
            Issue.record("not ACC")
            return
        }
        #expect(s.count == 57)
        // The SDK test's own assertions, (factor × count × 1000).toInt().
        func sdk(_ c: Int32) -> Int32 { Int32(factor * Float(c) * 1000) }
        #expect(s[0].mg == SIMD3(sdk(1905), sdk(27376), sdk(-29282)))
        #expect(s[1].mg == SIMD3(sdk(1905 + 190), sdk(27376 - 105), sdk(-29282 - 85)))
        #expect(s.allSatisfy { abs($0.mg.x) <= 8000 && abs($0.mg.y) <= 8000 && abs($0.mg.z) <= 8000 })
        #expect(s.flatMap { [$0.mg.x, $0.mg.y, $0.mg.z] } == Vectors.accCompressedType0ExpectedMg)
        let counts = Vectors.accCompressedType0ExpectedCounts
        for (i, sample) in s.enumerated() {
            let c = SIMD3<Double>(Double(counts[3 * i]), Double(counts[3 * i + 1]), Double(counts[3 * i + 2]))
            #expect(sample.g == c * Double(factor))
        }
        #expect(s.map(\.timestampNs) == Vectors.accCompressedType0ExpectedTimes)
        #expect(s.first?.timestampNs == 35_087_818)
    }

    // The same frame without a factor: the scale comes from range and resolution (8 g / 2^15 per count), and
    // without those it is an error value.
    @Test func accCompressedType0Scale() throws {
        let f = try PMDDataFrame(
            decoding: Vectors.accCompressedType0, context: .init(previousTimestampNs: 100, rangeG: 8, resolutionBits: 16))
        guard case let .accelerometer(s) = f.samples else { return }
        #expect(s[0].g.x == 1905 * Double(Float(8.0 / 32768)))
        do {
            _ = try PMDDataFrame(decoding: Vectors.accCompressedType0, context: .init(previousTimestampNs: 100))
            Issue.record("decoded without a scale")
        } catch { #expect(error.code == .missingScale) }
    }

    // SDK model/AccDataTest.kt, "process acc compressed data type 1": previous frame 100 ns, frame 101 ns.
    @Test func accCompressedType1() throws {
        let f = try PMDDataFrame(decoding: Vectors.accCompressedType1, context: .init(previousTimestampNs: 100))
        #expect(f.header.isCompressed && f.header.frameType == 1 && f.header.timestampNs == 101)
        guard case let .accelerometer(s) = f.samples else {
            Issue.record("not ACC")
            return
        }
        #expect(s.map(\.mg) == [SIMD3(-15, 20, 1008), SIMD3(-15 - 5, 20 - 3, 1008)])
        #expect(s.map(\.timestampNs) == [100, 101])
    }

    // Constructed: raw ACC types 0 (int8) and 2 (int24), and the header round trip.
    @Test func accRawTypes0And2() throws {
        let h0 = PMDFrameHeader(measurementType: .acc, timestampNs: 1_000_000_000, frameType: 0, isCompressed: false)
        let f0 = try PMDDataFrame(decoding: h0.encoded() + [0xFF, 0x01, 0x80, 0x7F, 0x00, 0xFE], context: .init(sampleRateHz: 25))
        guard case let .accelerometer(s0) = f0.samples else { return }
        #expect(s0.map(\.mg) == [SIMD3(-1, 1, -128), SIMD3(127, 0, -2)])
        #expect(s0.map(\.timestampNs) == [960_000_000, 1_000_000_000])
        let h2 = PMDFrameHeader(measurementType: .acc, timestampNs: 5_000_000_000, frameType: 2, isCompressed: false)
        let f2 = try PMDDataFrame(decoding: h2.encoded() + [0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x80, 0xFF, 0xFF, 0x7F], context: .init(sampleRateHz: 100))
        guard case let .accelerometer(s2) = f2.samples else { return }
        #expect(s2.map(\.mg) == [SIMD3(-1, -8_388_608, 8_388_607)])
        #expect(try PMDFrameHeader(decoding: h2.encoded()) == h2)
    }

    // Constructed: what must be an error value, never a trap.
    @Test func badFramesAreErrors() {
        let ecg = PMDFrameHeader(measurementType: .ecg, timestampNs: 1_000_000_000, frameType: 0, isCompressed: false)
        let cases: [([UInt8], PMDDecodeContext, PMDError.Code)] = [
            ([0x00, 0x01], .init(sampleRateHz: 130), .truncated),
            (ecg.encoded(), .init(sampleRateHz: 130), .malformedSamples),  // no samples
            (ecg.encoded() + [1, 2, 3, 4], .init(sampleRateHz: 130), .malformedSamples),  // not a multiple of 3
            (ecg.encoded() + [1, 2, 3], .init(), .timestamp),  // no rate, no previous frame
            (
                PMDFrameHeader(measurementType: .ecg, timestampNs: 1000, frameType: 0, isCompressed: false).encoded()
                    + [1, 2, 3, 4, 5, 6], .init(sampleRateHz: 130), .timestamp
            ),  // first sample before zero
            (
                PMDFrameHeader(measurementType: .ppg, timestampNs: 1, frameType: 0, isCompressed: false).encoded() + [0],
                .init(sampleRateHz: 130), .unsupportedMeasurementType
            ),
            (
                PMDFrameHeader(measurementType: .ecg, timestampNs: 1, frameType: 0, isCompressed: true).encoded() + [0],
                .init(sampleRateHz: 130), .unsupportedFrameType
            ),
            (
                PMDFrameHeader(measurementType: .acc, timestampNs: 1, frameType: 3, isCompressed: false).encoded() + [0],
                .init(sampleRateHz: 130), .unsupportedFrameType
            ),
            (
                PMDFrameHeader(measurementType: .acc, timestampNs: 1, frameType: 1, isCompressed: true).encoded()
                    + Vectors.accCompressedType0Short, .init(sampleRateHz: 52), .deltaOverrun
            ),
        ]
        for (b, ctx, code) in cases {
            do {
                _ = try PMDDataFrame(decoding: b, context: ctx)
                Issue.record("accepted \(b)")
            } catch { #expect(error.code == code, "\(b)") }
        }
    }

    // Constructed: a hostile factor (NaN, huge) saturates instead of trapping.
    @Test func hostileFactor() throws {
        for factor in [Float.nan, Float.infinity, -Float.greatestFiniteMagnitude] {
            _ = try PMDDataFrame(
                decoding: Vectors.accCompressedType0, context: .init(previousTimestampNs: 100, factor: factor))
            _ = try PMDDataFrame(
                decoding: Vectors.accCompressedType1, context: .init(previousTimestampNs: 100, factor: factor))
        }
    }
}

@Suite struct PMDSampleTimesTests {
    // SDK model/PmdTimeStampUtilsTest.kt: the same inputs and expected times.
    @Test func sdkCases() throws {
        // "assert on invalid input, both sample rate and timestamp are zero"
        #expect(throws: PMDError.self) { try PMDSampleTimes(lastSampleNs: 100_000, count: 100, previousFrameNs: 0, sampleRateHz: 0) }
        // "assert on invalid input, time stamps are negative"
        #expect(throws: PMDError.self) { try PMDSampleTimes(lastSampleNs: 100_000, count: 100, previousFrameNs: 0, sampleRateHz: 52) }
        // "samples time stamps based on frequency"
        let a = try PMDSampleTimes(lastSampleNs: 10_000_000_000, count: 10, previousFrameNs: 0, sampleRateHz: 1)
        #expect(a.timestampsNs == (1...10).map { UInt64($0) * 1_000_000_000 })
        // "samples time based on frequency only one sample"
        #expect(try PMDSampleTimes(lastSampleNs: 1_000_000_000, count: 1, previousFrameNs: 0, sampleRateHz: 1).timestampsNs == [1_000_000_000])
        // "samples time stamps based on previous time stamp test 1"
        let b = try PMDSampleTimes(lastSampleNs: 11_000_000_000, count: 10, previousFrameNs: 1_000_000_000, sampleRateHz: 1)
        #expect(b.timestampsNs == (2...11).map { UInt64($0) * 1_000_000_000 })
        #expect(b.basis == .previousFrame)
        // "samples time stamps based on previous time stamp test 2"
        let c = try PMDSampleTimes(lastSampleNs: 2_000_000_000, count: 3, previousFrameNs: 100, sampleRateHz: 1)
        #expect(c.timestampsNs == [666_666_733, 1_333_333_367, 2_000_000_000])
        // "samples time stamps based on previous time stamp only one sample"
        #expect(try PMDSampleTimes(lastSampleNs: 2_000_000_000, count: 1, previousFrameNs: 1_000_000_000, sampleRateHz: 1).timestampsNs == [2_000_000_000])
    }

    // Constructed: a lost frame in between (the previous frame is twice as far back as the samples account for)
    // must not stretch the samples: the nominal rate is used instead.
    @Test func gapFallsBackToTheSampleRate() throws {
        // 130 Hz, 73 samples per frame ≈ 561.5 ms; previous frame two frames back.
        let last: UInt64 = 10_000_000_000
        let t = try PMDSampleTimes(lastSampleNs: last, count: 73, previousFrameNs: last - 1_123_076_923, sampleRateHz: 130)
        #expect(t.basis == .sampleRate)
        #expect(t.timestampsNs[71] == last - 7_692_308)
        // Previous frame after this one (sensor clock reset): also the nominal rate.
        #expect(try PMDSampleTimes(lastSampleNs: last, count: 2, previousFrameNs: last + 1, sampleRateHz: 130).basis == .sampleRate)
    }
}
