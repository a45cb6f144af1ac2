import Foundation
import Testing

/// Reads the CSV files in `Data/` (see `Data/README.md` for provenance).
enum TestData {
    struct Missing: Error, CustomStringConvertible {
        let what: String
        var description: String { "test data: \(what)" }
    }

    static func text(_ name: String) throws -> String {
        guard let dir = Bundle.module.url(forResource: "Data", withExtension: nil) else { throw Missing(what: "no Data directory") }
        return try String(contentsOf: dir.appendingPathComponent(name), encoding: .utf8)
    }

    /// Rows as dictionaries keyed by the header.
    static func rows(_ name: String) throws -> [[String: String]] {
        let lines = try text(name).split(whereSeparator: \.isNewline).map(String.init)
        guard let header = lines.first?.split(separator: ",").map(String.init) else { throw Missing(what: "\(name) is empty") }
        return lines.dropFirst().map { line in
            Dictionary(uniqueKeysWithValues: zip(header, line.split(separator: ",", omittingEmptySubsequences: false).map(String.init)))
        }
    }

    static func column(_ name: String, _ key: String) throws -> [Double] {
        try rows(name).map { row in
            guard let s = row[key], let v = Double(s) else { throw Missing(what: "\(name): bad \(key)") }
            return v
        }
    }

    /// `numpy (plain definitions)` values from reference_time_domain.csv.
    static func reference(dataset: String, variant: String, library: String = "numpy (plain definitions)") throws -> [String: Double] {
        var out: [String: Double] = [:]
        for row in try rows("reference_time_domain.csv")
        where row["dataset"] == dataset && row["variant"] == variant && row["library"] == library {
            if let m = row["metric"], let v = row["value"].flatMap(Double.init) { out[m] = v }
        }
        guard !out.isEmpty else { throw Missing(what: "no reference for \(dataset)/\(variant)/\(library)") }
        return out
    }
}

/// A deterministic generator for synthetic series (SplitMix64 + Box-Muller).
struct SeededRandom {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func uniform() -> Double { Double(next() >> 11) / Double(1 << 53) }

    mutating func gaussian() -> Double {
        let u1 = max(uniform(), 1e-300)
        let u2 = uniform()
        return (-2 * log(u1)).squareRoot() * cos(2 * Double.pi * u2)
    }
}

/// RR series modulated at `frequencyHz` (respiratory sinus arrhythmia): each interval is the base interval plus
/// `amplitudeMs` × sin(2π f t) at the time the interval starts, plus Gaussian noise.
func synthesiseRSA(
    baseMs: Double, amplitudeMs: Double, frequencyHz: Double, seconds: Double, noiseMs: Double, seed: UInt64
) -> [Double] {
    var random = SeededRandom(state: seed)
    var t = 0.0
    var rr: [Double] = []
    while t < seconds {
        let v = baseMs + amplitudeMs * sin(2 * Double.pi * frequencyHz * t) + noiseMs * random.gaussian()
        rr.append(v)
        t += v / 1000
    }
    return rr
}

/// Both present and within `tolerance` of each other.
func isClose(_ a: Double?, _ b: Double?, within tolerance: Double) -> Bool {
    guard let a, let b else { return false }
    return abs(a - b) <= tolerance
}
