import Foundation
import Postgres
import Synchronization
import System

/// Revocations reach every instance at once: `APIKeyStore.revoke` notifies `desk_gateway_revoked` in its
/// transaction, and each instance LISTENs on a connection of its own (on a thread of its own: it waits in `poll`)
/// and calls `onRevoked`, which drops the credentials its caches hold. After the connection broke, notifications may
/// have been missed, so `onRevoked` is called once the listener is back. Behind a transaction pooler (pgbouncer),
/// LISTEN does not work: `start` does nothing there and caches expire on their own (30 s for API keys).
public final class RevocationListener: Sendable {
    public static let channel = "desk_gateway_revoked"
    private let database: Database
    private let onRevoked: @Sendable () -> Void
    private let stopped = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    private let running = Atomic<Bool>(false)

    public init(database: Database, onRevoked: @escaping @Sendable () -> Void) {
        self.database = database
        self.onRevoked = onRevoked
    }

    /// Whether revocations are heard at once (false behind a transaction pooler).
    public var isAvailable: Bool { !database.pool.configuration.transactionPooling }

    public func start() {
        guard isAvailable, !running.exchange(true, ordering: .acquiringAndReleasing) else { return }
        Threads.start("revocation-listener") { [self] in run() }
    }

    /// Ends the listener and waits for its thread (at most a couple of seconds: it wakes every second).
    public func stop() {
        guard running.load(ordering: .acquiring) else { return }
        stopped.store(true, ordering: .releasing)
        _ = finished.wait(timeout: .now() + 3)
    }

    private func run() {
        defer { finished.signal() }
        let connection = PostgresConnection.standalone(database.pool.configuration)
        var listening = false
        while !stopped.load(ordering: .acquiring) {
            do {
                if !listening {
                    try connection.connectIfNeeded()
                    try connection.query("LISTEN \(Self.channel)")
                    listening = true
                    onRevoked()   // what was revoked while not listening
                }
                if try !connection.notifications(timeoutMilliseconds: 1000).isEmpty { onRevoked() }
            } catch {
                listening = false
                Thread.sleep(forTimeInterval: 1)
            }
        }
    }
}
