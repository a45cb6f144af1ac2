/// One kind of measurement setting in a settings TLV.
public enum PMDSettingType: UInt8, Sendable, Hashable, CaseIterable, Comparable, CustomStringConvertible {
    /// Hz, 2 bytes.
    case sampleRate = 0
    /// Bits per sample, 2 bytes.
    case resolution = 1
    /// Full scale (g for the accelerometer), 2 bytes.
    case range = 2
    /// Full scale in milli-units, 4 bytes.
    case rangeMilliunit = 3
    /// Number of channels, 1 byte.
    case channels = 4
    /// Scale factor, an IEEE 754 float32 in 4 bytes (sent by the sensor in start responses, never requested).
    case factor = 5
    /// Security key, 16 bytes.
    case security = 6

    /// Size of one value of this type on the wire.
    public var fieldSize: Int {
        switch self {
        case .sampleRate, .resolution, .range: 2
        case .rangeMilliunit, .factor: 4
        case .channels: 1
        case .security: 16
        }
    }

    public var description: String {
        switch self {
        case .sampleRate: "sample rate"
        case .resolution: "resolution"
        case .range: "range"
        case .rangeMilliunit: "range (milli-units)"
        case .channels: "channels"
        case .factor: "factor"
        case .security: "security"
        }
    }

    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
}

/// The settings a sensor offers for a measurement (the parameters of a GET_MEASUREMENT_SETTINGS response) or
/// reports back after a start (typically the accelerometer's `factor`).
///
/// Wire format: repeated `type (1 byte), count (1 byte), count × value (fieldSize bytes, little-endian)`.
/// Values are kept as unsigned 32-bit numbers in wire order (a 16-byte security value keeps its first 4 bytes;
/// `securityKeys` has the whole key).
public struct PMDSettings: Sendable, Equatable {
    public var values: [PMDSettingType: [UInt32]]
    public var securityKeys: [[UInt8]]

    public init(values: [PMDSettingType: [UInt32]] = [:], securityKeys: [[UInt8]] = []) {
        self.values = values
        self.securityKeys = securityKeys
    }

    public init<Bytes: Collection>(decoding bytes: Bytes) throws(PMDError) where Bytes.Element == UInt8 {
        let b = Array(bytes)
        var values: [PMDSettingType: [UInt32]] = [:]
        var keys: [[UInt8]] = []
        var i = 0
        // The SDK treats a single byte as "no settings"; so do we.
        if b.count <= 1 {
            self.init()
            return
        }
        while i < b.count {
            guard let type = PMDSettingType(rawValue: b[i]) else {
                throw PMDError(.malformedSettings, "unknown setting type \(b[i]) at offset \(i)")
            }
            guard i + 1 < b.count else {
                throw PMDError(.malformedSettings, "setting \(type) at offset \(i) has no count byte")
            }
            let count = Int(b[i + 1])
            i += 2
            let size = type.fieldSize
            guard b.count - i >= count * size else {
                throw PMDError(
                    .malformedSettings,
                    "setting \(type) announces \(count) value(s) of \(size) byte(s) but \(b.count - i) byte(s) remain")
            }
            var list = values[type] ?? []
            for _ in 0..<count {
                var v: UInt32 = 0
                for k in 0..<min(size, 4) { v |= UInt32(b[i + k]) << (8 * UInt32(k)) }
                if type == .security { keys.append(Array(b[i..<(i + size)])) }
                if !list.contains(v) { list.append(v) }
                i += size
            }
            values[type] = list
        }
        self.init(values: values, securityKeys: keys)
    }

    public var sampleRates: [Int] { (values[.sampleRate] ?? []).map { Int($0) } }
    public var resolutions: [Int] { (values[.resolution] ?? []).map { Int($0) } }
    public var ranges: [Int] { (values[.range] ?? []).map { Int($0) } }
    public var channels: [Int] { (values[.channels] ?? []).map { Int($0) } }
    /// The scale factor (float32 bit pattern decoded), when present.
    public var factor: Float? { values[.factor]?.first.map { Float(bitPattern: $0) } }

    /// The wire form (what a sensor answers to GET_MEASUREMENT_SETTINGS), in setting-type order; security values are
    /// `securityKeys`.
    public func encoded() -> [UInt8] {
        var out: [UInt8] = []
        for type in PMDSettingType.allCases.sorted() {
            if type == .security {
                guard !securityKeys.isEmpty else { continue }
                out += [type.rawValue, UInt8(securityKeys.count)]
                for key in securityKeys { out += (key + [UInt8](repeating: 0, count: type.fieldSize)).prefix(type.fieldSize) }
                continue
            }
            guard let list = values[type], !list.isEmpty else { continue }
            out += [type.rawValue, UInt8(list.count)]
            for v in list {
                for k in 0..<type.fieldSize { out.append(k < 4 ? UInt8(truncatingIfNeeded: v >> (8 * UInt32(k))) : 0) }
            }
        }
        return out
    }
}

/// The settings chosen for a REQUEST_MEASUREMENT_START. Encoded in setting-type order, each as
/// `type, 0x01, value (fieldSize bytes LE)`; absent settings are not sent.
public struct PMDStreamSettings: Sendable, Equatable, Hashable {
    public var sampleRate: UInt16?
    public var resolution: UInt16?
    public var range: UInt16?
    public var rangeMilliunit: UInt32?
    public var channels: UInt8?

    public init(
        sampleRate: UInt16? = nil, resolution: UInt16? = nil, range: UInt16? = nil, rangeMilliunit: UInt32? = nil,
        channels: UInt8? = nil
    ) {
        self.sampleRate = sampleRate
        self.resolution = resolution
        self.range = range
        self.rangeMilliunit = rangeMilliunit
        self.channels = channels
    }

    /// H10 ECG: 130 Hz, 14 bits.
    public static let h10ECG = Self(sampleRate: 130, resolution: 14)
    /// H10 accelerometer at `hz` (25, 50, 100 or 200) and `rangeG` (2, 4 or 8), 16 bits.
    public static func h10Accelerometer(hz: UInt16 = 200, rangeG: UInt16 = 8) -> Self {
        Self(sampleRate: hz, resolution: 16, range: rangeG)
    }

    public func encoded() -> [UInt8] {
        var out: [UInt8] = []
        func put(_ type: PMDSettingType, _ value: UInt32) {
            out.append(type.rawValue)
            out.append(1)
            for k in 0..<type.fieldSize { out.append(UInt8(truncatingIfNeeded: value >> (8 * UInt32(k)))) }
        }
        if let v = sampleRate { put(.sampleRate, UInt32(v)) }
        if let v = resolution { put(.resolution, UInt32(v)) }
        if let v = range { put(.range, UInt32(v)) }
        if let v = rangeMilliunit { put(.rangeMilliunit, v) }
        if let v = channels { put(.channels, UInt32(v)) }
        return out
    }

    /// Whether every chosen value is among those the sensor offered (a setting the sensor did not list is accepted
    /// only when it offered nothing of that type).
    public func isOffered(by available: PMDSettings) -> Bool {
        func ok(_ type: PMDSettingType, _ v: UInt32?) -> Bool {
            guard let v, let offered = available.values[type], !offered.isEmpty else { return true }
            return offered.contains(v)
        }
        return ok(.sampleRate, sampleRate.map(UInt32.init)) && ok(.resolution, resolution.map(UInt32.init))
            && ok(.range, range.map(UInt32.init)) && ok(.rangeMilliunit, rangeMilliunit)
            && ok(.channels, channels.map(UInt32.init))
    }
}

/// A request written to the control point.
public enum PMDRequest: Sendable, Equatable, Hashable {
    /// GET_MEASUREMENT_SETTINGS (0x01): `01 type`.
    case getSettings(PMDMeasurementType)
    /// REQUEST_MEASUREMENT_START (0x02): `02 type settings…`.
    case start(PMDMeasurementType, PMDStreamSettings)
    /// STOP_MEASUREMENT (0x03): `03 type`.
    case stop(PMDMeasurementType)

    public var opCode: PMDOpCode {
        switch self {
        case .getSettings: .getMeasurementSettings
        case .start: .startMeasurement
        case .stop: .stopMeasurement
        }
    }

    public var measurementType: PMDMeasurementType {
        switch self {
        case let .getSettings(t), let .start(t, _), let .stop(t): t
        }
    }

    public func encoded() -> [UInt8] {
        switch self {
        case let .getSettings(t): [PMDOpCode.getMeasurementSettings.rawValue, t.rawValue]
        case let .start(t, s): [PMDOpCode.startMeasurement.rawValue, t.rawValue] + s.encoded()
        case let .stop(t): [PMDOpCode.stopMeasurement.rawValue, t.rawValue]
        }
    }
}

/// A control-point response (an indication starting 0xF0).
///
/// Layout: `F0, op code, measurement type, status, more, parameters…`. `more` and the parameters are only read when
/// the status is success (as the SDK does); `more` set means the parameters continue in the next indication.
public struct PMDControlPointResponse: Sendable, Equatable {
    public static let responseCode: UInt8 = 0xF0

    public var opCode: PMDOpCode
    public var measurementType: PMDMeasurementType
    public var status: PMDStatus
    public var more: Bool
    public var parameters: [UInt8]

    public init(
        opCode: PMDOpCode, measurementType: PMDMeasurementType, status: PMDStatus, more: Bool = false,
        parameters: [UInt8] = []
    ) {
        self.opCode = opCode
        self.measurementType = measurementType
        self.status = status
        self.more = more
        self.parameters = parameters
    }

    public init<Bytes: Collection>(decoding bytes: Bytes) throws(PMDError) where Bytes.Element == UInt8 {
        let b = Array(bytes)
        guard let first = b.first else { throw PMDError(.truncated, "empty control-point response") }
        guard first == Self.responseCode else {
            throw PMDError(.unexpectedMessage, "control-point response starts with \(hex(first)), not F0")
        }
        guard b.count >= 4 else {
            throw PMDError(.truncated, "control-point response of \(b.count) byte(s) (needs at least 4)")
        }
        let status = PMDStatus(rawValue: b[3])
        self.opCode = PMDOpCode(rawValue: b[1])
        self.measurementType = PMDMeasurementType(rawValue: b[2])
        self.status = status
        self.more = status.isSuccess && b.count > 4 && b[4] != 0
        self.parameters = status.isSuccess && b.count > 5 ? Array(b[5...]) : []
    }

    /// The parameters read as a settings TLV (a GET_MEASUREMENT_SETTINGS answer, or the factor after a start).
    public func settings() throws(PMDError) -> PMDSettings { try PMDSettings(decoding: parameters) }

    public func encoded() -> [UInt8] {
        [Self.responseCode, opCode.rawValue, measurementType.rawValue, status.rawValue, more ? 1 : 0] + parameters
    }
}

/// Joins a response whose parameters span several indications, the way Polar's SDK reads them: every part repeats
/// the header (`F0 op type status more`), `more` is set on all parts but the last, and the parameters of the parts
/// are concatenated in order. A part for another op code or measurement type than the one being joined starts
/// afresh (the unfinished one is counted in `abandoned`).
public struct PMDResponseAssembler: Sendable {
    private var partial: PMDControlPointResponse?
    /// Unfinished responses dropped because a part of another response came first.
    public private(set) var abandoned = 0

    public init() {}

    /// The whole response once its last part arrived; `nil` while parts are outstanding.
    public mutating func add(_ part: PMDControlPointResponse) -> PMDControlPointResponse? {
        if var joined = partial {
            if joined.opCode == part.opCode, joined.measurementType == part.measurementType {
                joined.parameters += part.parameters
                joined.more = part.more
                partial = joined.more ? joined : nil
                return joined.more ? nil : joined
            }
            abandoned += 1
            partial = nil
        }
        if part.more {
            partial = part
            return nil
        }
        return part
    }
}

/// Anything the sensor indicates on the control point.
public enum PMDControlPointMessage: Sendable, Equatable {
    case response(PMDControlPointResponse)
    /// ONLINE_MEASUREMENT_STOPPED (0x01): the sensor stopped these streams by itself.
    case measurementStopped([PMDMeasurementType])

    public init<Bytes: Collection>(decoding bytes: Bytes) throws(PMDError) where Bytes.Element == UInt8 {
        let b = Array(bytes)
        guard let first = b.first else { throw PMDError(.truncated, "empty control-point indication") }
        switch first {
        case PMDControlPointResponse.responseCode: self = .response(try PMDControlPointResponse(decoding: b))
        case 0x01: self = .measurementStopped(b.dropFirst().map { PMDMeasurementType(rawValue: $0 & 0x3F) })
        default: throw PMDError(.unexpectedMessage, "unknown control-point indication \(hex(first))")
        }
    }
}

/// The control point's read value: `0F` then a bitmap where bit n (byte 1 bit 0 = type 0) means measurement type n
/// is available.
public struct PMDFeatures: Sendable, Equatable {
    public static let featureCode: UInt8 = 0x0F
    public var supported: Set<PMDMeasurementType>

    public init(supported: Set<PMDMeasurementType>) { self.supported = supported }

    public init<Bytes: Collection>(decoding bytes: Bytes) throws(PMDError) where Bytes.Element == UInt8 {
        let b = Array(bytes)
        guard b.count >= 2 else { throw PMDError(.truncated, "feature read of \(b.count) byte(s) (needs at least 2)") }
        guard b[0] == Self.featureCode else {
            throw PMDError(.unexpectedMessage, "feature read starts with \(hex(b[0])), not 0F")
        }
        var set = Set<PMDMeasurementType>()
        for (byteIndex, byte) in b.dropFirst().prefix(8).enumerated() {
            for bit in 0..<8 where byte & (1 << bit) != 0 {
                set.insert(PMDMeasurementType(rawValue: UInt8(byteIndex * 8 + bit)))
            }
        }
        self.supported = set
    }

    public func contains(_ type: PMDMeasurementType) -> Bool { supported.contains(type) }
    /// Supported types in id order.
    public var sorted: [PMDMeasurementType] { supported.sorted() }
}

func hex(_ b: UInt8) -> String {
    let digits = Array("0123456789ABCDEF")
    return String([digits[Int(b >> 4)], digits[Int(b & 0x0F)]])
}
