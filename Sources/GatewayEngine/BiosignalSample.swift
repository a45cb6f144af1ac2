/// Whether a strap reports skin contact (Heart Rate Measurement flags bits 1-2).
public enum SensorContact: String, Sendable, Equatable, CaseIterable {
    case notSupported = "not_supported"
    case noContact = "no_contact"
    case contact = "contact"
}

/// One reading from a provider. The first five fields are the Synheart SDK's; the rest are optional
/// additions for straps and cameras, omitted from the wire when absent.
public struct BiosignalSample: Sendable, Equatable {
    /// Unix epoch milliseconds.
    public var timestampMs: Int64
    public var bpm: Double
    /// Beat-to-beat intervals in ms, oldest first, ending at (or just before) `timestampMs`.
    public var rrIntervalsMs: [Double]?
    public var deviceId: String?
    /// `ble_hrm`, `camera_rppg`, `mock`, `simulated`, … (the SDK's canonical names where one applies).
    public var source: String

    /// Sensor contact, when the strap reports it.
    public var contact: SensorContact?
    /// Cumulative energy expended in kJ, when the strap reports it.
    public var energyKJ: Int?
    /// RR intervals as sent by the strap, in 1/1024 s.
    public var rrRaw1024: [UInt16]?
    /// Estimator confidence in 0...1 (camera).
    public var confidence: Double?
    /// Breathing rate estimate in breaths per minute (camera).
    public var breathingRateBpm: Double?
    /// Per-device notification counter, to spot loss and duplicates.
    public var sequence: UInt64?
    /// True when beats may be missing between the previous sample of this device and this one (link loss).
    public var gapBefore: Bool
    /// A chunk of raw ECG (Polar PMD): every sample in µV, oldest first, at `ecgRateHz`; `timestampMs` is the
    /// first sample's time on the host clock (docs/pmd.md). Such a sample carries no heart rate (`bpm` 0).
    public var ecgUv: [Int32]?
    public var ecgRateHz: Double?

    /// A chunk of accelerometer samples (Polar PMD), in g, oldest first, at `accRateHz`, the first at `timestampMs`.
    /// On the wire also `accelerometer: {x, y, z}`, the newest (the Synheart sample key).
    public var accG: [SIMD3<Double>]?
    public var accRateHz: Double?

    /// A chunk of raw waveform without a heart rate: kept out of the metrics window (docs/engine.md).
    public var isWaveformOnly: Bool { (ecgUv != nil || accG != nil) && bpm <= 0 && (rrIntervalsMs ?? []).isEmpty }

    public init(
        timestampMs: Int64,
        bpm: Double,
        rrIntervalsMs: [Double]? = nil,
        deviceId: String? = nil,
        source: String,
        contact: SensorContact? = nil,
        energyKJ: Int? = nil,
        rrRaw1024: [UInt16]? = nil,
        confidence: Double? = nil,
        breathingRateBpm: Double? = nil,
        sequence: UInt64? = nil,
        gapBefore: Bool = false,
        ecgUv: [Int32]? = nil,
        ecgRateHz: Double? = nil,
        accG: [SIMD3<Double>]? = nil,
        accRateHz: Double? = nil
    ) {
        self.timestampMs = timestampMs
        self.bpm = bpm
        self.rrIntervalsMs = rrIntervalsMs
        self.deviceId = deviceId
        self.source = source
        self.contact = contact
        self.energyKJ = energyKJ
        self.rrRaw1024 = rrRaw1024
        self.confidence = confidence
        self.breathingRateBpm = breathingRateBpm
        self.sequence = sequence
        self.gapBefore = gapBefore
        self.ecgUv = ecgUv
        self.ecgRateHz = ecgRateHz
        self.accG = accG
        self.accRateHz = accRateHz
    }
}

extension BiosignalSample {
    /// The wire dictionary: `timestamp_ms`, `bpm`, `source`, and each optional key only when present.
    public var jsonValue: JSONValue {
        var o: [String: JSONValue] = [
            "timestamp_ms": .int(timestampMs),
            "bpm": .double(bpm),
            "source": .string(source),
        ]
        if let rr = rrIntervalsMs { o["rr_intervals_ms"] = .array(rr.filter(\.isFinite).map(JSONValue.double)) }
        if let id = deviceId { o["device_id"] = .string(id) }
        if let c = contact { o["contact"] = .string(c.rawValue) }
        if let e = energyKJ { o["energy_kj"] = .int(Int64(e)) }
        if let raw = rrRaw1024 { o["rr_1024"] = .array(raw.map { .int(Int64($0)) }) }
        if let c = confidence, c.isFinite { o["confidence"] = .double(c) }
        if let b = breathingRateBpm, b.isFinite { o["breathing_rate_bpm"] = .double(b) }
        if let s = sequence { o["notification_seq"] = .int(Int64(truncatingIfNeeded: s)) }
        if gapBefore { o["gap_before"] = .bool(true) }
        if let ecg = ecgUv { o["ecg_uv"] = .array(ecg.map { .int(Int64($0)) }) }
        if let r = ecgRateHz, r.isFinite { o["ecg_rate_hz"] = .double(r) }
        if let acc = accG?.filter({ $0.x.isFinite && $0.y.isFinite && $0.z.isFinite }) {
            o["acc_g"] = .array(acc.map { .array([.double($0.x), .double($0.y), .double($0.z)]) })
            if let last = acc.last {
                o["accelerometer"] = .object(["x": .double(last.x), "y": .double(last.y), "z": .double(last.z)])
            }
        }
        if let r = accRateHz, r.isFinite { o["acc_rate_hz"] = .double(r) }
        return .object(o)
    }

    /// The timestamps a sample read from a file may carry: epoch milliseconds from 1970 to the end of year 9999. Far
    /// from Int64's limits, so that shifting and windowing them cannot overflow.
    public static let timestampRange: ClosedRange<Int64> = 0...253_402_300_799_999

    /// Reads a sample dictionary (as written by `jsonValue`, a recording, or a relay peer).
    /// Also accepts the Dart/watch shape with a scalar `rr_interval_ms`.
    public init(json: JSONValue) throws(SampleDecodingError) {
        guard case .object = json else { throw SampleDecodingError("a sample must be a JSON object") }
        guard let ts = json["timestamp_ms"]?.intValue else { throw SampleDecodingError("missing or non-integer timestamp_ms") }
        guard BiosignalSample.timestampRange.contains(ts) else {
            throw SampleDecodingError("timestamp_ms \(ts) is not epoch milliseconds between 1970 and 9999")
        }
        guard let bpm = json["bpm"]?.doubleValue, bpm.isFinite else { throw SampleDecodingError("missing or non-numeric bpm") }
        let source = json["source"]?.stringValue ?? "unknown"
        var rr: [Double]?
        if let list = json["rr_intervals_ms"] {
            guard let items = list.arrayValue else { throw SampleDecodingError("rr_intervals_ms must be an array of numbers") }
            var values: [Double] = []
            for item in items {
                guard let v = item.doubleValue, v.isFinite else {
                    throw SampleDecodingError("rr_intervals_ms must be an array of numbers")
                }
                values.append(v)
            }
            rr = values
        } else if let single = json["rr_interval_ms"]?.doubleValue {
            rr = [single]
        }
        var raw: [UInt16]?
        if let list = json["rr_1024"]?.arrayValue {
            raw = list.compactMap { $0.intValue }.filter { (0...Int64(UInt16.max)).contains($0) }.map { UInt16($0) }
        }
        var ecg: [Int32]?
        if let list = json["ecg_uv"] {
            guard let items = list.arrayValue else { throw SampleDecodingError("ecg_uv must be an array of integers") }
            var values: [Int32] = []
            values.reserveCapacity(items.count)
            for item in items {
                guard let v = item.intValue, let i = Int32(exactly: v) else {
                    throw SampleDecodingError("ecg_uv must be an array of 32-bit integers (µV)")
                }
                values.append(i)
            }
            ecg = values
        }
        var acc: [SIMD3<Double>]?
        if let list = json["acc_g"] {
            guard let items = list.arrayValue else { throw SampleDecodingError("acc_g must be an array of [x, y, z]") }
            var values: [SIMD3<Double>] = []
            for item in items {
                guard let v = item.arrayValue, v.count == 3, let x = v[0].doubleValue, let y = v[1].doubleValue,
                    let z = v[2].doubleValue, x.isFinite, y.isFinite, z.isFinite
                else { throw SampleDecodingError("acc_g must be an array of [x, y, z] numbers (g)") }
                values.append(SIMD3(x, y, z))
            }
            acc = values
        } else if let a = json["accelerometer"], let x = a["x"]?.doubleValue, let y = a["y"]?.doubleValue,
            let z = a["z"]?.doubleValue
        {
            acc = [SIMD3(x, y, z)]   // the Synheart/watch shape: one reading
        }
        self.init(
            timestampMs: ts,
            bpm: bpm,
            rrIntervalsMs: rr,
            deviceId: json["device_id"]?.stringValue,
            source: source,
            contact: json["contact"]?.stringValue.flatMap(SensorContact.init(rawValue:)),
            energyKJ: json["energy_kj"]?.intValue.map { Int($0) },
            rrRaw1024: raw,
            confidence: json["confidence"]?.doubleValue,
            breathingRateBpm: json["breathing_rate_bpm"]?.doubleValue,
            sequence: json["notification_seq"]?.intValue.flatMap { $0 >= 0 ? UInt64($0) : nil },
            gapBefore: json["gap_before"]?.boolValue ?? false,
            ecgUv: ecg,
            ecgRateHz: json["ecg_rate_hz"]?.doubleValue,
            accG: acc,
            accRateHz: json["acc_rate_hz"]?.doubleValue
        )
    }
}

/// A sample dictionary that could not be read.
public struct SampleDecodingError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
