import Postgres

public struct InboxEvent: Sendable {
    public let id: Int
    public let type: String
    public let body: String
}

/// Desk webhooks as received: stored once per event (redeliveries collapse), applied later in arrival order.
public struct WebhookInbox: Sendable {
    let pool: Database

    public init(pool: Database) {
        self.pool = pool
    }

    /// Returns false when the event was already received.
    public func receive(dedupeKey: String, type: String, body: String) async throws -> Bool {
        !(try await pool.query("""
            INSERT INTO webhook_events (dedupe_key, event_type, body) VALUES ($1, $2, $3::jsonb)
            ON CONFLICT (dedupe_key) DO NOTHING RETURNING 1
            """, [dedupeKey, type, body])).isEmpty
    }

    /// What became of one event.
    public enum Outcome: String, Sendable {
        case applied
        /// Not interpretable (yet): kept for `webhooks replay`.
        case unrecognized
        /// Another Sendbird application's ticket: kept, never applied.
        case foreign
    }

    /// What one pass over the inbox did.
    public struct Pass: Sendable {
        public var applied = 0
        public var unrecognized = 0
        public var foreign = 0
        public var failed = 0
        public var total: Int { applied + unrecognized + foreign + failed }
    }

    /// Applies up to `limit` pending events in arrival order, each in a transaction of its own (`FOR UPDATE SKIP
    /// LOCKED`, so instances and workers share the work): one event's locks (its ticket, then its rollup rows) are
    /// all a transaction ever holds, so two passes never wait on each other in a circle. The pass keeps one
    /// connection for all its events. `apply` runs on the event's transaction and says what became of it; one it
    /// cannot interpret is kept as `unrecognized`, another application's as `foreign` (never dropped). An event whose
    /// application throws is rolled back whole, counted in its row, and retried in a later pass, 10 times at most.
    /// The event itself was committed durably when received, so its application commits without waiting for the
    /// disk: lost in a crash, it is still pending and is applied again (every write is idempotent).
    /// With `lanes`, the events are split by ticket (the ticket id where the known shapes hold it, hashed) and this
    /// pass takes lane `lane` only: one ticket's events are applied in arrival order, one after the other, while
    /// other tickets' events go on beside them (two states of a ticket with the same `updatedAt` must not land in
    /// the wrong order).
    public func process(limit: Int, lane: Int = 0, lanes: Int = 1,
                        apply: @escaping @Sendable (InboxEvent, StoreTransaction) throws -> Outcome) async throws -> Pass {
        try await pool.withConnection { connection in
            var pass = Pass()
            var after = 0
            for _ in 0..<limit {
                var claimed: InboxEvent?
                var outcome: Outcome?
                var failure: String?
                do {
                    outcome = try connection.transaction { tx -> Outcome? in
                        claimed = nil
                        guard let row = try tx.query("""
                            SELECT id, event_type, body::text, set_config('synchronous_commit', 'off', true) FROM webhook_events
                             WHERE status = 'pending' AND id > $1
                               AND ($2 <= 1 OR mod(abs(hashtext(coalesce(body #>> '{data,id}', body #>> '{data,ticket,id}',
                                                                         body #>> '{ticket,id}', body ->> 'id', ''))), $2) = $3)
                             ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED
                            """, [after, lanes, lane]).first else { return nil }
                        let event = InboxEvent(id: try row.decode(0), type: try row.decode(1), body: try row.decode(2))
                        claimed = event
                        let writes = StoreTransaction(connection: tx)
                        let outcome = try apply(event, writes)
                        try writes.finish()
                        try tx.query("""
                            UPDATE webhook_events SET status = $2, processed_at = CASE WHEN $2 = 'applied' THEN now() END,
                                   attempts = attempts + 1, last_error = NULL WHERE id = $1
                            """, [event.id, outcome.rawValue])
                        return outcome
                    }
                } catch {
                    guard claimed != nil, connection.isConnected else { throw error }
                    failure = "\(error)"
                }
                guard let event = claimed else { break }
                after = event.id
                if let failure {
                    // Only while still pending: another worker may have applied it since this one let it go.
                    try connection.query("""
                        UPDATE webhook_events SET attempts = attempts + 1, last_error = $2,
                               status = CASE WHEN attempts + 1 >= 10 THEN 'failed' ELSE 'pending' END WHERE id = $1 AND status = 'pending'
                        """, [event.id, failure])
                    pass.failed += 1
                    continue
                }
                switch outcome {
                case .applied: pass.applied += 1
                case .unrecognized: pass.unrecognized += 1
                case .foreign: pass.foreign += 1
                case nil: break
                }
            }
            return pass
        }
    }

    /// Events waiting to be applied, and the age in seconds of the oldest.
    public func backlog() async throws -> (pending: Int, oldestSeconds: Double) {
        let row = try await pool.query("""
            SELECT count(*), coalesce(extract(epoch FROM now() - min(received_at)), 0)::float8 FROM webhook_events WHERE status = 'pending'
            """)[0]
        return (try row.decode(0), try row.decode(1))
    }

    public func pending() async throws -> Int {
        try await pool.query("SELECT count(*) FROM webhook_events WHERE status = 'pending'")[0].decode(0)
    }

    /// Marks the events with one of `statuses` pending again (`desk-gateway webhooks replay`); returns how many.
    public func replay(statuses: [String]) async throws -> Int {
        try await pool.query("""
            UPDATE webhook_events SET status = 'pending', processed_at = NULL, attempts = 0, last_error = NULL
             WHERE status = ANY($1::text[])
            """, [statuses]).affectedRows
    }

    /// How many events are in each status.
    public func counts() async throws -> [String: Int] {
        var result: [String: Int] = [:]
        for row in try await pool.query("SELECT status, count(*) FROM webhook_events GROUP BY status") {
            result[try row.decode(0)] = try row.decode(1)
        }
        return result
    }
}
