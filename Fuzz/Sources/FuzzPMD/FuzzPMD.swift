import CFuzzerDriver
import PolarPMD

/// The executable's entry point (see FuzzHRM): hands control to libFuzzer's driver.
@_cdecl("FuzzPMD_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var argc = argc
    var argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv, fuzzPMD)
}

/// Contexts the data-frame decoder is run with: nominal rate only; a previous frame and a factor; rate, range and
/// resolution (the compressed type-0 fallback scale); a hostile factor.
let contexts: [PMDDecodeContext] = [
    PMDDecodeContext(sampleRateHz: 130),
    PMDDecodeContext(previousTimestampNs: 100, factor: 2.44e-4),
    PMDDecodeContext(sampleRateHz: 52, previousTimestampNs: 1_000_000_000, rangeG: 8, resolutionBits: 16),
    PMDDecodeContext(sampleRateHz: 200, factor: .nan),
]

/// libFuzzer entry point: the same bytes go to every PMD decoder (data frame, control-point indication, feature
/// read, settings TLV, delta codec) and to the clock mapper; each must return a value or an error, never trap, and
/// what it returns must keep the decoder's promises.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPMD(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []

    for context in contexts {
        guard let frame = try? PMDDataFrame(decoding: bytes, context: context) else { continue }
        precondition(bytes.count > PMDFrameHeader.size, "decoded a frame without content")
        precondition(frame.header.encoded() == Array(bytes.prefix(PMDFrameHeader.size)).enumerated().map {
            $0.offset == 0 ? $0.element & 0x3F : $0.element
        })
        let times: [UInt64]
        switch frame.samples {
        case let .ecg(s):
            precondition((bytes.count - PMDFrameHeader.size) == 3 * s.count, "ECG sample count must follow the length")
            times = s.map(\.timestampNs)
        case let .accelerometer(s):
            times = s.map(\.timestampNs)
            if context.factor?.isFinite ?? true {
                precondition(s.allSatisfy { $0.g.x.isFinite && $0.g.y.isFinite && $0.g.z.isFinite }, "g must be finite")
            }
        }
        precondition(!times.isEmpty, "a decoded frame has samples")
        precondition(times.last == frame.header.timestampNs, "the last sample carries the frame time")
        precondition(times == times.sorted(), "sample times never go backwards")
    }

    if let message = try? PMDControlPointMessage(decoding: bytes) {
        switch message {
        case let .response(r):
            precondition(bytes[0] == 0xF0 && bytes.count >= 4)
            precondition(r.parameters.count == (r.status.isSuccess ? max(0, bytes.count - 5) : 0))
            _ = try? r.settings()
            if r.status.isSuccess, bytes.count >= 5 {
                precondition(r.encoded() == bytes.prefix(4) + [r.more ? 1 : 0] + bytes.dropFirst(5))
            }
        case let .measurementStopped(types):
            precondition(types.count == bytes.count - 1)
        }
    }
    if let features = try? PMDFeatures(decoding: bytes) {
        precondition(features.supported.allSatisfy { Int($0.rawValue) < 8 * (bytes.count - 1) })
    }
    if let settings = try? PMDSettings(decoding: bytes) {
        precondition(settings.values.values.reduce(0) { $0 + $1.count } <= bytes.count, "more values than bytes")
    }
    for (channels, bits) in [(3, 16), (3, 32), (1, 24)] {
        if let samples = try? PMDDeltaCodec.decode(bytes, channels: channels, referenceBits: bits) {
            precondition(samples.count % channels == 0 && samples.count >= channels)
        }
    }

    // The clock mapper on (sensor, host) pairs read from the bytes, 16 at a time.
    var mapper = PMDClockMapper(configuration: .init(windowNs: 1_000_000, maxWindows: 4))
    var i = 0
    while i + 16 <= bytes.count {
        var s: UInt64 = 0
        var h: UInt64 = 0
        for k in 0..<8 {
            s |= UInt64(bytes[i + k]) << (8 * UInt64(k))
            h |= UInt64(bytes[i + 8 + k]) << (8 * UInt64(k))
        }
        mapper.observe(sensorNs: s, hostNs: h, samples: Int(bytes[i]), sampleRateHz: 130)
        _ = mapper.hostNs(forSensorNs: s)
        i += 16
    }
    return 0
}
