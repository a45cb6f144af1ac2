/// Maps the sensor's clock (ns, as in PMD frame timestamps) onto a host clock (ns, e.g. CLOCK_MONOTONIC).
///
/// Feed it one pair per frame: the frame timestamp (its last sample) and the host time the notification arrived.
/// `host − sensor` is the clock offset plus drift × time plus the transport delay, and the delay (radio, BlueZ,
/// scheduling) is never negative. So the fit runs on the **lower envelope**: arrivals are grouped into windows of
/// `windowNs` sensor time, each window keeps only its least-delayed pair, and a least-squares line (offset and
/// drift) is fitted through the last `maxWindows` window minima, after dropping minima that sit more than
/// `outlierNs` above a first fit (windows where every frame was held up). The mapped time is therefore "sensor time
/// on the host clock plus the smallest transport delay seen", which stays put over hours: the fit follows the drift
/// and forgets old windows, and it never averages in the delay.
///
/// Discontinuities are reported as events, never smoothed over:
/// - **reset**: the sensor time goes backwards, or jumps ahead by more than `resetJumpNs` beyond what the host clock
///   advanced. The fit starts again from this pair.
/// - **gap**: the sensor time advanced much more (more than `gapFactor` × + one period) than the frame's samples
///   account for, with the host clock agreeing: frames were lost. The fit is kept.
public struct PMDClockMapper: Sendable {
    public struct Configuration: Sendable, Equatable {
        public var windowNs: UInt64
        public var maxWindows: Int
        public var outlierNs: Double
        public var resetJumpNs: Int64
        public var gapFactor: Double

        public init(
            windowNs: UInt64 = 10_000_000_000, maxWindows: Int = 180, outlierNs: Double = 4_000_000,
            resetJumpNs: Int64 = 5_000_000_000, gapFactor: Double = 1.5
        ) {
            self.windowNs = max(1, windowNs)
            self.maxWindows = max(2, maxWindows)
            self.outlierNs = outlierNs
            self.resetJumpNs = resetJumpNs
            self.gapFactor = gapFactor
        }
    }

    public enum Event: Sendable, Equatable {
        /// The sensor clock restarted or jumped: `previousSensorNs` → `sensorNs`.
        case reset(previousSensorNs: UInt64, sensorNs: UInt64)
        /// Samples are missing between two frames: the sensor time went from `fromSensorNs` (previous frame's last
        /// sample) to `toSensorNs`, about `missingSamples` more than the frame holds.
        case gap(fromSensorNs: UInt64, toSensorNs: UInt64, missingSamples: Int)
    }

    public let configuration: Configuration

    private struct Point: Sendable {
        var x: Double  // sensor ns − anchor
        var y: Double  // (host − anchorHost) − (sensor − anchorSensor)
        var window: Int64
    }

    private var anchorSensor: UInt64 = 0
    private var anchorHost: UInt64 = 0
    private var points: [Point] = []  // one per window, oldest first; the last may be the open window
    private var lastSensor: UInt64?
    private var lastHost: UInt64?
    private var fitOffset: Double = 0  // y at x = 0
    private var fitSlope: Double = 0  // dy/dx (drift; positive = sensor clock slow relative to the host)

    /// Pairs accepted since the start or the last reset.
    public private(set) var count = 0
    /// Resets and gaps seen so far.
    public private(set) var resets = 0
    public private(set) var gaps = 0

    public init(configuration: Configuration = .init()) { self.configuration = configuration }

    /// Whether a mapping is available (at least one pair since the last reset).
    public var isReady: Bool { count > 0 }

    /// Current drift estimate in parts per million (host ns per sensor ns − 1).
    public var driftPPM: Double { fitSlope * 1e6 }

    /// Adds one (sensor, host) pair. `samples` and `sampleRateHz`, when given, describe the frame the sensor time
    /// belongs to (its sample count and the nominal rate) and enable gap detection.
    @discardableResult
    public mutating func observe(sensorNs: UInt64, hostNs: UInt64, samples: Int = 0, sampleRateHz: Double = 0) -> Event? {
        var event: Event?
        if let ls = lastSensor, let lh = lastHost {
            let sensorAdvance = Int64(truncatingIfNeeded: sensorNs &- ls)
            let hostAdvance = Int64(truncatingIfNeeded: hostNs &- lh)
            if sensorNs < ls || (sensorAdvance.subtractingReportingOverflow(hostAdvance).partialValue > configuration.resetJumpNs) {
                event = .reset(previousSensorNs: ls, sensorNs: sensorNs)
                resets += 1
                restart()
            } else if samples > 0, sampleRateHz > 0, sampleRateHz.isFinite {
                let period = 1e9 / sampleRateHz
                let expected = Double(samples) * period
                let advance = Double(sensorAdvance)
                if advance > expected * configuration.gapFactor + period {
                    let missing = Int(min(((advance - expected) / period).rounded(), Double(Int32.max)))
                    event = .gap(fromSensorNs: ls, toSensorNs: sensorNs, missingSamples: missing)
                    gaps += 1
                }
            }
        }
        lastSensor = sensorNs
        lastHost = hostNs
        add(sensorNs: sensorNs, hostNs: hostNs)
        return event
    }

    /// The host time of a sensor time, or nil before the first pair.
    public func hostNs(forSensorNs s: UInt64) -> UInt64? {
        guard count > 0 else { return nil }
        let x = Self.signedDifference(s, anchorSensor)
        let delta = x + fitOffset + fitSlope * x  // host − anchorHost
        guard delta.isFinite else { return nil }
        if delta >= 0 {
            guard delta < 1.8e19 else { return .max }
            let (v, o) = anchorHost.addingReportingOverflow(UInt64(delta.rounded()))
            return o ? .max : v
        }
        guard -delta < 1.8e19 else { return 0 }
        let (v, o) = anchorHost.subtractingReportingOverflow(UInt64((-delta).rounded()))
        return o ? 0 : v
    }

    private mutating func restart() {
        points.removeAll(keepingCapacity: true)
        count = 0
        fitOffset = 0
        fitSlope = 0
    }

    private mutating func add(sensorNs: UInt64, hostNs: UInt64) {
        if count == 0 {
            anchorSensor = sensorNs
            anchorHost = hostNs
        }
        count += 1
        let x = Self.signedDifference(sensorNs, anchorSensor)
        let y = Self.signedDifference(hostNs, anchorHost) - x
        let w = (x / Double(configuration.windowNs)).rounded(.down)
        let window: Int64 = w.isFinite && abs(w) < 9e18 ? Int64(w) : (w < 0 ? .min : .max)
        if let last = points.last, last.window == window {
            if y < last.y { points[points.count - 1] = Point(x: x, y: y, window: window) }
        } else {
            points.append(Point(x: x, y: y, window: window))
            if points.count > configuration.maxWindows { points.removeFirst(points.count - configuration.maxWindows) }
        }
        refit()
    }

    private mutating func refit() {
        guard let first = Self.fit(points[...]) else {
            fitOffset = points.first?.y ?? 0
            fitSlope = 0
            return
        }
        let kept = points.filter { $0.y - (first.offset + first.slope * $0.x) <= configuration.outlierNs }
        let final = kept.count >= 2 ? (Self.fit(kept[...]) ?? first) : first
        fitOffset = final.offset
        fitSlope = final.slope
    }

    /// Least squares y = offset + slope·x (centred for precision); nil with fewer than 2 distinct x.
    private static func fit(_ p: ArraySlice<Point>) -> (offset: Double, slope: Double)? {
        guard p.count >= 2 else { return nil }
        let n = Double(p.count)
        let mx = p.reduce(0) { $0 + $1.x } / n
        let my = p.reduce(0) { $0 + $1.y } / n
        var sxx = 0.0
        var sxy = 0.0
        for q in p {
            sxx += (q.x - mx) * (q.x - mx)
            sxy += (q.x - mx) * (q.y - my)
        }
        guard sxx > 0 else { return nil }
        let slope = sxy / sxx
        return (my - slope * mx, slope)
    }

    private static func signedDifference(_ a: UInt64, _ b: UInt64) -> Double {
        a >= b ? Double(a - b) : -Double(b - a)
    }
}
