public import Domain
import Postgres

/// The writes an inbox event may make, inside the inbox batch's transaction: what the webhook applier sees of the
/// database, with no SQL and no PostgreSQL types above `Store`.
public struct StoreTransaction: InboxTransaction {
    let connection: PostgresConnection
    let csat: CSATWriter

    init(connection: PostgresConnection) {
        self.connection = connection
        csat = CSATWriter(connection)
    }

    /// The customer's row id, created on first sight.
    public func customerId(sendbirdId: String) throws -> Int {
        try TicketStore.customerId(sendbirdId: sendbirdId, on: connection)
    }

    /// Caches Desk's view of a ticket; returns the ownership change when Desk moved it.
    public func upsert(_ row: TicketRow) throws -> OwnershipChange? {
        try TicketStore.upsert(row, on: connection)
    }

    /// Records one CSAT fact; returns whether anything changed. The rollups are written at the end of the batch.
    @discardableResult
    public func apply(_ write: RatingWrite) throws -> Bool {
        switch write {
        case .request(let request): return try csat.recordRequest(request)
        case .rating(let rating): return try csat.record(rating)
        case .ticketLevel(let rating, let closedAt): return try csat.recordTicketLevel(rating, closedAt: closedAt)
        }
    }

    /// The event's rollup changes, for the batch to write at its end.
    func takeRollups() -> RollupDeltas { csat.take() }
}
