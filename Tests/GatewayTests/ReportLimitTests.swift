import Domain
import Foundation
import GatewayApp
import JSON
import Postgres
import Store
import Synchronization
import Testing
import TestSupport

/// Reports from raw ratings are expensive: they are admitted through their own small limit, bounded in size, and a
/// statement timeout is a 503, while customers keep being served.
@Suite struct ReportLimitTests {
    static func seed(_ app: GatewayApplication, ratings: Int, agents: Int) async throws {
        try await app.database.transaction { tx in
            try tx.query("INSERT INTO agents (id, display_name) SELECT 600 + g, 'Agent ' || g FROM generate_series(1, $1::int) g "
                         + "ON CONFLICT (id) DO NOTHING", [agents])
            // Straight into the table, as ratings recorded before a zone existed: no rollups behind them.
            try tx.query("""
                INSERT INTO csat_ratings (ticket_id, message_id, score, agent_id, team_id, rated_at, source)
                SELECT 100000 + g, g, 1 + g % 5, 601 + floor(random() * $2::int)::int, 11 + g % 2,
                       now() - floor(random() * 360) * interval '1 day', 'sync'
                  FROM generate_series(1, $1::int) g
                """, [ratings, agents])
        }
    }

    @Test func aStormOfRawReportsIsAdmittedBoundedAndNeverA500() async throws {
        try await withGateway(configure: {
            $0.reportTimeZones = ["UTC"]
            $0.reportRawConcurrency = 2
            $0.reportRawConcurrencyPerKey = 1
            $0.reportMaxCells = 500
            $0.dbAcquireTimeoutMilliseconds = 1500
            // The 60,000-row seed is one statement; on a loaded CI machine it once passed the 5 s default.
            $0.dbStatementTimeoutMilliseconds = 60_000
        }) { app in
            try await Self.seed(app, ratings: 60_000, agents: 40)
            let keys = try await (0..<3).asyncMap { _ in try await reporter(app).key }
            let zones = ["Europe/Paris", "Asia/Tokyo", "America/Chicago", "Africa/Cairo", "Europe/Oslo", "Asia/Dubai",
                         "America/Lima", "Europe/Rome", "Asia/Seoul", "Australia/Perth", "Europe/Madrid", "Asia/Manila"]
            let from = ISOTimestamp.format(Date().timeIntervalSince1970 - 360 * 86_400).prefix(10)
            let customer = try await Customer.signIn(app)
            // 24 reports at once (2 per zone, 3 keys) while the customer keeps reading.
            async let storm = (0..<24).concurrentMap { index -> TestResponse in
                let query = "?from=\(from)&groupBy=team&bucket=month&tz=\(zones[index % zones.count])"
                return try await httpRequest(port: app.port, "GET", "/v1/reports/csat" + query, headers: [("X-API-Key", keys[index % 3])])
            }
            async let customerReads = (0..<20).serialMap { _ in try await customer.send("GET", "/v1/tickets/open-count").status }
            let answers = try await storm
            let statuses = answers.map(\.status)
            #expect(Set(statuses).isSubset(of: [200, 429, 503]), "\(statuses)")
            #expect(statuses.contains(200))
            #expect(statuses.contains { $0 != 200 }, "24 at once past a limit of 2 were all admitted: \(statuses)")
            for refused in answers where refused.status != 200 {
                #expect(refused.header("Retry-After") != nil)
                #expect(["rate_limited", "reports_busy"].contains(refused.json?["code"] as? String ?? ""), "\(refused.text)")
            }
            #expect(try await customerReads.allSatisfy { $0 == 200 })

            // Too many rows (40 agents × 52 weeks) is a clear 400 before any of them is sent.
            let large = try await httpRequest(port: app.port, "GET", "/v1/reports/csat?from=\(from)&groupBy=agent&bucket=week&tz=Asia/Tokyo",
                                              headers: [("X-API-Key", keys[0])])
            #expect(large.status == 400 && large.json?["code"] as? String == "report_too_large", "\(large.text)")
            #expect(large.body.count < 2048, "\(large.text.prefix(600))")
        }
    }

    @Test func aReportPastTheStatementTimeoutIs503ReportTimeout() async throws {
        // Long enough that no setup statement on a busy test machine reaches it (1 s once did), short enough to wait out.
        try await withGateway(configure: { $0.dbStatementTimeoutMilliseconds = 3000 }) { app in
            try await Self.seed(app, ratings: 100, agents: 3)
            let key = try await reporter(app).key
            // Another session holds the table, so the report's query waits until the statement timeout ends it.
            // One connection, so BEGIN, LOCK and ROLLBACK share it.
            let holder = PostgresPool(configuration: PostgresConfiguration.forTests(app.database.connectionString, poolSize: 1))
            defer { holder.shutdown() }
            try await holder.query("BEGIN")
            try await holder.query("LOCK TABLE csat_ratings IN ACCESS EXCLUSIVE MODE")
            let response = try await httpRequest(port: app.port, "GET", "/v1/reports/csat?tz=Asia/Tokyo", headers: [("X-API-Key", key)])
            try await holder.query("ROLLBACK")
            #expect(response.status == 503, "\(response.text)")
            #expect(response.json?["code"] as? String == "report_timeout")
            #expect(response.header("Retry-After") != nil)
            #expect(try await httpRequest(port: app.port, "GET", "/v1/reports/csat?tz=Asia/Tokyo", headers: [("X-API-Key", key)]).status == 200)
        }
    }
}

extension ReportLimitTests {
    /// A bucketed report shows its previous period only as totals: from the raw ratings that is one summed row, so a
    /// previous period with more groups than a report may have rows neither makes it too large nor changes its totals.
    @Test func aBucketedRawReportsPreviousPeriodIsOneTotalWhateverItsGroups() async throws {
        try await withGateway(configure: {
            $0.reportTimeZones = ["UTC"]
            $0.reportMaxCells = 10
        }) { app in
            try await app.database.transaction { tx in
                try tx.query("INSERT INTO agents (id, display_name) SELECT 700 + g, 'Agent ' || g FROM generate_series(1, 30) g ON CONFLICT (id) DO NOTHING")
                // 30 agents rated 45 days ago (the previous period of the 30 days to today), two of them 3 days ago.
                try tx.query("""
                    INSERT INTO csat_ratings (ticket_id, message_id, score, agent_id, team_id, rated_at, source)
                    SELECT 200000 + g, 1, 1 + g % 5, 701 + g % 30, 11, now() - interval '45 days', 'sync' FROM generate_series(0, 59) g
                    UNION ALL
                    SELECT 300000 + g, 1, 5, 701 + g % 2, 11, now() - interval '3 days', 'sync' FROM generate_series(0, 6) g
                    """)
            }
            let reports = try await reporter(app)
            let to = ISOTimestamp.format(Date().timeIntervalSince1970).prefix(10)
            let from = ISOTimestamp.format(Date().timeIntervalSince1970 - 29 * 86_400).prefix(10)
            // Asia/Tokyo has no rollups here: the raw ratings answer.
            let response = try await reports.get("?from=\(from)&to=\(to)&groupBy=agent&bucket=month&tz=Asia/Tokyo")
            #expect(response.status == 200, "\(response.text)")
            #expect(response.header("X-Report-Source") == "raw")
            let json = try #require(response.json)
            #expect(Set((json["rows"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? Int }) == [701, 702])
            #expect((json["totals"] as? [String: Any])?["responses"] as? Int == 7)
            let previous = (json["previousPeriod"] as? [String: Any])?["totals"] as? [String: Any]
            #expect(previous?["responses"] as? Int == 60, "\(String(describing: previous))")
            #expect((previous?["distribution"] as? [String: Any])?["1"] as? Int == 12)
        }
    }

    @Test func onlyIANAZoneNamesAreAccepted() async throws {
        try await withGateway { app in
            let key = try await reporter(app).key
            for zone in ["posixrules", "localtime", "Factory", "posix/Europe/Paris", "right/UTC"] {
                let response = try await httpRequest(port: app.port, "GET", "/v1/reports/csat?tz=\(zone)", headers: [("X-API-Key", key)])
                #expect(response.status == 400, "\(zone): \(response.text)")
                #expect((response.json?["detail"] as? String)?.contains("IANA time zone name") == true, "\(response.text)")
            }
            for zone in ["UTC", "Europe/Paris", "US/Eastern", "Etc/GMT%2B5"] {
                #expect(try await httpRequest(port: app.port, "GET", "/v1/reports/csat?tz=\(zone)", headers: [("X-API-Key", key)]).status == 200)
            }
        }
    }
}

extension Sequence where Element: Sendable {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }

    func serialMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] { try await asyncMap(transform) }

    func concurrentMap<T: Sendable>(_ transform: @escaping @Sendable (Element) async throws -> T) async throws -> [T] {
        try await withThrowingTaskGroup(of: (Int, T).self) { group in
            for (index, element) in enumerated() { group.addTask { (index, try await transform(element)) } }
            var results: [(Int, T)] = []
            for try await result in group { results.append(result) }
            return results.sorted { $0.0 < $1.0 }.map(\.1)
        }
    }
}

/// The report cache is held to a byte bound, keyed on what a report means (not the order its parameters came in), and
/// lets answers go once they may no longer be served; its bytes are a metric.
@Suite struct ReportCacheTests {
    static func gauge(_ app: GatewayApplication, _ name: String) async throws -> Double {
        let text = try await httpRequest(port: app.port, "GET", "/metrics").text
        let line = text.split(separator: "\n").first { $0.hasPrefix(name + " ") }
        return line.flatMap { Double($0.split(separator: " ").last ?? "") } ?? -1
    }

    @Test func cachedReportsStayWithinTheirBytesAndShuffledParametersAreOneEntry() async throws {
        try await withGateway(configure: { $0.reportCacheSeconds = 2; $0.reportCacheMaxMegabytes = 1 }) { app in
            let reporter = try await reporter(app)
            let store = CSATStore(database: app.database)
            for agent in 501...527 {
                for month in 1...12 {
                    let at = ISOTimestamp.parse("2026-\(String(format: "%02d", month))-15T12:00:00Z")!
                    try await store.record(RatingRecord(ticketId: agent * 100 + month, messageId: 1, score: 1 + month % 5, comment: nil,
                                                        agentId: agent, teamId: 11, channelType: "SENDBIRD", priority: .medium,
                                                        customerSendbirdId: "c", ratedAt: at, source: .webhook))
                }
            }
            let agents = (501...527).map { "agentId=\($0)" }
            for round in 0..<3 {
                var generator = Self.seeded(round)
                let query = (["from=2026-01-01", "to=2026-12-31", "bucket=day", "groupBy=agent"] + agents).shuffled(using: &generator)
                let response = try await reporter.get("?" + query.joined(separator: "&"))
                #expect(response.status == 200, "\(response.text.prefix(300))")
            }
            #expect(try await Self.gauge(app, "report_cache_entries") == 1)
            // Many different year-long daily reports: far more than a megabyte of answers, never more than that kept.
            var served = 0
            for day in 1...28 {
                let response = try await reporter.get("?from=2026-01-\(String(format: "%02d", day))&to=2026-12-31&bucket=day&groupBy=agent&"
                                                      + agents.joined(separator: "&"))
                #expect(response.status == 200, "\(response.text.prefix(300))")
                served += response.body.count
                #expect(try await Self.gauge(app, "report_cache_bytes") <= 1_048_576)
            }
            #expect(served > 1_048_576 * 3 / 2, "the answers alone would not have passed the bound (\(served) bytes)")
            // Two seconds later none may be served any more: none is kept.
            try await Task.sleep(for: .milliseconds(2_200))
            #expect(try await Self.gauge(app, "report_cache_entries") == 0)
            #expect(try await Self.gauge(app, "report_cache_bytes") == 0)
        }
    }

    static func seeded(_ seed: Int) -> SeededGenerator { SeededGenerator(state: UInt64(seed + 1) &* 0x9E37_79B9_7F4A_7C15) }

    struct SeededGenerator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            return z ^ (z >> 27)
        }
    }
}

/// The responses listing is admitted like a raw report, by one identity per key for the API and the page: one key's
/// listings beyond its share are refused at once while another key is still served; its filtered no-match case uses
/// an index instead of walking every rating of the range.
@Suite struct ResponsesAdmissionTests {
    @Test func oneKeysListingsAreAdmittedAndAnotherKeyIsStillServed() async throws {
        try await withGateway(configure: {
            $0.reportRawConcurrency = 2
            $0.reportRawConcurrencyPerKey = 1
            // The reads wait on a held lock for as long as the steps take on a loaded machine.
            $0.dbStatementTimeoutMilliseconds = 60_000
        }) { app in
            let first = try await reporter(app)
            let second = try await reporter(app)
            let store = CSATStore(database: app.database)
            let now = Date().timeIntervalSince1970
            for ticket in 1...200 {
                try await store.record(RatingRecord(ticketId: ticket, messageId: 1, score: 1 + ticket % 5, comment: nil, agentId: 501, teamId: 11,
                                                    channelType: "SENDBIRD", priority: .medium, customerSendbirdId: "c",
                                                    ratedAt: now - Double(ticket) * 60, source: .webhook))
            }
            // A listing that waits on a table lock holds the first key's one admission while it waits.
            let lock = try TableLock(app)
            try await lock.wait(waiters: 0)
            async let waiting = first.get("/responses?agentId=999")
            let queued = try await lock.wait(waiters: 1)
            // The same key again, through the API: refused at once (it already runs its one listing).
            let again = try await first.get("/responses?agentId=999")
            #expect(again.status == 429, "\(again.status) \(again.text.prefix(200))")
            // Another key is admitted (it waits for the lock like the first, then is answered).
            async let other = second.get("/responses?agentId=999")
            try await lock.wait(waiters: queued + 1)
            try await lock.release()
            #expect(try await waiting.status == 200)
            #expect(try await other.status == 200)
            // The no-match listing of one agent reads that agent's index, not the whole range.
            let plan = try await app.database.query("""
                EXPLAIN SELECT r.id FROM csat_ratings r WHERE r.rated_at >= now() - interval '30 days' AND coalesce(r.agent_id, 0) = ANY('{999}'::bigint[])
                 ORDER BY r.rated_at DESC, r.id DESC LIMIT 51
                """).map { try $0.decode(0, as: String.self) }.joined(separator: "\n")
            #expect(plan.contains("csat_ratings_agent_rated_idx"), "\(plan)")
        }
    }
}

/// Raw reports are admitted by one identity per key, whether the key asks through the report page or the API, and
/// one key's report never takes every connection the others could use.
@Suite struct RawAdmissionFairnessTests {
    @Test func thePageAndTheAPIShareAKeysAdmissionAndAnotherKeyIsStillServed() async throws {
        try await withGateway(configure: {
            $0.reportRawConcurrency = 2
            $0.reportRawConcurrencyPerKey = 1
            // The reads wait on a held lock for as long as the steps take on a loaded machine.
            $0.dbStatementTimeoutMilliseconds = 60_000
        }) { app in
            let lead = try await reporter(app)
            let other = try await reporter(app)
            let page = ReportPageTests()
            let session = try #require(page.cookie(try await page.signIn(app, key: lead.key)))
            let lock = try TableLock(app)
            try await lock.wait(waiters: 0)
            // The lead's page computes from raw ratings (a zone without rollups) and waits on the lock.
            async let shown = page.page(app, "/reports?tz=Europe/Paris", cookie: session)
            let queued = try await lock.wait(waiters: 1)
            // The same key through the API: its one raw report is already running.
            let again = try await lead.get("?tz=Europe/Paris")
            #expect(again.status == 429, "\(again.status) \(again.text.prefix(200))")
            // Another key still gets a connection (the first report took one, not both).
            async let served = other.get("?tz=Europe/Paris")
            try await lock.wait(waiters: queued + 1)
            try await lock.release()
            #expect(try await shown.status == 200)
            #expect(try await served.status == 200)
        }
    }
}

/// Holds a table (csat_ratings unless told) locked on a connection of its own until released: whatever reads it
/// meanwhile waits, holding its admission and its connection. Waits are observed in `pg_locks`, not guessed with
/// sleeps, so a loaded machine cannot reorder them.
final class TableLock: Sendable {
    private let table: String
    private let released = Atomic<Bool>(false)
    private let watcher: Database
    /// Its own connection, not one of the gateway's pool: the tests count the gateway's connections.
    private let locker: Database
    private var holder: Task<Void, any Error> { task.withLock { $0! } }
    private let task = Mutex<Task<Void, any Error>?>(nil)

    init(_ app: GatewayApplication, table: String = "csat_ratings") throws {
        self.table = table
        let url = try #require(app.config.databaseURL)
        watcher = Database.forTests(url, poolSize: 1)
        locker = Database.forTests(url, poolSize: 1)
        task.withLock { $0 = Task { [self] in
            try await locker.transaction { tx in
                try tx.query("LOCK TABLE \(self.table) IN ACCESS EXCLUSIVE MODE")
                let deadline = Date().addingTimeInterval(60)
                while !self.released.load(ordering: .acquiring), Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
            }
        } }
    }

    /// Waits until the lock is held and at least `waiters` statements queue behind it, then until no more arrive for
    /// half a second (a report may read on two connections); returns how many wait.
    @discardableResult
    func wait(waiters: Int) async throws -> Int {
        let deadline = ContinuousClock.now + .seconds(30)
        var seen = -1
        var steadySince = ContinuousClock.now
        while ContinuousClock.now < deadline {
            let rows = try await watcher.query("""
                SELECT count(*) FILTER (WHERE granted), count(*) FILTER (WHERE NOT granted)
                  FROM pg_locks WHERE relation = '\(table)'::regclass
                """)
            let (held, queued) = try rows.first.map { (try $0.decode(0, as: Int.self), try $0.decode(1, as: Int.self)) } ?? (0, 0)
            if queued != seen { (seen, steadySince) = (queued, ContinuousClock.now) }
            if held >= 1, queued >= waiters, ContinuousClock.now - steadySince >= .milliseconds(500) { return queued }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("\(waiters) statements never queued behind the lock")
        return seen
    }

    func release() async throws {
        released.store(true, ordering: .releasing)
        defer { watcher.shutdown(); locker.shutdown() }
        try await holder.value
    }
}

/// A key revoked through one instance stops working on every instance at once (PostgreSQL LISTEN/NOTIFY), where
/// each had it cached for 30 s before.
@Suite struct RevocationTests {
    @Test func aRevokedKeyIsRefusedByEveryInstanceAtOnce() async throws {
        try await withGateway(configure: { $0.reportCacheSeconds = 15 }) { app in
            var config = TestGateway.configuration(databaseURL: try #require(app.config.databaseURL))
            config.reportCacheSeconds = 15
            try await TestGateway.running(config) { second in
                let created = try await APIKeyStore(database: app.database).create(name: "soon revoked", scopes: ["reports"])
                let onFirst = Reporter(port: app.port, key: created.key)
                let onSecond = Reporter(port: second.port, key: created.key)
                // Both instances know the key now (and hold the same report in their caches).
                for reporter in [onFirst, onSecond] {
                    #expect(try await reporter.get("").status == 200)
                    #expect(try await reporter.get("").status == 200)
                }
                #expect(try await APIKeyStore(database: app.database).revoke(id: created.id))
                try await Task.sleep(for: .milliseconds(500))
                for reporter in [onFirst, onSecond] {
                    let refused = try await reporter.get("")
                    #expect(refused.status == 401, "port \(reporter.port): \(refused.status)")
                }
            }
        }
    }
}

extension ReportLimitTests {
    /// Reports from rollups hold at most REPORT_CONCURRENCY of the pool's connections: with one of two held by a report
    /// that cannot finish, a second report waits its turn (and gives up at the acquire timeout) while a customer's
    /// read takes the other connection. Without the cap the second report takes it and the customer waits instead.
    @Test func aReportWaitsForItsShareOfThePoolWhileCustomersAreServed() async throws {
        try await withGateway(configure: {
            $0.reportTimeZones = ["UTC"]
            $0.dbPoolSize = 2
            $0.reportConcurrency = 1
            $0.dbAcquireTimeoutMilliseconds = 1500
            // Longer than the test holds the lock, short enough to end a report that never gets it.
            $0.dbStatementTimeoutMilliseconds = 10_000
            $0.reportCacheSeconds = 0
        }) { app in
            let store = CSATStore(database: app.database)
            for month in 1...6 {
                let at = ISOTimestamp.parse("2026-0\(month)-15T12:00:00Z")!
                try await store.record(RatingRecord(ticketId: 7000 + month, messageId: 1, score: 1 + month % 5, comment: nil,
                                                    agentId: 501, teamId: 11, channelType: "SENDBIRD", priority: .medium,
                                                    customerSendbirdId: "c", ratedAt: at, source: .webhook))
            }
            let first = try await reporter(app), second = try await reporter(app)
            let customer = try await Customer.signIn(app)
            #expect(try await first.get("?from=2026-01-01&to=2026-06-30&tz=UTC").status == 200)

            let lock = try TableLock(app, table: "csat_blocks")
            try await lock.wait(waiters: 0)
            async let held = first.get("?from=2026-01-01&to=2026-03-31&tz=UTC")
            // The first report waits on the lock, holding its connection.
            try await lock.wait(waiters: 1)
            async let refused = second.get("?from=2026-04-01&to=2026-06-30&tz=UTC")
            let read = try await customer.send("GET", "/v1/tickets/open-count")
            #expect(read.status == 200, "the customer waited for a report's connection: \(read.text)")
            let waited = try await refused
            #expect(waited.status == 503, "the second report did not wait for its share: \(waited.status) \(waited.text.prefix(300))")
            #expect(waited.header("Retry-After") != nil)
            try await lock.release()
            let answered = try await held
            #expect(answered.status == 200, "\(answered.text.prefix(300))")
            #expect(try await second.get("?from=2026-04-01&to=2026-06-30&tz=UTC").status == 200)
        }
    }
}
