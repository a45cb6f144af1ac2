import Foundation
import GatewayEngine
import GatewaySink

/// The session store as a sink: samples are journaled on the provider's thread (durable before the engine has
/// them), events are queued for the recorder's background writer with their shared JSON text. At shutdown it waits
/// (on a thread of its own, not the cooperative pool) for the writer to have everything in the database.
public final class StoreSink: SessionSink {
    public let name = "store"
    public let recorder: SessionRecorder
    private let graceSec: Double

    public init(recorder: SessionRecorder, graceSec: Double = 15) {
        self.recorder = recorder
        self.graceSec = graceSec
    }

    public func receive(sample: BiosignalSample) { recorder.record(sample) }
    public func receive(event: EncodedEvent) { recorder.record(event.event, json: event.json) }

    public func run() async throws {
        await untilGracefulShutdown()
        await finish()
    }

    /// Ends the recording and waits for the background writer (see `SessionRecorder.finish`).
    public func finish() async {
        let recorder = recorder
        let graceSec = graceSec
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let t = Thread {
                recorder.finish(graceSec: graceSec)
                done.resume()
            }
            t.name = "store-finish"
            t.start()
        }
    }
}
