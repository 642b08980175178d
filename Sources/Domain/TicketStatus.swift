/// Desk's `status2`: the ticket lifecycle.
public enum TicketStatus: String, Sendable, CaseIterable, Codable {
    case initialized = "INITIALIZED"
    case proactive = "PROACTIVE"
    case pending = "PENDING"
    case active = "ACTIVE"
    case idle = "IDLE"
    case workInProgress = "WORK_IN_PROGRESS"
    case closed = "CLOSED"

    /// Open in the SDK's sense (what `getOpenedList` and the open count cover).
    public var isOpen: Bool { self != .closed }

    /// The legacy `status` the JS SDK reads.
    public var legacy: String {
        switch self {
        case .initialized: "INITIALIZED"
        case .proactive: "PROACTIVE"
        case .pending: "UNASSIGNED"
        case .active, .idle, .workInProgress: "ASSIGNED"
        case .closed: "CLOSED"
        }
    }

    /// Customers may close only tickets an agent is working on and that are not parked in progress.
    public var customerMayClose: Bool { self == .active || self == .idle }

    /// Customers may give back to the queue (the SDK's `ticket.cancel`) any ticket that is open and past its start.
    public var customerMayGiveBack: Bool { self == .pending || self == .active || self == .idle || self == .workInProgress }
}

public enum TicketPriority: String, Sendable, CaseIterable, Codable {
    case low = "LOW"
    case medium = "MEDIUM"
    case high = "HIGH"
    case urgent = "URGENT"
}

/// State of a closure inquiry or CSAT request message.
public enum RichMessageState: String, Sendable, Codable {
    case waiting = "WAITING"
    case confirmed = "CONFIRMED"
    case declined = "DECLINED"
}

public enum RichMessageType: String, Sendable, Codable {
    case closureInquiry = "SENDBIRD_DESK_INQUIRE_TICKET_CLOSURE"
    case customerSatisfaction = "SENDBIRD_DESK_CUSTOMER_SATISFACTION"
    case urlPreview = "SENDBIRD_DESK_URL_PREVIEW"

    public static let customType = "SENDBIRD_DESK_RICH_MESSAGE"
    public static let adminCustomType = "SENDBIRD_DESK_ADMIN_MESSAGE_CUSTOM_TYPE"
}

/// Desk's limits that clients must respect.
public enum DeskLimits {
    public static let maxRelatedChannels = 3
    public static let customFieldKeyLength = 20
    public static let customFieldValueLength = 190
    public static let maxCustomFields = 20
    public static let csatScores = 1...5
}
