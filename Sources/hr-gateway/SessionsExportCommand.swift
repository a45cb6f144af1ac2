import ArgumentParser
import Foundation
import GatewayStorage
import ReplayProvider
import SessionStore
import StdoutSink
import SystemCalls

extension SessionExport.Format: ExpressibleByArgument {}

struct SessionsExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write a recorded session as CSV (one row per beat, or per ECG or motion sample), JSON, JSON lines (replayable) or EDF+.",
        discussion: """
            Formats:
              csv    one row per RR interval, with the columns
                     session_id,device_id,beat_time_ms,rr_ms,rr_1024,hr_bpm,contact,
                     segment_start
                     beat_time_ms: epoch ms of the beat that ends the interval, rebuilt
                       from the RR values: consecutive beats of a device are exactly
                       their RR apart, and no beat is later than the notification
                       that reported it; the timeline restarts after a gap
                       (reconnect, lost notifications); see docs/store.md
                     rr_1024: the strap's raw value (1/1024 s), empty when it sent none
                     contact: 1 skin contact, 0 no skin contact, empty when the
                       strap does not report it
                     segment_start: 1 on a device's first beat and the first
                       after a gap (`hr-gateway hrv` takes no successive
                       difference across it), else 0
                     samples without RR (camera estimates) have no rows
              json   {"session": …, "samples": […], "beats": […], "events": […]}:
                     everything recorded; "beats" holds the csv's rows
                     (contact true/false, absent when not reported)
              jsonl  one sample per line, the format of --record:
                     `hr-gateway stream --replay FILE` plays it back
              edf    EDF+ (binary, for EDFbrowser, MNE, pyedflib): HR as a
                     1 Hz signal, raw ECG and accelerometer when recorded,
                     every beat (the csv's beat times) and the session's
                     events as annotations; times from the whole second at
                     the start, in UTC; with several straps each has its
                     own signals (HR 1, ECG 1, HR 2…; the transducer field
                     names the device); see docs/store.md
              ecg-csv  one row per raw ECG sample (Polar straps, stream --ecg):
                     session_id,device_id,time_ms,ecg_uv,segment_start
                     time_ms: epoch ms of the sample, to the microsecond;
                       within a segment a device's samples are evenly
                       spaced, 1/rate apart (130 Hz for an H10) or at the
                       rate the chunks' times measure when the strap's own
                       differs (sessions show says so); a new segment
                       (segment_start 1, at its own time) begins after lost
                       frames or a clock reset
              acc-csv  one row per accelerometer sample (stream --acc HZ):
                     session_id,device_id,time_ms,x_g,y_g,z_g,segment_start

            ID is a session id or its first characters (enough to name one session).

            Examples:
              hr-gateway sessions export 3f2a9c1e --format csv > beats.csv
              hr-gateway sessions export 3f2a9c1e --format jsonl --output s.jsonl
              hr-gateway sessions export 3f2a9c1e --format edf --output s.edf
              hr-gateway sessions export 3f2a9c1e --format ecg-csv > ecg.csv
            """
    )

    @Argument(help: "The session id, or its first characters (see `hr-gateway sessions list`).")
    var id: String

    @Option(help: "csv, json, jsonl, edf, ecg-csv or acc-csv.")
    var format: SessionExport.Format = .csv

    @Option(name: [.customLong("output"), .customShort("o")], help: ArgumentHelp("Write to FILE instead of standard output (- is standard "
        + "output). A file that holds data is refused unless --overwrite; the state directory's own files always are.",
        valueName: "file"))
    var outputOption: String?

    /// The file to write, nil for standard output (`--output -` is standard output, as for most tools).
    var output: String? { outputOption == "-" ? nil : outputOption }

    @Flag(help: "With --output: replace what the file holds.")
    var overwrite = false

    @OptionGroup var store: StoreOptions

    func validate() throws {
        if id.trimmingCharacters(in: .whitespaces).isEmpty {
            throw ValidationError("A session id is empty: give one, or its first characters (see hr-gateway sessions list).")
        }
        if overwrite && output == nil {
            throw ValidationError("--overwrite is for --output FILE; there is no --output\(outputOption == nil ? "" : " file").")
        }
        if let output, !overwrite, let size = SampleFileWriter.heldBytes(output) {
            throw ValidationError("--output \(output) already holds \(size) bytes: write to another file, or add "
                + "--overwrite to replace it.")
        }
    }

    func run() throws {
        let sessions = try store.openForReading()
        let id: String
        do { id = try sessions.resolve(self.id) } catch { throw CommandFailure("\(error)") }
        // Writing an export over the state itself (the store's database, the journal of a recording, the tokens, an
        // outbox, the relay's certificate) loses what it holds: the tokens file was replaced with CSV.
        if let output {
            let databases = ["sessions.sqlite", "outbox.sqlite", "relay.sqlite", "mqtt-outbox.sqlite"]
            let own = (databases.flatMap { [$0, $0 + "-wal", $0 + "-shm"] } + ["tokens.json"]).map { sessions.directory + "/" + $0 }
            let parent = SystemCall.parentDirectory(of: output)
            if own.contains(where: { SampleFileWriter.sameFile(output, $0) })
                || ["journal", "tls"].contains(where: { SampleFileWriter.sameFile(parent.isEmpty ? "." : parent, sessions.directory + "/" + $0) })
            {
                throw CommandFailure("--output \(output) is a file of the gateway's state in \(sessions.directory) (the "
                    + "recorded sessions, tokens, outboxes): writing the export there would destroy it. Write it elsewhere.")
            }
        }
        if format == .edf, output == nil, isatty(STDOUT_FILENO) == 1 {
            throw CommandFailure("EDF is binary: write it to a file with --output FILE.edf (or redirect standard output).")
        }
        // Written as it is made (a 4-hour ECG CSV held whole took 345 MB); the file is opened at the first part.
        let file = output.map { FileParts(path: $0) }
        let parts = ExportOutput { bytes in
            if let file { try file.write(bytes) } else { StandardStream.output.write(Data(bytes)) }
        }
        do {
            try sessions.export(id: id, format: format, into: parts)
            try parts.finish()
            try file?.finish()
        } catch {
            file?.abandon()
            throw CommandFailure("\(error)")
        }
        if format == .edf, let session = try? sessions.session(id: id), let samples = try? sessions.samples(sessionId: id, waveforms: false) {
            let leftOut = SessionExport.edfLeftOut(session: session, samples: samples)
            if leftOut > 0 {
                StandardStream.error.write(Data(("note: \(leftOut) sample\(leftOut == 1 ? " is" : "s are") stamped more "
                    + "than \(SessionExport.earliestBeforeStartMs / 1000) s before the session's start (its clock stepped "
                    + "back?) and left out of the EDF (annotated at its start); --format csv or jsonl holds every one\n").utf8))
            }
        }
        if (try? sessions.session(id: id))??.state == .running {
            StandardStream.error.write(Data(("note: session \(id) is being recorded now: the export holds what was "
                + "recorded until this moment; export it again after it ends for the whole session\n").utf8))
        }
    }
}
