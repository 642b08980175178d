import Synchronization

/// Liveness of the async side: a task on Swift's cooperative pool that must tick every second. If the pool is stuck
/// (every thread blocked), the ticks stop while libmicrohttpd's threads still answer, and `/livez` reports it, so an
/// orchestrator restarts a process that would otherwise look alive and serve nothing.
public final class Watchdog: Sendable {
    /// How long without a tick before the process counts as stuck.
    public let stallLimit: Duration
    /// The last tick as nanoseconds since `origin`: an atomic, as every `/livez` reads it.
    private let origin = ContinuousClock.now
    private let lastTick = Atomic<Int64>(0)

    public init(stallLimit: Duration) {
        self.stallLimit = stallLimit
    }

    private var elapsedNanos: Int64 {
        let elapsed = (ContinuousClock.now - origin).components
        return elapsed.seconds * 1_000_000_000 + elapsed.attoseconds / 1_000_000_000
    }

    /// Ticks until cancelled.
    public func run(interval: Duration = .seconds(1)) async {
        while !Task.isCancelled {
            lastTick.store(elapsedNanos, ordering: .relaxed)
            try? await Task.sleep(for: interval)
        }
    }

    /// Time since the last tick.
    public var silence: Duration { .nanoseconds(elapsedNanos - lastTick.load(ordering: .relaxed)) }

    public var isStalled: Bool { silence > stallLimit }
}
