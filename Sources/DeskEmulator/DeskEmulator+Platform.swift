import Domain
import Foundation
import HTTPServer
import JSON
import Synchronization

/// The server-to-server Platform API (`/platform/v1`), authenticated by `SENDBIRDDESKAPITOKEN`.
extension DeskEmulator {
    typealias PlatformRoute = @Sendable (DeskEmulator, HTTPRequest) throws(EmulatorFailure) -> HTTPResponse

    static func addPlatformRoutes(to router: inout Router<EmulatorHandler>) {
        func add(_ method: String, _ path: String, _ run: @escaping PlatformRoute) {
            router.add(method, "/platform/v1" + path, EmulatorHandler(surface: .platform) { emulator, request throws(EmulatorFailure) in
                guard request.header("sendbirddeskapitoken") == emulator.configuration.apiToken else {
                    throw EmulatorFailure.unauthorized("Invalid SENDBIRDDESKAPITOKEN.")
                }
                return try run(emulator, request)
            })
        }
        addPlatformTicketRoutes(add)
        addPlatformDirectoryRoutes(add)
    }

    /// Tickets: lists, one ticket, its messages (with the faults a test sets), closing, giving back to the queue, priority.
    private static func addPlatformTicketRoutes(_ add: (String, String, @escaping PlatformRoute) -> Void) {
        add("GET", "/tickets") { emulator, request throws(EmulatorFailure) in try emulator.platformTickets(request) }
        add("GET", "/tickets/{id}") { emulator, request throws(EmulatorFailure) in
            try emulator.one(request, \.tickets) { world, ticket in world.ticketJSON(ticket, platform: true) }
        }
        add("GET", "/tickets/{id}/chat_messages") { emulator, request throws(EmulatorFailure) in
            let id = try request.intParameter("id")
            switch emulator.messageFaults.withLock({ $0[id] }) {
            case "500"?: return EmulatorResponse.error(500, "Internal server error.", code: "desk500000")
            case "html"?: return EmulatorResponse.page(502, "Bad Gateway")
            case "no-results"?: return EmulatorResponse.json(.object([("count", .integer(0)), ("detail", .string("ok"))]))
            default: break
            }
            let broken = emulator.messageFaults.withLock { $0[id] } == "broken-message"
            guard let ticket = emulator.world.read({ $0.tickets[id] }) else { throw EmulatorFailure.notFound() }
            return try emulator.platformList(request) { world in
                let messages = ticket.messages.map { world.messageJSON($0, ticket: ticket) }
                // A message no reader can place (no id of any kind, data that is not JSON), first in the list.
                return broken ? [.object([("message", .string("garbled")), ("data", .string("{oops"))])] + messages : messages
            }
        }
        add("PATCH", "/tickets/{id}/close") { emulator, request throws(EmulatorFailure) in
            let id = try request.intParameter("id")
            let comment = try request.jsonBody()["closeComment"]?.stringValue
            return try emulator.mutate { world, events throws(EmulatorFailure) in
                guard let ticket = world.tickets[id] else { throw EmulatorFailure.notFound() }
                guard ticket.status != .closed else { throw EmulatorFailure.state("The ticket is already closed.") }
                let closed = try world.close(id, closeStatus: "CLOSED_BY_ADMIN", comment: comment,
                                            adminType: "SYSTEM_MESSAGE_TICKET_CLOSED_BY_PLATFORM_API", events: &events)
                return EmulatorResponse.json(world.ticketJSON(closed, platform: true))
            }
        }
        add("PATCH", "/tickets/{id}/cancel") { emulator, request throws(EmulatorFailure) in
            let id = try request.intParameter("id")
            return try emulator.mutate { world, events throws(EmulatorFailure) in
                let cancelled = try world.cancel(id, transferTo: nil, events: &events)
                return EmulatorResponse.json(world.ticketJSON(cancelled, platform: true))
            }
        }
        add("POST", "/tickets/transfer_to_group") { emulator, request throws(EmulatorFailure) in try emulator.transferToGroup(request) }
        add("PATCH", "/tickets/{id}") { emulator, request throws(EmulatorFailure) in
            let id = try request.intParameter("id")
            guard let priority = try Self.parsePriority(request.jsonBody()["priority"]) else {
                throw EmulatorFailure.invalid("Send priority.")
            }
            return try emulator.mutate { world, events throws(EmulatorFailure) in
                let ticket = try world.changeTicket(id) { ticket in
                    ticket.priority = priority
                    ticket.updatedAt = .nowRounded
                }
                return EmulatorResponse.json(world.ticketJSON(ticket, platform: true))
            }
        }
    }

    /// Agents, teams (groups) and customers.
    private static func addPlatformDirectoryRoutes(_ add: (String, String, @escaping PlatformRoute) -> Void) {
        add("GET", "/agents") { emulator, request throws(EmulatorFailure) in
            try emulator.platformList(request) { world in world.agents.values.sorted { $0.id < $1.id }.map { world.agentJSON($0) } }
        }
        add("GET", "/agents/{id}") { emulator, request throws(EmulatorFailure) in
            try emulator.one(request, \.agents) { world, agent in world.agentJSON(agent) }
        }
        add("GET", "/groups") { emulator, request throws(EmulatorFailure) in
            try emulator.platformList(request) { world in world.teams.values.sorted { $0.id < $1.id }.map { world.teamJSON($0) } }
        }
        add("GET", "/groups/{id}") { emulator, request throws(EmulatorFailure) in
            try emulator.one(request, \.teams) { world, team in world.teamJSON(team, members: true) }
        }
        add("GET", "/customers") { emulator, request throws(EmulatorFailure) in
            let sendbirdId = request.queryValue("sendbird_id")
            return try emulator.platformPage(request, listing: "customers", { world in
                sendbirdId.map { world.customer(sendbirdId: $0).map { [$0.id] } ?? [] } ?? world.customers.keys.sorted()
            }, render: { world, id in world.customers[id].map { world.customerJSON($0) } })
        }
        add("GET", "/customers/{id}") { emulator, request throws(EmulatorFailure) in
            try emulator.one(request, \.customers) { world, customer in world.customerJSON(customer) }
        }
    }

    /// `POST /tickets/transfer_to_group`: tickets moved to a team's queue, PENDING there, under the rules of a customer's
    /// cancel into that team (the answer's `transferredTickets` as the Platform API renders tickets: assumed).
    func transferToGroup(_ request: HTTPRequest) throws(EmulatorFailure) -> HTTPResponse {
        let body = try request.jsonBody()
        guard let ids = body["tickets"]?.arrayValue?.compactMap(\.intValue), !ids.isEmpty, ids.count == body["tickets"]?.arrayValue?.count else {
            throw EmulatorFailure.invalid("tickets must be a list of ticket ids.")
        }
        guard body["status"]?.stringValue == TicketStatus.pending.rawValue else { throw EmulatorFailure.invalid("status must be PENDING.") }
        guard let key = body["groupKey"]?.stringValue, !key.isEmpty else { throw EmulatorFailure.invalid("groupKey is required.") }
        return try mutate { world, events throws(EmulatorFailure) in
            guard world.team(key: key) != nil else { throw EmulatorFailure.invalid("Unknown groupKey.") }
            var moved: [JSONValue] = []
            for id in ids {
                let cancelled = try world.cancel(id, transferTo: key, events: &events)
                moved.append(world.ticketJSON(cancelled, platform: true))
            }
            return EmulatorResponse.json(.object([("transferredTickets", .array(moved))]))
        }
    }

    /// `GET …/{id}`: the object of that id in one of the world's tables, rendered, or 404.
    func one<Item>(_ request: HTTPRequest, _ table: KeyPath<EmulatorWorld, TrackedMap<Int, Item>>,
                   _ render: (EmulatorWorld, Item) -> JSONValue) throws(EmulatorFailure) -> HTTPResponse {
        let id = try request.intParameter("id")
        return try world.read { world throws(EmulatorFailure) in
            guard let item = world[keyPath: table][id] else { throw EmulatorFailure.notFound() }
            return EmulatorResponse.json(render(world, item))
        }
    }

    /// A page of a short list (agents, teams, a ticket's messages), made whole for each page.
    func platformList(_ request: HTTPRequest, _ items: (EmulatorWorld) -> [JSONValue]) throws(EmulatorFailure) -> HTTPResponse {
        try platformWindow(request) { world, limit, offset in
            let all = items(world)
            return (Array(all.dropFirst(offset).prefix(limit)), all.count)
        }
    }

    /// A page of a list of tickets or customers, which `ids` filters and orders once for all its pages while the world
    /// stands (`ListingCache`); only the page's items are rendered.
    func platformPage(_ request: HTTPRequest, listing: String, _ ids: (EmulatorWorld) -> [Int],
                      render: (EmulatorWorld, Int) -> JSONValue?) throws(EmulatorFailure) -> HTTPResponse {
        // Each name and value with its length: no two queries make the same key, whatever bytes they hold.
        var key = listing
        for item in request.query where item.name != "limit" && item.name != "offset" {
            key += "&\(item.name.utf8.count):\(item.name)=\(item.value.utf8.count):\(item.value)"
        }
        return try platformWindow(request) { world, limit, offset in
            let all = listings.withLock { cache in cache.ids(key, revision: world.revision) { ids(world) } }
            return (all.dropFirst(offset).prefix(limit).compactMap { render(world, $0) }, all.count)
        }
    }

    /// The request's `limit` (1–500, default 50) and `offset`, the page `items` takes at them under the world's lock
    /// with the list's whole count, answered as Desk's Platform lists are.
    private func platformWindow(_ request: HTTPRequest,
                                _ items: (EmulatorWorld, _ limit: Int, _ offset: Int) -> ([JSONValue], Int))
        throws(EmulatorFailure) -> HTTPResponse {
        let limit = try request.intQuery("limit", default: 50, range: 1...500)
        let offset = try request.intQuery("offset", default: 0, range: 0...Int.max)
        let (page, count) = world.read { world in items(world, limit, offset) }
        return EmulatorResponse.json(pageJSON(page, count: count, limit: limit, offset: offset, request: request))
    }

    /// Filters: `status2` (repeatable or comma-separated), `agent`, `sendbird_id`, `channel_url`, `group` (team id),
    /// `start_date` / `end_date` (YYYY-MM-DD, inclusive, UTC; Sendbird documents the parameters but not the field they
    /// apply to: here the last update), `updated_after` (ISO 8601, older gateways); `order` as in the customer API
    /// (default newest first).
    func platformTickets(_ request: HTTPRequest) throws(EmulatorFailure) -> HTTPResponse {
        let status2 = Set(request.queryValues("status2").flatMap { $0.split(separator: ",").map(String.init) })
        for value in status2 where TicketStatus(rawValue: value) == nil {
            throw EmulatorFailure.invalid("Unknown status2 value \(value).")
        }
        let agent = request.queryValue("agent").flatMap(Int.init)
        let sendbirdId = request.queryValue("sendbird_id")
        let channelUrl = request.queryValue("channel_url")
        let group = request.queryValue("group").flatMap(Int.init)
        var updatedAfter: Double?
        if let text = request.queryValue("updated_after") {
            guard let parsed = ISOTimestamp.parse(text) else { throw EmulatorFailure.invalid("updated_after must be an ISO 8601 timestamp.") }
            updatedAfter = parsed
        }
        func day(_ name: String) throws(EmulatorFailure) -> Double? {
            guard let text = request.queryValue(name) else { return nil }
            guard text.count == 10, let start = ISOTimestamp.parse(text + "T00:00:00Z") else {
                throw EmulatorFailure.invalid("\(name) must be a date as YYYY-MM-DD.")
            }
            return start
        }
        let startDate = try day("start_date")
        let endDate = try day("end_date").map { $0 + 86_400 }
        let order = request.queryValue("order") ?? "-created_at"
        let byCreation = variants.withLock { $0.ticketListDateField == "created" }
        return try platformPage(request, listing: byCreation ? "tickets by creation" : "tickets", { world in
            // A channel or a customer named: only their tickets are looked at.
            let candidates: [EmulatedTicket]
            if let channelUrl {
                candidates = world.ticket(channelUrl: channelUrl).map { [$0] } ?? []
            } else if let sendbirdId {
                candidates = world.customer(sendbirdId: sendbirdId).map { world.tickets(ofCustomer: $0.id) } ?? []
            } else {
                candidates = Array(world.tickets.values)
            }
            var matches = candidates.filter { ticket in
                let filtered = (byCreation ? ticket.createdAt : ticket.updatedAt).timeIntervalSince1970
                if !status2.isEmpty, !status2.contains(ticket.status.rawValue) { return false }
                if let agent, ticket.agentId != agent { return false }
                if let sendbirdId, world.customers[ticket.customerId]?.sendbirdId != sendbirdId { return false }
                if let channelUrl, ticket.channelUrl != channelUrl { return false }
                if let group, ticket.groupId != group { return false }
                if let updatedAfter, ticket.updatedAt.timeIntervalSince1970 <= updatedAfter { return false }
                if let startDate, filtered < startDate { return false }
                if let endDate, filtered >= endDate { return false }
                return true
            }
            Self.sort(&matches, order: order)
            return matches.map(\.id)
        }, render: { world, id in world.tickets[id].map { world.ticketJSON($0, platform: true) } })
    }
}
