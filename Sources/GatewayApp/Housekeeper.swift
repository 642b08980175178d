import Domain
import Foundation
import Logging
import Services
import Store
import Synchronization
import Telemetry

/// The housekeeping loop: every `interval`, the instance that gets the lock deletes what is past retention; every
/// instance refreshes the oldest-row ages its metrics show.
final class Housekeeper: Sendable {
    let store: HousekeepingStore
    /// Where one-shot commands leave figures for the metrics (the last CSAT audit's differences).
    let state: SyncStateStore
    let policy: RetentionPolicy
    let metrics: MetricsRegistry
    let logger: Logger
    private let ages = Mutex<[String: Double]>([:])
    private let lastRun = Timestamp()
    private let auditDifferences = Mutex<Double?>(nil)

    init(store: HousekeepingStore, state: SyncStateStore, policy: RetentionPolicy, metrics: MetricsRegistry, logger: Logger) {
        self.store = store
        self.state = state
        self.policy = policy
        self.metrics = metrics
        self.logger = logger
        metrics.describe("housekeeping_rows_removed_total", .counter, help: "Rows removed by housekeeping, by retention rule.")
        metrics.gauge("housekeeping_oldest_row_age_seconds", help: "Seconds since the oldest row of each retention rule started its retention clock (finished, expired, received, closed).") { [weak self] in
            (self?.ages.withLock { $0 } ?? [:]).sorted { $0.key < $1.key }.map { ([("table", $0.key)], $0.value) }
        }
        let retentions = HousekeepingStore.retentions(policy).sorted { $0.key < $1.key }
        metrics.gauge("housekeeping_retention_seconds", help: "How long each retention rule keeps its rows (the RETENTION_* settings).") {
            retentions.map { ([("table", $0.key)], $0.value) }
        }
        metrics.gauge("housekeeping_last_run_timestamp_seconds",
                      help: "When this instance last finished a housekeeping pass (its own or one it found another instance running).") { [weak self] in
            [([], self?.lastRun.value ?? 0)]
        }
        metrics.gauge("csat_audit_differences", help: "Differences the last `desk-gateway csat audit` left, 0 before any (refreshed with each housekeeping pass).") {
            [weak self] in
            [([], (self?.auditDifferences.withLock { $0 } ?? nil) ?? 0)]
        }
    }

    /// One pass; returns what was removed.
    @discardableResult
    func runOnce() async -> [String: Int] {
        do {
            let removed = try await store.run(policy).removed
            for (rule, count) in removed where count > 0 {
                metrics.increment("housekeeping_rows_removed_total", [("table", rule)], by: Double(count))
            }
            if removed.values.contains(where: { $0 > 0 }) {
                logger.info("housekeeping removed rows past retention", metadata: removed.mapValues { .stringConvertible($0) })
            }
            let fresh = try await store.oldestAges(policy)
            ages.withLock { $0 = fresh }
            let audit = try await state.value(CSATAudit.differencesKey).flatMap(Double.init)
            auditDifferences.withLock { $0 = audit }
            lastRun.set(WallClock.seconds())
            return removed
        } catch {
            logger.warning("housekeeping pass failed; the next one retries", metadata: ["error": "\(DomainError.logged(error))"])
            return [:]
        }
    }
}

/// A time (seconds since 1970) shared between a loop and the metrics. Thread safety: a lock.
final class Timestamp: Sendable {
    private let state = Mutex<Double>(0)
    var value: Double { state.withLock { $0 } }
    func set(_ time: Double) { state.withLock { $0 = time } }
}
