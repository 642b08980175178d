/// Waits until `condition` holds, looking every `interval`, for at most `seconds`; returns whether it held. Tests wait
/// for what they can observe (a lock in `pg_locks`, a pool's counts, an empty queue) instead of sleeping for a guess,
/// so a loaded host makes them slower, never wrong.
@discardableResult
public func eventually(within seconds: Double = 30, every interval: Duration = .milliseconds(10),
                       _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while true {
        if try await condition() { return true }
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: interval)
    }
}

/// Keeps a `pg_locks` query to the test's own database: the view is the whole cluster's, and other tests' locks are
/// in other databases.
public let lockInThisDatabase = "database = (SELECT oid FROM pg_database WHERE datname = current_database())"
