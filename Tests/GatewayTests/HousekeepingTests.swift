import Foundation
import GatewayApp
import Postgres
import Store
import Testing
import TestSupport

/// Rows past their retention go, rows inside it stay, and two instances running housekeeping at once never remove
/// a row twice.
@Suite struct HousekeepingTests {
    /// Rows on both sides of every retention rule; returns how many of each rule's rows are past retention.
    static func seed(_ pool: Database, scale: Int) async throws -> [String: Int] {
        try await pool.transaction { tx in
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

    static func counts(_ pool: Database) async throws -> [String: Int] {
        var result: [String: Int] = [:]
        for table in ["sessions", "outbox", "idempotency_keys", "webhook_events", "tickets", "report_sessions", "customer_syncs"] {
            result[table] = try await pool.query("SELECT count(*) FROM \(table)")[0].decode(0)
        }
        return result
    }

    /// A migrated database with no gateway running (its background loops would process the seeded rows).
    static func withDatabase(_ body: (Database, Database) async throws -> Void) async throws {
        try await TestPostgres.withDatabase { url in
            let first = Database.forTests(url, poolSize: 2)
            let second = Database.forTests(url, poolSize: 2)
            defer { first.shutdown(); second.shutdown() }
            _ = try await first.migrate(directory: TestPostgres.repositoryRoot + "/sql")
            try await body(first, second)
        }
    }

    @Test func rowsPastRetentionGoOnceAndRowsInsideItStay() async throws {
        try await Self.withDatabase { pool, other in
            let scale = 2500   // more than two batches of 1,000 per rule
            let due = try await Self.seed(pool, scale: scale)
            let before = try await Self.counts(pool)
            var policy = GatewayConfig().retention
            policy.batchSize = 1000
            // Two instances (two pools) at once, then passes until one finishes without yielding to another.
            async let first = HousekeepingStore(pool: pool).run(policy, pause: .milliseconds(1))
            async let second = HousekeepingStore(pool: other).run(policy, pause: .milliseconds(1))
            let concurrent = [try await first, try await second]
            // What a yielding instance left, one more pass finishes (nobody else holds the lock now).
            let last = try await HousekeepingStore(pool: pool).run(policy)
            #expect(!last.yielded)
            let runs = concurrent + [last]
            // Nothing is ever counted twice.
            var removed: [String: Int] = [:]
            for run in runs { for (rule, count) in run.removed { removed[rule, default: 0] += count } }
            #expect(removed == due, "\(removed) vs \(due)")
            let after = try await Self.counts(pool)
            #expect(after["sessions"] == before["sessions"]! - 2 * scale)
            #expect(after["outbox"] == before["outbox"]! - 2 * scale)
            #expect(after["idempotency_keys"] == scale)
            #expect(after["report_sessions"] == 2 * scale)
            #expect(after["webhook_events"] == 3 * scale)
            #expect(after["tickets"] == 3 * scale)
            // The quiet customer's last listing, older than the closed-ticket window, goes; the active one's stays.
            #expect(after["customer_syncs"] == 1)
            // The rows that stay are exactly the ones inside retention.
            let expiredLeft: Int = try await pool.query("SELECT count(*) FROM sessions WHERE expires_at < now() - interval '1 day'")[0].decode(0)
            #expect(expiredLeft == 2)   // held by outbox rows
            let pendingEvents: Int = try await pool.query("SELECT count(*) FROM webhook_events WHERE status = 'pending'")[0].decode(0)
            #expect(pendingEvents == scale)
            let activeClosed: Int = try await pool.query("SELECT count(*) FROM tickets WHERE customer_id = 2")[0].decode(0)
            #expect(activeClosed == scale)
            // A second pass finds nothing more.
            #expect(try await HousekeepingStore(pool: pool).run(policy).removed.values.reduce(0, +) == 0)
        }
    }

    /// Retention in fractions of its unit: minutes of idempotency keys and closed tickets (what the soak uses), and
    /// the replay window follows the idempotency retention instead of a fixed day.
    @Test func fractionalRetentionAndTheReplayWindowAgree() async throws {
        try await Self.withDatabase { pool, _ in
            try await pool.transaction { tx in
                try tx.query("INSERT INTO customers (id, sendbird_id) VALUES (1, 'c')")
                try tx.query("""
                    INSERT INTO idempotency_keys (principal, key, request_hash, status, headers, body, created_at)
                    VALUES ('p', 'old', '\\x01', 201, '[]', '\\x7b7d', now() - interval '40 minutes'),
                           ('p', 'new', '\\x01', 201, '[]', '\\x7b7d', now() - interval '20 minutes')
                    """)
                try tx.query("""
                    INSERT INTO tickets (id, customer_id, channel_url, status, priority, title, created_at, updated_at, closed_at, document, desk)
                    VALUES (1, 1, 'a', 'CLOSED', 'LOW', 't', now() - interval '1 day', now(), now() - interval '10 minutes', '{}', '{}'),
                           (2, 1, 'b', 'CLOSED', 'LOW', 't', now() - interval '1 day', now(), now() - interval '2 minutes', '{}', '{}')
                    """)
            }
            let store = IdempotencyStore(pool: pool, windowHours: 0.5)
            guard case .replay = try await store.claim(principal: "p", key: "new", requestHash: [1]) else {
                Issue.record("a key 20 minutes old replays inside a 30-minute window"); return
            }
            guard case .claimed = try await store.claim(principal: "p", key: "old", requestHash: [1]) else {
                Issue.record("a key 40 minutes old is past a 30-minute window and is taken over"); return
            }
            try await pool.query("UPDATE idempotency_keys SET created_at = now() - interval '40 minutes' WHERE key = 'old'")
            var policy = GatewayConfig().retention
            policy.idempotencyHours = 0.5
            policy.closedTicketDays = 5.0 / 1440   // 5 minutes
            let run = try await HousekeepingStore(pool: pool).run(policy)
            #expect(run.removed["idempotency_keys"] == 1)
            #expect(run.removed["tickets_closed"] == 1)
            let keys = try await pool.query("SELECT key FROM idempotency_keys").map { try $0.decode(0, as: String.self) }
            #expect(keys == ["new"])
            let tickets = try await pool.query("SELECT id FROM tickets").map { try $0.decode(0, as: Int.self) }
            #expect(tickets == [2])
        }
    }

    @Test func theGatewayLoopRemovesExpiredSessionsAndShowsItsMetrics() async throws {
        try await withGateway(configure: { $0.housekeepingIntervalSeconds = 1 }) { app in
            _ = try await Self.seed(app.pool, scale: 10)
            let deadline = ContinuousClock.now + .seconds(20)
            var metrics = ""
            while ContinuousClock.now < deadline {
                metrics = try await httpRequest(port: app.port, "GET", "/metrics").text
                if metrics.contains(#"housekeeping_rows_removed_total{table="sessions"} 20"#) { break }
                try await Task.sleep(for: .milliseconds(200))
            }
            #expect(metrics.contains(#"housekeeping_rows_removed_total{table="sessions"} 20"#), "\(metrics.split(separator: "\n").filter { $0.contains("housekeeping") })")
            #expect(metrics.contains(#"housekeeping_oldest_row_age_seconds{table="webhook_events_unapplied"}"#))
            #expect(metrics.contains("housekeeping_last_run_timestamp_seconds"))
            let expired: Int = try await app.pool.query("SELECT count(*) FROM sessions WHERE expires_at < now() - interval '1 day' AND id NOT IN (SELECT session_id FROM outbox)")[0].decode(0)
            #expect(expired == 0)
        }
    }
}

/// Memory that follows callers: many customers come once, and what the gateway keeps for them drains away.
@Suite struct BoundedMemoryTests {
    static func gauge(_ metrics: String, _ name: String, _ structure: String) -> Double? {
        let prefix = "\(name){structure=\"\(structure)\"} "
        return metrics.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { Double($0.dropFirst(prefix.count)) }
    }

    @Test func manyOneTimeCustomersLeaveBoundedState() async throws {
        try await withGateway(configure: {
            $0.sessionCacheSeconds = 1
            $0.signInBurst = 10_000
            $0.signInPerMinute = 100_000
        }) { app in
            let desk = DeskAgent(app)
            var customers: [Customer] = []
            for index in 0..<200 {
                try await desk.post("/customers", #"{"sendbirdId":"once-\#(index)","accessToken":"t-\#(index)","displayName":"C\#(index)"}"#)
                let customer = try await Customer.signIn(app, user: "once-\(index)", accessToken: "t-\(index)")
                #expect(try await customer.send("GET", "/v1/tickets/open-count").status == 200)
                customers.append(customer)
            }
            let busy = try await httpRequest(port: app.port, "GET", "/metrics").text
            let sessions = try #require(Self.gauge(busy, "customer_memory_entries", "sessions"))
            #expect(sessions > 0 && sessions <= 200, "\(sessions)")
            #expect(try #require(Self.gauge(busy, "memory_entries", "rate_limit_buckets")) <= 400)
            // Past SESSION_CACHE_S the next session stored sweeps the expired ones out.
            try await Task.sleep(for: .milliseconds(2100))
            _ = try await Customer.signIn(app)
            let quiet = try await httpRequest(port: app.port, "GET", "/metrics").text
            #expect(try #require(Self.gauge(quiet, "customer_memory_entries", "sessions")) <= 2)
        }
    }
}
