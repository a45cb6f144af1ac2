import BLEHeartRate
import CFuzzerDriver

/// The executable's entry point. SwiftPM links executables with `main` aliased to `<Target>_main`; with
/// `-parse-as-library` there is no top-level code, so this hands control to libFuzzer's driver.
@_cdecl("FuzzHRM_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var argc = argc
    var argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv, fuzzHeartRateMeasurement)
}

/// libFuzzer entry point: decodes arbitrary bytes as a Heart Rate Measurement and checks the decoder's promises.
/// Any trap (precondition, overflow, out-of-bounds) is reported by libFuzzer as a crash with the input saved.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHeartRateMeasurement(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    let measurement: HeartRateMeasurement
    do {
        measurement = try HeartRateMeasurement(decoding: bytes)
    } catch {
        // Only short payloads may be rejected.
        precondition(bytes.count < 5, "rejected a \(bytes.count)-byte payload: \(error)")
        return 0
    }
    let flags = bytes[0]
    let header = 1 + (flags & 0x01 != 0 ? 2 : 1) + (flags & 0x08 != 0 ? 2 : 0)
    let rrBytes = flags & 0x10 != 0 ? bytes.count - header : 0
    precondition(measurement.rrIntervals1024.count == rrBytes / 2, "RR count must follow the length")
    precondition(measurement.droppedTrailingByte == (rrBytes % 2 == 1), "odd tail flag wrong")
    precondition(measurement.rrIntervalsMs.allSatisfy { $0.isFinite && $0 >= 0 && $0 < 64_000 })

    // What is kept survives an encode/decode round trip unchanged.
    let again: HeartRateMeasurement
    do { again = try HeartRateMeasurement(decoding: measurement.encoded()) } catch {
        preconditionFailure("re-encoded measurement does not decode: \(error)")
    }
    precondition(again.heartRate == measurement.heartRate)
    precondition(again.contact == measurement.contact)
    precondition(again.energyExpendedKJ == measurement.energyExpendedKJ)
    precondition(again.rrIntervals1024 == measurement.rrIntervals1024)
    precondition(!again.droppedTrailingByte)

    // Beat reconstruction and sample conversion never trap.
    let n = HeartRateNotification(
        measurement: measurement, deviceId: "00:00:00:00:00:00", arrivalMonotonicNs: UInt64(size), arrivalWallMs: 0,
        sequence: 1)
    precondition(n.beatMonotonicNs.count == measurement.rrIntervals1024.count)
    precondition(n.beatMonotonicNs == n.beatMonotonicNs.sorted())
    _ = n.sample
    _ = PolarBroadcast(withCompanyId: bytes)
    return 0
}
