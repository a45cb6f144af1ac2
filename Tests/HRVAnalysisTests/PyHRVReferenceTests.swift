import Foundation
import HRVAnalysis
import Testing

/// hr-gateway's HRV against pyhrv 0.5.0 (Data/reference_pyhrv.csv, made by scripts/hrv-references-pyhrv.py), the
/// second reference beside neurokit2, on the metrics whose definitions the two share (Data/README.md says which and
/// why the others are recorded but not asserted).
@Suite struct PyHRVReferenceTests {
    static func reference(_ dataset: String) throws -> [String: Double] {
        var out: [String: Double] = [:]
        for row in try TestData.rows("reference_pyhrv.csv") where row["dataset"] == dataset {
            if let m = row["metric"], let v = row["value"].flatMap(Double.init) { out[m] = v }
        }
        guard out.count >= 6 else { throw TestData.Missing(what: "no pyhrv reference for \(dataset)") }
        return out
    }

    @Test(arguments: ExtendedMetricsTests.datasets)
    func matchesPyHRV(dataset: String) throws {
        let rr = try TestData.column("rr_\(dataset).csv", "rr_ms")
        let ref = try Self.reference(dataset)
        let td = HRVAnalyzer.timeDomain(segments: [rr])
        let rmssd = try #require(td.rmssdMs), sdnn = try #require(td.sdnnMs), pnn50 = try #require(td.pnn50)
        #expect(abs(rmssd - ref["rmssd_ms"]!) < 1e-9, "\(dataset) rmssd \(rmssd) vs pyhrv \(ref["rmssd_ms"]!)")
        #expect(abs(sdnn - ref["sdnn_ms"]!) < 1e-9, "\(dataset) sdnn \(sdnn) vs pyhrv \(ref["sdnn_ms"]!)")
        #expect(abs(pnn50 - ref["pnn50"]!) < 1e-9, "\(dataset) pnn50 \(pnn50) vs pyhrv \(ref["pnn50"]!)")

        var r = HRVResult()
        r.addExtendedMetrics(of: rr)
        let values = Dictionary(uniqueKeysWithValues: r.extendedMetricValues.map { ($0.key, $0.value) })
        #expect(abs(try #require(values["sampen"]) - ref["sampen"]!) < 1e-9)
        // pyhrv: the population standard deviation of the successive differences / √2.
        let m = Double(rr.count - 1)
        let sd1 = try #require(values["sd1_ms"])
        #expect(abs(sd1 * ((m - 1) / m).squareRoot() - ref["sd1_ms"]!) < 1e-6, "\(dataset) sd1 \(sd1) vs \(ref["sd1_ms"]!)")
        #expect(abs(try #require(values["sd2_ms"]) / ref["sd2_ms"]! - 1) < 0.005)
    }
}
