import Postgres
import Store

/// Rows on both sides of every retention rule, for the rules' own tests (StoreTests) and the gateway's loop.
public enum RetentionSeed {
    /// Rows on both sides of every retention rule; returns how many of each rule's rows are past retention.
    public static func seed(_ database: Database, scale: Int) async throws -> [String: Int] {
        try await database.transaction { tx in
            try tx.query("INSERT INTO customers (id, sendbird_id) VALUES (1, 'quiet'), (2, 'active')")
            try tx.query("INSERT INTO customer_syncs (customer_id, synced_at) VALUES (1, now() - interval '40 days'), (2, now())")
            func sessions(_ count: Int, expires: String, revoked: String = "NULL", from offset: Int) throws {
                try tx.query("""
                    INSERT INTO sessions (token_hash, customer_id, desk_token_sealed, expires_at, revoked_at)
                    SELECT decode(md5(g::text), 'hex'), 1, '\\x00', \(expires), \(revoked) FROM generate_series($1::int, $2::int) g
                    """, [offset, offset + count - 1])
            }
            try sessions(scale, expires: "now() - interval '2 days'", from: 1)                        // expired long ago: go
            try sessions(scale, expires: "now() + interval '1 day'", revoked: "now() - interval '3 days'", from: 100_001)  // revoked: go
            try sessions(scale, expires: "now() - interval '1 hour'", from: 200_001)                   // inside the grace day: stay
            try sessions(scale, expires: "now() + interval '1 day'", from: 300_001)                    // alive: stay
            // An expired session a pending operation still names stays; so does the one of a finished operation
            // younger than the outbox's retention.
            try sessions(2, expires: "now() - interval '5 days'", from: 400_001)
            let held = try tx.query("SELECT id FROM sessions WHERE token_hash IN (decode(md5('400001'), 'hex'), decode(md5('400002'), 'hex')) ORDER BY id")
                .map { try $0.decode(0, as: Int.self) }
            func outbox(_ count: Int, status: String, finished: String, session: Int) throws {
                try tx.query("""
                    INSERT INTO outbox (ticket_id, customer_id, session_id, kind, payload, status, created_at, finished_at)
                    SELECT 5000 + g, 1, $2, 'close', '{}', '\(status)', now() - interval '20 days', \(finished) FROM generate_series(1, $1::int) g
                    """, [count, session])
            }
            let anySession = try tx.query("SELECT id FROM sessions WHERE expires_at > now() AND revoked_at IS NULL LIMIT 1")[0].decode(0, as: Int.self)
            try outbox(scale, status: "delivered", finished: "now() - interval '15 days'", session: anySession)   // go
            try outbox(scale, status: "failed", finished: "now() - interval '15 days'", session: anySession)      // go
            try outbox(scale, status: "delivered", finished: "now() - interval '1 day'", session: anySession)     // stay
            try outbox(1, status: "pending", finished: "NULL", session: held[0])                                   // stays, and holds its session
            try outbox(1, status: "delivered", finished: "now() - interval '1 day'", session: held[1])             // stays, and holds its session
            func keys(_ count: Int, age: String, prefix: String) throws {
                try tx.query("""
                    INSERT INTO idempotency_keys (principal, key, request_hash, created_at)
                    SELECT 'p', '\(prefix)' || g, '\\x00', now() - interval '\(age)' FROM generate_series(1, $1::int) g
                    """, [count])
            }
            try keys(scale, age: "25 hours", prefix: "old")    // go
            try keys(scale, age: "1 hour", prefix: "new")      // stay
            func events(_ count: Int, status: String, age: String, prefix: String) throws {
                try tx.query("""
                    INSERT INTO webhook_events (dedupe_key, event_type, body, received_at, status)
                    SELECT '\(prefix)' || g, 'T', '{}', now() - interval '\(age)', '\(status)' FROM generate_series(1, $1::int) g
                    """, [count])
            }
            try events(scale, status: "applied", age: "7 hours", prefix: "a-old")          // go (6 hours by default)
            try events(scale, status: "applied", age: "5 hours", prefix: "a-new")          // stay
            try events(scale, status: "unrecognized", age: "15 days", prefix: "u-mid")     // stay (kept 90 days)
            try events(scale, status: "foreign", age: "91 days", prefix: "f-old")          // go
            try events(scale, status: "pending", age: "200 days", prefix: "p-old")         // never
            func tickets(_ count: Int, customer: Int, status: String, closed: String, from offset: Int) throws {
                try tx.query("""
                    INSERT INTO tickets (id, customer_id, channel_url, status, priority, title, created_at, updated_at, closed_at, document, desk)
                    SELECT g, $3, 'ch-' || g, '\(status)', 'LOW', 't', now() - interval '60 days', now() - interval '40 days', \(closed), '{}', '{}'
                      FROM generate_series($1::int, $2::int) g
                    """, [offset, offset + count - 1, customer])
            }
            try tickets(scale, customer: 1, status: "CLOSED", closed: "now() - interval '31 days'", from: 1)        // go
            try tickets(scale, customer: 2, status: "CLOSED", closed: "now() - interval '31 days'", from: 100_001)  // stay: customer active
            try tickets(scale, customer: 1, status: "ACTIVE", closed: "NULL", from: 200_001)                        // stay: open
            try tickets(scale, customer: 1, status: "CLOSED", closed: "now() - interval '2 days'", from: 300_001)   // stay: recent
            // Report page sessions: expired two days ago go, expired an hour ago and live ones stay.
            let key = try tx.query("INSERT INTO api_keys (name, key_hash, scopes) VALUES ('k', '\\x01', '{reports}') RETURNING id")[0].decode(0, as: Int.self)
            for (count, expires, start) in [(scale, "now() - interval '2 days'", 1), (scale, "now() - interval '1 hour'", 100_001),
                                             (scale, "now() + interval '1 hour'", 200_001)] {
                try tx.query("""
                    INSERT INTO report_sessions (token_hash, api_key_id, expires_at)
                    SELECT decode(md5('r' || g), 'hex'), $3, \(expires) FROM generate_series($1::int, $2::int) g
                    """, [start, start + count - 1, key])
            }
            return ["sessions": 2 * scale, "outbox": 2 * scale, "idempotency_keys": scale, "webhook_events_applied": scale,
                    "webhook_events_unapplied": scale, "tickets_closed": scale, "report_sessions": scale, "customer_syncs": 1]
        }
    }

    public static func counts(_ database: Database) async throws -> [String: Int] {
        var result: [String: Int] = [:]
        for table in ["sessions", "outbox", "idempotency_keys", "webhook_events", "tickets", "report_sessions", "customer_syncs"] {
            result[table] = try await database.query("SELECT count(*) FROM \(table)")[0].decode(0)
        }
        return result
    }
}
