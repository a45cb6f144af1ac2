import CV4L2

/// What happened to each automatic control the ``ControlPolicy`` asked to set.
public struct ControlLockReport: Sendable, Hashable, CustomStringConvertible {
    /// The result for one control.
    public enum Outcome: Sendable, Hashable {
        /// Set; `detail` says to what (`"manual, exposure 156"`).
        case locked(detail: String)
        /// The driver has no such control.
        case unsupported
        /// The control exists but may not be changed (read-only, grabbed, or the wanted mode is missing).
        case notAllowed(reason: String)
        /// The driver refused the change.
        case failed(V4L2Error)
    }

    public struct Entry: Sendable, Hashable {
        /// A short name: `power line frequency`, `auto exposure`, `exposure priority`, `auto white balance`,
        /// `auto gain`.
        public var control: String
        public var id: UInt32
        public var outcome: Outcome

        public init(control: String, id: UInt32, outcome: Outcome) {
            self.control = control
            self.id = id
            self.outcome = outcome
        }

        public var isLocked: Bool {
            if case .locked = outcome { return true }
            return false
        }
    }

    public var entries: [Entry]
    /// Frames captured before the controls were locked.
    public var afterFrames: Int

    public init(entries: [Entry], afterFrames: Int) {
        self.entries = entries
        self.afterFrames = afterFrames
    }

    public var locked: [Entry] { entries.filter(\.isLocked) }
    public var notLocked: [Entry] { entries.filter { !$0.isLocked } }

    public var description: String {
        entries.map { entry in
            switch entry.outcome {
            case .locked(let detail): "\(entry.control): locked (\(detail))"
            case .unsupported: "\(entry.control): not supported by the driver"
            case .notAllowed(let reason): "\(entry.control): not lockable (\(reason))"
            case .failed(let error): "\(entry.control): failed (\(error.errnoDescription))"
            }
        }.joined(separator: "\n")
    }
}

/// Control ids used for locking (re-exported by CV4L2 because the header macros do not import).
enum ControlID {
    static let exposureAuto = CV4L2_CID_EXPOSURE_AUTO
    static let exposureAbsolute = CV4L2_CID_EXPOSURE_ABSOLUTE
    static let exposureAutoPriority = CV4L2_CID_EXPOSURE_AUTO_PRIORITY
    static let autoWhiteBalance = CV4L2_CID_AUTO_WHITE_BALANCE
    static let whiteBalanceTemperature = CV4L2_CID_WHITE_BALANCE_TEMPERATURE
    static let autoGain = CV4L2_CID_AUTOGAIN
    static let gain = CV4L2_CID_GAIN
    static let powerLineFrequency = CV4L2_CID_POWER_LINE_FREQUENCY
}

extension DeviceHandle {
    /// Sets the mains frequency control (done before streaming so auto-exposure settles with it).
    func applyPowerLineFrequency(_ frequency: PowerLineFrequency) -> ControlLockReport.Entry {
        let id = ControlID.powerLineFrequency
        let outcome = setChecked(id, to: frequency.rawValue, menuValueRequired: true) { "\(frequency)" }
        return .init(control: "power line frequency", id: id, outcome: outcome)
    }

    /// Turns the policy's automatic controls to manual, holding their current (settled) values.
    func lockAutomaticControls(_ policy: ControlPolicy) -> [ControlLockReport.Entry] {
        var entries: [ControlLockReport.Entry] = []
        if policy.lockExposure {
            let held = try? getControl(ControlID.exposureAbsolute)
            let manual = Int32(V4L2_EXPOSURE_MANUAL.rawValue)
            let outcome = setChecked(ControlID.exposureAuto, to: manual, menuValueRequired: true) {
                guard let held else { return "manual" }
                let kept = (try? setControl(ControlID.exposureAbsolute, held)) != nil
                return kept ? "manual, exposure \(held)" : "manual"
            }
            entries.append(.init(control: "auto exposure", id: ControlID.exposureAuto, outcome: outcome))
        }
        if policy.keepFrameRate {
            let outcome = setChecked(ControlID.exposureAutoPriority, to: 0, menuValueRequired: false) { "off" }
            entries.append(.init(control: "exposure priority", id: ControlID.exposureAutoPriority, outcome: outcome))
        }
        if policy.lockWhiteBalance {
            entries.append(
                lockBoolean("auto white balance", ControlID.autoWhiteBalance, holding: ControlID.whiteBalanceTemperature, unit: " K")
            )
        }
        if policy.lockGain {
            entries.append(lockBoolean("auto gain", ControlID.autoGain, holding: ControlID.gain, unit: " gain"))
        }
        return entries
    }

    private func lockBoolean(
        _ name: String, _ id: UInt32, holding valueID: UInt32, unit: String
    ) -> ControlLockReport.Entry {
        let held = try? getControl(valueID)
        let outcome = setChecked(id, to: 0, menuValueRequired: false) {
            guard let held else { return "off" }
            let kept = (try? setControl(valueID, held)) != nil
            return kept ? "off, \(held)\(unit)" : "off"
        }
        return .init(control: name, id: id, outcome: outcome)
    }

    /// Queries `id`, checks it can take `value`, sets it and runs `after` to describe the result.
    private func setChecked(
        _ id: UInt32, to value: Int32, menuValueRequired: Bool, after: () -> String
    ) -> ControlLockReport.Outcome {
        let info: ControlInfo?
        do throws(V4L2Error) {
            info = try queryControl(id)
        } catch {
            return .failed(error)
        }
        guard let info else { return .unsupported }
        if info.flags.contains(.readOnly) { return .notAllowed(reason: "read-only") }
        if info.flags.contains(.grabbed) { return .notAllowed(reason: "grabbed by a streaming application") }
        if menuValueRequired, info.type == .menu, !info.menu.contains(where: { $0.index == UInt32(value) }) {
            let offered = info.menu.map { "\($0.index) \($0.name)" }.joined(separator: ", ")
            return .notAllowed(reason: "value \(value) not offered (menu: \(offered))")
        }
        if value < info.minimum || value > info.maximum {
            return .notAllowed(reason: "value \(value) outside \(info.minimum)...\(info.maximum)")
        }
        do throws(V4L2Error) {
            try setControl(id, value)
        } catch {
            return .failed(error)
        }
        return .locked(detail: after())
    }
}
