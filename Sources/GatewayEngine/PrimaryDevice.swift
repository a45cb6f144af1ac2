/// Which device the top level of a frame speaks for when several send (docs/engine.md, "Several devices"). A
/// team's straps are several people and a lab's are one person's placements; either way the top-level heart rate,
/// HRV, ECG, paced-breathing and live DFA values are one device's, never a mix, and `devices` has each one's.
///
/// The choice is among the devices whose beats cover at least `keepShare` of the most time any device's beats cover
/// in the window (the sum of its RR intervals: a strap at 160 bpm covers no more time than one at 60, and none is
/// ahead by the part of a beat still in progress): the first of them in the window, and then that same device for as
/// long as it stays among them. Two straps on one person, or two people whose beats tie, do not hand the top level
/// back and forth from frame to frame (before, the device with the most RR in the window won, the first seen on a
/// tie, and a live DFA crossing could be one person's alpha1 against another's); a strap whose link is lost gives the
/// top level up once its beats have aged out of most of the window.
struct PrimaryDevice: Sendable, Equatable {
    /// The share of the best device's beat time the current device needs to keep the top level.
    static let keepShare = 0.8

    private(set) var id: String?

    /// The device for `groups` (in the order they first appear in the window; the first of the contenders wins),
    /// given the current choice; nil when no device has a heart rate. When none sends beats (straps that send the
    /// heart rate alone), the time their readings cover counts instead: a second per reading (a strap notifies once a
    /// second).
    func choose(_ groups: [SessionMetrics.DeviceGroup]) -> String? {
        let beats = groups.map { Self.beatTimeMs($0.samples) }
        let cover = beats.contains { $0 > 0 } ? beats : groups.map { Self.readingTimeMs($0.samples) }
        let best = cover.max() ?? 0
        guard best > 0 else { return nil }
        let contenders = zip(groups, cover).filter { $0.1 >= Self.keepShare * best }.map(\.0.id)
        if let id, contenders.contains(id) { return id }
        return contenders.first
    }

    /// Chooses for `groups` and keeps the choice; a window without a heart rate keeps the previous one.
    mutating func update(_ groups: [SessionMetrics.DeviceGroup]) {
        if let chosen = choose(groups) { id = chosen }
    }

    /// The time one device's heart-rate readings cover, at a second each: those `hr_mean_bpm` counts.
    static func readingTimeMs(_ samples: [BiosignalSample]) -> Double {
        Double(samples.filter(SessionMetrics.carriesHeartRate).count) * 1000
    }

    /// The time one device's beats cover: the sum of its valid RR intervals (ms).
    static func beatTimeMs(_ samples: [BiosignalSample]) -> Double {
        samples.reduce(0) { sum, s in sum + (s.rrIntervalsMs ?? []).reduce(0) { $1.isFinite && $1 > 0 ? $0 + $1 : $0 } }
    }
}
