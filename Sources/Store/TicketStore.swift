public import Domain
import Postgres

/// The PostgreSQL ticket cache.
public struct TicketStore: TicketRepository {
    let database: Database

    public init(database: Database) {
        self.database = database
    }

    static let columns = """
        id, customer_id, channel_url, status, document, extract(epoch FROM fetched_at)::float8, extract(epoch FROM created_at)::float8,
        pending_operations::text
        """

    static func decode(_ row: PostgresRow) throws -> CachedTicket {
        CachedTicket(id: try row.decode(0), customerId: try row.decode(1), channelUrl: try row.decode(2), status: try row.decode(3),
                     document: try row.decode(4), fetchedAt: try row.decode(5), createdAt: try row.decode(6),
                     pendingOperations: try row.decode(7))
    }

    /// Writes the rows in one transaction; returns the cached tickets that Desk gave to another customer or channel.
    @discardableResult
    public func upsert(_ rows: [TicketRow]) async throws -> [OwnershipChange] {
        guard !rows.isEmpty else { return [] }
        // A fixed lock order keeps concurrent writers (list refreshes, webhooks) from deadlocking: agents by id, then
        // tickets by id.
        let ordered = rows.sorted { $0.id < $1.id }
        var agents: [Int: TicketRow] = [:]
        for row in ordered { if let agent = row.agentId { agents[agent] = row } }
        let agentRows = agents.sorted { $0.key < $1.key }.map(\.value)
        let write = { @Sendable (tx: PostgresConnection) throws -> [OwnershipChange] in
            for row in agentRows { try Self.upsertAgent(of: row, on: tx) }
            return try ordered.compactMap { row in try Self.upsert(row, on: tx, agentWritten: true) }
        }
        do {
            return try await database.transaction(write)
        } catch let error as DomainError where error.code == .conflict {
            // Another writer (a webhook for the ticket just created) inserted the same ticket between this
            // statement's check and its insert: the row exists now, so the same upsert updates it.
            return try await database.transaction(write)
        }
    }

    /// Writes one ticket on an open connection (used inside larger transactions too). The rule of which state wins
    /// lives here, inside the statement (so concurrent writers cannot race past it): an older state (by Desk's
    /// `updatedAt`) never overwrites a newer one, so late or reordered webhooks are harmless. Desk owns the ticket's
    /// customer and channel: when they differ from the cached row (the database once cached another Desk, or the
    /// ticket moved), Desk's values win whatever the timestamps say, a cached row of another id holding the same channel
    /// is dropped, and the change is returned so the caller can report it.
    /// The ticket's agent, as Desk names it now. Neither statement locks an agent row that does not change (ON
    /// CONFLICT DO UPDATE would lock it even when its WHERE is false), so writers for the same agent rarely meet here.
    static func upsertAgent(of row: TicketRow, on tx: PostgresConnection) throws {
        guard let agentId = row.agentId else { return }
        try tx.query("INSERT INTO agents (id, display_name, sendbird_id) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING",
                     [agentId, row.agentName ?? "", row.agentSendbirdId])
        try tx.query("""
            UPDATE agents SET display_name = $2, sendbird_id = COALESCE($3, sendbird_id), updated_at = now()
             WHERE id = $1 AND display_name IS DISTINCT FROM $2
            """, [agentId, row.agentName ?? "", row.agentSendbirdId])
    }

    @discardableResult
    static func upsert(_ row: TicketRow, on tx: PostgresConnection, agentWritten: Bool = false) throws -> OwnershipChange? {
        if !agentWritten { try upsertAgent(of: row, on: tx) }
        // Its own statement: a unique check does not see a row deleted earlier in the same statement.
        try tx.query("DELETE FROM tickets WHERE channel_url = $1 AND id <> $2", [row.channelUrl, row.id])
        let previous = try tx.query("""
            WITH previous AS (SELECT customer_id, channel_url FROM tickets WHERE id = $1),
            written AS (
                INSERT INTO tickets (id, customer_id, channel_url, status, priority, title, team_id, agent_id, custom_fields,
                                     created_at, updated_at, closed_at, document, desk, fetched_at)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, to_timestamp($10), to_timestamp($11), to_timestamp($12),
                        $13, $14::jsonb, now())
                ON CONFLICT (id) DO UPDATE SET
                    customer_id = EXCLUDED.customer_id, channel_url = EXCLUDED.channel_url, created_at = EXCLUDED.created_at,
                    status = EXCLUDED.status, priority = EXCLUDED.priority, title = EXCLUDED.title, team_id = EXCLUDED.team_id,
                    agent_id = EXCLUDED.agent_id, custom_fields = EXCLUDED.custom_fields, updated_at = EXCLUDED.updated_at,
                    closed_at = EXCLUDED.closed_at, document = EXCLUDED.document, desk = EXCLUDED.desk, fetched_at = now()
                WHERE tickets.updated_at <= EXCLUDED.updated_at OR tickets.customer_id <> EXCLUDED.customer_id
                   OR tickets.channel_url <> EXCLUDED.channel_url)
            SELECT customer_id, channel_url FROM previous WHERE customer_id <> $2 OR channel_url <> $3
            """, [row.id, row.customerId, row.channelUrl, row.status, row.priority, row.title, row.teamId, row.agentId,
                  row.customFields, row.createdAt, row.updatedAt, row.closedAt, row.document, row.desk])
        guard let old = previous.first else { return nil }
        return OwnershipChange(ticketId: row.id, previousCustomerId: try old.decode(0), customerId: row.customerId,
                               previousChannelUrl: try old.decode(1), channelUrl: row.channelUrl)
    }

    public func find(id: Int) async throws -> CachedTicket? {
        try await database.query("SELECT \(Self.columns) FROM tickets WHERE id = $1", [id]).first.map(Self.decode)
    }

    public func find(channelUrl: String) async throws -> CachedTicket? {
        try await database.query("SELECT \(Self.columns) FROM tickets WHERE channel_url = $1", [channelUrl]).first.map(Self.decode)
    }

    /// Newest first, keyset-paged after (createdAt, id); `customFields` is a JSON object every match must contain.
    public func list(customerId: Int, closed: Bool?, customFields: String?, after cursor: (createdAt: Double, id: Int)?,
                     limit: Int) async throws -> [CachedTicket] {
        var sql = "SELECT \(Self.columns) FROM tickets WHERE customer_id = $1"
        var binds: [any PostgresEncodable] = [customerId]
        if let closed {
            binds.append(closed)
            sql += " AND (status = 'CLOSED') = $\(binds.count)"
        }
        if let customFields {
            binds.append(customFields)
            sql += " AND custom_fields @> $\(binds.count)::jsonb"
        }
        if let cursor {
            binds.append(cursor.createdAt)
            binds.append(cursor.id)
            sql += " AND (created_at, id) < (to_timestamp($\(binds.count - 1)), $\(binds.count))"
        }
        binds.append(limit)
        sql += " ORDER BY created_at DESC, id DESC LIMIT $\(binds.count)"
        return try await database.query(sql, binds).map(Self.decode)
    }

    public func openCount(customerId: Int) async throws -> Int {
        try await database.query("SELECT count(*) FROM tickets WHERE customer_id = $1 AND status <> 'CLOSED'", [customerId])[0].decode(0)
    }

    /// Seconds since 1970 of the last full list read from Desk for this customer.
    public func lastSync(customerId: Int) async throws -> Double? {
        try await database.query("SELECT extract(epoch FROM synced_at)::float8 FROM customer_syncs WHERE customer_id = $1",
                             [customerId]).first?.decode(0)
    }

    public func markSynced(customerId: Int) async throws {
        try await database.query("""
            INSERT INTO customer_syncs (customer_id, synced_at) VALUES ($1, now())
            ON CONFLICT (customer_id) DO UPDATE SET synced_at = now()
            """, [customerId])
    }

    /// Team names and keys by id, for rendering.
    public func teams() async throws -> [Int: (key: String?, name: String)] {
        var result: [Int: (key: String?, name: String)] = [:]
        for row in try await database.query("SELECT id, key, name FROM teams") {
            result[try row.decode(0)] = (try row.decodeIfPresent(1), try row.decode(2))
        }
        return result
    }

    public func upsertTeams(_ teams: [(id: Int, key: String, name: String)]) async throws {
        guard !teams.isEmpty else { return }
        try await database.transaction { tx in
            for team in teams {
                try tx.query("""
                    INSERT INTO teams (id, key, name) VALUES ($1, $2, $3)
                    ON CONFLICT (id) DO UPDATE SET key = EXCLUDED.key, name = EXCLUDED.name, updated_at = now()
                    """, [team.id, team.key, team.name])
            }
        }
    }
}

extension TicketStore {
    /// The gateway's customer id for a Sendbird user, creating the customer when Desk mentions one first.
    static func customerId(sendbirdId: String, on tx: PostgresConnection) throws -> Int {
        try tx.query("""
            INSERT INTO customers (sendbird_id) VALUES ($1)
            ON CONFLICT (sendbird_id) DO UPDATE SET updated_at = customers.updated_at
            RETURNING id
            """, [sendbirdId])[0].decode(0)
    }

    public func pendingOperations(ticketId: Int) async throws -> String {
        try await database.query("SELECT pending_operations::text FROM tickets WHERE id = $1", [ticketId]).first?.decode(0) ?? "[]"
    }
}

extension TicketStore {
    public func snapshot(ticketId: Int) async throws -> TicketSnapshot? {
        try await database.query("SELECT customer_id, agent_id, team_id, priority, coalesce(desk->>'channelType', 'UNKNOWN') FROM tickets WHERE id = $1",
                             [ticketId]).first.map { row in
            TicketSnapshot(customerId: try row.decode(0), agentId: try row.decodeIfPresent(1), teamId: try row.decodeIfPresent(2),
                     priority: TicketPriority(rawValue: try row.decode(3)) ?? .medium, channelType: try row.decode(4))
        }
    }
}
