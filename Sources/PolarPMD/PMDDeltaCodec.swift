/// Polar's delta-compressed sample layout (frame type bit 7 set).
///
/// ```
/// reference sample   channels × ceil(referenceBits / 8) bytes, signed little-endian (sign bit = referenceBits − 1)
/// then blocks until the end of the frame:
///   delta size       1 byte: bits per delta (0…32)
///   sample count     1 byte
///   deltas           ceil(size × count × channels / 8) bytes; bit-packed, least significant bit first, channel by
///                    channel within a sample; each delta is a signed `size`-bit number added to the previous sample
/// ```
///
/// Sums wrap at 32 bits (the SDK's `Int` arithmetic; the published 32-bit vectors rely on it). A block with delta
/// size 0 carries no samples (the SDK reads none), whatever its count says.
public enum PMDDeltaCodec {
    /// Decodes the samples, channel values interleaved (`[s0c0, s0c1, …, s1c0, …]`), reference sample first.
    public static func decode<Bytes: Collection>(_ bytes: Bytes, channels: Int, referenceBits: Int) throws(PMDError)
        -> [Int32] where Bytes.Element == UInt8
    {
        let b = Array(bytes)
        guard channels > 0, (1...32).contains(referenceBits) else {
            throw PMDError(.invalidRequest, "delta decoding needs channels > 0 and 1…32 reference bits")
        }
        let refBytes = (referenceBits + 7) / 8
        guard b.count >= channels * refBytes else {
            throw PMDError(
                .truncated,
                "delta frame of \(b.count) byte(s) is shorter than its reference sample (\(channels * refBytes))")
        }
        var out: [Int32] = []
        out.reserveCapacity(channels * 8)
        var i = 0
        for _ in 0..<channels {
            var v: UInt32 = 0
            for k in 0..<refBytes { v |= UInt32(b[i + k]) << (8 * UInt32(k)) }
            out.append(signExtend(v, bits: referenceBits))
            i += refBytes
        }
        while i < b.count {
            guard b.count - i >= 2 else {
                throw PMDError(.truncated, "delta block header at offset \(i) is cut off")
            }
            let size = Int(b[i])
            let count = Int(b[i + 1])
            i += 2
            guard size <= 32 else {
                throw PMDError(.invalidDeltaSize, "delta block at offset \(i - 2) announces \(size)-bit deltas (max 32)")
            }
            let bits = size * count * channels
            let length = (bits + 7) / 8
            guard b.count - i >= length else {
                throw PMDError(
                    .deltaOverrun,
                    "delta block at offset \(i - 2) needs \(length) byte(s) for \(count) × \(channels) × \(size) bits, "
                        + "\(b.count - i) remain")
            }
            if size > 0 {
                var bit = i * 8
                for _ in 0..<count {
                    let base = out.count - channels
                    for c in 0..<channels {
                        var v: UInt32 = 0
                        for k in 0..<size where b[(bit + k) >> 3] & (1 << UInt8((bit + k) & 7)) != 0 {
                            v |= 1 << UInt32(k)
                        }
                        bit += size
                        out.append(out[base + c] &+ signExtend(v, bits: size))
                    }
                }
            }
            i += length
        }
        return out
    }

    static func signExtend(_ v: UInt32, bits: Int) -> Int32 {
        let shift = UInt32(32 - bits)
        return Int32(bitPattern: v << shift) >> Int32(shift)
    }
}
