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
    private let keeps: @Sendable (SessionEvent) -> Bool

    /// `--format events`: every event but the frames that come every second or more often (`session_frame`,
    /// `biosignal_frame`, `breathing_cue`): a session's start and end, its errors, sensor changes and DFA crossings,
    /// a few lines an hour for a service's log.
    public static let eventsOnly: @Sendable (SessionEvent) -> Bool = { event in
        switch event {
        case .frame, .biosignalFrame, .breathingCue: false
        default: true
        }
    }

    /// Writes the events `keeping` keeps (all of them by default).
    public init(
        writer: JSONLinesWriter = JSONLinesWriter(), keeping: @escaping @Sendable (SessionEvent) -> Bool = { _ in true },
        onClosed: @escaping @Sendable () -> Void = {}
    ) {
        self.writer = writer
        self.keeps = keeping
        self.onClosed = onClosed
    }

    public func receive(event: EncodedEvent) {
        if keeps(event.event) { queue.push(event.json) }
    }

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
