import DBus
import DBusTestSupport
import Synchronization
import Testing

@Suite("Flow control and byte arrays", .timeLimit(.minutes(1)))
struct FlowControlTests {
    /// pauseReading() leaves signals in the bus (not in a buffer of ours); resumeReading() delivers all, in order.
    @Test func pausedReadingHoldsSignalsInTheBusUntilResumed() async throws {
        try await withPrivateBus { _, receiver, emitter in
            let handled = Atomic<Int>(0)
            let (arrivals, arrived) = AsyncStream.makeStream(of: UInt32.self)
            let registration = try await receiver.receive(
                anyOf: [DBusMatchRule(interface: "org.example.Flow", member: "Tick")]
            ) { message in
                handled.add(1, ordering: .relaxed)
                if let n = message.body.first?.uint32 { arrived.yield(n) }
            }
            defer { registration.cancel() }
            receiver.pauseReading()
            #expect(receiver.isReadingPaused)   // also a barrier: the pause has reached the queue
            for i in 0..<50 {
                try emitter.emitSignal(
                    path: "/flow", interface: "org.example.Flow", member: "Tick", arguments: [.uint32(UInt32(i))])
            }
            // The bus handles one connection's messages in order: once this returns, it has routed the 50 signals.
            _ = try await emitter.listNames()
            #expect(handled.load(ordering: .relaxed) == 0, "nothing read while paused")
            receiver.resumeReading()
            var got: [UInt32] = []
            for await n in arrivals {
                got.append(n)
                if got.count == 50 { break }
            }
            #expect(got == (0..<50).map(UInt32.init))
            #expect(!receiver.isReadingPaused)
        }
    }

    /// A handler registration runs on the connection's queue in arrival order, stamped with the read time.
    @Test func handlerSeesMessagesStampedWhenRead() async throws {
        try await withPrivateBus { _, receiver, emitter in
            let (arrivals, arrived) = AsyncStream.makeStream(of: DBusMessage.self)
            let registration = try await receiver.receive(
                anyOf: [DBusMatchRule(interface: "org.example.Flow", member: "Bytes")]
            ) { arrived.yield($0) }
            defer { registration.cancel() }
            let before = ContinuousClock.now
            try emitter.emitSignal(
                path: "/flow", interface: "org.example.Flow", member: "Bytes",
                arguments: [.bytes([0x10, 0x48, 0x2c, 0x03]), .bytes([])])
            var it = arrivals.makeAsyncIterator()
            let message = try #require(await it.next())
            #expect(message.receivedAt >= before && message.receivedAt <= .now)
            #expect(message.body == [.byteArray([0x10, 0x48, 0x2c, 0x03]), .byteArray([])])
            #expect(message.body.first?.bytes == [0x10, 0x48, 0x2c, 0x03])
            #expect(message.signature == "ayay")
        }
    }

    @Test func byteArraysEqualAndHashLikeArraysOfBytes() {
        let boxed = DBusValue.array(elementSignature: "y", [.byte(1), .byte(2)])
        let flat = DBusValue.byteArray([1, 2])
        #expect(boxed == flat && flat == boxed)
        #expect(Set([boxed, flat]).count == 1)
        #expect(flat.signature == "ay" && flat.marshallingProblem == nil)
        #expect(flat.arrayElements == [.byte(1), .byte(2)])
        #expect(flat != .byteArray([1, 3]) && flat != .array(elementSignature: "q", [.uint16(1), .uint16(2)]))
        #expect(DBusValue.bytes([1, 2]) == flat)
    }
}
