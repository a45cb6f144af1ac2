import GatewayStorage
import Testing

@Suite struct LockBackoffTests {
    @Test func waitsDoubleFromFiftyMillisecondsUpToOneSecond() {
        var backoff = LockBackoff()
        let waits = (0..<8).map { _ in backoff.next() }
        #expect(waits == [50, 100, 200, 400, 800, 1_000, 1_000, 1_000])
        #expect(backoff.waitedMs == 0, "waits without a limit count towards none")
    }

    @Test func aLimitCutsTheLastWaitAndThenEndsTheWaiting() {
        var backoff = LockBackoff()
        let waits = (0..<7).map { _ in backoff.next(within: 1_500) }
        #expect(waits == [50, 100, 200, 400, 750, nil, nil])
        #expect(backoff.waitedMs == 1_500)
    }

    /// A sample that waited while its session ran has the whole limit once the session has ended.
    @Test func aLimitCountsFromTheFirstWaitItAppliesTo() {
        var backoff = LockBackoff()
        for _ in 0..<20 { _ = backoff.next() }
        var limited: [Int64] = []
        while let ms = backoff.next(within: 2_500) { limited.append(ms) }
        #expect(limited == [1_000, 1_000, 500])
    }
}
