import Foundation
import Logging
import SystemCalls

/// How log lines look, chosen once at start from where standard error goes.
public enum LogStyle: Sendable, Equatable {
    /// A terminal: `12:04:05 warn  label: message key=value`, the level coloured.
    case terminal
    /// systemd's journal (`JOURNAL_STREAM` names standard error): `<4>label: message key=value`; the journal adds
    /// the time and reads the priority from the `<N>` prefix. No ANSI.
    case journal
    /// A file or pipe: `2026-11-22T12:04:05.123Z warning label: message key=value`. No ANSI.
    case plain

    /// `JOURNAL_STREAM` is `device:inode` of the journal's socket; it counts only when standard error is that
    /// socket (a child whose stderr was redirected inherits the variable but not the stream).
    public static func detect(
        environment: [String: String] = ProcessInfo.processInfo.environment, fd: Int32 = STDERR_FILENO
    ) -> LogStyle {
        var st = stat()
        let haveStat = fstat(fd, &st) == 0
        if let stream = environment["JOURNAL_STREAM"], haveStat {
            let parts = stream.split(separator: ":")
            if parts.count == 2, UInt64(parts[0]) == UInt64(st.st_dev), UInt64(parts[1]) == UInt64(st.st_ino) {
                return .journal
            }
        }
        return isatty(fd) == 1 && environment["TERM"] != "dumb" && environment["NO_COLOR"] == nil ? .terminal : .plain
    }
}

/// The pure formatting of one log line (no newline).
public enum LogFormat {
    /// syslog priority of a level (what journald shows and filters by: `journalctl -p warning`).
    public static func syslogPriority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    public static func line(
        style: LogStyle, level: Logger.Level, label: String, message: String, metadata: Logger.Metadata, date: Date
    ) -> String {
        let meta = metadata.isEmpty ? ""
            : " " + metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        // One record, one line: the journal and line-oriented readers must not split it.
        let text = (message + meta).replacingOccurrences(of: "\n", with: "\\n")
        switch style {
        case .journal:
            return "<\(syslogPriority(level))>\(label): \(text)"
        case .plain:
            return "\(iso8601(date)) \(level.rawValue) \(label): \(text)"
        case .terminal:
            let name = level == .warning ? "warn" : level == .critical ? "crit" : level.rawValue
            let padded = name.padding(toLength: 5, withPad: " ", startingAt: 0)
            let colour: String
            switch level {
            case .trace, .debug: colour = "\u{1B}[2m"
            case .info, .notice: colour = "\u{1B}[36m"
            case .warning: colour = "\u{1B}[33m"
            case .error, .critical: colour = "\u{1B}[31;1m"
            }
            return "\(clock(date)) \(colour)\(padded)\u{1B}[0m \(label): \(text)"
        }
    }

    private static func iso8601(_ date: Date) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f.string(from: date)
    }

    private static func clock(_ date: Date) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.dateFormat = "HH:mm:ss"
        return f.string(from: date)
    }
}

/// A swift-log handler writing `LogFormat` lines to standard error.
public struct GatewayLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public let label: String
    public let style: LogStyle
    private let write: @Sendable (String) -> Void

    public init(label: String, level: Logger.Level, style: LogStyle, write: @escaping @Sendable (String) -> Void = standardError) {
        self.label = label
        self.logLevel = level
        self.style = style
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var all = metadata
        if let extra = event.metadata { all.merge(extra) { $1 } }
        write(LogFormat.line(style: style, level: event.level, label: label, message: "\(event.message)",
                             metadata: all, date: Date()) + "\n")
    }

    /// Writes one whole line with a single write(2), so lines from several threads never interleave.
    public static let standardError: @Sendable (String) -> Void = { text in
        // A log line that cannot be written has nowhere else to go.
        try? SystemCall.writeAll(STDERR_FILENO, text)
    }

    /// Installs this handler for every logger of the process (once; later calls are ignored by swift-log's rules,
    /// so call it first thing).
    public static func bootstrap(level: Logger.Level, style: LogStyle = .detect()) {
        LoggingSystem.bootstrap { label in GatewayLogHandler(label: label, level: level, style: style) }
    }
}
