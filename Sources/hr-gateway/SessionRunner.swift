import Foundation
import GatewayEngine
import HRVAnalysis
import ReplayProvider
import StdoutSink

/// Runs one session to its end for the command line: wires taps (recording, live view), prints events, and turns
/// Ctrl-C / SIGTERM into a clean stop with a summary.
struct SessionRunner {
    enum Output { case jsonl, pretty }

    let config: SessionConfig
    let providers: [any BiosignalProvider]
    let correction: ArtifactCorrection
    let output: Output
    let recordPath: String?
    /// End the session when every source reports it has finished (a replay at its end).
    let stopWhenSourcesEnd: Bool

    /// Returns the process exit status: 0 after a summary, 1 after a session error.
    func run() async throws -> Int32 {
        let writer = try recordPath.map { try SampleFileWriter(path: $0) }
        defer { writer?.close() }
        let pretty = output == .pretty
            ? PrettyTerminal(view: PrettyView(
                sessionId: config.sessionId, mode: config.mode.rawValue,
                durationSec: config.durationSec == Int(Int32.max) ? nil : config.durationSec))
            : nil
        let tapped: [any BiosignalProvider] = providers.map { p in
            TappedProvider(p, onSample: { sample in
                writer?.append(sample)
                pretty?.handle(sample)
            })
        }
        let engine = SessionEngine(providers: tapped, correction: correction)
        let jsonl = JSONLinesWriter()
        pretty?.begin()

        let signals = SignalTrap(signals: [SIGINT, SIGTERM]) {
            Task { try? await engine.stopSession(sessionId: config.sessionId) }
        }
        defer { signals.cancel() }

        let stream: AsyncStream<SessionEvent>
        do {
            stream = try await engine.startSession(config)
        } catch {
            FileHandle.standardError.write(Data("error: \(error.message)\n".utf8))
            return 2
        }
        var finishedSources = Set<String>()
        var status: Int32 = 0
        for await event in stream {
            if let pretty { pretty.handle(event) } else { jsonl.write(event) }
            switch event {
            case .error(_, _, let message):
                FileHandle.standardError.write(Data("error: \(message)\n".utf8))
                status = 1
            case .sensorStatus(_, _, let s) where stopWhenSourcesEnd && s.state == .disconnected:
                finishedSources.insert(s.deviceId ?? s.source)
                if finishedSources.count >= providers.count {
                    // Let the last samples reach a frame before the summary.
                    try? await engine.stopSession(sessionId: config.sessionId)
                }
            default:
                break
            }
        }
        return status
    }
}

/// Runs `handler` on the given signals instead of the default action, until cancelled.
final class SignalTrap {
    private let sources: [any DispatchSourceSignal]

    init(signals: [Int32], handler: @escaping @Sendable () -> Void) {
        sources = signals.map { sig in
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler(handler: handler)
            source.resume()
            return source
        }
    }

    func cancel() { for s in sources { s.cancel() } }
}
