import Synchronization

/// Liveness of the async side: a task on Swift's cooperative pool that must tick every second. If the pool is stuck
/// (every thread blocked), the ticks stop while libmicrohttpd's threads still answer, and `/livez` reports it, so an
/// orchestrator restarts a process that would otherwise look alive and serve nothing.
public final class Watchdog: Sendable {
    /// How long without a tick before the process counts as stuck.
    public let stallLimit: Duration
    private let lastTick = Mutex(ContinuousClock.now)

    public init(stallLimit: Duration) {
        self.stallLimit = stallLimit
    }

    /// Ticks until cancelled.
    public func run(interval: Duration = .seconds(1)) async {
        while !Task.isCancelled {
            lastTick.withLock { $0 = .now }
            try? await Task.sleep(for: interval)
        }
    }

    /// Time since the last tick.
    public var silence: Duration { ContinuousClock.now - lastTick.withLock { $0 } }

    public var isStalled: Bool { silence > stallLimit }
}
