import BlueZ
import DBus
import GatewayEngine
import Logging
import PolarPMD

/// What to stream from a Polar strap's Measurement Data service besides heart rate (`stream --ecg`).
public struct PolarStreams: Sendable, Equatable {
    public var ecg: Bool
    public init(ecg: Bool = true) { self.ecg = ecg }
}

/// The source name of raw ECG chunks from a Polar strap.
public let polarECGSource = "polar_ecg"

/// Polar Measurement Data on one strap session (docs/pmd.md, "On a strap"): each time the strap streams heart rate,
/// finds the PMD service, enables the control point's indications and the data notifications, asks for ECG at
/// 130 Hz, pairs when the strap refuses the control point for lack of encryption (and, when BlueZ holds a bond the
/// strap has forgotten, removes it once so that the next connection pairs afresh), then turns data frames into ECG
/// chunks with host times from `PMDClockMapper`. Bad frames are dropped and counted, never fatal.
final class PolarPMDLink: Sendable {
    struct Paths: Sendable, Equatable {
        var device: String
        var control: String
        var data: String
    }

    struct State: Sendable {
        var paths: Paths?
        var starting = false
        var ecgOn = false
        var mapper = PMDClockMapper()
        var previousFrameNs: UInt64?
        var pendingGap = false
        var staleBondRemovals = 0
        var samples = 0
        var frames = 0
        var dropped = 0
        var gaps = 0
        var resets = 0
    }

    let streams: PolarStreams
    let sink: ProviderSink
    let logger: Logger
    let state = Locked(State())

    /// ECG as the H10 sends it.
    static let ecgSettings = PMDStreamSettings.h10ECG
    static let ecgRateHz = 130.0

    init(streams: PolarStreams, sink: ProviderSink, logger: Logger) {
        self.streams = streams
        self.sink = sink
        self.logger = logger
    }

    /// Figures for tests and the status line.
    var counts: (samples: Int, frames: Int, dropped: Int, gaps: Int, resets: Int) {
        state.withLock { ($0.samples, $0.frames, $0.dropped, $0.gaps, $0.resets) }
    }

    var ecgOn: Bool { state.withLock { $0.ecgOn } }

    /// Whether `path` is this link's control point or data characteristic.
    func handles(_ path: String) -> Bool {
        state.withLock { $0.paths.map { $0.control == path || $0.data == path } ?? false }
    }

    /// The link went down: the strap stops its streams, and the next streaming starts them again. The clock fit
    /// is kept (the sensor clock runs on), but the next frame starts a new run of samples.
    func linkLost() {
        state.withLock {
            $0.starting = false
            $0.ecgOn = false
            $0.previousFrameNs = nil
            if $0.frames > 0 { $0.pendingGap = true }
        }
    }

    private func say(_ address: String, _ message: String) {
        sink.status(SensorStatus(source: BLEHeartRate.source, deviceId: address, state: .streaming, message: message))
    }

    /// Called when the strap streams heart rate: starts ECG unless it runs or is starting.
    func start(device: DBusObjectPath, address: String, adapter: DBusObjectPath, bluez: BlueZClient) async {
        guard streams.ecg else { return }
        let go = state.withLock { s -> Bool in
            guard !s.starting, !s.ecgOn else { return false }
            s.starting = true
            return true
        }
        guard go else { return }
        defer { state.withLock { $0.starting = false } }
        let tree = bluez.tree
        guard let control = tree.characteristic(PMDService.controlPointUUID, inService: PMDService.serviceUUID, of: device),
            let data = tree.characteristic(PMDService.dataUUID, inService: PMDService.serviceUUID, of: device)
        else {
            say(address, "this strap has no Polar measurement service (PMD), so no ECG; heart rate and RR go on")
            return
        }
        state.withLock { $0.paths = Paths(device: device.rawValue, control: control.path.rawValue, data: data.path.rawValue) }
        do {
            try await bluez.startNotify(control.path)
            try await bluez.startNotify(data.path)
        } catch {
            say(address, "cannot subscribe to the Polar measurement service (\(error)); no ECG")
            return
        }
        let request = PMDRequest.start(.ecg, Self.ecgSettings).encoded()
        for attempt in 0..<2 {
            do {
                try await bluez.writeValue(control.path, request)
                return   // the answer comes as an indication (`receive`)
            } catch let error as BlueZError where error.needsPairing && attempt == 0 {
                if bluez.tree.device(device)?.paired == true {
                    // BlueZ holds a bond, yet the strap refuses: it has forgotten it (reset, paired elsewhere).
                    let first = state.withLock { s -> Bool in
                        defer { s.staleBondRemovals += 1 }
                        return s.staleBondRemovals == 0
                    }
                    guard first else {
                        say(address, "the strap still refuses ECG after pairing again (\(error.message)); "
                            + "no ECG. Try `hr-gateway unpair \(address)`, then `hr-gateway pair \(address)`.")
                        return
                    }
                    say(address, "the strap has forgotten its pairing with this computer: removing the old "
                        + "pairing; it pairs again when it reconnects")
                    logger.notice("\(address): stale bond (\(error.message)); removing the device to pair again")
                    try? await bluez.removeDevice(device, from: adapter, timeout: .seconds(10))
                    return
                }
                say(address, "pairing with the strap (it sends ECG on an encrypted link only)")
                do {
                    try await bluez.pair(device)
                } catch let e as BlueZError where e.name == "org.bluez.Error.AlreadyExists" {
                    // Paired meanwhile: write again.
                } catch {
                    say(address, "pairing failed (\(error)); no ECG. `hr-gateway pair \(address)` tries again "
                        + "and says more.")
                    return
                }
            } catch {
                say(address, "the strap did not take the ECG request (\(error)); no ECG")
                return
            }
        }
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
        case .response(let r) where r.opCode == .startMeasurement && r.measurementType == .ecg:
            if r.status.isSuccess || r.status == .alreadyInState {
                state.withLock { $0.ecgOn = true }
                say(address, "ECG streaming at \(Int(Self.ecgRateHz)) Hz")
            } else {
                say(address, "the strap refused ECG: \(r.status); no ECG")
            }
        case .response:
            break
        case .measurementStopped(let types) where types.contains(.ecg):
            state.withLock { $0.ecgOn = false }
            say(address, "the strap stopped ECG by itself")
        case .measurementStopped:
            break
        }
    }

    private func frame(_ bytes: [UInt8], monotonicNs: UInt64, wallMs: Int64, address: String) {
        let out = state.withLock { s -> BiosignalSample? in
            let context = PMDDecodeContext(sampleRateHz: UInt32(Self.ecgRateHz), previousTimestampNs: s.previousFrameNs)
            let decoded: PMDDataFrame
            do { decoded = try PMDDataFrame(decoding: bytes, context: context) } catch {
                s.dropped += 1
                return nil
            }
            guard case .ecg(let ecg) = decoded.samples, let first = ecg.first else {
                s.dropped += 1
                return nil
            }
            // Out of order or repeated: the sensor's time must move forward within a run.
            if let previous = s.previousFrameNs, decoded.header.timestampNs <= previous {
                s.dropped += 1
                return nil
            }
            var gap = s.pendingGap
            switch s.mapper.observe(
                sensorNs: decoded.header.timestampNs, hostNs: monotonicNs, samples: ecg.count, sampleRateHz: Self.ecgRateHz)
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
            s.pendingGap = false
            s.previousFrameNs = decoded.header.timestampNs
            s.frames += 1
            s.samples += ecg.count
            let hostFirst = s.mapper.hostNs(forSensorNs: first.timestampNs) ?? monotonicNs
            let firstMs = wallMs - (Int64(monotonicNs) - Int64(hostFirst)) / 1_000_000
            return BiosignalSample(
                timestampMs: firstMs, bpm: 0, deviceId: address, source: polarECGSource, gapBefore: gap,
                ecgUv: ecg.map(\.microvolts), ecgRateHz: Self.ecgRateHz)
        }
        if let out { sink.send(out) }
    }
}
