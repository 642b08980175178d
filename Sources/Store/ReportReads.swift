import Domain
import Postgres
import Synchronization

/// Report reads go to a streaming replica (`DATABASE_READ_URL`) while it answers and its replay lag is within the
/// bound; otherwise, and for any read the replica fails, to the primary. The replica's state is refreshed by `check()`
/// (every second while the gateway runs) and by every failed read.
public final class ReportReads: Sendable {
    let primary: Database
    let replica: Database?
    let maxLagSeconds: Double
    private let state = Mutex<(usable: Bool, lag: Double?)>((false, nil))
    private let served = Mutex<(replica: Int, primary: Int)>((0, 0))

    public init(primary: Database, replica: Database?, maxLagSeconds: Double) {
        self.primary = primary
        self.replica = replica
        self.maxLagSeconds = maxLagSeconds
    }

    /// Every read on the primary (no replica, so no lag rule).
    public convenience init(primary: Database) {
        self.init(primary: primary, replica: nil, maxLagSeconds: 0)
    }

    public var hasReplica: Bool { replica != nil }

    /// Closes the replica's pool (the primary's belongs to the caller).
    public func shutdown() { replica?.shutdown() }
    /// Whether reads go to the replica now, and its replay lag in seconds at the last check (nil: unknown or down).
    public var replicaState: (usable: Bool, lag: Double?) { state.withLock { $0 } }
    /// Report reads served so far by each database.
    public var readCounts: (replica: Int, primary: Int) { served.withLock { $0 } }

    /// Measures the replica's replay lag: zero when it has replayed all it received, else the time since the last
    /// transaction it replayed. A server that is not in recovery (promoted, or a wrong URL) is not used.
    public func check() async {
        guard let replica else { return }
        do {
            let row = try await replica.query("""
                SELECT pg_is_in_recovery(),
                       CASE WHEN pg_last_wal_receive_lsn() IS NOT DISTINCT FROM pg_last_wal_replay_lsn() THEN 0
                            ELSE extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8 END
                """)[0]
            let recovering = try row.decode(0, as: Bool.self)
            let lag = try row.decodeIfPresent(1, as: Double.self)
            state.withLock { $0 = (recovering && (lag ?? .infinity) <= maxLagSeconds, lag) }
        } catch {
            state.withLock { $0 = (false, nil) }
        }
    }

    /// Runs one read on the replica when it is usable (falling back to the primary if it fails, a statement timeout
    /// excepted: that read would be as slow on the primary), else on the primary.
    func run<T>(_ read: (Database) async throws -> T) async throws -> T {
        if let replica, state.withLock({ $0.usable }) {
            do {
                let value = try await read(replica)
                note(replica: true)
                return value
            } catch let error as DomainError where error.code != .storeTimeout {
                state.withLock { $0.usable = false }
            }
        }
        let value = try await read(primary)
        note(replica: false)
        return value
    }

    private func note(replica: Bool) {
        served.withLock { if replica { $0.replica += 1 } else { $0.primary += 1 } }
        if let origin = ReadOrigin.current {
            origin.record(replica: replica)
        }
    }
}
