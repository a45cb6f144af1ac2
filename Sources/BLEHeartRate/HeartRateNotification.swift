import GatewayEngine

/// One decoded 0x2A37 notification as the gateway received it: the measurement, when it arrived, and its place
/// in the strap's stream.
///
/// Straps send no timestamps and RR values may arrive seconds after their beats, so the only anchor is the arrival:
/// the last RR interval is taken to end at arrival and earlier beats are rebuilt backwards from it.
public struct HeartRateNotification: Sendable, Equatable {
    public var measurement: HeartRateMeasurement
    /// Strap identity (the Bluetooth address, `AA:BB:CC:DD:EE:FF`).
    public var deviceId: String
    /// Monotonic arrival time in nanoseconds (CLOCK_MONOTONIC or an injected clock); never jumps with NTP.
    public var arrivalMonotonicNs: UInt64
    /// Wall-clock arrival time, Unix epoch milliseconds (what samples are stamped with).
    public var arrivalWallMs: Int64
    /// Per-strap counter, from 1, incremented on every notification of a connection and across reconnects.
    public var sequence: UInt64
    /// True when notifications may have been lost just before this one (first one after a reconnect).
    public var gapBefore: Bool

    public init(
        measurement: HeartRateMeasurement,
        deviceId: String,
        arrivalMonotonicNs: UInt64,
        arrivalWallMs: Int64,
        sequence: UInt64,
        gapBefore: Bool = false
    ) {
        self.measurement = measurement
        self.deviceId = deviceId
        self.arrivalMonotonicNs = arrivalMonotonicNs
        self.arrivalWallMs = arrivalWallMs
        self.sequence = sequence
        self.gapBefore = gapBefore
    }

    /// Monotonic end time (ns) of each RR interval, oldest first: the last ends at arrival, each earlier one
    /// ends where the following interval began. Empty without RR. Clamped at 0 rather than wrapping.
    public var beatMonotonicNs: [UInt64] {
        Self.beatTimes(endingAt: arrivalMonotonicNs, rr1024: measurement.rrIntervals1024)
    }

    /// Wall-clock end time (epoch ms, fractional) of each RR interval, oldest first, rebuilt the same way.
    public var beatWallMs: [Double] {
        let rr = measurement.rrIntervalsMs
        var times = [Double](repeating: 0, count: rr.count)
        var t = Double(arrivalWallMs)
        for i in rr.indices.reversed() {
            times[i] = t
            t -= rr[i]
        }
        return times
    }

    /// Back-cumulates RR (1/1024 s) from `end` (ns). Integer arithmetic, exact to the nanosecond.
    public static func beatTimes(endingAt end: UInt64, rr1024: [UInt16]) -> [UInt64] {
        var times = [UInt64](repeating: 0, count: rr1024.count)
        var t = end
        for i in rr1024.indices.reversed() {
            times[i] = t
            let ns = UInt64(rr1024[i]) * 1_000_000_000 / 1024
            t = t >= ns ? t - ns : 0
        }
        return times
    }

    /// The engine sample: source `ble_hrm`, device id, bpm as reported, every RR (ms and raw), contact, energy,
    /// sequence and gap flag. RR fields are nil when the packet carried none.
    public var sample: BiosignalSample {
        let m = measurement
        return BiosignalSample(
            timestampMs: arrivalWallMs,
            bpm: Double(m.heartRate),
            rrIntervalsMs: m.rrIntervals1024.isEmpty ? nil : m.rrIntervalsMs,
            deviceId: deviceId,
            source: BLEHeartRate.source,
            contact: m.contact,
            energyKJ: m.energyExpendedKJ.map(Int.init),
            rrRaw1024: m.rrIntervals1024.isEmpty ? nil : m.rrIntervals1024,
            sequence: sequence,
            gapBefore: gapBefore
        )
    }
}

/// Names shared by the strap code.
public enum BLEHeartRate {
    /// The `source` of every strap sample (the Synheart SDK's name).
    public static let source = "ble_hrm"
}

/// Numbers a strap's notifications and remembers when a gap must be flagged. Not thread-safe: keep one per strap
/// inside that strap's state.
public struct NotificationSequencer: Sendable, Equatable {
    public private(set) var lastSequence: UInt64 = 0
    private var gapPending = false

    public init() {}

    /// Call when the link dropped (or on a reconnect): the next notification carries `gapBefore = true`.
    public mutating func markGap() { if lastSequence > 0 { gapPending = true } }

    /// Wraps a decoded measurement with the next sequence number.
    public mutating func next(
        _ measurement: HeartRateMeasurement, deviceId: String, monotonicNs: UInt64, wallMs: Int64
    ) -> HeartRateNotification {
        lastSequence += 1
        defer { gapPending = false }
        return HeartRateNotification(
            measurement: measurement, deviceId: deviceId, arrivalMonotonicNs: monotonicNs, arrivalWallMs: wallMs,
            sequence: lastSequence, gapBefore: gapPending)
    }
}
