public import Domain
public import JSON

/// What one stored Desk webhook event means for the gateway: the ticket to the cache, and its CSAT request and
/// answer (from the event's message, or else the ticket's own rating) through `RatingRecorder`.
public enum WebhookApplier {
    public enum Result: Sendable, Equatable {
        /// The ticket was cached (and its CSAT facts recorded).
        case applied(ticketId: Int, moved: OwnershipChange?)
        /// The ticket names no customer: nothing to cache.
        case noCustomer(ticketId: Int)
        /// No ticket the gateway can read: the event stays stored as unrecognized. The top-level keys, for the log.
        case unrecognized(keys: [String])
        /// The event names another Sendbird application: stored as `foreign`, never applied.
        case foreign(ticketId: Int, appId: String)
    }

    public static func apply(_ body: JSONValue, appId: String, to writer: any InboxWriter) throws -> Result {
        guard let event = DeskWebhookEvent.parse(body) else { return .unrecognized(keys: DeskWebhookEvent.topLevelKeys(body)) }
        guard event.belongs(toApp: appId) else { return .foreign(ticketId: event.ticket.id, appId: event.appId ?? "") }
        let ticket = event.ticket
        guard let sendbirdId = ticket.customerSendbirdId else { return .noCustomer(ticketId: ticket.id) }
        let moved = try writer.cacheTicket(ticket, customerSendbirdId: sendbirdId)
        let messages = event.message.map { [$0] } ?? []
        for write in RatingRecorder.writes(ticket: ticket, messages: messages, ticketRating: event.ticketRating, source: .webhook) {
            try writer.apply(write)
        }
        return .applied(ticketId: ticket.id, moved: moved)
    }
}
