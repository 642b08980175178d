/// Which path recorded a rating: the gateway's own feedback route, a Desk webhook, or the Platform API sync.
public enum RatingSource: String, Sendable, CaseIterable {
    case gateway
    case webhook
    case sync
}

/// One rating as it is recorded: the agent, team, channel and priority are those of the ticket when it was rated.
public struct RatingRecord: Sendable, Equatable {
    public let ticketId: Int
    public let messageId: Int
    public let score: Int?
    public let comment: String?
    public let agentId: Int?
    public let teamId: Int?
    public let channelType: String
    public let priority: TicketPriority
    public let customerSendbirdId: String?
    public let ratedAt: Double
    public let source: RatingSource
    /// The answer was read from the ticket's own score, not from the CSAT message: a real answer replaces it.
    public let inferred: Bool
    /// The agent and team come from the gateway's cached ticket, not from Desk: Desk's word corrects them later.
    public let attributionInferred: Bool

    /// `comment` is stored as Desk means it: an empty comment (the JS SDK sends `''`) is no comment.
    public init(ticketId: Int, messageId: Int, score: Int?, comment: String?, agentId: Int?, teamId: Int?, channelType: String,
                priority: TicketPriority, customerSendbirdId: String?, ratedAt: Double, source: RatingSource,
                inferred: Bool = false, attributionInferred: Bool = false) {
        (self.ticketId, self.messageId, self.score, self.comment) = (ticketId, messageId, score, comment?.isEmpty == true ? nil : comment)
        (self.agentId, self.teamId, self.channelType, self.priority) = (agentId, teamId, channelType, priority)
        (self.customerSendbirdId, self.ratedAt, self.source) = (customerSendbirdId, ratedAt, source)
        (self.inferred, self.attributionInferred) = (inferred, attributionInferred)
    }
}

extension RatingRecord {
    /// Whether this answer replaces an earlier recorded answer to the same CSAT request (`score`, `comment`,
    /// `ratedAt`, `inferred` are the recorded one's):
    /// - a decline (no score; given through the gateway only, Desk never hears of it) never replaces a score, which
    ///   Desk keeps, and any score replaces a decline whatever their times (a score queued before a decline and
    ///   delivered after it is what Desk holds);
    /// - an answer read from the ticket's score (`inferred`) never replaces a score read from the CSAT message;
    /// - a message answer always replaces an inferred one (its time is Desk's, the inferred one's only a guess);
    /// - otherwise only a different answer that is not older does (Desk keeps the customer's last word; a late copy
    ///   of an old one changes nothing).
    public func replaces(score: Int?, comment: String?, ratedAt: Double, inferred wasInferred: Bool = false) -> Bool {
        if self.score == nil && score != nil { return false }
        if self.score != nil && score == nil { return true }
        if inferred && !wasInferred && score != nil { return false }
        let different = score != self.score || Self.normalized(comment) != self.comment
        if wasInferred && !inferred { return different || ratedAt != self.ratedAt }
        return different && self.ratedAt >= ratedAt
    }

    static func normalized(_ comment: String?) -> String? { comment?.isEmpty == true ? nil : comment }

    /// The same answer, given to CSAT request `messageId` (a ticket's own rating placed on one of its requests).
    public func answering(messageId: Int) -> RatingRecord {
        with(messageId: messageId)
    }

    /// The same answer with Desk's attribution (the agent and team Desk names for the ticket or its request).
    public func attributed(agentId: Int?, teamId: Int?) -> RatingRecord {
        with(agentId: agentId, teamId: teamId, attributionInferred: false)
    }

    private func with(messageId: Int? = nil, agentId: Int?? = nil, teamId: Int?? = nil, attributionInferred: Bool? = nil) -> RatingRecord {
        RatingRecord(ticketId: ticketId, messageId: messageId ?? self.messageId, score: score, comment: comment,
                     agentId: agentId ?? self.agentId, teamId: teamId ?? self.teamId, channelType: channelType, priority: priority,
                     customerSendbirdId: customerSendbirdId, ratedAt: ratedAt, source: source, inferred: inferred,
                     attributionInferred: attributionInferred ?? self.attributionInferred)
    }
}
