import Domain
import JSON
import Logging
import Services
import Synchronization
import Testing

/// The outbox in memory, with the store's claim rule: only the oldest pending operation of a ticket is due.
final class FakeOutbox: OutboxQueue {
    struct Entry {
        var operation: OutboxOperation
        var claimedBy: String?
        var delay: Double?
        var refusedInRequest = false
        /// Whether the last reschedule kept the write's sign-in wait running.
        var awaitingSignIn: Bool?
    }
    let entries = Mutex<[Entry]>([])

    static func with(_ operation: OutboxOperation, status: OperationStatus? = nil, attempts: Int? = nil, error: String? = nil,
                     deliveredAs: DeliveryPath? = nil) -> OutboxOperation {
        OutboxOperation(id: operation.id, ticketId: operation.ticketId, customerId: operation.customerId, sessionId: operation.sessionId,
                        kind: operation.kind, payload: operation.payload, status: status ?? operation.status,
                        attempts: attempts ?? operation.attempts, lastError: error ?? operation.lastError, createdAt: 0, finishedAt: nil,
                        deliveredAs: deliveredAs ?? operation.deliveredAs)
    }

    func enqueue(ticketId: Int, customerId: Int, sessionId: Int, kind: OperationKind, payload: String,
                 owner: String, leaseSeconds: Int) async throws -> (operation: OutboxOperation, earlierPending: Bool) {
        entries.withLock { entries in
            let operation = OutboxOperation(id: entries.count + 1, ticketId: ticketId, customerId: customerId, sessionId: sessionId, kind: kind,
                                            payload: payload, status: .pending, attempts: 0, lastError: nil, createdAt: 0, finishedAt: nil)
            let earlier = entries.contains { $0.operation.ticketId == ticketId && $0.operation.status == .pending }
            entries.append(Entry(operation: operation, claimedBy: owner))
            return (operation, earlier)
        }
    }

    func release(id: Int, owner: String) async throws {
        entries.withLock { entries in
            for index in entries.indices where entries[index].operation.id == id { entries[index].claimedBy = nil }
        }
    }

    func claimBatch(by owner: String, leaseSeconds: Int, limit: Int) async throws -> [OutboxOperation] {
        entries.withLock { entries in
            var claimed: [OutboxOperation] = []
            var seen = Set<Int>()
            for index in entries.indices where entries[index].operation.status == .pending {
                let ticket = entries[index].operation.ticketId
                guard seen.insert(ticket).inserted, entries[index].claimedBy == nil, claimed.count < limit else { continue }
                entries[index].claimedBy = owner
                claimed.append(entries[index].operation)
            }
            return claimed
        }
    }

    func finish(_ operation: OutboxOperation, deliveredAs: DeliveryPath?, error: String?, refusedInRequest: Bool) async throws {
        update(operation.id) {
            $0.operation = Self.with($0.operation, status: deliveredAs == nil ? .failed : .delivered, attempts: $0.operation.attempts + 1,
                                     error: error, deliveredAs: deliveredAs)
            $0.refusedInRequest = refusedInRequest
        }
    }

    func reschedule(_ operation: OutboxOperation, afterSeconds delay: Double, error: String, awaitingSignIn: Bool) async throws {
        update(operation.id) { entry in
            entry.operation = Self.with(entry.operation, attempts: entry.operation.attempts + 1, error: error)
            entry.claimedBy = nil
            entry.delay = delay
            entry.awaitingSignIn = awaitingSignIn
        }
    }

    func find(id: Int) async throws -> OutboxOperation? { entries.withLock { $0.first { $0.operation.id == id }?.operation } }

    func depth() async throws -> (pending: Int, oldestSeconds: Double) {
        (entries.withLock { $0.filter { $0.operation.status == .pending }.count }, 0)
    }

    private func update(_ id: Int, _ change: (inout Entry) -> Void) {
        entries.withLock { entries in
            for index in entries.indices where entries[index].operation.id == id { change(&entries[index]) }
        }
    }

    var statuses: [OperationStatus] { entries.withLock { $0.map(\.operation.status) } }
}

/// Desk's customer API writes in memory: each ticket's status, and a failure to answer with, per operation kind.
final class FakeWriter: DeskTicketWriter {
    struct State {
        var closed: Set<Int> = []
        var failures: [String: DomainError] = [:]
        var writes: [String] = []
        var paused = false
        /// Desk sessions Desk has ended: anything asked with one is refused as unauthorized.
        var endedTokens: Set<String> = []
        /// Open tickets an agent marked WORK_IN_PROGRESS (the rest are ACTIVE or, in `closed`, CLOSED).
        var working: Set<Int> = []
        /// Tickets an earlier, unanswered close did close, which Desk shows only once the next close is refused.
        var closedUnseen: Set<Int> = []
    }
    let state = Mutex(State())

    private func write(_ name: String, _ id: Int, token: String, _ change: (inout State) -> Void = { _ in }) throws(DomainError) {
        let failure = state.withLock { state -> DomainError? in
            if state.endedTokens.contains(token) { return DomainError(.unauthorized, "session ended") }
            state.writes.append("\(name) \(id)")
            if let failure = state.failures[name] { return failure }
            change(&state)
            return nil
        }
        if let failure { throw failure }
    }

    func ticket(_ key: TicketKey, deskToken: String) async throws(DomainError) -> DeskTicket {
        guard case .id(let id) = key else { throw DomainError(.notFound, "no") }
        let (closed, ended) = state.withLock { ($0.closed.contains(id), $0.endedTokens.contains(deskToken)) }
        if ended { throw DomainError(.unauthorized, "session ended") }
        return Make.ticket(id, closedAt: closed ? "2026-11-20T09:00:00Z" : nil)
    }

    func submitFeedback(ticketId: Int, messageId: Int, score: Int, comment: String?, deskToken: String) async throws(DomainError) {
        try write("feedback", ticketId, token: deskToken)
    }

    func confirmClosure(ticketId: Int, messageId: Int, confirm: Bool, deskToken: String) async throws(DomainError) {
        try write("closure_confirmation", ticketId, token: deskToken)
    }

    func close(ticketId: Int, comment: String, deskToken: String) async throws(DomainError) -> DeskTicket {
        try write("close", ticketId, token: deskToken) { _ = $0.closed.insert(ticketId) }
        return try await ticket(.id(ticketId), deskToken: deskToken)
    }

    func reopen(ticketId: Int, deskToken: String) async throws(DomainError) -> DeskTicket {
        try write("reopen", ticketId, token: deskToken) { _ = $0.closed.remove(ticketId) }
        return try await ticket(.id(ticketId), deskToken: deskToken)
    }

    func setCustomFields(ticketId: Int, _ fields: [(key: String, value: String)], deskToken: String) async throws(DomainError) -> DeskTicket {
        try write("custom_fields", ticketId, token: deskToken)
        return try await ticket(.id(ticketId), deskToken: deskToken)
    }

    func setRelatedChannels(ticketId: Int, _ urls: [String], deskToken: String) async throws(DomainError) -> DeskTicket {
        try write("related_channels", ticketId, token: deskToken)
        return try await ticket(.id(ticketId), deskToken: deskToken)
    }

    func setPriority(ticketId: Int, _ priority: TicketPriority, deskToken: String) async throws(DomainError) -> DeskTicket {
        try write("priority", ticketId, token: deskToken)
        return try await ticket(.id(ticketId), deskToken: deskToken)
    }

    func cancelAssignment(ticketId: Int, transferTo groupKey: String?, deskToken: String) async throws(DomainError) -> DeskTicket {
        try write("cancel", ticketId, token: deskToken)
        return try await ticket(.id(ticketId), deskToken: deskToken)
    }

    var isPaused: Bool { state.withLock { $0.paused } }
}

/// Desk's Platform API writes on the same tickets, made with the application's token (no customer's session).
extension FakeWriter: DeskPlatformWriter {
    func platformClose(ticketId: Int, comment: String) async throws(DomainError) -> DeskTicket {
        defer { state.withLock { if $0.closedUnseen.remove(ticketId) != nil { $0.closed.insert(ticketId) } } }
        try write("platform_close", ticketId, token: "api-token") { _ = $0.closed.insert(ticketId) }
        return try await platformTicket(id: ticketId)
    }

    func platformCancel(ticketId: Int) async throws(DomainError) -> DeskTicket {
        try write("platform_cancel", ticketId, token: "api-token")
        return try await platformTicket(id: ticketId)
    }

    func platformTransfer(ticketId: Int, toTeam groupKey: String) async throws(DomainError) -> DeskTicket {
        try write("platform_transfer", ticketId, token: "api-token")
        return try await platformTicket(id: ticketId)
    }

    func platformSetPriority(ticketId: Int, _ priority: TicketPriority) async throws(DomainError) -> DeskTicket {
        try write("platform_priority", ticketId, token: "api-token")
        return try await platformTicket(id: ticketId)
    }

    func platformTicket(id: Int) async throws(DomainError) -> DeskTicket {
        let (closed, working) = state.withLock { ($0.closed.contains(id), $0.working.contains(id)) }
        return Make.ticket(id, closedAt: closed ? "2026-11-20T09:00:00Z" : nil, status: working && !closed ? .workInProgress : nil)
    }
}

/// What a callback was told, in order.
final class Recorded: Sendable {
    let values = Mutex<[String]>([])
}

struct FakeSessions: DeskSessionTokens {
    /// The database cannot answer a session lookup (a failover, a statement timeout).
    var unreachable = false
    /// The Desk token of a session the customer opened later, if any.
    var newer: String?
    func deskToken(sessionId: Int) async throws -> String? {
        if unreachable { throw DomainError(.storeTimeout, "The database took too long; retry shortly.") }
        return "token-\(sessionId)"
    }
    func newestDeskToken(customerId: Int, after sessionId: Int) async throws -> String? { newer }
}

@Suite struct OperationDeliveryTests {
    static func delivery(_ desk: FakeWriter, _ outbox: FakeOutbox, _ cache: FakeTicketCache = FakeTicketCache(),
                         _ ratings: FakeRatings = FakeRatings(), sessions: FakeSessions = FakeSessions(),
                         queuedFailures: Recorded? = nil, platform: Bool = false) -> OperationDelivery {
        OperationDelivery(desk: desk, outbox: outbox, sessions: sessions, tickets: cache, ratings: ratings,
                          policy: OutboxPolicy(maxBackoffSeconds: 60, relayConcurrency: 4, signInWaitSeconds: 600), logger: Logger(label: "test"),
                          observeQueuedFailure: { reason in queuedFailures?.values.withLock { $0.append(reason) } },
                          platform: platform ? desk : nil)
    }

    static func submit(_ delivery: OperationDelivery, _ ticket: Int, _ kind: OperationKind,
                       _ payload: JSONValue = .object([])) async throws -> OperationDelivery.Submission {
        try await delivery.submit(customerId: 7, sessionId: 3, ticketId: ticket, kind: kind, payload: payload)
    }

    @Test func aWriteGoesAtOnceWhenItMayAndWaitsItsTurnOtherwise() async throws {
        let (desk, outbox) = (FakeWriter(), FakeOutbox())
        let delivery = Self.delivery(desk, outbox)
        guard case .delivered(let ticket) = try await Self.submit(delivery, 1, .close) else { Issue.record("not delivered at once"); return }
        #expect(ticket.customerId == 7 && ticket.status == "CLOSED")
        // Desk away: the write is queued, not lost.
        desk.state.withLock { $0.failures["reopen"] = DomainError(.upstreamUnavailable, "away") }
        guard case .queued(let waiting) = try await Self.submit(delivery, 1, .reopen) else { Issue.record("not queued"); return }
        #expect(waiting.status == .pending && waiting.attempts == 1)
        let delay = try #require(outbox.entries.withLock { $0[1].delay })
        #expect(delay >= 0.5 && delay <= 1)   // the first retry: half to all of 2^0 s
        for attempts in [0, 3, 10, 40] {
            let later = OperationDelivery.backoff(attempts: attempts, ceiling: 60)
            let top = min(60, Double(1 << min(attempts, 20)))
            #expect(later >= top / 2 && later <= top, "\(attempts): \(later)")
        }
        // A later write of the same ticket waits for it without asking Desk, even once Desk is back.
        desk.state.withLock { $0.failures = [:] }
        let before = desk.state.withLock { $0.writes.count }
        guard case .queued = try await Self.submit(delivery, 1, .customFields, .object([("customFields", .object([("size", .string("L"))]))])) else {
            Issue.record("jumped the queue"); return
        }
        #expect(desk.state.withLock { $0.writes.count } == before)
        // Paused Desk: queued without an attempt.
        desk.state.withLock { $0.paused = true }
        guard case .queued = try await Self.submit(delivery, 2, .close) else { Issue.record("tried while paused"); return }
        #expect(desk.state.withLock { $0.writes.count } == before)
        // The relay delivers each ticket's writes in order: ticket 1's reopen, then its custom fields; ticket 2's close.
        desk.state.withLock { $0.paused = false }
        while try await delivery.relayOnce() > 0 {}
        #expect(desk.state.withLock { Array($0.writes.suffix(3)) } == ["reopen 1", "close 2", "custom_fields 1"])
        #expect(outbox.statuses == [.delivered, .delivered, .delivered, .delivered])
        #expect(outbox.entries.withLock { $0.map(\.operation.deliveredAs) } == Array(repeating: .customer, count: 4))
    }

    /// What the gateway never writes (a hand edit, a defect) is not guessed at: before, a priority it could not read went
    /// to Desk as MEDIUM and a closure confirmation without `confirm` as a decline.
    @Test func aQueuedWriteWhosePayloadCannotBeReadFailsWithoutReachingDesk() async throws {
        let (desk, outbox, queuedFailures) = (FakeWriter(), FakeOutbox(), Recorded())
        let delivery = Self.delivery(desk, outbox, queuedFailures: queuedFailures)
        let payloads: [(OperationKind, String, String)] = [
            (.priority, #"{"priority":"urgent"}"#, "`priority`"), (.closureConfirmation, #"{"messageId":5}"#, "`confirm`"),
            (.feedback, #"{"messageId":5,"score":"4"}"#, "`score`"), (.relatedChannels, #"{"channelUrls":["a",3]}"#, "`channelUrls`"),
            (.customFields, #"{"customFields":{"size":1}}"#, "`customFields`"), (.close, "[]", "not a JSON object"),
        ]
        for (ticket, (kind, payload, _)) in payloads.enumerated() {
            let queued = try await outbox.enqueue(ticketId: ticket + 1, customerId: 7, sessionId: 3, kind: kind, payload: payload, owner: "api", leaseSeconds: 30)
            try await outbox.release(id: queued.operation.id, owner: "api")
        }
        while try await delivery.relayOnce() > 0 {}
        #expect(desk.state.withLock { $0.writes }.isEmpty)
        #expect(outbox.statuses == Array(repeating: .failed, count: payloads.count))
        for (index, (_, _, named)) in payloads.enumerated() {
            let reason = outbox.entries.withLock { $0[index].operation.lastError } ?? ""
            #expect(reason.hasPrefix("unreadable_payload: ") && reason.contains(named), "\(reason)")
        }
        // Each was acknowledged as queued: counted for `outbox_queued_writes_failed_total`.
        #expect(queuedFailures.values.withLock { $0 } == Array(repeating: "unreadable_payload", count: payloads.count))
        #expect(outbox.entries.withLock { $0.allSatisfy { !$0.refusedInRequest } })
    }

    @Test func desksRefusalFailsTheWriteNamesTheStateAndResetsTheCache() async throws {
        let (desk, outbox, cache, queuedFailures) = (FakeWriter(), FakeOutbox(), FakeTicketCache(), Recorded())
        desk.state.withLock { $0.failures["reopen"] = DomainError(.conflict, "Desk: not closed", internalDetail: "HTTP 409") }
        do {
            _ = try await Self.submit(Self.delivery(desk, outbox, cache, queuedFailures: queuedFailures), 4, .reopen)
            Issue.record("a refused write was acknowledged")
        } catch let error as DomainError {
            #expect(error.code == .conflict && error.message == OperationKind.reopen.stateConflict)
            // Desk's status, read after the refusal, for the problem's `ticketStatus`.
            #expect(error.ticketStatus == .active)
        }
        #expect(outbox.statuses == [.failed])
        #expect(outbox.entries.withLock { $0[0].operation.lastError }?.hasPrefix("ticket_state_conflict") == true)
        // The refusal was the request's own answer: no queued write was lost, and `outbox revive` leaves it.
        #expect(queuedFailures.values.withLock { $0 }.isEmpty)
        #expect(outbox.entries.withLock { $0[0].refusedInRequest })
        // The cache holds Desk's view again.
        #expect(try await cache.find(.id(4))?.status == "ACTIVE")
    }

    /// A queued write made in a session Desk has ended goes with the customer's newer one; when Desk refuses it,
    /// the cache takes Desk's copy read with that session too (before: forgotten, read from Desk once more later).
    @Test func aRefusalAfterASignInAgainResetsTheCacheWithTheNewerSession() async throws {
        let (desk, outbox, cache) = (FakeWriter(), FakeOutbox(), FakeTicketCache())
        desk.state.withLock { $0.endedTokens = ["token-3"]; $0.failures["reopen"] = DomainError(.conflict, "Desk: not closed") }
        let delivery = Self.delivery(desk, outbox, cache, sessions: FakeSessions(newer: "token-9"))
        let operation = OutboxOperation(id: 1, ticketId: 8, customerId: 7, sessionId: 3, kind: .reopen, payload: "{}", status: .pending,
                                        attempts: 0, lastError: nil, createdAt: 0, finishedAt: nil)
        let outcome = await delivery.deliver(operation, inline: false)
        guard case .failed(let error) = outcome, error.code == .conflict else { Issue.record("\(outcome)"); return }
        try await delivery.complete(operation, outcome)
        #expect(desk.state.withLock { $0.writes } == ["reopen 8"])
        #expect(try await cache.find(.id(8))?.status == "ACTIVE")
    }

    /// Before, a session lookup the database could not answer failed the write as if Desk had refused the session.
    @Test func aSessionLookupTheDatabaseCannotAnswerLeavesTheWriteQueued() async throws {
        let (desk, outbox) = (FakeWriter(), FakeOutbox())
        let operation = OutboxOperation(id: 1, ticketId: 6, customerId: 7, sessionId: 3, kind: .close, payload: "{}", status: .pending,
                                        attempts: 2, lastError: nil, createdAt: 0, finishedAt: nil)
        let outcome = await Self.delivery(desk, outbox, sessions: FakeSessions(unreachable: true)).deliver(operation, inline: false)
        guard case .retry(let error) = outcome else { Issue.record("\(outcome)"); return }
        #expect(OperationDelivery.reason(error).hasPrefix("database_unavailable: the customer's Desk session"))
        #expect(desk.state.withLock { $0.writes.isEmpty })
    }

    /// The queued-failure metric starts every code a refusal can end with at zero, and no code of an error retried.
    @Test func everyReasonAFailureEndsWithIsAFailureCode() {
        let ending: [DomainError.Code] = [.conflict, .invalid, .notFound, .unauthorized, .unreadablePayload, .storeFailure]
        let retried: [DomainError.Code] = [.upstreamUnavailable, .rateLimited, .upstreamProtocol, .storeUnavailable, .storeTimeout]
        let code = { (error: DomainError.Code) in String(OperationDelivery.reason(DomainError(error, "x")).prefix { $0 != ":" }) }
        #expect(ending.map(code) == OperationDelivery.failureCodes)
        #expect(retried.allSatisfy { !OperationDelivery.failureCodes.contains(code($0)) })
        #expect(OperationDelivery.reason(DomainError(.storeFailure, "the statement was refused")) == "store_failure: the statement was refused")
    }

    @Test func aRepeatedAttemptWhoseEffectIsAlreadyVisibleCountsAsDelivered() async throws {
        let (desk, outbox) = (FakeWriter(), FakeOutbox())
        let delivery = Self.delivery(desk, outbox)
        // The first attempt reached Desk but its answer was lost; Desk now refuses the repeat, and shows it closed.
        desk.state.withLock { $0.closed = [5]; $0.failures["close"] = DomainError(.conflict, "already closed") }
        let first = OutboxOperation(id: 1, ticketId: 5, customerId: 7, sessionId: 3, kind: .close, payload: "{}", status: .pending,
                                    attempts: 0, lastError: nil, createdAt: 0, finishedAt: nil)
        guard case .failed = await delivery.deliver(first, inline: false) else { Issue.record("a first refusal was forgiven"); return }
        guard case .delivered = await delivery.deliver(FakeOutbox.with(first, attempts: 1), inline: false) else {
            Issue.record("a visible effect was not taken as delivered")
            return
        }
        // Not visible: still a refusal.
        desk.state.withLock { $0.closed = [] }
        guard case .failed = await delivery.deliver(FakeOutbox.with(first, attempts: 1), inline: false) else { Issue.record("forgiven blindly"); return }
    }

    /// A queued write of ticket 5 whose Desk session (token-3) Desk has ended, tried by the relay.
    static func pastSessionEnd(_ kind: OperationKind, _ payload: String = "{}", id: Int = 1, awaited: Double? = 600,
                               lastError: String? = "desk_session_expired: waiting for the customer to sign in again") -> OutboxOperation {
        OutboxOperation(id: id, ticketId: 5, customerId: 7, sessionId: 3, kind: kind, payload: payload, status: .pending, attempts: 3,
                        lastError: lastError, createdAt: 0, finishedAt: nil, awaitedSignInSeconds: awaited)
    }

    /// Past its sign-in wait, a write goes with the Platform API where Desk has the call (close, priority, a cancel,
    /// into the same team or as a transfer into another) and fails as before where only the customer can make it, or
    /// without an API token.
    @Test func aWritePastItsSignInWaitGoesAsTheApplicationWhereDeskHasTheCall() async throws {
        let (desk, outbox) = (FakeWriter(), FakeOutbox())
        desk.state.withLock { $0.endedTokens = ["token-3"] }
        let delivery = Self.delivery(desk, outbox, platform: true)
        guard case .awaitSignIn = await delivery.deliver(Self.pastSessionEnd(.close, awaited: 10), inline: false) else {
            Issue.record("a write within its wait did not wait")
            return
        }
        guard case .delivered(let closed, via: .application) = await delivery.deliver(Self.pastSessionEnd(.close), inline: false) else {
            Issue.record("the close did not go as the application")
            return
        }
        #expect(closed.status == .closed)
        desk.state.withLock { $0.closed = [] }
        for (kind, payload) in [(OperationKind.priority, #"{"priority":"HIGH"}"#), (.cancel, "{}"), (.cancel, #"{"groupKey":"team-2"}"#)] {
            guard case .delivered(_, via: .application) = await delivery.deliver(Self.pastSessionEnd(kind, payload), inline: false) else {
                Issue.record("\(kind)")
                continue
            }
        }
        let customersOwn: [(OperationKind, String)] = [(.feedback, #"{"score":5,"messageId":9}"#),
                                                       (.closureConfirmation, #"{"messageId":9,"confirm":true}"#), (.reopen, "{}")]
        for (kind, payload) in customersOwn {
            let outcome = await delivery.deliver(Self.pastSessionEnd(kind, payload), inline: false)
            guard case .failed(let error) = outcome, error.code == .unauthorized else { Issue.record("\(kind): \(outcome)"); continue }
        }
        #expect(desk.state.withLock { $0.writes.filter { $0.hasPrefix("platform") } }
                == ["platform_close 5", "platform_priority 5", "platform_cancel 5", "platform_transfer 5"])
        guard case .failed(let error) = await Self.delivery(desk, outbox).deliver(Self.pastSessionEnd(.close), inline: false),
              error.code == .unauthorized else {
            Issue.record("went without an API token")
            return
        }
    }

    /// The Platform API is not known to keep the rules Desk holds a customer to, so a write sent as the application
    /// is held to them: what the customer's own write would have been refused for fails the same way, without a call.
    @Test func aWriteSentAsTheApplicationKeepsTheCustomersStateRules() async throws {
        let (desk, outbox) = (FakeWriter(), FakeOutbox())
        desk.state.withLock { $0.endedTokens = ["token-3"] }
        let delivery = Self.delivery(desk, outbox, platform: true)
        // A ticket marked work in progress since is not closed: the customer's close would be refused for it.
        desk.state.withLock { $0.working = [5] }
        let held = await delivery.deliver(Self.pastSessionEnd(.close), inline: false)
        guard case .failed(let wip) = held, wip.code == .conflict else { Issue.record("\(held)"); return }
        #expect(desk.state.withLock { $0.writes.filter { $0.hasPrefix("platform_close") }.count } == 0)
        desk.state.withLock { $0.working = [] }
        // A closed ticket is not given back to a queue, its own team's or another's: the customer's cancel would be
        // refused for it.
        desk.state.withLock { $0.closed = [5] }
        for payload in [#"{"groupKey":"team-2"}"#, "{}"] {
            let refused = await delivery.deliver(Self.pastSessionEnd(.cancel, payload), inline: false)
            guard case .failed(let conflict) = refused, conflict.code == .conflict else { Issue.record("\(refused)"); return }
        }
        #expect(desk.state.withLock { $0.writes.filter { $0.hasPrefix("platform_transfer") || $0.hasPrefix("platform_cancel") } }.isEmpty)
        // A team Desk does not know is named as the cause, as when the customer's own cancel meets one.
        desk.state.withLock { $0.closed = []; $0.failures["platform_transfer"] = DomainError(.invalid, "Unknown groupKey.") }
        let unknown = await delivery.deliver(Self.pastSessionEnd(.cancel, #"{"groupKey":"team-9"}"#), inline: false)
        guard case .failed(let invalid) = unknown, invalid.code == .invalid, invalid.message == "Desk has no team with this groupKey." else {
            Issue.record("\(unknown)")
            return
        }
    }

    /// A Platform close Desk did not answer is tried again past the wait (not waited for again), and a repeat that
    /// finds the ticket closed is that close (booked without closing again); a first one meeting a closed ticket is a
    /// state conflict.
    @Test func anUnansweredPlatformCloseStaysPastTheWaitAndIsRecognizedWhenRepeated() async throws {
        let (desk, outbox) = (FakeWriter(), FakeOutbox())
        desk.state.withLock { $0.endedTokens = ["token-3"]; $0.failures["platform_close"] = DomainError(.upstreamUnavailable, "away") }
        let delivery = Self.delivery(desk, outbox, platform: true)
        _ = try await outbox.enqueue(ticketId: 5, customerId: 7, sessionId: 3, kind: .close, payload: "{}", owner: "test", leaseSeconds: 60)
        let outcome = await delivery.deliver(Self.pastSessionEnd(.close), inline: false)
        guard case .retry = outcome else { Issue.record("\(outcome)"); return }
        try await delivery.complete(Self.pastSessionEnd(.close), outcome)
        #expect(outbox.entries.withLock { $0[0].awaitingSignIn } == true)
        desk.state.withLock { $0.closed = [5]; $0.failures["platform_close"] = DomainError(.conflict, "already closed") }
        let repeated = Self.pastSessionEnd(.close, lastError: "desk_unavailable: away")
        let recognized = await delivery.deliver(repeated, inline: false)
        guard case .delivered(_, via: .application) = recognized else { Issue.record("the repeat was not recognized"); return }
        #expect(desk.state.withLock { $0.writes.filter { $0.hasPrefix("platform_close") }.count } == 1)
        // Booked as the application's: the operation says how it reached Desk.
        try await delivery.complete(repeated, recognized)
        #expect(try await outbox.find(id: repeated.id)?.deliveredAs == .application)
        guard case .failed(let error) = await delivery.deliver(Self.pastSessionEnd(.close), inline: false), error.code == .conflict else {
            Issue.record("a first refusal was forgiven")
            return
        }
        // The ticket still looked open when read, and the repeat was refused: a ticket then found closed is that close.
        desk.state.withLock { $0.closed = []; $0.closedUnseen = [5] }
        guard case .delivered(let late, via: .application) = await delivery.deliver(repeated, inline: false), late.status == .closed else {
            Issue.record("a close that landed late was not recognized")
            return
        }
    }

    @Test func deliveredFeedbackIsRecordedOnceWithDesksAnswer() async throws {
        let (desk, outbox, ratings) = (FakeWriter(), FakeOutbox(), FakeRatings())
        let payload: JSONValue = .object([("messageId", .integer(9)), ("score", .integer(4)), ("comment", .string("fine")),
                                          ("ratedAt", .number(1_800_000_000)), ("agentId", .integer(77)), ("channelType", .string("SENDBIRD"))])
        _ = try await Self.submit(Self.delivery(desk, outbox, FakeTicketCache(), ratings), 6, .feedback, payload)
        let recorded = ratings.state.withLock { $0.ratings }
        #expect(recorded.count == 1)
        #expect(recorded.first?.score == 4 && recorded.first?.messageId == 9 && recorded.first?.source == .gateway)
        // Delivered at once: the agent is the ticket's now, not the one captured at submission.
        #expect(recorded.first?.agentId == 501 && recorded.first?.ratedAt == 1_800_000_000)
    }
}
