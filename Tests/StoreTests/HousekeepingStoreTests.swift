import Foundation
import Postgres
import Store
import Testing
import TestSupport

/// Rows past their retention go, rows inside it stay, and two instances running housekeeping at once never remove
/// a row twice.
@Suite struct HousekeepingStoreTests {
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
        try await Self.withDatabase { database, other in
            let scale = 2500   // more than two batches of 1,000 per rule
            let due = try await RetentionSeed.seed(database, scale: scale)
            let before = try await RetentionSeed.counts(database)
            var policy = RetentionPolicy.defaults
            policy.batchSize = 1000
            // Two instances (two pools) at once, then passes until one finishes without yielding to another.
            async let first = HousekeepingStore(database: database).run(policy, pause: .milliseconds(1))
            async let second = HousekeepingStore(database: other).run(policy, pause: .milliseconds(1))
            let concurrent = [try await first, try await second]
            // What a yielding instance left, one more pass finishes (nobody else holds the lock now).
            let last = try await HousekeepingStore(database: database).run(policy)
            #expect(!last.yielded)
            let runs = concurrent + [last]
            // Nothing is ever counted twice.
            var removed: [String: Int] = [:]
            for run in runs { for (rule, count) in run.removed { removed[rule, default: 0] += count } }
            #expect(removed == due, "\(removed) vs \(due)")
            let after = try await RetentionSeed.counts(database)
            #expect(after["sessions"] == before["sessions"]! - 2 * scale)
            #expect(after["outbox"] == before["outbox"]! - 2 * scale)
            #expect(after["idempotency_keys"] == scale)
            #expect(after["report_sessions"] == 2 * scale)
            #expect(after["webhook_events"] == 3 * scale)
            #expect(after["tickets"] == 3 * scale)
            // The quiet customer's last listing, older than the closed-ticket window, goes; the active one's stays.
            #expect(after["customer_syncs"] == 1)
            // The rows that stay are exactly the ones inside retention.
            let expiredLeft: Int = try await database.query("SELECT count(*) FROM sessions WHERE expires_at < now() - interval '1 day'")[0].decode(0)
            #expect(expiredLeft == 2)   // held by outbox rows
            let pendingEvents: Int = try await database.query("SELECT count(*) FROM webhook_events WHERE status = 'pending'")[0].decode(0)
            #expect(pendingEvents == scale)
            let activeClosed: Int = try await database.query("SELECT count(*) FROM tickets WHERE customer_id = 2")[0].decode(0)
            #expect(activeClosed == scale)
            // A second pass finds nothing more.
            #expect(try await HousekeepingStore(database: database).run(policy).removed.values.reduce(0, +) == 0)
        }
    }

    /// The ages the metrics show count from each rule's retention clock, before and after a pass, and are read from
    /// the ends of indexes (the customers' last listings excepted: one narrow row per customer, read whole).
    @Test func oldestAgesCountFromEachRulesRetentionClockAndReadIndexes() async throws {
        try await Self.withDatabase { database, _ in
            _ = try await RetentionSeed.seed(database, scale: 10)
            let store = HousekeepingStore(database: database)
            let (day, hour) = (86_400.0, 3_600.0)
            func expectAges(_ expected: [String: Double]) async throws {
                let ages = try await store.oldestAges(.defaults)
                #expect(Set(ages.keys) == Set(expected.keys))
                for (rule, seconds) in expected {
                    #expect(abs((ages[rule] ?? -1) - seconds) < 120, "\(rule): \(ages[rule] ?? -1) vs \(seconds)")
                }
            }
            try await expectAges(["outbox": 15 * day, "sessions": 5 * day, "report_sessions": 2 * day, "idempotency_keys": 25 * hour,
                                  "webhook_events_applied": 7 * hour, "webhook_events_unapplied": 91 * day, "tickets_closed": 31 * day,
                                  "customer_syncs": 40 * day])
            _ = try await store.run(.defaults)
            // What stays: the younger rows, the sessions operations name, the active customer's closed tickets.
            try await expectAges(["outbox": day, "sessions": 5 * day, "report_sessions": hour, "idempotency_keys": hour,
                                  "webhook_events_applied": 5 * hour, "webhook_events_unapplied": 15 * day, "tickets_closed": 31 * day,
                                  "customer_syncs": 0])
            let plan = try await database.transaction { tx in
                try tx.query("SET LOCAL enable_seqscan = off")   // a table without a usable index is still scanned
                return try tx.query("EXPLAIN " + HousekeepingStore.agesStatement(.defaults).sql).map { try $0.decode(0, as: String.self) }
            }
            let scans = plan.filter { $0.contains("Seq Scan") }
            #expect(scans.count == 1 && scans[0].contains("Seq Scan on customer_syncs"), "\(plan.joined(separator: "\n"))")
            #expect(plan.filter { $0.contains("Index") }.count >= 10, "\(plan.joined(separator: "\n"))")
        }
    }

    /// Closed tickets kept for a customer who still lists lie between the ones that go: each batch resumes after the
    /// last ticket the one before removed, and none is skipped or removed twice.
    @Test func closedTicketsGoInBatchesThatResumeAmongTheKeptOnes() async throws {
        try await Self.withDatabase { database, _ in
            try await database.transaction { tx in
                try tx.query("INSERT INTO customers (id, sendbird_id) VALUES (1, 'quiet'), (2, 'active')")
                try tx.query("INSERT INTO customer_syncs (customer_id, synced_at) VALUES (2, now())")
                // The active customer's every other ticket, and the first few.
                try tx.query("""
                    INSERT INTO tickets (id, customer_id, channel_url, status, priority, title, created_at, updated_at, closed_at, document, desk)
                    SELECT g, CASE WHEN g % 2 = 0 OR g <= 10 THEN 2 ELSE 1 END, 'ch-' || g, 'CLOSED', 'LOW', 't', now() - interval '60 days',
                           now() - interval '40 days', now() - interval '31 days', '{}', '{}'
                      FROM generate_series(1, 5000) g
                    """)
            }
            var policy = RetentionPolicy.defaults
            policy.batchSize = 1000
            let pass = try await HousekeepingStore(database: database).run(policy, pause: .milliseconds(1))
            #expect(pass.removed["tickets_closed"] == 2495)
            let left = try await database.query("SELECT customer_id, count(*) FROM tickets GROUP BY 1 ORDER BY 1")
                .map { [try $0.decode(0, as: Int.self), try $0.decode(1, as: Int.self)] }
            #expect(left == [[2, 2505]])
        }
    }

    /// Retention in fractions of its unit: minutes of idempotency keys and closed tickets (what the soak uses), and
    /// the replay window follows the idempotency retention instead of a fixed day.
    @Test func fractionalRetentionAndTheReplayWindowAgree() async throws {
        try await Self.withDatabase { database, _ in
            try await database.transaction { tx in
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
            let store = IdempotencyStore(database: database, windowHours: 0.5)
            guard case .replay = try await store.claim(principal: "p", key: "new", requestHash: [1]) else {
                Issue.record("a key 20 minutes old replays inside a 30-minute window"); return
            }
            guard case .claimed = try await store.claim(principal: "p", key: "old", requestHash: [1]) else {
                Issue.record("a key 40 minutes old is past a 30-minute window and is taken over"); return
            }
            try await database.query("UPDATE idempotency_keys SET created_at = now() - interval '40 minutes' WHERE key = 'old'")
            var policy = RetentionPolicy.defaults
            policy.idempotencyHours = 0.5
            policy.closedTicketDays = 5.0 / 1440   // 5 minutes
            let run = try await HousekeepingStore(database: database).run(policy)
            #expect(run.removed["idempotency_keys"] == 1)
            #expect(run.removed["tickets_closed"] == 1)
            let keys = try await database.query("SELECT key FROM idempotency_keys").map { try $0.decode(0, as: String.self) }
            #expect(keys == ["new"])
            let tickets = try await database.query("SELECT id FROM tickets").map { try $0.decode(0, as: Int.self) }
            #expect(tickets == [2])
        }
    }
}
