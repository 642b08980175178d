import Synchronization
import Domain

/// Liveness of the async side: a task on Swift's cooperative pool that must tick every second. If the pool is stuck
/// (every thread blocked), the ticks stop while libmicrohttpd's threads still answer, and `/livez` reports it, so an
/// orchestrator restarts a process that would otherwise look alive and serve nothing.
public final class Watchdog: Sendable {
    /// How long without a tick before the process counts as stuck.
    public let stallLimit: Duration
    private let stallNanos: Int64
    /// The last tick (`MonotonicClock.nanos()`): an atomic, as every `/livez` reads it.
    private let lastTick = Atomic<Int64>(MonotonicClock.nanos())

    public init(stallLimit: Duration) {
        self.stallLimit = stallLimit
        let parts = stallLimit.components
        stallNanos = parts.seconds * 1_000_000_000 + parts.attoseconds / 1_000_000_000
    }

    /// Ticks until cancelled.
    public func run(interval: Duration = .seconds(1)) async {
        while !Task.isCancelled {
            lastTick.store(MonotonicClock.nanos(), ordering: .relaxed)
            try? await Task.sleep(for: interval)
        }
    }

    private var silenceNanos: Int64 { MonotonicClock.nanos() - lastTick.load(ordering: .relaxed) }

    /// Time since the last tick.
    public var silence: Duration { .nanoseconds(silenceNanos) }

    /// Asked by every `/livez`: compared in whole nanoseconds, no `Duration` made.
    public var isStalled: Bool { silenceNanos > stallNanos }
}
