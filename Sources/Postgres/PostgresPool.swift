import Foundation
import Synchronization
import System

public struct PostgresPoolStatistics: Sendable {
    public let size: Int
    public let inUse: Int
    public let idle: Int
    public let waiting: Int
    /// Callers whose wait for a connection ran out (`poolTimeout`) since the pool started.
    public let timedOut: Int
}

/// A fixed set of connections, each owned by its own thread. Blocking libpq calls therefore never run on the Swift
/// cooperative pool; async callers wait for a job slot instead of growing the pool.
public final class PostgresPool: Sendable {
    public let configuration: PostgresConfiguration
    private let queue: JobQueue

    public init(configuration: PostgresConfiguration) {
        self.configuration = configuration
        queue = JobQueue(acquireTimeout: .milliseconds(configuration.acquireTimeoutMilliseconds))
        for index in 0..<max(1, configuration.poolSize) {
            queue.threadStarted()
            Threads.start("postgres-\(index)") { [queue] in
                let connection = PostgresConnection(configuration: configuration)
                try? connection.connect()
                queue.work(with: connection)
                queue.threadEnded()
            }
        }
        // Not counted in `threadsRunning`: it never enters libpq, so shutdown need not wait for it.
        Threads.start("postgres-waits") { [queue] in queue.expireWaiting() }
    }

    /// Entries of the job queue, taken and waiting, still held in memory; for tests.
    package var queueEntriesHeld: Int { queue.held }

    /// Pool threads that have not returned yet (0 once `shutdown` has waited them out).
    public var threadsRunning: Int { queue.threadsRunning }

    public var statistics: PostgresPoolStatistics {
        let (busy, waiting, timedOut) = queue.counts
        let size = max(1, configuration.poolSize)
        return PostgresPoolStatistics(size: size, inUse: busy, idle: size - busy, waiting: waiting, timedOut: timedOut)
    }

    /// Runs `body` with a connection on one of the pool's threads.
    public func withConnection<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            queue.submit(Job(enqueued: .now, run: { connection in
                connection.statementsInJob = 0
                let result = Result { try body(connection) }
                return { continuation.resume(with: result) }
            }, fail: { error in
                continuation.resume(throwing: error)
            }))
        }
    }

    /// Runs `body` inside BEGIN … COMMIT; any thrown error rolls back. A deadlock or serialization failure is retried
    /// (up to 3 attempts), so `body` must have no effects outside the database.
    public func transaction<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        try await withConnection { connection in
            var attempt = 0
            while true {
                attempt += 1
                do {
                    return try connection.transaction { try body($0) }
                } catch let error as PostgresError where error.isSerializationFailure && attempt < 3 {
                    continue
                }
            }
        }
    }

    @discardableResult
    public func query(_ sql: String, _ binds: [any PostgresEncodable] = []) async throws -> PostgresRows {
        try await withConnection { try $0.query(sql, binds) }
    }

    /// Fails waiting and future jobs, lets the threads close their connections and waits for them to end (a thread
    /// may still be connecting), up to the connect timeout and a margin. A command that exits right after must not
    /// leave a thread inside libpq: exit's handlers (OpenSSL's among them) would pull its state away mid-call.
    public func shutdown() {
        queue.close()
        guard !(Thread.current.name ?? "").hasPrefix("postgres-") else { return }
        queue.waitForThreads(until: Date(timeIntervalSinceNow: Double(configuration.connectTimeoutSeconds) + 5))
    }
}

extension PostgresConnection {
    public func transaction<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        try query("BEGIN")
        inTransaction = true
        defer { (inTransaction, unbounded) = (false, false) }
        do {
            let value = try body(self)
            try query("COMMIT")
            return value
        } catch {
            if isConnected { _ = try? query("ROLLBACK") }
            throw error
        }
    }
}

struct Job: Sendable {
    let enqueued: ContinuousClock.Instant
    /// Does the work on the pool thread; the returned closure hands the result over once the slot is released.
    let run: @Sendable (PostgresConnection) -> @Sendable () -> Void
    let fail: @Sendable (PostgresError) -> Void
}

/// The pool's job queue. Thread safety: all state is guarded by `condition`.
final class JobQueue: @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [Job] = []
    private var head = 0
    private var busy = 0
    /// Kept apart from `condition`: counted off the lock, read by scrapes.
    private let timedOut = Atomic<Int>(0)
    private var closed = false
    private var threads = 0
    private let acquireTimeout: Duration

    init(acquireTimeout: Duration) {
        self.acquireTimeout = acquireTimeout
    }

    var counts: (busy: Int, waiting: Int, timedOut: Int) {
        condition.lock()
        defer { condition.unlock() }
        return (busy, jobs.count - head, timedOut.load(ordering: .relaxed))
    }

    func submit(_ job: Job) {
        condition.lock()
        if closed {
            condition.unlock()
            job.fail(PostgresError(code: .poolClosed, detail: "the pool is shut down"))
            return
        }
        jobs.append(job)
        condition.unlock()
        // After the unlock: signalled under the lock, the woken thread found it held, slept on it and was woken a
        // second time when it was released (two context switches a query for one).
        condition.signal()
    }

    func close() {
        condition.lock()
        closed = true
        let pending = jobs[head...]
        jobs = []
        head = 0
        condition.broadcast()
        condition.unlock()
        for job in pending { job.fail(PostgresError(code: .poolClosed, detail: "the pool is shut down")) }
    }

    var threadsRunning: Int {
        condition.lock()
        defer { condition.unlock() }
        return threads
    }

    func threadStarted() {
        condition.lock()
        threads += 1
        condition.unlock()
    }

    func threadEnded() {
        condition.lock()
        threads -= 1
        condition.broadcast()
        condition.unlock()
    }

    /// Waits until every pool thread has returned, or until `deadline`.
    func waitForThreads(until deadline: Date) {
        condition.lock()
        while threads > 0, condition.wait(until: deadline) {}
        condition.unlock()
    }

    /// Fails the jobs that have waited longer than the acquire timeout while every connection stays busy (statements
    /// running long, a server that stopped answering): their callers hear so after the timeout, not whenever a
    /// connection frees. Returns when the pool closes.
    func expireWaiting() {
        let step = min(max(acquireTimeout / 4, .milliseconds(10)), .milliseconds(250))
        let pause = Double(step.components.seconds) + Double(step.components.attoseconds) / 1e18
        while true {
            condition.lock()
            if closed {
                condition.unlock()
                return
            }
            var expired: [Job] = []
            let now = ContinuousClock.now
            while head < jobs.count, now - jobs[head].enqueued > acquireTimeout {
                expired.append(jobs[head])
                head += 1
            }
            // No pool thread may take a job for as long as the server stalls: the spent entries (each holding its
            // statement and values) are let go here too.
            compact()
            condition.unlock()
            timedOut.add(expired.count, ordering: .relaxed)
            for job in expired { job.fail(timeoutError) }
            Thread.sleep(forTimeInterval: pause)
        }
    }

    /// Drops the entries before `head` once they are many and most of the array (not per job: a query's hand-over
    /// stays an append and an index). Called with the lock held.
    private func compact() {
        if head > 1024, head * 2 > jobs.count {
            jobs.removeFirst(head)
            head = 0
        }
    }

    /// Entries the queue holds, taken and waiting; for tests.
    var held: Int {
        condition.lock()
        defer { condition.unlock() }
        return jobs.count
    }

    private var timeoutError: PostgresError {
        PostgresError(code: .poolTimeout, detail: "waited longer than \(acquireTimeout) for a connection")
    }

    /// The loop of one pool thread; returns when the pool closes.
    func work(with connection: PostgresConnection) {
        while true {
            condition.lock()
            while head == jobs.count, !closed { condition.wait() }
            if closed {
                condition.unlock()
                connection.close()
                return
            }
            let job = jobs[head]
            head += 1
            compact()
            busy += 1
            condition.unlock()

            var complete: @Sendable () -> Void
            if ContinuousClock.now - job.enqueued > acquireTimeout {
                timedOut.add(1, ordering: .relaxed)
                let error = timeoutError
                complete = { job.fail(error) }
            } else {
                complete = job.run(connection)
            }

            condition.lock()
            busy -= 1
            condition.unlock()
            complete()
        }
    }
}
