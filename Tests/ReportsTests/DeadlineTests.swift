import Domain
import Synchronization
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing

@Suite struct DeadlineTests {
    @Test func theFirstToFinishWinsAndTheCallerNeverWaitsForTheLoser() async throws {
        #expect(await withDeadline(.seconds(5)) { 42 } == 42)
        // Work that ignores cancellation (a blocking call) still loses at the deadline, and is not waited for.
        let started = ContinuousClock.now
        let late: Int? = await withDeadline(.milliseconds(100)) {
            usleep(2_000_000)
            return 1
        }
        #expect(late == nil)
        #expect(ContinuousClock.now - started < .seconds(1.5))
    }

    @Test func failuresPassThroughAndTheLoserIsCancelled() async throws {
        struct Refused: Error {}
        await #expect(throws: Refused.self) { _ = try await withDeadline(.seconds(5)) { () async throws -> Int in throw Refused() } }
        let cancelled = Mutex(false)
        let result: Int? = await withDeadline(.milliseconds(50)) {
            do { try await Task.sleep(for: .seconds(10)) } catch { cancelled.withLock { $0 = true } }
            return 1
        }
        #expect(result == nil)
        try await Task.sleep(for: .milliseconds(200))
        #expect(cancelled.withLock { $0 })
    }

    @Test func cancellingTheCallerEndsTheWait() async throws {
        let task = Task { try await withDeadline(.seconds(30)) { () async throws -> Int in
            try await Task.sleep(for: .seconds(30))
            return 1
        } }
        try await Task.sleep(for: .milliseconds(50))
        let started = ContinuousClock.now
        task.cancel()
        await #expect(throws: CancellationError.self) { _ = try await task.value }
        #expect(ContinuousClock.now - started < .seconds(2))
    }
}
