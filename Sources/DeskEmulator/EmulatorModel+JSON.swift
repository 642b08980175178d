import Domain
import Foundation
import JSON

/// Sendbird Desk's JSON shapes (camelCase; `relatedChannels` and `info` as JSON strings; `customFields` as lists).
extension EmulatorWorld {
    static func timestamp(_ date: Date?) -> JSONValue {
        guard let date else { return .null }
        return .string(ISOTimestamp.format(date.timeIntervalSince1970))
    }

    func customFieldsJSON(_ fields: [EmulatedField]) -> JSONValue {
        .array(fields.map { .object([("key", .string($0.key)), ("value", .string($0.value))]) })
    }

    func teamJSON(_ team: EmulatedTeam, members: Bool = false) -> JSONValue {
        var fields: [(String, JSONValue)] = [
            ("id", .integer(team.id)), ("key", .string(team.key)), ("name", .string(team.name)),
            ("description", .string(team.description)), ("project", .integer(project)),
            ("createdAt", Self.timestamp(team.createdAt)),
        ]
        if members {
            let agentsInTeam = agents.values.filter { $0.teamIds.contains(team.id) }.sorted { $0.id < $1.id }
            fields.append(("members", .array(agentsInTeam.map { agentJSON($0) })))
        }
        return .object(fields)
    }

    func agentJSON(_ agent: EmulatedAgent) -> JSONValue {
        .object([
            ("id", .integer(agent.id)), ("user", .integer(agent.id)), ("displayName", .string(agent.displayName)),
            ("sendbirdId", .string(agent.sendbirdId)), ("email", .string(agent.email)), ("role", .string("AGENT")),
            ("status", .string("ACTIVE")), ("connection", .string("ONLINE")), ("tier", .string("INTERMEDIATE")),
            ("project", .integer(project)), ("photoThumbnailUrl", .string("")), ("agentType", .string("USER")),
            ("groups", .array(agent.teamIds.map { .integer($0) })),
            ("createdAt", Self.timestamp(agent.createdAt)),
        ])
    }

    func customerJSON(_ customer: EmulatedCustomer) -> JSONValue {
        .object([
            ("id", .integer(customer.id)), ("sendbirdId", .string(customer.sendbirdId)),
            ("displayName", .string(customer.displayName)), ("channelType", .string("SENDBIRD")),
            ("project", .integer(project)), ("photoThumbnailUrl", .string("")),
            ("customFields", customFieldsJSON(customer.customFields)),
            ("createdAt", Self.timestamp(customer.createdAt)),
        ])
    }

    func relatedChannelsString(_ urls: [String]) -> String {
        JSONValue.array(urls.map { .object([("channel_url", .string($0)), ("name", .string($0))]) }).serialized()
    }

    /// - Parameter platform: the Platform API nests the whole group; the customer API gives its id only.
    func ticketJSON(_ ticket: EmulatedTicket, platform: Bool) -> JSONValue {
        let assignment: JSONValue
        if let agentId = ticket.agentId, let agent = agents[agentId] {
            assignment = .object([("agent", agentJSON(agent)), ("status", .string("IN_PROGRESS"))])
        } else {
            assignment = .null
        }
        let group: JSONValue
        if let groupId = ticket.groupId, let team = teams[groupId] {
            group = platform ? teamJSON(team) : .integer(team.id)
        } else {
            group = .null
        }
        let last = ticket.messages.last
        return .object([
            ("id", .integer(ticket.id)),
            ("project", .integer(project)),
            ("channelName", .string(ticket.channelName)),
            ("channelUrl", .string(ticket.channelUrl)),
            ("channelType", .string(ticket.channelType)),
            ("ticketType", .string("CUSTOMER_CHAT")),
            ("status", .string(ticket.status.legacy)),
            ("status2", .string(ticket.status.rawValue)),
            ("closeStatus", .string(ticket.closeStatus)),
            ("priority", .string(ticket.priority.rawValue)),
            ("info", .string(ticket.info)),
            ("customer", customers[ticket.customerId].map(customerJSON) ?? .null),
            ("recentAssignment", assignment),
            ("group", group),
            ("customFields", customFieldsJSON(ticket.customFields)),
            ("relatedChannels", .string(relatedChannelsString(ticket.relatedChannels))),
            ("firstResponseTime", .integer(ticket.firstResponseTime)),
            ("messageCount", .integer(ticket.messages.count)),
            ("lastMessage", .string(last?.text ?? "")),
            ("closeComment", ticket.closeComment.map(JSONValue.string) ?? .null),
            ("closeMessage", .null),
            ("customerSatisfactionScore", ticket.customerSatisfactionScore.map(JSONValue.integer) ?? .null),
            ("customerSatisfactionComment", ticket.customerSatisfactionComment.map(JSONValue.string) ?? .null),
            ("createdAt", Self.timestamp(ticket.createdAt)),
            ("updatedAt", Self.timestamp(ticket.updatedAt)),
            ("issuedAt", Self.timestamp(ticket.issuedAt)),
            ("closedAt", Self.timestamp(ticket.closedAt)),
        ])
    }

    /// The Chat message as a client would see it: rich messages carry `data` as a JSON string `{type, body}`. The
    /// fields of Sendbird's documented chat-message page (`id`, `ticket`, `userSendbirdId`, `userType`, `message`,
    /// `deletedAt`) come with the ones clients were seen to read (`messageId`, `customType`).
    func messageJSON(_ message: EmulatedMessage, ticket: EmulatedTicket) -> JSONValue {
        .object([
            ("id", .integer(message.messageId)),
            ("messageId", .integer(message.messageId)),
            ("ticket", .integer(ticket.id)),
            ("userSendbirdId", .string(message.sender)),
            ("userType", .string(message.sender.hasPrefix("agent") ? "AGENT" : message.sender == "system" ? "SYSTEM" : "CUSTOMER")),
            ("deletedAt", .null),
            ("channelUrl", .string(ticket.channelUrl)),
            ("customType", .string(message.customType)),
            ("message", .string(message.text)),
            ("data", .string(messageData(message, ticket: ticket).serialized())),
            ("sender", .string(message.sender)),
            ("answerAttempts", .integer(message.answerAttempts)),
            ("createdAt", Self.timestamp(message.createdAt)),
            ("updatedAt", Self.timestamp(message.updatedAt)),
        ])
    }

    func messageData(_ message: EmulatedMessage, ticket: EmulatedTicket) -> JSONValue {
        if let type = message.adminType {
            return .object([("type", .string(type)), ("ticket", ticketJSON(ticket, platform: false))])
        }
        guard let richType = message.richType else { return .object([]) }
        var body: [(String, JSONValue)] = [("ticketId", .integer(ticket.id))]
        if let state = message.state {
            body.append(("state", .string(state.rawValue)))
            // The dashboard and quickstart read `status`; the SDKs write `state`: emit both.
            body.append(("status", .string(state.rawValue)))
        }
        if richType == .customerSatisfaction {
            body.append(("customerSatisfactionScore", message.score.map(JSONValue.integer) ?? .null))
            body.append(("customerSatisfactionComment", message.comment.map(JSONValue.string) ?? .null))
        }
        return .object([("type", .string(richType.rawValue)), ("body", .object(body))])
    }
}
