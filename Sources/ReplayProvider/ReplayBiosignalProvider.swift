import GatewayEngine
import Logging

/// Plays a recorded sample file back into a session, at real speed or faster.
///
/// Timestamps keep their original spacing and are shifted so that the first sample lands at the start of the
/// replay, or, for a recorded session whose start and end are known (`span`), so that the replay starts where the
/// session started and finishes where it ended: the same frames, windows and duration. At `speed` 10 a minute of
/// recording is delivered in six seconds. When the recording is exhausted (at the session's end, with a span) the
/// provider reports `disconnected` with the message "replay finished".
public final class ReplayBiosignalProvider: BiosignalProvider {
    /// The file replayed, or a label naming where `samples` came from.
    public let path: String
    public let speed: Double
    private let clock: any SessionClock
    private let preloaded: SampleFile.Contents?
    /// The recorded session's start and end (wall ms), when known.
    private let span: (startMs: Int64, endMs: Int64)?

    private struct Run {
        var samples: [BiosignalSample]
        var index = 0
        /// Wall clock at the start: the samples' timestamps are shifted to begin here.
        var startMs: Int64
        /// Monotonic clock at the start: deliveries are scheduled from it.
        var startMonoMs: Int64
        var sink: ProviderSink
        var timer: (any ScheduledAction)?
        /// When the replay finishes (the recorded session's end, shifted), if later than its last sample.
        var endMs: Int64?
        var finished = false
    }

    private let run = Locked<Run?>(nil)
    private let logger = Logger(label: "hr-gateway.replay")

    public var name: String { "replay" }
    public var isAvailable: Bool { true }

    public init(path: String, speed: Double = 1, clock: any SessionClock = SystemSessionClock()) {
        self.path = path
        self.speed = speed > 0 && speed.isFinite ? speed : 1
        self.clock = clock
        self.preloaded = nil
        self.span = nil
    }

    /// Replays samples already in memory (a session from the store); `label` names them in messages. With `span`,
    /// the recorded session's start and end (wall ms), the replay keeps the time from the start to the first sample
    /// and from the last sample to the end.
    public convenience init(
        samples: [BiosignalSample], label: String, speed: Double = 1, span: (startMs: Int64, endMs: Int64)? = nil,
        clock: any SessionClock = SystemSessionClock()
    ) {
        var contents = SampleFile.Contents()
        contents.samples = samples
        self.init(contents: contents, label: label, speed: speed, span: span, clock: clock)
    }

    /// Replays a file read before the session (`SampleFile.read`), so that a file that cannot be replayed is refused
    /// before anything starts; what reading it noticed is said when the replay starts. `label` names it in messages.
    public init(
        contents: SampleFile.Contents, label: String, speed: Double = 1, span: (startMs: Int64, endMs: Int64)? = nil,
        clock: any SessionClock = SystemSessionClock()
    ) {
        self.path = label
        self.speed = speed > 0 && speed.isFinite ? speed : 1
        self.clock = clock
        self.preloaded = contents
        // A span that does not hold the first sample's time is not this recording's: replay from the first sample.
        self.span = span.flatMap { sp in
            guard let first = contents.samples.first?.timestampMs, sp.startMs <= first, sp.endMs >= sp.startMs else {
                return nil
            }
            return sp
        }
    }

    /// Throws `sensorUnavailable` naming the bad line when the file cannot be read.
    public func startStreaming(into sink: ProviderSink) async throws {
        let loaded: SampleFile.Contents
        if let preloaded {
            loaded = preloaded
        } else {
            do { loaded = try SampleFile.read(path: path) } catch { throw SessionError.sensorUnavailable("replay \(error)") }
        }
        guard let first = loaded.samples.first else {
            throw SessionError.sensorUnavailable("replay \(path): no samples recorded")
        }
        // From the session's start (its setup multiplied by a fast replay's speed is seconds of the recording).
        let start = sink.sessionStartedAt?.wallMs ?? clock.nowMs()
        let shift = start - (span?.startMs ?? first.timestampMs)
        let samples = loaded.samples.map { s -> BiosignalSample in
            var s = s
            s.timestampMs += shift
            return s
        }
        let startMono = sink.sessionStartedAt?.monotonicMs ?? clock.monotonicMs()
        let endMs = span.map { $0.endMs + shift }
        run.withLock { $0 = Run(samples: samples, startMs: start, startMonoMs: startMono, sink: sink, endMs: endMs) }
        let notes = loaded.notes
        if !notes.isEmpty { logger.warning("replay \(path): \(notes.joined(separator: "; "))") }
        sink.status(SensorStatus(
            source: name, state: .streaming,
            message: notes.isEmpty ? nil : "\(path): \(notes.joined(separator: "; "))"))
        deliverDue()
    }

    public func stopStreaming() async {
        let stopped = run.withLock { r -> (timer: (any ScheduledAction)?, sink: ProviderSink, finished: Bool)? in
            defer { r = nil }
            return r.map { ($0.timer, $0.sink, $0.finished) }
        }
        stopped?.timer?.cancel()
        // Stopped before its end: the last status is not `streaming`.
        if let stopped, !stopped.finished {
            stopped.sink.status(SensorStatus(source: name, state: .disconnected, message: "replay stopped"))
        }
    }

    /// Monotonic time at which a sample (or the end, at `ms`) is due.
    private func dueMs(_ sample: BiosignalSample, _ r: Run) -> Int64 { dueMs(atWallMs: sample.timestampMs, r) }

    private func dueMs(atWallMs ms: Int64, _ r: Run) -> Int64 {
        r.startMonoMs + Int64((Double(ms - r.startMs) / speed).rounded())
    }

    /// Delivers every sample that is due, in order, then sets the timer for the next. Runs under the lock, so a
    /// timer firing early cannot interleave two deliveries.
    private func deliverDue() {
        run.withLock { r in
            guard var current = r else { return }
            let now = clock.monotonicMs()
            while current.index < current.samples.count, dueMs(current.samples[current.index], current) <= now {
                current.sink.send(current.samples[current.index])
                current.index += 1
            }
            if current.index < current.samples.count {
                let next = dueMs(current.samples[current.index], current)
                current.timer = clock.schedule(atMonotonicMs: next) { [weak self] in self?.deliverDue() }
            } else if let end = current.endMs.map({ dueMs(atWallMs: $0, current) }), end > now {
                // The recorded session went on after its last sample: so does the replay.
                current.timer = clock.schedule(atMonotonicMs: end) { [weak self] in self?.deliverDue() }
                current.endMs = nil
            } else if !current.finished {
                current.finished = true
                current.sink.status(SensorStatus(source: name, state: .disconnected, message: "replay finished"))
            }
            r = current
        }
    }
}
