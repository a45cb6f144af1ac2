import GatewayEngine
import ServiceLifecycle
import Synchronization

/// The session's sinks, attached in one place: samples through a tap on each provider, events through one engine
/// observer that encodes each event once and hands it to every sink in attachment order.
public final class SessionOutputs: Sendable {
    private let sinks: Locked<[any SessionSink]>
    private let observation = Locked<ObservationToken?>(nil)
    private let received = Atomic<Int>(0)

    public init(_ sinks: [any SessionSink] = []) { self.sinks = Locked(sinks) }

    /// Adds a sink; attach every sink before the session starts.
    public func attach(_ sink: any SessionSink) { sinks.withLock { $0.append(sink) } }

    public var all: [any SessionSink] { sinks.withLock { $0 } }

    /// Samples the providers have delivered so far.
    public var samplesReceived: Int { received.load(ordering: .relaxed) }

    /// `provider`, with every sample shown to each sink (on the provider's thread) before the engine has it.
    public func tap(_ provider: any BiosignalProvider) -> any BiosignalProvider {
        TappedProvider(provider, onSample: { [self] sample in
            received.add(1, ordering: .relaxed)
            for sink in sinks.withLock({ $0 }) { sink.receive(sample: sample) }
        })
    }

    /// Delivers every event of `engine` to the sinks until `detach`.
    public func observe(_ engine: SessionEngine) {
        let token = engine.observe { [sinks] event in
            let encoded = EncodedEvent(event)
            for sink in sinks.withLock({ $0 }) { sink.receive(event: encoded) }
        }
        observation.withLock { $0 = token }
    }

    public func detach() { observation.withLock { $0 }?.cancel() }

    /// The sinks as the group's services, in attachment order (so the group shuts them down in reverse). A sink
    /// that ends or fails on its own leaves the session and the other sinks running.
    public var services: [ServiceGroupConfiguration.ServiceConfiguration] {
        all.map {
            .init(service: $0, successTerminationBehavior: .ignore, failureTerminationBehavior: .ignore, serviceName: $0.name)
        }
    }
}
