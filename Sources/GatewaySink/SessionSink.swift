import GatewayEngine
import ServiceLifecycle

/// An output of the gateway: stdout, the session store, the relay, the uplink, the webhook (and MQTT, LSL next).
///
/// Every sink is attached the same way, through `SessionOutputs`, and runs as a swift-service-lifecycle `Service`
/// in the session's `ServiceGroup`:
///
/// - `receive(sample:)` is called on the provider's thread with every sample, before the engine has it. Only a sink
///   that must make samples durable (the session store's journal, `--record`) does work here.
/// - `receive(event:)` is called with every event of the session, in order, outside the engine's lock, with its JSON
///   encoded once for all sinks. It must not block: a sink that writes to disk or to the network queues the work
///   for its own task (`SinkQueue`), so a slow or stuck sink never delays the others or the session.
/// - `run()` is the sink's task. It runs until graceful shutdown, then delivers what it has queued (within its own
///   grace period) and returns. The group shuts sinks down after the session, in reverse order of attachment.
public protocol SessionSink: Service {
    /// Short name for logs (`stdout`, `store`, `relay`, …).
    var name: String { get }
    func receive(sample: BiosignalSample)
    func receive(event: EncodedEvent)
}

extension SessionSink {
    public func receive(sample: BiosignalSample) {}
}

/// Hands work from the delivery path to a sink's own task, in order, without blocking: the sink pushes in
/// `receive`, and its `run()` calls `drain`, which returns once graceful shutdown has come and everything pushed
/// before it is handled.
///
/// Unbounded on purpose: events come a few per second, and a sink that falls behind must not lose the summary.
public final class SinkQueue<Item: Sendable>: Sendable {
    private let stream: AsyncStream<Item>
    private let continuation: AsyncStream<Item>.Continuation

    public init() { (stream, continuation) = AsyncStream<Item>.makeStream(bufferingPolicy: .unbounded) }

    public func push(_ item: Item) { continuation.yield(item) }

    /// No more items: `drain` returns after the ones already pushed.
    public func close() { continuation.finish() }

    /// Handles every item in order until graceful shutdown (or `close`), then the rest, and returns.
    public func drain(_ handle: (Item) async -> Void) async {
        await withGracefulShutdownHandler {
            for await item in stream { await handle(item) }
        } onGracefulShutdown: { [continuation] in
            continuation.finish()
        }
    }
}

/// Waits for graceful shutdown (or cancellation), for sinks with nothing to do until then.
public func untilGracefulShutdown() async {
    try? await gracefulShutdown()
}
