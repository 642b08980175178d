public import Postgres

/// One rating as it is recorded: the agent, team, channel and priority are those of the ticket when it was rated.
public struct RatingRecord: Sendable {
    public let ticketId: Int
    public let messageId: Int
    public let score: Int?
    public let comment: String?
    public let agentId: Int?
    public let teamId: Int?
    public let channelType: String
    public let priority: String
    public let customerSendbirdId: String?
    public let ratedAt: Double
    public let source: String

    public init(ticketId: Int, messageId: Int, score: Int?, comment: String?, agentId: Int?, teamId: Int?, channelType: String,
                priority: String, customerSendbirdId: String?, ratedAt: Double, source: String) {
        self.ticketId = ticketId
        self.messageId = messageId
        self.score = score
        self.comment = comment
        self.agentId = agentId
        self.teamId = teamId
        self.channelType = channelType
        self.priority = priority
        self.customerSendbirdId = customerSendbirdId
        self.ratedAt = ratedAt
        self.source = source
    }
}

/// CSAT ratings and requests in PostgreSQL. The same rating arriving again (gateway, webhook, sync) is stored once.
public struct CSATStore: Sendable {
    let pool: PostgresPool

    public init(pool: PostgresPool) {
        self.pool = pool
    }

    /// Returns whether the rating was new.
    @discardableResult
    public func record(_ rating: RatingRecord) async throws -> Bool {
        try await pool.transaction { tx in try Self.record(rating, on: tx) }
    }

    public static func record(_ rating: RatingRecord, on tx: PostgresConnection) throws -> Bool {
        let inserted = try tx.query("""
            INSERT INTO csat_ratings (ticket_id, message_id, score, comment, agent_id, team_id, channel_type, priority,
                                      customer_sendbird_id, rated_at, source)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, to_timestamp($10), $11)
            ON CONFLICT (ticket_id, message_id) DO NOTHING
            RETURNING id
            """, [rating.ticketId, rating.messageId, rating.score, rating.comment, rating.agentId, rating.teamId,
                  rating.channelType, rating.priority, rating.customerSendbirdId, rating.ratedAt, rating.source])
        return !inserted.isEmpty
    }

    @discardableResult
    public func recordRequest(ticketId: Int, messageId: Int, agentId: Int?, teamId: Int?, channelType: String, priority: String,
                              requestedAt: Double) async throws -> Bool {
        let inserted = try await pool.query("""
            INSERT INTO csat_requests (ticket_id, message_id, agent_id, team_id, channel_type, priority, requested_at)
            VALUES ($1, $2, $3, $4, $5, $6, to_timestamp($7))
            ON CONFLICT DO NOTHING RETURNING 1
            """, [ticketId, messageId, agentId, teamId, channelType, priority, requestedAt])
        return !inserted.isEmpty
    }
}
