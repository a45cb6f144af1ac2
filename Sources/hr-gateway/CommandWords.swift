import ArgumentParser

/// The command words at the start of a command line (`sessions list`, `help sessions export`), checked before the
/// parser sees them. The parser answers a mistyped one with "Unexpected argument 'strem'" and no hint, and `help`
/// followed by one it does not know with the top help and exit 0 (a script asking for `help nosuch` learnt nothing).
enum CommandWords {
    /// Why the words do not name a command, with the closest one and the commands there are; nil when they do (or
    /// stop at an option or at a command that takes no subcommands, left to the parser).
    static func problem(in arguments: [String], root: ParsableCommand.Type = HRGateway.self) -> String? {
        var command: ParsableCommand.Type = root
        var path: [String] = [root._commandName]
        // `help sessions list` names its commands as `sessions list --help` does.
        let words = arguments.first == "help" ? arguments.dropFirst() : arguments[...]
        for word in words {
            let subcommands: [ParsableCommand.Type] = command.configuration.subcommands
            guard !subcommands.isEmpty, command.configuration.defaultSubcommand == nil, !word.hasPrefix("-") else {
                return nil
            }
            var next: ParsableCommand.Type?
            for candidate in subcommands where candidate._commandName == word {
                next = candidate
            }
            if let next {
                command = next
                path.append(word)
                continue
            }
            var names: [String] = []
            for candidate in subcommands where candidate.configuration.shouldDisplay {
                names.append(candidate._commandName)
            }
            let named = path.joined(separator: " ")
            var lines = ["Unknown command '\(word)' for \(named)."]
            if let guess = closest(to: word, among: names) { lines[0] += " Did you mean '\(named) \(guess)'?" }
            lines.append("The commands of \(named): \(names.joined(separator: ", ")).")
            lines.append("See '\(named) --help' for what each does.")
            return lines.joined(separator: "\n")
        }
        return nil
    }

    /// The name a mistyped word most likely meant: the only one it begins, or the nearest within a third of its
    /// length in edits (at least one); nil when none is that close.
    static func closest(to word: String, among names: [String]) -> String? {
        let lower = word.lowercased()
        let begun = names.filter { $0.hasPrefix(lower) }
        if begun.count == 1 { return begun[0] }
        let limit = max(1, lower.count / 3)
        let scored = names.map { (name: $0, distance: editDistance(lower, $0)) }.filter { $0.distance <= limit }
        return scored.min { $0.distance < $1.distance }?.name
    }

    /// Levenshtein distance (insertions, deletions and substitutions of one character each), with a swap of two
    /// neighbouring characters counted as one edit (`stearm`).
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        var d = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { d[i][0] = i }
        for j in 0...b.count { d[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1) }
            }
        }
        return d[a.count][b.count]
    }
}
