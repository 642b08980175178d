import Domain
import Synchronization
import Foundation
import Dispatch
import Testing

@Suite struct DeadlineTests {
    @Test func theFirstToFinishWinsAndTheCallerNeverWaitsForTheLoser() async throws {
        #expect(await withDeadline(.seconds(5)) { 42 } == 42)
        // Work that ignores cancellation (like a query waiting on a database thread) still loses at the deadline, and
        // is not waited for.
        let started = ContinuousClock.now
        let late: Int? = await withDeadline(.milliseconds(100)) {
            await withCheckedContinuation { continuation in
                DispatchQueue.global().asyncAfter(deadline: .now() + 3) { continuation.resume(returning: 1) }
            }
        }
        #expect(late == nil)
        #expect(ContinuousClock.now - started < .seconds(2))
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
        #expect(ContinuousClock.now - started < .seconds(5))
    }
}
