import Domain
import Foundation
import JSON

/// The webhook events the emulated Desk sends.
enum DeskEventType: String, Sendable {
    case ticketCreated = "TICKET.CREATED"
    case ticketAssigned = "TICKET.ASSIGNED"
    case statusUpdated = "TICKET.STATUS.UPDATED"
    case csatRequested = "TICKET.CSAT.REQUESTED"
    case csatUpdated = "TICKET.CSAT.UPDATED"
}

/// A ticket as a customer asks for it (already checked against Desk's field limits by the route).
struct NewTicket: Sendable {
    var title: String
    var priority: TicketPriority = .medium
    var relatedChannels: [String] = []
    var customFields: [EmulatedField] = []
    var channelType = "SENDBIRD_JAVASCRIPT"
    var info = "{}"
    var groupKey: String?
}

/// Desk's ticket rules on the world: every change is a value change that returns what changed and appends the webhook
/// events Desk sends for it. The routes parse, call one of these under the emulator's lock, and render.
extension EmulatorWorld {
    /// A system message (Desk's admin messages: assigned, closed, reopened, …).
    mutating func adminMessage(_ type: String, at now: Date = .nowRounded) -> EmulatedMessage {
        defer { nextMessageId += 1 }
        return EmulatedMessage(messageId: nextMessageId, richType: nil, customType: RichMessageType.adminCustomType, state: nil, score: nil,
                               comment: nil, text: type, adminType: type, sender: "system", createdAt: now, updatedAt: now)
    }

    mutating func createTicket(_ new: NewTicket, customer: Int, events: inout [WebhookEvent]) throws(EmulatorFailure) -> EmulatedTicket {
        var groupId: Int?
        if let key = new.groupKey, !key.isEmpty {
            guard let team = team(key: key) else { throw EmulatorFailure.invalid("Unknown groupKey \(key).") }
            groupId = team.id
        }
        let id = nextTicketId
        nextTicketId += 1
        let now = Date.nowRounded
        let ticket = EmulatedTicket(
            id: id, channelName: new.title,
            channelUrl: "sendbird_desk_\(appId.lowercased())_\(id)_\(UUID().uuidString.prefix(8).lowercased())",
            channelType: new.channelType, customerId: customer, status: .initialized, closeStatus: "NOT_CLOSED",
            priority: new.priority, groupId: groupId, agentId: nil, customFields: new.customFields, relatedChannels: new.relatedChannels,
            info: new.info, createdAt: now, updatedAt: now, issuedAt: nil, closedAt: nil, closeComment: nil,
            customerSatisfactionScore: nil, customerSatisfactionComment: nil, firstResponseTime: 0, messages: [])
        tickets[id] = ticket
        events.append(WebhookEvent(type: .ticketCreated, ticket: ticketJSON(ticket, platform: true)))
        return ticket
    }

    /// Closes the ticket with Desk's admin message and webhook; returns it closed.
    @discardableResult
    mutating func close(_ id: Int, closeStatus: String, comment: String?, adminType: String,
                        events: inout [WebhookEvent]) throws(EmulatorFailure) -> EmulatedTicket {
        let now = Date.nowRounded
        let message = adminMessage(adminType, at: now)
        let closed = try changeTicket(id) { ticket in
            (ticket.status, ticket.closeStatus, ticket.closeComment, ticket.closedAt, ticket.updatedAt) = (.closed, closeStatus, comment, now, now)
            ticket.messages.append(message)
        }
        events.append(WebhookEvent(type: .statusUpdated, ticket: ticketJSON(closed, platform: true)))
        return closed
    }

    /// A customer closes an ACTIVE or IDLE ticket.
    mutating func customerClose(_ id: Int, comment: String, events: inout [WebhookEvent]) throws(EmulatorFailure) -> EmulatedTicket {
        let status = try existingTicket(id).status
        guard status.customerMayClose else {
            throw EmulatorFailure.state("Customers can close only ACTIVE or IDLE tickets; this one is \(status.rawValue).")
        }
        return try close(id, closeStatus: "CLOSED_BY_CUSTOMER", comment: comment, adminType: "SYSTEM_MESSAGE_TICKET_CLOSED_BY_CUSTOMER",
                         events: &events)
    }

    /// A customer reopens a CLOSED ticket: back to its agent when it had one, otherwise into the queue.
    mutating func reopen(_ id: Int, events: inout [WebhookEvent]) throws(EmulatorFailure) -> EmulatedTicket {
        let status = try existingTicket(id).status
        guard status == .closed else { throw EmulatorFailure.state("Only CLOSED tickets can be reopened; this one is \(status.rawValue).") }
        let message = adminMessage("SYSTEM_MESSAGE_TICKET_REOPENED_BY_CUSTOMER")
        let reopened = try changeTicket(id) { ticket in
            ticket.status = ticket.agentId == nil ? .pending : .active
            (ticket.closeStatus, ticket.closedAt, ticket.closeComment, ticket.updatedAt) = ("NOT_CLOSED", nil, nil, .nowRounded)
            ticket.messages.append(message)
        }
        events.append(WebhookEvent(type: .statusUpdated, ticket: ticketJSON(reopened, platform: true)))
        return reopened
    }

    /// A customer gives an open ticket back to the queue, optionally to another team.
    mutating func cancel(_ id: Int, transferTo teamKey: String?, events: inout [WebhookEvent]) throws(EmulatorFailure) -> EmulatedTicket {
        let status = try existingTicket(id).status
        guard status.customerMayGiveBack else {
            throw EmulatorFailure.state("This ticket cannot be cancelled in status \(status.rawValue).")
        }
        var teamId: Int?
        if let teamKey, !teamKey.isEmpty {
            guard let team = team(key: teamKey) else { throw EmulatorFailure.invalid("Unknown groupKeyForTransfer.") }
            teamId = team.id
        }
        let cancelled = try changeTicket(id) { ticket in
            if let teamId { ticket.groupId = teamId }
            (ticket.agentId, ticket.status, ticket.updatedAt) = (nil, .pending, .nowRounded)
        }
        events.append(WebhookEvent(type: .statusUpdated, ticket: ticketJSON(cancelled, platform: true)))
        return cancelled
    }
}

extension EmulatorWorld {
    /// An agent's rich message (a closure inquiry or a CSAT request) on the ticket, after `check` accepts the ticket;
    /// a CSAT request has its webhook.
    mutating func sendRichMessage(_ id: Int, type: RichMessageType, text: String, events: inout [WebhookEvent],
                                  check: (EmulatedTicket) throws(EmulatorFailure) -> Void) throws(EmulatorFailure)
        -> (message: EmulatedMessage, ticket: EmulatedTicket) {
        let ticket = try existingTicket(id)
        try check(ticket)
        let now = Date.nowRounded
        let message = EmulatedMessage(messageId: nextMessageId, richType: type, customType: RichMessageType.customType,
                                      state: .waiting, score: nil, comment: nil, text: text, adminType: nil,
                                      sender: ticket.agentId.map { "agent-\($0)" } ?? "system", createdAt: now, updatedAt: now)
        nextMessageId += 1
        let updated = try changeTicket(id) { ticket in
            ticket.messages.append(message)
            ticket.updatedAt = now
        }
        if type == .customerSatisfaction {
            events.append(WebhookEvent(type: .csatRequested, ticket: ticketJSON(updated, platform: true), message: messageJSON(message, ticket: updated)))
        }
        return (message, updated)
    }
}

/// A customer's answer to a rich message: CONFIRMED or DECLINED for a closure inquiry, CONFIRMED with a score 1–5
/// (and an optional comment) for a CSAT request.
struct MessageAnswer: Sendable {
    let messageId: Int
    let type: RichMessageType
    let state: RichMessageState
    let payload: JSONValue
}

extension EmulatorWorld {
    /// Answers a message of the ticket. Every attempt is counted, refused ones too. A CSAT answer goes to the ticket and
    /// its webhook; a confirmed closure inquiry closes the ticket (when the project closes on confirmation).
    /// `csatStaysWaiting`: this Desk keeps the CSAT message as first sent; only the ticket tells the answer.
    mutating func answer(_ id: Int, _ answer: MessageAnswer, csatStaysWaiting: Bool,
                         events: inout [WebhookEvent]) throws(EmulatorFailure) -> (message: EmulatedMessage, ticket: EmulatedTicket) {
        var ticket = try existingTicket(id)
        guard let index = ticket.messages.firstIndex(where: { $0.messageId == answer.messageId }) else {
            throw EmulatorFailure.notFound("No message \(answer.messageId) in this ticket.")
        }
        ticket.messages[index].answerAttempts += 1
        tickets[id] = ticket
        var message = ticket.messages[index]
        guard message.richType == answer.type else {
            throw EmulatorFailure.invalid("Message \(answer.messageId) is not of type \(answer.type.rawValue).")
        }
        guard message.state == .waiting else {
            throw EmulatorFailure.state("Message \(answer.messageId) was already answered (\(message.state?.rawValue ?? "none")).")
        }
        try message.take(answer)
        message.updatedAt = .nowRounded
        let (score, comment) = (message.score, message.comment)
        let isCSAT = answer.type == .customerSatisfaction
        if isCSAT, csatStaysWaiting { (message.state, message.score, message.comment) = (.waiting, nil, nil) }
        ticket.messages[index] = message
        ticket.updatedAt = .nowRounded
        if isCSAT { (ticket.customerSatisfactionScore, ticket.customerSatisfactionComment) = (score, comment) }
        tickets[id] = ticket
        if isCSAT {
            events.append(WebhookEvent(type: .csatUpdated, ticket: ticketJSON(ticket, platform: true), message: messageJSON(message, ticket: ticket)))
        } else if answer.state == .confirmed, autoCloseOnConfirm, ticket.status != .closed {
            ticket = try close(id, closeStatus: "CONFIRMED", comment: nil, adminType: "SYSTEM_MESSAGE_TICKET_CLOSED_BY_CUSTOMER", events: &events)
        }
        return (message, ticket)
    }
}

extension EmulatedMessage {
    /// Writes the answer into the message, or refuses it as Desk would.
    mutating func take(_ answer: MessageAnswer) throws(EmulatorFailure) {
        switch answer.type {
        case .closureInquiry:
            guard answer.state == .confirmed || answer.state == .declined else {
                throw EmulatorFailure.invalid("A closure inquiry is answered CONFIRMED or DECLINED.")
            }
            state = answer.state
        case .customerSatisfaction:
            guard answer.state == .confirmed else { throw EmulatorFailure.invalid("A CSAT request is answered CONFIRMED.") }
            guard let given = answer.payload["customerSatisfactionScore"]?.intValue, DeskLimits.csatScores.contains(given) else {
                throw EmulatorFailure.invalid("customerSatisfactionScore must be an integer from 1 to 5.")
            }
            let text = answer.payload["customerSatisfactionComment"]
            if let text, !text.isNull, text.stringValue == nil {
                throw EmulatorFailure.invalid("customerSatisfactionComment must be a string.")
            }
            (score, comment, state) = (given, text?.stringValue, .confirmed)
        case .urlPreview:
            throw EmulatorFailure.invalid("URL previews are edited through the Chat API.")
        }
    }
}
