import Foundation
import GatewayEngine

/// The resonance assessment of a summary (its `metrics.resonance_assessment` object) as a table, for the live view's
/// last screen, `breathe` and `sessions show`.
public enum ResonanceReport {
    public static func lines(_ assessment: JSONValue) -> [String] {
        guard case .array(let steps)? = assessment["steps"] else { return [] }
        let resonance = assessment["resonance_rate_bpm"]?.doubleValue
        let bestScored = assessment["best_scored_rate_bpm"]?.doubleValue
        let best = resonance ?? bestScored
        var lines: [String] = []
        let whose = assessment["device_id"]?.stringValue.map { " (\($0)'s beats)" } ?? ""
        if let resonance {
            lines.append("Resonance assessment\(whose): your resonance rate is \(rate(resonance)) breaths/min.")
        } else if let bestScored {
            let scored = assessment["scored_steps"]?.intValue ?? 0
            lines.append("Resonance assessment\(whose): incomplete, \(scored) of \(steps.count) steps scored (stopped "
                + "early, or beats lost in a step); the best of those is \(rate(bestScored)) breaths/min, but a rate "
                + "not measured may be yours. Run the assessment again to the end for your resonance rate.")
        } else {
            lines.append("Resonance assessment\(whose): no step had enough beats to judge (skin contact? a full run of every step?).")
        }
        lines.append("  rate /min   LF peak ms²   peak Hz   RSA bpm   breaths   coverage   score")
        for s in steps {
            let r = s["rate_bpm"]?.doubleValue ?? 0
            func col(_ v: Double?, _ decimals: Int, _ width: Int) -> String {
                pad(v.map { String(format: "%.\(decimals)f", $0) } ?? "-", width)
            }
            let mark = best == r ? (resonance != nil ? "  <- resonance" : "  <- best scored") : ""
            lines.append("  " + pad(rate(r), 12) + col(s["lf_peak_power_ms2"]?.doubleValue, 0, 14)
                + col(s["lf_peak_hz"]?.doubleValue, 3, 10) + col(s["rsa_amplitude_bpm"]?.doubleValue, 1, 10)
                + pad(String(s["rsa_breaths"]?.intValue ?? 0), 10)
                + pad(String(format: "%.0f %%", 100 * (s["coverage"]?.doubleValue ?? 0)), 11)
                + (s["score"]?.doubleValue.map { String(format: "%.2f", $0) } ?? "-") + mark)
        }
        lines.append("  Score: the mean of LF peak power over its largest and RSA over its largest, among the steps "
            + "(docs/hrv.md §13).")
        return lines
    }

    static func rate(_ r: Double) -> String { r == r.rounded() ? String(format: "%.0f", r) : String(format: "%.1f", r) }

    static func pad(_ s: String, _ width: Int) -> String {
        s.count >= width ? s + " " : s + String(repeating: " ", count: width - s.count)
    }
}
