public import Domain
import Synchronization

/// Token buckets per caller (bearer token, or client address when there is none): `burst` requests at once,
/// refilled at `perMinute`.
public final class RateLimiter: Sendable {
    public struct Decision {
        public let allowed: Bool
        let remaining: Int
        /// Seconds until the bucket is full again.
        let reset: Int
        /// Seconds until the next request would be allowed (when refused).
        let retryAfter: Int
    }

    let burst: Double
    let perSecond: Double
    /// Buckets in shards chosen by the key's last byte and length, each under its own lock: the request threads
    /// rarely wait on each other.
    private let shards: Unretained<Shard>

    final class Shard: Sendable {
        let buckets = Mutex<[String: (tokens: Double, at: Double)]>([:])
    }
    /// Whole seconds of the last sweep (an atomic, so the hot path takes no second lock).
    private let lastSweep = Atomic<Int>(Int(WallClock.seconds()))
    /// Buckets kept at most; a full bucket is the same as none, so sweeps drop those.
    public static let capacity = 100_000
    static let shardCount = 8

    public var count: Int {
        var total = 0
        shards.forEach { shard in total += shard.buckets.withLock { $0.count } }
        return total
    }

    public init(perMinute: Int, burst: Int) {
        self.burst = Double(max(1, burst))
        self.perSecond = Double(max(1, perMinute)) / 60
        shards = Unretained((0..<Self.shardCount).map { _ in Shard() })
    }

    /// Whether `key`'s bucket is empty now, without taking from it.
    func isExhausted(_ key: String, now: Double = WallClock.seconds()) -> Bool {
        shards.with(key: key) { $0.buckets.withLock { buckets in
            guard let bucket = buckets[key] else { return false }
            return min(burst, bucket.tokens + max(0, now - bucket.at) * perSecond) < 1
        } }
    }

    public func take(_ key: String, now: Double = WallClock.seconds()) -> Decision {
        // Once a minute (or at capacity) buckets that have refilled are dropped: callers seen once leave no trace.
        let last = lastSweep.load(ordering: .relaxed)
        if Int(now) - last >= 60, lastSweep.compareExchange(expected: last, desired: Int(now), ordering: .relaxed).exchanged {
            shards.forEach { shard in shard.buckets.withLock { sweep(&$0, now: now) } }
        }
        let shardCapacity = Self.capacity / Self.shardCount
        return shards.with(key: key) { $0.buckets.withLock { buckets in
            if buckets.count > shardCapacity { sweep(&buckets, now: now) }
            if buckets.count > shardCapacity { for key in buckets.keys.prefix(shardCapacity / 2) { buckets.removeValue(forKey: key) } }
            // Updated in place: the key (a bearer token, tens of bytes) is hashed once, not for a read and a write.
            let (allowed, tokens) = refill(&buckets[key, default: (burst, now)], now: now)
            let reset = Int(((burst - tokens) / perSecond).rounded(.up))
            let retry = allowed ? 0 : max(1, Int(((1 - tokens) / perSecond).rounded(.up)))
            return Decision(allowed: allowed, remaining: Int(tokens), reset: reset, retryAfter: retry)
        } }
    }

    /// Refills the bucket for the time since it was last seen and takes a token if there is one.
    private func refill(_ bucket: inout (tokens: Double, at: Double), now: Double) -> (allowed: Bool, tokens: Double) {
        bucket.tokens = min(burst, bucket.tokens + max(0, now - bucket.at) * perSecond)
        bucket.at = now
        let allowed = bucket.tokens >= 1
        if allowed { bucket.tokens -= 1 }
        return (allowed, bucket.tokens)
    }

    private func sweep(_ buckets: inout [String: (tokens: Double, at: Double)], now: Double) {
        buckets = buckets.filter { min(burst, $0.value.tokens + (now - $0.value.at) * perSecond) < burst }
    }
}

extension Unretained {
    /// The part a credential or address falls in, lent to `body`: chosen by the key's last byte and length (random
    /// tokens spread evenly; no hash of the whole key, which the part's dictionary hashes anyway).
    func with<Result>(key: String, _ body: (Element) -> Result) -> Result {
        let utf8 = key.utf8
        return with((Int(utf8.last ?? 0) &+ utf8.count) % count, body)
    }
}
