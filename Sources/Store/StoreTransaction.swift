public import Domain
import Postgres

/// The writes an inbox event may make, all inside the inbox's transaction: what the webhook applier sees of the
/// database, with no SQL and no PostgreSQL types above `Store`.
public struct StoreTransaction {
    let connection: PostgresConnection

    /// The customer's row id, created on first sight.
    public func customerId(sendbirdId: String) throws -> Int {
        try TicketStore.customerId(sendbirdId: sendbirdId, on: connection)
    }

    /// Caches Desk's view of a ticket; returns the ownership change when Desk moved it.
    public func upsert(_ row: TicketRow) throws -> OwnershipChange? {
        try TicketStore.upsert(row, on: connection)
    }

    /// Records one CSAT fact; returns whether anything changed.
    @discardableResult
    public func apply(_ write: RatingWrite) throws -> Bool {
        switch write {
        case .request(let request):
            return try CSATStore.recordRequest(ticketId: request.ticketId, messageId: request.messageId, agentId: request.agentId,
                                               teamId: request.teamId, channelType: request.channelType, priority: request.priority,
                                               requestedAt: request.requestedAt, on: connection)
        case .rating(let rating):
            return try CSATStore.record(rating, on: connection)
        case .ticketLevel(let rating, let closedAt):
            return try CSATStore.recordTicketLevel(rating, closedAt: closedAt, on: connection)
        }
    }
}
