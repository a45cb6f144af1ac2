/// The sliding window of the SDK: samples in arrival order; on each append, every sample older than
/// `windowSec` before the appended one is evicted (strictly older: a sample exactly at the cutoff stays).
/// Reads never evict, so a stalled provider leaves its last samples in place.
public struct SampleWindow: Sendable {
    public let windowSec: Int
    /// Live samples are `buffer[head...]`; evicted ones before `head` are dropped in bulk now and then.
    private var buffer: [BiosignalSample] = []
    private var head = 0
    /// Whether timestamps have arrived in order so far, which lets eviction stop at the first kept sample.
    private var ordered = true

    public init(windowSec: Int) { self.windowSec = windowSec }

    public var samples: [BiosignalSample] { Array(buffer[head...]) }

    public mutating func append(_ sample: BiosignalSample) {
        if let last = buffer.last, sample.timestampMs < last.timestampMs, head < buffer.count { ordered = false }
        buffer.append(sample)
        let cutoff = sample.timestampMs - Int64(windowSec) * 1000
        if ordered {
            while head < buffer.count, buffer[head].timestampMs < cutoff { head += 1 }
        } else {
            buffer = buffer[head...].filter { $0.timestampMs >= cutoff }
            head = 0
            ordered = zip(buffer, buffer.dropFirst()).allSatisfy { $0.timestampMs <= $1.timestampMs }
        }
        if head > 1024, head * 2 > buffer.count {
            buffer.removeFirst(head)
            head = 0
        }
    }

    public var count: Int { buffer.count - head }
    public var isEmpty: Bool { head == buffer.count }
}
