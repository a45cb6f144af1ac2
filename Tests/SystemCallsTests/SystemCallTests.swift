import Foundation
import SystemCalls
import Testing

@Suite struct SystemCallTests {
    @Test func everyByteIsWrittenHoweverLarge() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-syscall-\(UUID().uuidString)").path
        defer { unlink(path) }
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        try #require(fd >= 0)
        let bytes = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try bytes.withUnsafeBytes { try SystemCall.writeAll(fd, $0) }
        try SystemCall.writeAll(fd, "é line\n")
        close(fd)
        let written = try #require(FileManager.default.contents(atPath: path))
        #expect(Array(written) == bytes + Array("é line\n".utf8))
    }

    @Test func aFailureIsAValueWithItsErrno() throws {
        let full = open("/dev/full", O_WRONLY)
        try #require(full >= 0, "/dev/full is on every Linux")
        defer { close(full) }
        #expect(throws: SystemCallError(call: "write", code: ENOSPC)) { try SystemCall.writeAll(full, "x") }
        #expect(SystemCallError(call: "write", code: ENOSPC).description == "write: No space left on device")

        var pipeEnds: [Int32] = [0, 0]
        try #require(pipe(&pipeEnds) == 0)
        close(pipeEnds[0])
        defer { close(pipeEnds[1]) }
        signal(SIGPIPE, SIG_IGN)
        #expect(throws: SystemCallError(call: "write", code: EPIPE)) { try SystemCall.writeAll(pipeEnds[1], "gone") }
        #expect(throws: SystemCallError(call: "write", code: EBADF)) { try SystemCall.writeAll(-1, "x") }
    }

    @Test func anInterruptedCallIsMadeAgainAndOtherFailuresAreNot() {
        var calls = 0
        let answered = SystemCall.retryingInterrupts { () -> Int32 in
            calls += 1
            if calls < 3 {
                errno = EINTR
                return -1
            }
            return 7
        }
        #expect(answered == 7 && calls == 3)

        calls = 0
        let failed = SystemCall.retryingInterrupts { () -> Int in
            calls += 1
            errno = EAGAIN
            return -1
        }
        #expect(failed == -1 && calls == 1 && errno == EAGAIN)
    }
}

@Suite struct PathReasonTests {
    @Test func whyAPathCannotBeRead() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-reason-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/a.txt"
        try "x".write(toFile: file, atomically: true, encoding: .utf8)
        #expect(PathReason.unreadable(dir + "/none") == "no such file")
        #expect(PathReason.unreadable(dir, notA: "a recording") == "a directory, not a recording")
        #expect(PathReason.unreadable(file + "/inside") == "a part of the path is not a directory")
        #expect(PathReason.unreadable(file) == nil, "readable: what it holds is the problem")
        chmod(file, 0)
        // root reads whatever the mode says.
        #expect(PathReason.unreadable(file) == (geteuid() == 0 ? nil : "permission denied"))
    }

    @Test func whyAPathCannotBeWritten() {
        #expect(PathReason.unwritable("/tmp/x/y.jsonl", code: ENOENT) == "the directory /tmp/x does not exist")
        #expect(PathReason.unwritable("y.jsonl", code: EACCES) == "permission denied (may this user write .?)")
        #expect(PathReason.unwritable("/y.jsonl", code: EPERM) == "permission denied (may this user write /?)")
        #expect(PathReason.unwritable("/tmp", code: EISDIR) == "a directory: give a file name inside it")
        #expect(PathReason.unwritable("/dev/full", code: ENOSPC) == "No space left on device: free some space or write elsewhere")
        #expect(PathReason.unwritable("/x", code: EROFS) == "Read-only file system")
    }
}

@Suite struct ReadFileTests {
    /// Pipes and devices have no size to read up to: what Foundation's `contents(atPath:)` refuses is read here.
    @Test func aPipeAndADeviceAreReadLikeAFile() throws {
        var fds: [Int32] = [0, 0]
        try #require(pipe(&fds) == 0)
        let text = Array(String(repeating: "812\n", count: 40_000).utf8)  // more than a pipe holds at once
        let writeEnd = fds[1]
        let writer = Thread {
            text.withUnsafeBytes { try? SystemCall.writeAll(writeEnd, $0) }
            close(writeEnd)
        }
        writer.start()
        defer { close(fds[0]) }
        #expect(try SystemCall.readFile("/dev/fd/\(fds[0])") == text)
        #expect(try SystemCall.readFile("/dev/null") == [])
    }

    @Test func aFailureSaysWhyInThePathsWords() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hrg-read-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(throws: FileReadError(path: dir + "/none", code: ENOENT, reason: "no such file")) {
            try SystemCall.readFile(dir + "/none")
        }
        #expect(throws: FileReadError(path: dir, code: EISDIR, reason: "a directory, not an RR file")) {
            try SystemCall.readFile(dir, notA: "an RR file")
        }
    }

    @Test func aDeviceThatNeverEndsStopsAtTheLimit() {
        #expect(throws: FileReadError(path: "/dev/zero", code: EFBIG, reason: "longer than 100000 bytes: not a file")) {
            try SystemCall.readFile("/dev/zero", limit: 100_000)
        }
    }
}

@Suite struct ParentDirectoryTests {
    /// NSString's `deletingLastPathComponent` for paths it handles (measured with Foundation on Linux), and one
    /// character, where it traps (SIGILL: `--output -`, `--state-dir q`).
    @Test func theParentIsFoundationsWithoutItsTrap() {
        let cases: [(String, String)] = [
            ("ab", ""), ("/ab", "/"), ("ab/", ""), ("ab/cd", "ab"), ("ab//cd", "ab"), ("/", "/"), ("", ""),
            ("ab/cd/", "ab"), ("//ab", "/"), ("./ab", "."), ("../ab", ".."), ("/ab/", "/"),
            ("a", ""), ("-", ""), (".", ""), ("a/", ""), ("/a", "/"), ("a/b", "a"), ("x/-", "x"),
        ]
        for (path, parent) in cases {
            #expect(SystemCall.parentDirectory(of: path) == parent, "\(path)")
        }
    }
}
