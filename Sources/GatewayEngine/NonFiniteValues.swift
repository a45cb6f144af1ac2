import Logging
import Synchronization

/// NaN and infinity never become numbers on the wire or on disk. Where one turns up (a provider's sample, a metric
/// computed from nothing) it is dropped, counted here, and the first one of the process is logged.
public enum NonFiniteValues {
    private static let dropped = Atomic<Int>(0)
    private static let logger = Logger(label: "hr-gateway.engine")

    /// How many non-finite values this process has dropped so far.
    public static var droppedCount: Int { dropped.load(ordering: .relaxed) }

    /// Counts `count` dropped values found in `place` (a field name); logs only the first drop of the process.
    public static func drop(_ place: String, count: Int = 1) {
        guard count > 0 else { return }
        let before = dropped.add(count, ordering: .relaxed).oldValue
        if before == 0 {
            logger.warning("dropped a non-finite value (NaN or infinity) in \(place); later ones are counted, not logged")
        }
    }
}

extension BiosignalSample {
    /// This sample without its non-finite values (each counted), or nil when its `bpm` is not finite: a reading
    /// without a rate is dropped whole rather than recorded as 0.
    public func finiteOnly() -> BiosignalSample? {
        guard bpm.isFinite else {
            NonFiniteValues.drop("\(source) bpm")
            return nil
        }
        var s = self
        if let rr = rrIntervalsMs {
            let kept = rr.filter(\.isFinite)
            if kept.count != rr.count {
                NonFiniteValues.drop("\(source) rr_intervals_ms", count: rr.count - kept.count)
                s.rrIntervalsMs = kept
            }
        }
        if let c = confidence, !c.isFinite {
            NonFiniteValues.drop("\(source) confidence")
            s.confidence = nil
        }
        if let b = breathingRateBpm, !b.isFinite {
            NonFiniteValues.drop("\(source) breathing_rate_bpm")
            s.breathingRateBpm = nil
        }
        return s
    }
}
