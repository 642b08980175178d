public import Domain
import Postgres
import Reports

/// CSAT ratings and requests in PostgreSQL. The same rating arriving again (gateway, webhook, sync) is stored once.
public struct CSATStore: RatingStore {
    let pool: Database

    public init(pool: Database) {
        self.pool = pool
    }

    /// Whether Desk was seen sending this CSAT request on this ticket (webhook or sync).
    public func isRequest(ticketId: Int, messageId: Int) async throws -> Bool {
        !(try await pool.query("SELECT 1 FROM csat_requests WHERE ticket_id = $1 AND message_id = $2", [ticketId, messageId]).isEmpty)
    }

    public func ticketsAwaitingAnswers(maxAgeDays: Int, limit: Int) async throws -> [Int] {
        try await pool.query("""
            SELECT ticket_id FROM csat_requests r
             WHERE requested_at > now() - make_interval(days => $1)
               AND NOT EXISTS (SELECT 1 FROM csat_ratings x WHERE x.ticket_id = r.ticket_id AND x.message_id IN (r.message_id, 0)
                                                            AND x.rated_at >= r.requested_at)
             GROUP BY ticket_id ORDER BY min(requested_at) LIMIT $2
            """, [maxAgeDays, limit]).map { try $0.decode(0) }
    }

    public func storedAnswers(ticketIds: [Int]) async throws -> [Int: Int?] {
        guard !ticketIds.isEmpty else { return [:] }
        var answers: [Int: Int?] = [:]
        for row in try await pool.query("""
            SELECT DISTINCT ON (ticket_id) ticket_id, score FROM csat_ratings WHERE ticket_id = ANY($1::bigint[])
             ORDER BY ticket_id, rated_at DESC, id DESC
            """, [ticketIds]) {
            answers[try row.decode(0)] = .some(try row.decodeIfPresent(1))
        }
        return answers
    }

    /// Returns whether the rating was new.
    @discardableResult
    public func record(_ rating: RatingRecord) async throws -> Bool {
        try await pool.transaction { tx in try Self.record(rating, on: tx) }
    }

    /// The one place a rating is recorded, whichever path saw it (feedback, webhook, sync, outbox delivery): the first
    /// answer to a CSAT request is inserted; a later, different answer to the same request replaces it, in the row and
    /// in every rollup (its counts move from the old score to the new one), as Desk keeps the last answer. An answer
    /// older than the recorded one, or the same answer seen again, changes nothing. The agent, team, channel and
    /// priority stay those of the first answer. Returns whether anything changed.
    static func record(_ rating: RatingRecord, on tx: PostgresConnection) throws -> Bool {
        try lockTicket(rating.ticketId, on: tx)
        if rating.messageId != 0 { try absorbTicketLevel(of: rating, on: tx) }
        // Serialises with a zone backfill (which holds SHARE on this table) so no rating is counted twice or missed.
        let inserted = try tx.query("""
            INSERT INTO csat_ratings (ticket_id, message_id, score, comment, agent_id, team_id, channel_type, priority,
                                      customer_sendbird_id, rated_at, source)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, to_timestamp($10), $11)
            ON CONFLICT (ticket_id, message_id) DO NOTHING
            RETURNING id
            """, [rating.ticketId, rating.messageId, rating.score, rating.comment, rating.agentId, rating.teamId,
                  rating.channelType, rating.priority.rawValue, rating.customerSendbirdId, rating.ratedAt, rating.source.rawValue])
        if !inserted.isEmpty {
            try addToRollups(on: tx, at: rating.ratedAt, agentId: rating.agentId, teamId: rating.teamId, channelType: rating.channelType,
                             priority: rating.priority.rawValue, requests: 0, score: rating.score)
            return true
        }
        guard let existing = try tx.query("""
            SELECT id, score, comment, agent_id, team_id, channel_type, priority, extract(epoch FROM rated_at)::float8
              FROM csat_ratings WHERE ticket_id = $1 AND message_id = $2 FOR UPDATE
            """, [rating.ticketId, rating.messageId]).first else { return false }
        let oldScore: Int? = try existing.decodeIfPresent(1)
        let oldComment: String? = try existing.decodeIfPresent(2)
        let oldRatedAt: Double = try existing.decode(7)
        guard rating.replaces(score: oldScore, comment: oldComment, ratedAt: oldRatedAt) else { return false }
        // A zone being backfilled reads rows as they are: wait for it instead of adjusting under its feet.
        try tx.query("SELECT pg_advisory_xact_lock_shared($1)", [zoneLock])
        try tx.query("UPDATE csat_ratings SET score = $2, comment = $3, rated_at = to_timestamp($4), source = $5, recorded_at = now() WHERE id = $1",
                     [try existing.decode(0, as: Int.self), rating.score, rating.comment, rating.ratedAt, rating.source.rawValue])
        let agentId: Int? = try existing.decodeIfPresent(3)
        let teamId: Int? = try existing.decodeIfPresent(4)
        let channelType: String = try existing.decode(5)
        let priority: String = try existing.decode(6)
        try addToRollups(on: tx, at: oldRatedAt, agentId: agentId, teamId: teamId, channelType: channelType, priority: priority,
                         requests: 0, score: oldScore, sign: -1)
        try addToRollups(on: tx, at: rating.ratedAt, agentId: agentId, teamId: teamId, channelType: channelType, priority: priority,
                         requests: 0, score: rating.score)
        return true
    }

    /// Ratings of one ticket are recorded one transaction at a time: a ticket-level answer and the same answer by
    /// message, arriving together on two paths, must see each other to count once. The lock order of every CSAT
    /// write is: this ticket lock, then the zone lock (shared; a zone backfill holds it exclusively), then rating and
    /// rollup rows. Taking the zone lock only after a rollup row (as a replaced answer once did) deadlocked against a
    /// backfill waiting on that row.
    static func lockTicket(_ ticketId: Int, on tx: PostgresConnection) throws {
        try tx.query("SELECT pg_advisory_xact_lock(1129534804, ($1::bigint % 2147483647)::int)", [ticketId])
        try tx.query("SELECT pg_advisory_xact_lock_shared($1)", [zoneLock])
    }

    /// A ticket-level rating (message 0, from the ticket's own fields) recorded since this request was sent is the same
    /// answer this message-level rating now names: it is taken out, rollups included, so the answer counts once.
    static func absorbTicketLevel(of rating: RatingRecord, on tx: PostgresConnection) throws {
        let removed = try tx.query("""
            DELETE FROM csat_ratings WHERE ticket_id = $1 AND message_id = 0
               AND rated_at >= coalesce((SELECT requested_at FROM csat_requests WHERE ticket_id = $1 AND message_id = $2), '-infinity')
            RETURNING score, agent_id, team_id, channel_type, priority, extract(epoch FROM rated_at)::float8
            """, [rating.ticketId, rating.messageId])
        guard !removed.isEmpty else { return }
        try tx.query("SELECT pg_advisory_xact_lock_shared($1)", [zoneLock])
        for row in removed.rows {
            try addToRollups(on: tx, at: try row.decode(5), agentId: try row.decodeIfPresent(1), teamId: try row.decodeIfPresent(2),
                             channelType: try row.decode(3), priority: try row.decode(4), requests: 0, score: try row.decodeIfPresent(0), sign: -1)
        }
    }

    /// Adds one request (requests = 1) or one response (score nil = declined) to the rollups of every zone: the
    /// block of every level, with and without channel type and priority, in one statement. Rows are upserted in
    /// (zone, level) order, so concurrent ratings of one agent queue on the same rows instead of deadlocking.
    /// `sign` -1 takes a response back out (when a later answer replaces it).
    static func addToRollups(on tx: PostgresConnection, at time: Double, agentId: Int?, teamId: Int?, channelType: String,
                             priority: String, requests: Int, score: Int?, sign: Int = 1) throws {
        let counts = (1...5).map { score == $0 ? sign : 0 }
        let binds: [any PostgresEncodable] = [time, agentId ?? 0, teamId ?? 0, channelType, priority, requests * sign, requests == 0 ? sign : 0,
                                              counts[0], counts[1], counts[2], counts[3], counts[4]]
        try tx.query("""
            WITH blocks AS (
                SELECT z.id, level, \(Self.blockStart("(to_timestamp($1) AT TIME ZONE z.zone)::date", "level")) AS first_day
                  FROM report_zones z CROSS JOIN generate_series(0, \(RollupBlocks.maxLevel)) AS level
            ), detail AS (
                INSERT INTO csat_detail_blocks AS d (zone_id, level, first_day, channel_type, priority, agent_id, team_id,
                                                     \(Self.countColumns))
                SELECT id, level, first_day, $4, $5, $2, $3, $6, $7, $8, $9, $10, $11, $12 FROM blocks ORDER BY id, level
                ON CONFLICT (zone_id, level, first_day, channel_type, priority, agent_id, team_id) DO UPDATE SET
                    \(Self.addCounts)
            )
            INSERT INTO csat_blocks AS d (zone_id, level, first_day, agent_id, team_id, \(Self.countColumns))
            SELECT id, level, first_day, $2, $3, $6, $7, $8, $9, $10, $11, $12 FROM blocks ORDER BY id, level
            ON CONFLICT (zone_id, level, first_day, agent_id, team_id) DO UPDATE SET
                \(Self.addCounts)
            """, binds)
    }

    /// SQL for the first day of the block of `level` holding `day`.
    static func blockStart(_ day: String, _ level: String) -> String {
        "date '1970-01-01' + (((\(day) - date '1970-01-01') >> \(level)) << \(level))"
    }

    /// A sync-only rating known from the ticket alone (no message id): skipped when this ticket already has a rating
    /// recorded at or after it was closed, which is the same rating seen through another path.
    @discardableResult
    public func recordTicketLevel(_ rating: RatingRecord, closedAt: Double) async throws -> Bool {
        try await pool.transaction { tx in try Self.recordTicketLevel(rating, closedAt: closedAt, on: tx) }
    }

    /// A rating known only from the ticket's own fields. The same answer already recorded for one of the ticket's
    /// requests (same score and comment) is left alone; otherwise it is the answer to the latest CSAT request the
    /// gateway knows of the ticket (recorded by the one rule, so a message answer seen later replaces it), or,
    /// when none is known, a ticket-level rating (message 0) unless a message answer since the ticket was last
    /// closed is recorded.
    static func recordTicketLevel(_ rating: RatingRecord, closedAt: Double, on tx: PostgresConnection) throws -> Bool {
        try lockTicket(rating.ticketId, on: tx)
        let same = try tx.query("""
            SELECT 1 FROM csat_ratings WHERE ticket_id = $1 AND message_id <> 0 AND score IS NOT DISTINCT FROM $2
               AND comment IS NOT DISTINCT FROM $3 LIMIT 1
            """, [rating.ticketId, rating.score, rating.comment])
        guard same.isEmpty else { return false }
        if let latest = try tx.query("""
            SELECT message_id FROM csat_requests WHERE ticket_id = $1 ORDER BY requested_at DESC, message_id DESC LIMIT 1
            """, [rating.ticketId]).first {
            return try record(rating.answering(messageId: try latest.decode(0)), on: tx)
        }
        let existing = try tx.query("""
            SELECT 1 FROM csat_ratings WHERE ticket_id = $1 AND message_id <> 0 AND rated_at >= to_timestamp($2) LIMIT 1
            """, [rating.ticketId, closedAt])
        guard existing.isEmpty else { return false }
        return try record(rating, on: tx)
    }

    /// Makes sure every configured zone has rollups. A new zone is first registered (under a brief SHARE lock, so
    /// no rating is in flight) together with the highest rating and request ids at that moment: later ones update its
    /// rollups as they arrive, and the backfill adds exactly the older ones, without holding any table lock. Reports
    /// use the zone's rollups only once the backfill is done; an interrupted backfill starts over.
    /// Both steps take the zone lock at transaction level (a session lock would not hold through a transaction
    /// pooler); the registration's time marks it, and only the latest registration is backfilled, so two instances
    /// never add the same ratings twice. Returns the zones that were backfilled.
    @discardableResult
    public func ensureZones(_ zones: [String]) async throws -> [String] {
        try await pool.withConnection { connection in
            var added: [String] = []
            for zone in zones {
                let registration = try connection.transaction { tx -> (Int, Int, String)? in
                    try tx.query("SELECT pg_advisory_xact_lock($1)", [Self.zoneLock])
                    let state = try tx.query("SELECT backfilled_at IS NOT NULL FROM report_zones WHERE zone = $1", [zone])
                    if let done = state.first, try done.decode(0, as: Bool.self) { return nil }
                    try tx.query("LOCK TABLE csat_ratings, csat_requests IN SHARE MODE")
                    try tx.query("DELETE FROM csat_detail_blocks WHERE zone_id IN (SELECT id FROM report_zones WHERE zone = $1)", [zone])
                    try tx.query("DELETE FROM csat_blocks WHERE zone_id IN (SELECT id FROM report_zones WHERE zone = $1)", [zone])
                    let row = try tx.query("""
                        INSERT INTO report_zones (zone, last_rating_id, last_request_id, added_at)
                        SELECT $1, (SELECT coalesce(max(id), 0) FROM csat_ratings), (SELECT coalesce(max(id), 0) FROM csat_requests),
                               clock_timestamp()
                        ON CONFLICT (zone) DO UPDATE SET last_rating_id = EXCLUDED.last_rating_id,
                            last_request_id = EXCLUDED.last_request_id, added_at = EXCLUDED.added_at, backfilled_at = NULL
                        RETURNING last_rating_id, last_request_id, added_at::text
                        """, [zone])
                    return (try row[0].decode(0), try row[0].decode(1), try row[0].decode(2))
                }
                guard let (lastRating, lastRequest, mark) = registration else { continue }
                let backfilled = try connection.transaction { tx -> Bool in
                    try tx.query("SELECT pg_advisory_xact_lock($1)", [Self.zoneLock])
                    // Registered again by another instance meanwhile: that registration's backfill is the one to run.
                    let current = try tx.query("""
                        SELECT 1 FROM report_zones WHERE zone = $1 AND added_at = $2::timestamptz AND backfilled_at IS NULL
                        """, [zone, mark])
                    guard !current.isEmpty else { return false }
                    try tx.query("SET LOCAL statement_timeout = 0")
                    try Self.backfill(zone: zone, lastRating: lastRating, lastRequest: lastRequest, on: tx)
                    try tx.query("UPDATE report_zones SET backfilled_at = now() WHERE zone = $1", [zone])
                    return true
                }
                if backfilled { added.append(zone) }
            }
            return added
        }
    }

    static let zoneLock: Int64 = 0x4445_534B_5A4E // "DESKZN"

    static let countColumns = "requests, responses, s1, s2, s3, s4, s5"
    /// The `DO UPDATE SET` of the rollup upserts: counts are added, never replaced.
    static let addCounts = ["requests", "responses", "s1", "s2", "s3", "s4", "s5"].map { "\($0) = d.\($0) + EXCLUDED.\($0)" }
        .joined(separator: ", ")

    /// Adds the ratings and requests up to the given ids to the zone's rollups. Later ones are there already: they
    /// were counted live from the moment the zone was registered.
    static func backfill(zone: String, lastRating: Int, lastRequest: Int, on tx: PostgresConnection) throws {
        // Per local day and every dimension first, then spread over the levels.
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
              FROM csat_ratings WHERE id <= $2
             GROUP BY 1, 2, 3, 4, 5
            UNION ALL
            SELECT (requested_at AT TIME ZONE $1)::date, channel_type, priority, coalesce(agent_id, 0), coalesce(team_id, 0), count(*),
                   0, 0, 0, 0, 0, 0
              FROM csat_requests WHERE id <= $3
             GROUP BY 1, 2, 3, 4, 5
            """, [zone, lastRating, lastRequest])
        let zoneId = "(SELECT id FROM report_zones WHERE zone = $1)"
        let sums = "sum(requests), sum(responses), sum(s1), sum(s2), sum(s3), sum(s4), sum(s5)"
        try tx.query("""
            INSERT INTO csat_detail_blocks AS d (zone_id, level, first_day, channel_type, priority, agent_id, team_id, \(Self.countColumns))
            SELECT \(zoneId), level, \(Self.blockStart("day", "level")), channel_type, priority, agent_id, team_id, \(sums)
              FROM backfill_days CROSS JOIN generate_series(0, \(RollupBlocks.maxLevel)) AS level
             GROUP BY 2, 3, 4, 5, 6, 7
            ON CONFLICT (zone_id, level, first_day, channel_type, priority, agent_id, team_id) DO UPDATE SET \(Self.addCounts)
            """, [zone])
        try tx.query("""
            INSERT INTO csat_blocks AS d (zone_id, level, first_day, agent_id, team_id, \(Self.countColumns))
            SELECT \(zoneId), level, \(Self.blockStart("day", "level")), agent_id, team_id, \(sums)
              FROM backfill_days CROSS JOIN generate_series(0, \(RollupBlocks.maxLevel)) AS level
             GROUP BY 2, 3, 4, 5
            ON CONFLICT (zone_id, level, first_day, agent_id, team_id) DO UPDATE SET \(Self.addCounts)
            """, [zone])
    }

    /// Zones whose rollups are complete (reports may read them).
    public func zones() async throws -> Set<String> {
        Set(try await pool.query("SELECT zone FROM report_zones WHERE backfilled_at IS NOT NULL").map { try $0.decode(0, as: String.self) })
    }

    @discardableResult
    public func recordRequest(_ request: CSATRequestRecord) async throws -> Bool {
        try await recordRequest(ticketId: request.ticketId, messageId: request.messageId, agentId: request.agentId, teamId: request.teamId,
                                channelType: request.channelType, priority: request.priority, requestedAt: request.requestedAt)
    }

    @discardableResult
    public func recordRequest(ticketId: Int, messageId: Int, agentId: Int?, teamId: Int?, channelType: String, priority: TicketPriority,
                              requestedAt: Double) async throws -> Bool {
        try await pool.transaction { tx in
            try Self.recordRequest(ticketId: ticketId, messageId: messageId, agentId: agentId, teamId: teamId, channelType: channelType,
                                   priority: priority, requestedAt: requestedAt, on: tx)
        }
    }

    static func recordRequest(ticketId: Int, messageId: Int, agentId: Int?, teamId: Int?, channelType: String, priority: TicketPriority,
                               requestedAt: Double, on tx: PostgresConnection) throws -> Bool {
        let inserted = try tx.query("""
            INSERT INTO csat_requests (ticket_id, message_id, agent_id, team_id, channel_type, priority, requested_at)
            VALUES ($1, $2, $3, $4, $5, $6, to_timestamp($7))
            ON CONFLICT DO NOTHING RETURNING 1
            """, [ticketId, messageId, agentId, teamId, channelType, priority.rawValue, requestedAt])
        guard !inserted.isEmpty else { return false }
        try addToRollups(on: tx, at: requestedAt, agentId: agentId, teamId: teamId, channelType: channelType, priority: priority.rawValue,
                         requests: 1, score: nil)
        return true
    }
}
