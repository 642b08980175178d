import Foundation
import Postgres

/// How long each kind of row is kept once it is of no further use (docs/state.md, "Housekeeping"). CSAT ratings, requests and
/// their rollups are reporting data and are never removed. Fractions are allowed (the soak ages rows in minutes).
public struct RetentionPolicy: Sendable {
    /// Expired or revoked sessions, kept this long for audits (and while an outbox row still names them).
    public var deadSessionDays: Double
    /// Idempotency keys: the replay window.
    public var idempotencyHours: Double
    /// Applied Desk webhook events: long enough for `webhooks replay` after an upgrade that misread them (a replay's
    /// use is hours, not weeks; at 1.2–1.9 KB an event they were most of the data under retention at 14 days).
    public var appliedWebhookDays: Double
    /// Webhook events that were not applied (`unrecognized`, `failed`, `foreign`): kept longer, for a replay.
    public var unappliedWebhookDays: Double
    /// Delivered or failed outbox operations (clients poll `/v1/operations/{id}`).
    public var finishedOutboxDays: Double
    /// Closed tickets of customers who have not listed their tickets for this long (read again from Desk on demand).
    public var closedTicketDays: Double
    /// Rows deleted per statement: short transactions, short locks.
    public var batchSize = 1000

    public init(deadSessionDays: Double, idempotencyHours: Double, appliedWebhookDays: Double, unappliedWebhookDays: Double,
                finishedOutboxDays: Double, closedTicketDays: Double) {
        self.deadSessionDays = deadSessionDays
        self.idempotencyHours = idempotencyHours
        self.appliedWebhookDays = appliedWebhookDays
        self.unappliedWebhookDays = unappliedWebhookDays
        self.finishedOutboxDays = finishedOutboxDays
        self.closedTicketDays = closedTicketDays
    }
}

/// Deletes, in small batches, what is past its retention. One instance at a time across the cluster: every batch
/// runs in a transaction that first takes a transaction-level advisory lock, and an instance that cannot have it
/// skips the run. Rows are picked with `FOR UPDATE SKIP LOCKED`, so even racing deletes never count a row twice.
public struct HousekeepingStore: Sendable {
    let database: Database
    static let lockKey = 0x6467_686B   // "dghk"

    public init(database: Database) {
        self.database = database
    }

    /// One retention rule: the table it cleans (the metrics label), the rows past retention, and how old its oldest
    /// row is (`age` is an expression of the row's time).
    struct Rule {
        let table: String
        let label: String
        let due: String
        let age: String
    }

    static func rules(_ policy: RetentionPolicy) -> [Rule] {
        // Fixed-point text: Swift would write a small Double in exponent form, which an interval literal refuses.
        let ago = { (n: Double, unit: String) in "now() - interval '\(String(format: "%.6f", max(0, n))) \(unit)'" }
        let days = { (n: Double) in ago(n, "days") }
        return [
            // The outbox first: a session named by an outbox row can only go once that row has gone.
            Rule(table: "outbox", label: "outbox", due: "status IN ('delivered', 'failed') AND finished_at < \(days(policy.finishedOutboxDays))",
                 age: "created_at"),
            Rule(table: "sessions", label: "sessions", due: """
                (expires_at < \(days(policy.deadSessionDays)) OR revoked_at < \(days(policy.deadSessionDays)))
                AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.session_id = sessions.id)
                """, age: "created_at"),
            Rule(table: "report_sessions", label: "report_sessions", due: "expires_at < \(days(policy.deadSessionDays))",
                 age: "created_at"),
            Rule(table: "idempotency_keys", label: "idempotency_keys",
                 due: "created_at < \(ago(policy.idempotencyHours, "hours"))", age: "created_at"),
            Rule(table: "webhook_events", label: "webhook_events_applied",
                 due: "status = 'applied' AND received_at < \(days(policy.appliedWebhookDays))", age: "received_at"),
            Rule(table: "webhook_events", label: "webhook_events_unapplied",
                 due: "status IN ('unrecognized', 'failed', 'foreign') AND received_at < \(days(policy.unappliedWebhookDays))",
                 age: "received_at"),
            Rule(table: "tickets", label: "tickets_closed", due: """
                status = 'CLOSED' AND coalesce(closed_at, updated_at) < \(days(policy.closedTicketDays))
                AND pending_operations = '[]'::jsonb
                AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.ticket_id = tickets.id AND o.status = 'pending')
                AND NOT EXISTS (SELECT 1 FROM customer_syncs c WHERE c.customer_id = tickets.customer_id
                                   AND c.synced_at >= \(days(policy.closedTicketDays)))
                """, age: "fetched_at"),
            // When a customer last listed their tickets: older than the closed-ticket window it keeps nothing cached.
            Rule(table: "customer_syncs", label: "customer_syncs", due: "synced_at < \(days(policy.closedTicketDays))", age: "synced_at"),
        ]
    }

    /// One batch of one rule; nil when another instance holds the housekeeping lock.
    func deleteBatch(_ rule: Rule, limit: Int) async throws -> Int? {
        let sql = """
            DELETE FROM \(rule.table) WHERE ctid IN (
                SELECT ctid FROM \(rule.table) WHERE \(rule.due) LIMIT $1 FOR UPDATE SKIP LOCKED)
            """
        return try await database.transaction { tx -> Int? in
            guard try tx.query("SELECT pg_try_advisory_xact_lock($1)", [Self.lockKey])[0].decode(0, as: Bool.self) else { return nil }
            return try tx.query(sql, [limit]).affectedRows
        }
    }

    /// What one pass removed per rule label; `yielded` when another instance held the lock at some batch (this one
    /// then stops and leaves the rest to that instance or to its own next turn).
    public struct Pass: Sendable {
        public var removed: [String: Int] = [:]
        public var yielded = false
    }

    /// Deletes everything past retention, batch after batch.
    public func run(_ policy: RetentionPolicy, pause: Duration = .milliseconds(20)) async throws -> Pass {
        var pass = Pass()
        for rule in Self.rules(policy) {
            while true {
                guard let count = try await deleteBatch(rule, limit: max(1, policy.batchSize)) else {
                    pass.yielded = true
                    return pass
                }
                pass.removed[rule.label, default: 0] += count
                if count < policy.batchSize { break }
                try await Task.sleep(for: pause)
            }
        }
        return pass
    }

    /// Age in seconds of the oldest row each rule looks at (0 when the table is empty), for the metrics.
    public func oldestAges(_ policy: RetentionPolicy) async throws -> [String: Double] {
        var ages: [String: Double] = [:]
        for rule in Self.rules(policy) {
            let filter = rule.label == "webhook_events_unapplied" ? " WHERE status IN ('unrecognized', 'failed', 'foreign')"
                : rule.label == "webhook_events_applied" ? " WHERE status = 'applied'"
                : rule.label == "tickets_closed" ? " WHERE status = 'CLOSED'" : ""
            let rows = try await database.query("SELECT coalesce(extract(epoch FROM now() - min(\(rule.age))), 0)::float8 FROM \(rule.table)\(filter)")
            ages[rule.label] = try rows[0].decode(0, as: Double.self)
        }
        return ages
    }
}
