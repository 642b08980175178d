import DeskGatewayClient
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// Against a live gateway and its Desk emulator (make test starts both: DESK_GATEWAY_URL, DESK_EMULATOR_URL).
enum Live {
    static let gateway = URL(string: ProcessInfo.processInfo.environment["DESK_GATEWAY_URL"] ?? "http://127.0.0.1:18350")!
    static let emulator = URL(string: ProcessInfo.processInfo.environment["DESK_EMULATOR_URL"] ?? "http://127.0.0.1:19350")!

    /// The demo customer, signed in on a client of its own.
    static func signedIn(maxRetries: Int = 2, onSessionExpired: (@Sendable (DeskGatewayError) async -> String?)? = nil) async throws -> DeskGateway {
        let gateway = DeskGateway(baseURL: gateway, maxRetries: maxRetries, onSessionExpired: onSessionExpired)
        try await gateway.authenticate(userId: "demo-customer", accessToken: "demo-token")
        return gateway
    }

    /// The emulator's control API: what an agent or Desk itself would do.
    @discardableResult
    static func control(_ path: String, _ body: [String: Any] = [:]) async throws -> [String: Any] {
        var request = URLRequest(url: emulator.appendingPathComponent("emulator" + path))
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = try JSONSerialization.data(withJSONObject: body)
        let (data, _) = try await URLSession.shared.data(for: request)
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
    }

    /// Waits until the gateway's copy of the ticket satisfies `done` (Desk's webhooks arrive in the background).
    static func until(_ gateway: DeskGateway, _ id: Int, _ done: (Ticket) -> Bool) async throws -> Ticket {
        for _ in 0..<100 {
            let ticket = try await gateway.tickets.get(id)
            if done(ticket) { return ticket }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("ticket \(id) never reached the expected state")
        return try await gateway.tickets.get(id)
    }
}

@Suite(.serialized) struct JourneyTests {
    @Test func theSeedJourneySignInCreateListFeedback() async throws {
        let gateway = try await Live.signedIn()
        let ticket = try await gateway.tickets.create(title: "Swift client journey", userName: "Demo", priority: .high,
                                                      customFields: ["plan": "gold"])
        #expect(ticket.status == .initialized && ticket.priority == .high)
        var opened: [Int] = []
        for try await each in gateway.tickets.openedList(pageSize: 5) { opened.append(each.id) }
        #expect(opened.contains(ticket.id))
        #expect(try await gateway.tickets.byChannelURL(ticket.channelUrl).id == ticket.id)
        #expect(try await gateway.tickets.openCount() >= 1)

        try await Live.control("/tickets/\(ticket.id)/customer-message", ["text": "Hello?"])
        try await Live.control("/tickets/\(ticket.id)/assign", ["agentId": 501])
        _ = try await Live.until(gateway, ticket.id) { $0.status == .active }
        // Read again: answered 304 and served from the client's copy, the same ticket.
        #expect(try await gateway.tickets.get(ticket.id).status == .active)
        let closed = try await gateway.tickets.close(ticket.id, comment: "solved")
        #expect(closed.ticket?.status == .closed)
        let messageId = try #require(try await Live.control("/tickets/\(ticket.id)/csat-request")["messageId"] as? Int)
        let rated = try await gateway.tickets.submitFeedback(ticket.id, messageId: messageId, score: 5, comment: "thanks")
        #expect(rated.ticket?.satisfaction?.score == 5)
    }

    @Test func anEndOfChatConfirmedAndTheFieldsAndChannelsSet() async throws {
        let gateway = try await Live.signedIn()
        // Desk keeps the keys its project registered (the emulator: plan, region, … on tickets; company, … on customers).
        #expect(try await gateway.setCustomerCustomFields(["company": "ios"])["company"] == "ios")
        let ticket = try await gateway.tickets.create(title: "Ended by the customer", userName: "Demo")
        let fields = try await gateway.tickets.setCustomFields(ticket.id, ["region": "emea"])
        #expect(fields.ticket?.customFields.additionalProperties["region"] == "emea", "\(fields)")
        let related = try await gateway.tickets.setRelatedChannels(ticket.id, ["sendbird_group_channel_related"])
        #expect(related.ticket?.relatedChannelUrls == ["sendbird_group_channel_related"], "\(related)")
        try await Live.control("/tickets/\(ticket.id)/customer-message", ["text": "Hi"])
        try await Live.control("/tickets/\(ticket.id)/assign", ["agentId": 501])
        _ = try await Live.until(gateway, ticket.id) { $0.status == .active }
        let inquiry = try #require(try await Live.control("/tickets/\(ticket.id)/closure-inquiry")["messageId"] as? Int)
        let confirmed = try await gateway.tickets.confirmEndOfChat(ticket.id, messageId: inquiry, confirm: true)
        #expect(confirmed.ticket?.status == .closed && confirmed.ticket?.closeStatus == "CONFIRMED", "\(confirmed)")
        var closed: [Int] = []
        for try await each in gateway.tickets.closedList(pageSize: 10) { closed.append(each.id) }
        #expect(closed.contains(ticket.id))
    }

    @Test func aTicketRaisedAndGivenBackToTheQueueInAnotherTeam() async throws {
        let gateway = try await Live.signedIn()
        let ticket = try await gateway.tickets.create(title: "A billing question", userName: "Demo")
        do {
            _ = try await gateway.tickets.cancelAssignment(ticket.id, transferTo: "billing")
            Issue.record("a ticket no agent has had was given back to the queue")
        } catch let error as DeskGatewayError {
            #expect(error.status == 409 && error.problem == .ticketStateConflict && error.ticketStatus == "INITIALIZED", "\(error)")
        }
        #expect(try await gateway.tickets.selectQuestion(ticket.id, faqFileId: 7, question: "Where is my invoice?").id == ticket.id)
        let raised = try await gateway.tickets.setPriority(ticket.id, .urgent)
        #expect(raised.ticket?.priority == .urgent, "\(raised)")
        try await Live.control("/tickets/\(ticket.id)/customer-message", ["text": "About my invoice"])
        try await Live.control("/tickets/\(ticket.id)/assign", ["agentId": 501])
        _ = try await Live.until(gateway, ticket.id) { $0.status == .active }
        let given = try await gateway.tickets.cancelAssignment(ticket.id, transferTo: "billing")
        #expect(given.ticket?.status == .pending && given.ticket?.agent == nil && given.ticket?.team?.key == "billing", "\(given)")
    }

    @Test func aPagesPreviewAndItsDeskMessage() async throws {
        // The gateway's own sign-in page (the test's gateway lets previews fetch loopback addresses).
        let url = Live.gateway.appendingPathComponent("reports").absoluteString
        let preview = try await Live.signedIn().linkPreview(url: url)
        #expect(preview.url == url && preview.title == "Sign in · CSAT" && preview.image == nil, "\(preview)")
        #expect(preview.message.customType == .sendbirdDeskRichMessage)
        let data = try #require(try JSONSerialization.jsonObject(with: Data(preview.message.data.utf8)) as? [String: Any])
        #expect(data["type"] as? String == "SENDBIRD_DESK_URL_PREVIEW")
        #expect((data["body"] as? [String: Any])?["title"] as? String == "Sign in · CSAT")
    }

    @Test func aSurveyDeclinedWithoutAComment() async throws {
        let gateway = try await Live.signedIn()
        let ticket = try await gateway.tickets.create(title: "Declined", userName: "Demo")
        try await Live.control("/tickets/\(ticket.id)/customer-message", ["text": "Hi"])
        try await Live.control("/tickets/\(ticket.id)/assign", ["agentId": 501])
        _ = try await Live.until(gateway, ticket.id) { $0.status == .active }
        let closed = try await gateway.tickets.close(ticket.id)
        #expect(closed.ticket?.status == .closed)
        let messageId = try #require(try await Live.control("/tickets/\(ticket.id)/csat-request")["messageId"] as? Int)
        let declined = try await gateway.tickets.submitFeedback(ticket.id, messageId: messageId, score: nil)
        #expect(declined.ticket?.satisfaction == nil, "\(declined)")
    }

    @Test func aWriteWhileDeskIsDownIsQueuedAndWaitedFor() async throws {
        let gateway = try await Live.signedIn()
        let ticket = try await gateway.tickets.create(title: "Queued write", userName: "Demo")
        try await Live.control("/faults", ["down": true])
        let result: WriteResult
        do {
            result = try await gateway.tickets.setCustomFields(ticket.id, ["tier": "silver"])
        } catch {
            try await Live.control("/faults", ["down": false])
            throw error
        }
        try await Live.control("/faults", ["down": false])
        let operation = try #require(result.operation, "\(result)")
        #expect(operation.status == .pending)
        let delivered = try await gateway.waitForOperation(operation, every: .milliseconds(300))
        #expect(delivered.status == .delivered && delivered.ticketId == ticket.id && delivered.kind == .customFields)
        #expect(delivered.deliveredAs == .customer)
    }

    @Test func aQueuedWriteWhoseDeskSessionEndedGoesThroughOnceTheHookSignsIn() async throws {
        let asked = Counter()
        let gateway = try await Live.signedIn { _ in
            await asked.add()
            return try? await DeskGateway(baseURL: Live.gateway).authenticate(userId: "demo-customer", accessToken: "demo-token").token
        }
        let ticket = try await gateway.tickets.create(title: "Queued across a Desk session", userName: "Demo")
        try await Live.control("/faults", ["down": true])
        let result: WriteResult
        do {
            result = try await gateway.tickets.setCustomFields(ticket.id, ["plan": "bronze"])
            // Desk ends the customer's sessions while the write waits: it then waits for a new sign-in.
            try await Live.control("/customers/demo-customer/end-sessions")
        } catch {
            try await Live.control("/faults", ["down": false])
            throw error
        }
        try await Live.control("/faults", ["down": false])
        let operation = try #require(result.operation, "\(result)")
        let delivered = try await gateway.waitForOperation(operation, every: .milliseconds(300), timeout: .seconds(90))
        #expect(delivered.status == .delivered && delivered.kind == .customFields)
        #expect(await asked.value == 1)
        let read = try await gateway.tickets.get(ticket.id)
        #expect(read.customFields.additionalProperties["plan"] == "bronze", "\(read)")
    }

    @Test func problemsAreTypedErrors() async throws {
        let gateway = try await Live.signedIn()
        // 422 with the field named.
        do {
            _ = try await gateway.tickets.create(title: "", userName: "Demo")
            Issue.record("an empty title was accepted")
        } catch let error as DeskGatewayError {
            #expect(error.status == 422 && error.problem == .validationFailed, "\(error)")
            #expect(error.fieldErrors.contains { $0.field == "title" })
            #expect(error.requestId != nil)
        }
        // 409: a ticket that is not open cannot be reopened.
        let ticket = try await gateway.tickets.create(title: "Not closed", userName: "Demo")
        do {
            _ = try await gateway.tickets.reopen(ticket.id)
            Issue.record("reopening an open ticket was accepted")
        } catch let error as DeskGatewayError {
            #expect(error.status == 409 && error.problem == .ticketStateConflict, "\(error)")
        }
        // 429: past the rate limit, without retries, with the wait to respect.
        let impatient = try await Live.signedIn(maxRetries: 0)
        let outcomes = await withTaskGroup(of: DeskGatewayError?.self) { group in
            for _ in 0..<80 {
                group.addTask {
                    do { _ = try await impatient.tickets.openCount(); return nil } catch { return error as? DeskGatewayError }
                }
            }
            return await group.reduce(into: [DeskGatewayError]()) { if let error = $1 { $0.append(error) } }
        }
        let limited = try #require(outcomes.first { $0.problem == .rateLimited }, "\(outcomes.prefix(3))")
        #expect(limited.status == 429 && (limited.retryAfter ?? 0) >= 1)
        // With retries the same calls are answered after waiting out Retry-After.
        let patient = try await Live.signedIn(maxRetries: 10)
        #expect(try await patient.tickets.openCount() >= 0)
    }

    @Test func cursorsPageThroughEveryTicketOnce() async throws {
        let gateway = try await Live.signedIn()
        for index in 0..<5 { _ = try await gateway.tickets.create(title: "Paged \(index)", userName: "Demo") }
        let first = try await gateway.tickets.page(status: .open, limit: 2)
        #expect(first.items.count == 2 && first.hasNext && first.nextCursor != nil)
        let second = try await gateway.tickets.page(status: .open, limit: 2, cursor: first.nextCursor)
        #expect(Set(first.items.map(\.id)).isDisjoint(with: second.items.map(\.id)))
        var seen: [Int] = []
        for try await ticket in gateway.tickets.openedList(pageSize: 2) { seen.append(ticket.id) }
        #expect(seen.count == Set(seen).count && seen.count >= 5)
    }

    @Test func aCancelledTaskEndsItsCallDuringARetryAfterWait() async throws {
        let spender = try await Live.signedIn(maxRetries: 0)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<80 { group.addTask { _ = try? await spender.tickets.openCount() } }
        }
        let patient = try await Live.signedIn(maxRetries: 10)
        let started = ContinuousClock.now
        let task = Task { try await patient.tickets.openCount() }
        try await Task.sleep(for: .milliseconds(300))
        task.cancel()
        let outcome = await task.result
        #expect(ContinuousClock.now - started < .seconds(2))
        if case .success(let count) = outcome {
            // The budget refilled before the call: nothing to cancel then, but the call must not have waited long.
            #expect(count >= 0)
        } else if case .failure(let error) = outcome {
            #expect(error is CancellationError, "\(error)")
        }
    }

    @Test func anEndedSessionIsRenewedThroughTheHook() async throws {
        let asked = Counter()
        let gateway = try await Live.signedIn { _ in
            await asked.add()
            let fresh = DeskGateway(baseURL: Live.gateway)
            return try? await fresh.authenticate(userId: "demo-customer", accessToken: "demo-token").token
        }
        let old = try #require(gateway.token)
        // Sign the token out through another client: this one still holds it.
        try await DeskGateway(baseURL: Live.gateway, token: old).signOut()
        #expect(try await gateway.tickets.openCount() >= 0)
        #expect(await asked.value == 1)
        #expect(gateway.token != old)
        // Signing out an ended session says so and forgets it, without asking the hook for a session to end instead.
        let askedAtSignOut = Counter()
        let ending = DeskGateway(baseURL: Live.gateway, token: old) { _ in
            await askedAtSignOut.add()
            return try? await DeskGateway(baseURL: Live.gateway).authenticate(userId: "demo-customer", accessToken: "demo-token").token
        }
        await #expect(throws: DeskGatewayError.self) { try await ending.signOut() }
        #expect(ending.token == nil)
        #expect(await askedAtSignOut.value == 0)
    }
}

actor Counter {
    private(set) var value = 0
    func add() { value += 1 }
}
