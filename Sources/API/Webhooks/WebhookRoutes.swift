import Crypto
import Synchronization
public import Domain
import HTTPServer
import JSON
public import Logging
import Services
public import Telemetry

/// `POST /v1/webhooks/desk`: Desk's signed events, checked and stored in the durable inbox before the 200 (Desk waits
/// one second and retries), then applied in the background — ticket changes to the cache, CSAT requests and ratings
/// to the report data. The same event delivered several times is applied once.
public struct WebhookRoutes: Sendable {
    /// Keys a signature may be made with, by name: the webhook secret, the one before it while a rotation goes on, and
    /// the API token (Sendbird's page names the token).
    let keys: [(name: String, secret: String)]
    let inbox: any WebhookEventInbox
    let metrics: MetricsRegistry
    let processor: WebhookProcessor

    public init(keys: [(name: String, secret: String)], appId: String, inbox: any WebhookEventInbox, customer: CustomerRoutes,
                metrics: MetricsRegistry, logger: Logger) {
        self.keys = keys.filter { !$0.secret.isEmpty }
        self.inbox = inbox
        self.metrics = metrics
        let backlog = InboxBacklog()
        processor = WebhookProcessor(inbox: inbox, appId: appId, observers: .init(
            teams: { await customer.teams() },
            touched: { ids in for id in ids { customer.forget(ticketId: id) } },
            counted: { outcome, count in metrics.increment("webhook_events_total", [("outcome", outcome)], by: Double(count)) },
            backlog: { pending, oldest in backlog.set(Double(pending), oldest) }), logger: logger)
        metrics.gauge("webhook_inbox_pending", help: "Stored Desk webhook events not applied yet (refreshed every 5 s).") {
            [([], backlog.value.pending)]
        }
        metrics.gauge("webhook_inbox_oldest_pending_seconds", help: "Age of the oldest stored webhook event not applied yet.") {
            [([], backlog.value.oldest)]
        }
        metrics.describe("webhook_signatures_total", .counter,
                         help: "Desk webhooks taken, by the key their signature was made with (secret, previous, api_token).")
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
        guard !keys.isEmpty else {
            throw APIError(.webhooksNotConfigured, detail: "Set DESK_WEBHOOK_SECRET (or DESK_API_TOKEN) to accept Desk webhooks.")
        }
        let signature = request.header("x-hub-signature")
        guard let signer = keys.first(where: { Self.verify(signature, body: request.body, secret: $0.secret) }) else {
            metrics.increment("webhook_events_total", [("outcome", "rejected")])
            throw APIError(.invalidSignature, detail: "x-hub-signature must be sha1=<hex HMAC-SHA1 of the raw body with the webhook secret or API token>.")
        }
        // Tells when a rotation is over: nothing signed with the previous secret any more.
        metrics.increment("webhook_signatures_total", [("key", signer.name)])
        let parsed = try? JSONParser.parse(request.body, repairingStrings: true)
        let stored = parsed ?? .string(JSONParser.repairedText(request.body))
        let event = parsed.flatMap(DeskWebhookEvent.parse)
        let camel = parsed.map(DeskWebhookEvent.camelCased)
        let type = event?.type ?? camel?["eventType"]?.stringValue ?? ""
        let key = (event?.eventId ?? camel?["eventId"]?.stringValue).map { "id:" + $0 }
            ?? "sha256:" + Codec.hex(SHA256.hash(data: request.body))
        let fresh = try await inbox.receive(dedupeKey: key, type: String(type.prefix(100)), body: stored.serialized())
        metrics.increment("webhook_events_total", [("outcome", fresh ? "accepted" : "duplicate")])
        return .json(.object([("status", .string(fresh ? "accepted" : "duplicate"))]))
    }

    /// Applies stored events until cancelled (`WebhookProcessor.run`).
    public func runProcessor(workers: Int = 1, interval: Duration = .milliseconds(200)) async {
        await processor.run(workers: workers, interval: interval)
    }
}

/// Thread safety: a lock around the last measured backlog.
final class InboxBacklog: Sendable {
    private let state = Synchronization.Mutex<(pending: Double, oldest: Double)>((0, 0))
    var value: (pending: Double, oldest: Double) { state.withLock { $0 } }
    func set(_ pending: Double, _ oldest: Double) { state.withLock { $0 = (pending, oldest) } }
}
