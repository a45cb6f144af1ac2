import Foundation
#if canImport(Glibc)
import Glibc
#endif
import GatewayEngine
import SystemCalls

/// The sample recording format: JSON lines, one sample dictionary per line (the `biosignal_frame` sample shape),
/// written as samples arrive and read back by `ReplayBiosignalProvider`.
public enum SampleFile {
    /// A recording line that could not be read.
    public struct ReadError: Error, Sendable, Equatable, CustomStringConvertible {
        public let path: String
        /// nil when the file as a whole cannot be read or created.
        public let line: Int?
        public let reason: String
        public var description: String { line.map { "\(path) line \($0): \(reason)" } ?? "\(path): \(reason)" }

        public init(path: String, line: Int?, reason: String) {
            self.path = path
            self.line = line
            self.reason = reason
        }
    }

    /// What `read` found: the samples, and what it left out or noticed on the way.
    public struct Contents: Sendable {
        public var samples: [BiosignalSample] = []
        /// The final line was cut short (what an interrupted recording leaves behind) and is skipped.
        public var truncatedTail = false
        /// Lines that are not a sample (not JSON, or a sample without its timestamp or rate), skipped: how many, and
        /// the first one's line number and reason.
        public var unreadable = 0
        public var firstUnreadable: ReadError?
        /// Event lines (`session_frame` and the like: standard output of `stream`, not a recording), skipped.
        public var eventLines = 0
        /// RR values that cannot be intervals (zero or less, or over 60 s), removed from their samples: how many, and
        /// the first one's line.
        public var impossibleRR = 0
        public var impossibleRRFirstLine: Int?
        /// Samples with more RR intervals than one notification can carry (`maxRRPerSample`): unreadable, skipped
        /// (one with a million made every window's sample entropy run for hours).
        public var overfull = 0
        public var overfullFirstLine: Int?
        /// Samples more than `lateToleranceMs` earlier than a sample before them: replayed in file order (at once) and
        /// recorded as they are, but older than the window of the samples before them, so outside its metrics.
        public var late = 0
        public var lateFirstLine: Int?
        /// Lines repeating a sample already read (the same timestamp, device and values; a file joined to itself),
        /// dropped: replayed twice they would count every beat twice.
        public var repeated = 0
        public var repeatedFirstLine: Int?
        /// The longest stretch between a sample and the next in time, and the line after it: the replay waits it out.
        public var longestGapMs: Int64 = 0
        public var longestGapLine: Int?

        /// "2 h 5 min", "7 min 30 s".
        static func spoken(_ ms: Int64) -> String {
            let sec = ms / 1000
            if sec >= 3600 { return "\(sec / 3600) h \(sec / 60 % 60) min" }
            return sec % 60 == 0 ? "\(sec / 60) min" : "\(sec / 60) min \(sec % 60) s"
        }

        /// Each finding in a sentence, for the replay's status and log.
        public var notes: [String] { notes(replaying: true) }

        /// Each finding in a sentence; `replaying` false for a reader that does not play the file in time (`hrv`).
        public func notes(replaying: Bool) -> [String] {
            var notes: [String] = []
            if truncatedTail { notes.append("last line incomplete, skipped") }
            if let first = firstUnreadable, let line = first.line {
                notes.append("\(unreadable) unreadable line\(unreadable == 1 ? "" : "s") skipped (first: line \(line), "
                    + "\(first.reason))")
            }
            if eventLines > 0 { notes.append("\(eventLines) event line\(eventLines == 1 ? "" : "s") (not samples) skipped") }
            if let line = impossibleRRFirstLine {
                notes.append("\(impossibleRR) RR value\(impossibleRR == 1 ? "" : "s") of zero or less or over 60 s dropped "
                    + "(first on line \(line))")
            }
            if let line = overfullFirstLine {
                notes.append("\(overfull) sample\(overfull == 1 ? "" : "s") with more than \(SampleFile.maxRRPerSample) RR "
                    + "intervals (more than a notification carries) skipped (first on line \(line))")
            }
            if let line = lateFirstLine {
                notes.append("\(late) sample\(late == 1 ? " is" : "s are") more than \(SampleFile.lateToleranceMs / 1000) s "
                    + "earlier than one before (first on line \(line))" + (replaying
                        ? ": replayed in file order and recorded, but outside the window of the later samples"
                        : ": read in file order"))
            }
            if let line = repeatedFirstLine {
                notes.append("\(repeated) repeated sample\(repeated == 1 ? "" : "s") (the same as one before) dropped "
                    + "(first on line \(line))")
            }
            if let line = longestGapLine, longestGapMs >= SampleFile.longGapMs {
                notes.append("a gap of \(Self.spoken(longestGapMs)) before line \(line)"
                    + (replaying ? ": the replay waits it out (--replay-speed plays it faster)" : " (no samples in it)"))
            }
            return notes
        }
    }

    /// A stretch without samples worth a note: the replay is silent for as long (at speed 1).
    public static let longGapMs: Int64 = 5 * 60_000

    /// Heart rates a sample may carry; anything else is not one (0 where a sample has none, as a waveform chunk).
    public static let bpmRange: ClosedRange<Double> = 0...1000

    /// How far a sample may be earlier than one before it without a note: samples of two devices (a strap and a
    /// camera) are written as they arrive and their timestamps can cross by a frame or a notification.
    public static let lateToleranceMs: Int64 = 5_000

    private struct SampleKey: Hashable {
        let timestampMs: Int64
        let deviceId: String?
        let source: String
    }

    /// The longest RR interval a sample may carry (as `hr-gateway hrv` reads RR files).
    public static let maxRRMs: Double = 60_000

    /// The most RR intervals one sample can hold: a heart-rate notification carries at most 121 (2 bytes each in the
    /// largest ATT payload, 244 bytes); the default MTU carries 9.
    public static let maxRRPerSample = 128

    /// Reads every sample. A line that is not a sample is skipped and counted (`unreadable`, `eventLines`), a final
    /// line without its newline (what an interrupted recording leaves behind) is skipped and reported in
    /// `truncatedTail`. Throws when the file cannot be read, or holds no sample: naming the first unreadable line,
    /// or saying that it is an event log rather than a recording.
    public static func read(path: String) throws(ReadError) -> Contents {
        let bytes: [UInt8]
        do {
            bytes = try SystemCall.readFile(path, notA: "a recording (JSON lines, as --record writes them)")
        } catch {
            throw ReadError(path: path, line: nil, reason: error.reason)
        }
        return try parse(bytes, path: path)
    }

    /// As `read(path:)`, on the bytes of a recording already read (`path` names it in errors).
    public static func parse(_ bytes: [UInt8], path: String) throws(ReadError) -> Contents {
        var bytes = bytes
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes.removeFirst(3) }  // a byte order mark (Windows editors)
        var contents = Contents()
        var latest: Int64?
        // Samples read so far by time and device, to find a line that repeats one.
        var seen: [SampleKey: [Int]] = [:]
        var lineNumber = 0
        var start = 0
        while start < bytes.count {
            lineNumber += 1
            let end = bytes[start...].firstIndex(of: 0x0A) ?? bytes.count
            let isLast = end == bytes.count
            let line = Array(bytes[start..<end])
            start = end + 1
            if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }
            var sample: BiosignalSample
            do {
                let json = try JSONValue(parsing: line)
                // `sessions export --format json`: one object holding the whole session, not a sample per line.
                if contents.samples.isEmpty, json["session"]?.objectValue != nil, json["samples"]?.arrayValue != nil {
                    throw ReadError(path: path, line: lineNumber, reason: "a JSON export (sessions export --format "
                        + "json: the whole session in one object), not a recording of one sample per line: export it "
                        + "with --format jsonl (or csv, for hr-gateway hrv)")
                }
                if json["type"] != nil, json["timestamp_ms"] == nil {
                    contents.eventLines += 1
                    continue
                }
                sample = try BiosignalSample(json: json)
                guard bpmRange.contains(sample.bpm) else {
                    throw SampleDecodingError("bpm \(String(format: "%g", sample.bpm)) is not a heart rate (0 to 1000)")
                }
            } catch let error as ReadError {
                throw error
            } catch {
                if isLast, !contents.samples.isEmpty {
                    contents.truncatedTail = true
                    break
                }
                contents.unreadable += 1
                if contents.firstUnreadable == nil {
                    contents.firstUnreadable = ReadError(path: path, line: lineNumber, reason: "\(error)")
                }
                continue
            }
            if (sample.rrIntervalsMs?.count ?? 0) > maxRRPerSample || (sample.rrRaw1024?.count ?? 0) > maxRRPerSample {
                contents.overfull += 1
                contents.overfullFirstLine = contents.overfullFirstLine ?? lineNumber
                continue
            }
            var impossible = 0
            if let rr = sample.rrIntervalsMs, rr.contains(where: { $0 <= 0 || $0 > maxRRMs }) {
                impossible = rr.count { $0 <= 0 || $0 > maxRRMs }
                sample.rrIntervalsMs = rr.filter { $0 > 0 && $0 <= maxRRMs }
            }
            let key = SampleKey(timestampMs: sample.timestampMs, deviceId: sample.deviceId, source: sample.source)
            if let earlier = seen[key], earlier.contains(where: { contents.samples[$0] == sample }) {
                contents.repeated += 1
                contents.repeatedFirstLine = contents.repeatedFirstLine ?? lineNumber
                continue
            }
            seen[key, default: []].append(contents.samples.count)
            if impossible > 0 {
                contents.impossibleRR += impossible
                contents.impossibleRRFirstLine = contents.impossibleRRFirstLine ?? lineNumber
            }
            if let latest, sample.timestampMs < latest - lateToleranceMs {
                contents.late += 1
                contents.lateFirstLine = contents.lateFirstLine ?? lineNumber
            }
            if let latest, sample.timestampMs - latest > contents.longestGapMs {
                contents.longestGapMs = sample.timestampMs - latest
                contents.longestGapLine = lineNumber
            }
            latest = max(latest ?? sample.timestampMs, sample.timestampMs)
            contents.samples.append(sample)
        }
        if contents.samples.isEmpty {
            if let first = contents.firstUnreadable { throw first }
            if let line = contents.overfullFirstLine {
                throw ReadError(path: path, line: line, reason: "more than \(maxRRPerSample) RR intervals in one sample "
                    + "(more than a notification carries), and no other sample")
            }
            if contents.eventLines > 0 {
                throw ReadError(path: path, line: nil, reason: "session events (the standard output of stream), not a "
                    + "recording of samples: record with --record FILE, or export a stored session with "
                    + "hr-gateway sessions export ID --format jsonl")
            }
            throw ReadError(path: path, line: nil, reason: "no samples in the file")
        }
        return contents
    }
}

/// Appends samples to a recording, one line each, flushed as written so that a crash loses nothing already received.
///
/// A write that fails (a full disk, a removed USB stick) ends the file where it stands: the failure is reported once
/// through `warn`, later samples are counted (`unwritten`) rather than appended after a gap, and the session goes
/// on (the session store records them independently).
public final class SampleFileWriter: Sendable {
    /// A recording that cannot be created.
    public struct CreateError: Error, Sendable, Equatable, CustomStringConvertible {
        public let path: String
        public let reason: String
        public var description: String { "\(path): \(reason)" }
    }

    private struct State {
        var handle: FileHandle?
        var failed = false
        var unwritten = 0
        /// Bytes of whole lines written: a write that fails part-way (a full disk) is cut back to here, so the file
        /// ends with a whole line (a torn last line broke a reader that parses every line).
        var committed: Int64 = 0
    }

    public let path: String
    private let state: Locked<State>
    /// Tells what is lost or replaced (a failed write, an existing file truncated), for the log.
    private let warn: @Sendable (String) -> Void

    /// The size of a regular file at `path` that holds data, which creating a writer there would replace; nil for
    /// none, an empty file, a device or a named pipe.
    public static func heldBytes(_ path: String) -> Int64? {
        var existing = stat()
        guard stat(path, &existing) == 0, (existing.st_mode & S_IFMT) == S_IFREG, existing.st_size > 0 else { return nil }
        return Int64(existing.st_size)
    }

    /// Creates (or truncates) the file. Opened in place (not replaced by a new file), so a path that is a device or
    /// a named pipe is written to, not swapped for a regular file.
    public init(path: String, warn: @escaping @Sendable (String) -> Void = { _ in }) throws {
        self.path = path
        self.warn = warn
        if let size = Self.heldBytes(path) { warn("--record \(path): replacing the \(size) bytes it held") }
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw CreateError(path: path, reason: PathReason.unwritable(path, code: errno)) }
        state = Locked(State(handle: FileHandle(fileDescriptor: fd, closeOnDealloc: true)))
    }

    /// Whether two paths name one file (the same device and inode), for refusing to record into the file replayed.
    public static func sameFile(_ a: String, _ b: String) -> Bool {
        var sa = stat()
        var sb = stat()
        return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino
    }

    /// Samples not in the file because a write failed (the one that failed and every one after it).
    public var unwritten: Int { state.withLock { $0.unwritten } }

    public func append(_ sample: BiosignalSample) {
        let line = sample.jsonValue.jsonString + "\n"
        let failure: String? = state.withLock { s -> String? in
            guard !s.failed else {
                s.unwritten += 1
                return nil
            }
            guard let h = s.handle else { return nil }
            let fd = h.fileDescriptor
            do throws(SystemCallError) {
                try SystemCall.writeAll(fd, line)
                s.committed += Int64(line.utf8.count)
                return nil
            } catch {
                s.failed = true
                s.unwritten += 1
                // A regular file is cut back to its last whole line; a pipe or a device cannot be (nor is it torn
                // for a reader that stops at the last newline).
                var st = stat()
                let regular = fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG
                let whole = !regular || SystemCall.retryingInterrupts { ftruncate(fd, off_t(s.committed)) } == 0
                let held = whole ? "what it holds is intact, whole lines" : "its last line may be cut short"
                return "\(String(cString: strerror(error.code))); the recording stops here (\(held))"
            }
        }
        if let failure {
            warn("--record \(path): \(failure) and the session goes on")
        }
    }

    public func close() {
        let unwritten: Int = state.withLock { s in
            try? s.handle?.synchronize()
            try? s.handle?.close()
            s.handle = nil
            return s.unwritten
        }
        if unwritten > 0 { warn("--record \(path): \(unwritten) sample\(unwritten == 1 ? "" : "s") not written to it") }
    }
}
