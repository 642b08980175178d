import Domain
import Postgres
import Reports

/// The CSAT writes of one transaction, by one rule for every path (feedback, webhook, sync, outbox delivery).
///
/// Lock order, the same in every transaction that writes CSAT data, so no two of them can wait on each other in a
/// circle: the ticket's advisory lock, then the zone lock (shared; a zone build's step holds it exclusively), then the
/// ticket's own request and rating rows, and last the rollup rows, all of them in one statement per rollup table
/// at the end of the transaction (`finish`), sorted by their key, the team rows (shared by every agent of a team) the
/// last of them. Rollup rows are shared by every ticket of an agent and every day of a block; taken as each answer
/// came, two transactions with two answers each could hold one row the other wanted.
final class CSATWriter {
    let tx: PostgresConnection
    private var deltas = RollupDeltas()

    init(_ tx: PostgresConnection) {
        self.tx = tx
    }

    /// Hands over the rollup changes collected so far (they are this writer's no more).
    func take() -> RollupDeltas {
        defer { deltas = RollupDeltas() }
        return deltas
    }

    /// Adds changes another writer collected in the same transaction, to be written with these at the end.
    func absorb(_ other: RollupDeltas) {
        deltas.append(other)
    }

    /// Runs `body` with a writer on `tx` and writes its rollups at the end.
    static func run<T>(on tx: PostgresConnection, _ body: (CSATWriter) throws -> T) throws -> T {
        let writer = CSATWriter(tx)
        let result = try body(writer)
        try writer.finish()
        return result
    }

    /// One answer to one CSAT request (message 0: the ticket's own score when no request is known).
    /// - The first answer is inserted; a rating whose agent and team come from the gateway's cache takes the ones
    ///   Desk gave the request, when the request is known.
    /// - A later, different answer replaces it, in the row and in every rollup, as Desk keeps the last answer; an
    ///   older one arriving late, or the same one again, changes nothing. An answer from the CSAT message always
    ///   replaces one inferred from the ticket's score; an inferred one never replaces a score from a message.
    /// - A row with the cache's attribution is moved to Desk's attribution when Desk's word arrives.
    /// Returns whether anything changed.
    func record(_ given: RatingRecord) throws -> Bool {
        try lockTicket(given.ticketId)
        var rating = given
        if rating.messageId != 0 {
            if rating.attributionInferred, let request = try tx.query(
                "SELECT agent_id, team_id FROM csat_requests WHERE ticket_id = $1 AND message_id = $2",
                [rating.ticketId, rating.messageId]).first {
                rating = rating.attributed(agentId: try request.decodeIfPresent(0), teamId: try request.decodeIfPresent(1))
            }
            try absorbTicketLevel(of: rating)
        }
        let inserted = try tx.query("""
            INSERT INTO csat_ratings (ticket_id, message_id, score, comment, agent_id, team_id, channel_type, priority,
                                      customer_sendbird_id, rated_at, source, inferred, attribution_inferred)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, to_timestamp($10), $11, $12, $13)
            ON CONFLICT (ticket_id, message_id) DO NOTHING
            RETURNING id
            """, [rating.ticketId, rating.messageId, rating.score, rating.comment, rating.agentId, rating.teamId,
                  rating.channelType, rating.priority.rawValue, rating.customerSendbirdId, rating.ratedAt, rating.source.rawValue,
                  rating.inferred, rating.attributionInferred])
        if !inserted.isEmpty {
            deltas.add(at: rating.ratedAt, agentId: rating.agentId, teamId: rating.teamId, channelType: rating.channelType,
                       priority: rating.priority.rawValue, score: rating.score)
            return true
        }
        guard var existing = try StoredRating.find(ticketId: rating.ticketId, messageId: rating.messageId, on: tx) else { return false }
        var changed = false
        if existing.attributionInferred, !rating.attributionInferred {
            changed = try reattribute(&existing, agentId: rating.agentId, teamId: rating.teamId)
        }
        guard rating.replaces(score: existing.score, comment: existing.comment, ratedAt: existing.ratedAt, inferred: existing.inferred) else {
            return changed
        }
        try tx.query("""
            UPDATE csat_ratings SET score = $2, comment = $3, rated_at = to_timestamp($4), source = $5, inferred = $6, recorded_at = now()
             WHERE id = $1
            """, [existing.id, rating.score, rating.comment, rating.ratedAt, rating.source.rawValue, rating.inferred])
        deltas.add(at: existing.ratedAt, agentId: existing.agentId, teamId: existing.teamId, channelType: existing.channelType,
                   priority: existing.priority, score: existing.score, sign: -1)
        deltas.add(at: rating.ratedAt, agentId: existing.agentId, teamId: existing.teamId, channelType: existing.channelType,
                   priority: existing.priority, score: rating.score)
        return true
    }

    /// Moves a response recorded with the cache's agent and team to Desk's; returns whether the counts moved.
    private func reattribute(_ existing: inout StoredRating, agentId: Int?, teamId: Int?) throws -> Bool {
        try tx.query("UPDATE csat_ratings SET agent_id = $2, team_id = $3, attribution_inferred = false WHERE id = $1",
                     [existing.id, agentId, teamId])
        guard (existing.agentId, existing.teamId) != (agentId, teamId) else { return false }
        deltas.add(at: existing.ratedAt, agentId: existing.agentId, teamId: existing.teamId, channelType: existing.channelType,
                   priority: existing.priority, score: existing.score, sign: -1)
        deltas.add(at: existing.ratedAt, agentId: agentId, teamId: teamId, channelType: existing.channelType,
                   priority: existing.priority, score: existing.score)
        (existing.agentId, existing.teamId, existing.attributionInferred) = (agentId, teamId, false)
        return true
    }

    /// The ticket's own score (`rating.inferred`), placed where it belongs, or nowhere:
    /// 1. the same answer (score and comment) already recorded for this ticket is that answer: nothing new (a
    ///    reopened ticket's next CSAT request arrives with the old score, which is no answer to it);
    /// 2. otherwise it answers the latest known request that has no score from a CSAT message (one with none, a
    ///    decline, or an earlier inferred answer);
    /// 3. with requests known but each answered by a message, it answers one the gateway has not seen yet, and the
    ///    message itself will tell (webhook or sync): nothing is recorded now;
    /// 4. with no request known, it is a ticket-level rating (message 0), unless a message answer was recorded since
    ///    the ticket was last closed; the request's own answer absorbs it later.
    func recordTicketLevel(_ rating: RatingRecord, closedAt: Double) throws -> Bool {
        try lockTicket(rating.ticketId)
        let same = try tx.query("""
            SELECT 1 FROM csat_ratings WHERE ticket_id = $1 AND score IS NOT DISTINCT FROM $2 AND comment IS NOT DISTINCT FROM $3 LIMIT 1
            """, [rating.ticketId, rating.score, rating.comment])
        guard same.isEmpty else { return false }
        let requests = try tx.query("""
            SELECT r.message_id, EXISTS (SELECT 1 FROM csat_ratings x WHERE x.ticket_id = r.ticket_id AND x.message_id = r.message_id
                                                                        AND x.score IS NOT NULL AND NOT x.inferred)
              FROM csat_requests r WHERE r.ticket_id = $1 ORDER BY r.requested_at DESC, r.message_id DESC
            """, [rating.ticketId])
        if !requests.isEmpty {
            for row in requests.rows {
                let answered: Bool = try row.decode(1)
                if !answered { return try record(rating.answering(messageId: try row.decode(0))) }
            }
            return false
        }
        let existing = try tx.query("""
            SELECT 1 FROM csat_ratings WHERE ticket_id = $1 AND message_id <> 0 AND rated_at >= to_timestamp($2) LIMIT 1
            """, [rating.ticketId, closedAt])
        guard existing.isEmpty else { return false }
        return try record(rating)
    }

    /// A CSAT request Desk sent. A rating of it recorded earlier with the cache's agent and team (a decline given
    /// before the request's webhook arrived) takes the request's, which are Desk's.
    func recordRequest(_ request: CSATRequestRecord) throws -> Bool {
        try lockTicket(request.ticketId)
        let inserted = try tx.query("""
            INSERT INTO csat_requests (ticket_id, message_id, agent_id, team_id, channel_type, priority, requested_at)
            VALUES ($1, $2, $3, $4, $5, $6, to_timestamp($7))
            ON CONFLICT DO NOTHING RETURNING 1
            """, [request.ticketId, request.messageId, request.agentId, request.teamId, request.channelType, request.priority.rawValue,
                  request.requestedAt])
        guard !inserted.isEmpty else { return false }
        deltas.add(at: request.requestedAt, agentId: request.agentId, teamId: request.teamId, channelType: request.channelType,
                   priority: request.priority.rawValue, requests: 1, score: nil)
        if var rating = try StoredRating.find(ticketId: request.ticketId, messageId: request.messageId, on: tx), rating.attributionInferred {
            _ = try reattribute(&rating, agentId: request.agentId, teamId: request.teamId)
        }
        return true
    }

    /// Ratings and requests of one ticket are written one transaction at a time: a ticket-level answer and the same
    /// answer by message, arriving together on two paths, must see each other to count once.
    private func lockTicket(_ ticketId: Int) throws {
        try tx.query("SELECT pg_advisory_xact_lock(1129534804, ($1::bigint % 2147483647)::int)", [ticketId])
        try tx.query("SELECT pg_advisory_xact_lock_shared($1)", [CSATStore.zoneLock])
    }

    /// A ticket-level rating (message 0, from the ticket's own fields) recorded since this request was sent is the same
    /// answer this message-level rating now names: it is taken out, rollups included, so the answer counts once.
    private func absorbTicketLevel(of rating: RatingRecord) throws {
        let removed = try tx.query("""
            DELETE FROM csat_ratings WHERE ticket_id = $1 AND message_id = 0
               AND rated_at >= coalesce((SELECT requested_at FROM csat_requests WHERE ticket_id = $1 AND message_id = $2), '-infinity')
            RETURNING score, agent_id, team_id, channel_type, priority, extract(epoch FROM rated_at)::float8
            """, [rating.ticketId, rating.messageId])
        for row in removed.rows {
            deltas.add(at: try row.decode(5), agentId: try row.decodeIfPresent(1), teamId: try row.decodeIfPresent(2),
                       channelType: try row.decode(3), priority: try row.decode(4), score: try row.decodeIfPresent(0), sign: -1)
        }
    }

    /// Writes the transaction's rollup changes: every zone, every level, with and without channel type and priority,
    /// summed per row and upserted in key order. A zone being built gets the changes dated before the time its build
    /// has counted up to; a later one is left to the build, which counts the row as it is when it gets there
    /// (`CSATStore.ensureZones`).
    func finish() throws {
        guard !deltas.isEmpty else { return }
        defer { deltas = RollupDeltas() }
        let d = deltas
        try tx.query(CSATStore.writingOwnBlocks)
        let binds: [any PostgresEncodable] = [d.times, d.agents, d.teams, d.channels, d.priorities, d.requests, d.responses,
                                              d.scores[0], d.scores[1], d.scores[2], d.scores[3], d.scores[4]]
        let blocks = """
            SELECT z.id AS zone_id, level, \(CSATStore.blockStart("(to_timestamp(d.t) AT TIME ZONE z.zone)::date", "level")) AS first_day,
                   d.channel_type, d.priority, d.agent_id, d.team_id, d.requests, d.responses, d.s1, d.s2, d.s3, d.s4, d.s5
              FROM unnest($1::float8[], $2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::bigint[], $7::bigint[], $8::bigint[],
                          $9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[])
                   AS d(t, agent_id, team_id, channel_type, priority, requests, responses, s1, s2, s3, s4, s5)
              JOIN report_zones z ON z.backfilled_at IS NOT NULL OR to_timestamp(d.t) < z.counted_until
             CROSS JOIN \(CSATStore.levels) AS level
            """
        for (table, keys) in CSATStore.rollupTables {
            try tx.query(CSATStore.addingRollups(to: table, keys: keys, from: blocks, ordered: true), binds)
        }
    }
}

/// A rating row as stored, locked for the rest of the transaction.
struct StoredRating {
    let id: Int
    let score: Int?
    let comment: String?
    var agentId: Int?
    var teamId: Int?
    let channelType: String
    let priority: String
    let ratedAt: Double
    let inferred: Bool
    var attributionInferred: Bool

    static func find(ticketId: Int, messageId: Int, on tx: PostgresConnection) throws -> StoredRating? {
        guard let row = try tx.query("""
            SELECT id, score, comment, agent_id, team_id, channel_type, priority, extract(epoch FROM rated_at)::float8, inferred,
                   attribution_inferred
              FROM csat_ratings WHERE ticket_id = $1 AND message_id = $2 FOR UPDATE
            """, [ticketId, messageId]).first else { return nil }
        return StoredRating(id: try row.decode(0), score: try row.decodeIfPresent(1), comment: try row.decodeIfPresent(2),
                            agentId: try row.decodeIfPresent(3), teamId: try row.decodeIfPresent(4), channelType: try row.decode(5),
                            priority: try row.decode(6), ratedAt: try row.decode(7), inferred: try row.decode(8),
                            attributionInferred: try row.decode(9))
    }
}

/// Rollup changes collected in a transaction: one request (requests = 1) or one response (score nil = declined)
/// each, `sign` -1 taking one back out. Agent and team 0 stand for none, as in the rollup tables.
struct RollupDeltas {
    var times: [Double] = []
    var agents: [Int] = []
    var teams: [Int] = []
    var channels: [String] = []
    var priorities: [String] = []
    var requests: [Int] = []
    var responses: [Int] = []
    var scores: [[Int]] = Array(repeating: [], count: 5)

    var isEmpty: Bool { times.isEmpty }

    mutating func append(_ other: RollupDeltas) {
        times += other.times
        agents += other.agents
        teams += other.teams
        channels += other.channels
        priorities += other.priorities
        requests += other.requests
        responses += other.responses
        for index in 0..<5 { scores[index] += other.scores[index] }
    }

    mutating func add(at time: Double, agentId: Int?, teamId: Int?, channelType: String, priority: String, requests: Int = 0,
                      score: Int?, sign: Int = 1) {
        times.append(time)
        agents.append(agentId ?? 0)
        teams.append(teamId ?? 0)
        channels.append(channelType)
        priorities.append(priority)
        self.requests.append(requests * sign)
        responses.append(requests == 0 ? sign : 0)
        for index in 0..<5 { scores[index].append(score == index + 1 ? sign : 0) }
    }
}
