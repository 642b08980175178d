import DeskClient
import Domain
import Foundation
import HTTPServer
import JSON
import Logging
import Store
import Telemetry

public struct OutboxSettings: Sendable {
    /// Ceiling of the exponential backoff between delivery attempts.
    public var maxBackoffSeconds: Double = 300
    /// How long a claimed operation is left alone by other instances.
    public var leaseSeconds = 60
    public var relayIntervalMilliseconds = 500
    /// /readyz warns when the oldest pending operation is older than this.
    public var warnAgeSeconds: Double = 300

    public init() {}
}

/// Customer writes that must reach Desk: queued in the outbox (same transaction as the cache's pending marker),
/// tried at once when Desk answers, otherwise delivered later by the relay, in order per ticket.
final class Operations: Sendable {
    enum Outcome {
        case delivered(DeskTicket)
        case retry(DomainError)
        case failed(DomainError)
    }

    let desk: DeskClient
    let outbox: OutboxStore
    let sessions: SessionStore
    let tickets: TicketService
    let ratings: CSATStore
    let metrics: MetricsRegistry
    let logger: Logger
    let settings: OutboxSettings
    let owner = UUID().uuidString

    init(desk: DeskClient, outbox: OutboxStore, sessions: SessionStore, tickets: TicketService, ratings: CSATStore,
         metrics: MetricsRegistry, logger: Logger, settings: OutboxSettings) {
        self.desk = desk
        self.outbox = outbox
        self.sessions = sessions
        self.tickets = tickets
        self.ratings = ratings
        self.metrics = metrics
        self.logger = logger
        self.settings = settings
        metrics.describe("outbox_deliveries_total", .counter, help: "Outbox delivery attempts by outcome (delivered, retry, failed).")
        metrics.describe("outbox_pending", .gauge, help: "Operations waiting for Desk.")
        metrics.describe("outbox_oldest_pending_seconds", .gauge, help: "Age of the oldest operation waiting for Desk.")
    }

    /// Queues `kind` for the ticket and tries it once right away unless an earlier one of the ticket is waiting.
    /// 200 with the fresh ticket when Desk accepts; 202 with the operation when it cannot be reached; the mapped
    /// error when Desk refuses (the operation is then failed).
    func submit(session: SessionRecord, ticketId: Int, kind: OperationKind, payload: JSONValue) async throws -> HTTPResponse {
        let (operation, earlier) = try await outbox.enqueue(ticketId: ticketId, customerId: session.customerId, sessionId: session.sessionId,
                                                            kind: kind, payload: payload.serialized(), owner: owner,
                                                            leaseSeconds: settings.leaseSeconds)
        tickets.memory.remove(ticketId)
        if earlier || desk.breaker.state == .open {
            try await outbox.release(id: operation.id, owner: owner)
        } else {
            let outcome = await deliver(operation, inline: true)
            try await complete(operation, outcome)
            switch outcome {
            case .delivered(let ticket):
                return CustomerRoutes.respond(TicketService.served(try await tickets.save(ticket, customerId: session.customerId)))
            case .failed(let error):
                throw failure(error, kind: kind)
            case .retry:
                break
            }
        }
        let current = try await outbox.find(id: operation.id) ?? operation
        return .json(Self.json(current), status: 202, headers: [("Location", "/v1/operations/\(operation.id)"), ("Retry-After", "5")])
    }

    /// The client-facing error of a permanent refusal (a conflict names the ticket's state now).
    private func failure(_ error: DomainError, kind: OperationKind) -> any Error {
        guard error.code == .conflict else { return error }
        return APIError(.ticketStateConflict, detail: kind.stateConflict)
    }

    static func json(_ operation: OutboxOperation) -> JSONValue {
        .object([
            ("id", .integer(operation.id)), ("kind", .string(operation.kind.publicName)),
            ("ticketId", .integer(operation.ticketId)), ("status", .string(operation.status.rawValue)), ("attempts", .integer(operation.attempts)),
            ("reason", operation.lastError.map(JSONValue.string) ?? .null),
            ("createdAt", .string(ISOTimestamp.format(operation.createdAt))),
            ("finishedAt", operation.finishedAt.map { .string(ISOTimestamp.format($0)) } ?? .null),
        ])
    }

    /// One delivery attempt. A conflict on a repeated attempt whose effect is already visible counts as delivered
    /// (an earlier attempt reached Desk but its answer was lost).
    func deliver(_ operation: OutboxOperation, inline: Bool) async -> Outcome {
        guard let token = try? await sessions.deskToken(sessionId: operation.sessionId) else {
            return .failed(DomainError(.unauthorized, "The session behind this operation is gone."))
        }
        let session = DeskSession(token: token)
        let payload = (try? JSONParser.parse(operation.payload)) ?? .object([])
        let id = operation.ticketId
        do throws(DomainError) {
            switch operation.kind {
            case .feedback:
                let messageId = payload["messageId"]?.intValue ?? 0
                if let score = payload["score"]?.intValue {
                    do throws(DomainError) {
                        try await desk.submitFeedback(session, ticketId: id, messageId: messageId, score: score,
                                                      comment: payload["comment"]?.stringValue)
                    } catch {
                        guard error.code == .conflict, operation.attempts > 0 else { throw error }
                        let ticket = try await desk.ticket(session, id: id)
                        guard ticket.satisfactionScore == score else { throw error }
                    }
                }
                let ticket = try await desk.ticket(session, id: id)
                await recordRating(operation, payload: payload, ticket: ticket, inline: inline)
                return .delivered(ticket)
            case .closureConfirmation:
                do throws(DomainError) {
                    try await desk.confirmClosure(session, ticketId: id, messageId: payload["messageId"]?.intValue ?? 0,
                                                  confirm: payload["confirm"]?.boolValue ?? false)
                } catch {
                    guard error.code == .conflict, operation.attempts > 0 else { throw error }
                }
                return .delivered(try await desk.ticket(session, id: id))
            case .close:
                do throws(DomainError) {
                    return .delivered(try await desk.close(session, ticketId: id, comment: payload["comment"]?.stringValue ?? ""))
                } catch {
                    guard error.code == .conflict, operation.attempts > 0 else { throw error }
                    let ticket = try await desk.ticket(session, id: id)
                    guard ticket.status == .closed else { throw error }
                    return .delivered(ticket)
                }
            case .reopen:
                do throws(DomainError) {
                    return .delivered(try await desk.reopen(session, ticketId: id))
                } catch {
                    guard error.code == .conflict, operation.attempts > 0 else { throw error }
                    let ticket = try await desk.ticket(session, id: id)
                    guard ticket.status != .closed else { throw error }
                    return .delivered(ticket)
                }
            case .customFields:
                let fields = (payload["customFields"]?.objectValue ?? []).map { (key: $0.0, value: $0.1.stringValue ?? "") }
                return .delivered(try await desk.setTicketCustomFields(session, ticketId: id, fields))
            case .relatedChannels:
                let urls = payload["channelUrls"]?.arrayValue?.compactMap(\.stringValue) ?? []
                return .delivered(try await desk.setRelatedChannels(session, ticketId: id, urls))
            }
        } catch {
            switch error.code {
            case .upstreamUnavailable, .rateLimited: return .retry(error)
            default: return .failed(error)
            }
        }
    }

    /// The rating with the agent and team of the moment it was given: the fresh ticket when delivered at once,
    /// otherwise the cached state captured when the customer submitted it.
    private func recordRating(_ operation: OutboxOperation, payload: JSONValue, ticket: DeskTicket, inline: Bool) async {
        let agentId = inline ? ticket.agent?.id : payload["agentId"]?.intValue
        let teamId = inline ? ticket.groupId : payload["teamId"]?.intValue
        let rating = RatingRecord(
            // What Desk holds after accepting the answer, when it says (the payload otherwise).
            ticketId: operation.ticketId, messageId: payload["messageId"]?.intValue ?? 0,
            score: ticket.satisfactionScore ?? payload["score"]?.intValue,
            comment: ticket.satisfactionScore != nil ? ticket.satisfactionComment : payload["comment"]?.stringValue, agentId: agentId, teamId: teamId,
            channelType: payload["channelType"]?.stringValue ?? ticket.channelType ?? "UNKNOWN",
            priority: payload["priority"]?.stringValue.flatMap(TicketPriority.init) ?? ticket.priority,
            customerSendbirdId: payload["customerSendbirdId"]?.stringValue,
            ratedAt: payload["ratedAt"].flatMap { if case .number(let d) = $0 { return d } else { return $0.intValue.map(Double.init) } } ?? Date().timeIntervalSince1970,
            source: .gateway)
        do { try await ratings.record(rating) } catch {
            logger.error("could not record a delivered rating", metadata: ["ticket": "\(operation.ticketId)", "error": "\(error)"])
        }
    }

    /// Books the outcome: delivered and failed operations end (a refusal resets the cache to Desk's state),
    /// transient failures come back after a jittered exponential backoff.
    func complete(_ operation: OutboxOperation, _ outcome: Outcome) async throws {
        switch outcome {
        case .delivered(let ticket):
            metrics.increment("outbox_deliveries_total", [("outcome", "delivered")])
            try await outbox.finish(operation, delivered: true, error: nil, owner: owner)
            _ = try? await tickets.save(ticket, customerId: operation.customerId)
        case .failed(let error):
            metrics.increment("outbox_deliveries_total", [("outcome", "failed")])
            logger.notice("operation refused by Desk", metadata: ["operation": "\(operation.id)", "kind": "\(operation.kind)",
                                                                  "detail": "\(error.internalDetail ?? error.message)"])
            try await outbox.finish(operation, delivered: false, error: Self.reason(error), owner: owner)
            if let token = try? await sessions.deskToken(sessionId: operation.sessionId),
               let truth = try? await desk.ticket(DeskSession(token: token), id: operation.ticketId) {
                _ = try? await tickets.save(truth, customerId: operation.customerId)
            } else {
                tickets.memory.remove(operation.ticketId)
            }
        case .retry(let error):
            metrics.increment("outbox_deliveries_total", [("outcome", "retry")])
            let ceiling = min(settings.maxBackoffSeconds, pow(2, Double(min(operation.attempts, 20))))
            let delay = Double.random(in: (ceiling / 2)...max(ceiling / 2, ceiling))
            try await outbox.reschedule(operation, afterSeconds: delay, error: Self.reason(error))
        }
    }

    static func reason(_ error: DomainError) -> String {
        switch error.code {
        case .conflict: return "ticket_state_conflict: the ticket's state did not allow this"
        case .invalid: return "desk_rejected: Desk refused a value"
        case .notFound: return "not_found: Desk has no such ticket or message"
        case .unauthorized: return "desk_session_expired: Desk no longer accepts the customer's session"
        case .upstreamUnavailable, .rateLimited: return "desk_unavailable: Desk could not be reached"
        default: return "\(error.code): \(error.message)"
        }
    }

    /// One relay pass; returns how many operations it handled.
    func relayOnce() async -> Int {
        do {
            let batch = try await outbox.claimBatch(by: owner, leaseSeconds: settings.leaseSeconds, limit: 20)
            for operation in batch {
                try await complete(operation, await deliver(operation, inline: false))
            }
            let depth = try await outbox.depth()
            metrics.set("outbox_pending", to: Double(depth.pending))
            metrics.set("outbox_oldest_pending_seconds", to: depth.oldestSeconds)
            return batch.count
        } catch {
            logger.warning("outbox relay pass failed", metadata: ["error": "\(error)"])
            return 0
        }
    }

    func runRelay() async {
        while !Task.isCancelled {
            if await relayOnce() == 0 {
                try? await Task.sleep(for: .milliseconds(settings.relayIntervalMilliseconds))
            }
        }
    }
}
