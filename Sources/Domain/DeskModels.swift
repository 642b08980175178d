
public import JSON

/// The assigned agent as tickets carry it (`recentAssignment.agent`).
public struct DeskAgentRef: Sendable, Equatable {
    public let id: Int
    public let displayName: String
    public let sendbirdId: String?
}

/// A Desk ticket decoded from either surface; `raw` keeps Desk's JSON for the cache.
public struct DeskTicket: Sendable {
    public let id: Int
    public let title: String
    public let channelUrl: String
    public let channelType: String?
    public let status: TicketStatus
    public let closeStatus: String
    public let priority: TicketPriority
    public let customerId: Int?
    public let customerSendbirdId: String?
    public let agent: DeskAgentRef?
    public let groupId: Int?
    public let groupKey: String?
    public let groupName: String?
    public let customFields: [(key: String, value: String)]
    public let relatedChannelUrls: [String]
    public let createdAt: Double?
    public let updatedAt: Double?
    public let issuedAt: Double?
    public let closedAt: Double?
    public let closeComment: String?
    public let satisfactionScore: Int?
    public let satisfactionComment: String?
    public let raw: JSONValue

    public init(json: JSONValue) throws(DomainError) {
        guard let id = json["id"]?.intValue else { throw DeskDecoding.failure("ticket without id") }
        self.id = id
        title = json["channelName"]?.stringValue ?? ""
        channelUrl = json["channelUrl"]?.stringValue ?? ""
        channelType = json["channelType"]?.stringValue
        if let text = json["status2"]?.stringValue, let status = TicketStatus(rawValue: text) {
            self.status = status
        } else {
            // Older answers carry only the legacy status.
            switch json["status"]?.stringValue {
            case "INITIALIZED": status = .initialized
            case "PROACTIVE": status = .proactive
            case "ASSIGNED", "OPEN": status = .active
            case "CLOSED": status = .closed
            default: status = .pending
            }
        }
        closeStatus = json["closeStatus"]?.stringValue ?? (status == .closed ? "CLOSED_BUT_NOT_DEFINED" : "NOT_CLOSED")
        priority = json["priority"]?.stringValue.flatMap(TicketPriority.init(rawValue:)) ?? .medium
        customerId = json["customer"]?["id"]?.intValue
        customerSendbirdId = json["customer"]?["sendbirdId"]?.stringValue
        if let agent = json["recentAssignment"]?["agent"], let agentId = agent["id"]?.intValue ?? agent["user"]?.intValue {
            self.agent = DeskAgentRef(id: agentId, displayName: agent["displayName"]?.stringValue ?? "",
                                      sendbirdId: agent["sendbirdId"]?.stringValue)
        } else {
            agent = nil
        }
        switch json["group"] {
        case .integer(let groupId)?:
            self.groupId = groupId; groupKey = nil; groupName = nil
        case .object?:
            groupId = json["group"]?["id"]?.intValue
            groupKey = json["group"]?["key"]?.stringValue
            groupName = json["group"]?["name"]?.stringValue
        default:
            groupId = nil; groupKey = nil; groupName = nil
        }
        customFields = (json["customFields"]?.arrayValue ?? []).compactMap { field in
            guard let key = field["key"]?.stringValue else { return nil }
            return (key, field["value"]?.stringValue ?? field["value"]?.serialized() ?? "")
        }
        relatedChannelUrls = Self.relatedChannels(json["relatedChannels"])
        createdAt = json["createdAt"]?.stringValue.flatMap(ISOTimestamp.parse)
        updatedAt = json["updatedAt"]?.stringValue.flatMap(ISOTimestamp.parse)
        issuedAt = json["issuedAt"]?.stringValue.flatMap(ISOTimestamp.parse)
        closedAt = json["closedAt"]?.stringValue.flatMap(ISOTimestamp.parse)
        closeComment = json["closeComment"]?.stringValue
        satisfactionScore = json["customerSatisfactionScore"]?.intValue
        satisfactionComment = json["customerSatisfactionComment"]?.stringValue
        raw = json
    }

    /// `relatedChannels` is a JSON string of `[{channel_url, name}]` (a real array is accepted too).
    static func relatedChannels(_ value: JSONValue?) -> [String] {
        var list = value?.arrayValue
        if list == nil, let text = value?.stringValue, !text.isEmpty { list = (try? JSONParser.parse(text, repairingStrings: true))?.arrayValue }
        return (list ?? []).compactMap { $0["channel_url"]?.stringValue ?? $0.stringValue }
    }
}

public struct DeskAgent: Sendable {
    public let id: Int
    public let displayName: String
    public let sendbirdId: String
    public let email: String?
    public let status: String?
    public let teamIds: [Int]

    public init(json: JSONValue) throws(DomainError) {
        guard let id = json["id"]?.intValue else { throw DeskDecoding.failure("agent without id") }
        self.id = id
        displayName = json["displayName"]?.stringValue ?? ""
        sendbirdId = json["sendbirdId"]?.stringValue ?? ""
        email = json["email"]?.stringValue
        status = json["status"]?.stringValue
        teamIds = json["groups"]?.arrayValue?.compactMap { $0.intValue ?? $0["id"]?.intValue } ?? []
    }
}

public struct DeskTeam: Sendable {
    public let id: Int
    public let key: String
    public let name: String
    public let memberIds: [Int]

    public init(json: JSONValue) throws(DomainError) {
        guard let id = json["id"]?.intValue else { throw DeskDecoding.failure("group without id") }
        self.id = id
        key = json["key"]?.stringValue ?? ""
        name = json["name"]?.stringValue ?? ""
        memberIds = json["members"]?.arrayValue?.compactMap { $0["id"]?.intValue } ?? []
    }
}

public struct DeskCustomer: Sendable {
    /// The SDKs do not need it: Desk's answer to a custom-field update may leave it out.
    public let id: Int?
    public let sendbirdId: String
    public let displayName: String
    public let customFields: [(key: String, value: String)]

    public init(json: JSONValue) throws(DomainError) {
        id = json["id"]?.intValue
        sendbirdId = json["sendbirdId"]?.stringValue ?? ""
        displayName = json["displayName"]?.stringValue ?? ""
        customFields = (json["customFields"]?.arrayValue ?? []).compactMap { field in
            guard let key = field["key"]?.stringValue else { return nil }
            return (key, field["value"]?.stringValue ?? "")
        }
    }
}

/// A chat message of a ticket's channel, with its rich-message payload decoded when it has one.
public struct DeskMessage: Sendable {
    public let messageId: Int
    public let customType: String
    public let type: String?
    public let state: RichMessageState?
    public let score: Int?
    public let comment: String?
    public let createdAt: Double?
    public let updatedAt: Double?

    /// Sendbird's chat-message page documents `id`, `messageId`, `ticket`, `userSendbirdId`, `userType`,
    /// `createdAt`, `deletedAt`, `message` and `data` (an older version only `id`): the id is `messageId`, else `id`.
    /// `data` is the rich message as a JSON string (or, tolerated, an object); a CSAT message is recognised by what
    /// its data says (its `type`, or a body with the CSAT score or state keys), whatever its `customType`.
    public init(json: JSONValue) throws(DomainError) {
        guard let id = json["messageId"]?.intValue ?? json["message_id"]?.intValue ?? json["id"]?.intValue
                ?? (json["messageId"]?.stringValue ?? json["id"]?.stringValue).flatMap({ Int($0) }) else {
            throw DeskDecoding.failure("message without id")
        }
        messageId = id
        customType = json["customType"]?.stringValue ?? json["custom_type"]?.stringValue ?? ""
        var data = (json["data"]?.stringValue).flatMap { try? JSONParser.parse($0, repairingStrings: true) }
        if data == nil, case .object = json["data"] ?? .null { data = json["data"] }
        let body = data?["body"]
        let csatKeys = body?["customerSatisfactionScore"] != nil || body?["customerSatisfactionComment"] != nil
        type = data?["type"]?.stringValue ?? (csatKeys ? RichMessageType.customerSatisfaction.rawValue : nil)
        state = (body?["state"]?.stringValue ?? body?["status"]?.stringValue).flatMap { RichMessageState(rawValue: $0.uppercased()) }
        score = body?["customerSatisfactionScore"]?.intValue ?? (body?["customerSatisfactionScore"]?.stringValue).flatMap { Int($0) }
        comment = body?["customerSatisfactionComment"]?.stringValue
        createdAt = (json["createdAt"]?.stringValue).flatMap(ISOTimestamp.parse) ?? json["created_at"]?.intValue.map { Double($0) / 1000 }
        updatedAt = (json["updatedAt"]?.stringValue).flatMap(ISOTimestamp.parse) ?? json["updated_at"]?.intValue.map { Double($0) / 1000 }
    }

    public var isCSATRequest: Bool { type == RichMessageType.customerSatisfaction.rawValue }
}

/// A page of a Desk list: `{count, next, previous, results}`.
public struct DeskPage<Item: Sendable>: Sendable {
    public let count: Int
    public let hasNext: Bool
    public let results: [Item]
    /// Items of the page that could not be read and were left out (tolerant pages only).
    public let skipped: Int

    public init(count: Int, hasNext: Bool, results: [Item], skipped: Int = 0) {
        self.count = count
        self.hasNext = hasNext
        self.results = results
        self.skipped = skipped
    }
}

/// Ticket counts per status as `/tickets/count/` reports them.
public struct DeskTicketCounts: Sendable {
    public let counts: [String: Int]

    public init(counts: [String: Int]) { self.counts = counts }

    /// PENDING + ACTIVE + IDLE + WORK_IN_PROGRESS + PROACTIVE + INITIALIZED (everything not closed).
    public var open: Int {
        if counts["PENDING"] != nil || counts["ACTIVE"] != nil {
            return ["INITIALIZED", "PROACTIVE", "PENDING", "ACTIVE", "IDLE", "WORK_IN_PROGRESS"].reduce(0) { $0 + (counts[$1] ?? 0) }
        }
        return ["INITIALIZED", "PROACTIVE", "UNASSIGNED", "ASSIGNED"].reduce(0) { $0 + (counts[$1] ?? 0) }
    }
}

/// A URL preview as Desk returns it.
public struct DeskURLPreview: Sendable {
    public let url: String
    public let title: String?
    public let siteName: String?
    public let description: String?
    public let image: String?

    public init(url: String, title: String?, siteName: String?, description: String?, image: String?) {
        (self.url, self.title, self.siteName, self.description, self.image) = (url, title, siteName, description, image)
    }
}

package enum DeskDecoding {
    package static func failure(_ what: String) -> DomainError {
        DomainError(.upstreamProtocol, "Desk answered in an unexpected shape.", internalDetail: what)
    }
}

/// Desk's offset paging, written once: pages from offset 0 until Desk says there is no next one, a page comes back
/// empty, or `maxItems` items have been handed to `each`.
public func forEachDeskPage<Item: Sendable, Failure: Error>(
    startingAt start: Int = 0, maxItems: Int = .max, fetch: (_ offset: Int) async throws(Failure) -> DeskPage<Item>,
    each: ([Item]) async throws(Failure) -> Void
) async throws(Failure) {
    var offset = start
    while offset < maxItems {
        let page = try await fetch(offset)
        try await each(page.results)
        // Items left out of a tolerant page still take their places in Desk's offsets.
        let consumed = page.results.count + page.skipped
        offset += consumed
        if !page.hasNext || consumed == 0 { return }
    }
}
