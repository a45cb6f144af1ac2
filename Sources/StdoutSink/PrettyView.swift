import Foundation
import GatewayEngine
import HRVAnalysis

/// The live one-screen terminal view of a session: heart rate, recent RR, HRV, breathing and each source's state.
/// `update` folds events and samples into the screen state; `render` draws it as text (pure, for tests).
public struct PrettyView: Sendable {
    public var sessionId = ""
    public var mode = ""
    public var durationSec: Int?
    public var startedAtMs: Int64?
    public var nowMs: Int64 = 0
    public var lastFrame: SessionMetrics?
    public var frameSeq = 0
    /// The last dozen RR intervals per device.
    public var recentRR: [String: [Double]] = [:]
    /// The devices (not the camera) in the order their first sample came.
    public var deviceOrder: [String] = []
    public var lastSample: [String: BiosignalSample] = [:]
    public var sources: [String: SensorStatus] = [:]
    public var ended: String?
    /// The session ended with `session_error`.
    public var failed = false
    /// Shown under the end of the session (e.g. where it was recorded and how to export it).
    public var endNote: String?
    /// The latest paced-breathing cue.
    public var cue: BreathingCue?
    /// Raw ECG samples received per device (Polar PMD).
    public var ecgSamples: [String: Int] = [:]
    /// The latest live DFA threshold crossing, and when (session time, s).
    public var lastCrossing: (crossing: DFAThresholdCrossing, elapsedS: Int)?

    public init(sessionId: String = "", mode: String = "", durationSec: Int? = nil, endNote: String? = nil) {
        self.sessionId = sessionId
        self.mode = mode
        self.durationSec = durationSec
        self.endNote = endNote
    }

    public mutating func update(_ event: SessionEvent) {
        switch event {
        case .started(_, let at):
            startedAtMs = at
            nowMs = at
        case .frame(_, let seq, let at, let metrics, _):
            frameSeq = seq
            lastFrame = metrics
            nowMs = at
        case .biosignalFrame(_, _, let at, _):
            nowMs = at
        case .summary(_, let duration, let metrics, _):
            lastFrame = metrics
            ended = "session ended after \(duration) s"
        case .error(_, let code, let message):
            ended = "session error \(code.rawValue): \(message)"
            failed = true
        case .sensorStatus(_, let at, let status):
            sources[status.deviceId ?? status.source] = status
            nowMs = at
        case .dfaThreshold(_, let at, let crossing):
            nowMs = at
            lastCrossing = (crossing, startedAtMs.map { Int(max(0, at - $0) / 1000) } ?? 0)
        case .breathingCue(_, let at, let cue):
            self.cue = cue
            nowMs = at
        }
    }

    public mutating func update(_ sample: BiosignalSample) {
        if let ecg = sample.ecgUv { ecgSamples[sample.deviceId ?? sample.source, default: 0] += ecg.count }
        guard !sample.isWaveformOnly else { return }
        let device = sample.deviceId ?? sample.source
        lastSample[device] = sample
        if sample.source != SessionMetrics.cameraSource, !deviceOrder.contains(device) { deviceOrder.append(device) }
        if let rr = sample.rrIntervalsMs, !rr.isEmpty {
            var own = recentRR[device, default: []] + rr
            if own.count > 12 { own.removeFirst(own.count - 12) }
            recentRR[device] = own
        }
        nowMs = max(nowMs, sample.timestampMs)
    }

    /// The device the heart-rate, RR and HRV lines are about: the one the session's top level speaks for
    /// (`primary_device`) when several send, else the first strap with beats, else the first strap (a camera has its
    /// own line). Several straps' notifications interleaved would show two people's heart rates in turn.
    var topDevice: String? {
        lastFrame?.primaryDevice ?? deviceOrder.first { recentRR[$0] != nil } ?? deviceOrder.first
    }

    public func render() -> String {
        var lines: [String] = []
        let elapsed = startedAtMs.map { Int(max(0, nowMs - $0) / 1000) } ?? 0
        let total = durationSec.map { " / " + Self.clock($0) } ?? ""
        lines.append("hr-gateway  session \(sessionId)  \(mode)  \(Self.clock(elapsed))\(total)  frame #\(frameSeq)")
        lines.append("")
        let top = topDevice
        let live = top.flatMap { lastSample[$0] }
            ?? lastSample.values.filter { $0.source != SessionMetrics.cameraSource }.max { $0.timestampMs < $1.timestampMs }
        let hrLive = live.map { Self.num($0.bpm, 0) + " bpm" } ?? "—"
        let hrMean = lastFrame.flatMap { $0.sampleCount > 0 ? Self.num($0.hrMeanBpm, 1) + " bpm" : nil } ?? "—"
        let fromRR = lastFrame?.hrFromRRBpm.map { "   from RR " + Self.num($0, 1) } ?? ""
        let several = deviceOrder.count > 1 ? top.map { "   (\($0))" } ?? "" : ""
        lines.append("Heart rate   now \(hrLive)   window mean \(hrMean)\(fromRR)\(several)")
        let rr = top.flatMap { recentRR[$0] } ?? []
        lines.append("RR (ms)      " + (rr.isEmpty ? "—" : rr.map { Self.num($0, 0) }.joined(separator: " ")))
        if let m = lastFrame, m.sampleCount == 0 {
            // A summary of a session that received nothing: its zeros (the wire format's) are not shown as values.
            lines.append("HRV          — (no samples in the window)")
        } else if let m = lastFrame {
            var hrv = "SDNN \(Self.num(m.hrSdnnMs, 1)) ms   RMSSD \(Self.num(m.rmssdMs, 1)) ms   pNN50 \(Self.num(m.pnn50, 1)) %"
            if let n = m.rrCount { hrv += "   beats \(n)" }
            if let a = m.artifactCount { hrv += "   corrected \(a)" }
            lines.append("HRV          " + hrv)
            var breathing = m.respRateRRBpm.map { "\(Self.num($0, 1)) /min from RR" } ?? "—"
            if let c = m.respRateRRConfidence { breathing += " (confidence \(Self.num(c, 2)))" }
            if let cam = m.breathingRateBpm { breathing += "   camera \(Self.num(cam, 1)) /min" }
            lines.append("Breathing    " + breathing)
            if let d = m.liveDFA {
                // Live DFA alpha1 against 0.75 (aerobic threshold) and 0.5 (anaerobic threshold), docs/hrv.md §10.
                var dfa: String
                if let a = d.alpha1 {
                    let zone = a >= 0.75 ? "aerobic" : a >= 0.5 ? "past the aerobic threshold" : "past the anaerobic threshold"
                    dfa = "\(Self.num(a, 2)) (\(zone))   \(Self.num(d.artifactPercent, 1)) % corrected"
                } else {
                    dfa = "withheld: \(d.withheldReason ?? "no estimate")"
                }
                if let (c, t) = lastCrossing {
                    let who = deviceOrder.count > 1 ? c.deviceId.map { " (\($0))" } ?? "" : ""
                    dfa += "   crossed \(Self.num(c.threshold, 2)) \(c.direction.rawValue)\(who) at \(Self.clock(t))"
                }
                lines.append("DFA alpha1   " + dfa)
            }
            if let paced = m.pacedBreathingRateBpm {
                var answer = "paced \(Self.num(paced, 2)) /min"
                if let a = m.breathingAdherence { answer += "   adherence \(Self.num(100 * a, 0)) %" }
                if let r = m.rsaAmplitudeBpm { answer += "   RSA \(Self.num(r, 1)) bpm" }
                if let c = m.coherence { answer += "   coherence \(Self.num(c, 2))" }
                lines.append("Heart answer " + answer)
            }
            if let cam = m.cameraHrBpm {
                lines.append("Camera       \(Self.num(cam, 1)) bpm   confidence \(Self.num(m.cameraConfidence ?? 0, 2))")
            }
            if let p = m.primaryDevice, let own = m.devices?[p], (m.devices?.count ?? 0) > 1 {
                lines.append("Window       \(own.sampleCount) samples of \(p)   (\(m.sampleCount) of every device)")
            } else {
                lines.append("Window       \(m.sampleCount) samples")
            }
        } else {
            lines.append("HRV          waiting for the first frame")
        }
        if let cue {
            let arrow = [BreathingCue.Phase.inhale: "breathe in", .hold: "hold", .exhale: "breathe out", .holdOut: "hold"]
            lines.append("Pacer        \(arrow[cue.phase] ?? cue.phase.rawValue) for \(Self.num(Double(cue.phaseDurationMs) / 1000, 1)) s"
                + "   breath \(cue.cycle)   "
                + (cue.assessmentStep.map { "resonance assessment step \($0) of \(cue.assessmentSteps ?? $0), " } ?? "\(cue.pattern), ")
                + "\(Self.num(cue.rateBpm, 2)) /min")
        }
        if ended != nil, let assessment = lastFrame?.jsonValue["resonance_assessment"] {
            lines.append("")
            lines += ResonanceReport.lines(assessment)
        }
        lines.append("")
        if sources.isEmpty { lines.append("Sources      starting") }
        for key in sources.keys.sorted() {
            let s = sources[key]!
            var line = "Source       \(key)  \(s.state.rawValue)"
            if let b = s.batteryPercent { line += "  battery \(b) %" }
            if let contact = lastSample[key]?.contact {
                line += "  skin contact " + (contact == .contact ? "yes" : contact == .noContact ? "NO" : "n/a")
            }
            if let n = ecgSamples[key] { line += "  ECG \(n) samples" }
            if let d = lastFrame?.devices?[key] {
                // Several devices: each one's own window values, and which one the lines above are.
                line += "  mean \(Self.num(d.hrMeanBpm, 1)) bpm"
                if d.rrCount != nil { line += "  RMSSD \(Self.num(d.rmssdMs, 1)) ms" }
                if key == lastFrame?.primaryDevice { line += "  [shown above]" }
            }
            if let m = s.message { line += "  (\(m))" }
            lines.append(line)
        }
        // Devices with no status of their own (a replayed team session: one `replay` source, several straps).
        if let devices = lastFrame?.devices, devices.count > 1 {
            for key in devices.keys.sorted() where sources[key] == nil {
                let d = devices[key]!
                var line = "Device       \(key)  mean \(Self.num(d.hrMeanBpm, 1)) bpm"
                if d.rrCount != nil { line += "  RMSSD \(Self.num(d.rmssdMs, 1)) ms" }
                if key == lastFrame?.primaryDevice { line += "  [shown above]" }
                lines.append(line)
            }
        }
        lines.append("")
        if let ended {
            lines.append(ended)
            if lastSample.isEmpty {
                lines.append(failed ? Self.nothingReceivedNote : Self.nothingMeasuredNote)
            } else if let endNote {
                lines.append(endNote)
            }
        } else if let durationSec {
            lines.append("Ends by itself after \(Self.clock(durationSec)); Ctrl-C stops it earlier, with its summary.")
        } else {
            lines.append("Ctrl-C stops the session and shows its summary.")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Said instead of the end note when a session failed before any source delivered a sample: there is nothing to
    /// export, and the failed attempt stays listed (so that a headless service shows why it recorded nothing).
    public static let nothingReceivedNote =
        "Nothing was received, so there is nothing to export (the attempt is listed as failed in `hr-gateway sessions list`).\n"
        + "`hr-gateway doctor` checks, step by step, what the sources need."

    /// Said instead of the end note when a session ran to its end without any source delivering a sample (a strap
    /// never found or never worn, a camera that never saw a face): its summary's zeros are no measurement.
    public static let nothingMeasuredNote =
        "No source delivered a sample, so the summary measures nothing (its 0.0 values mean no data; the session is\n"
        + "listed with 0 samples). A strap: worn, moistened and in range (`hr-gateway scan`)? A camera: a face in view?\n"
        + "`hr-gateway doctor` checks, step by step, what the sources need."

    static func num(_ x: Double, _ decimals: Int) -> String { String(format: "%.\(decimals)f", x) }

    static func clock(_ seconds: Int) -> String {
        String(format: "%02d:%02d:%02d", seconds / 3600, (seconds / 60) % 60, seconds % 60)
    }
}

/// Redraws a `PrettyView` on a terminal.
public final class PrettyTerminal: Sendable {
    private let view: Locked<PrettyView>
    /// A terminal that takes no cursor movement (TERM=dumb: an editor's shell buffer, a serial console): each screen
    /// is printed after the last, on events and frames only (not on every sample), with a blank line between.
    private let dumb: Bool

    public init(view: PrettyView, dumb: Bool = ProcessInfo.processInfo.environment["TERM"] == "dumb") {
        self.view = Locked(view)
        self.dumb = dumb
    }

    /// Each answers false when standard output's reader has gone.
    @discardableResult public func handle(_ event: SessionEvent) -> Bool { draw { $0.update(event) } }
    @discardableResult public func handle(_ sample: BiosignalSample) -> Bool {
        guard !dumb else {
            view.withLock { $0.update(sample) }
            return true
        }
        return draw { $0.update(sample) }
    }

    private func draw(_ change: (inout PrettyView) -> Void) -> Bool {
        let text = view.withLock { v -> String in
            change(&v)
            return v.render()
        }
        if dumb { return StandardStream.output.write(Data((text + (text.hasSuffix("\n") ? "" : "\n") + "\n").utf8)) }
        // Home, draw, clear to the end of the screen: no flicker.
        return StandardStream.output.write(
            Data(("\u{1B}[H" + text.replacingOccurrences(of: "\n", with: "\u{1B}[K\n") + "\u{1B}[J").utf8))
    }

    @discardableResult public func begin() -> Bool {
        dumb ? true : StandardStream.output.write(Data("\u{1B}[2J\u{1B}[H".utf8))
    }
}
