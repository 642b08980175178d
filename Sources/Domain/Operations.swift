/// A customer write the gateway queues for Desk (the outbox's `kind` column).
public enum OperationKind: String, Sendable, CaseIterable {
    case close
    case reopen
    case closureConfirmation = "closure_confirmation"
    case feedback
    case customFields = "custom_fields"
    case relatedChannels = "related_channels"

    /// As clients see it (`closure-confirmation`).
    public var publicName: String { rawValue.replacingOccurrences(of: "_", with: "-") }

    /// Why Desk refusing this write for the ticket's state is a 409, in words.
    public var stateConflict: String {
        switch self {
        case .close: return "Customers can close only ACTIVE or IDLE tickets."
        case .reopen: return "Only CLOSED tickets can be reopened."
        case .closureConfirmation: return "The closure inquiry is not WAITING for an answer."
        case .feedback: return "The CSAT request is not WAITING for an answer."
        case .customFields, .relatedChannels: return "The ticket's state does not allow this change."
        }
    }
}

/// Where a queued write stands (the outbox's `status` column).
public enum OperationStatus: String, Sendable, CaseIterable {
    case pending
    case delivered
    case failed
}

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

    public init(ticketId: Int, messageId: Int, score: Int?, comment: String?, agentId: Int?, teamId: Int?, channelType: String,
                priority: TicketPriority, customerSendbirdId: String?, ratedAt: Double, source: RatingSource) {
        (self.ticketId, self.messageId, self.score, self.comment) = (ticketId, messageId, score, comment)
        (self.agentId, self.teamId, self.channelType, self.priority) = (agentId, teamId, channelType, priority)
        (self.customerSendbirdId, self.ratedAt, self.source) = (customerSendbirdId, ratedAt, source)
    }
}

extension RatingRecord {
    /// Whether this answer replaces an earlier recorded answer to the same CSAT request: only a different answer
    /// that is not older does (Desk keeps the customer's last word; a late copy of an old one changes nothing).
    public func replaces(score: Int?, comment: String?, ratedAt: Double) -> Bool {
        (score != self.score || comment != self.comment) && self.ratedAt >= ratedAt
    }

    /// The same answer, given to CSAT request `messageId` (a ticket's own rating placed on its latest request).
    public func answering(messageId: Int) -> RatingRecord {
        RatingRecord(ticketId: ticketId, messageId: messageId, score: score, comment: comment, agentId: agentId, teamId: teamId,
                     channelType: channelType, priority: priority, customerSendbirdId: customerSendbirdId, ratedAt: ratedAt, source: source)
    }
}
