import Domain
import Foundation
import Reports
import Store
import Testing
import TestSupport

/// Rating rules kept in SQL (one answer per CSAT request, its replacement moving every rollup) and the report reads
/// (rollup blocks equal to the raw ratings, keyset paging, comments, team leads' agents).
@Suite struct RatingAndReportStoreTests {
    /// Noon UTC of 2026-11-20 and the days around it.
    static let noon = 1_795_176_000.0

    static func rating(_ ticket: Int, score: Int?, comment: String? = nil, agent: Int = 501, team: Int = 11, channel: String = "SENDBIRD",
                       at time: Double = noon, source: RatingSource = .webhook) -> RatingRecord {
        RatingRecord(ticketId: ticket, messageId: 1, score: score, comment: comment, agentId: agent, teamId: team, channelType: channel,
                     priority: .medium, customerSendbirdId: "c", ratedAt: time, source: source)
    }

    /// The UTC rollup of one day, agent and team: responses and the count of each score.
    static func dayBlock(_ db: Database, agent: Int = 501, team: Int = 11) async throws -> [Int] {
        let rows = try await db.query("""
            SELECT responses, s1, s2, s3, s4, s5 FROM csat_blocks
             WHERE level = 0 AND first_day = date '2026-11-20' AND agent_id = $1 AND team_id = $2
               AND zone_id = (SELECT id FROM report_zones WHERE zone = 'UTC')
            """, [agent, team])
        guard let row = rows.first else { return [] }
        return try (0..<6).map { try row.decode($0, as: Int.self) }
    }

    @Test func aLaterAnswerReplacesTheRatingInItsRowAndEveryRollup() async throws {
        try await withStore { db in
            let store = CSATStore(database: db)
            _ = try await store.ensureZones(["UTC"])
            #expect(try await store.record(Self.rating(1, score: 2)))
            #expect(try await Self.dayBlock(db) == [1, 0, 1, 0, 0, 0])
            // The same answer again, and an older one arriving late: nothing changes.
            #expect(try await !store.record(Self.rating(1, score: 2)))
            #expect(try await !store.record(Self.rating(1, score: 4, at: Self.noon - 600)))
            // A later, different answer replaces it: still one response, now a 5.
            #expect(try await store.record(Self.rating(1, score: 5, comment: "better", at: Self.noon + 600)))
            #expect(try await Self.dayBlock(db) == [1, 0, 0, 0, 0, 1])
            // A decline never replaces a score.
            #expect(try await !store.record(Self.rating(1, score: nil, at: Self.noon + 1200)))
            #expect(try await store.storedAnswer(ticketId: 1, messageId: 1) == .some(5))
            let count: Int = try await db.query("SELECT count(*) FROM csat_ratings")[0].decode(0)
            #expect(count == 1)
        }
    }

    /// Unanswered CSAT requests of the window come a slice at a time in the order they were made, each once a round
    /// (requests made at the same instant split between slices included), and the round starts again after the newest.
    @Test func unansweredRequestsComeRoundASliceAtATime() async throws {
        try await withStore { db in
            let store = CSATStore(database: db)
            let now = Date().timeIntervalSince1970
            let day = 86_400.0
            func request(_ ticket: Int, message: Int = 1, daysAgo: Double) async throws {
                _ = try await store.recordRequest(CSATRequestRecord(ticketId: ticket, messageId: message, agentId: 501, teamId: 11,
                                                                    channelType: "SENDBIRD", priority: .medium, requestedAt: now - daysAgo * day))
            }
            try await request(1, daysAgo: 40)                               // outside the 30 days
            for ticket in 2...8 { try await request(ticket, daysAgo: 10) }  // seven at one instant
            try await request(9, daysAgo: 5)
            _ = try await store.record(Self.rating(9, score: 4, at: now - 4 * day))    // answered
            try await request(10, daysAgo: 3)
            _ = try await store.record(Self.rating(10, score: 4, at: now - 6 * day))   // rated before it was asked: no answer
            try await request(2, message: 2, daysAgo: 1)                    // the ticket's second request
            func round(limit: Int) async throws -> [[Int]] {
                var slices: [[Int]] = []
                var cursor: String? = nil
                repeat {
                    let slice = try await store.ticketsAwaitingAnswers(maxAgeDays: 30, after: cursor, limit: limit)
                    slices.append(slice.tickets)
                    cursor = slice.next
                } while cursor != nil && slices.count < 10
                return slices
            }
            #expect(try await round(limit: 4) == [[2, 3, 4, 5], [6, 7, 8, 10], [2]])
            #expect(try await round(limit: 3) == [[2, 3, 4], [5, 6, 7], [8, 10, 2], []])
            #expect(try await round(limit: 100) == [[2, 3, 4, 5, 6, 7, 8, 10]])
            _ = try await store.record(Self.rating(7, score: 5, at: now))
            #expect(try await round(limit: 4) == [[2, 3, 4, 5], [6, 8, 10, 2], []])
        }
    }

    /// The UTC week rollup (level 10, the week of Monday 2026-11-16) of an agent and team in both tables: responses
    /// and the count of each score, per table.
    static func weekBlocks(_ db: Database, agent: Int = 501, team: Int = 11) async throws -> [[Int]] {
        var tables: [[Int]] = []
        for table in ["csat_blocks", "csat_detail_blocks"] {
            let rows = try await db.query("""
                SELECT sum(responses)::bigint, sum(s1)::bigint, sum(s2)::bigint, sum(s3)::bigint, sum(s4)::bigint, sum(s5)::bigint
                  FROM \(table) WHERE level = \(RollupBlocks.weekLevel) AND first_day = date '2026-11-16' AND agent_id = $1
                   AND team_id = $2 AND zone_id = (SELECT id FROM report_zones WHERE zone = 'UTC')
                """, [agent, team])
            tables.append(try (0..<6).map { try rows[0].decodeIfPresent($0, as: Int.self) ?? 0 })
        }
        return tables
    }

    /// A zone added while ratings change: a writer that queued for the zone lock while the zone was being registered
    /// changes an older rating before the backfill starts. Counted live and again by the backfill, it came out twice
    /// (a replaced score left at -1 in the new zone's rollups). The build, and a zone's drop, waiting behind a writer
    /// that does not end, give way to the writers queued behind them instead of holding them as long.
    @Test func aRatingChangedWhileAZoneIsAddedCountsOnce() async throws {
        try await withStoreAndControl { db, control in
            let store = CSATStore(database: db)
            _ = try await store.ensureZones(["UTC"])
            #expect(try await store.record(Self.rating(1, score: 3, at: Self.noon)))
            let waiting = {
                try await control.query("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND \(lockInThisDatabase)")[0]
                    .decode(0, as: Int.self)
            }
            // The build's request comes and goes (it gives way every second): the count is seen once.
            func untilWaiting(_ count: Int) async throws {
                try #require(try await eventually(within: 20, every: .milliseconds(5)) { try await waiting() == count })
            }
            // A writer in flight (the zone lock held shared) that waits for the test's go, `operation` asking for the
            // lock exclusively, and a writer arriving meanwhile: it queues behind the operation's request, which gives
            // way within a second, so it is not held as long as the one in flight (here past the statement timeout).
            func withAWriterInFlight<T: Sendable>(score: Int, after seconds: Double, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
                try await control.query("SELECT pg_advisory_lock(7)")
                let inFlight = Task {
                    try await db.transaction { tx in
                        // Held until the test's go, which a loaded machine can take longer than a statement may to reach.
                        try tx.withoutStatementTimeout()
                        try tx.query("SELECT pg_advisory_xact_lock_shared($1)", [CSATStore.zoneLock])
                        try tx.query("SELECT pg_advisory_xact_lock_shared(7)")
                    }
                }
                try await untilWaiting(1)
                let running = Task { try await operation() }
                try await untilWaiting(2)
                let replaced = try await withDeadline(.seconds(8)) {
                    try await store.record(Self.rating(1, score: score, at: Self.noon + seconds))
                }
                #expect(replaced == true)
                try await control.query("SELECT pg_advisory_unlock(7)")
                try await inFlight.value
                return try await running.value
            }
            #expect(try await withAWriterInFlight(score: 5, after: 600) { try await store.ensureZones(["Asia/Kathmandu"]) } == ["Asia/Kathmandu"])
            #expect(try await store.rollupDrift().isEmpty)
            #expect(try await withAWriterInFlight(score: 2, after: 1_200) { try await store.dropZone("Asia/Kathmandu") })
            #expect(try await store.rollupDrift().isEmpty)
        }
    }

    /// A zone is built in steps, and CSAT writes go on between them: new ratings and requests, scores changed on
    /// ratings the build has counted and on ones it has not reached, ticket-level answers absorbed by their message,
    /// ratings moved to Desk's agent. Each counts once, in the zone's rollups as in the others. A writer that does not
    /// know the steps (the release before) is refused while the build is under way, except the old backfill, which
    /// holds the zone lock exclusively and recounts the whole zone; a build left standing is abandoned by it.
    @Test func aZoneBuiltInStepsCountsTheWritesBetweenItsStepsOnce() async throws {
        try await withStore { db in
            let store = CSATStore(database: db)
            _ = try await store.ensureZones(["UTC"])
            let hour = 3_600.0
            for ticket in 1...40 {
                let agent = 500 + ticket % 3
                try await store.recordRequest(ticketId: ticket, messageId: 1, agentId: agent, teamId: 11, channelType: "SENDBIRD",
                                              priority: .medium, requestedAt: Self.noon + Double(ticket) * hour - 600)
                #expect(try await store.record(Self.rating(ticket, score: ticket % 5 + 1, agent: agent, at: Self.noon + Double(ticket) * hour)))
            }
            for ticket in 41...45 {
                let level = RatingRecord(ticketId: ticket, messageId: 0, score: 2, comment: nil, agentId: 501, teamId: 11, channelType: "SENDBIRD",
                                         priority: .medium, customerSendbirdId: "c", ratedAt: Self.noon + Double(ticket) * hour, source: .sync,
                                         inferred: true)
                #expect(try await store.recordTicketLevel(level, closedAt: Self.noon))
            }
            for ticket in 46...50 {
                let cached = RatingRecord(ticketId: ticket, messageId: 1, score: 4, comment: nil, agentId: 999, teamId: 99, channelType: "SENDBIRD",
                                          priority: .medium, customerSendbirdId: "c", ratedAt: Self.noon + Double(ticket) * hour, source: .gateway,
                                          attributionInferred: true)
                #expect(try await store.record(cached))
            }
            let zone = "Asia/Kathmandu"
            let zoneId = "(SELECT id FROM report_zones WHERE zone = '\(zone)')"
            @Sendable func oldWriter(_ zoneId: String) -> String {
                """
                INSERT INTO csat_blocks AS d (zone_id, level, first_day, agent_id, team_id, responses)
                SELECT \(zoneId), 0, date '2026-11-20', 501, 11, 0
                ON CONFLICT (zone_id, level, first_day, agent_id, team_id) DO UPDATE SET responses = d.responses + 0
                """
            }
            var steps = 0, changedAhead = 0, changedBehind = 0, abandoned = false
            let built = try await store.ensureZones([zone], rowsPerStep: 3) { progress in
                steps += 1
                guard let until = progress.countedUntil else { return }
                #expect(try await !store.zones().contains(zone))
                let k = steps
                // A score changed on a rating dated after the time the build has counted up to, and on one before it.
                for (query, ahead) in [("rated_at >= to_timestamp($1) ORDER BY rated_at", true), ("rated_at < to_timestamp($1) ORDER BY rated_at DESC", false)] {
                    let rows = try await db.query("SELECT ticket_id, agent_id FROM csat_ratings WHERE message_id = 1 AND \(query) LIMIT 1", [until])
                    guard let row = rows.first else { continue }
                    let ticket: Int = try row.decode(0)
                    guard ticket <= 40 else { continue }
                    let agent: Int = try row.decodeIfPresent(1) ?? 0
                    if try await store.record(Self.rating(ticket, score: (ticket + k) % 5 + 1, agent: agent, at: Self.noon + 5 * 86_400 + Double(k) * 60)) {
                        if ahead { changedAhead += 1 } else { changedBehind += 1 }
                    }
                }
                // New ratings and requests; a ticket-level answer absorbed by its message; a rating moved to Desk's agent.
                #expect(try await store.record(Self.rating(100 + k, score: k % 5 + 1, at: Self.noon + Double(k) * 7_000)))
                #expect(try await store.recordRequest(ticketId: 200 + k, messageId: 1, agentId: 502, teamId: 12, channelType: "SENDBIRD",
                                                      priority: .medium, requestedAt: Self.noon + Double(k) * 5_000))
                if k <= 5 {
                    #expect(try await store.record(Self.rating(40 + k, score: 5, agent: 500, at: Self.noon + Double(40 + k) * hour + 60)))
                    #expect(try await store.recordRequest(ticketId: 45 + k, messageId: 1, agentId: 503, teamId: 13, channelType: "SENDBIRD",
                                                          priority: .medium, requestedAt: Self.noon))
                }
                if k == 1 {
                    await #expect(throws: DomainError.self) { _ = try await db.query(oldWriter(zoneId)) }
                    _ = try await db.query(oldWriter("(SELECT id FROM report_zones WHERE zone = 'UTC')"))
                    try await db.transaction { tx in
                        try tx.query("SELECT pg_advisory_xact_lock($1)", [CSATStore.zoneLock])
                        try tx.query(oldWriter(zoneId))
                    }
                }
                if k == 3 {
                    // A build no step was taken of for 30 s (its instance gone) is abandoned by such a write instead of
                    // holding it off for good; the build notices and counts the zone again from the start.
                    _ = try await db.query("UPDATE report_zones SET stepped_at = now() - interval '1 minute' WHERE zone = $1", [zone])
                    _ = try await db.query(oldWriter(zoneId))
                    abandoned = try await db.query("SELECT counted_until IS NULL FROM report_zones WHERE zone = $1", [zone])[0].decode(0)
                }
            }
            #expect(built == [zone])
            #expect(abandoned)
            #expect(steps >= 10)
            #expect(changedAhead >= 5 && changedBehind >= 5)
            #expect(try await store.zones().contains(zone))
            #expect(try await store.rollupDrift().isEmpty)
            #expect(try await Self.teamBlocksDiffering(db) == 0)
            let moved: Int = try await db.query("SELECT count(*) FROM csat_ratings WHERE agent_id = 503")[0].decode(0)
            let absorbed: Int = try await db.query("SELECT count(*) FROM csat_ratings WHERE message_id = 0")[0].decode(0)
            #expect(moved == 5 && absorbed == 0)
            // The zone's figures are the UTC rollups' ones, over the same ratings.
            let totals = """
                SELECT sum(requests)::bigint, sum(responses)::bigint, sum(s1)::bigint, sum(s5)::bigint FROM csat_blocks
                 WHERE level = 0 AND zone_id = (SELECT id FROM report_zones WHERE zone = $1)
                """
            let utc = try await db.query(totals, ["UTC"])[0], kathmandu = try await db.query(totals, [zone])[0]
            for column in 0..<4 { #expect(try utc.decode(column, as: Int.self) == kathmandu.decode(column, as: Int.self)) }
        }
    }

    /// A VACUUM of the raw tables (SHARE UPDATE EXCLUSIVE, held here by a transaction as a long VACUUM holds it) holds
    /// neither a zone's build nor, through the zone lock a waiting step would hold, every CSAT writer behind it.
    @Test func aZoneIsBuiltWhileTheRatingsAreVacuumed() async throws {
        try await withStoreAndControl { db, control in
            let store = CSATStore(database: db)
            _ = try await store.ensureZones(["UTC"])
            for ticket in 1...20 { #expect(try await store.record(Self.rating(ticket, score: ticket % 5 + 1, at: Self.noon - Double(ticket) * 3_600))) }
            try await control.query("SELECT pg_advisory_lock(7)")
            let vacuum = Task {
                try await db.transaction { tx in
                    try tx.withoutStatementTimeout()
                    try tx.query("LOCK TABLE csat_ratings, csat_requests IN SHARE UPDATE EXCLUSIVE MODE")
                    try tx.query("SELECT pg_advisory_xact_lock_shared(7)")
                }
            }
            let held = "SELECT 1 FROM pg_locks WHERE locktype = 'relation' AND mode = 'ShareUpdateExclusiveLock' AND granted AND \(lockInThisDatabase)"
            try #require(try await eventually(within: 20) { try await !control.query(held).isEmpty })
            let built = try await withDeadline(.seconds(20)) { try await store.ensureZones(["Asia/Kolkata"], rowsPerStep: 5) { _ in } }
            let written = try await withDeadline(.seconds(20)) { try await store.record(Self.rating(21, score: 5)) }
            try await control.query("SELECT pg_advisory_unlock(7)")
            try await vacuum.value
            #expect(built == ["Asia/Kolkata"])
            #expect(written == true)
            #expect(try await store.rollupDrift().isEmpty)
        }
    }

    @Test func weekBlocksFollowTheirDaysWhoeverWritesThem() async throws {
        try await withStore { db in
            let store = CSATStore(database: db)
            _ = try await store.ensureZones(["UTC"])
            // The gateway's writer: Monday, Friday and Sunday of one week, the Monday after in the next; a replacement.
            for (ticket, days) in [(1, -4.0), (2, 0), (3, 2), (4, 3)] {
                #expect(try await store.record(Self.rating(ticket, score: 3, at: Self.noon + days * 86_400)))
            }
            #expect(try await store.record(Self.rating(2, score: 5, at: Self.noon + 600)))
            #expect(try await Self.weekBlocks(db) == [[3, 0, 0, 2, 0, 1], [3, 0, 0, 2, 0, 1]])
            #expect(try await store.rollupDrift().isEmpty)
            // A writer that keeps only the aligned levels (the release before week blocks, during a rolling upgrade):
            // the trigger adds its day rows' changes to their weeks.
            for table in ["csat_blocks", "csat_detail_blocks"] {
                let detail = table == "csat_detail_blocks"
                _ = try await db.query("""
                    INSERT INTO \(table) AS d (zone_id, level, first_day, \(detail ? "channel_type, priority, " : "")agent_id, team_id, responses, s4)
                    SELECT id, 0, date '2026-11-18', \(detail ? "'SENDBIRD', 'MEDIUM', " : "")501, 11, 1, 1 FROM report_zones WHERE zone = 'UTC'
                    ON CONFLICT (zone_id, level, first_day, \(detail ? "channel_type, priority, " : "")agent_id, team_id)
                    DO UPDATE SET responses = d.responses + 1, s4 = d.s4 + 1
                    """)
                _ = try await db.query("""
                    UPDATE \(table) SET responses = responses + 1, s1 = s1 + 1
                     WHERE level = 0 AND first_day = date '2026-11-20' AND agent_id = 501 AND team_id = 11
                    """)
            }
            #expect(try await Self.weekBlocks(db) == [[5, 1, 0, 2, 1, 1], [5, 1, 0, 2, 1, 1]])
        }
    }

    /// Team block rows (every level) whose counts differ from the agent × team rows summed per team; rows counting
    /// nothing are left out on both sides (a row emptied by a move stays, at zero).
    static func teamBlocksDiffering(_ db: Database) async throws -> Int {
        let counts = "sum(requests)::bigint, sum(responses)::bigint, sum(s1)::bigint, sum(s2)::bigint, sum(s3)::bigint, sum(s4)::bigint, sum(s5)::bigint"
        let nonZero = "HAVING sum(requests) <> 0 OR sum(responses) <> 0"
        let teams = "SELECT zone_id, level, first_day, team_id, \(counts) FROM csat_team_blocks GROUP BY 1, 2, 3, 4 \(nonZero)"
        let summed = "SELECT zone_id, level, first_day, team_id, \(counts) FROM csat_blocks GROUP BY 1, 2, 3, 4 \(nonZero)"
        return try await db.query("""
            SELECT count(*) FROM ((\(teams) EXCEPT \(summed)) UNION ALL (\(summed) EXCEPT \(teams))) d
            """)[0].decode(0)
    }

    @Test func teamBlocksFollowTheirAgentsWhoeverWritesThem() async throws {
        try await withStore { db in
            let store = CSATStore(database: db)
            _ = try await store.ensureZones(["UTC", "Asia/Kolkata"])
            // The gateway's writer: agents of two teams, a replacement, and an answer moved from the cache's team to Desk's.
            for ticket in 1...12 {
                #expect(try await store.record(Self.rating(ticket, score: ticket % 5 + 1, agent: 500 + ticket % 3, team: 11 + ticket % 2,
                                                           at: Self.noon - Double(ticket) * 40_000)))
            }
            #expect(try await store.record(Self.rating(3, score: 1, agent: 500, team: 12, at: Self.noon + 600)))
            let cached = RatingRecord(ticketId: 13, messageId: 1, score: 4, comment: nil, agentId: 999, teamId: 99, channelType: "SENDBIRD",
                                      priority: .medium, customerSendbirdId: "c", ratedAt: Self.noon, source: .gateway, attributionInferred: true)
            #expect(try await store.record(cached))
            #expect(try await store.record(Self.rating(13, score: 4, agent: 502, team: 12)))
            let teamRows: Int = try await db.query("SELECT count(*) FROM csat_team_blocks WHERE responses <> 0")[0].decode(0)
            #expect(teamRows > 0)
            #expect(try await Self.teamBlocksDiffering(db) == 0)
            #expect(try await store.rollupDrift().isEmpty)
            // A writer that keeps no team blocks (the release before them, during a rolling upgrade): the trigger adds
            // each change of an agent × team row, its week's included, to the team's row.
            _ = try await db.query("""
                INSERT INTO csat_blocks AS d (zone_id, level, first_day, agent_id, team_id, responses, s4)
                SELECT id, 0, date '2026-11-18', 501, 11, 1, 1 FROM report_zones WHERE zone = 'UTC'
                ON CONFLICT (zone_id, level, first_day, agent_id, team_id) DO UPDATE SET responses = d.responses + 1, s4 = d.s4 + 1
                """)
            _ = try await db.query("UPDATE csat_blocks SET responses = responses + 2, s2 = s2 + 2 WHERE team_id = 12 AND level = 3")
            _ = try await db.query("DELETE FROM csat_blocks WHERE team_id = 11 AND level = 9")
            #expect(try await Self.teamBlocksDiffering(db) == 0)
            let weekOfTheInsert: Int = try await db.query("""
                SELECT responses FROM csat_team_blocks WHERE level = \(RollupBlocks.weekLevel) AND first_day = date '2026-11-16' AND team_id = 11
                   AND zone_id = (SELECT id FROM report_zones WHERE zone = 'UTC')
                """)[0].decode(0)
            #expect(weekOfTheInsert >= 1)
            // Its registration of a zone empties the zone's rows one by one; its drop deletes the zone (the cascade).
            _ = try await db.query("DELETE FROM csat_blocks WHERE zone_id = (SELECT id FROM report_zones WHERE zone = 'Asia/Kolkata')")
            #expect(try await Self.teamBlocksDiffering(db) == 0)
            _ = try await db.query("DELETE FROM report_zones WHERE zone = 'Asia/Kolkata'")
            // The gateway's own drop.
            #expect(try await store.dropZone("UTC"))
            let left: Int = try await db.query("SELECT count(*) FROM csat_team_blocks")[0].decode(0)
            #expect(left == 0)
        }
    }

    @Test func rollupBlocksEqualTheRawRatingsForAnyRangeAndBucket() async throws {
        try await withStore { db in
            let store = CSATStore(database: db)
            _ = try await store.ensureZones(["UTC"])
            var generator = SystemRandomNumberGenerator()
            for ticket in 1...300 {
                let day = Double(Int.random(in: 0..<120, using: &generator)) * 86_400
                let rating = Self.rating(ticket, score: Int.random(in: 0...5, using: &generator).nonZero, agent: 500 + ticket % 4,
                                         team: 10 + ticket % 3, channel: ticket % 2 == 0 ? "SENDBIRD_IOS" : "SENDBIRD", at: Self.noon - day)
                guard ticket % 11 == 0 else {
                    _ = try await store.record(rating)
                    continue
                }
                // Some on the cache's agent and team, moved to other ones by Desk's request (the rows they leave may
                // come to zero).
                _ = try await store.record(RatingRecord(ticketId: ticket, messageId: 1, score: rating.score, comment: nil, agentId: 504,
                                                        teamId: 14, channelType: "SENDBIRD_WEB", priority: .medium, customerSendbirdId: "c",
                                                        ratedAt: rating.ratedAt, source: .webhook, attributionInferred: true))
                #expect(try await store.recordRequest(ticketId: ticket, messageId: 1, agentId: rating.agentId, teamId: rating.teamId,
                                                      channelType: "SENDBIRD_WEB", priority: .medium, requestedAt: rating.ratedAt - 60))
            }
            let reports = ReportStore(database: db)
            for query in [[("from", "2026-08-01"), ("to", "2026-11-20")], [("from", "2026-09-03"), ("to", "2026-10-17"), ("bucket", "week")],
                          [("from", "2026-10-01"), ("to", "2026-11-20"), ("groupBy", "team"), ("bucket", "month")],
                          [("from", "2026-10-10"), ("to", "2026-11-20"), ("channelType", "SENDBIRD_IOS"), ("teamId", "11")],
                          [("from", "2026-08-01"), ("to", "2026-11-20"), ("groupBy", "channelType"), ("bucket", "week")],
                          [("from", "2026-09-01"), ("to", "2026-11-20"), ("groupBy", "priority"), ("teamId", "10")],
                          [("from", "2026-09-07"), ("to", "2026-11-15"), ("bucket", "week")], [("from", "2026-11-02"), ("to", "2026-11-08"), ("bucket", "week")],
                          [("from", "2026-09-07"), ("to", "2026-11-15"), ("bucket", "week"), ("teamId", "11")],
                          [("from", "2026-09-07"), ("to", "2026-11-15"), ("bucket", "week"), ("agentId", "501")],
                          // The previous period one block (11-11 to 11-18), which alone would be passed on per agent.
                          [("from", "2026-11-19"), ("to", "2026-11-26"), ("bucket", "day")],
                          // Teams' reports read the team blocks, unless narrowed to agents.
                          [("from", "2026-08-01"), ("to", "2026-11-20"), ("groupBy", "team")],
                          [("from", "2026-09-07"), ("to", "2026-11-15"), ("groupBy", "team"), ("bucket", "week")],
                          [("from", "2026-09-03"), ("to", "2026-10-17"), ("groupBy", "team"), ("bucket", "week"), ("teamId", "12")],
                          [("from", "2026-09-03"), ("to", "2026-11-17"), ("groupBy", "team"), ("bucket", "week"), ("agentId", "501")],
                          [("from", "2026-11-19"), ("to", "2026-11-26"), ("groupBy", "team"), ("bucket", "day")]] {
                let p = try reportParameters(query)
                let blocks = try #require(try await reports.fromBlocks(p, plan: BlockPlan(p)))
                let raw = try await reports.fromRaw(p, from: p.from, to: p.to, bucket: p.bucket, limit: .max)
                let rawBefore = try await reports.fromRaw(p, from: p.previous.from, to: p.previous.to, bucket: .none, perGroup: p.previousPerGroup, limit: .max)
                #expect(Self.sums(blocks.current.map { ($0.group, $0.bucketStart, $0.figures) }, bucket: p)
                        == Self.sums(raw.map { ($0.group, $0.bucketStart, $0.figures) }, bucket: p), "\(query)")
                #expect(Self.sums(blocks.previous.map { (Self.previousKey($0.group, p), nil, $0.figures) }, bucket: p)
                        == Self.sums(rawBefore.map { (Self.previousKey($0.group, p), nil, $0.figures) }, bucket: p), "\(query)")
                // A bucketed report shows the previous period as its totals, which the rollups send as one row.
                #expect(p.previousPerGroup || blocks.previous.count <= 1, "\(query)")
                // Shaped, both give the same rows: a block row passed on unsummed (an agent in two teams comes as two
                // entries of one bucket) counts once, in its agent's row.
                let shapedBlocks = CSATReportShaper.shape(parameters: p, source: "rollup", current: blocks.current, previous: blocks.previous, names: GroupNames([:]))
                let shapedRaw = CSATReportShaper.shape(parameters: p, source: "raw", current: raw, previous: rawBefore.map { ($0.group, $0.figures) }, names: GroupNames([:]))
                let rows = { (report: CSATReport) in report.rows.map { "\($0.key)|\($0.bucketStart?.description ?? "-")|\($0.figures)|\(String(describing: $0.previous))" } }
                #expect(rows(shapedBlocks) == rows(shapedRaw), "\(query)")
                #expect(shapedBlocks.totals == shapedRaw.totals && shapedBlocks.previousTotals == shapedRaw.previousTotals, "\(query)")
            }
        }
    }

    /// The same in zones whose days are not 24 hours (summer time, a half-hour shift, a 45-minute offset), with ratings at
    /// any second of the day, requests, priorities, and later answers moving ratings to other days.
    @Test func rollupBlocksEqualTheRawRatingsInZonesWithSummerTime() async throws {
        try await withStore { db in
            let store = CSATStore(database: db)
            let zones = ["America/Denver", "Australia/Lord_Howe", "Asia/Kathmandu"]
            _ = try await store.ensureZones(zones)
            var generator = SystemRandomNumberGenerator()
            let priorities = TicketPriority.allCases
            for ticket in 1...400 {
                let at = Self.noon - Double(Int.random(in: 0..<(150 * 86_400), using: &generator))
                let agent = 500 + ticket % 4, team = 10 + ticket % 3, channel = ticket % 2 == 0 ? "SENDBIRD_IOS" : "SENDBIRD"
                let priority = priorities[ticket % priorities.count]
                if ticket % 3 != 0 {
                    #expect(try await store.recordRequest(ticketId: ticket, messageId: 1, agentId: agent, teamId: team, channelType: channel,
                                                          priority: priority, requestedAt: at - Double(Int.random(in: 0..<90_000, using: &generator))))
                }
                guard ticket % 5 != 0 else { continue }
                _ = try await store.record(RatingRecord(ticketId: ticket, messageId: 1, score: Int.random(in: 0...5, using: &generator).nonZero,
                                                        comment: nil, agentId: agent, teamId: team, channelType: channel, priority: priority,
                                                        customerSendbirdId: "c", ratedAt: at, source: .webhook))
                if ticket % 7 == 0 {
                    let later = RatingRecord(ticketId: ticket, messageId: 1, score: Int.random(in: 1...5, using: &generator), comment: nil,
                                             agentId: agent, teamId: team, channelType: channel, priority: priority, customerSendbirdId: "c",
                                             ratedAt: at + Double(Int.random(in: 1..<200_000, using: &generator)), source: .webhook)
                    _ = try await store.record(later)
                }
            }
            #expect(try await store.rollupDrift().isEmpty)
            let reports = ReportStore(database: db)
            for zone in zones {
                // Denver's summer time ended on 2026-11-01, Lord Howe's began on 2026-10-04 (half an hour).
                for query in [[("from", "2026-08-01"), ("to", "2026-11-20")], [("from", "2026-10-01"), ("to", "2026-11-04"), ("bucket", "day")],
                              [("from", "2026-09-03"), ("to", "2026-11-17"), ("bucket", "week")],
                              [("from", "2026-07-01"), ("to", "2026-11-20"), ("groupBy", "team"), ("bucket", "month")],
                              // The team blocks: unbucketed (per team in both periods) and by week (whole weeks passed as they are).
                              [("from", "2026-08-01"), ("to", "2026-11-20"), ("groupBy", "team")],
                              [("from", "2026-09-03"), ("to", "2026-11-17"), ("groupBy", "team"), ("bucket", "week")],
                              [("from", "2026-10-03"), ("to", "2026-11-02"), ("groupBy", "priority"), ("bucket", "day")],
                              [("from", "2026-09-28"), ("to", "2026-11-08"), ("groupBy", "channelType"), ("bucket", "week"), ("priority", "HIGH")],
                              [("from", "2026-10-04"), ("to", "2026-11-01"), ("channelType", "SENDBIRD_IOS"), ("teamId", "11")]] {
                    let p = try reportParameters(query + [("tz", zone)])
                    let blocks = try #require(try await reports.fromBlocks(p, plan: BlockPlan(p)), "\(zone) \(query)")
                    let raw = try await reports.fromRaw(p, from: p.from, to: p.to, bucket: p.bucket, limit: .max)
                    let rawBefore = try await reports.fromRaw(p, from: p.previous.from, to: p.previous.to, bucket: .none, perGroup: p.previousPerGroup, limit: .max)
                    #expect(Self.sums(blocks.current.map { ($0.group, $0.bucketStart, $0.figures) }, bucket: p, requests: true)
                            == Self.sums(raw.map { ($0.group, $0.bucketStart, $0.figures) }, bucket: p, requests: true), "\(zone) \(query)")
                    #expect(Self.sums(blocks.previous.map { (Self.previousKey($0.group, p), nil, $0.figures) }, bucket: p, requests: true)
                            == Self.sums(rawBefore.map { (Self.previousKey($0.group, p), nil, $0.figures) }, bucket: p, requests: true),
                            "\(zone) \(query)")
                }
            }
        }
    }

    /// A rating moved to Desk's agent and team leaves its first agent's and team's rollup rows at zero: a report from the
    /// rollups shows no row for them, as one from the raw ratings has none.
    @Test func aGroupWhoseRatingsAllMovedAwayHasNoRowInAReportFromTheRollups() async throws {
        try await withStore { db in
            let store = CSATStore(database: db)
            _ = try await store.ensureZones(["UTC"])
            let moved = RatingRecord(ticketId: 1, messageId: 1, score: 4, comment: nil, agentId: 501, teamId: 11, channelType: "SENDBIRD",
                                     priority: .medium, customerSendbirdId: "c", ratedAt: Self.noon, source: .webhook, attributionInferred: true)
            #expect(try await store.record(moved))
            #expect(try await store.record(Self.rating(2, score: 5, agent: 502, team: 13)))
            #expect(try await store.recordRequest(ticketId: 1, messageId: 1, agentId: 502, teamId: 12, channelType: "SENDBIRD",
                                                  priority: .medium, requestedAt: Self.noon - 60))
            #expect(try await store.rollupDrift().isEmpty)
            let reports = ReportStore(database: db)
            for query in [[("from", "2026-08-01"), ("to", "2026-11-20")], [("from", "2026-09-03"), ("to", "2026-11-20"), ("bucket", "week")],
                          [("from", "2026-11-14"), ("to", "2026-11-20"), ("bucket", "day")],
                          [("from", "2026-08-01"), ("to", "2026-11-20"), ("groupBy", "team")],
                          [("from", "2026-09-03"), ("to", "2026-11-20"), ("groupBy", "team"), ("bucket", "week")],
                          [("from", "2026-08-01"), ("to", "2026-11-20"), ("channelType", "SENDBIRD")],
                          [("from", "2026-08-01"), ("to", "2026-11-20"), ("groupBy", "channelType"), ("teamId", "11")]] {
                let p = try reportParameters(query)
                let blocks = try #require(try await reports.fromBlocks(p, plan: BlockPlan(p)))
                let raw = try await reports.fromRaw(p, from: p.from, to: p.to, bucket: p.bucket, limit: .max)
                let rawBefore = try await reports.fromRaw(p, from: p.previous.from, to: p.previous.to, bucket: .none, perGroup: p.previousPerGroup, limit: .max)
                let shapedBlocks = CSATReportShaper.shape(parameters: p, source: "rollup", current: blocks.current, previous: blocks.previous, names: GroupNames([:]))
                let shapedRaw = CSATReportShaper.shape(parameters: p, source: "raw", current: raw, previous: rawBefore.map { ($0.group, $0.figures) }, names: GroupNames([:]))
                let rows = { (report: CSATReport) in report.rows.map { "\($0.key)|\($0.bucketStart?.description ?? "-")|\($0.figures)|\(String(describing: $0.previous))" } }
                #expect(rows(shapedBlocks) == rows(shapedRaw), "\(query)")
                #expect(shapedBlocks.totals == shapedRaw.totals && shapedBlocks.previousTotals == shapedRaw.previousTotals, "\(query)")
                #expect(!shapedBlocks.rows.contains { $0.figures.requests == 0 && $0.figures.responses == 0 }, "\(query)")
            }
        }
    }

    /// The report page's choices, a team lead's agents and the channel types with ratings: from the ratings while no zone
    /// has complete rollups (no channel types then), from the top-level blocks once one has, the same either way.
    @Test func aTeamLeadsAgentsAndTheRatedChannelTypesComeFromTheTopBlocksOnceAZoneIsBuilt() async throws {
        try await withStore { db in
            let store = CSATStore(database: db)
            // Two years before: another 512-day block.
            #expect(try await store.record(Self.rating(1, score: 4, agent: 500, team: 11, channel: "SENDBIRD_IOS", at: Self.noon - 730 * 86_400)))
            #expect(try await store.record(Self.rating(2, score: nil, agent: 501, team: 11)))
            #expect(try await store.record(Self.rating(3, score: 2, agent: 502, team: 12, channel: "SENDBIRD_ANDROID")))
            let noAgent = RatingRecord(ticketId: 4, messageId: 1, score: 3, comment: nil, agentId: nil, teamId: 11, channelType: "SENDBIRD",
                                       priority: .medium, customerSendbirdId: "c", ratedAt: Self.noon, source: .webhook)
            #expect(try await store.record(noAgent))
            // First counted on agent 503 of team 11, then moved to the agent and team Desk's request names.
            let moved = RatingRecord(ticketId: 5, messageId: 1, score: 5, comment: nil, agentId: 503, teamId: 11, channelType: "SENDBIRD",
                                     priority: .medium, customerSendbirdId: "c", ratedAt: Self.noon, source: .webhook, attributionInferred: true)
            #expect(try await store.record(moved))
            #expect(try await store.recordRequest(ticketId: 5, messageId: 1, agentId: 504, teamId: 12, channelType: "SENDBIRD",
                                                  priority: .medium, requestedAt: Self.noon - 60))
            let reports = ReportStore(database: db)
            let expected: [([Int], Set<Int>)] = [([11], [500, 501]), ([12], [502, 504]), ([11, 12], [500, 501, 502, 504]), ([99], [])]
            #expect(try await reports.channelTypes().isEmpty)
            for (teams, agents) in expected { #expect(try await reports.agents(inTeams: teams) == agents, "\(teams)") }
            _ = try await store.ensureZones(["UTC", "Asia/Kolkata"])
            #expect(try await reports.channelTypes() == ["SENDBIRD", "SENDBIRD_ANDROID", "SENDBIRD_IOS"])
            for (teams, agents) in expected { #expect(try await reports.agents(inTeams: teams) == agents, "\(teams)") }
            // Read from the blocks now: ratings moved behind the rollups' back do not change the answer.
            _ = try await db.query("UPDATE csat_ratings SET team_id = 99")
            #expect(try await reports.agents(inTeams: [99]).isEmpty)
            #expect(try await reports.agents(inTeams: [11]) == [500, 501])
        }
    }

    /// The previous period is compared per group where the report shows it per group (unbucketed), else as totals.
    static func previousKey(_ group: ReportKey, _ p: ReportParameters) -> ReportKey { p.previousPerGroup ? group : .none }

    /// Responses and score counts per group and (clipped) bucket (requests aside: these ratings have none), empty ones dropped.
    static func sums(_ entries: [(ReportKey, LocalDate?, CSATFigures)], bucket p: ReportParameters, requests: Bool = false) -> [String: [Int]] {
        var result: [String: [Int]] = [:]
        for (group, start, figures) in entries {
            // Raw sums name the calendar bucket (a week from its Monday); the report clips it to the range, as here.
            let clipped = start.flatMap { CSATReportShaper.bucket(of: $0, p.bucket, from: p.from, to: p.to)?.0 }
            let key = "\(group)|\(clipped?.description ?? "-")"
            let counts = [figures.responses] + figures.distribution + (requests ? [figures.requests] : [])
            result[key] = zip(result[key] ?? Array(repeating: 0, count: counts.count), counts).map { $0 + $1 }
        }
        return result.filter { $0.value.contains { $0 != 0 } }
    }

    @Test func listingsPageEveryRatingOnceAndCommentsComeLowestFirst() async throws {
        try await withStore { db in
            let store = CSATStore(database: db)
            for ticket in 1...120 {
                _ = try await store.record(Self.rating(ticket, score: 1 + ticket % 5, comment: ticket % 4 == 0 ? "comment \(ticket)" : (ticket % 9 == 0 ? "" : nil),
                                                       agent: 500 + ticket % 3, team: ticket % 2 == 0 ? 11 : 12, at: Self.noon - Double(ticket % 7) * 3_600))
            }
            let reports = ReportStore(database: db)
            var p = try reportParameters([("from", "2026-11-19"), ("to", "2026-11-21")], listing: true)
            var seen: [Int] = []
            var cursor: (ratedAt: Double, id: Int)?
            repeat {
                let page = try await reports.responses(p, after: cursor, limit: 25)
                seen += page.map(\.ticketId)
                #expect(zip(page, page.dropFirst()).allSatisfy { ($0.ratedAt, $0.id) > ($1.ratedAt, $1.id) })
                cursor = page.count == 25 ? page.last.map { ($0.ratedAt, $0.id) } : nil
            } while cursor != nil
            #expect(seen.count == 120 && Set(seen).count == 120)
            // With a comment: only non-empty ones (an empty comment is none).
            p.hasComment = true
            let commented = try await reports.responses(p, after: nil, limit: 500)
            #expect(commented.count == 30 && commented.allSatisfy { !($0.comment ?? "").isEmpty })
            p.hasComment = false
            #expect(try await reports.responses(p, after: nil, limit: 500).count == 90)
            // The comments panel: lowest score first, newest first within a score, the filters applied.
            let lowest = try await reports.lowestComments(p, limit: 10)
            #expect(lowest.count == 10 && lowest.allSatisfy { $0.comment != nil })
            #expect(zip(lowest, lowest.dropFirst()).allSatisfy { a, b in (a.score ?? 0, -a.ratedAt) <= (b.score ?? 0, -b.ratedAt) })
            #expect(lowest.first?.score == 1)
            var team12 = try reportParameters([("from", "2026-11-19"), ("to", "2026-11-21"), ("teamId", "12"), ("score", "4")], listing: true)
            team12.limit = 50
            #expect(try await reports.lowestComments(team12, limit: 10).allSatisfy { $0.teamId == 12 && $0.score == 4 })
            // A team lead's agents: those rated in its teams.
            #expect(try await reports.agents(inTeams: [11]) == [500, 501, 502])
            #expect(try await reports.agents(inTeams: [99]).isEmpty)
        }
    }
}

extension Int {
    /// 0 as a decline (no score).
    var nonZero: Int? { self == 0 ? nil : self }
}
