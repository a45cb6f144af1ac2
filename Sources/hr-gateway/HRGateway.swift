import ArgumentParser
import Foundation
import GatewayEngine
import StdoutSink

@main
struct HRGateway: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hr-gateway",
        abstract: "Heart-rate straps and webcams in, Synheart-compatible sessions out.",
        discussion: """
            Start with `hr-gateway doctor` to check the machine, `hr-gateway scan` to find a strap, then \
            `hr-gateway stream --strap auto`. No strap at hand: `hr-gateway stream --simulate`. A phone app \
            connects to `hr-gateway serve --strap auto --listen 0.0.0.0:8765` with a token from \
            `hr-gateway token create`. Every subcommand has its own --help with examples.

            Exit status: 0 done; 64 a usage error (the message names the option); 1 a failure while running (a \
            session without a single sample from its sources, output that did not arrive, a file or device that \
            could not be used, a source that failed once the session started: no strap, no D-Bus); 2 a session \
            the engine refused to start (its settings: nothing emitted); 143, 130 or 129 after SIGTERM, SIGINT or \
            SIGHUP before a session started; 128 + N after a second signal N. Machine-readable output (--json, \
            --format jsonl) goes to standard output only; warnings and logs to standard error.
            """,
        version: GatewayVersion.current,
        subcommands: [
            StreamCommand.self, BreatheCommand.self, ServeCommand.self, AttachCommand.self, TokenCommand.self,
            ScanCommand.self, PairCommand.self, UnpairCommand.self, EmulateStrapCommand.self, CamerasCommand.self,
            SessionsCommand.self, HRVCommand.self, AnalyzeCommand.self, ConfigCommand.self, DoctorCommand.self,
            WebhookCommand.self, FleetCommand.self,
        ]
    )

    /// Swift on Linux finds argv by walking back from `environ`, which must still point into the initial stack. A
    /// preloaded library that edits the environment in its constructor moves `environ` to the heap (libfaketime
    /// does, so the clock-step test and anyone running the gateway under `faketime` hit it), and
    /// `CommandLine.arguments` comes back empty: the root help instead of the subcommand. The kernel's copy of argv,
    /// /proc/self/cmdline, is then read instead.
    ///
    /// A command that ran to the end but whose standard output did not take everything it wrote (a full disk behind
    /// `> file`) fails (status 1, the reason on standard error) instead of exiting 0 with its output cut short.
    static func main() async {
        let arguments = CommandLine.arguments.isEmpty ? kernelArguments().map { Array($0.dropFirst()) } : nil
        if let problem = CommandWords.problem(in: arguments ?? Array(CommandLine.arguments.dropFirst())) {
            FileHandle.standardError.write(Data("Error: \(problem)\n".utf8))
            Foundation.exit(ExitCode.validationFailure.rawValue)
        }
        do {
            var command = try await asyncParseAsRoot(arguments)
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            if let problem = StandardStream.outputProblem() {
                throw CommandFailure("standard output did not take everything written to it: \(problem)")
            }
        } catch {
            exit(withError: error)
        }
    }

    /// argv as the kernel holds it, or nil when /proc is not readable.
    static func kernelArguments() -> [String]? {
        guard let data = FileManager.default.contents(atPath: "/proc/self/cmdline"), !data.isEmpty else { return nil }
        return data.split(separator: 0, omittingEmptySubsequences: false).dropLast(data.last == 0 ? 1 : 0)
            .map { String(decoding: $0, as: UTF8.self) }
    }
}
