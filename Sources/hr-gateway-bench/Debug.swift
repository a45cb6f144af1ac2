import Foundation
import RPPG
import RPPGSynthetic

func debugScenario(_ index: Int) {
    let s = syntheticScenarios()[index]
    print(s.name)
    guard var est = try? RPPGEstimator() else { return }
    for frame in s.video.frames(format: .yuyv) {
        if let e = est.process(frame) {
            print(String(format: "t=%5.1f w=%4.1f cand=%6.1f chrom=%6.1f pr=%.2f snr=%5.1f conf=%.2f hr=%@ br=%5.1f bconf=%.2f",
                         e.tSeconds, e.windowSeconds, e.candidateHrBpm ?? -1, e.chromHrBpm ?? -1, e.peakRatio, e.snrDb,
                         e.confidence, e.hrBpm.map { String(format: "%.1f", $0) } ?? "-", e.candidateBreathingRateBpm ?? -1, e.breathingConfidence))
        }
    }
}
