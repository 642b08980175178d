public import Postgres

public struct InboxEvent: Sendable {
    public let id: Int
    public let type: String
    public let body: String
}

/// Desk webhooks as received: stored once per event (redeliveries collapse), applied later in arrival order.
public struct WebhookInbox: Sendable {
    let pool: PostgresPool

    public init(pool: PostgresPool) {
        self.pool = pool
    }

    /// Returns false when the event was already received.
    public func receive(dedupeKey: String, type: String, body: String) async throws -> Bool {
        !(try await pool.query("""
            INSERT INTO webhook_events (dedupe_key, event_type, body) VALUES ($1, $2, $3::jsonb)
            ON CONFLICT (dedupe_key) DO NOTHING RETURNING 1
            """, [dedupeKey, type, body])).isEmpty
    }

    /// Applies up to `limit` unprocessed events in one transaction (`FOR UPDATE SKIP LOCKED`, so instances share the
    /// work); `apply` runs on the transaction's connection. An event whose application throws is retried later.
    public func process(limit: Int, apply: @escaping @Sendable (InboxEvent, PostgresConnection) throws -> Void) async throws -> (applied: Int, failed: Int) {
        try await pool.transaction { tx in
            let rows = try tx.query("""
                SELECT id, event_type, body::text FROM webhook_events
                 WHERE processed_at IS NULL AND attempts < 10 ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED
                """, [limit])
            var applied = 0
            var failed = 0
            for row in rows {
                let event = InboxEvent(id: try row.decode(0), type: try row.decode(1), body: try row.decode(2))
                try tx.query("SAVEPOINT event")
                do {
                    try apply(event, tx)
                    try tx.query("RELEASE SAVEPOINT event")
                    try tx.query("UPDATE webhook_events SET processed_at = now(), attempts = attempts + 1 WHERE id = $1", [event.id])
                    applied += 1
                } catch {
                    try tx.query("ROLLBACK TO SAVEPOINT event")
                    try tx.query("UPDATE webhook_events SET attempts = attempts + 1, last_error = $2 WHERE id = $1", [event.id, "\(error)"])
                    failed += 1
                }
            }
            return (applied, failed)
        }
    }

    public func pending() async throws -> Int {
        try await pool.query("SELECT count(*) FROM webhook_events WHERE processed_at IS NULL")[0].decode(0)
    }
}
