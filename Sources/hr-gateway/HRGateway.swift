import ArgumentParser

@main
struct HRGateway: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hr-gateway",
        abstract: "Heart-rate straps and webcams in, Synheart-compatible sessions out.",
        subcommands: [StreamCommand.self, HRVCommand.self, AnalyzeCommand.self, CamerasCommand.self, ServeCommand.self, AttachCommand.self, TokenCommand.self]
    )
}
