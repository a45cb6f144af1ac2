/// Per-sample sensor times for one frame.
///
/// A frame's timestamp is that of its LAST sample. The earlier samples are spaced in one of two ways:
///
/// - **previous frame** (as Polar's SDK does): when the previous frame of the same stream is known and lies before
///   this one, the `n` samples share the interval (previous, last]: sample `i` (0-based) is at
///   `previous + round((last − previous) × (i + 1) / n)`. This follows the sensor's real rate. When a nominal rate is
///   also known, the interval is used only if its spacing is within 0.5…1.5 × the nominal period: a longer one
///   means frames were lost in between (a gap), which must not stretch this frame's samples.
/// - **sample rate**: otherwise, sample `i` is at `last − round((n − 1 − i) × 10⁹ / rate)`.
///
/// Rounding is to nearest, ties to even, on exact integers (the SDK rounds a `Double` the same way, so the published
/// vectors give the same nanoseconds). The last sample always carries the frame timestamp exactly.
public struct PMDSampleTimes: Sendable, Equatable {
    public enum Basis: Sendable, Equatable, Hashable {
        case previousFrame
        case sampleRate
    }

    public var timestampsNs: [UInt64]
    public var basis: Basis

    public init(lastSampleNs last: UInt64, count n: Int, previousFrameNs: UInt64?, sampleRateHz rate: UInt32)
        throws(PMDError)
    {
        guard n > 0 else { throw PMDError(.malformedSamples, "a frame without samples has no sample times") }
        let count = UInt64(n)
        if let prev = previousFrameNs, prev > 0, prev < last {
            let span = last - prev
            var usable = true
            if rate > 0 {
                // span / n within [0.5, 1.5] × 1e9 / rate  ⇔  0.5e9·n ≤ span·rate ≤ 1.5e9·n  (in 128-bit integers)
                let lhs = span.multipliedFullWidth(by: UInt64(rate))
                let lo = (500_000_000 as UInt64).multipliedFullWidth(by: count)
                let hi = (1_500_000_000 as UInt64).multipliedFullWidth(by: count)
                usable = !(lhs < lo) && !(hi < lhs)
            }
            if usable {
                var out: [UInt64] = []
                out.reserveCapacity(n)
                for i in 1..<count { out.append(prev + roundedQuotient(span, times: i, over: count)) }
                out.append(last)
                self.timestampsNs = out
                self.basis = .previousFrame
                return
            }
        }
        guard rate > 0 else {
            throw PMDError(.timestamp, "no sample rate and no earlier frame: sample times cannot be derived")
        }
        let first = roundedQuotient(1_000_000_000, times: count - 1, over: UInt64(rate))
        guard first <= last else {
            throw PMDError(
                .timestamp,
                "frame time \(last) ns is too early for \(n) samples at \(rate) Hz (the first would be before zero)")
        }
        var out: [UInt64] = []
        out.reserveCapacity(n)
        for i in 0..<count {
            out.append(last - roundedQuotient(1_000_000_000, times: count - 1 - i, over: UInt64(rate)))
        }
        self.timestampsNs = out
        self.basis = .sampleRate
    }

    /// Convenience for a frame header and a decode context.
    public init(header: PMDFrameHeader, count: Int, context: PMDDecodeContext) throws(PMDError) {
        try self.init(
            lastSampleNs: header.timestampNs, count: count, previousFrameNs: context.previousTimestampNs,
            sampleRateHz: context.sampleRateHz)
    }
}

/// round(a × m / d), ties to even, exact; requires m ≤ d or a × m / d < 2⁶⁴ (true for every call above).
func roundedQuotient(_ a: UInt64, times m: UInt64, over d: UInt64) -> UInt64 {
    let p = a.multipliedFullWidth(by: m)
    // The quotient fits: callers pass m ≤ d (previous-frame spacing) or a small product (1e9 × samples).
    guard p.high < d else { return .max }
    let (q, r) = d.dividingFullWidth(p)
    // Compare 2r with d without overflow.
    let twiceR = r.multipliedFullWidth(by: 2)
    let cmp: Int = twiceR.high > 0 ? 1 : (twiceR.low > d ? 1 : (twiceR.low == d ? 0 : -1))
    if cmp > 0 || (cmp == 0 && q & 1 == 1) { return q &+ 1 }
    return q
}
