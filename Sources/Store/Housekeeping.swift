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

    /// One retention rule: the table it cleans (the metrics label), how long its rows are kept (seconds), the rows past
    /// it (`due`, given the cutoff as SQL), and where each row's retention clock starts (`clocks`: a time and the rows
    /// it is read of, each served by an index whose first entry is its minimum, so the metrics never scan a table; the
    /// earliest of them is the rule's oldest row).
    struct Rule {
        let table: String
        let label: String
        let retention: Double
        let due: String
        let clocks: [(time: String, rows: String)]
        /// A unique, indexed column a pass's batches walk in order, each starting after the last row the one before
        /// removed, where the rule keeps many rows among the ones it removes: without it every batch examined the kept
        /// rows again from the start of the table.
        let resumesAfter: String?

        init(table: String, label: String, retention: Double, due: (_ cutoff: String) -> String, clocks: [(time: String, rows: String)],
             resumesAfter: String? = nil) {
            (self.table, self.label, self.retention, self.clocks, self.resumesAfter) = (table, label, max(0, retention), clocks, resumesAfter)
            // Fixed-point text: Swift would write a small Double in exponent form, which an interval literal refuses.
            self.due = due("now() - interval '\(String(format: "%.6f", self.retention)) seconds'")
        }
    }

    static func rules(_ policy: RetentionPolicy) -> [Rule] {
        let (day, hour) = (86_400.0, 3_600.0)
        return [
            // The outbox first: a session named by an outbox row can only go once that row has gone.
            Rule(table: "outbox", label: "outbox", retention: policy.finishedOutboxDays * day,
                 due: { "status IN ('delivered', 'failed') AND finished_at < \($0)" }, clocks: [("finished_at", "status <> 'pending'")]),
            Rule(table: "sessions", label: "sessions", retention: policy.deadSessionDays * day, due: { """
                (expires_at < \($0) OR revoked_at < \($0)) AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.session_id = sessions.id)
                """ }, clocks: [("expires_at", "true"), ("revoked_at", "revoked_at IS NOT NULL")],
                 // Sessions an operation names stay, among the others: 392,000 of 500,000 went in 30.5 s walked from
                 // the start each time (a fifth of them held), in 21.2 s resumed.
                 resumesAfter: "id"),
            Rule(table: "report_sessions", label: "report_sessions", retention: policy.deadSessionDays * day,
                 due: { "expires_at < \($0)" }, clocks: [("expires_at", "true")]),
            Rule(table: "idempotency_keys", label: "idempotency_keys", retention: policy.idempotencyHours * hour,
                 due: { "created_at < \($0)" }, clocks: [("created_at", "true")]),
            Rule(table: "webhook_events", label: "webhook_events_applied", retention: policy.appliedWebhookDays * day,
                 due: { "status = 'applied' AND received_at < \($0)" }, clocks: [("received_at", "status = 'applied'")]),
            Rule(table: "webhook_events", label: "webhook_events_unapplied", retention: policy.unappliedWebhookDays * day,
                 due: { "status IN ('unrecognized', 'failed', 'foreign') AND received_at < \($0)" },
                 clocks: ["unrecognized", "failed", "foreign"].map { ("received_at", "status = '\($0)'") }),
            Rule(table: "tickets", label: "tickets_closed", retention: policy.closedTicketDays * day, due: { """
                status = 'CLOSED' AND coalesce(closed_at, updated_at) < \($0)
                AND pending_operations = '[]'::jsonb
                AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.ticket_id = tickets.id AND o.status = 'pending')
                AND NOT EXISTS (SELECT 1 FROM customer_syncs c WHERE c.customer_id = tickets.customer_id AND c.synced_at >= \($0))
                """ }, clocks: [("coalesce(closed_at, updated_at)", "status = 'CLOSED'")],
                 // The closed tickets of customers who still list stay, among the others: 141,686 of 400,000 tickets
                 // went in 142 batches in 27 s walked from the start each time, in 6.8 s resumed.
                 resumesAfter: "id"),
            // When a customer last listed their tickets: older than the closed-ticket window it keeps nothing cached.
            Rule(table: "customer_syncs", label: "customer_syncs", retention: policy.closedTicketDays * day,
                 due: { "synced_at < \($0)" },
                 // Unindexed: an index would make every listing's update of the row a non-HOT one; a row is 40 bytes.
                 clocks: [("synced_at", "true")]),
        ]
    }

    /// How long each rule keeps its rows, in seconds (the metrics show it beside the oldest row's age).
    public static func retentions(_ policy: RetentionPolicy) -> [String: Double] {
        Dictionary(uniqueKeysWithValues: rules(policy).map { ($0.label, $0.retention) })
    }

    /// One batch of one rule (after `after` in its `resumesAfter` order, the last of them the second number); nil when
    /// another instance holds the housekeeping lock.
    func deleteBatch(_ rule: Rule, limit: Int, after: Int = .min) async throws -> (count: Int, last: Int)? {
        let order = rule.resumesAfter.map { " AND \($0) > $2 ORDER BY \($0)" } ?? ""
        let delete = """
            DELETE FROM \(rule.table) WHERE ctid IN (
                SELECT ctid FROM \(rule.table) WHERE \(rule.due)\(order) LIMIT $1 FOR UPDATE SKIP LOCKED)
            """
        let sql = rule.resumesAfter.map { "WITH gone AS (\(delete) RETURNING \($0)) SELECT count(*), coalesce(max(\($0)), $2) FROM gone" } ?? delete
        return try await database.transaction { tx -> (count: Int, last: Int)? in
            guard try tx.query("SELECT pg_try_advisory_xact_lock($1)", [Self.lockKey])[0].decode(0, as: Bool.self) else { return nil }
            guard rule.resumesAfter != nil else { return (try tx.query(sql, [limit]).affectedRows, after) }
            let row = try tx.query(sql, [limit, after])[0]
            return (try row.decode(0), try row.decode(1))
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
            var after = Int.min
            while true {
                guard let (count, last) = try await deleteBatch(rule, limit: max(1, policy.batchSize), after: after) else {
                    pass.yielded = true
                    return pass
                }
                pass.removed[rule.label, default: 0] += count
                after = last
                if count < policy.batchSize { break }
                try await Task.sleep(for: pause)
            }
        }
        return pass
    }

    /// One statement (public for its plan's test): per rule, seconds since the earliest retention clock of its rows
    /// started (0 when it has none, or when they all start in the future: sessions not yet expired).
    public static func agesStatement(_ policy: RetentionPolicy) -> (labels: [String], sql: String) {
        let rules = rules(policy)
        let columns = rules.map { rule in
            let parts = rule.clocks.map { "(SELECT min(\($0.time)) FROM \(rule.table) WHERE \($0.rows))" }
            return "greatest(0, coalesce(extract(epoch FROM now() - least(\(parts.joined(separator: ", ")))), 0))::float8"
        }
        return (rules.map(\.label), "SELECT " + columns.joined(separator: ",\n       "))
    }

    /// How long ago each rule's oldest row started its retention clock: it finished (outbox), expired or was revoked
    /// (sessions), expired (report sessions), was stored (idempotency keys), was received (webhook events), closed
    /// (tickets), was last listed (customer syncs). While housekeeping keeps up it stays near its retention, except
    /// for rows a rule keeps on purpose (a session an operation names, the closed tickets of a customer who lists).
    public func oldestAges(_ policy: RetentionPolicy) async throws -> [String: Double] {
        let statement = Self.agesStatement(policy)
        let row = try await database.query(statement.sql)[0]
        var ages: [String: Double] = [:]
        for (index, label) in statement.labels.enumerated() {
            ages[label] = try row.decode(index, as: Double.self)
        }
        return ages
    }
}
