public import Domain
import Foundation
public import JSON
public import Logging

public struct OutboxPolicy: Sendable {
    /// Ceiling of the exponential backoff between delivery attempts.
    public var maxBackoffSeconds: Double
    /// Operations of different tickets delivered at once by one relay pass.
    public var relayConcurrency: Int
    /// How long a queued write Desk refuses for its customer's ended Desk session waits for the customer to sign in
    /// again (it is then delivered with the new session) before it fails.
    public var signInWaitSeconds: Double
    /// How long a claimed operation is left alone by other instances.
    public var leaseSeconds = 60

    public init(maxBackoffSeconds: Double, relayConcurrency: Int, signInWaitSeconds: Double) {
        self.maxBackoffSeconds = maxBackoffSeconds
        self.relayConcurrency = relayConcurrency
        self.signInWaitSeconds = signInWaitSeconds
    }
}

/// The delivery rules of customer writes. A write is queued in the outbox first (nothing acknowledged is lost), then
/// tried at once unless an earlier write of the same ticket is still waiting or Desk is paused; the relay delivers
/// the rest later, in order per ticket. Desk refusing a write ends it (the cache goes back to Desk's state); Desk
/// being away brings it back after a jittered exponential backoff. A refusal on a repeated attempt whose effect is
/// already visible counts as delivered (an earlier attempt reached Desk but its answer was lost).
public final class OperationDelivery: Sendable {
    public enum Outcome: Sendable {
        /// Desk took it, with the customer's session or (`deliverAsApplication`) the Platform API.
        case delivered(DeskTicket, via: DeliveryPath = .customer)
        case retry(DomainError)
        /// Desk refused every Desk session of the customer's: tried again while the customer may sign in again.
        case awaitSignIn(DomainError)
        case failed(DomainError)
    }

    /// What became of a submitted write.
    public enum Submission: Sendable {
        /// Desk accepted it just now; the ticket as now cached.
        case delivered(CachedTicket)
        /// Queued for the relay (Desk away, or an earlier write of the ticket waits).
        case queued(OutboxOperation)
    }

    let desk: any DeskTicketWriter
    /// Desk's Platform API when a token is configured: a close, cancel or priority whose customer did not sign in
    /// again within the wait goes through it as the application instead of failing.
    let platform: (any DeskPlatformWriter)?
    let outbox: any OutboxQueue
    let sessions: any DeskSessionTokens
    let tickets: any TicketCache
    let ratings: any RatingStore
    let policy: OutboxPolicy
    let logger: Logger
    /// Told each attempt's outcome (`delivered`, `delivered_as_application`, `retry`, `awaiting_sign_in`, `failed`), for
    /// metrics.
    let observe: @Sendable (String) -> Void
    /// Told the reason's code (`desk_session_expired`, `ticket_state_conflict`…) of each write that ended failed after
    /// the customer was told it was queued (202): a change they were promised would reach Desk and did not.
    let observeQueuedFailure: @Sendable (String) -> Void
    let owner = UUID().uuidString

    public init(desk: any DeskTicketWriter, outbox: any OutboxQueue, sessions: any DeskSessionTokens, tickets: any TicketCache,
                ratings: any RatingStore, policy: OutboxPolicy, logger: Logger, observe: @escaping @Sendable (String) -> Void = { _ in },
                observeQueuedFailure: @escaping @Sendable (String) -> Void = { _ in }, platform: (any DeskPlatformWriter)? = nil) {
        self.desk = desk
        self.platform = platform
        self.outbox = outbox
        self.sessions = sessions
        self.tickets = tickets
        self.ratings = ratings
        self.policy = policy
        self.logger = logger
        self.observe = observe
        self.observeQueuedFailure = observeQueuedFailure
    }

    /// Queues `kind` and tries it once right away when it may go first. Throws Desk's refusal (the operation is then
    /// failed); a conflict names what the ticket's state did not allow.
    public func submit(customerId: Int, sessionId: Int, ticketId: Int, kind: OperationKind, payload: JSONValue) async throws -> Submission {
        let (operation, earlier) = try await outbox.enqueue(ticketId: ticketId, customerId: customerId, sessionId: sessionId, kind: kind,
                                                            payload: payload.serialized(), owner: owner, leaseSeconds: policy.leaseSeconds)
        tickets.forget(.id(ticketId))
        guard !earlier, !desk.isPaused else {
            try await outbox.release(id: operation.id, owner: owner)
            return .queued(try await outbox.find(id: operation.id) ?? operation)
        }
        let outcome = await deliver(operation, inline: true)
        let booked = try await book(operation, outcome, queued: false)
        switch outcome {
        case .delivered(let ticket, _):
            // Saved once by `complete`; only a save that failed there is tried again, so its error reaches the caller.
            if let saved = booked.saved { return .delivered(saved) }
            return .delivered(try await tickets.save(ticket, customerId: customerId))
        case .failed(let error):
            let refusal = Self.refusal(error, kind, payload)
            throw refusal.code == .conflict ? refusal.with(ticketStatus: booked.deskState?.status) : refusal
        case .retry, .awaitSignIn:
            return .queued(try await outbox.find(id: operation.id) ?? operation)
        }
    }

    /// One delivery attempt.
    public func deliver(_ operation: OutboxOperation, inline: Bool) async -> Outcome {
        let payload: JSONValue
        do throws(DomainError) { payload = try Self.payload(of: operation) } catch { return .failed(error) }
        do throws(DomainError) {
            let ticket = try await withSessions(operation) { token throws(DomainError) in try await attempt(operation, payload: payload, token: token) }
            // A rating Desk took but the database could not store for now (a zone backfill holding the CSAT writers, a
            // failover) is tried again, Desk's repeated answer recognized: left to Desk's webhook or the sync, it was
            // missing from the reports where neither came, and on the agent Desk named at sync time where one did.
            if operation.kind == .feedback,
               let missed = await recordRating(RatingRecorder.feedback(operation, payload: payload, ticket: ticket, inline: inline)) {
                return .retry(missed)
            }
            return .delivered(ticket)
        } catch {
            // Desk away, rate limiting, or answering what cannot be read (a proxy's or a maintenance page, after which
            // Desk may even have made the change): tried again later (a repeat refused as done already is booked
            // delivered), with the reason on the operation for as long as it lasts. Any other answer is a refusal.
            if Self.retried(error) { return .retry(error) }
            // A write the customer made before their Desk session ended is theirs still: one made from the request
            // itself is answered (the app signs in again and retries), a queued one waits a while for the sign-in.
            if error.code == .unauthorized, !inline {
                if (operation.awaitedSignInSeconds ?? 0) < policy.signInWaitSeconds { return .awaitSignIn(error) }
                if let delivered = await deliverAsApplication(operation, payload: payload) { return delivered }
            }
            return .failed(error)
        }
    }

    /// A queued write whose customer did not sign in again within the wait, sent with the Platform API when Desk has
    /// it there (nil otherwise: the write fails as the customer's session did). The customer asked for the change while
    /// signed in; Desk records it as the application's (a close says the Platform API closed the ticket;
    /// a cancel into another team goes as a transfer to that team's queue).
    private func deliverAsApplication(_ operation: OutboxOperation, payload: JSONValue) async -> Outcome? {
        guard let platform else { return nil }
        let id = operation.ticketId
        do throws(DomainError) {
            let ticket: DeskTicket
            switch operation.kind {
            case .close:
                // A close whose earlier attempt went unanswered (its reason is no longer the sign-in wait's; with no
                // wait, any earlier attempt's) may have been carried out: a ticket found closed is that close.
                let repeated = operation.lastError.map { !$0.hasPrefix(Self.signInWaitReason) } ?? false
                // Read first, as the Platform API is not known to keep the customer's rule: a ticket an agent has
                // since put back in the queue or marked work in progress stays open, as the customer's own close
                // would have been refused.
                let current = try await platform.platformTicket(id: id)
                if current.status == .closed, repeated {
                    ticket = current
                } else {
                    guard current.status.customerMayClose else { throw DomainError(.conflict, operation.kind.stateConflict) }
                    do {
                        ticket = try await platform.platformClose(ticketId: id, comment: payload["comment"]?.stringValue ?? "")
                    } catch where error.code == .conflict && repeated {
                        // Closed between the read and the close: by the unanswered attempt, only now visible.
                        let closed = try await platform.platformTicket(id: id)
                        guard closed.status == .closed else { throw error }
                        ticket = closed
                    }
                }
            case .cancel:
                // Neither call is known to keep a customer's cancel's rule (no closed ticket given back): the gateway does.
                guard try await platform.platformTicket(id: id).status.customerMayGiveBack else {
                    throw DomainError(.conflict, operation.kind.stateConflict)
                }
                if let team = payload["groupKey"]?.stringValue {
                    ticket = try await platform.platformTransfer(ticketId: id, toTeam: team)
                } else {
                    ticket = try await platform.platformCancel(ticketId: id)
                }
            case .priority:
                ticket = try await platform.platformSetPriority(ticketId: id, try payload.queuedPriority())
            default:
                return nil
            }
            logger.notice("a queued write went to Desk through the Platform API: its customer did not sign in again", metadata: [
                "operation": "\(operation.id)", "kind": "\(operation.kind)", "ticket": "\(id)"])
            return .delivered(ticket, via: .application)
        } catch {
            if Self.retried(error) { return .retry(error) }
            return .failed(Self.refusal(error, operation.kind, payload))
        }
    }

    /// Desk's refusal of a write in the gateway's words (Desk's own are not passed on): a state conflict as the kind's
    /// rule, an invalid value of a cancel as its one value Desk can refuse, the team; anything else as it is.
    static func refusal(_ error: DomainError, _ kind: OperationKind, _ payload: JSONValue) -> DomainError {
        if error.code == .invalid, kind == .cancel, payload["groupKey"] != nil {
            return DomainError(.invalid, "Desk has no team with this groupKey.", internalDetail: error.internalDetail)
        }
        guard error.code == .conflict else { return error }
        return DomainError(.conflict, kind.stateConflict, internalDetail: error.internalDetail)
    }

    /// `call` with the Desk session the write was made in; when Desk no longer takes it (or it is gone), with the
    /// newest session the customer opened since.
    private func withSessions<T>(_ operation: OutboxOperation,
                                 _ call: (String) async throws(DomainError) -> T) async throws(DomainError) -> T {
        if let token = try await deskToken({ try await sessions.deskToken(sessionId: operation.sessionId) }) {
            do {
                return try await call(token)
            } catch where error.code == .unauthorized {}
        }
        guard let newer = try await deskToken({ try await sessions.newestDeskToken(customerId: operation.customerId, after: operation.sessionId) }) else {
            throw DomainError(.unauthorized, "Desk no longer accepts the customer's session, and they have not signed in since.")
        }
        return try await call(newer)
    }

    /// A session's Desk token; a database that cannot say now is no reason to give the write up (tried again).
    private func deskToken(_ lookup: () async throws -> String?) async throws(DomainError) -> String? {
        do {
            return try await lookup()
        } catch {
            throw DomainError(.storeUnavailable, "the customer's Desk session could not be read; tried again", internalDetail: "\(error)")
        }
    }

    private func attempt(_ operation: OutboxOperation, payload: JSONValue, token: String) async throws(DomainError) -> DeskTicket {
        let id = operation.ticketId
        let repeated = operation.attempts > 0
        switch operation.kind {
        case .feedback:
            let (score, messageId) = (try payload.queued("score", \.intValue), try payload.queued("messageId", \.intValue))
            try await visibleAfterRefusal(repeated, token: token, id: id, { $0.satisfactionScore == score }) { () throws(DomainError) in
                try await desk.submitFeedback(ticketId: id, messageId: messageId, score: score, comment: payload["comment"]?.stringValue,
                                              deskToken: token)
            }
            return try await desk.ticket(.id(id), deskToken: token)
        case .closureConfirmation:
            let (messageId, confirm) = (try payload.queued("messageId", \.intValue), try payload.queued("confirm", \.boolValue))
            try await visibleAfterRefusal(repeated, token: token, id: id, nil) { () throws(DomainError) in
                try await desk.confirmClosure(ticketId: id, messageId: messageId, confirm: confirm, deskToken: token)
            }
            return try await desk.ticket(.id(id), deskToken: token)
        case .close:
            return try await refusedButDone(repeated, token: token, id: id, { $0.status == .closed }) { () throws(DomainError) in
                try await desk.close(ticketId: id, comment: payload["comment"]?.stringValue ?? "", deskToken: token)
            }
        case .reopen:
            return try await refusedButDone(repeated, token: token, id: id, { $0.status != .closed }) { () throws(DomainError) in
                try await desk.reopen(ticketId: id, deskToken: token)
            }
        case .customFields:
            let fields = try payload.queued("customFields") { fields in
                fields.objectValue.flatMap { Self.all($0) { key, value in value.stringValue.map { (key: key, value: $0) } } }
            }
            return try await desk.setCustomFields(ticketId: id, fields, deskToken: token)
        case .relatedChannels:
            let urls = try payload.queued("channelUrls") { $0.arrayValue.flatMap { Self.all($0, \.stringValue) } }
            return try await desk.setRelatedChannels(ticketId: id, urls, deskToken: token)
        case .priority:
            return try await desk.setPriority(ticketId: id, try payload.queuedPriority(), deskToken: token)
        case .cancel:
            // Desk takes a repeat (after an attempt whose answer was lost) while the ticket is open: it cannot be told
            // from a new request, so a ticket routed to an agent meanwhile is given back once more.
            return try await desk.cancelAssignment(ticketId: id, transferTo: payload["groupKey"]?.stringValue, deskToken: token)
        }
    }

    /// A queued write's payload. The gateway wrote it from a checked body, so one it cannot read (a value missing or of
    /// another type) fails the write: sending Desk a guessed value instead could change the ticket in a way nobody asked.
    static func payload(of operation: OutboxOperation) throws(DomainError) -> JSONValue {
        guard let payload = try? JSONParser.parse(operation.payload), payload.objectValue != nil else {
            throw DomainError(.unreadablePayload, "the queued write's payload is not a JSON object")
        }
        return payload
    }

    /// Every element read, or nil when one cannot be.
    private static func all<Element, T>(_ elements: [Element], _ read: (Element) -> T?) -> [T]? {
        let read = elements.compactMap(read)
        return read.count == elements.count ? read : nil
    }

    /// Runs `write`; a conflict on a repeated attempt is forgiven when Desk's ticket shows the effect (`done`; any
    /// repeated conflict when there is no way to tell).
    private func visibleAfterRefusal(_ repeated: Bool, token: String, id: Int, _ done: ((DeskTicket) -> Bool)?,
                                     _ write: () async throws(DomainError) -> Void) async throws(DomainError) {
        do {
            try await write()
        } catch {
            guard error.code == .conflict, repeated else { throw error }
            if let done { guard done(try await desk.ticket(.id(id), deskToken: token)) else { throw error } }
        }
    }

    /// Like `visibleAfterRefusal`, for writes that answer with the ticket.
    private func refusedButDone(_ repeated: Bool, token: String, id: Int, _ done: (DeskTicket) -> Bool,
                                _ write: () async throws(DomainError) -> DeskTicket) async throws(DomainError) -> DeskTicket {
        do {
            return try await write()
        } catch {
            guard error.code == .conflict, repeated else { throw error }
            let ticket = try await desk.ticket(.id(id), deskToken: token)
            guard done(ticket) else { throw error }
            return ticket
        }
    }

    /// Stores a delivered rating; returns the error when storing it may work later.
    private func recordRating(_ rating: RatingRecord) async -> DomainError? {
        do {
            _ = try await ratings.record(rating)
            return nil
        } catch let error as DomainError where error.code == .storeTimeout || error.code == .storeUnavailable {
            logger.warning("a delivered rating could not be stored yet; its operation is tried again",
                           metadata: ["ticket": "\(rating.ticketId)", "error": "\(error.internalDetail ?? error.message)"])
            return DomainError(error.code, "Desk has the answer; storing it for the reports is tried again", internalDetail: error.internalDetail)
        } catch {
            logger.error("could not record a delivered rating", metadata: ["ticket": "\(rating.ticketId)", "error": "\(error)"])
            return nil
        }
    }

    /// Books the outcome: delivered and failed operations end (a refusal resets the cache to Desk's state),
    /// transient failures come back after a jittered exponential backoff. Returns the delivered ticket as cached.
    @discardableResult
    public func complete(_ operation: OutboxOperation, _ outcome: Outcome) async throws -> CachedTicket? {
        try await book(operation, outcome, queued: true).saved
    }

    /// `complete`, also returning Desk's copy of the ticket read after a refusal. `queued`: the attempt is the relay's,
    /// so the customer was answered 202 before it (an inline attempt's failure is their answer).
    private func book(_ operation: OutboxOperation, _ outcome: Outcome, queued: Bool) async throws -> (saved: CachedTicket?, deskState: DeskTicket?) {
        switch outcome {
        case .delivered(let ticket, let path):
            observe(path == .application ? "delivered_as_application" : "delivered")
            try await outbox.finish(operation, deliveredAs: path, error: nil, refusedInRequest: false)
            return (try? await tickets.save(ticket, customerId: operation.customerId), nil)
        case .failed(let error):
            observe("failed")
            logger.notice("operation refused by Desk", metadata: ["operation": "\(operation.id)", "kind": "\(operation.kind)",
                                                                  "detail": "\(error.internalDetail ?? error.message)"])
            try await outbox.finish(operation, deliveredAs: nil, error: Self.reason(error), refusedInRequest: !queued)
            if queued { observeQueuedFailure(Self.reasonParts(error).code) }
            guard let truth = await ticketAfterRefusal(operation) else {
                tickets.forget(.id(operation.ticketId))
                return (nil, nil)
            }
            _ = try? await tickets.save(truth, customerId: operation.customerId)
            return (nil, truth)
        case .retry(let error):
            observe("retry")
            // A write past its sign-in wait (now tried with the Platform API) stays past it.
            let pastWait = operation.awaitedSignInSeconds.map { $0 >= policy.signInWaitSeconds } ?? false
            try await outbox.reschedule(operation, afterSeconds: Self.backoff(attempts: operation.attempts, ceiling: policy.maxBackoffSeconds),
                                        error: Self.reason(error), awaitingSignIn: pastWait)
            return (nil, nil)
        case .awaitSignIn:
            observe("awaiting_sign_in")
            if operation.awaitedSignInSeconds == nil {
                logger.notice("a queued write waits for its customer to sign in again", metadata: [
                    "operation": "\(operation.id)", "kind": "\(operation.kind)", "wait_s": "\(Int(policy.signInWaitSeconds))"])
            }
            try await outbox.reschedule(operation, afterSeconds: min(15, policy.maxBackoffSeconds),
                                        error: Self.signInWaitReason, awaitingSignIn: true)
            return (nil, nil)
        }
    }

    /// Desk's copy of a refused write's ticket, read with the sessions the attempt used (`withSessions`). Nil when
    /// it cannot be read (the cached copy is then forgotten).
    private func ticketAfterRefusal(_ operation: OutboxOperation) async -> DeskTicket? {
        try? await withSessions(operation) { token throws(DomainError) in try await desk.ticket(.id(operation.ticketId), deskToken: token) }
    }

    /// Seconds before the next attempt: between half and all of 2^attempts, capped at `ceiling`.
    public static func backoff(attempts: Int, ceiling: Double) -> Double {
        let top = min(ceiling, pow(2, Double(min(attempts, 20))))
        return Double.random(in: (top / 2)...max(top / 2, top))
    }

    /// Why an operation failed, as clients read it on `GET /v1/operations/{id}`: a code, a colon, what happened.
    public static func reason(_ error: DomainError) -> String {
        let (code, text) = reasonParts(error)
        return "\(code): \(text)"
    }

    /// The reason of a write waiting for its customer to sign in again.
    static let signInWaitReason = "desk_session_expired: waiting for the customer to sign in again"

    /// Errors after which an attempt is tried again rather than failing the operation: Desk away, rate limiting or
    /// answering what cannot be read; the database away or slow.
    private static func retried(_ error: DomainError) -> Bool {
        error.deskGaveNoUsableAnswer || error.code == .storeUnavailable || error.code == .storeTimeout
    }

    /// The codes a failed operation's `reason` may start with (those a metric starts at zero).
    public static let failureCodes = reasons.filter { !retried(DomainError($0.errors[0], "")) }.map(\.code)

    /// Each error's reason code and text (nil: the error's own message). An error not here gives its own code and
    /// message.
    private static let reasons: [(errors: [DomainError.Code], code: String, text: String?)] = [
        ([.conflict], "ticket_state_conflict", "the ticket's state did not allow this"),
        ([.invalid], "desk_rejected", "Desk refused a value"),
        ([.notFound], "not_found", "Desk has no such ticket or message"),
        ([.unauthorized], "desk_session_expired", "Desk no longer accepts the customer's session"),
        ([.unreadablePayload], DomainError.Code.unreadablePayload.raw, nil),
        ([.storeFailure], DomainError.Code.storeFailure.raw, nil),
        ([.upstreamUnavailable, .rateLimited], "desk_unavailable", "Desk could not be reached"),
        ([.upstreamProtocol], "desk_unreadable", "Desk's answer could not be read"),
        ([.storeTimeout, .storeUnavailable], "database_unavailable", nil),
    ]

    private static func reasonParts(_ error: DomainError) -> (code: String, text: String) {
        guard let entry = reasons.first(where: { $0.errors.contains(error.code) }) else { return (error.code.raw, error.message) }
        return (entry.code, entry.text ?? error.message)
    }

    /// One relay pass over due operations; returns how many it handled. A batch holds at most one operation per
    /// ticket (the head of its queue), so they go to Desk side by side: a backlog drains at Desk's pace, not at one
    /// round trip at a time.
    public func relayOnce(limit: Int = 20) async throws -> Int {
        let batch = try await outbox.claimBatch(by: owner, leaseSeconds: policy.leaseSeconds, limit: limit)
        let lanes = max(1, policy.relayConcurrency)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, operation) in batch.enumerated() {
                if index >= lanes { try await group.next() }
                group.addTask { try await self.complete(operation, await self.deliver(operation, inline: false)) }
            }
            try await group.waitForAll()
        }
        return batch.count
    }
}

private extension JSONValue {
    /// A value the gateway always writes into the payload of the operation's kind (`OperationDelivery.payload(of:)`).
    func queued<T>(_ key: String, _ read: (JSONValue) -> T?) throws(DomainError) -> T {
        guard let value = self[key].flatMap(read) else {
            throw DomainError(.unreadablePayload, "the queued write's `\(key)` could not be read")
        }
        return value
    }

    /// A priority write's value.
    func queuedPriority() throws(DomainError) -> TicketPriority {
        try queued("priority") { $0.stringValue.flatMap(TicketPriority.init(rawValue:)) }
    }
}
