/// The fixed 10-byte header of a PMD data notification.
///
/// ```
/// byte 0      measurement type (low 6 bits; the top 2 bits are ignored, as the SDK does)
/// bytes 1-8   sensor timestamp of the frame's LAST sample, ns, uint64 little-endian
/// byte 9      frame type: bit 7 = delta-compressed, bits 0-6 = frame type number
/// bytes 10-   samples (layout by measurement type and frame type)
/// ```
public struct PMDFrameHeader: Sendable, Equatable, Hashable {
    public static let size = 10

    public var measurementType: PMDMeasurementType
    public var timestampNs: UInt64
    /// Frame type number (bits 0-6 of byte 9).
    public var frameType: UInt8
    /// Bit 7 of byte 9.
    public var isCompressed: Bool

    public init(measurementType: PMDMeasurementType, timestampNs: UInt64, frameType: UInt8, isCompressed: Bool) {
        self.measurementType = measurementType
        self.timestampNs = timestampNs
        self.frameType = frameType & 0x7F
        self.isCompressed = isCompressed
    }

    /// Byte 9 as sent.
    public var frameTypeByte: UInt8 { frameType | (isCompressed ? 0x80 : 0) }

    public init(decoding b: [UInt8]) throws(PMDError) {
        guard b.count >= Self.size else {
            throw PMDError(.truncated, "PMD data frame of \(b.count) byte(s) (the header alone is 10)")
        }
        var ts: UInt64 = 0
        for k in 0..<8 { ts |= UInt64(b[1 + k]) << (8 * UInt64(k)) }
        self.init(
            measurementType: PMDMeasurementType(rawValue: b[0] & 0x3F), timestampNs: ts, frameType: b[9] & 0x7F,
            isCompressed: b[9] & 0x80 != 0)
    }

    public func encoded() -> [UInt8] {
        var out: [UInt8] = [measurementType.rawValue]
        for k in 0..<8 { out.append(UInt8(truncatingIfNeeded: timestampNs >> (8 * UInt64(k)))) }
        out.append(frameTypeByte)
        return out
    }
}

/// One ECG sample: µV at the sensor's time.
public struct PMDECGSample: Sendable, Equatable, Hashable {
    public var timestampNs: UInt64
    public var microvolts: Int32
    public init(timestampNs: UInt64, microvolts: Int32) {
        self.timestampNs = timestampNs
        self.microvolts = microvolts
    }
}

/// One accelerometer sample: milli-g as integers (what the SDK reports) and g as `Double`, computed from the raw
/// counts and the frame's scale (so g keeps the precision mg truncates).
public struct PMDAccelerometerSample: Sendable, Equatable, Hashable {
    public var timestampNs: UInt64
    /// x, y, z in mg (truncated toward zero, as the SDK does).
    public var mg: SIMD3<Int32>
    /// x, y, z in g.
    public var g: SIMD3<Double>
    public init(timestampNs: UInt64, mg: SIMD3<Int32>, g: SIMD3<Double>) {
        self.timestampNs = timestampNs
        self.mg = mg
        self.g = g
    }
}

/// What the decoder needs to know beyond the frame bytes, per measurement type: the selected sample rate (for
/// sample times when there is no previous frame), the previous frame's timestamp, and the accelerometer's scale.
public struct PMDDecodeContext: Sendable, Equatable {
    /// Selected sample rate in Hz (0 = unknown).
    public var sampleRateHz: UInt32
    /// Timestamp of the previous frame of the same measurement and frame type, if any.
    public var previousTimestampNs: UInt64?
    /// Scale factor from the start response (`PMDSettings.factor`), if the sensor sent one.
    public var factor: Float?
    /// Selected range (g) and resolution (bits): the scale of compressed type-0 accelerometer frames when the
    /// sensor sent no factor (full scale / 2^(bits-1) g per count).
    public var rangeG: UInt16?
    public var resolutionBits: UInt16?

    public init(
        sampleRateHz: UInt32 = 0, previousTimestampNs: UInt64? = nil, factor: Float? = nil, rangeG: UInt16? = nil,
        resolutionBits: UInt16? = nil
    ) {
        self.sampleRateHz = sampleRateHz
        self.previousTimestampNs = previousTimestampNs
        self.factor = factor
        self.rangeG = rangeG
        self.resolutionBits = resolutionBits
    }
}

/// A decoded data frame.
public struct PMDDataFrame: Sendable, Equatable {
    public enum Samples: Sendable, Equatable {
        case ecg([PMDECGSample])
        case accelerometer([PMDAccelerometerSample])

        public var count: Int {
            switch self {
            case let .ecg(s): s.count
            case let .accelerometer(s): s.count
            }
        }
    }

    public var header: PMDFrameHeader
    public var samples: Samples
    /// How the per-sample times were spaced.
    public var spacing: PMDSampleTimes.Basis

    public init(header: PMDFrameHeader, samples: Samples, spacing: PMDSampleTimes.Basis) {
        self.header = header
        self.samples = samples
        self.spacing = spacing
    }

    /// Decodes one data notification. Supported: ECG raw type 0; ACC raw types 0, 1, 2 and compressed types 0, 1.
    /// Anything else is an error value (`unsupportedMeasurementType` / `unsupportedFrameType`), never a trap.
    public init<Bytes: Collection>(decoding bytes: Bytes, context: PMDDecodeContext = .init()) throws(PMDError)
    where Bytes.Element == UInt8 {
        let b = Array(bytes)
        let header = try PMDFrameHeader(decoding: b)
        let content = b[PMDFrameHeader.size...]
        switch header.measurementType {
        case .ecg:
            guard !header.isCompressed, header.frameType == 0 else {
                throw PMDError(.unsupportedFrameType, "ECG frame type \(hex(header.frameTypeByte)) is not decoded")
            }
            let values = try Self.rawChannels(content, channels: 1, bytesPerValue: 3, what: "ECG")
            let times = try PMDSampleTimes(header: header, count: values.count, context: context)
            self.init(
                header: header,
                samples: .ecg(zip(times.timestampsNs, values).map { PMDECGSample(timestampNs: $0, microvolts: $1) }),
                spacing: times.basis)
        case .acc:
            let counts: [Int32]
            let scale: AccScale
            switch (header.isCompressed, header.frameType) {
            case (false, 0), (false, 1), (false, 2):
                counts = try Self.rawChannels(
                    content, channels: 3, bytesPerValue: Int(header.frameType) + 1, what: "accelerometer")
                scale = .milliG
            case (true, 0):
                counts = try PMDDeltaCodec.decode(content, channels: 3, referenceBits: 16)
                if let f = context.factor {
                    scale = .gPerCount(f)
                } else if let r = context.rangeG, let bits = context.resolutionBits, (2...32).contains(bits) {
                    scale = .gPerCount(Float(Double(r) / Double(UInt64(1) << UInt64(bits - 1))))
                } else {
                    throw PMDError(
                        .missingScale,
                        "compressed type-0 accelerometer frame needs the factor (start response) or range and resolution")
                }
            case (true, 1):
                counts = try PMDDeltaCodec.decode(content, channels: 3, referenceBits: 16)
                if let f = context.factor, f != 1 { scale = .scaledMilliG(f) } else { scale = .milliG }
            default:
                throw PMDError(
                    .unsupportedFrameType, "accelerometer frame type \(hex(header.frameTypeByte)) is not decoded")
            }
            let n = counts.count / 3
            let times = try PMDSampleTimes(header: header, count: n, context: context)
            var samples: [PMDAccelerometerSample] = []
            samples.reserveCapacity(n)
            for i in 0..<n {
                let raw = SIMD3(counts[3 * i], counts[3 * i + 1], counts[3 * i + 2])
                samples.append(scale.sample(raw, at: times.timestampsNs[i]))
            }
            self.init(header: header, samples: .accelerometer(samples), spacing: times.basis)
        default:
            throw PMDError(
                .unsupportedMeasurementType, "PMD data frames of type \(header.measurementType) are not decoded")
        }
    }

    /// Little-endian signed values of `bytesPerValue` bytes, `channels` per sample; the content must hold a whole,
    /// non-zero number of samples.
    static func rawChannels(_ content: ArraySlice<UInt8>, channels: Int, bytesPerValue: Int, what: String)
        throws(PMDError) -> [Int32]
    {
        let step = channels * bytesPerValue
        guard !content.isEmpty, content.count % step == 0 else {
            throw PMDError(
                .malformedSamples,
                "\(what) frame content of \(content.count) byte(s) is not a whole, non-zero number of \(step)-byte samples")
        }
        var out: [Int32] = []
        out.reserveCapacity(content.count / bytesPerValue)
        var i = content.startIndex
        while i < content.endIndex {
            out.append(signedLE(content, at: i, bytes: bytesPerValue))
            i += bytesPerValue
        }
        return out
    }
}

/// How raw accelerometer counts become mg and g.
enum AccScale {
    /// Counts are mg (raw frames; compressed type 1 with no factor or factor 1).
    case milliG
    /// mg = trunc(Float(count) × factor) (compressed type 1 with a factor ≠ 1).
    case scaledMilliG(Float)
    /// g = count × factor; mg = trunc(Float(count) × (factor × 1000)) (compressed type 0).
    case gPerCount(Float)

    func sample(_ raw: SIMD3<Int32>, at t: UInt64) -> PMDAccelerometerSample {
        switch self {
        case .milliG:
            return PMDAccelerometerSample(timestampNs: t, mg: raw, g: SIMD3<Double>(raw) / 1000)
        case let .scaledMilliG(f):
            let mg = SIMD3(saturatingInt32(Float(raw.x) * f), saturatingInt32(Float(raw.y) * f), saturatingInt32(Float(raw.z) * f))
            return PMDAccelerometerSample(timestampNs: t, mg: mg, g: SIMD3<Double>(raw) * Double(f) / 1000)
        case let .gPerCount(f):
            let k = f * 1000
            let mg = SIMD3(saturatingInt32(Float(raw.x) * k), saturatingInt32(Float(raw.y) * k), saturatingInt32(Float(raw.z) * k))
            return PMDAccelerometerSample(timestampNs: t, mg: mg, g: SIMD3<Double>(raw) * Double(f))
        }
    }
}

/// Float to Int32 toward zero, saturating, NaN → 0 (Kotlin's `toInt()`), so a hostile factor cannot trap.
func saturatingInt32(_ v: Float) -> Int32 {
    if v.isNaN { return 0 }
    if v >= 2_147_483_648 { return .max }
    if v <= -2_147_483_648 { return .min }
    return Int32(v.rounded(.towardZero))
}

/// A little-endian two's-complement value of 1...4 bytes, sign-extended to 32 bits.
func signedLE(_ b: ArraySlice<UInt8>, at i: Int, bytes: Int) -> Int32 {
    var v: UInt32 = 0
    for k in 0..<bytes { v |= UInt32(b[i + k]) << (8 * UInt32(k)) }
    let shift = UInt32(32 - 8 * bytes)
    return Int32(bitPattern: v << shift) >> Int32(shift)
}
