import Foundation
import GatewayEngine

/// Samples per second through the session engine: append to the window, and a frame (metrics with Kubios-corrected
/// HRV over a 60 s window) every 5 s of sample time, in virtual time so that only the engine's work is measured.
func runEngineBenchmark() async {
    struct Pump: BiosignalProvider {
        let sink = Locked<ProviderSink?>(nil)
        var name: String { "bench" }
        var isAvailable: Bool { true }
        func startStreaming(into sink: ProviderSink) async throws { self.sink.withLock { $0 = sink } }
        func stopStreaming() async {}
    }
    for (label, perSecond) in [("1 Hz strap", 1), ("30 Hz camera-rate", 30)] {
        let clock = ManualSessionClock(startMs: 0)
        let pump = Pump()
        let engine = SessionEngine(providers: [pump], clock: clock)
        let frames = Locked(0)
        let token = engine.observe { e in if e.type == "session_frame" { frames.withLock { $0 += 1 } } }
        let config = SessionConfig(sessionId: "bench", mode: .focus, durationSec: 1_000_000)
        _ = try? await engine.startSession(config)
        let sink = pump.sink.withLock { $0 }!
        let seconds = 3_600
        let stepMs = Int64(1000 / perSecond)
        let start = DispatchTime.now().uptimeNanoseconds
        var t: Int64 = 0
        for i in 0..<(seconds * perSecond) {
            t = Int64(i) * stepMs
            let rr = 850.0 + 40 * sin(Double(i) / 4)
            sink.send(BiosignalSample(timestampMs: t, bpm: 60000 / rr, rrIntervalsMs: perSecond == 1 ? [rr] : nil, source: "bench"))
            if i % perSecond == 0 { clock.advance(toMs: t) }
        }
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        let n = Double(seconds * perSecond)
        print(String(format: "engine %@: %.0f samples/s (%d samples, %d frames, %.3f s; %.1f µs per sample incl. frames)",
                     label, n / elapsed, seconds * perSecond, frames.withLock { $0 }, elapsed, elapsed / n * 1e6))
        token.cancel()
        try? await engine.stopSession(sessionId: "bench")
    }
}
