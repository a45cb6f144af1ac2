/// The sliding window of the SDK: samples in arrival order; on each append, every sample older than
/// `windowSec` before the appended one is evicted (strictly older: a sample exactly at the cutoff stays).
/// Reads never evict, so a stalled provider leaves its last samples in place.
public struct SampleWindow: Sendable {
    public let windowSec: Int
    public private(set) var samples: [BiosignalSample] = []

    public init(windowSec: Int) { self.windowSec = windowSec }

    public mutating func append(_ sample: BiosignalSample) {
        samples.append(sample)
        let cutoff = sample.timestampMs - Int64(windowSec) * 1000
        samples.removeAll { $0.timestampMs < cutoff }
    }

    public var count: Int { samples.count }
    public var isEmpty: Bool { samples.isEmpty }
}
