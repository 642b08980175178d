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
        queue = JobQueue(acquireTimeout: .milliseconds(configuration.acquireTimeoutMilliseconds), cap: configuration.cappedConnections)
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

    /// Set inside `capped`.
    @TaskLocal static var isCapped = false

    /// Runs `body` with its statements capped: on a pool with `cappedConnections`, they hold no more connections than
    /// that at once, whatever else runs (a burst of dashboards' reports leaves the customers' reads their connections,
    /// and on a database sharing the machine's cores, fewer statements at once answer each sooner).
    public static func capped<T>(_ body: () async throws -> T) async rethrows -> T {
        try await $isCapped.withValue(true) { try await body() }
    }

    /// Runs `body` with a connection on one of the pool's threads.
    public func withConnection<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        let capped = configuration.cappedConnections > 0 && Self.isCapped
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            queue.submit(Job(enqueued: .now, capped: capped, run: { connection in
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
    /// Taken only while fewer than the queue's cap of capped jobs run.
    let capped: Bool
    /// Does the work on the pool thread; the returned closure hands the result over once the slot is released.
    let run: @Sendable (PostgresConnection) -> @Sendable () -> Void
    let fail: @Sendable (PostgresError) -> Void
}

/// Jobs in the order they came, taken from `head`: a query's hand-over is an append and an index.
struct JobFIFO {
    private var jobs: [Job] = []
    private var head = 0

    var isEmpty: Bool { head == jobs.count }
    var waiting: Int { jobs.count - head }
    /// Entries held, taken and waiting; for tests.
    var held: Int { jobs.count }
    /// When the first waiting job came (the job itself is not copied: that would retain its closures).
    var firstEnqueued: ContinuousClock.Instant? { isEmpty ? nil : jobs[head].enqueued }

    mutating func append(_ job: Job) { jobs.append(job) }

    mutating func take() -> Job {
        defer { head += 1 }
        return jobs[head]
    }

    /// Takes the jobs waiting longer than `timeout`.
    mutating func expired(at now: ContinuousClock.Instant, after timeout: Duration) -> [Job] {
        var expired: [Job] = []
        while !isEmpty, now - jobs[head].enqueued > timeout { expired.append(take()) }
        return expired
    }

    /// Takes every waiting job.
    mutating func removeAll() -> ArraySlice<Job> {
        defer { (jobs, head) = ([], 0) }
        return jobs[head...]
    }

    /// Drops the entries before `head` once they are many and most of the array (not per job).
    mutating func compact() {
        if head > 1024, head * 2 > jobs.count {
            jobs.removeFirst(head)
            head = 0
        }
    }
}

/// The pool's job queue. Thread safety: all state is guarded by `condition`.
final class JobQueue: @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs = JobFIFO()
    /// Capped jobs wait apart, so a job behind them is not held while the cap is reached.
    private var cappedJobs = JobFIFO()
    private let cap: Int
    private var cappedRunning = 0
    private var busy = 0
    /// Kept apart from `condition`: counted off the lock, read by scrapes.
    private let timedOut = Atomic<Int>(0)
    private var closed = false
    private var threads = 0
    private let acquireTimeout: Duration

    init(acquireTimeout: Duration, cap: Int = 0) {
        self.acquireTimeout = acquireTimeout
        self.cap = cap
    }

    var counts: (busy: Int, waiting: Int, timedOut: Int) {
        condition.lock()
        defer { condition.unlock() }
        return (busy, jobs.waiting + cappedJobs.waiting, timedOut.load(ordering: .relaxed))
    }

    func submit(_ job: Job) {
        condition.lock()
        if closed {
            condition.unlock()
            job.fail(PostgresError(code: .poolClosed, detail: "the pool is shut down"))
            return
        }
        // A capped job that must wait for its share wakes no thread: one ending a capped job takes it.
        let runnable = !job.capped || cappedRunning < cap
        if job.capped { cappedJobs.append(job) } else { jobs.append(job) }
        condition.unlock()
        // After the unlock: signalled under the lock, the woken thread found it held, slept on it and was woken a
        // second time when it was released (two context switches a query for one).
        if runnable { condition.signal() }
    }

    func close() {
        condition.lock()
        closed = true
        let pending = Array(jobs.removeAll()) + Array(cappedJobs.removeAll())
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
    /// running long, a server that stopped answering) or the cap is reached: their callers hear so after the timeout,
    /// not whenever a connection frees. Returns when the pool closes.
    func expireWaiting() {
        let step = min(max(acquireTimeout / 4, .milliseconds(10)), .milliseconds(250))
        let pause = Double(step.components.seconds) + Double(step.components.attoseconds) / 1e18
        while true {
            condition.lock()
            if closed {
                condition.unlock()
                return
            }
            let now = ContinuousClock.now
            let expired = jobs.expired(at: now, after: acquireTimeout) + cappedJobs.expired(at: now, after: acquireTimeout)
            // No pool thread may take a job for as long as the server stalls: the spent entries (each holding its
            // statement and values) are let go here too.
            jobs.compact()
            cappedJobs.compact()
            condition.unlock()
            timedOut.add(expired.count, ordering: .relaxed)
            for job in expired { job.fail(timeoutError) }
            Thread.sleep(forTimeInterval: pause)
        }
    }

    /// Entries the queue holds, taken and waiting; for tests.
    var held: Int {
        condition.lock()
        defer { condition.unlock() }
        return jobs.held + cappedJobs.held
    }

    private var timeoutError: PostgresError {
        PostgresError(code: .poolTimeout, detail: "waited longer than \(acquireTimeout) for a connection")
    }

    /// The older of the two queues' first jobs that may run now; nil when none may. Called with the lock held.
    private func next() -> Job? {
        if cappedRunning < cap, let capped = cappedJobs.firstEnqueued {
            guard let other = jobs.firstEnqueued, other <= capped else { return cappedJobs.take() }
        }
        return jobs.isEmpty ? nil : jobs.take()
    }

    /// The loop of one pool thread; returns when the pool closes.
    func work(with connection: PostgresConnection) {
        while true {
            condition.lock()
            var taken = closed ? nil : next()
            while taken == nil, !closed {
                condition.wait()
                taken = next()
            }
            guard let job = taken else {
                condition.unlock()
                connection.close()
                return
            }
            jobs.compact()
            cappedJobs.compact()
            busy += 1
            if job.capped { cappedRunning += 1 }
            // With a cap, a wake may have gone to a job of the other queue: what still may run gets one of its own.
            let more = cap > 0 && (!jobs.isEmpty || (cappedRunning < cap && !cappedJobs.isEmpty))
            condition.unlock()
            if more { condition.signal() }

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
            // Capped jobs waiting are this thread's to take next (or another's, woken when this one takes other work).
            if job.capped { cappedRunning -= 1 }
            condition.unlock()
            complete()
        }
    }
}
