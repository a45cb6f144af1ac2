import ArgumentParser

@main
struct HRGateway: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hr-gateway",
        abstract: "Heart-rate straps and webcams in, Synheart-compatible sessions out.",
        subcommands: [StreamCommand.self, SessionsCommand.self, ConfigCommand.self, DoctorCommand.self, HRVCommand.self, AnalyzeCommand.self, CamerasCommand.self]
    )
}
