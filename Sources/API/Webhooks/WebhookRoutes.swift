import Crypto
import Postgres
import Synchronization
import DeskClient
import Domain
import Foundation
import HTTPServer
import JSON
public import Logging
public import Store
public import Telemetry

/// `POST /v1/webhooks/desk`: Desk's signed events, checked and stored in the durable inbox before the 200 (Desk waits
/// one second and retries), then applied in the background — ticket changes to the cache, CSAT requests and ratings
/// to the report data. The same event delivered several times is applied once.
public struct WebhookRoutes: Sendable {
    let secret: String?
    let inbox: WebhookInbox
    let customer: CustomerRoutes
    let metrics: MetricsRegistry
    let logger: Logger

    public init(secret: String?, inbox: WebhookInbox, customer: CustomerRoutes, metrics: MetricsRegistry, logger: Logger) {
        self.secret = secret
        self.inbox = inbox
        self.customer = customer
        self.metrics = metrics
        self.logger = logger
        metrics.describe("webhook_events_total", .counter, help: "Desk webhook events by outcome (accepted, duplicate, rejected, applied, failed).")
    }

    public func register(in routes: inout RouteTable) {
        routes.add("POST", "/v1/webhooks/desk", .async { request, _ in try await receive(request) })
    }

    /// `sha1=` + hex HMAC-SHA1 of the raw body with the shared secret, compared in constant time.
    static func verify(_ signature: String?, body: [UInt8], secret: String) -> Bool {
        guard let signature, signature.hasPrefix("sha1="), signature.utf8.count == 45 else { return false }
        let hex = Array(signature.utf8.dropFirst(5))
        var given: [UInt8] = []
        given.reserveCapacity(20)
        var index = 0
        while index < 40 {
            guard let high = nibble(hex[index]), let low = nibble(hex[index + 1]) else { return false }
            given.append(high << 4 | low)
            index += 2
        }
        return HMAC<Insecure.SHA1>.isValidAuthenticationCode(given, authenticating: body, using: SymmetricKey(data: Array(secret.utf8)))
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 48...57: return c - 48
        case 97...102: return c - 87
        case 65...70: return c - 55
        default: return nil
        }
    }

    func receive(_ request: HTTPRequest) async throws -> HTTPResponse {
        guard let secret else {
            throw APIError(status: 503, code: "webhooks_not_configured", title: "Webhooks not configured",
                           detail: "Set DESK_WEBHOOK_SECRET to accept Desk webhooks.")
        }
        guard Self.verify(request.header("x-hub-signature"), body: request.body, secret: secret) else {
            metrics.increment("webhook_events_total", [("outcome", "rejected")])
            throw APIError(status: 401, code: "invalid_signature", title: "Invalid signature",
                           detail: "x-hub-signature must be sha1=<hex HMAC-SHA1 of the raw body with the webhook secret>.")
        }
        let event: JSONValue
        do { event = try JSONParser.parse(request.body) } catch {
            throw APIError(status: 400, code: "malformed_json", title: "Malformed JSON", detail: "The event is not valid JSON.")
        }
        guard let type = event["eventType"]?.stringValue, !type.isEmpty, type.count <= 100 else {
            throw APIError(status: 422, code: "validation_failed", title: "Invalid event", detail: "The event has no eventType.")
        }
        let key = event["eventId"]?.stringValue.map { "id:" + $0 }
            ?? "sha256:" + SHA256.hash(data: request.body).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        let fresh = try await inbox.receive(dedupeKey: key, type: type, body: event.serialized())
        metrics.increment("webhook_events_total", [("outcome", fresh ? "accepted" : "duplicate")])
        return .json(.object([("status", .string(fresh ? "accepted" : "duplicate"))]))
    }

    /// Applies stored events until cancelled.
    public func runProcessor(interval: Duration = .milliseconds(200)) async {
        while !Task.isCancelled {
            if await processOnce() == 0 { try? await Task.sleep(for: interval) }
        }
    }

    /// One pass over the inbox; returns how many events it handled.
    public func processOnce() async -> Int {
        let teams = await customer.teams()
        let touched = TouchedTickets()
        do {
            let (applied, failed) = try await inbox.process(limit: 50) { event, tx in
                if let id = try Self.apply(event, teams: teams, logger: logger, on: tx) { touched.add(id) }
            }
            for id in touched.all { customer.forget(ticketId: id) }
            if applied > 0 { metrics.increment("webhook_events_total", [("outcome", "applied")], by: Double(applied)) }
            if failed > 0 {
                metrics.increment("webhook_events_total", [("outcome", "failed")], by: Double(failed))
                logger.warning("webhook events failed to apply; they will be retried", metadata: ["count": "\(failed)"])
            }
            return applied + failed
        } catch {
            logger.warning("webhook inbox pass failed", metadata: ["error": "\(error)"])
            return 0
        }
    }

    /// Ticket events refresh the cache; CSAT events record requests and ratings (once, whatever path saw them first).
    static func apply(_ event: InboxEvent, teams: [Int: (key: String?, name: String)], logger: Logger, on tx: PostgresConnection) throws -> Int? {
        let json = try JSONParser.parse(event.body)
        guard let data = json["data"], data["id"]?.intValue != nil else { return nil }
        let ticket = try DeskTicket(json: data)
        guard let sendbirdId = ticket.customerSendbirdId else { return nil }
        let customerId = try TicketStore.customerId(sendbirdId: sendbirdId, on: tx)
        if let moved = try TicketStore.upsert(TicketDocument.row(ticket, customerId: customerId, teams: teams), on: tx) {
            logger.warning("Desk reports a cached ticket with another customer or channel; the cache now follows Desk",
                           metadata: moved.metadata.mapValues { .string($0) })
        }
        if let raw = json["message"], let message = try? DeskMessage(json: raw), message.isCSATRequest {
            let channel = ticket.channelType ?? "UNKNOWN"
            _ = try CSATStore.recordRequest(ticketId: ticket.id, messageId: message.messageId, agentId: ticket.agent?.id,
                                            teamId: ticket.groupId, channelType: channel, priority: ticket.priority.rawValue,
                                            requestedAt: message.createdAt ?? ticket.updatedAt ?? 0, on: tx)
            if message.state == .confirmed, let score = message.score {
                _ = try CSATStore.record(RatingRecord(
                    ticketId: ticket.id, messageId: message.messageId, score: score, comment: message.comment, agentId: ticket.agent?.id,
                    teamId: ticket.groupId, channelType: channel, priority: ticket.priority.rawValue, customerSendbirdId: sendbirdId,
                    ratedAt: message.updatedAt ?? ticket.updatedAt ?? 0, source: "webhook"), on: tx)
            }
        }
        return ticket.id
    }
}

/// Thread safety: a lock-protected list filled inside one inbox transaction.
final class TouchedTickets: Sendable {
    private let ids = Synchronization.Mutex<[Int]>([])
    func add(_ id: Int) { ids.withLock { $0.append(id) } }
    var all: [Int] { ids.withLock { $0 } }
}
