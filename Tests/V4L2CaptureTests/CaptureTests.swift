import CV4L2
import Testing
@testable import V4L2Capture
import V4L2TestSupport

#if canImport(Glibc)
import Glibc
#endif

private func noControls() -> CaptureConfiguration {
    var config = CaptureConfiguration()
    config.controls = nil
    return config
}

private let openAndNegotiate = [
    "open", "VIDIOC_QUERYCAP",
    "VIDIOC_ENUM_FMT", "VIDIOC_ENUM_FRAMESIZES", "VIDIOC_ENUM_FRAMEINTERVALS", "VIDIOC_ENUM_FRAMEINTERVALS",
    "VIDIOC_ENUM_FRAMESIZES", "VIDIOC_ENUM_FMT",
    "VIDIOC_S_FMT", "VIDIOC_S_PARM",
]

private func startSequence(buffers: Int) -> [String] {
    ["VIDIOC_REQBUFS"] + Array(repeating: ["VIDIOC_QUERYBUF", "mmap"], count: buffers).flatMap { $0 }
        + Array(repeating: "VIDIOC_QBUF", count: buffers) + ["VIDIOC_STREAMON"]
}

private func stopSequence(buffers: Int) -> [String] {
    ["VIDIOC_STREAMOFF"] + Array(repeating: "munmap", count: buffers) + ["VIDIOC_REQBUFS", "close"]
}

@Suite struct CaptureTests {
    @Test func fullCallSequenceFromOpenToClose() async throws {
        let fake = FakeV4L2(nodes: ["/dev/video0": .tiny()])
        let camera = try V4L2Camera.open("/dev/video0", configuration: noControls(), system: fake)
        #expect(camera.format.fourcc == .yuyv)
        #expect(camera.format.width == 8 && camera.format.height == 4 && camera.format.bytesPerLine == 16)
        #expect(camera.format.framesPerSecond == 30)
        #expect(camera.identity.driver == "fakecam")

        let frames = try camera.startStreaming()
        fake.deliver([.numbered(0), .numbered(1), .numbered(2)])
        var received: [CapturedFrame] = []
        for try await frame in frames {
            received.append(frame)
            if received.count == 3 { break }
        }
        await camera.stop()

        let buffers = 4
        let expected = openAndNegotiate + startSequence(buffers: buffers)
            + Array(repeating: ["VIDIOC_DQBUF", "VIDIOC_QBUF"], count: 3).flatMap { $0 } + stopSequence(buffers: buffers)
        #expect(fake.calls == expected)
        #expect(Set(fake.unmapped) == Set(fake.mapped) && fake.mapped.count == buffers)
        #expect(fake.openDescriptors == 0)

        #expect(received.map(\.sequence) == [0, 1, 2])
        #expect(received[1].bytes == FakeV4L2.Frame.numbered(1).bytes)
        #expect(received[1].timestamp == 1001.5 && received[1].timestampSource == .driver)
        #expect(received.allSatisfy { $0.width == 8 && $0.height == 4 && $0.fourcc == .yuyv && $0.bytesPerLine == 16 })
    }

    @Test func sequenceGapsAndErrorBuffersCountAsDrops() async throws {
        let fake = FakeV4L2(nodes: ["/dev/video0": .tiny()])
        var config = noControls()
        config.frameBufferLimit = 16
        let camera = try V4L2Camera.open("/dev/video0", configuration: config, system: fake)
        let frames = try camera.startStreaming()
        fake.deliver([
            .numbered(0), .numbered(1), .numbered(2),
            .numbered(3, flags: UInt32(V4L2_BUF_FLAG_ERROR | V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC)),
            .numbered(6), .numbered(7),
        ])
        var received: [CapturedFrame] = []
        for try await frame in frames {
            received.append(frame)
            if received.count == 5 { break }
        }
        await camera.stop()
        #expect(received.map(\.sequence) == [0, 1, 2, 6, 7])
        #expect(received.map(\.droppedFrames) == [0, 0, 0, 3, 0])
        #expect(received.map(\.totalDroppedFrames) == [0, 0, 0, 3, 3])
    }

    @Test func staleFirstLoopbackBufferIsNotCountedAsDrops() async throws {
        let fake = FakeV4L2(nodes: ["/dev/video0": .tiny()])
        var config = noControls()
        config.frameBufferLimit = 16
        let camera = try V4L2Camera.open("/dev/video0", configuration: config, system: fake)
        let frames = try camera.startStreaming()
        fake.deliver([.numbered(0), .numbered(483), .numbered(484), .numbered(486)])
        var received: [CapturedFrame] = []
        for try await frame in frames {
            received.append(frame)
            if received.count == 4 { break }
        }
        await camera.stop()
        #expect(received.map(\.droppedFrames) == [0, 0, 0, 1])
        #expect(received.last?.totalDroppedFrames == 1)
    }

    @Test func nonMonotonicDriverTimestampsAreReplacedByDequeueTime() async throws {
        let fake = FakeV4L2(nodes: ["/dev/video0": .tiny()])
        let camera = try V4L2Camera.open("/dev/video0", configuration: noControls(), system: fake)
        let frames = try camera.startStreaming()
        let before = fake.monotonicNow()
        fake.deliver([.numbered(0, flags: UInt32(V4L2_BUF_FLAG_TIMESTAMP_COPY))])
        var iterator = frames.makeAsyncIterator()
        let frame = try #require(try await iterator.next())
        await camera.stop()
        #expect(frame.timestampSource == .dequeue)
        #expect(frame.timestamp >= before && frame.timestamp <= fake.monotonicNow())
    }

    @Test func deviceGoneMidStreamEndsTheSequenceWithAnErrorAfterReleasingIt() async throws {
        let fake = FakeV4L2(nodes: ["/dev/video0": .tiny()])
        let camera = try V4L2Camera.open("/dev/video0", configuration: noControls(), system: fake)
        fake.inject(.init(operation: "VIDIOC_DQBUF", errno: ENODEV, skip: 2, times: 100))
        let frames = try camera.startStreaming()
        fake.deliver([.numbered(0), .numbered(1), .numbered(2)])
        var received = 0
        let error = await #expect(throws: V4L2Error.self) {
            for try await _ in frames { received += 1 }
        }
        #expect(received == 2)
        #expect(error?.code == .deviceGone)
        #expect(error?.errno == ENODEV)
        #expect(error?.operation == "VIDIOC_DQBUF")
        #expect(error?.devicePath == "/dev/video0")
        #expect(error?.description.contains("unplugged") == true)
        // The device was released before the error reached the consumer.
        #expect(Array(fake.calls.suffix(7)) == stopSequence(buffers: 4))
        #expect(fake.openDescriptors == 0)
        await camera.stop()
    }

    @Test func ioErrorMidStreamIsReportedAsIOError() async throws {
        let fake = FakeV4L2(nodes: ["/dev/video0": .tiny()])
        let camera = try V4L2Camera.open("/dev/video0", configuration: noControls(), system: fake)
        fake.inject(.init(operation: "VIDIOC_DQBUF", errno: EIO))
        let frames = try camera.startStreaming()
        fake.deliver([.numbered(0)])
        let error = await #expect(throws: V4L2Error.self) {
            for try await _ in frames {}
        }
        #expect(error?.code == .ioError)
        #expect(error?.description.contains("USB link") == true)
    }

    @Test func hangUpWithoutABufferEndsTheSequence() async throws {
        let fake = FakeV4L2(nodes: ["/dev/video0": .tiny()])
        let camera = try V4L2Camera.open("/dev/video0", configuration: noControls(), system: fake)
        let frames = try camera.startStreaming()
        fake.setPollEvents(CShort(POLLERR | POLLHUP))
        let error = await #expect(throws: V4L2Error.self) {
            for try await _ in frames {}
        }
        #expect(error?.code == .ioError)
        #expect(error?.operation == "poll")
        #expect(fake.openDescriptors == 0)
    }

    @Test func interruptedCallsAreRetried() async throws {
        let fake = FakeV4L2(nodes: ["/dev/video0": .tiny()])
        fake.inject(.init(operation: "open", errno: EINTR))
        fake.inject(.init(operation: "VIDIOC_QUERYCAP", errno: EINTR, times: 2))
        fake.inject(.init(operation: "VIDIOC_DQBUF", errno: EINTR))
        fake.inject(.init(operation: "poll", errno: EINTR))
        let camera = try V4L2Camera.open("/dev/video0", configuration: noControls(), system: fake)
        let frames = try camera.startStreaming()
        fake.deliver([.numbered(0)])
        var iterator = frames.makeAsyncIterator()
        let frame = try await iterator.next()
        await camera.stop()
        #expect(frame?.sequence == 0)
        #expect(Array(fake.calls.prefix(5)) == ["open", "open", "VIDIOC_QUERYCAP", "VIDIOC_QUERYCAP", "VIDIOC_QUERYCAP"])
        let dequeues = fake.calls.filter { $0 == "VIDIOC_DQBUF" }
        #expect(dequeues.count == 2)
    }

    @Test func wouldBlockAfterReadinessIsNotAnError() async throws {
        let fake = FakeV4L2(nodes: ["/dev/video0": .tiny()])
        let camera = try V4L2Camera.open("/dev/video0", configuration: noControls(), system: fake)
        fake.inject(.init(operation: "VIDIOC_DQBUF", errno: EAGAIN, times: 3))
        let frames = try camera.startStreaming()
        fake.deliver([.numbered(0), .numbered(1)])
        var sequences: [UInt32] = []
        for try await frame in frames {
            sequences.append(frame.sequence)
            if sequences.count == 2 { break }
        }
        await camera.stop()
        #expect(sequences == [0, 1])
    }

    @Test func cancellingTheConsumerStopsCaptureInOrder() async throws {
        let fake = FakeV4L2(nodes: ["/dev/video0": .tiny()])
        let camera = try V4L2Camera.open("/dev/video0", configuration: noControls(), system: fake)
        let frames = try camera.startStreaming()
        let (firstFrame, signal) = AsyncStream.makeStream(of: UInt32.self)
        let consumer = Task {
            var count = 0
            for try await frame in frames {
                count += 1
                signal.yield(frame.sequence)
            }
            return count
        }
        fake.deliver([.numbered(0)])
        var signals = firstFrame.makeAsyncIterator()
        #expect(await signals.next() == 0)
        consumer.cancel()
        let count = try await consumer.value
        await camera.stop()
        #expect(count == 1)
        #expect(Array(fake.calls.suffix(7)) == stopSequence(buffers: 4))
        #expect(fake.openDescriptors == 0)
        #expect(Set(fake.unmapped) == Set(fake.mapped))
    }

    @Test func stopWithoutStreamingJustCloses() async throws {
        let fake = FakeV4L2(nodes: ["/dev/video0": .tiny()])
        let camera = try V4L2Camera.open("/dev/video0", configuration: noControls(), system: fake)
        await camera.stop()
        await camera.stop()
        #expect(fake.calls.last == "close")
        #expect(fake.calls.filter { $0 == "close" }.count == 1)
        #expect(fake.openDescriptors == 0)
        #expect(throws: V4L2Error.self) { try camera.startStreaming() }
    }

    @Test func noFrameWithinTheTimeoutEndsTheSequence() async throws {
        let fake = FakeV4L2(nodes: ["/dev/video0": .tiny()])
        var config = noControls()
        config.frameTimeout = .milliseconds(250)
        let camera = try V4L2Camera.open("/dev/video0", configuration: config, system: fake)
        let frames = try camera.startStreaming()
        let error = await #expect(throws: V4L2Error.self) {
            for try await _ in frames {}
        }
        #expect(error?.code == .timedOut)
        #expect(error?.description.contains("v4l2loopback") == true)
        #expect(fake.openDescriptors == 0)
    }
}
