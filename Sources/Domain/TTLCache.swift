public import Synchronization

/// A small in-memory map whose entries count as fresh for `ttl` seconds after they were stored (or after the time
/// given with them). Bounded by size and age: storing a new key at `capacity` first drops expired entries, then, if
/// it must, an arbitrary half (every cache in front of PostgreSQL or Desk can always be refilled); and once per
/// `ttl` (at most once a second) a store sweeps out expired entries, so a cache of many one-time callers shrinks
/// back instead of sitting at its capacity.
public final class TTLCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    public let ttl: Double
    @usableFromInline let capacity: Int
    // Inlinable reads: callers in other modules get code specialized to their key and value (a generic one looked
    // up type metadata on every read).
    @usableFromInline let entries = Mutex<[Key: (value: Value, at: Double)]>([:])
    /// Whole seconds of the last sweep (an atomic: no second lock on the way in).
    @usableFromInline let lastSweep = Atomic<Int>(Int(WallClock.seconds()))

    public init(ttl: Double, capacity: Int = 10_000) {
        self.ttl = ttl
        self.capacity = max(2, capacity)
    }

    /// The value if it is younger than `maxAge` (the cache's `ttl` unless given) at `now`.
    @inlinable
    public func get(_ key: Key, maxAge: Double? = nil, now: Double = WallClock.seconds()) -> Value? {
        guard let entry = lookup(key), now - entry.at < (maxAge ?? ttl) else { return nil }
        return entry.value
    }

    /// The value whatever its age, with the time it was stored.
    @inlinable
    public func lookup(_ key: Key) -> (value: Value, at: Double)? {
        entries.withLock { $0[key] }
    }

    /// What `read` takes from the entry, read in place under the lock: `read` sees the value and when it was stored
    /// and returns only what its caller needs. Copying a value out retains every reference it holds, on objects
    /// that all request threads share. The entry is lent `inout` because only the values' modify accessor hands it
    /// over without a copy (their getter copies); `read` must not change it.
    @inlinable
    public func read<Result>(_ key: Key, _ read: (inout (value: Value, at: Double)) -> Result?) -> Result? {
        entries.withLock { entries in
            guard let index = entries.index(forKey: key) else { return nil }
            return read(&entries.values[index])
        }
    }

    @inlinable
    public func put(_ key: Key, _ value: Value, at: Double = WallClock.seconds()) {
        let last = lastSweep.load(ordering: .relaxed)
        let sweep = Double(Int(at) - last) >= max(ttl, 1)
            && lastSweep.compareExchange(expected: last, desired: Int(at), ordering: .relaxed).exchanged
        entries.withLock { entries in
            if sweep { entries = entries.filter { at - $0.value.at < ttl } }
            if entries.count >= capacity, entries[key] == nil {
                entries = entries.filter { at - $0.value.at < ttl }
                if entries.count >= capacity { for key in entries.keys.prefix(capacity / 2) { entries.removeValue(forKey: key) } }
            }
            entries[key] = (value, at)
        }
    }

    @inlinable
    public func remove(_ key: Key) {
        _ = entries.withLock { $0.removeValue(forKey: key) }
    }

    public func removeAll() {
        entries.withLock { $0.removeAll() }
    }

    @inlinable
    public var count: Int { entries.withLock { $0.count } }

    /// The fresh value, or `load`'s, which is then stored. Concurrent misses may each load once.
    public func value(_ key: Key, load: () async throws -> Value) async rethrows -> Value {
        if let value = get(key) { return value }
        let loaded = try await load()
        put(key, loaded)
        return loaded
    }
}

/// One value that counts as fresh for `ttl` seconds after it was stored: a directory read now and then (team names,
/// zones with rollups, channel types).
public final class CachedValue<Value: Sendable>: Sendable {
    public let ttl: Double
    private let slot = Mutex<(value: Value, at: Double)?>(nil)
    /// The load `shared` callers wait for.
    private let loading = Mutex<Task<Value, Never>?>(nil)

    public init(ttl: Double) {
        self.ttl = ttl
    }

    /// The value whatever its age, with the time it was stored.
    public func lookup() -> (value: Value, at: Double)? {
        slot.withLock { $0 }
    }

    public func put(_ value: Value, at: Double = WallClock.seconds()) {
        slot.withLock { $0 = (value, at) }
    }

    /// Seconds since the value was stored (infinite before the first).
    public func age(now: Double = WallClock.seconds()) -> Double {
        lookup().map { now - $0.at } ?? .infinity
    }

    /// The fresh value, or `load`'s, which is then stored. Concurrent misses may each load once.
    public func value(load: () async throws -> Value) async rethrows -> Value {
        if let (value, at) = lookup(), WallClock.seconds() - at < ttl { return value }
        let loaded = try await load()
        put(loaded)
        return loaded
    }

    /// The fresh value, or the one load every caller arriving meanwhile waits for: a flood of misses loads once.
    /// The load is a task of its own, so a caller that goes away does not cancel it for the others.
    public func shared(load: @escaping @Sendable () async -> Value) async -> Value {
        let (fresh, pending): (Value?, Task<Value, Never>?) = loading.withLock { running in
            // Checked under the lock: a load stores its value before it clears itself.
            if let (value, at) = lookup(), WallClock.seconds() - at < ttl { return (value, nil) }
            if let running { return (nil, running) }
            let task = Task { [self] in
                let value = await load()
                put(value)
                loading.withLock { $0 = nil }
                return value
            }
            running = task
            return (nil, task)
        }
        if let fresh { return fresh }
        return await pending!.value
    }
}
