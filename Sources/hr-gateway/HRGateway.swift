import ArgumentParser

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
            """,
        subcommands: [
            StreamCommand.self, ServeCommand.self, AttachCommand.self, TokenCommand.self,
            ScanCommand.self, EmulateStrapCommand.self, CamerasCommand.self,
            SessionsCommand.self, HRVCommand.self, AnalyzeCommand.self, ConfigCommand.self, DoctorCommand.self,
            WebhookCommand.self,
        ]
    )
}
