import GatewayEngine

/// Plays a recorded sample file back into a session, at real speed or faster.
///
/// Timestamps keep their original spacing and are shifted so that the first sample lands at the start of the
/// replay; at `speed` 10 a minute of recording is delivered in six seconds. When the file is exhausted the provider
/// reports `disconnected` with the message "replay finished".
public final class ReplayBiosignalProvider: BiosignalProvider {
    public let path: String
    public let speed: Double
    private let clock: any SessionClock

    private struct Run {
        var samples: [BiosignalSample]
        var index = 0
        var startMs: Int64
        var sink: ProviderSink
        var timer: (any ScheduledAction)?
    }

    private let run = Locked<Run?>(nil)

    public var name: String { "replay" }
    public var isAvailable: Bool { true }

    public init(path: String, speed: Double = 1, clock: any SessionClock = SystemSessionClock()) {
        self.path = path
        self.speed = speed > 0 && speed.isFinite ? speed : 1
        self.clock = clock
    }

    /// Throws `sensorUnavailable` naming the bad line when the file cannot be read.
    public func startStreaming(into sink: ProviderSink) async throws {
        let loaded: (samples: [BiosignalSample], truncatedTail: Bool)
        do { loaded = try SampleFile.read(path: path) } catch { throw SessionError.sensorUnavailable("replay \(error)") }
        guard let first = loaded.samples.first else {
            throw SessionError.sensorUnavailable("replay \(path): no samples in the file")
        }
        let start = clock.nowMs()
        let shift = start - first.timestampMs
        let samples = loaded.samples.map { s -> BiosignalSample in
            var s = s
            s.timestampMs += shift
            return s
        }
        run.withLock { $0 = Run(samples: samples, startMs: start, sink: sink) }
        sink.status(SensorStatus(
            source: name, state: .streaming,
            message: loaded.truncatedTail ? "\(path): last line incomplete, skipped" : nil))
        deliverDue()
    }

    public func stopStreaming() async {
        let timer = run.withLock { r -> (any ScheduledAction)? in
            defer { r = nil }
            return r?.timer
        }
        timer?.cancel()
    }

    /// Replay time at which a sample is delivered.
    private func dueMs(_ sample: BiosignalSample, _ r: Run) -> Int64 {
        r.startMs + Int64((Double(sample.timestampMs - r.startMs) / speed).rounded())
    }

    private func deliverDue() {
        let now = clock.nowMs()
        let (sink, due, finished) = run.withLock { r -> (ProviderSink?, [BiosignalSample], Bool) in
            guard var current = r else { return (nil, [], false) }
            var due: [BiosignalSample] = []
            while current.index < current.samples.count, dueMs(current.samples[current.index], current) <= now {
                due.append(current.samples[current.index])
                current.index += 1
            }
            let finished = current.index == current.samples.count
            if !finished {
                let next = dueMs(current.samples[current.index], current)
                current.timer = clock.schedule(atMs: next) { [weak self] in self?.deliverDue() }
            }
            r = current
            return (current.sink, due, finished)
        }
        guard let sink else { return }
        for s in due { sink.send(s) }
        if finished { sink.status(SensorStatus(source: name, state: .disconnected, message: "replay finished")) }
    }
}
