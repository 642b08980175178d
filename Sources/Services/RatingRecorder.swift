public import Domain
public import JSON

/// Who and what a rating given through the gateway counts for: the ticket's state when the customer answered.
public struct RatingContext: Sendable {
    public let ticketId: Int
    public let agentId: Int?
    public let teamId: Int?
    public let channelType: String
    public let priority: TicketPriority
    public let customerSendbirdId: String?

    public init(ticketId: Int, agentId: Int?, teamId: Int?, channelType: String, priority: TicketPriority, customerSendbirdId: String?) {
        (self.ticketId, self.agentId, self.teamId) = (ticketId, agentId, teamId)
        (self.channelType, self.priority, self.customerSendbirdId) = (channelType, priority, customerSendbirdId)
    }
}

/// The one place that turns what Desk says about a ticket into CSAT records: which agent, team, channel and
/// priority a rating counts for, which time it carries, and when a ticket's own rating stands in for the message's.
public enum RatingRecorder {
    /// What a Desk ticket (from the sync or a webhook) and the CSAT messages known with it say, by one rule for
    /// every path: a CSAT message in any state is a request; a confirmed CSAT message is an answer to that request,
    /// and an answer in a message wins. Without one, the ticket's own score (`customerSatisfactionScore` / comment;
    /// Desk may keep the message as first sent, `WAITING`) is an inferred answer that only the store can place, since
    /// only it knows which answers are recorded already (`RatingStore.recordTicketLevel`): the same answer already
    /// recorded for any request of the ticket is that answer, never a second one (a reopened ticket's next request
    /// arrives with the old score); otherwise it answers the latest request with no answer from a message. Desk
    /// gives the score no time of its own (the ticket's `updatedAt` moves with every change), so nothing here
    /// compares the score's time with a request's.
    public static func writes(ticket: DeskTicket, messages: [DeskMessage], ticketRating: (score: Int, comment: String?)? = nil,
                              source: RatingSource) -> [RatingWrite] {
        let channel = ticket.channelType ?? "UNKNOWN"
        var writes: [RatingWrite] = []
        let requests = messages.filter(\.isCSATRequest)
        let answered = requests.contains { $0.state == .confirmed && $0.score != nil }
        for message in requests {
            writes.append(.request(CSATRequestRecord(
                ticketId: ticket.id, messageId: message.messageId, agentId: ticket.agent?.id, teamId: ticket.groupId,
                channelType: channel, priority: ticket.priority,
                requestedAt: message.createdAt ?? ticket.closedAt ?? ticket.updatedAt ?? 0)))
            guard message.state == .confirmed, let score = message.score else { continue }
            writes.append(.rating(RatingRecord(
                ticketId: ticket.id, messageId: message.messageId, score: score, comment: message.comment, agentId: ticket.agent?.id,
                teamId: ticket.groupId, channelType: channel, priority: ticket.priority, customerSendbirdId: ticket.customerSendbirdId,
                ratedAt: ratedAt(message: message, ticket: ticket), source: source)))
        }
        guard !answered, let answer = ticketRating ?? ticket.satisfactionScore.map({ ($0, ticket.satisfactionComment) }),
              DeskLimits.csatScores.contains(answer.score) else { return writes }
        let rating = RatingRecord(
            ticketId: ticket.id, messageId: 0, score: answer.score, comment: answer.comment, agentId: ticket.agent?.id,
            teamId: ticket.groupId, channelType: channel, priority: ticket.priority, customerSendbirdId: ticket.customerSendbirdId,
            ratedAt: ticket.updatedAt ?? ticket.closedAt ?? 0, source: source, inferred: true)
        writes.append(.ticketLevel(rating, closedAt: ticket.closedAt ?? 0))
        return writes
    }

    /// When a message answer was given: the message's `updatedAt` when Desk sends one (the Chat API's message carries
    /// it; Desk's own documents do not list it), else the ticket's last change, which may be later than the answer
    /// (an edit after the rating moves the rating to that day), else its close.
    public static func ratedAt(message: DeskMessage, ticket: DeskTicket) -> Double {
        message.updatedAt ?? ticket.updatedAt ?? ticket.closedAt ?? 0
    }

    /// A decline through the gateway (never sent to Desk, whose CSAT message cannot hold an empty score): a response
    /// without a score. The context's agent and team are the cache's, so they count as inferred: the store gives the
    /// decline the attribution Desk gave the request it answers.
    public static func decline(_ context: RatingContext, messageId: Int, comment: String?, at time: Double) -> RatingRecord {
        RatingRecord(ticketId: context.ticketId, messageId: messageId, score: nil, comment: comment, agentId: context.agentId,
                     teamId: context.teamId, channelType: context.channelType, priority: context.priority,
                     customerSendbirdId: context.customerSendbirdId, ratedAt: time, source: .gateway, attributionInferred: true)
    }

    /// What a queued answer carries for `feedback(_:payload:ticket:inline:)`: the answer and the ticket's state when it
    /// was given, used when it is delivered later.
    public static func feedbackPayload(_ context: RatingContext, messageId: Int, score: Int, comment: String?, at time: Double) -> JSONValue {
        .object([
            ("messageId", .integer(messageId)), ("score", .integer(score)), ("comment", comment.map(JSONValue.string) ?? .null),
            ("ratedAt", .number(time)), ("agentId", context.agentId.map(JSONValue.integer) ?? .null),
            ("teamId", context.teamId.map(JSONValue.integer) ?? .null), ("channelType", .string(context.channelType)),
            ("priority", .string(context.priority.rawValue)), ("customerSendbirdId", context.customerSendbirdId.map(JSONValue.string) ?? .null),
        ])
    }

    /// The customer's answer given through the gateway, once Desk accepted it: Desk's score and comment when the
    /// ticket carries them (the payload's otherwise), with the agent and team of the moment it was given (the fresh
    /// ticket when delivered at once, the cached state captured at submission when delivered later).
    public static func feedback(_ operation: OutboxOperation, payload: JSONValue, ticket: DeskTicket, inline: Bool) -> RatingRecord {
        let ratedAt: Double? = payload["ratedAt"].flatMap { if case .number(let d) = $0 { return d } else { return $0.intValue.map(Double.init) } }
        return RatingRecord(
            ticketId: operation.ticketId, messageId: payload["messageId"]?.intValue ?? 0,
            score: ticket.satisfactionScore ?? payload["score"]?.intValue,
            comment: ticket.satisfactionScore != nil ? ticket.satisfactionComment : payload["comment"]?.stringValue,
            agentId: inline ? ticket.agent?.id : payload["agentId"]?.intValue, teamId: inline ? ticket.groupId : payload["teamId"]?.intValue,
            channelType: payload["channelType"]?.stringValue ?? ticket.channelType ?? "UNKNOWN",
            priority: payload["priority"]?.stringValue.flatMap(TicketPriority.init) ?? ticket.priority,
            customerSendbirdId: payload["customerSendbirdId"]?.stringValue,
            ratedAt: ratedAt ?? WallClock.seconds(), source: .gateway, attributionInferred: !inline)
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
