/// The Polar Measurement Data (PMD) service: identifiers, measurement types, control-point op codes and status codes.
///
/// PMD is Polar's vendor GATT service for raw sensor streams (ECG, accelerometer, PPG, …). A client writes requests
/// to the control point and receives the answers as indications on the same characteristic; samples arrive as
/// notifications on the data characteristic. Everything here is pure: bytes in, values out (see docs/pmd.md).
public enum PMDService {
    /// The PMD service (BlueZ spells UUIDs in lower case).
    public static let serviceUUID = "fb005c80-02e7-f387-1cad-8acd2d8df0c8"
    /// Control point: read (the feature bitmap), write (requests), indicate (responses).
    public static let controlPointUUID = "fb005c81-02e7-f387-1cad-8acd2d8df0c8"
    /// Data: notifications carrying one data frame each.
    public static let dataUUID = "fb005c82-02e7-f387-1cad-8acd2d8df0c8"
}

/// Why PMD bytes could not be encoded or decoded. The decoders never trap on hostile input: every failure is one of
/// these, with a stable `code` for counters and logs and a sentence for people.
public struct PMDError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable, CaseIterable {
        /// Fewer bytes than the fixed part of the message needs.
        case truncated = "truncated"
        /// A control-point message that is neither a response (0xF0) nor a known service-initiated command, or a
        /// feature read that does not start with 0x0F.
        case unexpectedMessage = "unexpected_message"
        /// A settings TLV with an unknown setting type or a value list that runs past the end.
        case malformedSettings = "malformed_settings"
        /// A data frame of a measurement type this library does not decode.
        case unsupportedMeasurementType = "unsupported_measurement_type"
        /// A data frame type (raw or compressed) this library does not decode for its measurement type.
        case unsupportedFrameType = "unsupported_frame_type"
        /// A raw frame whose content is not a whole number of samples, or a frame with no samples at all.
        case malformedSamples = "malformed_samples"
        /// A delta-compressed block announcing deltas wider than 32 bits.
        case invalidDeltaSize = "invalid_delta_size"
        /// A delta-compressed block whose delta bits run past the end of the frame.
        case deltaOverrun = "delta_overrun"
        /// The per-sample times cannot be derived: no sample rate and no previous frame, or the first sample would
        /// fall before the sensor clock's zero.
        case timestamp = "timestamp"
        /// A compressed accelerometer frame whose scale is unknown (no factor, range or resolution to hand).
        case missingScale = "missing_scale"
        /// A request value that does not fit its field.
        case invalidRequest = "invalid_request"
    }

    public let code: Code
    public let description: String

    public init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }
}

/// A PMD measurement type (the low 6 bits of a data frame's first byte, the type byte of requests and responses).
/// Unknown values are kept as they are.
public struct PMDMeasurementType: RawRepresentable, Sendable, Hashable, Comparable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let ecg = Self(rawValue: 0)
    public static let ppg = Self(rawValue: 1)
    public static let acc = Self(rawValue: 2)
    public static let ppi = Self(rawValue: 3)
    public static let gyro = Self(rawValue: 5)
    public static let magnetometer = Self(rawValue: 6)
    public static let skinTemperature = Self(rawValue: 7)
    public static let sdkMode = Self(rawValue: 9)
    public static let location = Self(rawValue: 10)
    public static let pressure = Self(rawValue: 11)
    public static let temperature = Self(rawValue: 12)
    public static let offlineRecording = Self(rawValue: 13)
    public static let offlineHR = Self(rawValue: 14)

    /// Every type the SDK names, in id order.
    public static let known: [Self] = [
        .ecg, .ppg, .acc, .ppi, .gyro, .magnetometer, .skinTemperature, .sdkMode, .location, .pressure, .temperature,
        .offlineRecording, .offlineHR,
    ]

    public var name: String {
        switch rawValue {
        case 0: "ECG"
        case 1: "PPG"
        case 2: "ACC"
        case 3: "PPI"
        case 5: "GYRO"
        case 6: "MAGNETOMETER"
        case 7: "SKIN_TEMP"
        case 9: "SDK_MODE"
        case 10: "LOCATION"
        case 11: "PRESSURE"
        case 12: "TEMPERATURE"
        case 13: "OFFLINE_RECORDING"
        case 14: "OFFLINE_HR"
        default: "type \(rawValue)"
        }
    }

    public var description: String { name }
    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
}

/// Control-point op codes (client to sensor; echoed in responses).
public struct PMDOpCode: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let getMeasurementSettings = Self(rawValue: 0x01)
    public static let startMeasurement = Self(rawValue: 0x02)
    public static let stopMeasurement = Self(rawValue: 0x03)
    public static let getSDKModeSettings = Self(rawValue: 0x04)
    public static let getMeasurementStatus = Self(rawValue: 0x05)
    public static let getSDKModeStatus = Self(rawValue: 0x06)
    public static let getOfflineRecordingTriggerStatus = Self(rawValue: 0x07)
    public static let setOfflineRecordingTriggerMode = Self(rawValue: 0x08)
    public static let setOfflineRecordingTriggerSettings = Self(rawValue: 0x09)

    public var description: String {
        switch rawValue {
        case 0x01: "get measurement settings"
        case 0x02: "start measurement"
        case 0x03: "stop measurement"
        case 0x04: "get SDK mode settings"
        case 0x05: "get measurement status"
        case 0x06: "get SDK mode status"
        case 0x07: "get offline recording trigger status"
        case 0x08: "set offline recording trigger mode"
        case 0x09: "set offline recording trigger settings"
        default: "op code \(rawValue)"
        }
    }
}

/// The status ("error code") byte of a control-point response.
public struct PMDStatus: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let success = Self(rawValue: 0)
    public static let invalidOpCode = Self(rawValue: 1)
    public static let invalidMeasurementType = Self(rawValue: 2)
    public static let notSupported = Self(rawValue: 3)
    public static let invalidLength = Self(rawValue: 4)
    public static let invalidParameter = Self(rawValue: 5)
    public static let alreadyInState = Self(rawValue: 6)
    public static let invalidResolution = Self(rawValue: 7)
    public static let invalidSampleRate = Self(rawValue: 8)
    public static let invalidRange = Self(rawValue: 9)
    public static let invalidMTU = Self(rawValue: 10)
    public static let invalidNumberOfChannels = Self(rawValue: 11)
    public static let invalidState = Self(rawValue: 12)
    public static let deviceInCharger = Self(rawValue: 13)
    public static let diskFull = Self(rawValue: 14)

    public var isSuccess: Bool { rawValue == 0 }

    /// The name used in messages ("invalid state", "not supported", …).
    public var description: String {
        switch rawValue {
        case 0: "success"
        case 1: "invalid op code"
        case 2: "invalid measurement type"
        case 3: "not supported"
        case 4: "invalid length"
        case 5: "invalid parameter"
        case 6: "already in state"
        case 7: "invalid resolution"
        case 8: "invalid sample rate"
        case 9: "invalid range"
        case 10: "invalid MTU"
        case 11: "invalid number of channels"
        case 12: "invalid state"
        case 13: "device in charger"
        case 14: "disk full"
        default: "status \(rawValue)"
        }
    }
}
