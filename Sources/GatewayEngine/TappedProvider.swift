/// Wraps a provider and shows every sample and status to `tap` before the engine gets it: how recorders and live
/// views see raw data without the engine knowing about them.
public struct TappedProvider: BiosignalProvider {
    public let base: any BiosignalProvider
    let onSample: @Sendable (BiosignalSample, SessionConfig?) -> Void
    let onStatus: @Sendable (SensorStatus) -> Void

    public init(
        _ base: any BiosignalProvider,
        onSample: @escaping @Sendable (BiosignalSample) -> Void,
        onStatus: @escaping @Sendable (SensorStatus) -> Void = { _ in }
    ) {
        self.base = base
        self.onSample = { sample, _ in onSample(sample) }
        self.onStatus = onStatus
    }

    /// As `init(_:onSample:onStatus:)`, each sample shown with the session the provider was started for (nil
    /// outside an engine): a tap that serves several sessions in turn (`serve`'s recording) keeps them apart.
    public init(_ base: any BiosignalProvider, onSessionSample: @escaping @Sendable (BiosignalSample, SessionConfig?) -> Void) {
        self.base = base
        self.onSample = onSessionSample
        self.onStatus = { _ in }
    }

    public var name: String { base.name }
    public var isAvailable: Bool { get async { await base.isAvailable } }

    public func startStreaming(into sink: ProviderSink) async throws {
        let onSample = onSample
        let onStatus = onStatus
        let session = sink.session
        try await base.startStreaming(into: ProviderSink(
            session: session,
            sessionStartedAt: sink.sessionStartedAt,
            onSample: { sample in
                onSample(sample, session)
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
