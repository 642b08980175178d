import Domain
import Synchronization

/// A counter series resolved once and then counted without a lock: per-request paths keep one instead of naming
/// the series (labels rendered, a dictionary searched under the registry's lock) on every request.
public final class CounterHandle: Sendable {
    let count = Atomic<Int>(0)

    public func increment(by amount: Int = 1) {
        count.add(amount, ordering: .relaxed)
    }

    public var value: Int { count.load(ordering: .relaxed) }
}

/// A histogram series resolved once: one atomic add per observation (the bucket the value falls in; cumulative
/// counts are summed when rendered) and the sum kept in a compare-and-swap loop.
public final class HistogramHandle: Sendable {
    let bounds: [Double]
    /// Observations per bucket, not cumulative; the last is above every bound.
    let counts: Unretained<CounterHandle>
    /// The sum in whole nanoseconds (every histogram here times something): one atomic add an observation, where a
    /// Double's bits needed a load and a compare-and-swap that both request threads raced on.
    let sumNanos = Atomic<Int64>(0)

    init(bounds: [Double]) {
        self.bounds = bounds
        counts = Unretained((0...bounds.count).map { _ in CounterHandle() })
    }

    public func observe(_ value: Double) {
        var index = 0
        while index < bounds.count, value > bounds[index] { index += 1 }
        counts.with(index) { $0.increment() }
        // Durations: never below zero, and a NaN or a century is no duration to sum.
        let nanos = value > 0 && value < 3e9 ? Int64((value * 1e9).rounded()) : 0
        sumNanos.wrappingAdd(nanos, ordering: .relaxed)
    }

    var sample: MetricsRegistry.Sample {
        var sample = MetricsRegistry.Sample(value: Double(sumNanos.load(ordering: .relaxed)) / 1e9)
        var running = 0
        for index in 0..<counts.count {
            running += counts.with(index) { $0.value }
            if index < bounds.count { sample.bucketCounts.append(running) }
        }
        sample.count = running
        return sample
    }
}

/// Counters of one label set told apart by a small integer key (e.g. a method and a status), found and created
/// without a lock: an open-addressed table whose slots are claimed by compare-and-swap. A key it has no room for
/// is not counted (`increment` says false), and the caller counts it the slow way.
public final class KeyedCounters: Sendable {
    final class Slot: Sendable {
        let key = Atomic<Int>(0)
        let counter = CounterHandle()
    }

    private let slots: Unretained<Slot>

    public init(capacity: Int = 32) {
        slots = Unretained((0..<max(1, capacity)).map { _ in Slot() })
    }

    /// Counts one for `key` (positive); false when the table has no room for it, and the caller counts it the slow way.
    public func increment(_ key: Int) -> Bool {
        let count = slots.count
        var index = key % count
        for _ in 0..<count {
            // Counted through the lent slot: handing its counter out would retain it, from both request threads.
            let counted = slots.with(index) { slot in
                let seen = slot.key.load(ordering: .acquiring)
                if seen == 0 {
                    let (claimed, holder) = slot.key.compareExchange(expected: 0, desired: key, ordering: .acquiringAndReleasing)
                    guard claimed || holder == key else { return false }
                } else if seen != key {
                    return false
                }
                slot.counter.increment()
                return true
            }
            if counted { return true }
            index = (index + 1) % count
        }
        return false
    }

    /// Every key in use with its count.
    public var entries: [(key: Int, value: Int)] {
        (0..<slots.count).compactMap { index in
            slots.with(index) { slot in
                let key = slot.key.load(ordering: .acquiring)
                return key == 0 ? nil : (key, slot.counter.value)
            }
        }
    }
}
