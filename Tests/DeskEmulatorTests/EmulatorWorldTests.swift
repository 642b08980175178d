@testable import DeskEmulator
import Domain
import Foundation
import JSON
import Testing

/// Desk's ticket rules on the emulator's world, without HTTP: each change, what it refuses, and the webhook events it
/// sends (the routes over real HTTP are covered by DeskContractTests and the gateway's suites).
@Suite struct EmulatorWorldTests {
    func world() throws -> EmulatorWorld {
        var world = EmulatorWorld(appId: "APP-1", apiToken: "token")
        world.teams[11] = EmulatedTeam(id: 11, key: "billing", name: "Billing", description: "", createdAt: Date())
        world.agents[501] = EmulatedAgent(id: 501, displayName: "Ana", sendbirdId: "ana", email: "ana@example.com", teamIds: [11], createdAt: Date())
        world.customers[2001] = EmulatedCustomer(id: 2001, sendbirdId: "c-1", displayName: "C", accessToken: "t", customFields: [], createdAt: Date())
        return world
    }

    func types(_ events: [WebhookEvent]) -> [String] { events.map(\.type) }

    @Test func aNewTicketGetsItsTeamAndOneCreatedEvent() throws {
        var world = try world()
        var events: [WebhookEvent] = []
        let ticket = try world.createTicket(NewTicket(title: "Help", groupKey: "billing"), customer: 2001, events: &events)
        #expect(ticket.status == .initialized && ticket.groupId == 11 && ticket.channelUrl.hasPrefix("sendbird_desk_app-1_\(ticket.id)_"))
        #expect(types(events) == ["TICKET.CREATED"])
        #expect(world.tickets(ofCustomer: 2001).map(\.id) == [ticket.id])
        #expect(throws: EmulatorFailure.self) { try world.createTicket(NewTicket(title: "x", groupKey: "nope"), customer: 2001, events: &events) }
        #expect(world.tickets.count == 1 && events.count == 1)
    }

    @Test func customersCloseOnlyActiveOrIdleTicketsAndReopenToTheirAgent() throws {
        var world = try world()
        var events: [WebhookEvent] = []
        let id = try world.createTicket(NewTicket(title: "Help"), customer: 2001, events: &events).id
        #expect(throws: EmulatorFailure.self) { try world.customerClose(id, comment: "bye", events: &events) }
        try world.changeTicket(id) { (ticket: inout EmulatedTicket) in (ticket.status, ticket.agentId) = (.active, 501) }
        let closed = try world.customerClose(id, comment: "bye", events: &events)
        #expect(closed.status == .closed && closed.closeStatus == "CLOSED_BY_CUSTOMER" && closed.closeComment == "bye" && closed.closedAt != nil)
        #expect(closed.messages.last?.adminType == "SYSTEM_MESSAGE_TICKET_CLOSED_BY_CUSTOMER")
        let reopened = try world.reopen(id, events: &events)
        #expect(reopened.status == .active && reopened.closeStatus == "NOT_CLOSED" && reopened.closedAt == nil)
        #expect(throws: EmulatorFailure.self) { try world.reopen(id, events: &events) }
        // Without an agent a reopened ticket waits in the queue.
        let back = try world.cancel(id, transferTo: "billing", events: &events)
        #expect(back.status == .pending && back.agentId == nil && back.groupId == 11)
        try world.close(id, closeStatus: "CLOSED_BY_AGENT", comment: nil, adminType: "SYSTEM_MESSAGE_TICKET_CLOSED_BY_AGENT", events: &events)
        #expect(try world.reopen(id, events: &events).status == .pending)
        #expect(types(events) == ["TICKET.CREATED"] + Array(repeating: "TICKET.STATUS.UPDATED", count: 5))
    }

    @Test func aCSATAnswerIsTakenOnceAndEveryAttemptCounts() throws {
        var world = try world()
        var events: [WebhookEvent] = []
        let id = try world.createTicket(NewTicket(title: "Help"), customer: 2001, events: &events).id
        #expect(throws: EmulatorFailure.self) {
            try world.sendRichMessage(id, type: .customerSatisfaction, text: "Rate us", events: &events) { ticket throws(EmulatorFailure) in
                guard ticket.status == .closed else { throw EmulatorFailure.state("after closing") }
            }
        }
        try world.close(id, closeStatus: "CLOSED_BY_AGENT", comment: nil, adminType: "SYSTEM_MESSAGE_TICKET_CLOSED_BY_AGENT", events: &events)
        let request = try world.sendRichMessage(id, type: .customerSatisfaction, text: "Rate us", events: &events) { _ in }.message
        let bad = MessageAnswer(messageId: request.messageId, type: .customerSatisfaction, state: .confirmed,
                                payload: .object([("customerSatisfactionScore", .integer(9))]))
        #expect(throws: EmulatorFailure.self) { try world.answer(id, bad, csatStaysWaiting: false, events: &events) }
        let good = MessageAnswer(messageId: request.messageId, type: .customerSatisfaction, state: .confirmed,
                                 payload: .object([("customerSatisfactionScore", .integer(4)), ("customerSatisfactionComment", .string("ok"))]))
        let (message, ticket) = try world.answer(id, good, csatStaysWaiting: false, events: &events)
        #expect(message.state == .confirmed && message.score == 4 && message.comment == "ok")
        #expect(ticket.customerSatisfactionScore == 4 && ticket.customerSatisfactionComment == "ok")
        #expect(throws: EmulatorFailure.self) { try world.answer(id, good, csatStaysWaiting: false, events: &events) }
        #expect(world.tickets[id]?.messages.first { $0.messageId == request.messageId }?.answerAttempts == 3)
        #expect(types(events).suffix(3) == ["TICKET.STATUS.UPDATED", "TICKET.CSAT.REQUESTED", "TICKET.CSAT.UPDATED"])
        #expect(events.last?.message != nil)
    }

    @Test func aDeskThatKeepsTheCSATMessageWaitingTellsTheAnswerOnTheTicketOnly() throws {
        var world = try world()
        var events: [WebhookEvent] = []
        let id = try world.createTicket(NewTicket(title: "Help"), customer: 2001, events: &events).id
        try world.close(id, closeStatus: "CLOSED_BY_AGENT", comment: nil, adminType: "SYSTEM_MESSAGE_TICKET_CLOSED_BY_AGENT", events: &events)
        let request = try world.sendRichMessage(id, type: .customerSatisfaction, text: "Rate us", events: &events) { _ in }.message
        let answer = MessageAnswer(messageId: request.messageId, type: .customerSatisfaction, state: .confirmed,
                                   payload: .object([("customerSatisfactionScore", .integer(2))]))
        let (message, ticket) = try world.answer(id, answer, csatStaysWaiting: true, events: &events)
        #expect(message.state == .waiting && message.score == nil)
        #expect(ticket.customerSatisfactionScore == 2 && ticket.customerSatisfactionComment == nil)
    }

    @Test func aConfirmedClosureInquiryClosesTheTicketADeclinedOneDoesNot() throws {
        var world = try world()
        var events: [WebhookEvent] = []
        let first = try world.createTicket(NewTicket(title: "One"), customer: 2001, events: &events).id
        let second = try world.createTicket(NewTicket(title: "Two"), customer: 2001, events: &events).id
        for id in [first, second] {
            try world.changeTicket(id) { (ticket: inout EmulatedTicket) in (ticket.status, ticket.agentId) = (.active, 501) }
        }
        let ask = { (world: inout EmulatorWorld, id: Int, events: inout [WebhookEvent]) throws(EmulatorFailure) -> Int in
            try world.sendRichMessage(id, type: .closureInquiry, text: "Resolved?", events: &events) { _ in }.message.messageId
        }
        let yes = try ask(&world, first, &events), no = try ask(&world, second, &events)
        let confirmed = try world.answer(first, MessageAnswer(messageId: yes, type: .closureInquiry, state: .confirmed, payload: .object([])),
                                         csatStaysWaiting: false, events: &events)
        #expect(confirmed.ticket.status == .closed && confirmed.ticket.closeStatus == "CONFIRMED")
        let declined = try world.answer(second, MessageAnswer(messageId: no, type: .closureInquiry, state: .declined, payload: .object([])),
                                        csatStaysWaiting: false, events: &events)
        #expect(declined.ticket.status == .active && declined.message.state == .declined)
        // A closure inquiry is never answered as a CSAT request, and an unknown message is 404.
        #expect(throws: EmulatorFailure.self) {
            try world.answer(second, MessageAnswer(messageId: 999, type: .closureInquiry, state: .confirmed, payload: .object([])),
                             csatStaysWaiting: false, events: &events)
        }
    }
}
