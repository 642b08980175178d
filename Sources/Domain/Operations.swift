/// A customer write the gateway queues for Desk (the outbox's `kind` column).
public enum OperationKind: String, Sendable, CaseIterable {
    case close
    case reopen
    case closureConfirmation = "closure_confirmation"
    case feedback
    case customFields = "custom_fields"
    case relatedChannels = "related_channels"
    case priority
    /// The customer gives the ticket back to the queue (the SDK's `ticket.cancel`), optionally to another team.
    case cancel

    /// As clients see it (`closure-confirmation`).
    public var publicName: String { rawValue.replacing("_", with: "-") }

    /// Why Desk refusing this write for the ticket's state is a 409, in words.
    public var stateConflict: String {
        switch self {
        case .close: return "Customers can close only ACTIVE or IDLE tickets."
        case .reopen: return "Only CLOSED tickets can be reopened."
        case .closureConfirmation: return "The closure inquiry is not WAITING for an answer."
        case .feedback: return "The CSAT request is not WAITING for an answer."
        case .customFields, .relatedChannels, .priority: return "The ticket's state does not allow this change."
        case .cancel: return "Only PENDING, ACTIVE, IDLE or WORK_IN_PROGRESS tickets can be given back to the queue."
        }
    }
}

/// Where a queued write stands (the outbox's `status` column).
public enum OperationStatus: String, Sendable, CaseIterable {
    case pending
    case delivered
    case failed
}

/// Whose Desk identity carried a delivered write (the outbox's `delivered_as` column).
public enum DeliveryPath: String, Sendable, CaseIterable {
    /// The customer's own Desk session, as the customer's app would have sent it.
    case customer
    /// Desk's Platform API with the gateway's token: Desk records the change as the application's.
    case application
}

/// Customer writes acknowledged but not yet delivered to Desk, and Desk webhooks acknowledged but not yet applied:
/// what a cache reset would lose (it refuses while there are any, unless told to discard them).
public struct PendingDeskWork: Error, Sendable, Equatable, CustomStringConvertible {
    public let writes: Int
    public let events: Int

    public init(writes: Int, events: Int) {
        self.writes = writes
        self.events = events
    }

    public var isEmpty: Bool { writes == 0 && events == 0 }
    public var description: String { "\(writes) undelivered customer writes, \(events) unapplied webhook events" }
}
