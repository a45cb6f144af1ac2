import ArgumentParser
import Foundation
import GatewayConfig
import GatewayEngine
import GatewayMetrics
import Logging
import RelayCore
import RelayStore
import RelayWebServer
import StdoutSink

/// Where the relay listens and whom it lets in (`serve`, `stream --listen`).
struct RelayOptions: ParsableArguments {
    @Option(help: ArgumentHelp(
        "Relay the session over WebSocket at ws://HOST:PORT/v1/relay. Port 0 picks a free port; the address is printed once listening (serve: stdout, stream: stderr). Default: the configuration's relay.listen.",
        valueName: "host:port"))
    var listen: String?

    @Flag(help: "Development only: accept consumers without a token. Refused unless --listen is a loopback address; a browser page is let in only when served from a loopback address itself (its Origin and Host), so that a web site cannot reach the relay through your browser.")
    var noAuth = false

    @Flag(help: "Serve wss:// with the certificate in the state directory (tls/cert.pem, tls/key.pem), made self-signed (swift-certificates) on first use. Clients pin its SHA-256 fingerprint, printed at start and by `token create`. Default: the configuration's relay.tls.")
    var tls = false

    @Option(help: ArgumentHelp("Serve wss:// with this PEM certificate (chain) instead (with --tls-key). Default: the configuration's relay.tls_cert.", valueName: "file"))
    var tlsCert: String?

    @Option(help: ArgumentHelp("PEM private key of --tls-cert.", valueName: "file"))
    var tlsKey: String?

    @Flag(name: .customLong("no-tls"), help: "Serve plain ws:// even when the configuration's relay.tls or relay.tls_cert asks for TLS.")
    var plain = false

    /// The TLS files to use, creating the self-signed pair for `--tls` when missing; nil for plain ws://.
    func tlsFiles(stateDirectory: String) throws -> RelayTLSFiles? {
        if let tlsCert, let tlsKey { return RelayTLSFiles(certificatePath: tlsCert, keyPath: tlsKey) }
        guard tls else { return nil }
        let files = RelayTLSFiles.inStateDirectory(stateDirectory)
        do { try files.createSelfSignedIfMissing() } catch let e as RelayServerError { throw CommandFailure(e.description) }
        return files
    }

    /// `--tls` without a relay to serve it did nothing without a word.
    func checkTLSHasARelay(_ settings: GatewayConfiguration) throws {
        if tls || tlsCert != nil, listen == nil, settings.relayListen == nil {
            throw ValidationError("--tls is for the relay, and there is none: add --listen HOST:PORT (or [relay] "
                + "listen in the configuration file).")
        }
    }

    func check() throws {
        if (tlsCert == nil) != (tlsKey == nil) { throw ValidationError("--tls-cert and --tls-key go together.") }
        if plain && (tls || tlsCert != nil) {
            throw ValidationError("--no-tls and \(tls ? "--tls" : "--tls-cert") contradict each other: give one.")
        }
        guard let listen else {
            if noAuth { throw ValidationError("--no-auth needs --listen.") }
            return
        }
        let (host, _) = try Self.split(listen)
        if noAuth && !RelayServerConfiguration(host: host, port: 0).isLoopback {
            throw ValidationError("--no-auth is only allowed on a loopback address (localhost, 127.0.0.0/8, ::1, written as an address); got \(host).")
        }
    }

    static func split(_ listen: String) throws -> (String, Int) {
        guard let (host, port) = GatewayConfiguration.splitListen(listen) else {
            throw ValidationError("--listen takes HOST:PORT, such as 127.0.0.1:8765 or 0.0.0.0:8765; got '\(listen)'.")
        }
        return (host, port)
    }

    /// Takes the configuration's `[relay]` for what the command line leaves out: its address, and its TLS unless
    /// the command line chose a certificate or `--no-tls`.
    mutating func adopt(_ settings: GatewayConfiguration) {
        listen = listen ?? settings.relayListen
        if tlsCert == nil && tlsKey == nil && !plain {
            tlsCert = settings.relayTLSCert
            tlsKey = settings.relayTLSKey
            tls = tls || settings.relayTLS
        }
    }
}

/// A running relay for one engine: hub, server task, and the printed address.
final class RelayRuntime: Sendable {
    let hub: RelayHub
    let observation: ObservationToken?
    let task: Task<Void, any Error>
    let url: String

    /// Starts listening and prints `relay: listening on ws://HOST:PORT/v1/relay` once it accepts connections, on
    /// stdout, or on stderr when stdout carries events. Tokens and the TLS pair live in `stateDirectory`. With
    /// `observe: false` the caller publishes the events to `hub` itself (`stream`, through a `RelayHubSink`).
    static func start(
        _ options: RelayOptions, stateDirectory: String, engine: SessionEngine, announceOnStderr: Bool = false,
        observe: Bool = true, metrics: GatewayMetrics? = nil, recording: ServeRecording? = nil
    ) async throws -> RelayRuntime {
        let (host, port) = try RelayOptions.split(options.listen ?? "127.0.0.1:0")
        let tokens = RelayTokenStore(directory: stateDirectory, warn: { message in
            Logger(label: "hr-gateway").warning("relay tokens: \(message)")
        })
        if !options.noAuth {
            do {
                if try tokens.list().isEmpty {
                    // Through the logger: under journald a warning has its priority (`journalctl -p warning`).
                    let warning = "no relay tokens in \(tokens.directory): every consumer will be refused (401). "
                        + "Create one with `hr-gateway token create --name phone` (as the user the gateway runs as, "
                        + "or with --state-dir \(tokens.directory))."
                    Logger(label: "hr-gateway").warning("\(warning)")
                }
            } catch {
                // Said as it is: "no tokens, create one" sent the operator to create a token the gateway cannot read.
                Logger(label: "hr-gateway").warning(
                    "relay tokens: \(error) Every consumer is refused (401) until the gateway can read it.")
            }
        }
        var config = RelayServerConfiguration(host: host, port: port)
        config.allowAnonymous = options.noAuth
        config.tls = try options.tlsFiles(stateDirectory: stateDirectory)
        if let metrics { config.metrics = { metrics.exposition() } }
        config.sessions = StoreSessionArchive(directory: stateDirectory)
        let hub = RelayHub.forGateway(engine: engine, stateDirectory: stateDirectory, recording: recording)
        let observation = observe ? hub.attach(to: engine) : nil
        // Tokens count in no-auth mode too: a request with one is its holder's wherever it comes from.
        let server = RelayServer(hub: hub, tokens: tokens, configuration: config)
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let task = Task {
            defer { continuation.finish() }
            try await server.run { continuation.yield($0) }
        }
        var iterator = ports.makeAsyncIterator()
        guard let bound = await iterator.next() else {
            do { try await task.value } catch {
                throw CommandFailure("Relay cannot listen on \(host):\(port): "
                    + listenFailure(error, address: "\(host):\(port)", option: "--listen (or relay.listen in the configuration file)") + ".")
            }
            throw CommandFailure("Relay stopped before listening on \(host):\(port).")
        }
        let shown = host.contains(":") ? "[\(host)]" : host
        let url = "\(config.tls == nil ? "ws" : "wss")://\(shown):\(bound)/v1/relay"
        var text = "relay: listening on \(url)\n"
        if let tls = config.tls, let fingerprint = try? tls.fingerprint() {
            text = "relay: TLS certificate SHA-256 \(fingerprint)\n" + text
        }
        let line = Data(text.utf8)
        if announceOnStderr {
            StandardStream.error.write(line)
        } else {
            StandardStream.output.write(line)
        }
        return RelayRuntime(hub: hub, observation: observation, task: task, url: url)
    }

    private init(hub: RelayHub, observation: ObservationToken?, task: Task<Void, any Error>, url: String) {
        self.hub = hub
        self.observation = observation
        self.task = task
        self.url = url
    }

    /// Gives connected consumers up to `graceMs` to receive what is queued, then closes the server.
    func stop(graceMs: Int = 2000) async {
        var waited = 0
        while !hub.allQueuesEmpty && waited < graceMs {
            try? await Task.sleep(for: .milliseconds(20))
            waited += 20
        }
        hub.closeAll()
        // Each connection finishes the frame it is writing and sends its close frame before the server stops.
        waited = 0
        while hub.connectionCount > 0 && waited < 2000 {
            try? await Task.sleep(for: .milliseconds(10))
            waited += 10
        }
        task.cancel()
        _ = try? await task.value
        // The consumers' last acknowledgements reach relay.sqlite before the process exits.
        await hub.settled()
    }
}

extension RelayHub {
    /// The hub for `engine`, keeping reliable events and cursors in `relay.sqlite` in the state directory, or in
    /// memory only (with a warning) when that cannot be opened.
    /// The gateway's hub; with `recording` (`serve`), each session a consumer starts is recorded into the store.
    static func forGateway(engine: SessionEngine, stateDirectory: String, recording: ServeRecording? = nil) -> RelayHub {
        let report: @Sendable (String) -> Void = { Logger(label: "hr-gateway").warning("relay: \($0)") }
        var store: RelayOutboxStore?
        do { store = try RelayOutboxStore(directory: stateDirectory) } catch {
            report("\(error); reliable events will not survive a restart")
        }
        let controller: any RelayController = recording.map {
            RecordingRelayController(base: EngineRelayController(engine: engine), recording: $0)
        } ?? EngineRelayController(engine: engine)
        return RelayHub(controller: controller, store: store, onStoreFailure: report)
    }
}
