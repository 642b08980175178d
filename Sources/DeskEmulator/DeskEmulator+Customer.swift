import Domain
import Foundation
import HTTPServer
import JSON
import Synchronization

/// The customer-side API the Desk SDKs call (`/sapi`), authenticated by `sendbirdDeskToken`.
extension DeskEmulator {
    static func addCustomerRoutes(to router: inout Router<EmulatorHandler>) {
        func add(_ method: String, _ path: String,
                 _ run: @escaping @Sendable (DeskEmulator, HTTPRequest) throws(EmulatorFailure) -> HTTPResponse) {
            router.add(method, "/sapi" + path, EmulatorHandler(surface: .customer, run: run))
        }
        add("POST", "/customers/auth") { emulator, request throws(EmulatorFailure) in try emulator.authenticate(request) }
        add("PATCH", "/customers/custom_fields") { emulator, request throws(EmulatorFailure) in
            try emulator.setCustomerCustomFields(request)
        }
        add("PATCH", "/customers/language") { emulator, request throws(EmulatorFailure) in
            let customer = try emulator.session(request)
            return EmulatorResponse.json(try emulator.world.read { world throws(EmulatorFailure) in
                guard let found = world.customers[customer] else { throw EmulatorFailure.notFound("No customer \(customer).") }
                return world.customerJSON(found)
            })
        }
        add("POST", "/tickets") { emulator, request throws(EmulatorFailure) in try emulator.createTicket(request) }
        add("GET", "/tickets") { emulator, request throws(EmulatorFailure) in try emulator.listTickets(request) }
        add("GET", "/tickets/count") { emulator, request throws(EmulatorFailure) in try emulator.countTickets(request) }
        add("POST", "/tickets/url_preview") { emulator, request throws(EmulatorFailure) in try emulator.urlPreview(request) }
        add("GET", "/tickets/{id}") { emulator, request throws(EmulatorFailure) in
            let customer = try emulator.session(request)
            let id = try request.intParameter("id")
            return try emulator.world.read { world throws(EmulatorFailure) in
                guard let ticket = world.tickets[id], ticket.customerId == customer else { throw EmulatorFailure.notFound() }
                return EmulatorResponse.json(world.ticketJSON(ticket, platform: false))
            }
        }
        add("PATCH", "/tickets/{id}") { emulator, request throws(EmulatorFailure) in try emulator.updateTicket(request) }
        add("PATCH", "/tickets/{id}/custom_fields") { emulator, request throws(EmulatorFailure) in
            try emulator.setTicketCustomFields(request)
        }
        add("PATCH", "/tickets/{id}/close") { emulator, request throws(EmulatorFailure) in try emulator.customerClose(request) }
        add("PATCH", "/tickets/{id}/reopen") { emulator, request throws(EmulatorFailure) in try emulator.reopen(request) }
        add("PATCH", "/tickets/{id}/cancel") { emulator, request throws(EmulatorFailure) in try emulator.cancel(request) }
        add("PATCH", "/tickets/{id}/edit_message") { emulator, request throws(EmulatorFailure) in try emulator.editMessage(request) }
        add("POST", "/tickets/{id}/select_question") { emulator, request throws(EmulatorFailure) in try emulator.selectQuestion(request) }
    }

    /// The customer id behind the request's Desk session token.
    func session(_ request: HTTPRequest) throws(EmulatorFailure) -> Int {
        guard let token = request.header("sendbirddesktoken"), !token.isEmpty,
              let customer = world.read({ $0.sessions[token] }) else { throw EmulatorFailure.unauthorized() }
        return customer
    }

    func ownTicket(_ request: HTTPRequest) throws(EmulatorFailure) -> (customer: Int, ticket: Int) {
        let customer = try session(request)
        let id = try request.intParameter("id")
        let owned = world.read { $0.tickets[id]?.customerId == customer }
        guard owned else { throw EmulatorFailure.notFound() }
        return (customer, id)
    }

    func checkAppId(_ value: String?) throws(EmulatorFailure) {
        if let value, value != configuration.appId { throw EmulatorFailure.invalid("Unknown sendbirdAppId.") }
    }

    func authenticate(_ request: HTTPRequest) throws(EmulatorFailure) -> HTTPResponse {
        let body = try request.jsonBody()
        try checkAppId(body["sendbirdAppId"]?.stringValue ?? "")
        guard let userId = body["sendbirdId"]?.stringValue, !userId.isEmpty else {
            throw EmulatorFailure.invalid("sendbirdId is required.")
        }
        let accessToken = request.header("sendbirdaccesstoken") ?? ""
        let token = "desk-" + UUID().uuidString.lowercased()
        return try world.withLock { world throws(EmulatorFailure) in
            guard let customer = world.customer(sendbirdId: userId), customer.accessToken == accessToken else {
                throw EmulatorFailure.unauthorized("Invalid Sendbird user or access token.")
            }
            world.sessions[token] = customer.id
            return EmulatorResponse.json(.object([("token", .string(token)), ("id", .integer(customer.id))]))
        }
    }

    /// `customFields` arrives as a JSON string of `{key: value}`; keys the project has not registered are ignored.
    static func parseCustomFields(_ value: JSONValue?, allowed: Set<String>) throws(EmulatorFailure) -> [EmulatedField] {
        guard let value, !value.isNull else { return [] }
        guard let text = value.stringValue else { throw EmulatorFailure.invalid("customFields must be a JSON-encoded string.") }
        let parsed: JSONValue
        do { parsed = try JSONParser.parse(text) } catch { throw EmulatorFailure.invalid("customFields is not valid JSON.") }
        guard let members = parsed.objectValue else { throw EmulatorFailure.invalid("customFields must encode an object.") }
        var fields: [EmulatedField] = []
        for (key, raw) in members where allowed.contains(key) {
            let text: String
            switch raw {
            case .string(let s): text = s
            case .null: continue
            default: text = raw.serialized()
            }
            guard key.count <= DeskLimits.customFieldKeyLength, text.count <= DeskLimits.customFieldValueLength else {
                throw EmulatorFailure.invalid("Custom field \(key) is too long.")
            }
            fields.append(EmulatedField(key: key, value: text))
        }
        return fields
    }

    static func merge(_ existing: [EmulatedField], _ updates: [EmulatedField]) -> [EmulatedField] {
        var result = existing
        for update in updates {
            if let index = result.firstIndex(where: { $0.key == update.key }) { result[index].value = update.value } else { result.append(update) }
        }
        return result
    }

    static func parseRelatedChannels(_ value: JSONValue?) throws(EmulatorFailure) -> [String]? {
        guard let value, !value.isNull else { return nil }
        guard let text = value.stringValue else { throw EmulatorFailure.invalid("relatedChannelUrls must be a comma-separated string.") }
        let urls = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard urls.count <= DeskLimits.maxRelatedChannels else {
            throw EmulatorFailure.invalid("A ticket can have at most \(DeskLimits.maxRelatedChannels) related channels.")
        }
        return urls
    }

    static func parsePriority(_ value: JSONValue?) throws(EmulatorFailure) -> TicketPriority? {
        guard let value, !value.isNull else { return nil }
        guard let text = value.stringValue, let priority = TicketPriority(rawValue: text) else {
            throw EmulatorFailure.invalid("priority must be one of URGENT, HIGH, MEDIUM, LOW.")
        }
        return priority
    }

    func setCustomerCustomFields(_ request: HTTPRequest) throws(EmulatorFailure) -> HTTPResponse {
        let customer = try session(request)
        let body = try request.jsonBody()
        let allowed = world.read { $0.customerFieldKeys }
        let fields = try Self.parseCustomFields(body["customFields"], allowed: allowed)
        return try world.withLock { world throws(EmulatorFailure) in
            let changed = try world.changeCustomer(customer) { $0.customFields = Self.merge($0.customFields, fields) }
            return EmulatorResponse.json(world.customerJSON(changed))
        }
    }

    func createTicket(_ request: HTTPRequest) throws(EmulatorFailure) -> HTTPResponse {
        let customer = try session(request)
        let body = try request.jsonBody()
        try checkAppId(body["sendbirdAppId"]?.stringValue)
        guard let title = body["channelName"]?.stringValue, !title.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw EmulatorFailure.invalid("channelName is required.")
        }
        guard title.count <= 255 else { throw EmulatorFailure.invalid("channelName is longer than 255 characters.") }
        let priority = try Self.parsePriority(body["priority"]) ?? .medium
        let related = try Self.parseRelatedChannels(body["relatedChannelUrls"]) ?? []
        let allowed = world.read { $0.ticketFieldKeys }
        let fields = try Self.parseCustomFields(body["customFields"], allowed: allowed)
        let new = NewTicket(title: title, priority: priority, relatedChannels: related, customFields: fields,
                            channelType: body["channelType"]?.stringValue ?? "SENDBIRD_JAVASCRIPT", info: body["info"]?.stringValue ?? "{}",
                            groupKey: body["groupKey"]?.stringValue)
        return try mutate { world, events throws(EmulatorFailure) in
            let ticket = try world.createTicket(new, customer: customer, events: &events)
            return EmulatorResponse.json(world.ticketJSON(ticket, platform: false), status: 201)
        }
    }

    /// Open = the legacy `status=ASSIGNED&status=UNASSIGNED` (or `status2` values); newest first; the SDK's encoding
    /// of the custom-field filter (`k:v,k2:v2` with values percent-encoded once more).
    func listTickets(_ request: HTTPRequest) throws(EmulatorFailure) -> HTTPResponse {
        let customer = try session(request)
        let limit = try request.intQuery("limit", default: 10, range: 1...100)
        let offset = try request.intQuery("offset", default: 0, range: 0...Int.max)
        let legacy = Set(request.queryValues("status").flatMap { $0.split(separator: ",").map(String.init) })
        let status2 = Set(request.queryValues("status2").flatMap { $0.split(separator: ",").map(String.init) })
        for value in status2 where TicketStatus(rawValue: value) == nil {
            throw EmulatorFailure.invalid("Unknown status2 value \(value).")
        }
        let channelUrl = request.queryValue("channelUrl")
        let group = request.queryValue("group")
        let fieldFilter = try Self.parseFieldFilter(request.queryValue("customFields"))
        let order = request.queryValue("order") ?? "-created_at"
        return world.read { world in
            var matches = world.tickets(ofCustomer: customer).filter { ticket in
                if !legacy.isEmpty, !legacy.contains(ticket.status.legacy),
                   !(legacy.contains("OPEN") && ticket.status.isOpen) { return false }
                if !status2.isEmpty, !status2.contains(ticket.status.rawValue) { return false }
                if let channelUrl, ticket.channelUrl != channelUrl { return false }
                if let group, ticket.groupId.flatMap({ world.teams[$0]?.key }) != group { return false }
                for (key, value) in fieldFilter where !ticket.customFields.contains(where: { $0.key == key && $0.value == value }) {
                    return false
                }
                return true
            }
            Self.sort(&matches, order: order)
            let page = matches.dropFirst(offset).prefix(limit).map { world.ticketJSON($0, platform: false) }
            return EmulatorResponse.json(pageJSON(Array(page), count: matches.count, limit: limit, offset: offset, request: request))
        }
    }

    static func sort(_ tickets: inout [EmulatedTicket], order: String) {
        switch order {
        case "created_at", "id": tickets.sort { $0.id < $1.id }
        case "-updated_at", "-last_message_at": tickets.sort { ($0.updatedAt, $0.id) > ($1.updatedAt, $1.id) }
        case "updated_at": tickets.sort { ($0.updatedAt, $0.id) < ($1.updatedAt, $1.id) }
        default: tickets.sort { $0.id > $1.id }
        }
    }

    static func parseFieldFilter(_ raw: String?) throws(EmulatorFailure) -> [(String, String)] {
        guard let raw, !raw.isEmpty else { return [] }
        var pairs: [(String, String)] = []
        for item in raw.split(separator: ",") {
            guard let colon = item.firstIndex(of: ":") else { throw EmulatorFailure.invalid("customFields filter must be key:value pairs.") }
            let value = String(item[item.index(after: colon)...])
            pairs.append((String(item[..<colon]), value.removingPercentEncoding ?? value))
        }
        return pairs
    }

    func pageJSON(_ results: [JSONValue], count: Int, limit: Int, offset: Int, request: HTTPRequest) -> JSONValue {
        func link(_ newOffset: Int) -> JSONValue {
            var items = request.query.filter { $0.name != "offset" && $0.name != "limit" }.map { "\(escape($0.name))=\(escape($0.value))" }
            items.append("limit=\(limit)")
            items.append("offset=\(newOffset)")
            return .string(baseURL + request.path + "?" + items.joined(separator: "&"))
        }
        return .object([
            ("count", .integer(count)),
            ("next", offset + limit < count ? link(offset + limit) : .null),
            ("previous", offset > 0 ? link(max(0, offset - limit)) : .null),
            ("results", .array(results)),
        ])
    }

    private func escape(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed.subtracting(CharacterSet(charactersIn: "&=+,:"))) ?? text
    }

    func countTickets(_ request: HTTPRequest) throws(EmulatorFailure) -> HTTPResponse {
        let customer = try session(request)
        return world.read { world in
            var counts: [String: Int] = [:]
            for key in ["UNASSIGNED", "ASSIGNED", "CLOSED", "PROACTIVE", "INITIALIZED"] + TicketStatus.allCases.map(\.rawValue) {
                counts[key] = 0
            }
            for ticket in world.tickets(ofCustomer: customer) {
                counts[ticket.status.legacy, default: 0] += 1
                if ticket.status.rawValue != ticket.status.legacy { counts[ticket.status.rawValue, default: 0] += 1 }
            }
            return EmulatorResponse.json(.object(counts.sorted { $0.key < $1.key }.map { ($0.key, .integer($0.value)) }))
        }
    }

    func updateTicket(_ request: HTTPRequest) throws(EmulatorFailure) -> HTTPResponse {
        let (_, id) = try ownTicket(request)
        let body = try request.jsonBody()
        let priority = try Self.parsePriority(body["priority"])
        let related = try Self.parseRelatedChannels(body["relatedChannelUrls"])
        guard priority != nil || related != nil else { throw EmulatorFailure.invalid("Send priority or relatedChannelUrls.") }
        return try mutate { world, events throws(EmulatorFailure) in
            let ticket = try world.changeTicket(id) { ticket in
                if let priority { ticket.priority = priority }
                if let related { ticket.relatedChannels = related }
                ticket.updatedAt = .nowRounded
            }
            return EmulatorResponse.json(world.ticketJSON(ticket, platform: false))
        }
    }

    func setTicketCustomFields(_ request: HTTPRequest) throws(EmulatorFailure) -> HTTPResponse {
        let (_, id) = try ownTicket(request)
        let body = try request.jsonBody()
        let allowed = world.read { $0.ticketFieldKeys }
        let fields = try Self.parseCustomFields(body["customFields"], allowed: allowed)
        return try world.withLock { world throws(EmulatorFailure) in
            let ticket = try world.changeTicket(id) { ticket in
                ticket.customFields = Self.merge(ticket.customFields, fields)
                ticket.updatedAt = .nowRounded
            }
            return EmulatorResponse.json(world.ticketJSON(ticket, platform: false))
        }
    }

    func customerClose(_ request: HTTPRequest) throws(EmulatorFailure) -> HTTPResponse {
        let (_, id) = try ownTicket(request)
        let comment = try request.jsonBody()["closeComment"]?.stringValue ?? ""
        return try mutate { world, events throws(EmulatorFailure) in
            // Changed first, rendered after: `world.ticketJSON(try world.change…)` holds a copy of the world while the
            // change writes to it, and the write then copies every ticket.
            let closed = try world.customerClose(id, comment: comment, events: &events)
            return EmulatorResponse.json(world.ticketJSON(closed, platform: false))
        }
    }

    func reopen(_ request: HTTPRequest) throws(EmulatorFailure) -> HTTPResponse {
        let (_, id) = try ownTicket(request)
        return try mutate { world, events throws(EmulatorFailure) in
            let reopened = try world.reopen(id, events: &events)
            return EmulatorResponse.json(world.ticketJSON(reopened, platform: false))
        }
    }

    func cancel(_ request: HTTPRequest) throws(EmulatorFailure) -> HTTPResponse {
        let (_, id) = try ownTicket(request)
        let transfer = try request.jsonBody()["groupKeyForTransfer"]?.stringValue
        return try mutate { world, events throws(EmulatorFailure) in
            let cancelled = try world.cancel(id, transferTo: transfer, events: &events)
            return EmulatorResponse.json(world.ticketJSON(cancelled, platform: false))
        }
    }

    /// The question a customer picked from an FAQ bot's suggestions. Desk's effect is not documented: the emulator
    /// puts it in the chat as the customer's message (what the customer would have typed) and answers `{}`, which the
    /// SDK requires to be JSON and ignores.
    func selectQuestion(_ request: HTTPRequest) throws(EmulatorFailure) -> HTTPResponse {
        let (_, id) = try ownTicket(request)
        let body = try request.jsonBody()
        guard body["faqFileId"]?.intValue != nil else { throw EmulatorFailure.invalid("faqFileId must be a number.") }
        guard let question = body["question"]?.stringValue, !question.isEmpty else { throw EmulatorFailure.invalid("question must be a string.") }
        return try mutate { world, _ throws(EmulatorFailure) in
            guard world.tickets[id]?.status != .closed else { throw EmulatorFailure.state("The ticket is closed.") }
            let message = Self.textMessage(&world, text: question, sender: "customer")
            _ = try world.changeTicket(id) { $0.messages.append(message) }
            return EmulatorResponse.json(.object([]))
        }
    }

    /// Answers a closure inquiry (CONFIRMED/DECLINED) or a CSAT request (CONFIRMED with score and comment).
    func editMessage(_ request: HTTPRequest) throws(EmulatorFailure) -> HTTPResponse {
        let (_, id) = try ownTicket(request)
        let body = try request.jsonBody()
        guard let messageId = body["messageId"]?.intValue, messageId > 0 else { throw EmulatorFailure.invalid("messageId must be a positive integer.") }
        guard let dataText = body["messageData"]?.stringValue else { throw EmulatorFailure.invalid("messageData must be a JSON-encoded string.") }
        let data: JSONValue
        do { data = try JSONParser.parse(dataText) } catch { throw EmulatorFailure.invalid("messageData is not valid JSON.") }
        guard let typeText = data["type"]?.stringValue, let type = RichMessageType(rawValue: typeText) else {
            throw EmulatorFailure.invalid("messageData.type is not a known rich message type.")
        }
        guard let payload = data["body"], payload.objectValue != nil else { throw EmulatorFailure.invalid("messageData.body must be an object.") }
        guard let stateText = payload["state"]?.stringValue, let state = RichMessageState(rawValue: stateText) else {
            throw EmulatorFailure.invalid("messageData.body.state must be WAITING, CONFIRMED or DECLINED.")
        }
        let answer = MessageAnswer(messageId: messageId, type: type, state: state, payload: payload)
        let staysWaiting = variants.withLock { $0.csatMessageStaysWaiting }
        return try mutate { world, events throws(EmulatorFailure) in
            let (message, ticket) = try world.answer(id, answer, csatStaysWaiting: staysWaiting, events: &events)
            return EmulatorResponse.json(world.messageJSON(message, ticket: ticket))
        }
    }

    /// A deterministic preview (the emulator does not reach the internet).
    func urlPreview(_ request: HTTPRequest) throws(EmulatorFailure) -> HTTPResponse {
        _ = try session(request)
        let body = try request.jsonBody()
        guard let text = body["url"]?.stringValue, let url = URL(string: text), let host = url.host,
              ["http", "https"].contains(url.scheme ?? "") else {
            throw EmulatorFailure.invalid("url must be an absolute http(s) URL.")
        }
        return EmulatorResponse.json(.object([
            ("url", .string(text)), ("title", .string("Preview of \(host)")), ("siteName", .string(host)),
            ("description", .string("A page on \(host).")), ("image", .string("https://\(host)/preview.png")),
        ]))
    }
}
