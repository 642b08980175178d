/// What a ticket-channel message is, from its Chat `customType` and `data` (a JSON string the caller hands over
/// already parsed), and whether the customer should see it.
public struct MessageClassification: Sendable, Equatable {
    public enum Kind: String, Sendable {
        case urlPreview = "url_preview"
        case closureInquiry = "closure_inquiry"
        case customerSatisfaction = "csat"
        case systemMessage = "system"
        case notification
        case bot
        case plain
    }

    public let kind: Kind
    /// WAITING / CONFIRMED / DECLINED for inquiries and CSAT requests.
    public let state: RichMessageState?
    /// Desk's own type name (`SENDBIRD_DESK_…`, `SYSTEM_MESSAGE_…`, `NOTIFICATION_…`).
    public let type: String?
    public let visibleToCustomer: Bool
    public let ticketId: Int?
    public let score: Int?
    public let comment: String?

    public init(kind: Kind, state: RichMessageState? = nil, type: String? = nil, visibleToCustomer: Bool,
                ticketId: Int? = nil, score: Int? = nil, comment: String? = nil) {
        self.kind = kind
        self.state = state
        self.type = type
        self.visibleToCustomer = visibleToCustomer
        self.ticketId = ticketId
        self.score = score
        self.comment = comment
    }
}

/// A JSON-agnostic view of `data`, so the classifier stays free of any JSON library.
public struct MessagePayload: Sendable {
    public let type: String?
    public let state: String?
    public let ticketId: Int?
    public let score: Int?
    public let comment: String?

    public init(type: String?, state: String?, ticketId: Int?, score: Int?, comment: String?) {
        self.type = type
        self.state = state
        self.ticketId = ticketId
        self.score = score
        self.comment = comment
    }
}

public enum MessageClassifier {
    public static let botCustomType = "SENDBIRD_DESK_BOT_MESSAGE"

    /// Rich messages (`SENDBIRD_DESK_RICH_MESSAGE`) are classified by `data.type`; admin messages are system messages
    /// (agent-only) unless their type is a `NOTIFICATION_…` one, which customers see.
    public static func classify(customType: String?, payload: MessagePayload?) -> MessageClassification {
        switch customType {
        case RichMessageType.customType?:
            let state = payload?.state.flatMap(RichMessageState.init(rawValue:))
            switch payload?.type.flatMap(RichMessageType.init(rawValue:)) {
            case .closureInquiry?:
                return MessageClassification(kind: .closureInquiry, state: state, type: payload?.type, visibleToCustomer: true,
                                             ticketId: payload?.ticketId)
            case .customerSatisfaction?:
                return MessageClassification(kind: .customerSatisfaction, state: state, type: payload?.type, visibleToCustomer: true,
                                             ticketId: payload?.ticketId, score: payload?.score, comment: payload?.comment)
            case .urlPreview?:
                return MessageClassification(kind: .urlPreview, type: payload?.type, visibleToCustomer: true)
            case nil:
                return MessageClassification(kind: .plain, type: payload?.type, visibleToCustomer: true)
            }
        case RichMessageType.adminCustomType?:
            let type = payload?.type ?? ""
            if type.hasPrefix("NOTIFICATION_") {
                return MessageClassification(kind: .notification, type: type, visibleToCustomer: true, ticketId: payload?.ticketId)
            }
            return MessageClassification(kind: .systemMessage, type: type.isEmpty ? nil : type, visibleToCustomer: false,
                                         ticketId: payload?.ticketId)
        case botCustomType?:
            return MessageClassification(kind: .bot, type: payload?.type, visibleToCustomer: true)
        default:
            return MessageClassification(kind: .plain, visibleToCustomer: true)
        }
    }
}
