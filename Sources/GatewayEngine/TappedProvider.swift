/// Wraps a provider and shows every sample and status to `tap` before the engine gets it: how recorders and live
/// views see raw data without the engine knowing about them.
public struct TappedProvider: BiosignalProvider {
    public let base: any BiosignalProvider
    let onSample: @Sendable (BiosignalSample) -> Void
    let onStatus: @Sendable (SensorStatus) -> Void

    public init(
        _ base: any BiosignalProvider,
        onSample: @escaping @Sendable (BiosignalSample) -> Void,
        onStatus: @escaping @Sendable (SensorStatus) -> Void = { _ in }
    ) {
        self.base = base
        self.onSample = onSample
        self.onStatus = onStatus
    }

    public var name: String { base.name }
    public var isAvailable: Bool { get async { await base.isAvailable } }

    public func startStreaming(into sink: ProviderSink) async throws {
        let onSample = onSample
        let onStatus = onStatus
        try await base.startStreaming(into: ProviderSink(
            session: sink.session,
            onSample: { sample in
                onSample(sample)
                sink.send(sample)
            },
            onStatus: { status in
                onStatus(status)
                sink.status(status)
            }
        ))
    }

    public func stopStreaming() async { await base.stopStreaming() }
}
