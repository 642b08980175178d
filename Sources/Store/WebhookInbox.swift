public import Domain
import Postgres

/// Desk webhooks as received: stored once per event (redeliveries collapse), applied later in arrival order.
public struct WebhookInbox: WebhookEventInbox {
    let database: Database

    public init(database: Database) {
        self.database = database
    }

    /// Returns false when the event was already received.
    public func receive(dedupeKey: String, type: String, body: String) async throws -> Bool {
        !(try await database.query("""
            INSERT INTO webhook_events (dedupe_key, event_type, body) VALUES ($1, $2, $3::jsonb)
            ON CONFLICT (dedupe_key) DO NOTHING RETURNING 1
            """, [dedupeKey, type, body])).isEmpty
    }

    public typealias Outcome = InboxOutcome
    public typealias Pass = InboxPass

    /// Applies up to `limit` pending events in one transaction (`FOR UPDATE SKIP LOCKED`, so instances share the
    /// work), in an order that holds the lock order by construction: by ticket (the ticket id where the known shapes
    /// hold it), and within a ticket in arrival order. Every lock a ticket's events take (its cached row, its advisory
    /// lock, its ratings) is taken in ascending ticket order, and the rollup changes of the whole batch are written
    /// once at its end, summed and sorted by key, so two batches, or a batch and a customer's write, never wait on
    /// each other in a circle. Each event has a savepoint: one whose application throws is rolled back alone,
    /// counted, and retried in a later pass, 10 times at most; one it cannot interpret is kept as `unrecognized`,
    /// another application's as `foreign` (never dropped). The events were committed durably when received, so
    /// their application commits without waiting for the disk: lost in a crash, they are still pending and are
    /// applied again (every write is idempotent).
    /// With `lanes`, this pass takes lane `lane` of the tickets only (their ids hashed).
    public func process(limit: Int, lane: Int = 0, lanes: Int = 1,
                        apply: @escaping @Sendable (InboxEvent, any InboxTransaction) throws -> InboxOutcome) async throws -> InboxPass {
        try await database.transaction { tx in
            guard try Self.waitForZoneLock(tx) else { return Pass() }
            let ticketKey = "coalesce(body #>> '{data,id}', body #>> '{data,ticket,id}', body #>> '{ticket,id}', body ->> 'id', '')"
            let rows = try tx.query("""
                SELECT id, event_type, body::text, \(ticketKey), set_config('synchronous_commit', 'off', true) FROM webhook_events
                 WHERE status = 'pending' AND ($2 <= 1 OR mod(abs(hashtext(\(ticketKey))), $2) = $3)
                 ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED
                """, [limit, lanes, lane])
            var events: [(ticket: Int, event: InboxEvent)] = []
            for row in rows {
                let key: String = try row.decode(3)
                events.append((Int(key) ?? Int.max, InboxEvent(id: try row.decode(0), type: try row.decode(1), body: try row.decode(2))))
            }
            events.sort { ($0.ticket, $0.event.id) < ($1.ticket, $1.event.id) }
            let batch = CSATWriter(tx)
            var pass = Pass()
            for (_, event) in events {
                try tx.query("SAVEPOINT event")
                do {
                    let writes = StoreTransaction(connection: tx)
                    let outcome = try apply(event, writes)
                    try tx.query("RELEASE SAVEPOINT event")
                    batch.absorb(writes.takeRollups())
                    try tx.query("""
                        UPDATE webhook_events SET status = $2, processed_at = CASE WHEN $2 = 'applied' THEN now() END,
                               attempts = attempts + 1, last_error = NULL WHERE id = $1
                        """, [event.id, outcome.rawValue])
                    switch outcome {
                    case .applied: pass.applied += 1
                    case .unrecognized: pass.unrecognized += 1
                    case .foreign: pass.foreign += 1
                    }
                } catch {
                    try tx.query("ROLLBACK TO SAVEPOINT event")
                    let reason = "\(error)"
                    try tx.query("""
                        UPDATE webhook_events SET attempts = attempts + 1, last_error = $2,
                               status = CASE WHEN attempts + 1 >= 10 THEN 'failed' ELSE 'pending' END WHERE id = $1
                        """, [event.id, reason])
                    pass.failed += 1
                    if pass.firstError == nil { pass.firstError = "event \(event.id): \(reason)" }
                }
            }
            try batch.finish()
            return pass
        }
    }

    /// A zone build's step or a zone's drop holds every CSAT writer (the zone lock, exclusively) for up to a second: the
    /// pass waits its turn behind it, as every writer does, but not for more than 2 s. Past that (a zone counted in one
    /// transaction by the release before holds the lock throughout) it handles nothing and comes back, rather than
    /// each event's lock wait ending in a statement timeout that spends one of its ten tries. Only trying the lock
    /// found it taken at almost every try during a build, whose steps follow one another at once.
    private static func waitForZoneLock(_ tx: PostgresConnection) throws -> Bool {
        if try tx.query("SELECT pg_try_advisory_xact_lock_shared($1)", [CSATStore.zoneLock])[0].decode(0, as: Bool.self) { return true }
        return try CSATStore.takeZoneLock(tx, exclusive: false, waitingAtMost: 2_000)
    }

    /// Events waiting to be applied, and the age in seconds of the oldest.
    public func backlog() async throws -> (pending: Int, oldestSeconds: Double) {
        let row = try await database.query("""
            SELECT count(*), coalesce(extract(epoch FROM now() - min(received_at)), 0)::float8 FROM webhook_events WHERE status = 'pending'
            """)[0]
        return (try row.decode(0), try row.decode(1))
    }

    public func pending() async throws -> Int {
        try await database.query("SELECT count(*) FROM webhook_events WHERE status = 'pending'")[0].decode(0)
    }

    /// Marks the events with one of `statuses` pending again (`desk-gateway webhooks replay`); returns how many.
    public func replay(statuses: [String]) async throws -> Int {
        try await database.query("""
            UPDATE webhook_events SET status = 'pending', processed_at = NULL, attempts = 0, last_error = NULL
             WHERE status = ANY($1::text[])
            """, [statuses]).affectedRows
    }

    /// How many events are in each status.
    public func counts() async throws -> [String: Int] {
        var result: [String: Int] = [:]
        for row in try await database.query("SELECT status, count(*) FROM webhook_events GROUP BY status") {
            result[try row.decode(0)] = try row.decode(1)
        }
        return result
    }
}
