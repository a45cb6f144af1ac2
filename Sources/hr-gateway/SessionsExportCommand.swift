import ArgumentParser
import Foundation
import SessionStore

extension SessionExport.Format: ExpressibleByArgument {}

struct SessionsExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write a recorded session as CSV (one row per beat), JSON or JSON lines (replayable).",
        discussion: """
            Formats:
              csv    one row per RR interval, with the columns
                     session_id,device_id,beat_time_ms,rr_ms,rr_1024,hr_bpm,contact
                     beat_time_ms: epoch ms of the beat that ends the interval, rebuilt
                       from the RR values: consecutive beats of a device are exactly
                       their RR apart, and no beat is later than the notification
                       that reported it; the timeline restarts after a gap
                       (reconnect, lost notifications); see docs/store.md
                     rr_1024: the strap's raw value (1/1024 s), empty when it sent none
                     contact: 1 skin contact, 0 no skin contact, empty when the
                       strap does not report it
                     samples without RR (camera estimates) have no rows
              json   {"session": …, "samples": […], "beats": […], "events": […]}:
                     everything recorded, and the beat times of the csv
              jsonl  one sample per line, the format of --record:
                     `hr-gateway stream --replay FILE` plays it back

            ID is a session id or its first characters (enough to name one session).

            Examples:
              hr-gateway sessions export 3f2a9c1e --format csv > beats.csv
              hr-gateway sessions export 3f2a9c1e --format jsonl --output s.jsonl
            """
    )

    @Argument(help: "The session id, or its first characters (see `hr-gateway sessions list`).")
    var id: String

    @Option(help: "csv, json or jsonl.")
    var format: SessionExport.Format = .csv

    @Option(help: ArgumentHelp("Write to FILE instead of standard output.", valueName: "file"))
    var output: String?

    @OptionGroup var store: StoreOptions

    func run() throws {
        let sessions = try store.open()
        let id: String
        do { id = try sessions.resolve(self.id) } catch { throw CommandFailure("\(error)") }
        let text: String
        do { text = try sessions.export(id: id, format: format) } catch { throw CommandFailure("\(error)") }
        if let output {
            guard FileManager.default.createFile(atPath: output, contents: Data(text.utf8)) else {
                throw CommandFailure("cannot write \(output): check the directory and permissions")
            }
        } else {
            FileHandle.standardOutput.write(Data(text.utf8))
        }
    }
}
