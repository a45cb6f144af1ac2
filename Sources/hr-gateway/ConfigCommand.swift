import ArgumentParser
import BLEHeartRate
import Foundation
import GatewayConfig
import SessionStore
import StdoutSink
import SystemCalls

struct ConfigCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config",
        abstract: "Check a configuration file and show the settings in effect.",
        discussion: """
            hr-gateway reads one TOML file: --config FILE, else $HR_GATEWAY_CONFIG, else \
            ~/.config/hr-gateway/hr-gateway.toml, else /etc/hr-gateway/hr-gateway.toml. Options override \
            HR_GATEWAY_* environment variables, which override the file, which overrides the defaults. \
            config/hr-gateway.toml in the source tree documents every option with its default.
            """,
        subcommands: [ConfigCheckCommand.self]
    )
}

struct ConfigCheckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Validate a configuration file; print the settings in effect, or each error with its line.",
        discussion: """
            Without FILE (or --config FILE, as other commands take it), checks the file hr-gateway would read (or \
            says that none is present). Every error is printed with its line, in line order. The exit status is \
            0 when the file and the HR_GATEWAY_* variables set are valid, 1 otherwise (the message says which). \
            --state-dir and --log-level, as other commands take them, show what such a command would use.

            Examples:
              hr-gateway config check
              hr-gateway config check /etc/hr-gateway/hr-gateway.toml
              hr-gateway config check --config ./hr-gateway.toml --state-dir /srv/hrg
            """
    )

    @Argument(help: "The file to check (default: the one hr-gateway would read).")
    var file: String?

    @Option(help: ArgumentHelp("The file to check, as other commands take it (same as FILE).", valueName: "file"))
    var config: String?

    @Option(help: ArgumentHelp("Show this state directory in effect, as other commands take it.", valueName: "dir"))
    var stateDir: String?

    @Option(help: ArgumentHelp("Show this log level in effect, as other commands take it.", valueName: "level"))
    var logLevel: LogLevelSetting?

    func validate() throws {
        if let file, let config, file != config {
            // A value of an option this command does not take is read as FILE: say both, not only "once".
            throw ValidationError("Two files to check: FILE (\(file)) and --config (\(config)). Give one of them (an "
                + "option `config check` does not take leaves its value to be read as FILE).")
        }
        if stateDir?.isEmpty == true {
            throw ValidationError("--state-dir is empty: give a directory, or leave the option out for the default.")
        }
    }

    func run() throws {
        guard let path = GatewayConfiguration.locate(explicit: file ?? config) else {
            print("No configuration file (looked for ~/.config/hr-gateway/hr-gateway.toml and "
                + "/etc/hr-gateway/hr-gateway.toml): the defaults apply.")
            try show(Self.inEffect(GatewayConfiguration()))
            return
        }
        let loaded: (GatewayConfiguration, warnings: [String])
        do throws(ConfigurationError) { loaded = try GatewayConfiguration.load(path: path) } catch {
            let all = error.all
            for e in all { StandardStream.error.write(Data("\(e)\n".utf8)) }
            StandardStream.error.write(Data("\(path): \(all.count) error\(all.count == 1 ? "" : "s")\n".utf8))
            throw ExitCode.failure
        }
        // A strap that `stream` would refuse (a mistyped address): the unit's check passed and the service failed.
        let straps = loaded.0.strapDevices.compactMap { device -> String? in
            do throws(StrapSpecError) {
                _ = try StrapSpec(parsing: device)
                return nil
            } catch { return "\(path): strap.devices: \(error)" }
        }
        if !straps.isEmpty {
            for e in straps { StandardStream.error.write(Data("\(e)\n".utf8)) }
            StandardStream.error.write(Data("\(path): \(straps.count) error\(straps.count == 1 ? "" : "s")\n".utf8))
            throw ExitCode.failure
        }
        for w in loaded.warnings { print("warning: \(w)") }
        // An invalid HR_GATEWAY_* value is said before the file is called valid.
        let effective = try Self.inEffect(loaded.0)
        print("\(path): valid")
        try show(effective)
    }

    /// `file` with the environment applied over it; an invalid HR_GATEWAY_* value is an error (the file may be
    /// valid, but a service would fail on it).
    static func inEffect(_ file: GatewayConfiguration) throws -> GatewayConfiguration {
        var c = file
        do { try c.applyEnvironment(ProcessInfo.processInfo.environment) } catch {
            throw CommandFailure("the environment: \(error). HR_GATEWAY_* variables override the file: correct or unset it.")
        }
        return c
    }

    /// A variable's value when it is set and not empty (empty ones are not taken).
    static func environment(_ name: String) -> String? {
        ProcessInfo.processInfo.environment[name].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The settings in effect (`inEffect`), a row each.
    private func show(_ c: GatewayConfiguration) throws {
        var rows: [(String, String)] = [
            ("log_level", logLevel.map { "\($0.rawValue) (--log-level)" }
                ?? c.logLevel.rawValue + (Self.environment("HR_GATEWAY_LOG_LEVEL") != nil ? " (HR_GATEWAY_LOG_LEVEL)" : "")),
            ("state_dir", stateDir.map { "\(StateDirectory.resolve(option: $0)) (--state-dir)" }
                ?? StateDirectory.resolve(configured: c.stateDir)
                + (Self.environment("HR_GATEWAY_STATE_DIR") != nil ? " (HR_GATEWAY_STATE_DIR)" : "")),
            ("record", "\(c.record)"),
            ("keep_days", c.keepDays.map(String.init) ?? "0 (keep every session)"),
            ("session.mode", c.mode.rawValue),
            ("session.window_sec", "\(c.windowSec)"),
            ("session.emit_interval_sec", "\(c.emitIntervalSec)"),
        ]
        if let pattern = c.breathingPattern {
            rows.append(("session.pattern", "\(pattern) (paces `breathe` and breathing-mode sessions"
                + "\(c.mode == .breathing ? "" : "; not a \(c.mode.rawValue) session"))"))
        }
        let named = c.strapDevices.map(SourceOptions.quoted).joined(separator: ", ")
        rows.append(("strap.devices", c.strapDevices.isEmpty ? "(none)" : named))
        rows.append(("strap.adapter", c.strapAdapter ?? "(the first powered one)"))
        rows.append(("strap Polar streams", [c.strapECG ? "ECG" : nil, c.strapAccHz.map { "accelerometer at \($0) Hz" }]
            .compactMap { $0 }.joined(separator: ", ").nonEmpty ?? "(none)"))
        rows.append(("camera.device", c.cameraDevice ?? "(none)"))
        rows.append(("camera capture", "\(c.cameraWidth)x\(c.cameraHeight) at \(SourceOptions.speedText(c.cameraFps)) fps, "
            + "mains \(c.cameraMainsHz) Hz"))
        if c.cameraColourCheck { rows.append(("camera.colour_check", "true (pulse readings whose colour is not blood's withheld)")) }
        let environmentSource = ProcessInfo.processInfo.environment["HR_GATEWAY_SOURCE"]?
            .trimmingCharacters(in: .whitespaces).nonEmpty
        if let environmentSource {
            // The service runs `hr-gateway stream $HR_GATEWAY_SOURCE`: a mistyped option would make it exit at once.
            if let problem = StreamCommand.problem(withSources: environmentSource) {
                throw CommandFailure("HR_GATEWAY_SOURCE (\(environmentSource)): \(problem) The service runs `hr-gateway "
                    + "stream` with it: correct it (`sudo systemctl edit hr-gateway`).")
            }
            rows.append(("sources", "\(environmentSource) (HR_GATEWAY_SOURCE, in place of the devices above)"))
        } else if c.strapDevices.isEmpty && c.cameraDevice == nil {
            rows.append(("sources", "(none: each command names its own, such as --strap auto)"))
        } else {
            rows.append(("sources", "the devices above, when a command names no source (--strap, --camera, --simulate, --replay)"))
        }
        rows.append(("relay.listen", c.relayListen ?? "(none)"))
        if c.relayTLSCert != nil || c.relayTLS {
            rows.append(("relay TLS", c.relayTLSCert.map { "wss:// with \($0) and \(c.relayTLSKey ?? "")" }
                ?? "wss:// with the self-signed pair in the state directory (tls/)"))
        }
        rows.append(("metrics.listen", c.metricsListen ?? "(none)"))
        rows.append(("mqtt.url", c.mqttURL ?? "(none)"))
        if c.mqttURL != nil {
            rows.append(("mqtt.gateway_id", c.mqttGatewayId ?? "\(SystemCall.hostName()) (the host name)"))
            if let ca = c.mqttCAFile { rows.append(("mqtt.ca_file", ca)) }
            if let pw = c.mqttPasswordFile { rows.append(("mqtt.password_file", pw)) }
            rows.append(("mqtt.grace_sec", "\(c.mqttGraceSec)"))
        }
        rows.append(("webhook.url", c.webhookURL ?? "(none)"))
        if c.webhookURL != nil {
            rows.append(("webhook.samples", "\(c.webhookSamples) (batches of \(c.webhookBatchSize))"))
            rows.append(("webhook retries", "timeout \(c.webhookTimeoutSec) s, backoff \(c.webhookBackoffBaseMs) ms "
                + "doubling to \(c.webhookBackoffMaxSec) s, grace \(c.webhookGraceSec) s, at most \(c.webhookMaxItems) items"))
        }
        let width = rows.map(\.0.count).max() ?? 0
        print("In effect (file and HR_GATEWAY_* environment):")
        for (key, value) in rows { print("  " + key + String(repeating: " ", count: width - key.count + 1) + value) }
    }
}

extension String {
    /// nil for the empty string.
    fileprivate var nonEmpty: String? { isEmpty ? nil : self }
}
