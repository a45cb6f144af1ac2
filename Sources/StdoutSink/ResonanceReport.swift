import Foundation
import GatewayEngine

/// The resonance assessment of a summary (its `metrics.resonance_assessment` object) as a table, for the live view's
/// last screen, `breathe` and `sessions show`.
public enum ResonanceReport {
    public static func lines(_ assessment: JSONValue) -> [String] {
        guard case .array(let steps)? = assessment["steps"] else { return [] }
        let best = assessment["resonance_rate_bpm"]?.doubleValue
        var lines: [String] = []
        let whose = assessment["device_id"]?.stringValue.map { " (\($0)'s beats)" } ?? ""
        if let best {
            lines.append("Resonance assessment\(whose): your resonance rate is \(rate(best)) breaths/min.")
        } else {
            lines.append("Resonance assessment\(whose): no step had enough beats to judge (skin contact? a full run of every step?).")
        }
        lines.append("  rate /min   LF peak ms²   peak Hz   RSA bpm   breaths   coverage   score")
        for s in steps {
            let r = s["rate_bpm"]?.doubleValue ?? 0
            func col(_ v: Double?, _ decimals: Int, _ width: Int) -> String {
                pad(v.map { String(format: "%.\(decimals)f", $0) } ?? "-", width)
            }
            let mark = best == r ? "  <- resonance" : ""
            lines.append("  " + pad(rate(r), 12) + col(s["lf_peak_power_ms2"]?.doubleValue, 0, 14)
                + col(s["lf_peak_hz"]?.doubleValue, 3, 10) + col(s["rsa_amplitude_bpm"]?.doubleValue, 1, 10)
                + pad(String(s["rsa_breaths"]?.intValue ?? 0), 10)
                + pad(String(format: "%.0f %%", 100 * (s["coverage"]?.doubleValue ?? 0)), 11)
                + (s["score"]?.doubleValue.map { String(format: "%.2f", $0) } ?? "-") + mark)
        }
        lines.append("  Score: the mean of LF peak power and RSA, each over the best step's (docs/hrv.md §13).")
        return lines
    }

    static func rate(_ r: Double) -> String { r == r.rounded() ? String(format: "%.0f", r) : String(format: "%.1f", r) }

    static func pad(_ s: String, _ width: Int) -> String {
        s.count >= width ? s + " " : s + String(repeating: " ", count: width - s.count)
    }
}
