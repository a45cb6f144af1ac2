import GatewayEngine

/// One Heart Rate Measurement (GATT characteristic 0x2A37) value, as a strap notifies it.
///
/// Layout (Heart Rate Service 1.0): a flags byte (bit 0 HR as uint16, bits 1-2 the sensor-contact field, bit 3
/// Energy Expended present, bit 4 RR intervals present, bits 5-7 reserved), the heart rate (uint8 or uint16 LE),
/// Energy Expended (uint16 LE, kJ) when flagged, then every remaining byte pair is one RR interval (uint16 LE,
/// 1/1024 s), oldest first. The RR count comes from the length, never from the flag alone.
public struct HeartRateMeasurement: Sendable, Equatable, Hashable {
    /// Beats per minute as the strap reports it (a smoothed value, not derived from this packet's RR).
    public var heartRate: UInt16
    /// Whether the value is (or will be encoded) in the uint16 format.
    public var isUInt16Format: Bool
    public var contact: SensorContact
    /// Cumulative energy expended in kJ (saturates at 0xFFFF until reset through 0x2A39).
    public var energyExpendedKJ: UInt16?
    /// RR intervals exactly as sent, in 1/1024 s, oldest first.
    public var rrIntervals1024: [UInt16]
    /// True when the RR-present flag was set (even if no RR bytes followed).
    public var rrFlag: Bool
    /// True when the payload ended with one stray byte after the last whole RR interval (dropped).
    public var droppedTrailingByte: Bool

    public init(
        heartRate: UInt16,
        contact: SensorContact = .notSupported,
        energyExpendedKJ: UInt16? = nil,
        rrIntervals1024: [UInt16] = [],
        isUInt16Format: Bool? = nil
    ) {
        self.heartRate = heartRate
        self.isUInt16Format = isUInt16Format ?? (heartRate > UInt16(UInt8.max))
        self.contact = contact
        self.energyExpendedKJ = energyExpendedKJ
        self.rrIntervals1024 = rrIntervals1024
        self.rrFlag = !rrIntervals1024.isEmpty
        self.droppedTrailingByte = false
    }

    /// RR intervals in milliseconds (raw × 1000 / 1024).
    public var rrIntervalsMs: [Double] { rrIntervals1024.map(Self.milliseconds(fromRaw1024:)) }

    /// Converts one RR interval in 1/1024 s to milliseconds.
    @inlinable
    public static func milliseconds(fromRaw1024 raw: UInt16) -> Double { Double(raw) * 1000 / 1024 }

    /// Converts milliseconds to the nearest 1/1024 s unit, clamped to the uint16 range.
    public static func raw1024(fromMilliseconds ms: Double) -> UInt16 {
        guard ms.isFinite, ms > 0 else { return 0 }
        let raw = (ms * 1.024).rounded()
        return raw >= Double(UInt16.max) ? .max : UInt16(raw)
    }
}

/// Why a Heart Rate Measurement payload could not be decoded.
public enum HeartRateMeasurementError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No bytes at all.
    case empty
    /// The flags announce a heart-rate field longer than what follows.
    case truncatedHeartRate(payloadLength: Int, needed: Int)
    /// The flags announce Energy Expended but the payload ends inside it.
    case truncatedEnergyExpended(payloadLength: Int, needed: Int)

    public var description: String {
        switch self {
        case .empty:
            "empty Heart Rate Measurement payload (need at least 2 bytes: flags and heart rate)"
        case let .truncatedHeartRate(length, needed):
            "Heart Rate Measurement of \(length) byte(s) ends inside the heart-rate field (needs \(needed))"
        case let .truncatedEnergyExpended(length, needed):
            "Heart Rate Measurement of \(length) byte(s) ends inside the Energy Expended field (needs \(needed))"
        }
    }
}

extension HeartRateMeasurement {
    /// Flag bits of byte 0.
    public enum Flag {
        public static let uint16Format: UInt8 = 0x01
        public static let contactDetected: UInt8 = 0x02
        public static let contactSupported: UInt8 = 0x04
        public static let energyExpended: UInt8 = 0x08
        public static let rrIntervals: UInt8 = 0x10
    }

    /// Decodes a notification payload. Reserved flag bits are ignored; a stray odd byte after the RR list is
    /// dropped (`droppedTrailingByte`); a payload that ends inside the heart-rate or energy field throws.
    public init<Bytes: Collection>(decoding bytes: Bytes) throws(HeartRateMeasurementError) where Bytes.Element == UInt8 {
        var it = bytes.makeIterator()
        guard let flags = it.next() else { throw .empty }
        let length = bytes.count
        let wide = flags & Flag.uint16Format != 0
        let hrEnd = wide ? 3 : 2
        guard length >= hrEnd else { throw .truncatedHeartRate(payloadLength: length, needed: hrEnd) }
        let lo = it.next()!
        let hr = wide ? UInt16(lo) | UInt16(it.next()!) << 8 : UInt16(lo)

        var energy: UInt16?
        var offset = hrEnd
        if flags & Flag.energyExpended != 0 {
            guard length >= offset + 2 else { throw .truncatedEnergyExpended(payloadLength: length, needed: offset + 2) }
            energy = UInt16(it.next()!) | UInt16(it.next()!) << 8
            offset += 2
        }

        let rrFlag = flags & Flag.rrIntervals != 0
        var rr: [UInt16] = []
        var stray = false
        if rrFlag {
            let remaining = length - offset
            rr.reserveCapacity(remaining / 2)
            for _ in 0..<(remaining / 2) { rr.append(UInt16(it.next()!) | UInt16(it.next()!) << 8) }
            stray = remaining % 2 == 1
        }

        self.heartRate = hr
        self.isUInt16Format = wide
        self.contact = Self.contact(fromFlags: flags)
        self.energyExpendedKJ = energy
        self.rrIntervals1024 = rr
        self.rrFlag = rrFlag
        self.droppedTrailingByte = stray
    }

    /// Reads bits 1-2 as one 2-bit field: 0 or 1 = feature not supported, 2 = no contact, 3 = contact.
    public static func contact(fromFlags flags: UInt8) -> SensorContact {
        switch (flags >> 1) & 0b11 {
        case 3: .contact
        case 2: .noContact
        default: .notSupported
        }
    }

    /// The wire bytes: uint16 format when `isUInt16Format` (or the value needs it), contact bits, Energy Expended
    /// when present, RR-present flag and values when `rrIntervals1024` is not empty.
    public func encoded() -> [UInt8] {
        let wide = isUInt16Format || heartRate > UInt16(UInt8.max)
        var flags: UInt8 = wide ? Flag.uint16Format : 0
        switch contact {
        case .notSupported: break
        case .noContact: flags |= Flag.contactSupported
        case .contact: flags |= Flag.contactSupported | Flag.contactDetected
        }
        if energyExpendedKJ != nil { flags |= Flag.energyExpended }
        if !rrIntervals1024.isEmpty || rrFlag { flags |= Flag.rrIntervals }
        var out: [UInt8] = [flags]
        out.reserveCapacity(5 + 2 * rrIntervals1024.count)
        out.append(UInt8(truncatingIfNeeded: heartRate))
        if wide { out.append(UInt8(truncatingIfNeeded: heartRate >> 8)) }
        if let e = energyExpendedKJ {
            out.append(UInt8(truncatingIfNeeded: e))
            out.append(UInt8(truncatingIfNeeded: e >> 8))
        }
        for rr in rrIntervals1024 {
            out.append(UInt8(truncatingIfNeeded: rr))
            out.append(UInt8(truncatingIfNeeded: rr >> 8))
        }
        return out
    }

    /// How many RR intervals fit in one notification of `payloadLimit` bytes (20 with the default ATT MTU of 23):
    /// 9 with uint8 HR and no energy, 8 with either, 7 with both.
    public static func maxRRCount(uint16Format: Bool, energyExpended: Bool, payloadLimit: Int = 20) -> Int {
        max(0, (payloadLimit - 1 - (uint16Format ? 2 : 1) - (energyExpended ? 2 : 0)) / 2)
    }
}
