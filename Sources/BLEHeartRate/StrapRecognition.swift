/// Bluetooth SIG UUIDs the strap code uses, and conversion between 16-bit and BlueZ's 128-bit strings.
public enum GATTUUID {
    public static let heartRateService: UInt16 = 0x180D
    public static let heartRateMeasurement: UInt16 = 0x2A37
    public static let bodySensorLocation: UInt16 = 0x2A38
    public static let heartRateControlPoint: UInt16 = 0x2A39
    public static let batteryService: UInt16 = 0x180F
    public static let batteryLevel: UInt16 = 0x2A19
    public static let deviceInformation: UInt16 = 0x180A
    public static let manufacturerName: UInt16 = 0x2A29
    public static let modelNumber: UInt16 = 0x2A24
    public static let serialNumber: UInt16 = 0x2A25
    public static let hardwareRevision: UInt16 = 0x2A27
    public static let firmwareRevision: UInt16 = 0x2A26
    public static let softwareRevision: UInt16 = 0x2A28

    /// The lower-case 128-bit form BlueZ uses: `0000180d-0000-1000-8000-00805f9b34fb`.
    public static func full(_ short: UInt16) -> String {
        let hex = String(short, radix: 16)
        return "0000" + String(repeating: "0", count: 4 - hex.count) + hex + "-0000-1000-8000-00805f9b34fb"
    }

    /// The 16-bit value of a SIG UUID written as `180D`, `0x180d` or the 128-bit base form; nil for vendor UUIDs.
    public static func short(_ uuid: String) -> UInt16? {
        let s = uuid.lowercased()
        if s.count == 36 {
            guard s.hasPrefix("0000"), s.hasSuffix("-0000-1000-8000-00805f9b34fb") else { return nil }
            return UInt16(s.dropFirst(4).prefix(4), radix: 16)
        }
        let body = s.hasPrefix("0x") ? String(s.dropFirst(2)) : s
        guard body.count == 4 else { return nil }
        return UInt16(body, radix: 16)
    }
}

/// Why an advertising device was taken for a heart-rate strap.
public enum StrapMatch: Sendable, Equatable {
    /// It lists the Heart Rate service (0x180D).
    case heartRateService
    /// No 0x180D in its advertisement, but its name starts with a known strap model prefix.
    case knownName(prefix: String)
}

/// Recognises heart-rate straps from what discovery shows (BlueZ `Device1.UUIDs` and `Name`/`Alias`).
public enum StrapRecognizer {
    /// Name prefixes of straps and arm bands that speak the Heart Rate service but may advertise without its UUID
    /// (compared case-insensitively). Polar H7/H9/H10/OH1/Verity Sense, Garmin HRM-Dual/Pro/Run/Tri/Fit/200,
    /// Wahoo TICKR/TICKR X/TICKR FIT, and other common HRS straps.
    public static let knownNamePrefixes: [String] = [
        "Polar H10", "Polar H9", "Polar H7", "Polar H6", "Polar OH1", "Polar Verity", "Polar Sense",
        "Garmin HRM", "HRM-Dual", "HRM-Pro", "HRM-Run", "HRM-Tri", "HRM-Fit", "HRM 200", "HRM200",
        "TICKR", "Wahoo TICKR", "Wahoo HRM",
        "COOSPO", "H6M", "H808S", "Magene H64", "XOSS", "Suunto Smart Sensor", "Movesense",
        "Scosche Rhythm", "RHYTHM+", "Decathlon Dual HR", "Kalenji",
    ]

    /// `heartRateService` when `uuids` holds 0x180D (any spelling), else `knownName` when `name` starts with a known
    /// prefix, else nil.
    public static func match(uuids: [String], name: String?) -> StrapMatch? {
        if uuids.contains(where: { GATTUUID.short($0) == GATTUUID.heartRateService }) { return .heartRateService }
        guard let name else { return nil }
        let lower = name.lowercased()
        for prefix in knownNamePrefixes where lower.hasPrefix(prefix.lowercased()) {
            return .knownName(prefix: prefix)
        }
        return nil
    }
}

/// Heart rate a Polar strap broadcasts in its advertisement (manufacturer data of company 0x006B), readable
/// without connecting. Layout after the company id (polar-ble-sdk `BlePolarHrAdvertisement`): byte 0 flags
/// (bit 0 battery ok, bit 1 sensor contact, bits 2-4 frame counter, bit 5 broadcast, bit 6 data type, bit 7 status),
/// byte 1 kHz code, byte 2 fast-average HR, byte 3 slow-average HR (when present). No RR.
public struct PolarBroadcast: Sendable, Equatable {
    /// Polar Electro Oy's Bluetooth company identifier.
    public static let companyId: UInt16 = 0x006B

    public var batteryOK: Bool
    public var contact: Bool
    public var frameCounter: UInt8
    public var broadcast: Bool
    public var dataType: UInt8
    public var statusFlag: Bool
    public var kHzCode: UInt8
    public var fastAverageHR: UInt8
    public var slowAverageHR: UInt8?

    /// The rate to show: slow average when sent, else fast average.
    public var heartRate: UInt8 { slowAverageHR ?? fastAverageHR }

    /// Decodes the bytes after the company id (what BlueZ puts in `ManufacturerData[0x006B]`); nil if shorter
    /// than 3 bytes.
    public init?<Bytes: Collection>(payload: Bytes) where Bytes.Element == UInt8 {
        let b = Array(payload.prefix(4))
        guard b.count >= 3 else { return nil }
        batteryOK = b[0] & 0x01 != 0
        contact = b[0] & 0x02 != 0
        frameCounter = (b[0] >> 2) & 0x07
        broadcast = b[0] & 0x20 != 0
        dataType = (b[0] >> 6) & 0x01
        statusFlag = b[0] & 0x80 != 0
        kHzCode = b[1]
        fastAverageHR = b[2]
        slowAverageHR = b.count >= 4 ? b[3] : nil
    }

    /// Finds and decodes Polar's entry in a manufacturer-data map (company id → bytes).
    public init?(manufacturerData: [UInt16: [UInt8]]) {
        guard let bytes = manufacturerData[Self.companyId] else { return nil }
        self.init(payload: bytes)
    }

    /// Decodes a raw AD structure payload that still starts with the little-endian company id (`6B 00 …`).
    public init?(withCompanyId bytes: [UInt8]) {
        guard bytes.count >= 2, UInt16(bytes[0]) | UInt16(bytes[1]) << 8 == Self.companyId else { return nil }
        self.init(payload: bytes.dropFirst(2))
    }
}

/// Body Sensor Location (0x2A38).
public enum BodySensorLocation: UInt8, Sendable, Equatable, CaseIterable {
    case other = 0, chest, wrist, finger, hand, earLobe, foot

    /// Decodes the one-byte value; nil if empty or out of range.
    public init?(bytes: [UInt8]) {
        guard let b = bytes.first else { return nil }
        self.init(rawValue: b)
    }

    public var name: String {
        switch self {
        case .other: "other"
        case .chest: "chest"
        case .wrist: "wrist"
        case .finger: "finger"
        case .hand: "hand"
        case .earLobe: "ear_lobe"
        case .foot: "foot"
        }
    }
}
