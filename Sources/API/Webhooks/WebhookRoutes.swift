import Crypto
import Synchronization
import DeskClient
import Domain
import Foundation
import HTTPServer
import JSON
public import Logging
import Services
public import Store
public import Telemetry

/// `POST /v1/webhooks/desk`: Desk's signed events, checked and stored in the durable inbox before the 200 (Desk waits
/// one second and retries), then applied in the background — ticket changes to the cache, CSAT requests and ratings
/// to the report data. The same event delivered several times is applied once.
public struct WebhookRoutes: Sendable {
    /// Keys a signature may be made with: the webhook secret and the API token (Sendbird's page names the token).
    let secrets: [String]
    /// The configured Sendbird application: events naming another are stored as `foreign` and never applied.
    let appId: String
    let inbox: WebhookInbox
    let customer: CustomerRoutes
    let metrics: MetricsRegistry
    let logger: Logger
    private let backlog = InboxBacklog()

    public init(secrets: [String], appId: String, inbox: WebhookInbox, customer: CustomerRoutes, metrics: MetricsRegistry, logger: Logger) {
        self.secrets = secrets.filter { !$0.isEmpty }
        self.appId = appId
        self.inbox = inbox
        self.customer = customer
        self.metrics = metrics
        self.logger = logger
        let backlog = backlog
        metrics.gauge("webhook_inbox_pending", help: "Stored Desk webhook events not applied yet (refreshed every 5 s).") {
            [([], backlog.value.pending)]
        }
        metrics.gauge("webhook_inbox_oldest_pending_seconds", help: "Age of the oldest stored webhook event not applied yet.") {
            [([], backlog.value.oldest)]
        }
        metrics.describe("webhook_events_total", .counter, help: "Desk webhook events by outcome (accepted, duplicate, rejected, applied, unrecognized, foreign, failed).")
    }

    public func register(in routes: inout RouteTable) {
        routes.add("POST", "/v1/webhooks/desk", .async { request, _ in try await receive(request) })
    }

    /// `sha1=` + hex HMAC-SHA1 of the raw body with the shared secret, compared in constant time.
    public static func verify(_ signature: String?, body: [UInt8], secret: String) -> Bool {
        guard let signature, signature.hasPrefix("sha1="), signature.utf8.count == 45,
              let given = Codec.decodeHex(signature.dropFirst(5)) else { return false }
        return HMAC<Insecure.SHA1>.isValidAuthenticationCode(given, authenticating: body, using: SymmetricKey(data: Array(secret.utf8)))
    }

    /// Every event with a valid signature is stored before the 200, whatever its shape (a body that is not even JSON
    /// is kept as a JSON string), so nothing Desk delivers is lost to a parser that does not know it yet.
    func receive(_ request: HTTPRequest) async throws -> HTTPResponse {
        guard !secrets.isEmpty else {
            throw APIError(.webhooksNotConfigured, detail: "Set DESK_WEBHOOK_SECRET (or DESK_API_TOKEN) to accept Desk webhooks.")
        }
        let signature = request.header("x-hub-signature")
        guard secrets.contains(where: { Self.verify(signature, body: request.body, secret: $0) }) else {
            metrics.increment("webhook_events_total", [("outcome", "rejected")])
            throw APIError(.invalidSignature, detail: "x-hub-signature must be sha1=<hex HMAC-SHA1 of the raw body with the webhook secret or API token>.")
        }
        let parsed = try? JSONParser.parse(request.body)
        let stored = parsed ?? .string(String(decoding: request.body, as: UTF8.self))
        let event = parsed.flatMap(DeskWebhookEvent.parse)
        let camel = parsed.map(DeskWebhookEvent.camelCased)
        let type = event?.type ?? camel?["eventType"]?.stringValue ?? ""
        let key = (event?.eventId ?? camel?["eventId"]?.stringValue).map { "id:" + $0 }
            ?? "sha256:" + Codec.hex(SHA256.hash(data: request.body))
        let fresh = try await inbox.receive(dedupeKey: key, type: String(type.prefix(100)), body: stored.serialized())
        metrics.increment("webhook_events_total", [("outcome", fresh ? "accepted" : "duplicate")])
        return .json(.object([("status", .string(fresh ? "accepted" : "duplicate"))]))
    }

    /// Applies stored events until cancelled, with `workers` passes at once, each on its own lane of tickets (one
    /// ticket's events stay in order on its lane); every 5 s the first also measures the backlog for the metrics.
    public func runProcessor(workers: Int = 1, interval: Duration = .milliseconds(200)) async {
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<max(1, workers) {
                group.addTask {
                    var measured = ContinuousClock.now - .seconds(10)
                    while !Task.isCancelled {
                        if worker == 0, ContinuousClock.now - measured >= .seconds(5) {
                            measured = .now
                            if let (pending, oldest) = try? await inbox.backlog() { backlog.set(Double(pending), oldest) }
                        }
                        if await processOnce(lane: worker, lanes: max(1, workers)) == 0 { try? await Task.sleep(for: interval) }
                    }
                }
            }
        }
    }

    /// One pass over the inbox (or one lane of it); returns how many events it handled.
    public func processOnce(lane: Int = 0, lanes: Int = 1) async -> Int {
        let teams = await customer.teams()
        let touched = TouchedTickets()
        do {
            let pass = try await inbox.process(limit: 50, lane: lane, lanes: lanes) { event, tx in
                guard let id = try Self.apply(event, appId: appId, teams: teams, logger: logger, on: tx) else { return .unrecognized }
                if id < 0 { return .foreign }
                if id > 0 { touched.add(id) }
                return .applied
            }
            for id in touched.all { customer.forget(ticketId: id) }
            for (outcome, count) in [("applied", pass.applied), ("unrecognized", pass.unrecognized), ("foreign", pass.foreign),
                                     ("failed", pass.failed)] where count > 0 {
                metrics.increment("webhook_events_total", [("outcome", outcome)], by: Double(count))
            }
            if pass.failed > 0 {
                logger.warning("webhook events failed to apply; they will be retried", metadata: ["count": "\(pass.failed)"])
            }
            return pass.total
        } catch {
            logger.warning("webhook inbox pass failed", metadata: ["error": "\(error)"])
            return 0
        }
    }

    /// Applies one stored event: the ticket to the cache, a CSAT request and answer from its message, or else the
    /// ticket's own CSAT fields as a ticket-level rating. Returns the ticket id (0 when the ticket names no customer,
    /// -1 when it belongs to another Sendbird application: stored as `foreign`), or nil when the event holds no ticket
    /// the gateway can read: it stays stored as `unrecognized`.
    static func apply(_ event: InboxEvent, appId: String, teams: [Int: (key: String?, name: String)], logger: Logger,
                      on tx: StoreTransaction) throws -> Int? {
        switch try WebhookApplier.apply(try JSONParser.parse(event.body), appId: appId, to: InboxTicketWriter(tx: tx, teams: teams)) {
        case .foreign(let ticketId, let otherApp):
            logger.warning("a signed Desk webhook names another Sendbird application; stored as foreign, not applied",
                           metadata: ["event": "\(event.id)", "ticket": "\(ticketId)", "app": "\(otherApp.prefix(64))"])
            return -1
        case .unrecognized(let keys):
            logger.warning("a Desk webhook event could not be interpreted; it is kept as unrecognized (desk-gateway webhooks replay)",
                           metadata: ["event": "\(event.id)", "type": "\(event.type)", "keys": "\(keys.prefix(20).joined(separator: ","))"])
            return nil
        case .noCustomer:
            return 0
        case .applied(let id, let moved):
            if let moved {
                logger.warning("Desk reports a cached ticket with another customer or channel; the cache now follows Desk",
                               metadata: moved.metadata.mapValues { .string($0) })
            }
            return id
        }
    }
}

/// The inbox transaction as the webhook applier writes to it, with tickets rendered as the customer API serves them.
struct InboxTicketWriter: InboxWriter {
    let tx: StoreTransaction
    let teams: [Int: (key: String?, name: String)]

    func cacheTicket(_ ticket: DeskTicket, customerSendbirdId: String) throws -> OwnershipChange? {
        try tx.upsert(TicketDocument.row(ticket, customerId: try tx.customerId(sendbirdId: customerSendbirdId), teams: teams))
    }

    func apply(_ write: RatingWrite) throws -> Bool {
        try tx.apply(write)
    }
}

/// Thread safety: a lock-protected list filled inside one inbox transaction.
final class TouchedTickets: Sendable {
    private let ids = Synchronization.Mutex<[Int]>([])
    func add(_ id: Int) { ids.withLock { $0.append(id) } }
    var all: [Int] { ids.withLock { $0 } }
}

/// Thread safety: a lock around the last measured backlog.
final class InboxBacklog: Sendable {
    private let state = Synchronization.Mutex<(pending: Double, oldest: Double)>((0, 0))
    var value: (pending: Double, oldest: Double) { state.withLock { $0 } }
    func set(_ pending: Double, _ oldest: Double) { state.withLock { $0 = (pending, oldest) } }
}
