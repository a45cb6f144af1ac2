import ArgumentParser

@main
struct HRGateway: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hr-gateway",
        abstract: "Heart-rate straps and webcams in, Synheart-compatible sessions out.",
        discussion: """
            Start with `hr-gateway doctor` to check the machine, `hr-gateway scan` to find a strap, then \
            `hr-gateway stream --strap auto`. No strap at hand: `hr-gateway stream --simulate`. Every subcommand \
            has its own --help with examples.
            """,
        subcommands: [
            StreamCommand.self, ScanCommand.self, EmulateStrapCommand.self, CamerasCommand.self,
            SessionsCommand.self, HRVCommand.self, AnalyzeCommand.self, ConfigCommand.self, DoctorCommand.self,
            WebhookCommand.self,
        ]
    )
}
