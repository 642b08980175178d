public import DeskClient
import Domain
import Foundation
public import Logging
public import Postgres
import Store

/// What a sync run did.
public struct SyncSummary: Sendable, CustomStringConvertible {
    public var agents = 0
    public var teams = 0
    public var pages = 0
    public var tickets = 0
    public var requests = 0
    public var newRequests = 0
    public var ratings = 0
    public var newRatings = 0
    public var seconds = 0.0
    public var skipped = false

    public var description: String {
        if skipped { return "sync skipped: another instance holds the sync lease" }
        return "agents \(agents), teams \(teams), pages \(pages), closed tickets \(tickets), CSAT requests \(requests) (\(newRequests) new), "
            + "ratings \(ratings) (\(newRatings) new) in \(String(format: "%.1f", seconds)) s"
    }
}

/// Pulls agents, teams and closed tickets with their CSAT from Desk's Platform API, incrementally (a watermark on
/// `updatedAt`). Several instances may run it: a lease in `sync_state` lets one work at a time.
/// Ratings found here get the agent and team the ticket has at sync time; the gateway's own feedback and webhooks
/// record them when they happen, and the same rating is stored once whichever path sees it first.
public struct DeskSync: Sendable {
    let desk: DeskClient
    let pool: PostgresPool
    let logger: Logger
    let instance = UUID().uuidString

    public init(desk: DeskClient, pool: PostgresPool, logger: Logger) {
        self.desk = desk
        self.pool = pool
        self.logger = logger
    }

    public func run(progress: @Sendable (SyncSummary) -> Void = { _ in }) async throws -> SyncSummary {
        let started = Date()
        var summary = SyncSummary()
        guard try await takeLease() else {
            summary.skipped = true
            return summary
        }
        defer { Task { [pool, instance] in _ = try? await pool.query("DELETE FROM sync_state WHERE name = 'lease' AND value = $1", [instance]) } }

        var offset = 0
        while true {
            let page = try await desk.agents(limit: 100, offset: offset)
            try await pool.transaction { tx in
                for agent in page.results {
                    try tx.query("""
                        INSERT INTO agents (id, display_name, sendbird_id) VALUES ($1, $2, $3)
                        ON CONFLICT (id) DO UPDATE SET display_name = EXCLUDED.display_name, sendbird_id = EXCLUDED.sendbird_id, updated_at = now()
                        """, [agent.id, agent.displayName, agent.sendbirdId])
                }
            }
            summary.agents += page.results.count
            offset += page.results.count
            if !page.hasNext || page.results.isEmpty { break }
        }
        offset = 0
        let store = TicketStore(pool: pool)
        while true {
            let page = try await desk.teams(limit: 100, offset: offset)
            try await store.upsertTeams(page.results.map { (id: $0.id, key: $0.key, name: $0.name) })
            summary.teams += page.results.count
            offset += page.results.count
            if !page.hasNext || page.results.isEmpty { break }
        }
        progress(summary)

        let watermark = try await pool.query("SELECT value FROM sync_state WHERE name = 'tickets.updated_after'").first
            .flatMap { $0[0] }.flatMap(Double.init) ?? 0
        var newest = watermark
        let ratings = CSATStore(pool: pool)
        offset = 0
        while true {
            let page = try await desk.platformTickets(limit: 100, offset: offset, status: [.closed], updatedAfter: watermark)
            summary.pages += 1
            for ticket in page.results {
                summary.tickets += 1
                newest = max(newest, ticket.updatedAt ?? 0)
                try await collect(ticket, into: &summary, ratings: ratings)
            }
            progress(summary)
            try await renewLease()
            offset += page.results.count
            if !page.hasNext || page.results.isEmpty { break }
        }
        if newest > watermark {
            // A millisecond of overlap: a ticket updated in the same millisecond is read again (and deduplicated).
            try await pool.query("""
                INSERT INTO sync_state (name, value) VALUES ('tickets.updated_after', $1)
                ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, updated_at = now()
                """, [String(newest - 0.001)])
        }
        summary.seconds = Date().timeIntervalSince(started)
        return summary
    }

    private func collect(_ ticket: DeskTicket, into summary: inout SyncSummary, ratings: CSATStore) async throws {
        let channel = ticket.channelType ?? "UNKNOWN"
        var messages: [DeskMessage] = []
        var messagesAvailable = true
        switch await allMessages(ticket.id) {
        case .success(let all): messages = all
        case .failure(let error):
            guard error.code == .notFound else { throw error }
            messagesAvailable = false
        }
        for message in messages where message.isCSATRequest {
            summary.requests += 1
            if try await ratings.recordRequest(ticketId: ticket.id, messageId: message.messageId, agentId: ticket.agent?.id,
                                               teamId: ticket.groupId, channelType: channel, priority: ticket.priority.rawValue,
                                               requestedAt: message.createdAt ?? ticket.closedAt ?? 0) {
                summary.newRequests += 1
            }
            guard message.state == .confirmed, let score = message.score else { continue }
            summary.ratings += 1
            let recorded = try await ratings.record(RatingRecord(
                ticketId: ticket.id, messageId: message.messageId, score: score, comment: message.comment, agentId: ticket.agent?.id,
                teamId: ticket.groupId, channelType: channel, priority: ticket.priority.rawValue, customerSendbirdId: ticket.customerSendbirdId,
                ratedAt: message.updatedAt ?? ticket.updatedAt ?? 0, source: "sync"))
            if recorded { summary.newRatings += 1 }
        }
        if !messagesAvailable, let score = ticket.satisfactionScore {
            summary.ratings += 1
            let recorded = try await ratings.recordTicketLevel(RatingRecord(
                ticketId: ticket.id, messageId: 0, score: score, comment: ticket.satisfactionComment, agentId: ticket.agent?.id,
                teamId: ticket.groupId, channelType: channel, priority: ticket.priority.rawValue, customerSendbirdId: ticket.customerSendbirdId,
                ratedAt: ticket.updatedAt ?? ticket.closedAt ?? 0, source: "sync"), closedAt: ticket.closedAt ?? 0)
            if recorded { summary.newRatings += 1 }
        }
    }

    private func allMessages(_ ticketId: Int) async -> Result<[DeskMessage], DomainError> {
        var messages: [DeskMessage] = []
        var offset = 0
        while true {
            let page: DeskPage<DeskMessage>
            do {
                page = try await desk.chatMessages(ticketId: ticketId, limit: 100, offset: offset)
            } catch {
                return .failure(error)
            }
            messages += page.results
            offset += page.results.count
            if !page.hasNext || page.results.isEmpty { return .success(messages) }
        }
    }

    /// A two-minute lease, renewed per page; a crashed holder's lease simply runs out.
    private func takeLease() async throws -> Bool {
        let rows = try await pool.query("""
            INSERT INTO sync_state (name, value) VALUES ('lease', $1)
            ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, updated_at = now()
             WHERE sync_state.value = EXCLUDED.value OR sync_state.updated_at < now() - interval '2 minutes'
            RETURNING 1
            """, [instance])
        return !rows.isEmpty
    }

    private func renewLease() async throws {
        try await pool.query("UPDATE sync_state SET updated_at = now() WHERE name = 'lease' AND value = $1", [instance])
    }
}
