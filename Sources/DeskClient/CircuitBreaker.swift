import Synchronization

/// Fails fast while Desk is down: opens after N consecutive failures, lets one trial call through after the
/// cooldown (half-open), closes on its success and re-opens on its failure.
public final class CircuitBreaker: Sendable {
    public enum State: String, Sendable { case closed, open, halfOpen = "half-open" }

    private struct Storage {
        var failures = 0
        var openedAt: ContinuousClock.Instant?
        var trialInFlight = false
    }

    private let storage = Mutex(Storage())
    let threshold: Int
    let cooldown: Duration

    public init(threshold: Int, cooldown: Duration) {
        self.threshold = max(1, threshold)
        self.cooldown = cooldown
    }

    public var state: State {
        storage.withLock { storage in
            guard let openedAt = storage.openedAt else { return .closed }
            return ContinuousClock.now - openedAt >= cooldown ? .halfOpen : .open
        }
    }

    /// nil when the call may go ahead; otherwise how long until the next trial.
    func admit() -> Duration? {
        storage.withLock { storage in
            guard let openedAt = storage.openedAt else { return nil }
            let elapsed = ContinuousClock.now - openedAt
            if elapsed < cooldown { return cooldown - elapsed }
            if storage.trialInFlight { return .seconds(1) }
            storage.trialInFlight = true
            return nil
        }
    }

    /// Forgets all failures (tests, and an operator's manual reset).
    public func resetForTesting() { recordSuccess() }

    func recordSuccess() {
        storage.withLock { $0 = Storage() }
    }

    func recordFailure() {
        storage.withLock { storage in
            storage.failures += 1
            storage.trialInFlight = false
            if storage.openedAt != nil || storage.failures >= threshold {
                storage.openedAt = .now
            }
        }
    }
}
