import CLSL
import Foundation
import GatewayEngine
import GatewaySink
import Synchronization
import SystemCalls

/// liblsl, loaded at run time (docs/lsl.md): not in Debian; the `pylsl` wheel from PyPI carries a copy.
public enum LSLLibrary {
    public struct Loaded: Sendable, Equatable {
        public var path: String
        /// liblsl's version as it reports it (e.g. 118 for 1.18).
        public var version: Int
    }

    public struct Unavailable: Error, Sendable, CustomStringConvertible {
        public let tried: String
        /// HR_GATEWAY_LIBLSL, when it was set: then only that path was tried, and it is what to fix.
        public var configured: String?
        public var description: String {
            if let configured {
                return "HR_GATEWAY_LIBLSL=\(configured) did not load as liblsl (\(tried.prefix(600))). Set it to the path "
                    + "of liblsl.so (such as pylsl's: python3 -c 'import pylsl, os; print(os.path.dirname(pylsl.__file__))'"
                    + "/lib/liblsl.so), or unset it to search the usual places"
            }
            return "liblsl (Lab Streaming Layer) is not installed. Install it with `pip install pylsl` (its wheel carries "
                + "liblsl), or set HR_GATEWAY_LIBLSL to the path of liblsl.so. Tried: \(tried.prefix(600))"
        }
        /// What doctor's line suggests.
        public var fix: String {
            configured == nil ? "pip install pylsl (its wheel carries liblsl), or set HR_GATEWAY_LIBLSL to liblsl.so's path"
                : "set HR_GATEWAY_LIBLSL to the path of liblsl.so itself, or unset it"
        }
    }

    /// Where pip puts pylsl's copy, for the usual Python installs (the first that exists is tried after the
    /// loader's own search).
    static func pylslCandidates() -> [String] {
        var dirs: [String] = []
        let fm = FileManager.default
        var roots = ["/usr/local/lib", "/usr/lib"]
        if let home = ProcessInfo.processInfo.environment["HOME"] { roots.insert(home + "/.local/lib", at: 0) }
        if let venv = ProcessInfo.processInfo.environment["VIRTUAL_ENV"] { roots.insert(venv + "/lib", at: 0) }
        for root in roots {
            for python in ((try? fm.contentsOfDirectory(atPath: root)) ?? []).filter({ $0.hasPrefix("python3") }).sorted() {
                for packages in ["site-packages", "dist-packages"] {
                    dirs.append("\(root)/\(python)/\(packages)/pylsl/lib/liblsl.so")
                }
            }
        }
        return dirs.filter { fm.fileExists(atPath: $0) }
    }

    /// Loads liblsl (once per process); throws `Unavailable` with what was tried.
    public static func load() throws(Unavailable) -> Loaded {
        let candidates = pylslCandidates().map { $0 + "\0" }.joined() + "\0"
        var path = [CChar](repeating: 0, count: 1024)
        var why = [CChar](repeating: 0, count: 2048)
        let ok = candidates.withCString { hrl_load($0, &path, path.count, &why, why.count) }
        func text(_ c: [CChar]) -> String { String(decoding: c.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        guard ok == 1 else {
            let configured = ProcessInfo.processInfo.environment["HR_GATEWAY_LIBLSL"].flatMap { $0.isEmpty ? nil : $0 }
            throw Unavailable(tried: text(why), configured: configured)
        }
        return Loaded(path: text(path), version: Int(hrl_library_version()))
    }

    /// LSL's clock (seconds, the domain of every time stamp).
    static func localClock() -> Double { hrl_local_clock() }
}

/// One LSL outlet.
// @unchecked Sendable: liblsl's outlets are thread-safe for pushing (its documentation: "all push functions are
// thread-safe"); the pointer is destroyed once, in `close()`, after the sink stops pushing (the owner's lock).
final class LSLOutlet: @unchecked Sendable {
    private let outlet: hrl_outlet
    let channels: Int
    /// Continuity of a regular stream's stamps from chunk to chunk.
    let regular = Mutex(RegularStamps())

    init?(name: String, type: String, rate: Double, source: String, channels list: [(label: String, unit: String, type: String)],
          metadata: [(String, String)], strings: Bool = false) {
        let format = Int32(strings ? HRL_STRING : HRL_DOUBLE64)
        guard let info = hrl_create_streaminfo(name, type, Int32(list.count), rate, format, source) else {
            return nil
        }
        defer { hrl_destroy_streaminfo(info) }
        if let desc = hrl_get_desc(info) {
            let channels = hrl_append_child(desc, "channels")
            for channel in list {
                let c = hrl_append_child(channels, "channel")
                hrl_append_child_value(c, "label", channel.label)
                hrl_append_child_value(c, "unit", channel.unit)
                hrl_append_child_value(c, "type", channel.type)
            }
            let gateway = hrl_append_child(desc, "acquisition")
            for (k, v) in metadata { hrl_append_child_value(gateway, k, v) }
        }
        guard let o = hrl_create_outlet(info, 0, 360) else { return nil }
        outlet = o
        channels = list.count
    }

    /// `values` interleaved, `channels` per time stamp.
    func push(_ values: [Double], timestamps: [Double]) {
        guard !values.isEmpty, values.count == timestamps.count * channels else { return }
        values.withUnsafeBufferPointer { v in
            timestamps.withUnsafeBufferPointer { t in
                _ = hrl_push_chunk(outlet, v.baseAddress, UInt(v.count), t.baseAddress, 1)
            }
        }
    }

    /// One marker (a one-channel string stream).
    func push(text: String, timestamp: Double) { _ = hrl_push_string(outlet, text, timestamp) }

    var hasConsumers: Bool { hrl_have_consumers(outlet) != 0 }

    func close() { hrl_destroy_outlet(outlet) }
}

/// Publishes the session to the Lab Streaming Layer (`stream --lsl`, docs/lsl.md): per device, an `HR` stream
/// (bpm, irregular rate, one value per strap reading), an `RR` stream (ms, irregular, one value per beat, stamped at
/// the beat), with `--ecg` an `ECG` stream (µV at 130 Hz, every sample stamped at its time) and with `--acc` an
/// `Accelerometer` stream (X, Y, Z in g at the chosen rate). Time stamps are on
/// LSL's clock: each sample's wall-clock age when it is pushed, taken from `lsl_local_clock()`. Regular streams
/// (ECG, accelerometer) are stamped continuously from chunk to chunk (`RegularStamps`). One `Markers` stream (strings,
/// irregular) carries the session's events but its frames, each its wire JSON, stamped at its time (a breathing cue
/// at its phase's start).
public final class LSLSink: SessionSink {
    public let name = "lsl"
    public let library: LSLLibrary.Loaded
    private let outlets = Mutex<[String: LSLOutlet]>([:])
    private let closed = Mutex(false)
    private let nowMs: @Sendable () -> Int64
    private let prefix: String

    /// Names this gateway in the markers stream's source id (the host's name, or its gateway id).
    private let source: String
    /// The markers stream's name.
    private let markersName: String

    /// Throws `LSLLibrary.Unavailable` when liblsl cannot be loaded. `prefix` starts every stream name;
    /// `gatewayId` (`--gateway-id`), when given, names the gateway in the markers stream's name and source id, so
    /// that two gateways on one host publish two markers streams a recorder tells apart; without it the host name
    /// is in the source id (one markers stream per host).
    public init(
        prefix: String = "hr-gateway", gatewayId: String? = nil,
        nowMs: @escaping @Sendable () -> Int64 = { SystemSessionClock().nowMs() }
    ) throws(LSLLibrary.Unavailable) {
        library = try LSLLibrary.load()
        self.prefix = prefix
        self.source = gatewayId ?? SystemCall.hostName()
        self.markersName = gatewayId.map { "\(prefix) \($0) Markers" } ?? "\(prefix) Markers"
        self.nowMs = nowMs
    }

    /// The stream names published so far (for the status line and tests).
    public var streamNames: [String] { outlets.withLock { $0.keys.sorted() } }

    private func outlet(_ device: String, _ kind: String, rate: Double, unit: String, source: String,
                        labels: [String]? = nil) -> LSLOutlet? {
        let key = "\(prefix) \(device) \(kind)"
        return outlets.withLock { all -> LSLOutlet? in
            if let o = all[key] { return o }
            guard !closed.withLock({ $0 }) else { return nil }
            let o = LSLOutlet(
                name: key, type: kind == "HR" ? "HeartRate" : kind, rate: rate,
                source: "hr-gateway:\(device):\(kind.lowercased())",
                channels: (labels ?? [kind]).map { ($0, unit, kind) },
                metadata: [("manufacturer", "hr-gateway"), ("version", GatewayVersion.current),
                           ("device_id", device), ("source", source)])
            all[key] = o
            return o
        }
    }

    public func receive(sample: BiosignalSample) {
        let device = sample.deviceId ?? sample.source
        // Wall-clock age of a time on LSL's clock.
        let nowLSL = LSLLibrary.localClock()
        let now = Double(nowMs())
        func lsl(_ ms: Double) -> Double { nowLSL - (now - ms) / 1000 }
        if let ecg = sample.ecgUv, !ecg.isEmpty, let rate = sample.ecgRateHz, rate > 0 {
            guard let o = outlet(device, "ECG", rate: rate, unit: "microvolts", source: sample.source) else { return }
            let stamps = o.regular.withLock {
                $0.stamps(first: lsl(Double(sample.timestampMs)), count: ecg.count, rateHz: rate, gapBefore: sample.gapBefore)
            }
            o.push(ecg.map(Double.init), timestamps: stamps)
        }
        if let acc = sample.accG, !acc.isEmpty, let rate = sample.accRateHz, rate > 0,
            let o = outlet(device, "Accelerometer", rate: rate, unit: "g", source: sample.source, labels: ["X", "Y", "Z"])
        {
            let stamps = o.regular.withLock {
                $0.stamps(first: lsl(Double(sample.timestampMs)), count: acc.count, rateHz: rate, gapBefore: sample.gapBefore)
            }
            o.push(acc.flatMap { [$0.x, $0.y, $0.z] }, timestamps: stamps)
        }
        if sample.isWaveformOnly { return }
        if sample.bpm > 0, sample.bpm.isFinite, sample.contact != .noContact,
            let o = outlet(device, "HR", rate: 0, unit: "bpm", source: sample.source)
        {
            o.push([sample.bpm], timestamps: [lsl(Double(sample.timestampMs))])
        }
        let rr = (sample.rrIntervalsMs ?? []).filter { $0.isFinite && $0 > 0 }
        if !rr.isEmpty, let o = outlet(device, "RR", rate: 0, unit: "ms", source: sample.source) {
            // The last beat ends at the notification, earlier ones before it.
            var end = Double(sample.timestampMs)
            var stamps: [Double] = []
            for r in rr.reversed() {
                stamps.append(lsl(end))
                end -= r
            }
            o.push(rr, timestamps: stamps.reversed())
        }
    }

    /// The session's events as markers: everything but the periodic frames (their metrics are the HR and RR
    /// streams' business), stamped at the event's own time: a breathing cue's `starts_at_ms`, else `emitted_at_ms`,
    /// `started_at_ms` or a summary's `end_ms`.
    public func receive(event: EncodedEvent) {
        switch event.event {
        case .frame, .biosignalFrame: return
        default: break
        }
        let key = markersName
        let markers = outlets.withLock { all -> LSLOutlet? in
            if let o = all[key] { return o }
            guard !closed.withLock({ $0 }) else { return nil }
            // An inlet gets only what is pushed after it connects, and the outlet is made for the first event, so
            // that event (`session_started`) would reach no one: its JSON and the session id go into the stream's
            // description, which every consumer reads on connecting (LabRecorder keeps it in the file's header).
            var metadata = [("manufacturer", "hr-gateway"), ("version", GatewayVersion.current), ("format", "JSON")]
            if case .started(let id, _) = event.event {
                metadata += [("session_id", id), ("session_started", event.json)]
            }
            let o = LSLOutlet(
                name: key, type: "Markers", rate: 0, source: "hr-gateway:\(source):markers",
                channels: [("event", "", "Marker")], metadata: metadata, strings: true)
            all[key] = o
            return o
        }
        guard let markers else { return }
        let v = event.value
        let ms = [v["starts_at_ms"], v["emitted_at_ms"], v["started_at_ms"], v["metrics"]?["end_ms"]]
            .lazy.compactMap { $0?.intValue }.first ?? nowMs()
        let nowLSL = LSLLibrary.localClock()
        markers.push(text: event.json, timestamp: nowLSL - Double(nowMs() - ms) / 1000)
    }

    /// How long outlets with consumers stay open after the session, so that the last samples pushed reach them
    /// (liblsl sends from its own threads; destroying an outlet drops what it has not sent).
    public static let lingerMs = 1000

    public func run() async throws {
        await untilGracefulShutdown()
        if outlets.withLock({ $0.values.contains(where: \.hasConsumers) }) {
            try? await Task.sleep(for: .milliseconds(Self.lingerMs))
        }
        closed.withLock { $0 = true }
        let all = outlets.withLock { o -> [LSLOutlet] in
            defer { o = [:] }
            return Array(o.values)
        }
        for o in all { o.close() }
    }
}

/// Time stamps for the chunks of a regular stream (ECG, accelerometer), in seconds on LSL's clock.
///
/// Each chunk comes with the time of its first sample, mapped from the strap's clock to the host's and quantised to
/// the millisecond on the way (`BiosignalSample.timestampMs`); taken as they are, consecutive chunks would join with
/// steps up to a few milliseconds off the sample period. So each chunk continues the previous one: its first sample
/// is one period after the previous chunk's last, and the difference from its own mapped time is slewed in, at most
/// `maxSlew` (seconds per second of signal) spread evenly over the chunk's samples. The stamps therefore stay within
/// the mapping's own error of the mapped times, and never step by more than `maxSlew` of a period.
///
/// The period is the sensor's real one: a Polar H10's "130 Hz" is 128–131 Hz (docs/pmd.md, "Sample rate"), beyond
/// what `maxSlew` can follow. Once three or more of a run's chunks span `minimumFitSpan` seconds, the rate their
/// times measure (`WaveformRate.Fit`, the line the exports and R-peak timing use) replaces the nominal one when it
/// differs from it: a strap at 128 Hz is stamped 1/128 s apart. What built up before (about 15 ms for an ECG at
/// 128 Hz, none at 130.17 Hz, within `maxSlew`) is slewed out like any other difference; more than `stepThreshold`
/// (a stream 2 % off in chunks of over a second: an accelerometer at 24.5 Hz for 25) is stepped over once, to the
/// chunk's own time (forward; backward no further than half a period after the previous chunk's last stamp, so
/// that the stamps only go forward, the rest slewed out), and the stamps follow the measured rate from there.
///
/// A chunk after a gap (`gapBefore`, frames lost), or more than `stepThreshold` seconds away from where the stream
/// should be (a clock reset; in a run's first chunks, before its rate can be measured, 5 % of its duration more),
/// starts a new run afresh at its mapped time.
public struct RegularStamps: Sendable {
    public static let maxSlew = 0.002
    public static let stepThreshold = 0.05
    public static let minimumFitSpan = 1.0

    /// Where the next chunk's first sample falls (seconds), once a chunk has been stamped.
    public private(set) var next: Double?
    /// The rate the current run's chunk times measure, when it is not the nominal one (Hz).
    public private(set) var measuredRateHz: Double?
    private var fit = WaveformRate.Fit()
    private var runSamples = 0

    public init() {}

    public mutating func stamps(first mapped: Double, count: Int, rateHz: Double, gapBefore: Bool = false) -> [Double] {
        guard count > 0, rateHz > 0, rateHz.isFinite, mapped.isFinite else { return [] }
        // Until the run's fit has what it needs to measure a rate (three chunks over `minimumFitSpan`), the stream may
        // run up to 5 % (what `WaveformRate` takes for a rate) off the nominal one: so far from where the nominal
        // rate puts it, a chunk still continues the run (whose fit needs it), stamped at its own time (a step, in a
        // run's first chunks only).
        let young = fit.count < 3 || fit.spanMs < Self.minimumFitSpan * 1000
        let allowance = young ? 0.05 * Double(runSamples) / rateHz : 0
        let continuing = next.map { !gapBefore && abs(mapped - $0) <= Self.stepThreshold + allowance } ?? false
        if !continuing {
            fit = WaveformRate.Fit()
            runSamples = 0
        }
        fit.add(index: runSamples, timeMs: mapped * 1000)
        runSamples += count
        measuredRateHz = fit.measured(nominalHz: rateHz, minimumSpanMs: Self.minimumFitSpan * 1000)?.rateHz
        let period = 1 / (measuredRateHz ?? rateHz)
        let duration = Double(count) * period
        var start = mapped
        var step = period
        if continuing, let predicted = next {
            if abs(mapped - predicted) <= Self.stepThreshold {
                let limit = Self.maxSlew * duration
                let correction = min(max(mapped - predicted, -limit), limit)
                start = predicted
                step = period + correction / Double(count)
            } else {
                // A step in a run's first chunks: never back past the previous chunk's samples (a stream faster
                // than the nominal rate); what is left is slewed out.
                start = max(mapped, predicted - period / 2)
            }
        }
        next = start + Double(count) * step
        return (0..<count).map { start + Double($0) * step }
    }
}
