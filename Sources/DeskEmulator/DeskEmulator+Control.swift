import Domain
import Foundation
import HTTPServer
import JSON
import Synchronization

/// `/emulator/…`: plays the agent's and the system's side so tests and demos can walk whole ticket lifecycles.
extension DeskEmulator {
    typealias ControlRoute = @Sendable (DeskEmulator, HTTPRequest) throws(EmulatorFailure) -> HTTPResponse

    static func addControlRoutes(to router: inout Router<EmulatorHandler>) {
        func add(_ method: String, _ path: String, _ run: @escaping ControlRoute) {
            router.add(method, "/emulator" + path, EmulatorHandler(surface: .control, run: run))
        }
        addDirectoryRoutes(add)
        addSimulationRoutes(add)
        addTicketReadRoutes(add)
        addTicketStateRoutes(add)
        addTicketEndRoutes(add)
    }

    /// Teams, agents, customers and custom field keys.
    private static func addDirectoryRoutes(_ add: (String, String, @escaping ControlRoute) -> Void) {
        add("POST", "/teams") { emulator, request throws(EmulatorFailure) in
            let body = try request.jsonBody()
            guard let key = body["key"]?.stringValue, Self.isValidTeamKey(key) else {
                throw EmulatorFailure.invalid("key must be lowercase letters, digits, '-' or '_'.")
            }
            let name = body["name"]?.stringValue ?? key
            return try emulator.world.withLock { world throws(EmulatorFailure) in
                let team = try Self.addTeam(&world, key: key, name: name, description: body["description"]?.stringValue ?? "")
                return EmulatorResponse.json(world.teamJSON(team), status: 201)
            }
        }
        add("POST", "/agents") { emulator, request throws(EmulatorFailure) in
            let body = try request.jsonBody()
            guard let name = body["displayName"]?.stringValue, !name.isEmpty,
                  let sendbirdId = body["sendbirdId"]?.stringValue, !sendbirdId.isEmpty else {
                throw EmulatorFailure.invalid("displayName and sendbirdId are required.")
            }
            let keys = body["teamKeys"]?.arrayValue?.compactMap(\.stringValue) ?? []
            return try emulator.world.withLock { world throws(EmulatorFailure) in
                let agent = try Self.addAgent(&world, displayName: name, sendbirdId: sendbirdId, teamKeys: keys,
                                              email: body["email"]?.stringValue)
                return EmulatorResponse.json(world.agentJSON(agent), status: 201)
            }
        }
        add("POST", "/customers") { emulator, request throws(EmulatorFailure) in
            let body = try request.jsonBody()
            guard let sendbirdId = body["sendbirdId"]?.stringValue, !sendbirdId.isEmpty else {
                throw EmulatorFailure.invalid("sendbirdId is required.")
            }
            return try emulator.world.withLock { world throws(EmulatorFailure) in
                let customer = try Self.addCustomer(&world, sendbirdId: sendbirdId, accessToken: body["accessToken"]?.stringValue ?? "",
                                                    displayName: body["displayName"]?.stringValue ?? sendbirdId)
                return EmulatorResponse.json(world.customerJSON(customer), status: 201)
            }
        }
        // Desk sessions end (an expiry, a revocation): every Desk token of the customer is refused from now on.
        add("POST", "/customers/{sendbirdId}/end-sessions") { emulator, request throws(EmulatorFailure) in
            let sendbirdId = request.pathParameters["sendbirdId"] ?? ""
            return try emulator.world.withLock { world throws(EmulatorFailure) in
                guard let customer = world.customer(sendbirdId: sendbirdId) else { throw EmulatorFailure.notFound() }
                let tokens = world.sessions.filter { $0.value == customer.id }.map(\.key)
                for token in tokens { world.sessions.removeValue(forKey: token) }
                return EmulatorResponse.json(.object([("ended", .integer(tokens.count))]))
            }
        }
        add("POST", "/custom-field-keys") { emulator, request throws(EmulatorFailure) in
            let body = try request.jsonBody()
            let keys = body["keys"]?.arrayValue?.compactMap(\.stringValue) ?? []
            let target = body["target"]?.stringValue ?? "ticket"
            return try emulator.world.withLock { world in
                if target == "customer" { world.customerFieldKeys.formUnion(keys) } else { world.ticketFieldKeys.formUnion(keys) }
                return EmulatorResponse.json(.object([
                    ("ticket", .array(world.ticketFieldKeys.sorted().map(JSONValue.string))),
                    ("customer", .array(world.customerFieldKeys.sorted().map(JSONValue.string))),
                ]))
            }
        }
    }

    /// Settings, faults and webhook targets: how the emulated Desk behaves.
    private static func addSimulationRoutes(_ add: (String, String, @escaping ControlRoute) -> Void) {
        add("POST", "/settings") { emulator, request throws(EmulatorFailure) in try emulator.applySettings(try request.jsonBody()) }
        add("POST", "/faults") { emulator, request throws(EmulatorFailure) in
            let faults = try Self.faults(from: try request.jsonBody())
            emulator.setFaults(faults)
            return EmulatorResponse.json(.object([("failRate", .number(faults.failRate)), ("latencyMs", .integer(faults.latencyMs)),
                                                  ("answerDelayMs", .integer(faults.answerDelayMs)), ("down", .bool(faults.down))]))
        }
        add("GET", "/held") { emulator, _ throws(EmulatorFailure) in
            EmulatorResponse.json(.object([("held", .integer(emulator.held.withLock { $0.count }))]))
        }
        add("POST", "/release") { emulator, _ throws(EmulatorFailure) in
            EmulatorResponse.json(.object([("released", .integer(emulator.releaseHeld()))]))
        }
        add("POST", "/webhooks") { emulator, request throws(EmulatorFailure) in
            let body = try request.jsonBody()
            let urls = body["urls"]?.arrayValue?.compactMap(\.stringValue) ?? []
            guard let secret = body["secret"]?.stringValue, !secret.isEmpty else { throw EmulatorFailure.invalid("secret is required.") }
            emulator.setWebhooks(urls: urls, secret: secret)
            return EmulatorResponse.json(.object([("urls", .array(urls.map(JSONValue.string)))]))
        }
        add("GET", "/traces") { emulator, _ throws(EmulatorFailure) in
            EmulatorResponse.json(.array(emulator.traces.withLock { $0 }.map {
                .object([("traceparent", .string($0.traceparent)), ("method", .string($0.method)), ("path", .string($0.path))])
            }))
        }
        add("GET", "/webhooks/stats") { emulator, _ throws(EmulatorFailure) in
            EmulatorResponse.json(emulator.takeWebhookStats().json)
        }
        add("POST", "/tickets/{id}/chat-messages-fault") { emulator, request throws(EmulatorFailure) in
            let id = try request.intParameter("id")
            let mode = try request.jsonBody()["mode"]?.stringValue
            if let mode, !["500", "html", "no-results", "broken-message", "none"].contains(mode) {
                throw EmulatorFailure.invalid("mode must be 500, html, no-results, broken-message or none.")
            }
            emulator.setMessageFault(ticketId: id, mode == "none" ? nil : mode)
            return EmulatorResponse.json(.object([("mode", mode.map(JSONValue.string) ?? .null)]))
        }
    }

    /// `POST /control/settings`: how this Desk behaves (webhook shape, list dates, CSAT message answers, auto-close).
    func applySettings(_ body: JSONValue) throws(EmulatorFailure) -> HTTPResponse {
        if let text = body["webhookShape"]?.stringValue {
            guard let shape = WebhookShape(rawValue: text) else {
                throw EmulatorFailure.invalid("webhookShape must be one of \(WebhookShape.allCases.map(\.rawValue).joined(separator: ", ")).")
            }
            webhooks.shape = shape
        }
        if let field = body["ticketListDateField"] {
            guard let value = field.stringValue, ["updated", "created"].contains(value) else {
                throw EmulatorFailure.invalid("ticketListDateField must be updated or created.")
            }
            variants.withLock { $0.ticketListDateField = value }
        }
        if let waiting = body["csatMessageStaysWaiting"]?.boolValue { variants.withLock { $0.csatMessageStaysWaiting = waiting } }
        let current = variants.withLock { $0 }
        return try world.withLock { world in
            if let value = body["autoCloseOnConfirm"]?.boolValue { world.autoCloseOnConfirm = value }
            return EmulatorResponse.json(.object([("autoCloseOnConfirm", .bool(world.autoCloseOnConfirm)),
                                                  ("webhookShape", .string(webhooks.shape.rawValue)),
                                                  ("csatMessageStaysWaiting", .bool(current.csatMessageStaysWaiting)),
                                                  ("ticketListDateField", .string(current.ticketListDateField))]))
        }
    }

    /// An integer field within `range`, or nil when absent; anything else is a 400 naming the field.
    static func boundedInteger(_ body: JSONValue, _ name: String, _ range: ClosedRange<Int>) throws(EmulatorFailure) -> Int? {
        guard let field = body[name] else { return nil }
        guard let value = field.intValue, range.contains(value) else {
            throw EmulatorFailure.invalid("\(name) must be an integer from \(range.lowerBound) to \(range.upperBound).")
        }
        return value
    }

    /// `POST /control/faults`: the faults to inject, checked field by field.
    static func faults(from body: JSONValue) throws(EmulatorFailure) -> EmulatorFaults {
        var faults = EmulatorFaults()
        if let rate = body["failRate"] {
            guard case let value? = rate.intValue.map(Double.init) ?? { if case .number(let d) = rate { return d } else { return nil } }(),
                  (0...1).contains(value) else { throw EmulatorFailure.invalid("failRate must be a number from 0 to 1.") }
            faults.failRate = value
        }
        if let value = try Self.boundedInteger(body, "latencyMs", 0...60_000) { faults.latencyMs = value }
        if let value = try Self.boundedInteger(body, "answerDelayMs", 0...60_000) { faults.answerDelayMs = value }
        faults.down = body["down"]?.boolValue ?? false
        if let value = try Self.boundedInteger(body, "rateLimitNext", 0...10_000) { faults.rateLimitNext = value }
        faults.rateLimitCustomers = body["rateLimitCustomers"]?.boolValue ?? false
        if let hint = body["retryAfter"] {
            guard let value = hint.stringValue, value.count <= 64, !value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" }) else {
                throw EmulatorFailure.invalid("retryAfter must be a header value of at most 64 characters.")
            }
            faults.retryAfter = value
        }
        if let value = try Self.boundedInteger(body, "failNext", 0...10_000) { faults.failNext = value }
        if let value = try Self.boundedInteger(body, "garbleNext", 0...10_000) { faults.garbleNext = value }
        if let value = try Self.boundedInteger(body, "holdNext", 0...100) { faults.holdNext = value }
        return faults
    }

    /// A ticket as the agent sees it, the customer's messages, assignment.
    private static func addTicketReadRoutes(_ add: (String, String, @escaping ControlRoute) -> Void) {
        add("GET", "/tickets/{id}") { emulator, request throws(EmulatorFailure) in
            let id = try request.intParameter("id")
            return try emulator.world.read { world throws(EmulatorFailure) in
                guard let ticket = world.tickets[id] else { throw EmulatorFailure.notFound() }
                guard case .object(var fields) = world.ticketJSON(ticket, platform: true) else { throw EmulatorFailure.notFound() }
                fields.append(("messages", .array(ticket.messages.map { world.messageJSON($0, ticket: ticket) })))
                return EmulatorResponse.json(.object(fields))
            }
        }
        add("POST", "/tickets/{id}/customer-message") { emulator, request throws(EmulatorFailure) in
            let id = try request.intParameter("id")
            let text = try request.jsonBody()["text"]?.stringValue ?? "Hello"
            return try emulator.controlMutation(id) { world, ticket, events throws(EmulatorFailure) in
                guard ticket.status != .closed else { throw EmulatorFailure.state("The ticket is closed.") }
                let now = Date.nowRounded
                if ticket.status == .initialized {
                    ticket.status = .pending
                    ticket.issuedAt = now
                } else if ticket.status == .idle {
                    ticket.status = .active
                }
                ticket.messages.append(Self.textMessage(&world, text: text, sender: "customer"))
                return ticket.status != world.tickets[id]?.status
            }
        }
        add("POST", "/tickets/{id}/assign") { emulator, request throws(EmulatorFailure) in
            let id = try request.intParameter("id")
            let body = try request.jsonBody()
            guard let agentId = body["agentId"]?.intValue else { throw EmulatorFailure.invalid("agentId is required.") }
            let teamKey = body["teamKey"]?.stringValue
            return try emulator.controlMutation(id, extraEvent: .ticketAssigned) { world, ticket, events throws(EmulatorFailure) in
                guard let agent = world.agents[agentId] else { throw EmulatorFailure.invalid("Unknown agent \(agentId).") }
                guard [.pending, .active, .idle, .workInProgress].contains(ticket.status) else {
                    throw EmulatorFailure.state("Only PENDING, ACTIVE, IDLE or WORK_IN_PROGRESS tickets can be assigned; this one is \(ticket.status.rawValue).")
                }
                if let teamKey {
                    guard let team = world.team(key: teamKey) else { throw EmulatorFailure.invalid("Unknown team \(teamKey).") }
                    ticket.groupId = team.id
                } else if !(ticket.groupId.map(agent.teamIds.contains) ?? false) {
                    ticket.groupId = agent.teamIds.first ?? ticket.groupId
                }
                if ticket.agentId == nil, let issued = ticket.issuedAt {
                    ticket.firstResponseTime = max(0, Int(Date().timeIntervalSince(issued)))
                }
                ticket.agentId = agentId
                ticket.status = .active
                ticket.messages.append(world.adminMessage("SYSTEM_MESSAGE_TICKET_ASSIGNED_BY_AGENT"))
                return true
            }
        }
    }

    /// The agent's side of a ticket's life: creation date, idle, in progress, closure inquiry.
    private static func addTicketStateRoutes(_ add: (String, String, @escaping ControlRoute) -> Void) {
        add("POST", "/tickets/{id}/created-at") { emulator, request throws(EmulatorFailure) in
            // Moves a ticket's creation into the past (for tests of late ratings on old tickets).
            let id = try request.intParameter("id")
            guard let text = try request.jsonBody()["createdAt"]?.stringValue, let time = ISOTimestamp.parse(text) else {
                throw EmulatorFailure.invalid("createdAt must be an ISO 8601 time.")
            }
            return try emulator.mutate { world, _ throws(EmulatorFailure) in
                guard var ticket = world.tickets[id] else { throw EmulatorFailure.notFound() }
                ticket.createdAt = Date(timeIntervalSince1970: time)
                world.tickets[id] = ticket
                return EmulatorResponse.json(world.ticketJSON(ticket, platform: true))
            }
        }
        add("POST", "/tickets/{id}/idle") { emulator, request throws(EmulatorFailure) in
            let id = try request.intParameter("id")
            return try emulator.controlMutation(id) { world, ticket, events throws(EmulatorFailure) in
                guard ticket.status == .active else { throw EmulatorFailure.state("Only ACTIVE tickets go idle; this one is \(ticket.status.rawValue).") }
                ticket.status = .idle
                ticket.messages.append(world.adminMessage("SYSTEM_MESSAGE_TICKET_ACTIVE_TO_IDLE_BY_SYSTEM"))
                return true
            }
        }
        add("POST", "/tickets/{id}/work-in-progress") { emulator, request throws(EmulatorFailure) in
            let id = try request.intParameter("id")
            return try emulator.controlMutation(id) { world, ticket, events throws(EmulatorFailure) in
                guard ticket.status == .active || ticket.status == .idle else {
                    throw EmulatorFailure.state("Only ACTIVE or IDLE tickets can be put in progress.")
                }
                ticket.status = .workInProgress
                ticket.messages.append(world.adminMessage("SYSTEM_MESSAGE_TICKET_WIP_BY_AGENT"))
                return true
            }
        }
        add("POST", "/tickets/{id}/closure-inquiry") { emulator, request throws(EmulatorFailure) in
            let id = try request.intParameter("id")
            return try emulator.sendRichMessage(id, type: .closureInquiry, text: "Is your issue resolved?") { ticket throws(EmulatorFailure) in
                guard ticket.status == .active || ticket.status == .idle, ticket.agentId != nil else {
                    throw EmulatorFailure.state("The assigned agent can ask to close only ACTIVE or IDLE tickets; this one is \(ticket.status.rawValue).")
                }
            }
        }
    }

    /// The end of a ticket's life on the agent's side: closing it, then asking for CSAT.
    private static func addTicketEndRoutes(_ add: (String, String, @escaping ControlRoute) -> Void) {
        add("POST", "/tickets/{id}/close") { emulator, request throws(EmulatorFailure) in
            let id = try request.intParameter("id")
            let comment = try request.jsonBody()["comment"]?.stringValue
            return try emulator.mutate { world, events throws(EmulatorFailure) in
                guard let ticket = world.tickets[id] else { throw EmulatorFailure.notFound() }
                guard [.active, .idle, .workInProgress].contains(ticket.status) else {
                    throw EmulatorFailure.state("Agents close ACTIVE, IDLE or WORK_IN_PROGRESS tickets; this one is \(ticket.status.rawValue).")
                }
                let closed = try world.close(id, closeStatus: "CLOSED_BY_AGENT", comment: comment,
                                            adminType: "SYSTEM_MESSAGE_TICKET_CLOSED_BY_AGENT", events: &events)
                return EmulatorResponse.json(world.ticketJSON(closed, platform: true))
            }
        }
        add("POST", "/tickets/{id}/csat-request") { emulator, request throws(EmulatorFailure) in
            let id = try request.intParameter("id")
            return try emulator.sendRichMessage(id, type: .customerSatisfaction, text: "How would you rate our support?") { ticket throws(EmulatorFailure) in
                guard ticket.status == .closed else { throw EmulatorFailure.state("CSAT requests are sent after the ticket is closed.") }
            }
        }
    }

    static func isValidTeamKey(_ key: String) -> Bool {
        !key.isEmpty && key.count <= 100 && key.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "-" || $0 == "_"
        }
    }

    static func addTeam(_ world: inout EmulatorWorld, key: String, name: String, description: String) throws(EmulatorFailure) -> EmulatedTeam {
        guard world.team(key: key) == nil else { throw EmulatorFailure.invalid("A team with key \(key) exists.") }
        let team = EmulatedTeam(id: world.nextTeamId, key: key, name: name, description: description, createdAt: .nowRounded)
        world.nextTeamId += 1
        world.teams[team.id] = team
        return team
    }

    static func addAgent(_ world: inout EmulatorWorld, displayName: String, sendbirdId: String, teamKeys: [String],
                         email: String?) throws(EmulatorFailure) -> EmulatedAgent {
        guard !world.agents.values.contains(where: { $0.sendbirdId == sendbirdId }) else {
            throw EmulatorFailure.invalid("An agent with sendbirdId \(sendbirdId) exists.")
        }
        var teamIds: [Int] = []
        for key in teamKeys {
            guard let team = world.team(key: key) else { throw EmulatorFailure.invalid("Unknown team \(key).") }
            teamIds.append(team.id)
        }
        let agent = EmulatedAgent(id: world.nextAgentId, displayName: displayName, sendbirdId: sendbirdId,
                                  email: email ?? "\(sendbirdId)@example.com", teamIds: teamIds, createdAt: .nowRounded)
        world.nextAgentId += 1
        world.agents[agent.id] = agent
        return agent
    }

    static func addCustomer(_ world: inout EmulatorWorld, sendbirdId: String, accessToken: String,
                            displayName: String) throws(EmulatorFailure) -> EmulatedCustomer {
        guard world.customer(sendbirdId: sendbirdId) == nil else { throw EmulatorFailure.invalid("Customer \(sendbirdId) exists.") }
        let customer = EmulatedCustomer(id: world.nextCustomerId, sendbirdId: sendbirdId, displayName: displayName,
                                        accessToken: accessToken, customFields: [], createdAt: .nowRounded)
        world.nextCustomerId += 1
        world.customers[customer.id] = customer
        return customer
    }

    static func textMessage(_ world: inout EmulatorWorld, text: String, sender: String) -> EmulatedMessage {
        defer { world.nextMessageId += 1 }
        let now = Date.nowRounded
        return EmulatedMessage(messageId: world.nextMessageId, richType: nil, customType: "", state: nil, score: nil,
                               comment: nil, text: text, adminType: nil, sender: sender, createdAt: now, updatedAt: now)
    }

    /// Applies an agent/system change to one ticket; emits TICKET.STATUS.UPDATED when `body` reports a change.
    func controlMutation(_ id: Int, extraEvent: DeskEventType? = nil,
                         _ body: (inout EmulatorWorld, inout EmulatedTicket, inout [WebhookEvent]) throws(EmulatorFailure) -> Bool) throws(EmulatorFailure) -> HTTPResponse {
        try mutate { world, events throws(EmulatorFailure) in
            guard var ticket = world.tickets[id] else { throw EmulatorFailure.notFound() }
            let before = ticket.status
            let changed = try body(&world, &ticket, &events)
            ticket.updatedAt = .nowRounded
            world.tickets[id] = ticket
            let json = world.ticketJSON(ticket, platform: true)
            if let extraEvent { events.append(WebhookEvent(type: extraEvent, ticket: json)) }
            if changed, before != ticket.status { events.append(WebhookEvent(type: .statusUpdated, ticket: json)) }
            return EmulatorResponse.json(json)
        }
    }

    func sendRichMessage(_ id: Int, type: RichMessageType, text: String,
                         check: (EmulatedTicket) throws(EmulatorFailure) -> Void) throws(EmulatorFailure) -> HTTPResponse {
        try mutate { world, events throws(EmulatorFailure) in
            let (message, updated) = try world.sendRichMessage(id, type: type, text: text, events: &events, check: check)
            return EmulatorResponse.json(.object([("messageId", .integer(message.messageId)),
                                                  ("message", world.messageJSON(message, ticket: updated))]), status: 201)
        }
    }
}
