import DeskClient
import DeskEmulator
import Domain
import Foundation
import JSON
import Testing
import TestSupport

/// The emulator on a free port (`TestPorts`) with the demo data, and a client pointed at it over loopback.
func withDesk<T>(_ body: (DeskEmulator, DeskClient) async throws -> T) async throws -> T {
    let configuration = DeskEmulatorConfiguration()
    let emulator = try startedEmulator(configuration)
    var clientConfiguration = deskClientConfiguration(baseURL: emulator.baseURL, appId: configuration.appId,
                                                      apiToken: configuration.apiToken)
    clientConfiguration.retryBaseDelay = .milliseconds(5)
    clientConfiguration.requestTimeout = .seconds(5)
    let client = DeskClient(configuration: clientConfiguration)
    do {
        let result = try await body(emulator, client)
        await emulator.stop()
        return result
    } catch {
        await emulator.stop()
        throw error
    }
}

/// The agent's side, through the emulator's control API.
struct Agent {
    let port: Int

    @discardableResult
    func post(_ path: String, _ json: String = "{}") async throws -> TestResponse {
        try await httpRequest(port: port, "POST", "/emulator" + path, json: json)
    }

    func state(_ ticket: Int) async throws -> [String: Any] {
        try await httpRequest(port: port, "GET", "/emulator/tickets/\(ticket)").json ?? [:]
    }

    func messageId(_ response: TestResponse) -> Int { response.json?["messageId"] as? Int ?? -1 }
}

func expectDomainError(_ code: DomainError.Code, _ body: () async throws -> Void,
                       sourceLocation: SourceLocation = #_sourceLocation) async {
    do {
        try await body()
        Issue.record("expected \(code), got success", sourceLocation: sourceLocation)
    } catch let error as DomainError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected DomainError \(code), got \(error)", sourceLocation: sourceLocation)
    }
}

@Suite struct DeskContractTests {
    @Test func authenticateAcceptsTheRightAccessTokenOnly() async throws {
        try await withDesk { _, client in
            let session = try await client.authenticate(userId: "demo-customer", accessToken: "demo-token")
            #expect(!session.token.isEmpty)
            #expect(!String(describing: session).contains(session.token))
            await expectDomainError(.unauthorized) { _ = try await client.authenticate(userId: "demo-customer", accessToken: "wrong") }
            await expectDomainError(.unauthorized) { _ = try await client.authenticate(userId: "nobody", accessToken: "demo-token") }
            await expectDomainError(.unauthorized) {
                _ = try await client.ticket(DeskSession(token: "forged"), id: 1001)
            }
        }
    }

    @Test func wholeTicketLifeFromCreationToCSAT() async throws {
        try await withDesk { emulator, client in
            let agent = Agent(port: emulator.port)
            let session = try await client.authenticate(userId: "demo-customer", accessToken: "demo-token")
            let created = try await client.createTicket(session, .init(
                title: "Printer on fire", userName: "Demo Customer", userId: "demo-customer", groupKey: "support",
                customFields: [("product", "desk pro"), ("unregistered", "ignored")], priority: .high,
                relatedChannelUrls: ["ch_a", "ch_b"]))
            #expect(created.status == .initialized)
            #expect(created.priority == .high)
            #expect(created.customFields.map(\.key) == ["product"])
            #expect(created.relatedChannelUrls == ["ch_a", "ch_b"])
            #expect(created.channelUrl.hasPrefix("sendbird_desk_"))
            #expect(created.groupId != nil)

            // Customers may not close a ticket nobody works on.
            await expectDomainError(.conflict) { _ = try await client.close(session, ticketId: created.id, comment: "") }

            try await agent.post("/tickets/\(created.id)/customer-message", #"{"text":"help"}"#)
            #expect(try await client.ticket(session, id: created.id).status == .pending)
            await expectDomainError(.conflict) { _ = try await client.close(session, ticketId: created.id, comment: "") }

            try await agent.post("/tickets/\(created.id)/assign", #"{"agentId":501}"#)
            let active = try await client.ticket(session, id: created.id)
            #expect(active.status == .active)
            #expect(active.agent?.id == 501)
            #expect(active.agent?.displayName == "Ada Agent")

            // Closure inquiry declined keeps the ticket open; a second answer is refused.
            let inquiry = agent.messageId(try await agent.post("/tickets/\(created.id)/closure-inquiry"))
            try await client.confirmClosure(session, ticketId: created.id, messageId: inquiry, confirm: false)
            #expect(try await client.ticket(session, id: created.id).status == .active)
            await expectDomainError(.conflict) {
                try await client.confirmClosure(session, ticketId: created.id, messageId: inquiry, confirm: true)
            }

            // Idle tickets can be closed by the customer, with a comment.
            try await agent.post("/tickets/\(created.id)/idle")
            #expect(try await client.ticket(session, id: created.id).status == .idle)
            let closed = try await client.close(session, ticketId: created.id, comment: "Solved, thanks")
            #expect(closed.status == .closed)
            #expect(closed.closeStatus == "CLOSED_BY_CUSTOMER")
            #expect(closed.closeComment == "Solved, thanks")

            // CSAT after close: out-of-range scores are refused, a valid answer is stored once.
            let csat = agent.messageId(try await agent.post("/tickets/\(created.id)/csat-request"))
            for bad in [0, 6] {
                await expectDomainError(.invalid) {
                    try await client.submitFeedback(session, ticketId: created.id, messageId: csat, score: bad, comment: nil)
                }
            }
            let answer = try await client.submitFeedback(session, ticketId: created.id, messageId: csat, score: 4, comment: "Quick")
            #expect(answer["messageId"]?.intValue == csat)
            await expectDomainError(.conflict) {
                try await client.submitFeedback(session, ticketId: created.id, messageId: csat, score: 5, comment: nil)
            }
            let rated = try await client.ticket(session, id: created.id)
            #expect(rated.satisfactionScore == 4)
            #expect(rated.satisfactionComment == "Quick")
            let state = try await agent.state(created.id)
            let messages = state["messages"] as? [[String: Any]] ?? []
            let csatMessage = messages.first { $0["messageId"] as? Int == csat }
            let data = try JSONParser.parse(csatMessage?["data"] as? String ?? "")
            #expect(data["body"]?["state"]?.stringValue == "CONFIRMED")
            #expect(data["body"]?["customerSatisfactionScore"]?.intValue == 4)

            // Reopen only from CLOSED; it goes back to the previous agent.
            let reopened = try await client.reopen(session, ticketId: created.id)
            #expect(reopened.status == .active)
            await expectDomainError(.conflict) { _ = try await client.reopen(session, ticketId: created.id) }
        }
    }

    @Test func confirmedClosureInquiryClosesTheTicket() async throws {
        try await withDesk { emulator, client in
            let agent = Agent(port: emulator.port)
            let session = try await client.authenticate(userId: "demo-customer", accessToken: "demo-token")
            let ticket = try await client.createTicket(session, .init(title: "Done?", userName: "D", userId: "demo-customer"))
            // The inquiry needs an assigned ACTIVE/IDLE ticket.
            #expect(try await agent.post("/tickets/\(ticket.id)/closure-inquiry").status == 400)
            try await agent.post("/tickets/\(ticket.id)/customer-message")
            try await agent.post("/tickets/\(ticket.id)/assign", #"{"agentId":502}"#)
            let inquiry = agent.messageId(try await agent.post("/tickets/\(ticket.id)/closure-inquiry"))
            try await client.confirmClosure(session, ticketId: ticket.id, messageId: inquiry, confirm: true)
            let closed = try await client.ticket(session, id: ticket.id)
            #expect(closed.status == .closed)
            #expect(closed.closeStatus == "CONFIRMED")
            // A message id that is not in the ticket is not found; a wrong type is invalid.
            await expectDomainError(.notFound) { try await client.confirmClosure(session, ticketId: ticket.id, messageId: 999_999, confirm: true) }
            let csat = agent.messageId(try await agent.post("/tickets/\(ticket.id)/csat-request"))
            await expectDomainError(.invalid) { try await client.confirmClosure(session, ticketId: ticket.id, messageId: csat, confirm: true) }
        }
    }

    @Test func listsAreNewestFirstPagedAndFiltered() async throws {
        try await withDesk { emulator, client in
            let agent = Agent(port: emulator.port)
            let session = try await client.authenticate(userId: "demo-customer", accessToken: "demo-token")
            var ids: [Int] = []
            for index in 0..<13 {
                let product = index % 3 == 0 ? "desk pro" : "chat"
                let ticket = try await client.createTicket(session, .init(title: "T\(index)", userName: "D", userId: "demo-customer",
                                                                          customFields: [("product", product)]))
                ids.append(ticket.id)
            }
            // Another customer's tickets never show up.
            let other = try await client.authenticate(userId: "demo-customer-2", accessToken: "demo-token-2")
            _ = try await client.createTicket(other, .init(title: "Other", userName: "O", userId: "demo-customer-2"))

            let first = try await client.listTickets(session, status: .open, limit: 10, offset: 0)
            #expect(first.count == 13)
            #expect(first.hasNext)
            #expect(first.results.map(\.id) == Array(ids.reversed().prefix(10)))
            let second = try await client.listTickets(session, status: .open, limit: 10, offset: 10)
            #expect(!second.hasNext)
            #expect(second.results.map(\.id) == Array(ids.reversed().dropFirst(10)))

            let filtered = try await client.listTickets(session, status: .all, limit: 50, offset: 0, customFields: [("product", "desk pro")])
            #expect(filtered.results.map(\.id) == ids.enumerated().filter { $0.offset % 3 == 0 }.map(\.element).reversed())

            // Close one through the agent path: it moves from the open list to the closed list.
            try await agent.post("/tickets/\(ids[0])/customer-message")
            try await agent.post("/tickets/\(ids[0])/assign", #"{"agentId":501}"#)
            try await agent.post("/tickets/\(ids[0])/close", #"{"comment":"by agent"}"#)
            let closed = try await client.listTickets(session, status: .closed, limit: 10, offset: 0)
            #expect(closed.results.map(\.id) == [ids[0]])
            #expect(try await client.listTickets(session, status: .open, limit: 50, offset: 0).count == 12)

            let counts = try await client.ticketCount(session)
            #expect(counts.open == 12)
            #expect(counts.counts["CLOSED"] == 1)

            let byChannel = try await client.ticket(session, channelUrl: closed.results[0].channelUrl)
            #expect(byChannel.id == ids[0])
            await expectDomainError(.notFound) { _ = try await client.ticket(session, channelUrl: "sendbird_desk_nope") }
            await expectDomainError(.notFound) { _ = try await client.ticket(other, id: ids[1]) }
        }
    }

    @Test func fieldsPriorityAndRelatedChannelsUpdate() async throws {
        try await withDesk { _, client in
            let session = try await client.authenticate(userId: "demo-customer", accessToken: "demo-token")
            let ticket = try await client.createTicket(session, .init(title: "Fields", userName: "D", userId: "demo-customer"))
            let withFields = try await client.setTicketCustomFields(session, ticketId: ticket.id, [("product", "desk"), ("seats", "5"), ("nope", "x")])
            #expect(withFields.customFields.map { "\($0.key)=\($0.value)" } == ["product=desk", "seats=5"])
            let merged = try await client.setTicketCustomFields(session, ticketId: ticket.id, [("seats", "6")])
            #expect(merged.customFields.map { "\($0.key)=\($0.value)" } == ["product=desk", "seats=6"])

            let urgent = try await client.setPriority(session, ticketId: ticket.id, .urgent)
            #expect(urgent.priority == .urgent)

            let related = try await client.setRelatedChannels(session, ticketId: ticket.id, ["c1", "c2", "c3"])
            #expect(related.relatedChannelUrls == ["c1", "c2", "c3"])
            await expectDomainError(.invalid) {
                _ = try await client.setRelatedChannels(session, ticketId: ticket.id, ["c1", "c2", "c3", "c4"])
            }
            #expect(try await client.ticket(session, id: ticket.id).relatedChannelUrls == ["c1", "c2", "c3"])

            let customer = try await client.setCustomerCustomFields(session, [("tier", "gold"), ("unknown", "x")])
            #expect(customer.customFields.map { "\($0.key)=\($0.value)" } == ["tier=gold"])

            let preview = try await client.urlPreview(session, url: "https://example.com/page")
            #expect(preview.siteName == "example.com")
        }
    }

    @Test func createRefusesUnknownTeams() async throws {
        try await withDesk { _, client in
            let session = try await client.authenticate(userId: "demo-customer", accessToken: "demo-token")
            await expectDomainError(.invalid) {
                _ = try await client.createTicket(session, .init(title: "x", userName: "D", userId: "demo-customer", groupKey: "no-such-team"))
            }
            await expectDomainError(.invalid) {
                _ = try await client.createTicket(session, .init(title: "x", userName: "D", userId: "demo-customer",
                                                                 relatedChannelUrls: ["1", "2", "3", "4"]))
            }
        }
    }

    @Test func platformAPIListsAgentsTeamsCustomersAndTickets() async throws {
        try await withDesk { emulator, client in
            let agents = try await client.agents()
            #expect(agents.results.map(\.sendbirdId) == ["agent-ada", "agent-bob", "agent-cleo", "agent-dan"])
            let teams = try await client.teams()
            #expect(teams.results.map(\.key) == ["support", "billing"])
            let support = try await client.team(id: teams.results[0].id)
            #expect(support.memberIds == [501, 502, 504])
            let customers = try await client.customers(sendbirdId: "demo-customer")
            #expect(customers.results.map(\.sendbirdId) == ["demo-customer"])

            let session = try await client.authenticate(userId: "demo-customer", accessToken: "demo-token")
            var created: [Int] = []
            for index in 0..<5 {
                created.append(try await client.createTicket(session, .init(title: "P\(index)", userName: "D", userId: "demo-customer")).id)
            }
            let page = try await client.platformTickets(limit: 2, offset: 0)
            #expect(page.count == 5)
            #expect(page.hasNext)
            #expect(page.results.map(\.id) == [created[4], created[3]])
            let detail = try await client.platformTicket(id: created[0])
            #expect(detail.id == created[0])
            #expect(detail.customerSendbirdId == "demo-customer")

            let agent = Agent(port: emulator.port)
            try await agent.post("/tickets/\(created[1])/customer-message")
            try await agent.post("/tickets/\(created[1])/assign", #"{"agentId":503,"teamKey":"billing"}"#)
            let assigned = try await client.platformTicket(id: created[1])
            #expect(assigned.groupKey == "billing")
            #expect(assigned.agent?.id == 503)
            let pending = try await client.platformTickets(limit: 50, offset: 0, status: [.active])
            #expect(pending.results.map(\.id) == [created[1]])
        }
    }

    /// The Platform API writes a queued write goes with when its customer never signs in again: priority, giving back
    /// to the queue, closing (as an admin's close), and Desk's refusal of a second close.
    @Test func platformWritesChangeTheTicketAsTheApplication() async throws {
        try await withDesk { emulator, client in
            let session = try await client.authenticate(userId: "demo-customer", accessToken: "demo-token")
            let id = try await client.createTicket(session, .init(title: "Platform", userName: "D", userId: "demo-customer")).id
            let agent = Agent(port: emulator.port)
            try await agent.post("/tickets/\(id)/customer-message")
            try await agent.post("/tickets/\(id)/assign", #"{"agentId":503}"#)
            #expect(try await client.platformSetPriority(ticketId: id, .urgent).priority == .urgent)
            let cancelled = try await client.platformCancel(ticketId: id)
            #expect(cancelled.status == .pending && cancelled.agent == nil)
            try await agent.post("/tickets/\(id)/assign", #"{"agentId":503}"#)
            let moved = try await client.platformTransfer(ticketId: id, toTeam: "billing")
            #expect(moved.status == .pending && moved.agent == nil && moved.groupKey == "billing", "\(moved)")
            await expectDomainError(.invalid) { _ = try await client.platformTransfer(ticketId: id, toTeam: "no-such-team") }
            let closed = try await client.platformClose(ticketId: id, comment: "no answer")
            #expect(closed.status == .closed && closed.closeStatus == "CLOSED_BY_ADMIN")
            await expectDomainError(.conflict) { _ = try await client.platformClose(ticketId: id, comment: "") }
        }
    }

    @Test func wrongPlatformTokenIsUnauthorized() async throws {
        let configuration = DeskEmulatorConfiguration()
        let emulator = try startedEmulator(configuration, seeded: false)
        let client = DeskClient(configuration: deskClientConfiguration(baseURL: emulator.baseURL, appId: configuration.appId, apiToken: "wrong"))
        await expectDomainError(.unauthorized) { _ = try await client.agents() }
        await emulator.stop()
    }

    @Test func outageRetriesIdempotentCallsThenOpensTheBreaker() async throws {
        try await withDesk { emulator, client in
            let session = try await client.authenticate(userId: "demo-customer", accessToken: "demo-token")
            emulator.setFaults(EmulatorFaults(failRate: 0, latencyMs: 0, down: true))
            await expectDomainError(.upstreamUnavailable) { _ = try await client.ticketCount(session) }
            // One logical call made three attempts; two calls reach the threshold of five failures.
            await expectDomainError(.upstreamUnavailable) { _ = try await client.ticketCount(session) }
            #expect(client.breaker.state == .open)
            // While open, calls fail fast without reaching Desk, with a Retry-After hint.
            emulator.setFaults(EmulatorFaults())
            do {
                _ = try await client.ticketCount(session)
                Issue.record("breaker let a call through")
            } catch let error as DomainError {
                #expect(error.code == .upstreamUnavailable)
                #expect((error.retryAfterSeconds ?? 0) >= 1)
            }
        }
    }

    @Test func slowDeskHitsTheDeadline() async throws {
        let configuration = DeskEmulatorConfiguration()
        let emulator = try startedEmulator(configuration)
        var clientConfiguration = deskClientConfiguration(baseURL: emulator.baseURL, appId: configuration.appId, apiToken: configuration.apiToken)
        clientConfiguration.requestTimeout = .milliseconds(300)
        clientConfiguration.maxAttempts = 1
        let client = DeskClient(configuration: clientConfiguration)
        emulator.setFaults(EmulatorFaults(failRate: 0, latencyMs: 30_000, down: false))
        let started = ContinuousClock.now
        await expectDomainError(.upstreamUnavailable) { _ = try await client.agents() }
        // The answer would take 30 s; the 300 ms deadline ends the call long before (the bound is generous: dozens of
        // suites run beside this one on two cores).
        #expect(ContinuousClock.now - started < .seconds(15))
        await emulator.stop()
    }

    @Test func transientFailuresAreRetriedForReadsOnly() async throws {
        try await withDesk { emulator, client in
            let session = try await client.authenticate(userId: "demo-customer", accessToken: "demo-token")
            let before = try await client.ticketCount(session).open
            // Two failures in a row: the read's third attempt gets through.
            emulator.setFaults(EmulatorFaults(failNext: 2))
            #expect(try await client.ticketCount(session).open == before)
            // Three in a row exhaust the read's three attempts.
            client.breaker.resetForTesting()
            emulator.setFaults(EmulatorFaults(failNext: 3))
            await expectDomainError(.upstreamUnavailable) { _ = try await client.ticketCount(session) }
            // One failure is enough to fail a create, which is never repeated: a retry could open a second ticket.
            client.breaker.resetForTesting()
            emulator.setFaults(EmulatorFaults(failNext: 1))
            await expectDomainError(.upstreamUnavailable) {
                _ = try await client.createTicket(session, .init(title: "Once", userName: "D", userId: "demo-customer"))
            }
            #expect(try await client.ticketCount(session).open == before)
        }
    }

    /// A failed creation says whether Desk may have made the ticket, and whether it may make it later still: a 5xx
    /// came after Desk ran it (or not), as did a 2xx that is not Desk's JSON; with no answer in time Desk may still be
    /// running it; a refused connection sent nothing. The retry of the gateway's client decides from this whether to look first, or wait.
    @Test func aFailedCreationSaysWhetherDeskMayStillMakeIt() async throws {
        let configuration = DeskEmulatorConfiguration()
        let emulator = try startedEmulator(configuration)
        var clientConfiguration = deskClientConfiguration(baseURL: emulator.baseURL, appId: configuration.appId, apiToken: configuration.apiToken)
        clientConfiguration.requestTimeout = .milliseconds(300)
        let client = DeskClient(configuration: clientConfiguration)
        let refusing = DeskClient(configuration: deskClientConfiguration(baseURL: "http://127.0.0.1:1", appId: configuration.appId))
        let session = try await client.authenticate(userId: "demo-customer", accessToken: "demo-token")
        let create = { (client: DeskClient, faults: EmulatorFaults) async -> DomainError? in
            emulator.setFaults(faults)
            defer { emulator.setFaults(EmulatorFaults()) }
            do {
                _ = try await client.createTicket(session, .init(title: "Maybe", userName: "D", userId: "demo-customer"))
                return nil
            } catch let error as DomainError {
                return error
            } catch {
                return nil
            }
        }
        let answered = await create(client, EmulatorFaults(failNext: 1))
        #expect(answered?.mayHaveTakenEffect == true && answered?.mayStillTakeEffect == false, "\(String(describing: answered))")
        let unanswered = await create(client, EmulatorFaults(latencyMs: 2_000))
        #expect(unanswered?.mayHaveTakenEffect == true && unanswered?.mayStillTakeEffect == true, "\(String(describing: unanswered))")
        var garbled = EmulatorFaults()
        garbled.garbleNext = 1
        let unreadable = await create(client, garbled)
        #expect(unreadable?.code == .upstreamProtocol && unreadable?.mayHaveTakenEffect == true && unreadable?.mayStillTakeEffect == false,
                "\(String(describing: unreadable))")
        let refused = await create(refusing, EmulatorFaults())
        #expect(refused?.code == .upstreamUnavailable && refused?.mayHaveTakenEffect == false, "\(String(describing: refused))")
        await emulator.stop()
    }
}

/// Every form of Desk's rate-limit hint is honoured, capped.
@Suite struct RateLimitHintTests {
    @Test func retryAfterXRateLimitRetryAfterAndResetAreRead() {
        let now = 1_800_000_000.0
        #expect(DeskClient.retryAfter(["Retry-After": "7"], now: now) == 7)
        #expect(DeskClient.retryAfter(["retry-after": "Fri, 15 Jan 2027 08:00:10 GMT"], now: now) == 10)
        #expect(DeskClient.retryAfter(["X-RateLimit-RetryAfter": "3"], now: now) == 3)
        #expect(DeskClient.retryAfter(["X-RateLimit-RetryAfter": String(Int(now) + 12)], now: now) == 12)
        #expect(DeskClient.retryAfter(["X-RateLimit-RetryAfter": String(Int(now * 1000) + 4000)], now: now) == 4)
        #expect(DeskClient.retryAfter(["X-RateLimit-Reset": String(Int(now) + 20)], now: now) == 20)
        // Capped, never negative, and nothing when no hint is given.
        #expect(DeskClient.retryAfter(["Retry-After": "86400"], now: now) == DeskClient.maxRetryAfterSeconds)
        // An absurd or past hint is never "at once": a second at least.
        #expect(DeskClient.retryAfter(["X-RateLimit-Reset": String(Int(now) - 50)], now: now) == 1)
        for absurd in ["999999999", "-5", "0", "1e300", "-1e300"] {
            let seconds = DeskClient.retryAfter(["Retry-After": absurd], now: now)
            #expect(seconds.map { (1...DeskClient.maxRetryAfterSeconds).contains($0) } == true, "\(absurd): \(String(describing: seconds))")
        }
        #expect(DeskClient.retryAfter(["Content-Type": "application/json"], now: now) == nil)
    }
}
