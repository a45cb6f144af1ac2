import ArgumentParser
import Foundation
import SystemCalls
import GatewayConfig
import MQTTSink

/// `--mqtt` and its companions, shared by the commands that run a session.
struct MQTTOptions: ParsableArguments {
    @Option(help: ArgumentHelp(
        "Publish to an MQTT broker: mqtt://[user[:password]@]HOST[:PORT] (1883) or mqtts://… (8883, TLS). "
            + "Topics: hr-gateway/ID/status (retained; \"offline\" by last will if the gateway dies), "
            + "hr-gateway/ID/event (every event; session start, summary and error at QoS 1, kept in the state "
            + "directory until the broker has them), hr-gateway/ID/cmd in and cmd_result out (the relay's commands), "
            + "hr-gateway/ID/device/DEVICE/state, and Home Assistant discovery under homeassistant/sensor/.",
        valueName: "url"))
    var mqtt: String?

    @Option(help: ArgumentHelp("With mqtts://: the CA certificate (PEM) to trust. Default: the system's.", valueName: "file"))
    var mqttCa: String?

    @Option(help: ArgumentHelp(
        "With --mqtt: a file holding the password (first line), instead of putting it in the URL.", valueName: "file"))
    var mqttPasswordFile: String?

    @Option(help: ArgumentHelp(
        "With --mqtt: this gateway's ID in every topic (one per gateway); with --lsl, in the markers stream's name. "
            + "Default: the configuration's mqtt.gateway_id, else the host name.", valueName: "id"))
    var gatewayId: String?

    @Option(parsing: .unconditional, help: ArgumentHelp(
        "With --mqtt: seconds to wait at the end for the broker to acknowledge the QoS 1 messages (default 10).",
        valueName: "sec"))
    var mqttGrace: Int?

    /// `--mqtt-grace` without a broker to wait for did nothing without a word.
    func checkGraceHasABroker(_ settings: GatewayConfiguration) throws {
        if mqttGrace != nil, mqtt == nil, settings.mqttURL == nil {
            throw ValidationError("--mqtt-grace is for --mqtt URL; there is no --mqtt (nor HR_GATEWAY_MQTT, nor [mqtt] "
                + "url in the configuration file).")
        }
    }

    func check() throws {
        if let mqtt {
            do { _ = try MQTTBrokerURL(parsing: mqtt) } catch { throw ValidationError("--mqtt: \(error)") }
        }
        if let gatewayId {
            do { _ = try MQTTTopics(gatewayId: gatewayId) } catch { throw ValidationError("--gateway-id: \(error)") }
        }
        if let g = mqttGrace, g < 0 { throw ValidationError("--mqtt-grace must be 0 or more seconds.") }
    }

    /// The broker URL, with the password from the first line of `passwordFile` when one is given.
    static func broker(_ url: String, passwordFile: String?) throws -> MQTTBrokerURL {
        var broker = try MQTTBrokerURL(parsing: url)
        if let file = passwordFile {
            let text: String
            do { text = String(decoding: try SystemCall.readFile(file, limit: 65_536), as: UTF8.self) } catch {
                throw CommandFailure("--mqtt-password-file: cannot read \(file): \(error.reason)")
            }
            broker.password = String(text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).first ?? "")
        }
        return broker
    }

    /// The sink, connecting in the background; nil without `--mqtt` (or `[mqtt] url`, or `HR_GATEWAY_MQTT`). The
    /// command line overrides the configuration.
    /// QoS 1 events wait in `mqtt-outbox.sqlite` in `stateDirectory` until the broker acknowledges them.
    func sink(sources: [String], settings: GatewayConfiguration, stateDirectory: String) throws -> MQTTSink? {
        guard let mqtt = mqtt ?? settings.mqttURL else { return nil }
        let broker = try Self.broker(mqtt, passwordFile: mqttPasswordFile ?? settings.mqttPasswordFile)
        let id = gatewayId ?? settings.mqttGatewayId ?? SystemCall.hostName()
        return try MQTTSink(
            broker: broker, topics: try MQTTTopics(gatewayId: id), caFile: mqttCa ?? settings.mqttCAFile,
            sources: sources, graceMs: Int64(mqttGrace ?? settings.mqttGraceSec) * 1000, stateDirectory: stateDirectory)
    }
}
