public import Domain

/// The rule of a customer's declined CSAT answer, which the gateway applies itself: Desk's CSAT message cannot hold
/// an empty score, so a decline never reaches Desk. It is recorded only for a CSAT request Desk sent on this very
/// ticket (known from its webhook, or else read from Desk now: the customer may answer before the webhook has been
/// applied), and it never replaces a score.
public struct CSATFeedback: Sendable {
    public enum DeclineOutcome: Sendable, Equatable {
        case recorded
        /// The message is not a CSAT request of this ticket, as far as the gateway and Desk tell.
        case notARequest
        /// Desk holds a score for this request: it was answered already.
        case alreadyScored
    }

    let ratings: any FeedbackRatings
    /// Desk's Platform API when a token is configured; without it only webhooks tell which requests Desk sent.
    let platform: (any DeskPlatformReader)?

    public init(ratings: any FeedbackRatings, platform: (any DeskPlatformReader)?) {
        self.ratings = ratings
        self.platform = platform
    }

    public func decline(_ context: RatingContext, messageId: Int, comment: String?, at now: Double) async throws -> DeclineOutcome {
        var known = try await ratings.isRequest(ticketId: context.ticketId, messageId: messageId)
        if !known { known = try await confirmRequestWithDesk(context, messageId: messageId, now: now) }
        guard known else { return .notARequest }
        _ = try await ratings.record(RatingRecorder.decline(context, messageId: messageId, comment: comment, at: now))
        if case .some(.some) = try await ratings.storedAnswer(ticketId: context.ticketId, messageId: messageId) { return .alreadyScored }
        return .recorded
    }

    /// Whether Desk's own message list of the ticket holds `messageId` as a CSAT request; when it does, the request
    /// is recorded as the webhook would have, with Desk's ticket as it is now.
    func confirmRequestWithDesk(_ context: RatingContext, messageId: Int, now: Double) async throws -> Bool {
        guard let platform else { return false }
        var found: DeskMessage?
        let ticketId = context.ticketId
        try await forEachDeskPage(maxItems: 1000) { (offset: Int) async throws(DomainError) -> DeskPage<DeskMessage> in
            try await platform.chatMessages(ticketId: ticketId, limit: 100, offset: offset)
        } each: { (page: [DeskMessage]) async throws(DomainError) in
            if found == nil { found = page.first { $0.messageId == messageId } }
        }
        guard let message = found, message.isCSATRequest else { return false }
        // Desk's agent and team, not the cache's: the cache may not have seen the assignment yet, and the decline
        // takes the request's attribution.
        let ticket = try await platform.platformTicket(id: context.ticketId)
        _ = try await ratings.recordRequest(CSATRequestRecord(ticketId: context.ticketId, messageId: messageId, agentId: ticket.agent?.id,
                                                              teamId: ticket.groupId, channelType: ticket.channelType ?? context.channelType,
                                                              priority: ticket.priority, requestedAt: message.createdAt ?? now))
        return true
    }
}
