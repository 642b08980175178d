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

    @discardableResult
    public func recordRequest(ticketId: Int, messageId: Int, agentId: Int?, teamId: Int?, channelType: String, priority: TicketPriority,
                              requestedAt: Double) throws -> Bool {
        try CSATStore.recordRequest(ticketId: ticketId, messageId: messageId, agentId: agentId, teamId: teamId,
                                    channelType: channelType, priority: priority, requestedAt: requestedAt, on: connection)
    }

    @discardableResult
    public func record(_ rating: RatingRecord) throws -> Bool {
        try CSATStore.record(rating, on: connection)
    }

    @discardableResult
    public func recordTicketLevel(_ rating: RatingRecord, closedAt: Double) throws -> Bool {
        try CSATStore.recordTicketLevel(rating, closedAt: closedAt, on: connection)
    }
}
