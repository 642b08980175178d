import Domain
import Foundation

/// One custom field; a list keeps Desk's order.
struct EmulatedField: Sendable, Codable, Equatable {
    var key: String
    var value: String
}

struct EmulatedTeam: Sendable, Codable, Equatable {
    let id: Int
    var key: String
    var name: String
    var description: String
    let createdAt: Date
}

struct EmulatedAgent: Sendable, Codable, Equatable {
    let id: Int
    var displayName: String
    var sendbirdId: String
    var email: String
    var teamIds: [Int]
    let createdAt: Date
}

struct EmulatedCustomer: Sendable, Codable, Equatable {
    let id: Int
    let sendbirdId: String
    var displayName: String
    var accessToken: String
    var customFields: [EmulatedField]
    let createdAt: Date
}

struct EmulatedMessage: Sendable, Codable, Equatable {
    let messageId: Int
    /// nil for plain text and admin messages.
    let richType: RichMessageType?
    let customType: String
    var state: RichMessageState?
    var score: Int?
    var comment: String?
    var text: String
    /// For admin messages: the `data.type` (e.g. SYSTEM_MESSAGE_TICKET_CLOSED_BY_AGENT).
    var adminType: String?
    /// How many times customers tried to answer it (a second delivery of the same answer shows here).
    var answerAttempts = 0
    let sender: String
    let createdAt: Date
    var updatedAt: Date
}

struct EmulatedTicket: Sendable, Codable, Equatable {
    let id: Int
    var channelName: String
    let channelUrl: String
    let channelType: String
    let customerId: Int
    var status: TicketStatus
    var closeStatus: String
    var priority: TicketPriority
    var groupId: Int?
    var agentId: Int?
    var customFields: [EmulatedField]
    var relatedChannels: [String]
    var info: String
    var createdAt: Date
    var updatedAt: Date
    var issuedAt: Date?
    var closedAt: Date?
    var closeComment: String?
    var customerSatisfactionScore: Int?
    var customerSatisfactionComment: String?
    var firstResponseTime: Int
    var messages: [EmulatedMessage]
}

/// The whole emulated Desk project. Mutated only under the emulator's lock.
struct EmulatorWorld: Sendable {
    var appId: String
    var apiToken: String
    /// Made when the world is first created and kept with its saved state: a new world is a different Desk.
    var instanceId = UUID().uuidString.lowercased()
    var project = 1
    var teams = TrackedMap<Int, EmulatedTeam>()
    var agents = TrackedMap<Int, EmulatedAgent>()
    var customers = TrackedMap<Int, EmulatedCustomer>(index: { ["sendbird:" + $0.sendbirdId] })
    var tickets = TrackedMap<Int, EmulatedTicket>(index: { ["customer:\($0.customerId)", "channel:" + $0.channelUrl] })
    /// Desk session token → customer id.
    var sessions = TrackedMap<String, Int>()
    var ticketFieldKeys: Set<String> = ["product", "order_no", "seats", "flags", "region", "plan", "vip"]
    var customerFieldKeys: Set<String> = ["tier", "age", "company", "plan", "region"]
    var autoCloseOnConfirm = true
    var nextTeamId = 11
    var nextAgentId = 501
    var nextCustomerId = 2001
    var nextTicketId = 1001
    var nextMessageId = 880_001
    /// Bumped by every change under the world's lock (not saved): a list kept for the pages after its first is
    /// current while it stands.
    var revision = 0

    func team(key: String) -> EmulatedTeam? { teams.values.first { $0.key == key } }
    func customer(sendbirdId: String) -> EmulatedCustomer? {
        customers.keys(indexedBy: "sendbird:" + sendbirdId).min().flatMap { customers[$0] }
    }
    func ticket(channelUrl: String) -> EmulatedTicket? {
        tickets.keys(indexedBy: "channel:" + channelUrl).min().flatMap { tickets[$0] }
    }
    /// One customer's tickets, without looking at anyone else's.
    func tickets(ofCustomer customerId: Int) -> [EmulatedTicket] {
        tickets.keys(indexedBy: "customer:\(customerId)").compactMap { tickets[$0] }
    }
}

extension EmulatorWorld {
    /// The ticket `id` as it stands, or 404 (routes check ownership before taking the world's lock; the ticket is
    /// looked up again under it).
    func existingTicket(_ id: Int) throws(EmulatorFailure) -> EmulatedTicket {
        guard let ticket = tickets[id] else { throw EmulatorFailure.notFound("No ticket \(id).") }
        return ticket
    }

    /// Changes the ticket `id` (404 when there is none) and returns the changed ticket.
    @discardableResult
    mutating func changeTicket(_ id: Int, _ change: (inout EmulatedTicket) throws(EmulatorFailure) -> Void) throws(EmulatorFailure) -> EmulatedTicket {
        var ticket = try existingTicket(id)
        try change(&ticket)
        tickets[id] = ticket
        return ticket
    }

    /// Changes the customer `id` (404 when there is none) and returns the changed customer.
    @discardableResult
    mutating func changeCustomer(_ id: Int, _ change: (inout EmulatedCustomer) -> Void) throws(EmulatorFailure) -> EmulatedCustomer {
        guard var customer = customers[id] else { throw EmulatorFailure.notFound("No customer \(id).") }
        change(&customer)
        customers[id] = customer
        return customer
    }
}
