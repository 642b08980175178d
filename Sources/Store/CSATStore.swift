public import Domain
import Postgres
import Reports

/// CSAT ratings and requests in PostgreSQL. The same rating arriving again (gateway, webhook, sync) is stored once.
public struct CSATStore: FeedbackRatings {
    let database: Database

    public init(database: Database) {
        self.database = database
    }

    /// Whether Desk was seen sending this CSAT request on this ticket (webhook or sync).
    public func isRequest(ticketId: Int, messageId: Int) async throws -> Bool {
        !(try await database.query("SELECT 1 FROM csat_requests WHERE ticket_id = $1 AND message_id = $2", [ticketId, messageId]).isEmpty)
    }

    /// The cursor is the last request's time in microseconds since 1970 and its id. Walked in the requests' order, the
    /// unanswered ones are found by the ratings' ticket index a request at a time and the walk stops at `limit`: 3–47 ms
    /// at 1,000,000 ratings and 51,000 unanswered requests in 30 days, where all of them, grouped by ticket and sorted,
    /// took 250–350 ms of three processes (and every rating read, a hash join) for the same oldest 500 every run.
    public func ticketsAwaitingAnswers(maxAgeDays: Int, after cursor: String?, limit: Int) async throws -> (tickets: [Int], next: String?) {
        let position = cursor.flatMap(Self.requestPosition)
        // The first bound is the one the index on `requested_at` serves; the pair orders requests made at one instant.
        let after = position == nil ? "" : """

               AND requested_at >= timestamptz 'epoch' + $3 * interval '1 microsecond'
               AND (requested_at, id) > (timestamptz 'epoch' + $3 * interval '1 microsecond', $4)
            """
        let rows = try await database.query("""
            SELECT ticket_id, (extract(epoch FROM requested_at) * 1000000)::int8, id FROM csat_requests r
             WHERE requested_at > now() - make_interval(days => $1)\(after)
               AND NOT EXISTS (SELECT 1 FROM csat_ratings x WHERE x.ticket_id = r.ticket_id AND x.message_id IN (r.message_id, 0)
                                                            AND x.rated_at >= r.requested_at)
             ORDER BY requested_at, id LIMIT $2
            """, [maxAgeDays, limit] + (position.map { [$0.micros, $0.id] } ?? []))
        var tickets: [Int] = []
        var seen = Set<Int>()
        for row in rows {
            let ticket: Int = try row.decode(0)
            if seen.insert(ticket).inserted { tickets.append(ticket) }
        }
        guard rows.count == limit, limit > 0 else { return (tickets, nil) }
        let last = rows[rows.count - 1]
        return (tickets, "\(try last.decode(1, as: Int.self)),\(try last.decode(2, as: Int.self))")
    }

    static func requestPosition(_ cursor: String) -> (micros: Int, id: Int)? {
        let parts = cursor.split(separator: ",")
        guard parts.count == 2, let micros = Int(parts[0]), let id = Int(parts[1]) else { return nil }
        return (micros, id)
    }

    public func storedAnswers(ticketIds: [Int]) async throws -> [Int: Int?] {
        guard !ticketIds.isEmpty else { return [:] }
        var answers: [Int: Int?] = [:]
        for row in try await database.query("""
            SELECT DISTINCT ON (ticket_id) ticket_id, score FROM csat_ratings WHERE ticket_id = ANY($1::bigint[])
             ORDER BY ticket_id, rated_at DESC, id DESC
            """, [ticketIds]) {
            answers[try row.decode(0)] = .some(try row.decodeIfPresent(1))
        }
        return answers
    }

    /// The answer stored for one CSAT request: nil when none, `.some(nil)` for a decline.
    public func storedAnswer(ticketId: Int, messageId: Int) async throws -> Int?? {
        guard let row = try await database.query("SELECT score FROM csat_ratings WHERE ticket_id = $1 AND message_id = $2",
                                             [ticketId, messageId]).first else { return nil }
        return .some(try row.decodeIfPresent(0))
    }

    /// Records one answer in its own transaction (`CSATWriter.record`); returns whether anything changed.
    @discardableResult
    public func record(_ rating: RatingRecord) async throws -> Bool {
        try await database.transaction { tx in try CSATWriter.run(on: tx) { try $0.record(rating) } }
    }

    /// A ticket's own score, placed by `CSATWriter.recordTicketLevel`; returns whether anything changed.
    @discardableResult
    public func recordTicketLevel(_ rating: RatingRecord, closedAt: Double) async throws -> Bool {
        try await database.transaction { tx in try CSATWriter.run(on: tx) { try $0.recordTicketLevel(rating, closedAt: closedAt) } }
    }

    @discardableResult
    public func recordRequest(_ request: CSATRequestRecord) async throws -> Bool {
        try await database.transaction { tx in try CSATWriter.run(on: tx) { try $0.recordRequest(request) } }
    }

    @discardableResult
    public func recordRequest(ticketId: Int, messageId: Int, agentId: Int?, teamId: Int?, channelType: String, priority: TicketPriority,
                              requestedAt: Double) async throws -> Bool {
        try await recordRequest(CSATRequestRecord(ticketId: ticketId, messageId: messageId, agentId: agentId, teamId: teamId,
                                                  channelType: channelType, priority: priority, requestedAt: requestedAt))
    }

    /// SQL for the first day of the block of `level` holding `day` (the week level: its Monday).
    static func blockStart(_ day: String, _ level: String) -> String {
        """
        CASE WHEN \(level) = \(RollupBlocks.weekLevel) THEN date_trunc('week', \(day))::date
             ELSE date '1970-01-01' + (((\(day) - date '1970-01-01') >> \(level)) << \(level)) END
        """
    }

    /// Every level a rollup row is kept at: the aligned ones and the week.
    static let levels = "generate_series(0, \(RollupBlocks.weekLevel))"

    /// Says that this transaction writes week and team blocks itself, so the triggers of migrations 0018 and 0028
    /// (kept for a writer that does not) leave them alone, and that it leaves a zone's uncounted ratings to the zone's
    /// build, so migration 0019's trigger lets it write while a zone is built in steps.
    static let writingOwnBlocks = """
        SELECT set_config('desk_gateway.week_blocks', 'on', true), set_config('desk_gateway.team_blocks', 'on', true),
               set_config('desk_gateway.zone_steps', 'on', true)
        """

    /// Makes sure every configured zone has rollups. A new zone is registered in one short transaction under the zone
    /// lock, held exclusively (every CSAT writer takes it shared), its blocks empty and nothing counted. Its ratings and
    /// requests are then counted in steps, from the oldest on, each step a stretch of time holding about
    /// `rowsPerStep` of them and a transaction of its own under the zone lock, so writers wait a step's length (a
    /// fraction of a second), not the whole build (41 s counted at once at 1,000,000 ratings). Between steps a writer updates
    /// the zone for a change dated before the time the build has counted up to and leaves a later one to the build,
    /// which counts the row as it is when it gets there (`CSATWriter.finish`): a rating changed, moved to another
    /// day, or removed counts once. Registered in one transaction and counted in a second with no such rule, a writer
    /// that changed an older rating in between was counted twice. The last step counts everything after its start and
    /// completes the zone; reports use the zone's rollups only then. An interrupted build is continued where it stopped
    /// by the next instance that starts with the zone, and instances starting meanwhile take steps of the same build.
    /// Locks are transaction-level (a session lock would not hold through a transaction pooler). Returns the zones
    /// whose builds this call finished.
    @discardableResult
    public func ensureZones(_ zones: [String]) async throws -> [String] {
        try await ensureZones(zones, rowsPerStep: Self.rowsPerStep) { _ in }
    }

    /// Ratings (and requests) a build step counts: 0.3–0.6 s of the zone lock at 1,000,000 ratings (`make bench-zones`).
    package static let rowsPerStep = 5_000

    /// `ensureZones`, telling `afterStep` where each zone's build stands after each of its steps.
    package func ensureZones(_ zones: [String], rowsPerStep: Int, afterStep: (ZoneBuildProgress) async throws -> Void) async throws -> [String] {
        var built: [String] = []
        zones: for zone in zones {
            // Registered again when the build stops under way (an instance of the release before abandoned it).
            while try await underZoneLock({ try Self.register(zone, on: $0) }) {
                while let progress = try await underZoneLock({ try Self.buildStep(zone, rowsPerStep: rowsPerStep, on: $0) }) {
                    try await afterStep(progress)
                    if progress.done {
                        built.append(zone)
                        continue zones
                    }
                }
            }
        }
        return built
    }

    /// Runs `body` in a transaction holding the zone lock exclusively, asking again after `zoneLockGiveWay` each time
    /// the wait for it ran out.
    private func underZoneLock<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        while true {
            do {
                return try await database.withConnection { try Self.underZoneLock($0, body) }
            } catch is ZoneLockBusy {
                try await Task.sleep(for: Self.zoneLockGiveWay)
            }
        }
    }

    /// Registers a new zone (its blocks emptied, nothing counted yet); false when its rollups are complete. A build
    /// under way, this instance's or another's, is left as it stands and continued.
    private static func register(_ zone: String, on tx: PostgresConnection) throws -> Bool {
        let state = try tx.query("SELECT backfilled_at IS NOT NULL, counted_until IS NOT NULL FROM report_zones WHERE zone = $1", [zone])
        if let row = state.first {
            if try row.decode(0, as: Bool.self) { return false }
            if try row.decode(1, as: Bool.self) { return true }
        }
        try tx.query(writingOwnBlocks)
        for (table, _) in rollupTables {
            try tx.query("DELETE FROM \(table) WHERE zone_id IN (SELECT id FROM report_zones WHERE zone = $1)", [zone])
        }
        try tx.query("""
            INSERT INTO report_zones (zone, added_at, counted_until, stepped_at) VALUES ($1, clock_timestamp(), '-infinity', now())
            ON CONFLICT (zone) DO UPDATE SET added_at = EXCLUDED.added_at, backfilled_at = NULL, counted_until = '-infinity',
                stepped_at = now()
            """, [zone])
        return true
    }

    /// Counts the zone's next stretch of time into its blocks: from where the build stands to the whole second after
    /// the next `rowsPerStep` ratings or requests, whichever comes first, or to the end when fewer are left. Nil when
    /// the build is no longer under way (another instance finished it, the zone was dropped, or a writer of the
    /// release before abandoned it: migration 0019).
    /// The zone lock alone keeps the rows still while they are counted: every CSAT writer holds it shared from before
    /// its first row change to its commit, and one that does not follow the steps is refused by migration 0019's
    /// trigger. A table lock as well (SHARE) made a step wait out any VACUUM or ANALYZE of the raw tables, with the
    /// zone lock held, and every CSAT writer behind it.
    private static func buildStep(_ zone: String, rowsPerStep: Int, on tx: PostgresConnection) throws -> ZoneBuildProgress? {
        guard let row = try tx.query("""
            SELECT counted_until, (SELECT least(
                       (SELECT date_trunc('second', rated_at) + interval '1 second' FROM csat_ratings
                         WHERE rated_at >= z.counted_until ORDER BY rated_at OFFSET $2 LIMIT 1),
                       (SELECT date_trunc('second', requested_at) + interval '1 second' FROM csat_requests
                         WHERE requested_at >= z.counted_until ORDER BY requested_at OFFSET $2 LIMIT 1)))
              FROM report_zones z WHERE zone = $1 AND backfilled_at IS NULL AND counted_until IS NOT NULL FOR UPDATE
            """, [zone, rowsPerStep]).first else { return nil }
        let from: String = try row.decode(0)
        let until: String = try row.decodeIfPresent(1) ?? "infinity"
        try backfill(zone: zone, from: from, until: until, on: tx)
        let done = until == "infinity"
        let counted = try tx.query("""
            UPDATE report_zones SET counted_until = $2::timestamptz, stepped_at = now(), backfilled_at = CASE WHEN $3 THEN now() END
             WHERE zone = $1 RETURNING extract(epoch FROM counted_until)::float8
            """, [zone, until, done])
        return ZoneBuildProgress(zone: zone, countedUntil: done ? nil : try counted[0].decode(0))
    }

    package static let zoneLock: Int64 = 0x4445_534B_5A4E // "DESKZN"

    /// A transaction holding the zone lock exclusively: what changes a zone's rollups other than a writer's own
    /// changes (a registration, a build's step, a drop) runs with no CSAT writer between reading the zone's state and
    /// writing its blocks. The lock is waited for `zoneLockWaitMilliseconds` at most, then `ZoneLockBusy` is thrown
    /// (see `takeZoneLock`); callers try again after `zoneLockGiveWay`.
    static func underZoneLock<T>(_ connection: PostgresConnection, _ body: (PostgresConnection) throws -> T) throws -> T {
        try connection.transaction { tx in
            try tx.withoutStatementTimeout()
            guard try takeZoneLock(tx, exclusive: true, waitingAtMost: zoneLockWaitMilliseconds) else { throw ZoneLockBusy() }
            return try body(tx)
        }
    }

    /// Takes the zone lock for the rest of `tx`, waiting `milliseconds` at most; false when the wait ran out (the
    /// transaction goes on without it). Nothing waits for the lock unbounded: a waiting request for it held
    /// exclusively queues every later shared one behind it, so a build step waiting behind one writer that does not
    /// end (stuck on a row a session left locked) would hold every other CSAT writer with it, and a shared wait behind
    /// a long exclusive holder would spend the waiter's statement timeout.
    static func takeZoneLock(_ tx: PostgresConnection, exclusive: Bool, waitingAtMost milliseconds: Int) throws -> Bool {
        try tx.query("SAVEPOINT zone_lock")
        do {
            try tx.query("SELECT set_config('lock_timeout', $1, true)", ["\(milliseconds)ms"])
            try tx.query("SELECT \(exclusive ? "pg_advisory_xact_lock" : "pg_advisory_xact_lock_shared")($1)", [zoneLock])
            try tx.query("RELEASE SAVEPOINT zone_lock")
            try tx.query("SET LOCAL lock_timeout TO DEFAULT")
            return true
        } catch let error as PostgresError where error.sqlState == "55P03" || error.sqlState == "57014" {
            try tx.query("ROLLBACK TO SAVEPOINT zone_lock")
            return false
        }
    }

    /// A wait for the zone lock ran out (`underZoneLock`).
    struct ZoneLockBusy: Error {}

    /// How long a registration, a build step or a drop waits for the zone lock before it gives way, and how long it
    /// then lets writers be.
    static let zoneLockWaitMilliseconds = 1_000
    static let zoneLockGiveWay = Duration.milliseconds(200)

    static let countColumns = "requests, responses, s1, s2, s3, s4, s5"
    /// The `DO UPDATE SET` of the rollup upserts: counts are added, never replaced.
    static let addCounts = ["requests", "responses", "s1", "s2", "s3", "s4", "s5"].map { "\($0) = d.\($0) + EXCLUDED.\($0)" }
        .joined(separator: ", ")

    /// The rollup tables, from the largest, with the columns of their keys after zone, level and first day.
    static let rollupTables = [("csat_detail_blocks", "channel_type, priority, agent_id, team_id"), ("csat_blocks", "agent_id, team_id"),
                               ("csat_team_blocks", "team_id")]

    /// The upsert that adds `source`'s rows (zone_id, level, first_day, the table's key columns, then the counts) to
    /// `table`, summed per key; `ordered`: its rows taken in key order, as a CSAT writer's lock order needs.
    static func addingRollups(to table: String, keys: String, from source: String, ordered: Bool) -> String {
        let key = "zone_id, level, first_day, \(keys)"
        let positions = (1...(3 + keys.split(separator: ",").count)).map(String.init).joined(separator: ", ")
        return """
            INSERT INTO \(table) AS d (\(key), \(countColumns))
            SELECT \(key), sum(requests), sum(responses), sum(s1), sum(s2), sum(s3), sum(s4), sum(s5) FROM (\(source)) b
             GROUP BY \(positions)\(ordered ? " ORDER BY \(positions)" : "")
            ON CONFLICT (\(key)) DO UPDATE SET \(addCounts)
            """
    }

    /// Adds the ratings and requests dated from `from` to before `until` (timestamps, infinities allowed) to the zone's
    /// rollups, as they are now.
    static func backfill(zone: String, from: String, until: String, on tx: PostgresConnection) throws {
        // Per local day and every dimension first, then spread over the levels.
        try tx.query(writingOwnBlocks)
        try tx.execute(script: """
            CREATE TEMPORARY TABLE backfill_days (day date, channel_type text, priority text, agent_id bigint, team_id bigint,
                                                  requests bigint, responses bigint, s1 bigint, s2 bigint, s3 bigint, s4 bigint,
                                                  s5 bigint) ON COMMIT DROP
            """)
        try tx.query("""
            INSERT INTO backfill_days
            SELECT (rated_at AT TIME ZONE $1)::date AS day, channel_type, priority, coalesce(agent_id, 0) AS agent_id,
                   coalesce(team_id, 0) AS team_id, 0 AS requests, count(*) AS responses, count(*) FILTER (WHERE score = 1) AS s1,
                   count(*) FILTER (WHERE score = 2) AS s2, count(*) FILTER (WHERE score = 3) AS s3,
                   count(*) FILTER (WHERE score = 4) AS s4, count(*) FILTER (WHERE score = 5) AS s5
              FROM csat_ratings WHERE rated_at >= $2::timestamptz AND rated_at < $3::timestamptz
             GROUP BY 1, 2, 3, 4, 5
            UNION ALL
            SELECT (requested_at AT TIME ZONE $1)::date, channel_type, priority, coalesce(agent_id, 0), coalesce(team_id, 0), count(*),
                   0, 0, 0, 0, 0, 0
              FROM csat_requests WHERE requested_at >= $2::timestamptz AND requested_at < $3::timestamptz
             GROUP BY 1, 2, 3, 4, 5
            """, [zone, from, until])
        let days = """
            SELECT (SELECT id FROM report_zones WHERE zone = $1) AS zone_id, level, \(Self.blockStart("day", "level")) AS first_day,
                   channel_type, priority, agent_id, team_id, requests, responses, s1, s2, s3, s4, s5
              FROM backfill_days CROSS JOIN \(Self.levels) AS level
            """
        for (table, keys) in rollupTables {
            try tx.query(addingRollups(to: table, keys: keys, from: days, ordered: false), [zone])
        }
    }

    /// Rows of the one-day and week rollups (per agent and team, per channel type and priority too, and per team) that
    /// differ from the same counted from the raw ratings and requests now, per zone whose rollups are complete. A rating
    /// removed or restored by hand, or counted twice, shows here.
    public func rollupDrift() async throws -> [String: Int] {
        let raw = """
            SELECT z.id AS zone_id, (rated_at AT TIME ZONE z.zone)::date AS day, channel_type, priority, coalesce(agent_id, 0) AS agent_id,
                   coalesce(team_id, 0) AS team_id, 0 AS requests, 1 AS responses, (score = 1)::int AS s1, (score = 2)::int AS s2,
                   (score = 3)::int AS s3, (score = 4)::int AS s4, (score = 5)::int AS s5
              FROM csat_ratings CROSS JOIN report_zones z WHERE z.backfilled_at IS NOT NULL
            UNION ALL
            SELECT z.id, (requested_at AT TIME ZONE z.zone)::date, channel_type, priority, coalesce(agent_id, 0), coalesce(team_id, 0),
                   1, 0, 0, 0, 0, 0, 0
              FROM csat_requests CROSS JOIN report_zones z WHERE z.backfilled_at IS NOT NULL
            """
        let sums = "sum(requests)::bigint, sum(responses)::bigint, sum(coalesce(s1, 0))::bigint, sum(coalesce(s2, 0))::bigint, "
            + "sum(coalesce(s3, 0))::bigint, sum(coalesce(s4, 0))::bigint, sum(coalesce(s5, 0))::bigint"
        let nonZero = "HAVING sum(requests) <> 0 OR sum(responses) <> 0"
        let complete = "zone_id IN (SELECT id FROM report_zones WHERE backfilled_at IS NOT NULL)"
        // Each rollup table's one-day and week rows against the raw rows summed the same way, in both directions.
        var tables: [String] = []
        var differing: [String] = []
        for (table, columns) in Self.rollupTables {
            let groups = (1...(2 + columns.split(separator: ",").count)).map(String.init).joined(separator: ", ")
            for (level, day) in [(0, "day"), (RollupBlocks.weekLevel, "date_trunc('week', day)::date")] {
                let name = "\(table)_\(level)"
                tables.append("""
                    raw_\(name) AS (SELECT zone_id, \(day), \(columns), \(sums) FROM raw GROUP BY \(groups) \(nonZero)),
                    \(name) AS (SELECT zone_id, first_day, \(columns), \(sums) FROM \(table) WHERE level = \(level) AND \(complete)
                                 GROUP BY \(groups) \(nonZero))
                    """)
                differing += ["raw_\(name) EXCEPT SELECT * FROM \(name)", "\(name) EXCEPT SELECT * FROM raw_\(name)"]
            }
        }
        let sql = """
            WITH raw AS (\(raw)),
            \(tables.joined(separator: ",\n")),
            differing AS (\(differing.enumerated().map { "(SELECT zone_id FROM (SELECT * FROM \($1)) d\($0))" }
                .joined(separator: "\n    UNION ALL ")))
            SELECT z.zone, count(*) FROM differing JOIN report_zones z ON z.id = differing.zone_id GROUP BY z.zone
            """
        // The planner's estimates put this above the JIT threshold even for small tables, and compiling it took
        // seconds: more than the query.
        let rows = try await database.transaction { tx in
            try tx.query("SET LOCAL jit = off")
            return try tx.query(sql)
        }
        var drift: [String: Int] = [:]
        for row in rows { drift[try row.decode(0)] = try row.decode(1) }
        return drift
    }

    /// Counts the zones' rollups anew from the raw ratings and requests (registered again, then backfilled, as a new
    /// zone is); reports read the raw ratings until it is done.
    public func rebuildRollups(zones: [String]) async throws {
        try await database.query("""
            UPDATE report_zones SET backfilled_at = NULL, counted_until = NULL WHERE zone = ANY($1::text[])
            """, [zones])
        try await ensureZones(zones)
    }

    /// Stops keeping a zone's rollups and deletes them (`desk-gateway csat drop-zone`): every CSAT write updates every
    /// zone registered, listed in `REPORT_TIME_ZONES` or not. Taken under the zone lock, held exclusively as a
    /// build step holds it (and given way as a step gives way), so no writer is between reading the zones and writing
    /// their blocks. Reports in the zone are computed from the raw ratings from then on (one in flight notices in its
    /// own query). Returns false when the zone had no rollups.
    public func dropZone(_ zone: String) async throws -> Bool {
        try await underZoneLock { tx in
            // The team rows go with the zone's own cascade; migration 0028's trigger need not look at each deleted row.
            try tx.query(Self.writingOwnBlocks)
            return !(try tx.query("DELETE FROM report_zones WHERE zone = $1 RETURNING 1", [zone]).isEmpty)
        }
    }

    /// Every zone registered, its rollups complete or not (with the time its build has counted up to, seconds since
    /// 1970, nil before its first step), with its rows in the agent × team blocks.
    public func registeredZones() async throws -> [(zone: String, complete: Bool, countedUntil: Double?, rows: Int)] {
        try await database.query("""
            SELECT z.zone, z.backfilled_at IS NOT NULL,
                   CASE WHEN isfinite(z.counted_until) THEN extract(epoch FROM z.counted_until)::float8 END,
                   (SELECT count(*) FROM csat_blocks b WHERE b.zone_id = z.id)
              FROM report_zones z ORDER BY z.zone
            """).map { (try $0.decode(0), try $0.decode(1), try $0.decodeIfPresent(2), try $0.decode(3)) }
    }

    /// Zones whose rollups are complete (reports may read them).
    public func zones() async throws -> Set<String> {
        Set(try await database.query("SELECT zone FROM report_zones WHERE backfilled_at IS NOT NULL").map { try $0.decode(0, as: String.self) })
    }
}

/// Where a zone's build stands after one of its steps: counted up to a time, or done.
public struct ZoneBuildProgress: Sendable, Equatable {
    public let zone: String
    /// The time counted up to, seconds since 1970; nil once the zone is complete.
    public let countedUntil: Double?

    public var done: Bool { countedUntil == nil }
}
