import Foundation
import GatewayEngine
import GatewaySink

/// `--format jsonl`: one event per line on standard output, the shared JSON text as is, written by the sink's own
/// task (a reader that stops reading stalls only this sink).
public final class JSONLinesSink: SessionSink {
    public let name = "stdout"
    private let writer: JSONLinesWriter
    private let queue = SinkQueue<String>()

    public init(writer: JSONLinesWriter = JSONLinesWriter()) { self.writer = writer }

    public func receive(event: EncodedEvent) { queue.push(event.json) }

    public func run() async throws {
        await queue.drain { [writer] line in writer.write(line: line) }
    }
}

/// `--format pretty`: the live one-screen view, redrawn on every sample and event.
public final class PrettySink: SessionSink {
    public let name = "stdout"
    private let terminal: PrettyTerminal
    private enum Item: Sendable {
        case sample(BiosignalSample)
        case event(SessionEvent)
    }

    private let queue = SinkQueue<Item>()

    public init(view: PrettyView) {
        terminal = PrettyTerminal(view: view)
        terminal.begin()
    }

    public func receive(sample: BiosignalSample) { queue.push(.sample(sample)) }
    public func receive(event: EncodedEvent) { queue.push(.event(event.event)) }

    public func run() async throws {
        await queue.drain { [terminal] item in
            switch item {
            case .sample(let s): terminal.handle(s)
            case .event(let e): terminal.handle(e)
            }
        }
    }
}
