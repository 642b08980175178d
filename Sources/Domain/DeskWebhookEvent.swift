public import JSON


/// A Desk webhook as the gateway understands it, whichever envelope it came in. Documented by Sendbird: the body is
/// JSON, `eventType` names the event and `data` holds the ticket as the Platform API renders it. Assumed (not
/// documented), and accepted as well: snake_case keys anywhere (`event_type`, `channel_url`, …), the ticket at
/// `data.ticket`, at `ticket` or at the top level, an event id (`eventId`/`event_id`/`id` next to the ticket), and
/// a CSAT `message` next to the ticket. CSAT is read from the message when there is one, and from the ticket's own
/// `customerSatisfactionScore` / `customerSatisfactionComment` / `customerSatisfactionStatus` otherwise.
public struct DeskWebhookEvent: Sendable {
    public let type: String
    public let eventId: String?
    public let ticket: DeskTicket
    public let message: DeskMessage?
    /// The ticket's own CSAT fields, when it carries a score.
    public let ticketRating: (score: Int, comment: String?)?
    /// The Sendbird application the event names, when it names one: an `appId` / `applicationId` / `sendbirdAppId`
    /// next to the ticket or in it, else the `{app}` of a channel URL shaped `sendbird_desk_{app}_{ticketId}_…`
    /// (the shape Desk's ticket channels are assumed to have).
    public let appId: String?

    /// False when the event names another Sendbird application than `appId` (a signed event of another Desk, or a
    /// ticket planted with another application's channel). An event that names none is taken as this Desk's.
    public func belongs(toApp appId: String) -> Bool {
        guard let named = self.appId else { return true }
        return named.lowercased() == appId.lowercased()
    }

    static func namedApp(_ json: JSONValue, ticketJSON: JSONValue, ticket: DeskTicket) -> String? {
        for scope in [ticketJSON, json, json["data"] ?? .null] {
            for key in ["appId", "applicationId", "sendbirdAppId"] {
                if let value = scope[key]?.stringValue, !value.isEmpty { return value }
            }
        }
        let prefix = "sendbird_desk_"
        let url = ticket.channelUrl.lowercased()
        guard url.hasPrefix(prefix), let marker = url.firstRange(of: "_\(ticket.id)_") else { return nil }
        let app = url[url.index(url.startIndex, offsetBy: prefix.count)..<marker.lowerBound]
        return app.isEmpty ? nil : String(app)
    }

    /// nil when no ticket can be found in the body (the event is kept as `unrecognized`).
    public static func parse(_ body: JSONValue) -> DeskWebhookEvent? {
        let json = camelCased(body)
        guard case .object = json else { return nil }
        let type = json["eventType"]?.stringValue ?? json["event"]?.stringValue ?? json["type"]?.stringValue ?? ""
        guard let ticketJSON = locateTicket(json), let ticket = try? DeskTicket(json: ticketJSON) else { return nil }
        var eventId = json["eventId"]?.stringValue ?? json["eventId"]?.intValue.map(String.init)
        if eventId == nil, !isTicket(json) { eventId = json["id"]?.stringValue ?? json["id"]?.intValue.map(String.init) }
        let message = (json["message"] ?? json["data"]?["message"]).flatMap { try? DeskMessage(json: $0) }
        var rating: (score: Int, comment: String?)?
        if let score = ticket.satisfactionScore, DeskLimits.csatScores.contains(score) {
            let status = ticketJSON["customerSatisfactionStatus"]?.stringValue?.uppercased()
            if status == nil || status == "CONFIRMED" || status == "RATED" || status == "ANSWERED" {
                rating = (score, ticket.satisfactionComment)
            }
        }
        return DeskWebhookEvent(type: type, eventId: eventId, ticket: ticket, message: message, ticketRating: rating,
                                appId: namedApp(json, ticketJSON: ticketJSON, ticket: ticket))
    }

    /// The ticket: `data` (documented), `data.ticket`, `ticket`, or the body itself.
    static func locateTicket(_ json: JSONValue) -> JSONValue? {
        for candidate in [json["data"], json["data"]?["ticket"], json["ticket"], json] {
            if let candidate, isTicket(candidate) { return candidate }
        }
        return nil
    }

    static func isTicket(_ json: JSONValue) -> Bool {
        guard json["id"]?.intValue != nil else { return false }
        return json["channelUrl"] != nil || json["status2"] != nil || json["channelName"] != nil
    }

    /// The top-level keys, for a log line about an event the gateway could not read (never its content).
    public static func topLevelKeys(_ body: JSONValue) -> [String] {
        body.objectValue?.map(\.0) ?? []
    }

    /// `snake_case` keys become `camelCase` at every depth; values are untouched. Keys already in camelCase stay.
    public static func camelCased(_ value: JSONValue) -> JSONValue {
        switch value {
        case .object(let members):
            return .object(members.map { (camelCase($0.0), camelCased($0.1)) })
        case .array(let items):
            return .array(items.map(camelCased))
        default:
            return value
        }
    }

    static func camelCase(_ key: String) -> String {
        // A byte search: `contains("_")` was Foundation's substring search while Foundation was imported in the
        // module, about 1 % of the gateway's CPU under a soak's webhooks.
        guard key.utf8.contains(UInt8(ascii: "_")) else { return key }
        var result = ""
        var upper = false
        for character in key {
            if character == "_" {
                upper = !result.isEmpty
                continue
            }
            result.append(upper ? Character(character.uppercased()) : character)
            upper = false
        }
        return result
    }
}
