import Foundation
import GatewayEngine
import GatewaySink

/// `--format jsonl`: one event per line on standard output, the shared JSON text as is, written by the sink's own
/// task (a reader that stops reading stalls only this sink). When the reader goes away (the pipe is closed: `| head`,
/// a viewer that quit), the sink stops writing and tells `onClosed` once.
public final class JSONLinesSink: SessionSink {
    public let name = "stdout"
    private let writer: JSONLinesWriter
    private let queue = SinkQueue<String>()
    private let onClosed: @Sendable () -> Void
    private let gone = Locked(false)

    public init(writer: JSONLinesWriter = JSONLinesWriter(), onClosed: @escaping @Sendable () -> Void = {}) {
        self.writer = writer
        self.onClosed = onClosed
    }

    public func receive(event: EncodedEvent) { queue.push(event.json) }

    public func run() async throws {
        await queue.drain { [self] line in
            if gone.withLock({ $0 }) || writer.write(line: line) { return }
            gone.withLock { $0 = true }
            onClosed()
        }
    }
}

/// `--format pretty`: the live one-screen view, redrawn on every sample and event. When standard output's reader
/// has gone, the sink stops drawing and tells `onClosed` once, as `JSONLinesSink` does.
public final class PrettySink: SessionSink {
    public let name = "stdout"
    private let terminal: PrettyTerminal
    private let onClosed: @Sendable () -> Void
    private let gone = Locked(false)
    private enum Item: Sendable {
        case sample(BiosignalSample)
        case event(SessionEvent)
    }

    private let queue = SinkQueue<Item>()

    public init(view: PrettyView, onClosed: @escaping @Sendable () -> Void = {}) {
        terminal = PrettyTerminal(view: view)
        self.onClosed = onClosed
        if !terminal.begin() { gone.withLock { $0 = true } }
    }

    public func receive(sample: BiosignalSample) { queue.push(.sample(sample)) }
    public func receive(event: EncodedEvent) { queue.push(.event(event.event)) }

    public func run() async throws {
        if gone.withLock({ $0 }) { onClosed() }  // already closed when the screen was cleared
        await queue.drain { [terminal, gone, onClosed] item in
            if gone.withLock({ $0 }) { return }
            let written = switch item {
            case .sample(let s): terminal.handle(s)
            case .event(let e): terminal.handle(e)
            }
            if !written {
                gone.withLock { $0 = true }
                onClosed()
            }
        }
    }
}
