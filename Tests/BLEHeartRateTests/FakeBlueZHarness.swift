import BLEHeartRate
import DBus
import DBusTestSupport
import Foundation
import GatewayEngine
import Logging

/// A sink that hands every status and sample to the test as async streams.
final class Recorder: Sendable {
    let statuses: AsyncStream<SensorStatus>
    let samples: AsyncStream<BiosignalSample>
    private let statusIn: AsyncStream<SensorStatus>.Continuation
    private let sampleIn: AsyncStream<BiosignalSample>.Continuation

    init() {
        (statuses, statusIn) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
        (samples, sampleIn) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
    }

    var sink: ProviderSink {
        ProviderSink(onSample: { [sampleIn] in sampleIn.yield($0) }, onStatus: { [statusIn] in statusIn.yield($0) })
    }

    /// Wraps another sink: everything goes to it and to the recorder.
    func tee(_ other: ProviderSink) -> ProviderSink {
        ProviderSink(
            onSample: { [sampleIn] in other.send($0); sampleIn.yield($0) },
            onStatus: { [statusIn] in other.status($0); statusIn.yield($0) })
    }
}

extension AsyncStream<SensorStatus>.Iterator {
    /// Skips statuses until one satisfies `predicate`; nil if the stream ended.
    mutating func first(where predicate: (SensorStatus) -> Bool) async -> SensorStatus? {
        while let s = await next() { if predicate(s) { return s } }
        return nil
    }

    mutating func first(_ state: SensorStatus.State, containing text: String? = nil) async -> SensorStatus? {
        await first { s in s.state == state && (text.map { t in s.message?.contains(t) ?? false } ?? true) }
    }
}

extension AsyncStream<BiosignalSample>.Iterator {
    mutating func take(_ n: Int) async -> [BiosignalSample] {
        var out: [BiosignalSample] = []
        while out.count < n, let s = await next() { out.append(s) }
        return out
    }
}

/// A provider wrapper that tees the engine's sink into a recorder (so tests know when a sample was ingested).
struct TeeProvider: BiosignalProvider {
    let inner: BLEHeartRateProvider
    let recorder: Recorder
    var name: String { inner.name }
    var isAvailable: Bool { get async { await inner.isAvailable } }
    func startStreaming(into sink: ProviderSink) async throws { try await inner.startStreaming(into: recorder.tee(sink)) }
    func stopStreaming() async { await inner.stopStreaming() }
}

/// A monotonic counter standing in for CLOCK_MONOTONIC.
final class FakeMonotonic: Sendable {
    private let value = Locked<UInt64>(0)
    func next() -> UInt64 { value.withLock { $0 += 1_000_000; return $0 } }
}
