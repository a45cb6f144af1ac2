import Foundation
import Testing

@testable import SessionStore

/// The EDF+ layout, field by field (pyedflib reads whole files in `scripts/edf-check`).
@Suite struct EDFWriterTests {
    func ascii(_ bytes: ArraySlice<UInt8>) -> String { String(decoding: bytes, as: UTF8.self) }

    @Test func theHeaderHasTheFixedLayout() {
        let hr = EDFWriter.Signal(
            label: "HR", physicalDimension: "bpm", physicalMin: -327.68, physicalMax: 327.67, samplesPerRecord: 1,
            samples: [60, 61.5, 62])
        // 2026-11-27 00:42:04 UTC.
        let bytes = EDFWriter.write(startMs: 1_795_740_124_000, records: 3, signals: [hr], annotations: [], recordingCode: "s 1")
        let headerBytes = 256 * 3
        #expect(ascii(bytes[0..<8]) == "0       ")
        #expect(ascii(bytes[88..<168]).hasPrefix("Startdate 27-NOV-2026 X X s_1 hr-gateway "))
        #expect(ascii(bytes[168..<176]) == "27.11.26" && ascii(bytes[176..<184]) == "00.42.04")
        #expect(ascii(bytes[184..<192]).trimmingCharacters(in: .whitespaces) == String(headerBytes))
        #expect(ascii(bytes[192..<236]).hasPrefix("EDF+C"))
        #expect(ascii(bytes[236..<244]).hasPrefix("3 ") && ascii(bytes[244..<252]).hasPrefix("1 "))
        #expect(ascii(bytes[252..<256]) == "2   ")
        #expect(ascii(bytes[256..<272]) == "HR              " && ascii(bytes[272..<288]) == "EDF Annotations ")
        // Physical minimum of each signal, then maximum: 8 characters each.
        let physMin = 256 + 2 * 16 + 2 * 80 + 2 * 8
        #expect(ascii(bytes[physMin..<(physMin + 8)]) == "-327.68 " && ascii(bytes[(physMin + 16)..<(physMin + 24)]) == "327.67  ")
        let annotationSamples = Int(ascii(bytes[(256 + 2 * 216 + 8)..<(256 + 2 * 216 + 16)]).trimmingCharacters(in: .whitespaces))!
        #expect(bytes.count == headerBytes + 3 * (2 + 2 * annotationSamples))
    }

    @Test func samplesAreLittleEndianAndOneStepIsAHundredthOfABeatPerMinute() {
        let hr = EDFWriter.Signal(
            label: "HR", physicalDimension: "bpm", physicalMin: -327.68, physicalMax: 327.67, samplesPerRecord: 1,
            samples: [60, -1, 400])
        let bytes = EDFWriter.write(startMs: 0, records: 3, signals: [hr], annotations: [])
        let annotationBytes = (bytes.count - 768) / 3 - 2
        func sample(_ record: Int) -> Int16 {
            let at = 768 + record * (2 + annotationBytes)
            return Int16(bitPattern: UInt16(bytes[at]) | UInt16(bytes[at + 1]) << 8)
        }
        #expect(sample(0) == 6000 && sample(1) == -100 && sample(2) == Int16.max, "values outside are clipped")
        #expect(EDFWriter.physical(6000, hr) == 60)
    }

    @Test func annotationsGoToTheRecordOfTheirOnsetAfterItsTimekeepingEntry() {
        let notes = [
            EDFWriter.Annotation(onsetSec: 1.25, text: "beat"),
            EDFWriter.Annotation(onsetSec: 0.5, durationSec: 2, text: "inhale"),
            EDFWriter.Annotation(onsetSec: 1.5, text: "bad\u{14}text"),
        ]
        let bytes = EDFWriter.write(startMs: 0, records: 2, signals: [], annotations: notes)
        let perRecord = (bytes.count - 512) / 2
        let first = Array(bytes[512..<(512 + perRecord)]), second = Array(bytes[(512 + perRecord)...])
        func text(_ b: [UInt8]) -> String { String(decoding: b.prefix { _ in true }, as: UTF8.self) }
        #expect(text(first).hasPrefix("+0\u{14}\u{14}\u{0}+0.5\u{15}2\u{14}inhale\u{14}\u{0}\u{0}"))
        #expect(text(second).hasPrefix("+1\u{14}\u{14}\u{0}+1.25\u{14}beat\u{14}\u{0}+1.5\u{14}badtext\u{14}\u{0}"))
    }
}
