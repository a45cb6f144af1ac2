import ArgumentParser
import Foundation
import GatewayEngine
import ReplayProvider
import SimulatedProvider

/// The sources a session reads, shared by every command that runs the engine (`stream`, `serve`).
/// A new source is an option here plus a case in `providers(clock:)`.
struct SourceOptions: ParsableArguments {
    @Flag(help: "Use a simulated source (no hardware needed).")
    var simulate = false

    @Option(help: ArgumentHelp("Simulation model: realistic (RR with breathing and ectopic beats) or sdk-mock.", valueName: "model"))
    var model: SimulatedBiosignalProvider.Model = .realistic

    @Option(help: ArgumentHelp("Seed of the simulation, for repeatable runs.", valueName: "n"))
    var seed: UInt64 = 1

    @Option(help: ArgumentHelp("Replay a sample recording (JSON lines written by --record).", valueName: "file"))
    var replay: String?

    @Option(help: ArgumentHelp("Replay speed factor: 1 is real time, 10 is ten times faster.", valueName: "x"))
    var replaySpeed: Double = 1

    func check() throws {
        if !simulate && replay == nil {
            throw ValidationError("Choose a source: --simulate or --replay FILE (see --help).")
        }
        if simulate && replay != nil {
            throw ValidationError("--simulate and --replay cannot be combined.")
        }
        if !(replaySpeed > 0 && replaySpeed.isFinite) { throw ValidationError("--replay-speed must be a positive number.") }
    }

    /// The chosen sources, ready for a `SessionEngine`.
    func providers(clock: any SessionClock) throws -> [any BiosignalProvider] {
        var providers: [any BiosignalProvider] = []
        if simulate {
            providers.append(SimulatedBiosignalProvider(model: model, seed: seed, clock: clock))
        }
        if let replay {
            guard FileManager.default.isReadableFile(atPath: replay) else {
                throw ValidationError("Cannot read \(replay): check the path and permissions.")
            }
            providers.append(ReplayBiosignalProvider(path: replay, speed: replaySpeed, clock: clock))
        }
        return providers
    }
}
