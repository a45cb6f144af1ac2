// Byte vectors for the PolarPMD tests.
//
// Every input below marked "SDK" is a byte sequence published in the unit tests of Polar's BLE SDK
// (https://github.com/polarofficial/polar-ble-sdk, files under
// sources/Android/android-communications/library/src/test/java/com/polar/androidcommunications/api/ble/model/gatt/client/pmd/
// and sources/iOS/ios-communications/Tests/iOSCommunicationsTests/, as named at each vector), Copyright Polar Electro Oy,
// distributed under the Polar SDK License (Polar_SDK_License.txt in that repository; a copy, taken at the SDK's commit
// 8fb5311c8f63fd58fdd03df1b46cbb2e8f05209e, is beside this file as that licence asks). They are examples of PMD control
// point messages and data frames; we take only the bytes, as test inputs, not the SDK's code. The licence is Polar's
// own (not an open-source one): see docs/pmd.md, "Test vectors and their licence".
//
// The expected sample lists were produced once by an independent reference decoder (a Python transcription of the
// algorithm the SDK's parsers describe: a bit list per delta block, 32-bit wrapping sums, float32 scaling, Double
// sample times rounded half to even) and are checked here value by value; where the SDK test itself asserts values,
// those assertions are repeated literally in PolarPMDTests.swift.

enum Vectors {
    /// SDK BlePmdClientParsersTest.kt, "parse reference sample when resolution16 and type is unsigned int": a
    /// reference sample alone, 4 channels × 16 bits.
    static let refSample16x4 = bytes("FF FF 00 00 FF 7F 00 80")

    /// SDK BlePmdClientParsersTest.kt, "parse reference sample when resolution32 and type is decimal IEEE 754": 3
    /// channels × 32 bits.
    static let refSample32x3 = bytes("00 00 00 00 FF FF FF FF 00 00 00 80")

    /// SDK BlePmdClientParsersTest.kt, test_parseDeltaFrameAllSamples_withResolution32_realVector1: delta-compressed
    /// content, 3 channels, 32-bit reference.
    static let delta32RealVector1 = bytes("""
        00 00 80 3F 00 00 20 41 00 00 A0 41 1C 06 00 00 A0 01 00 00 08 CD CC EC 0D 00 00 08 CD CC EC 3D
        33 33 1A CD CC EC 3D 33 33 1A 00 00 C0 30 33 33 1A 00 00 C0 A0 99 99 DA 00 00 C0 A0 99 99 DA 66
        66 A6 A1 99 99 DA 66 66 A6 01 00 00 0E 20 03 66 66 A6 01 00 00 E0 00 42 6C 45 0E 00 00 E0 00 42
        6C 45 0E 2B F8 ED 21 00 00 60 FD BE 93 BA F0 93 9B 4C CF 1C 06 00 00 A0 01 00 00 08 CD CC EC 0D
        00 00 08 CD CC EC 3D 33 33 1A CD CC EC 3D 33 33 1A 00 00 C0 30 33 33 1A 00 00 C0 A0 99 99 DA 00
        00 C0 A0 99 99 DA 66 66 A6 A1 99 99 DA 66 66 A6 01 00 00 0E 20 03 66 66 A6 01 00 00 E0 00 42 6C
        45 0E 00 00 E0 00 42 6C 45 0E 2B F8 ED 21 00 00 60 FD BE 93 BA F0 93 9B 4C CF
        """)

    /// Expected: 19 samples × 3 channels (reference decoder).
    static let delta32RealVector1Expected: [Int32] = [
        1065353216, 1092616192, 1101004800, 1092616192, 1101004800, 1066192077, 1101004800, 1066192077, 1093664768,
        1066192077, 1093664768, 1106247680, 1093664768, 1106247680, 1067030938, 1106247680, 1067030938, 1094713344,
        1067030938, 1094713344, 1109393408, 1094713344, 1109393408, 1348824130, 1109393408, 1348824130, 1918067821,
        1065353216, 1092616192, 1101004800, 1092616192, 1101004800, 1066192077, 1101004800, 1066192077, 1093664768,
        1066192077, 1093664768, 1106247680, 1093664768, 1106247680, 1067030938, 1106247680, 1067030938, 1094713344,
        1067030938, 1094713344, 1109393408, 1094713344, 1109393408, 1348824130, 1109393408, 1348824130, 1918067821,
        1065353216, 1092616192, 1101004800,
    ]

    /// SDK BlePmdClientParsersTest.kt, test_parseDeltaFrameAllSamples_withResolution32: delta-compressed content, 3
    /// channels, 32-bit reference.
    static let delta32 = bytes("""
        02 00 00 00 19 32 99 E9 00 DA FE FF 20 11 17 32 99 E9 E7 A7 65 16 38 DB 06 46 E7 A7 65 16 38 DB
        06 46 73 41 3B B8 7A 26 04 01 C9 0A FF 59 77 07 D1 32 87 BF 01 9F 21 3E 0D 91 E5 01 76 AD 21 3E
        0D 91 E5 01 76 AD 92 01 38 CD E5 01 76 AD 92 01 38 CD 00 54 84 87 92 01 38 CD 00 54 84 87 78 CB
        EE 40 00 54 84 87 78 CB EE 40 F1 DE CC 8B 78 CB EE 40 F1 DE CC 8B 17 32 99 E9 F1 DE CC 8B 17 32
        99 E9 E7 A7 65 16 17 32 99 E9 E7 A7 65 16 38 DB 06 46 E7 A7 65 16 38 DB 06 46 73 41 3B B8 7A 26
        04 01 C9 0A FF 59 77 07 D1 32 87 BF 01 9F 21 3E 0D 91 E5 01 76 AD 21 3E 0D 91 E5 01 76 AD 92 01
        38 CD E5 01 76 AD 92 01 38 CD 00 54 84 87 92 01 38 CD 00 54 84 87 78 CB EE 40
        """)

    /// Expected: 18 samples × 3 channels (reference decoder).
    static let delta32Expected: [Int32] = [
        2, -375836135, -75264, -375836135, -75264, 1174779192, -75264, 1174779192, -29296981, 16973946, -1610301439,
        823262754, -1610301439, 823262754, -561512441, 823262754, -561512441, -1413480039, -561512441, -1413480039,
        860116377, -1413480039, 860116377, 1949507857, 860116377, 1949507857, 2, 1949507857, 2, -375836135, 2,
        -375836135, -75264, -375836135, -75264, 1174779192, -75264, 1174779192, -29296981, 16973946, -1610301439,
        823262754, -1610301439, 823262754, -561512441, 823262754, -561512441, -1413480039, -561512441, -1413480039,
        860116377, -1413480039, 860116377, 1949507857,
    ]

    /// SDK BlePmdClientParsersTest.kt, test_parseDeltaFrameAllSamples_multipleDeltas: delta-compressed content, 3
    /// channels, 16-bit reference.
    static let delta16MultipleBlocks = bytes("""
        C9 FF 12 00 11 00 03 09 41 FE 2B 0F 9C 0B BF 15 00 4F 00 04 1E F1 EF 00 F0 C1 23 E4 ED F4 D1 F1
        F1 F5 FF 22 DE 31 00 F1 FE 21 02 1F 0E 2B 1F 00 E2 20 00 0E 02 E1 1E 20 FF F1 F1 02 C5 D0 02 E0
        E1 02 03 0A 31 2E FB BA 90 2B AA 0E 23 40 9E 03 04 14 E3 EF F3 0F 02 1F 01 E0 0F 04 9E 13 E2 D0
        04 E2 22 E2 C2 0E 20 0F 20 02 FE 00 0F 1C 32 EE 03 0A 89 00 07 08 7C 00 CE 2F E8 3A 9E 03 04 1E
        01 00 11 19 4F 00 2F 12 FD 13 FF 0E 10 00 00 F1 C0 12 E4 EF 21 00 00 01 F1 FF FF 02 10 10 2B 51
        0B 4E 31 FC 2E BF 31 14 EC 0E 2F 52 EF 03 0A 06 9E 04 0E 02 A8 88 EE E0 07 9A 00 04 0A 1F 21 1E
        4E 2E FE C6 C0 02 EF 03 01 02 EE 11 03 0A F8 13 00 00 F0 40 BF A5 E7 00 76 00
        """)

    /// Expected: 140 samples × 3 channels (reference decoder).
    static let delta16MultipleBlocksExpected: [Int32] = [
        -55, 18, 17, -54, 18, 18, -55, 17, 17, -53, 18, 16, -52, 18, 14, -51, 17, 16, -51, 16, 15, -53, 18, 16, -53,
        18, 16, -54, 19, 17, -53, 18, 16, -55, 18, 16, -55, 17, 17, -59, 20, 19, -55, 18, 16, -57, 22, 15, -56, 19,
        16, -57, 20, 15, -52, 19, 14, -53, 21, 16, -55, 18, 17, -52, 18, 17, -51, 17, 15, -52, 18, 17, -50, 18, 16,
        -49, 16, 16, -54, 18, 15, -53, 18, 15, -51, 16, 15, -49, 16, 15, -51, 16, 17, -51, 17, 15, -53, 18, 15, -51,
        17, 14, -50, 16, 15, -51, 18, 15, -46, 14, 15, -49, 16, 15, -49, 14, 16, -51, 16, 16, -50, 14, 16, -51, 16,
        14, -53, 15, 16, -54, 17, 16, -53, 16, 18, -52, 18, 15, -50, 17, 15, -52, 17, 16, -52, 17, 17, -53, 18, 16,
        -50, 16, 15, -52, 19, 14, -53, 19, 16, -53, 18, 17, -52, 18, 17, -54, 17, 17, -50, 17, 15, -57, 20, 16, -55,
        18, 16, -58, 22, 16, -56, 20, 18, -54, 22, 16, -52, 18, 14, -52, 18, 16, -53, 18, 16, -51, 20, 16, -53, 19,
        16, -53, 18, 16, -57, 19, 18, -54, 17, 16, -53, 18, 18, -53, 18, 16, -52, 18, 16, -51, 18, 14, -52, 18, 14,
        -52, 16, 15, -53, 15, 17, -53, 17, 16, -51, 16, 16, -52, 17, 15, -51, 17, 15, -51, 18, 16, -58, 19, 15, -54,
        19, 15, -55, 21, 17, -54, 18, 16, -51, 19, 15, -52, 17, 15, -52, 18, 15, -52, 18, 15, -51, 17, 15, -55, 19,
        16, -51, 17, 15, -53, 18, 17, -53, 18, 17, -53, 19, 17, -52, 18, 16, -53, 17, 15, -51, 17, 15, -50, 17, 16,
        -55, 19, 17, -50, 14, 17, -52, 18, 18, -49, 14, 17, -51, 16, 16, -56, 17, 19, -52, 18, 15, -54, 16, 15, -55,
        18, 17, -50, 17, 15, -52, 17, 15, -53, 18, 16, -52, 18, 14, -51, 18, 15, -51, 18, 17, -54, 18, 18, -52, 17,
        16, -51, 17, 15, -52, 17, 15, -55, 18, 16, -56, 19, 17, -54, 17, 18, -56, 21, 16, -54, 19, 15, -48, 15, 15,
        -52, 17, 15, -53, 15, 18, -53, 16, 18, -51, 16, 16, -53, 17, 17, -53, 16, 16, -52, 17, 16, -52, 17, 16, -52,
        17, 16, -53, 18, 16, -51, 17, 15, -53, 19, 17, -54, 20, 16, -54, 20, 16, -51, 19, 16,
    ]

    /// SDK PmdSettingTest.kt, testPmdSettingsWithRange: 52 Hz, 16 bits, ranges 245/500/1000/2000, 3 channels.
    static let settingsWithRange = bytes("00 01 34 00 01 01 10 00 02 04 F5 00 F4 01 E8 03 D0 07 04 01 03")

    /// SDK PmdSettingTest.kt, testPmdSettingWithRangeMilliUnit: range milli-unit FFFFFFFF and 000000FF, resolution
    /// 14.
    static let settingsWithRangeMilliunit = bytes("03 02 FF FF FF FF FF 00 00 00 01 01 0E 00")

    /// SDK BlePmdClientControlPointResponseTest.kt, "success control point response for acc stream settings".
    static let responseAccSettings = bytes("F0 01 02 00 00 FF FF FF")

    /// SDK BlePmdClientControlPointResponseTest.kt, "failing control point response for mag stream settings" (status
    /// 7, invalid resolution).
    static let responseMagFailure = bytes("F0 01 06 07 00")

    /// SDK iOS BlePmdClientTest.swift, testProcessControlPointResponseWhenStatusIsSuccess.
    static let responseIOS = bytes("F0 01 00 00 00 00 00 00 70 FF")

    /// SDK iOS BlePmdClientTest.swift, testProcessMeasurementStopControlPointCommand: the sensor stopped PPG and ACC.
    static let measurementStoppedIOS = bytes("01 01 02")

    /// SDK model/EcgDataTest.kt, "process raw ecg data type 0": header (timestamp 2 000 000 000 ns) + content.
    static let ecgType0 = bytes("00 00 94 35 77 00 00 00 00 00 02 80 FF 02 80 00")

    /// SDK model/EcgDataTest.kt, "process raw ecg data type 1": header (timestamp 2 000 000 000 ns) + content.
    static let ecgType1 = bytes("00 00 94 35 77 00 00 00 00 01 02 80 FF 80 02 00")

    /// SDK model/EcgDataTest.kt, "process raw ecg data type 2": header (timestamp 2 000 000 000 ns) + content.
    static let ecgType2 = bytes("00 00 94 35 77 00 00 00 00 02 80 80 FC FF FF 03")

    /// SDK model/EcgDataTest.kt, "process raw ecg data type 3": header (timestamp 2 000 000 000 ns) + content.
    static let ecgType3 = bytes("00 00 94 35 77 00 00 00 00 03 00 12 03 11 10 04 00 02 80 F0 11 10 04 FF")

    /// SDK model/AccDataTest.kt, "process acc raw data frame type 1": header + 36 samples of 3 × int16 mg.
    static let accRawType1 = bytes("""
        02 00 94 35 77 00 00 00 00 01 F7 FF FF FF E7 03 F8 FF FE FF E5 03 F9 FF FF FF E5 03 FA FF FF FF
        E6 03 FA FF FE FF E6 03 F9 FF FF FF E5 03 F8 FF FF FF E6 03 F8 FF FE FF E6 03 FA FF FF FF E5 03
        FA FF FF FF E7 03 FA FF FF FF E5 03 F8 FF FF FF E6 03 F7 FF FF FF E6 03 F8 FF FE FF E6 03 F9 FF
        FE FF E7 03 F9 FF 00 00 E6 03 F9 FF FF FF E6 03 F7 FF FE FF E5 03 F9 FF FF FF E5 03 F9 FF FF FF
        E5 03 FA FF 00 00 E6 03 F9 FF FE FF E6 03 F8 FF FF FF E6 03 F8 FF FF FF E5 03 F9 FF FF FF E6 03
        F9 FF FF FF E5 03 FA FF FF FF E6 03 F9 FF FF FF E5 03 F9 FF FF FF E5 03 F8 FF FE FF E6 03 F9 FF
        FF FF E6 03 F9 FF FF FF E6 03 F9 FF 00 00 E5 03 F9 FF FE FF E6 03 F8 FF FE FF E6 03 F7 FF FE FF
        E6 03
        """)

    /// Expected mg (x, y, z per sample).
    static let accRawType1ExpectedMg: [Int32] = [
        -9, -1, 999, -8, -2, 997, -7, -1, 997, -6, -1, 998, -6, -2, 998, -7, -1, 997, -8, -1, 998, -8, -2, 998, -6,
        -1, 997, -6, -1, 999, -6, -1, 997, -8, -1, 998, -9, -1, 998, -8, -2, 998, -7, -2, 999, -7, 0, 998, -7, -1,
        998, -9, -2, 997, -7, -1, 997, -7, -1, 997, -6, 0, 998, -7, -2, 998, -8, -1, 998, -8, -1, 997, -7, -1, 998,
        -7, -1, 997, -6, -1, 998, -7, -1, 997, -7, -1, 997, -8, -2, 998, -7, -1, 998, -7, -1, 998, -7, 0, 997, -7, -2,
        998, -8, -2, 998, -9, -2, 998,
    ]
    /// Expected sample times with no previous frame at 52 Hz (the SDK's Double arithmetic, rounded half to even).
    static let accRawType1ExpectedTimes: [UInt64] = [
        1326923077, 1346153846, 1365384615, 1384615385, 1403846154, 1423076923, 1442307692, 1461538462, 1480769231,
        1500000000, 1519230769, 1538461538, 1557692308, 1576923077, 1596153846, 1615384615, 1634615385, 1653846154,
        1673076923, 1692307692, 1711538462, 1730769231, 1750000000, 1769230769, 1788461538, 1807692308, 1826923077,
        1846153846, 1865384615, 1884615385, 1903846154, 1923076923, 1942307692, 1961538462, 1980769231, 2000000000,
    ]

    /// SDK model/AccDataTest.kt, "process acc compressed data type 0": header (frame type 0x80) + delta content;
    /// factor 2.44e-4, previous frame 100 ns.
    static let accCompressedType0 = bytes("""
        02 00 94 35 77 00 00 00 00 80 71 07 F0 6A 9E 8D 0A 38 BE 5C BE BA 2F 96 B3 EE 4B E5 AD FB 42 B9
        EB BE 4C FE BA 2F 92 BF EE 4B E4 B1 FB 12 B9 EC BD 3C 3E BB 2F 8F D3 DE 4B E3 B5 F7 D2 B8 ED BD
        30 7E 7B 2F 8B E3 CE 8B E2 BA F7 A2 B8 EE BC 20 BE 7B 2F 88 F3 CE CB E1 BD EF 52 F8 EF BC 18 FE
        3B 2F 84 03 BF CB E0 C2 EF 32 B8 F0 BB 04 4E BC 2E 81 13 AF 0B E0 C6 EF F2 F7 F1 B9 FC 7D BC 2E
        7D 27 9F 4B DF CA EB C2 F7 F2 B8 EC CD 7C 2E 7B 37 8F 4B DE CE E3 92 F7 F3 B8 E0 0D FD 2D 77 4B
        7F CB DD D2 DF 62 37 F5 B7 D4 4D BD 2D 74 5B 6F CB DC D7 D7 32 37 F6 B5 C8 8D 7D 2D 71 6B 4F 4B
        DC DC D3 F2 36 F7 B4 BC DD FD 2C 6F 7B 3F 4B DB E0 CF D2 36 F8 B2 B0 2D BE 2C 6C 8F 1F CB DA E3
        C7 A2 76 F9
        """)

    static let accCompressedType0ExpectedCounts: [Int32] = [
        1905, 27376, -29282, 2095, 27271, -29367, 2285, 27165, -29451, 2475, 27058, -29534, 2665, 26950, -29616, 2855,
        26841, -29697, 3045, 26731, -29778, 3235, 26620, -29857, 3425, 26509, -29935, 3614, 26396, -30012, 3804,
        26283, -30088, 3993, 26168, -30163, 4182, 26053, -30237, 4371, 25937, -30310, 4560, 25820, -30382, 4748,
        25702, -30452, 4937, 25584, -30522, 5125, 25464, -30591, 5314, 25344, -30659, 5502, 25223, -30726, 5689,
        25100, -30791, 5877, 24978, -30856, 6065, 24854, -30920, 6252, 24729, -30982, 6439, 24604, -31044, 6626,
        24477, -31104, 6812, 24350, -31164, 6998, 24222, -31222, 7185, 24093, -31279, 7370, 23964, -31336, 7556,
        23833, -31391, 7741, 23702, -31445, 7927, 23570, -31498, 8111, 23437, -31550, 8296, 23304, -31601, 8480,
        23169, -31651, 8664, 23034, -31700, 8848, 22898, -31748, 9031, 22761, -31794, 9214, 22624, -31840, 9397,
        22486, -31884, 9580, 22347, -31928, 9762, 22207, -31970, 9944, 22066, -32011, 10125, 21925, -32051, 10306,
        21783, -32091, 10487, 21640, -32129, 10667, 21497, -32165, 10847, 21352, -32201, 11027, 21207, -32236, 11206,
        21062, -32270, 11385, 20915, -32302, 11564, 20768, -32334, 11742, 20620, -32364, 11920, 20472, -32393, 12097,
        20323, -32422, 12274, 20173, -32449,
    ]
    static let accCompressedType0ExpectedMg: [Int32] = [
        464, 6679, -7144, 511, 6654, -7165, 557, 6628, -7186, 603, 6602, -7206, 650, 6575, -7226, 696, 6549, -7246,
        742, 6522, -7265, 789, 6495, -7285, 835, 6468, -7304, 881, 6440, -7322, 928, 6413, -7341, 974, 6384, -7359,
        1020, 6356, -7377, 1066, 6328, -7395, 1112, 6300, -7413, 1158, 6271, -7430, 1204, 6242, -7447, 1250, 6213,
        -7464, 1296, 6183, -7480, 1342, 6154, -7497, 1388, 6124, -7513, 1433, 6094, -7528, 1479, 6064, -7544, 1525,
        6033, -7559, 1571, 6003, -7574, 1616, 5972, -7589, 1662, 5941, -7604, 1707, 5910, -7618, 1753, 5878, -7632,
        1798, 5847, -7645, 1843, 5815, -7659, 1888, 5783, -7672, 1934, 5751, -7685, 1979, 5718, -7698, 2024, 5686,
        -7710, 2069, 5653, -7722, 2114, 5620, -7734, 2158, 5587, -7746, 2203, 5553, -7757, 2248, 5520, -7768, 2292,
        5486, -7779, 2337, 5452, -7790, 2381, 5418, -7800, 2426, 5384, -7810, 2470, 5349, -7820, 2514, 5315, -7830,
        2558, 5280, -7839, 2602, 5245, -7848, 2646, 5209, -7857, 2690, 5174, -7865, 2734, 5139, -7873, 2777, 5103,
        -7881, 2821, 5067, -7889, 2865, 5031, -7896, 2908, 4995, -7903, 2951, 4958, -7910, 2994, 4922, -7917,
    ]
    static let accCompressedType0ExpectedTimes: [UInt64] = [
        35087818, 70175535, 105263253, 140350970, 175438688, 210526405, 245614123, 280701840, 315789558, 350877275,
        385964993, 421052711, 456140428, 491228146, 526315863, 561403581, 596491298, 631579016, 666666733, 701754451,
        736842168, 771929886, 807017604, 842105321, 877193039, 912280756, 947368474, 982456191, 1017543909,
        1052631626, 1087719344, 1122807061, 1157894779, 1192982496, 1228070214, 1263157932, 1298245649, 1333333367,
        1368421084, 1403508802, 1438596519, 1473684237, 1508771954, 1543859672, 1578947389, 1614035107, 1649122825,
        1684210542, 1719298260, 1754385977, 1789473695, 1824561412, 1859649130, 1894736847, 1929824565, 1964912282,
        2000000000,
    ]

    /// SDK model/AccDataTest.kt, "process acc compressed data type 1": header (timestamp 101 ns, frame type 0x81) +
    /// delta content; previous frame 100 ns.
    static let accCompressedType1 = bytes("02 65 00 00 00 00 00 00 00 81 F1 FF 14 00 F0 03 06 01 7B 0F 08")

    /// SDK model/AccDataTest.kt, measurementFrameAccType0Short: delta content whose second block (12-bit deltas × 20
    /// samples = 90 bytes) is cut off after 22 bytes.
    static let accCompressedType0Short = bytes("""
        5D FF 98 00 FD 0F 06 2A F2 B0 13 EC A1 1B 3E C3 D0 40 7F CD 40 71 D8 F3 4D 00 46 3F 08 7B 9F D7
        3A AF 38 52 A6 13 ED 3E 13 09 91 DC FA EE EF 3E 54 10 E2 8F 77 85 EE F2 4C 7E 04 87 9C FC D2 2F
        10 FD 4F EF FE 21 FF C2 81 04 03 5F 13 45 D1 08 4A DF BF B5 51 44 7B 50 F7 39 A1 10 2E 6F 18 F7
        9F 1C 36 4D 1B 0D 03 0C 14 06 D0 FE F7 AF FF FC BF FF F4 3F 01 17 F0 00 01 10 00 F8 DF FF 00
        """)

}

/// Bytes from hex digits; spaces and newlines are ignored.
func bytes(_ hex: String) -> [UInt8] {
    let digits = hex.filter { !$0.isWhitespace }.map { UInt8(String($0), radix: 16)! }
    return stride(from: 0, to: digits.count, by: 2).map { digits[$0] << 4 | digits[$0 + 1] }
}
