public import Domain

/// The one place that turns what Desk says about a ticket into CSAT records: which agent, team, channel and
/// priority a rating counts for, which time it carries, and when a ticket's own rating stands in for the message's.
public enum RatingRecorder {
    /// What a Desk ticket (from the sync or a webhook) and the CSAT messages known with it say. A confirmed CSAT
    /// message is an answer; a CSAT message in any state is a request; without any CSAT message the ticket's own
    /// score, when it has one, is recorded at ticket level.
    public static func writes(ticket: DeskTicket, messages: [DeskMessage], ticketRating: (score: Int, comment: String?)? = nil,
                              source: RatingSource) -> [RatingWrite] {
        let channel = ticket.channelType ?? "UNKNOWN"
        var writes: [RatingWrite] = []
        let requests = messages.filter(\.isCSATRequest)
        for message in requests {
            writes.append(.request(CSATRequestRecord(
                ticketId: ticket.id, messageId: message.messageId, agentId: ticket.agent?.id, teamId: ticket.groupId,
                channelType: channel, priority: ticket.priority,
                requestedAt: message.createdAt ?? ticket.closedAt ?? ticket.updatedAt ?? 0)))
            guard message.state == .confirmed, let score = message.score else { continue }
            writes.append(.rating(RatingRecord(
                ticketId: ticket.id, messageId: message.messageId, score: score, comment: message.comment, agentId: ticket.agent?.id,
                teamId: ticket.groupId, channelType: channel, priority: ticket.priority, customerSendbirdId: ticket.customerSendbirdId,
                ratedAt: message.updatedAt ?? ticket.updatedAt ?? 0, source: source)))
        }
        if requests.isEmpty, let answer = ticketRating ?? ticket.satisfactionScore.map({ ($0, ticket.satisfactionComment) }) {
            writes.append(.ticketLevel(RatingRecord(
                ticketId: ticket.id, messageId: 0, score: answer.score, comment: answer.comment, agentId: ticket.agent?.id,
                teamId: ticket.groupId, channelType: channel, priority: ticket.priority, customerSendbirdId: ticket.customerSendbirdId,
                ratedAt: ticket.updatedAt ?? ticket.closedAt ?? 0, source: source), closedAt: ticket.closedAt ?? 0))
        }
        return writes
    }

    /// Hands `writes` to `store` in order; counts what changed.
    public static func apply(_ writes: [RatingWrite], to store: any RatingStore) async throws -> (requests: Int, ratings: Int) {
        var changed = (requests: 0, ratings: 0)
        for write in writes {
            switch write {
            case .request(let request):
                if try await store.recordRequest(request) { changed.requests += 1 }
            case .rating(let rating):
                if try await store.record(rating) { changed.ratings += 1 }
            case .ticketLevel(let rating, let closedAt):
                if try await store.recordTicketLevel(rating, closedAt: closedAt) { changed.ratings += 1 }
            }
        }
        return changed
    }
}
