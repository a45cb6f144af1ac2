import BlueZ
import DBus
import GatewayEngine
import Logging
import PolarPMD

/// What to stream from a Polar strap's Measurement Data service besides heart rate (`stream --ecg`, `--acc HZ`).
public struct PolarStreams: Sendable, Equatable {
    public var ecg: Bool
    /// Accelerometer rate (25, 50, 100 or 200 Hz on an H10, ±8 g, 16 bit); nil: none.
    public var accHz: Int?
    /// How long the strap has to answer each request, ms, on the session clock.
    public var responseTimeoutMs: Int64 = 5_000
    public init(ecg: Bool = true, accHz: Int? = nil) {
        self.ecg = ecg
        self.accHz = accHz
    }

    /// The rates an H10 offers.
    public static let accRates = [25, 50, 100, 200]
}

/// The source names of raw chunks from a Polar strap.
public let polarECGSource = "polar_ecg"
public let polarAccSource = "polar_acc"

/// Polar Measurement Data on one strap session (docs/pmd.md, "On a strap"): each time the strap streams heart rate,
/// finds the PMD service, enables the control point's indications and the data notifications, asks for ECG at
/// 130 Hz and the accelerometer (one request at a time, each answered by an indication), pairs when the strap
/// refuses the control point for lack of encryption (and, when BlueZ holds a bond the strap has forgotten, removes it
/// once so that the next connection pairs afresh), then turns data frames into chunks with host times from a
/// `PMDClockMapper` per stream. Bad frames are dropped and counted, never fatal.
final class PolarPMDLink: Sendable {
    struct Paths: Sendable, Equatable {
        var device: String
        var control: String
        var data: String
    }

    /// One measurement's stream: its clock fit and the previous frame's sensor time.
    struct Stream: Sendable {
        var mapper = PMDClockMapper()
        var previousFrameNs: UInt64?
        var pendingGap = false
        var factor: Float?
    }

    struct State: Sendable {
        var paths: Paths?
        var starting = false
        var on: Set<UInt8> = []
        var streams: [UInt8: Stream] = [:]
        var responses: AsyncStream<ControlEvent>.Continuation?
        /// Numbers each request's timeout, so that one that fires late is not taken for the next request's.
        var timeouts: UInt64 = 0
        var staleBondRemovals = 0
        var samples = 0
        var accSamples = 0
        var frames = 0
        var dropped = 0
        var gaps = 0
        var resets = 0
    }

    let streams: PolarStreams
    let sink: ProviderSink
    let logger: Logger
    /// The session's clock: the response timeout runs on it (virtual time in tests).
    let clock: any SessionClock
    let state = Locked(State())

    /// ECG as the H10 sends it.
    static let ecgSettings = PMDStreamSettings.h10ECG
    static let ecgRateHz = 130.0
    init(streams: PolarStreams, sink: ProviderSink, logger: Logger, clock: any SessionClock) {
        self.streams = streams
        self.sink = sink
        self.logger = logger
        self.clock = clock
    }

    /// Figures for tests and the status line (`samples` counts ECG samples).
    var counts: (samples: Int, frames: Int, dropped: Int, gaps: Int, resets: Int) {
        state.withLock { ($0.samples, $0.frames, $0.dropped, $0.gaps, $0.resets) }
    }

    var accSamples: Int { state.withLock { $0.accSamples } }
    var ecgOn: Bool { state.withLock { $0.on.contains(PMDMeasurementType.ecg.rawValue) } }

    /// Whether `path` is this link's control point or data characteristic.
    func handles(_ path: String) -> Bool {
        state.withLock { $0.paths.map { $0.control == path || $0.data == path } ?? false }
    }

    /// The link went down: the strap stops its streams, and the next streaming starts them again. The clock fits
    /// are kept (the sensor clock runs on), but the next frame of each stream starts a new run of samples.
    func linkLost() {
        state.withLock {
            $0.starting = false
            $0.on = []
            for key in $0.streams.keys {
                $0.streams[key]?.previousFrameNs = nil
                $0.streams[key]?.pendingGap = true
            }
        }
    }

    private func say(_ address: String, _ message: String) {
        sink.status(SensorStatus(source: BLEHeartRate.source, deviceId: address, state: .streaming, message: message))
    }

    /// The requests `streams` asks for, in order.
    private var requests: [(type: PMDMeasurementType, settings: PMDStreamSettings, what: String)] {
        var out: [(PMDMeasurementType, PMDStreamSettings, String)] = []
        if streams.ecg { out.append((.ecg, Self.ecgSettings, "ECG")) }
        if let hz = streams.accHz { out.append((.acc, .h10Accelerometer(hz: UInt16(hz), rangeG: 8), "accelerometer")) }
        return out
    }

    /// Called when the strap streams heart rate: starts the streams unless they run or are starting.
    func start(device: DBusObjectPath, address: String, adapter: DBusObjectPath, bluez: BlueZClient) async {
        guard !requests.isEmpty else { return }
        let (responses, continuation) = AsyncStream<ControlEvent>.makeStream()
        let go = state.withLock { s -> Bool in
            guard !s.starting, s.on.isEmpty else { return false }
            s.starting = true
            s.responses = continuation
            return true
        }
        guard go else { return }
        defer {
            continuation.finish()
            state.withLock {
                $0.starting = false
                $0.responses = nil
            }
        }
        let tree = bluez.tree
        guard let control = tree.characteristic(PMDService.controlPointUUID, inService: PMDService.serviceUUID, of: device),
            let data = tree.characteristic(PMDService.dataUUID, inService: PMDService.serviceUUID, of: device)
        else {
            say(address, "this strap has no Polar measurement service (PMD), so no ECG or motion; heart rate and RR go on")
            return
        }
        state.withLock { $0.paths = Paths(device: device.rawValue, control: control.path.rawValue, data: data.path.rawValue) }
        do {
            try await bluez.startNotify(control.path)
            try await bluez.startNotify(data.path)
        } catch {
            say(address, "cannot subscribe to the Polar measurement service (\(error)); no ECG or motion")
            return
        }
        var answers = responses.makeAsyncIterator()
        for request in requests {
            guard await write(PMDRequest.start(request.type, request.settings).encoded(), to: control.path,
                              device: device, address: address, adapter: adapter, bluez: bluez)
            else { return }
            guard let r = await next(&answers, for: request.type) else {
                let seconds = Double(streams.responseTimeoutMs) / 1000
                say(address, "the strap did not answer the \(request.what) request within "
                    + "\(seconds.formatted(.number.precision(.fractionLength(0...1)))) s; no \(request.what)")
                continue
            }
            if r.status.isSuccess || r.status == .alreadyInState {
                let factor = try? r.settings().factor
                state.withLock {
                    $0.on.insert(request.type.rawValue)
                    $0.streams[request.type.rawValue, default: Stream()].factor = factor ?? nil
                }
                let rate = request.settings.sampleRate.map { " at \($0) Hz" } ?? ""
                say(address, "\(request.what == "ECG" ? "ECG" : "Accelerometer") streaming\(rate)")
            } else {
                say(address, "the strap refused \(request.what): \(r.status); no \(request.what)")
            }
        }
    }

    /// What the request loop waits for: an indication on the control point, or a request's timeout.
    enum ControlEvent: Sendable {
        case response(PMDControlPointResponse)
        case timeout(UInt64)
    }

    /// The next response to a request for `type` (its parts joined when it spans several indications), or nil after
    /// `streams.responseTimeoutMs` on the session clock. A timeout ends this wait only; the next request waits afresh.
    private func next(
        _ answers: inout AsyncStream<ControlEvent>.Iterator, for type: PMDMeasurementType
    ) async -> PMDControlPointResponse? {
        let id = state.withLock { s -> UInt64 in
            s.timeouts += 1
            return s.timeouts
        }
        let timeout = clock.schedule(afterMs: streams.responseTimeoutMs) { [state] in
            state.withLock { $0.responses }?.yield(.timeout(id))
        }
        defer { timeout.cancel() }
        var parts = PMDResponseAssembler()
        while let event = await answers.next() {
            switch event {
            case .timeout(let t):
                if t == id { return nil }   // else an earlier request's, fired as it was answered
            case .response(let part):
                guard let r = parts.add(part) else { continue }   // parameters continue in the next indication
                if r.measurementType == type && r.opCode == .startMeasurement { return r }
            }
        }
        return nil
    }

    /// Writes a request, pairing first when the strap refuses an unencrypted link. False when it could not.
    private func write(
        _ request: [UInt8], to control: DBusObjectPath, device: DBusObjectPath, address: String, adapter: DBusObjectPath,
        bluez: BlueZClient
    ) async -> Bool {
        for attempt in 0..<2 {
            do {
                try await bluez.writeValue(control, request)
                return true
            } catch let error as BlueZError where error.needsPairing && attempt == 0 {
                if bluez.tree.device(device)?.paired == true {
                    // BlueZ holds a bond, yet the strap refuses: it has forgotten it (reset, paired elsewhere).
                    let first = state.withLock { s -> Bool in
                        defer { s.staleBondRemovals += 1 }
                        return s.staleBondRemovals == 0
                    }
                    guard first else {
                        say(address, "the strap still refuses after pairing again (\(error.message)); no ECG or "
                            + "motion. Remove the pairing (`bluetoothctl remove \(address)`) and try again.")
                        return false
                    }
                    say(address, "the strap has forgotten its pairing with this computer: removing the old "
                        + "pairing; it pairs again when it reconnects")
                    logger.notice("\(address): stale bond (\(error.message)); removing the device to pair again")
                    try? await bluez.removeDevice(device, from: adapter, timeout: .seconds(10))
                    return false
                }
                say(address, "pairing with the strap (it sends ECG and motion on an encrypted link only)")
                do {
                    try await StrapPairing.pair(device, bluez: bluez, logger: logger)
                } catch let e as BlueZError where e.name == "org.bluez.Error.AlreadyExists" {
                    // Paired meanwhile: write again.
                } catch {
                    say(address, "pairing failed (\(error)); no ECG or motion. Put the strap on (it sleeps when "
                        + "dry) and reconnect, or pair it with `bluetoothctl pair \(address)`.")
                    return false
                }
            } catch {
                say(address, "the strap did not take the request (\(error)); no ECG or motion")
                return false
            }
        }
        return false
    }

    /// A notification or indication on one of this link's characteristics, with when it was read.
    func receive(path: String, bytes: [UInt8], monotonicNs: UInt64, wallMs: Int64, address: String) {
        let paths = state.withLock { $0.paths }
        guard let paths else { return }
        if path == paths.control {
            control(bytes, address: address)
        } else if path == paths.data {
            frame(bytes, monotonicNs: monotonicNs, wallMs: wallMs, address: address)
        }
    }

    private func control(_ bytes: [UInt8], address: String) {
        let message: PMDControlPointMessage
        do { message = try PMDControlPointMessage(decoding: bytes) } catch {
            logger.warning("\(address): unreadable PMD control point indication \(bytes): \(error)")
            return
        }
        switch message {
        case .response(let r):
            state.withLock { $0.responses }?.yield(.response(r))
        case .measurementStopped(let types):
            let stopped = state.withLock { s -> [PMDMeasurementType] in
                let mine = types.filter { s.on.contains($0.rawValue) }
                for t in mine { s.on.remove(t.rawValue) }
                return mine
            }
            if !stopped.isEmpty { say(address, "the strap stopped \(stopped.map(\.name).joined(separator: ", ")) by itself") }
        }
    }

    private func frame(_ bytes: [UInt8], monotonicNs: UInt64, wallMs: Int64, address: String) {
        let out = state.withLock { s -> BiosignalSample? in
            guard let header = try? PMDFrameHeader(decoding: bytes) else {
                s.dropped += 1
                return nil
            }
            let type = header.measurementType
            let rate: Double = type == .ecg ? Self.ecgRateHz : Double(streams.accHz ?? 0)
            var stream = s.streams[type.rawValue] ?? Stream()
            let context = PMDDecodeContext(
                sampleRateHz: UInt32(rate), previousTimestampNs: stream.previousFrameNs, factor: stream.factor,
                rangeG: 8, resolutionBits: 16)
            let decoded: PMDDataFrame
            do { decoded = try PMDDataFrame(decoding: bytes, context: context) } catch {
                s.dropped += 1
                return nil
            }
            // Out of order or repeated: the sensor's time must move forward within a run.
            if let previous = stream.previousFrameNs, decoded.header.timestampNs <= previous {
                s.dropped += 1
                return nil
            }
            let count = decoded.samples.count
            let firstNs: UInt64
            switch decoded.samples {
            case .ecg(let e): guard let f = e.first else { s.dropped += 1; return nil }; firstNs = f.timestampNs
            case .accelerometer(let a): guard let f = a.first else { s.dropped += 1; return nil }; firstNs = f.timestampNs
            }
            var gap = stream.pendingGap
            switch stream.mapper.observe(
                sensorNs: decoded.header.timestampNs, hostNs: monotonicNs, samples: count, sampleRateHz: rate)
            {
            case .gap?:
                s.gaps += 1
                gap = true
            case .reset?:
                s.resets += 1
                gap = true
            case nil:
                break
            }
            stream.pendingGap = false
            stream.previousFrameNs = decoded.header.timestampNs
            s.streams[type.rawValue] = stream
            s.frames += 1
            let hostFirst = stream.mapper.hostNs(forSensorNs: firstNs) ?? monotonicNs
            let firstMs = wallMs - (Int64(monotonicNs) - Int64(hostFirst)) / 1_000_000
            switch decoded.samples {
            case .ecg(let ecg):
                s.samples += ecg.count
                return BiosignalSample(
                    timestampMs: firstMs, bpm: 0, deviceId: address, source: polarECGSource, gapBefore: gap,
                    ecgUv: ecg.map(\.microvolts), ecgRateHz: Self.ecgRateHz)
            case .accelerometer(let acc):
                s.accSamples += acc.count
                return BiosignalSample(
                    timestampMs: firstMs, bpm: 0, deviceId: address, source: polarAccSource, gapBefore: gap,
                    accG: acc.map(\.g), accRateHz: rate)
            }
        }
        if let out { sink.send(out) }
    }
}
