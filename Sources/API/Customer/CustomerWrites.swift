import Domain
import HTTPServer
import JSON
import Logging
public import Services
import Telemetry

public struct OutboxSettings: Sendable {
    /// Backoff, lease and concurrency of deliveries.
    public var policy: OutboxPolicy
    /// /readyz warns when the oldest pending operation is older than this.
    public var warnAgeSeconds: Double
    /// Pause of the relay when a pass found nothing due.
    public var relayIntervalMilliseconds = 500

    public init(policy: OutboxPolicy, warnAgeSeconds: Double) {
        self.policy = policy
        self.warnAgeSeconds = warnAgeSeconds
    }
}

/// Customer writes over HTTP: the delivery rules live in `Services.OperationDelivery`; this turns their outcome into
/// answers (200 with the fresh ticket, 202 with the queued operation) and keeps the relay running with its metrics.
final class CustomerWrites: Sendable {
    let delivery: OperationDelivery
    let outbox: any OutboxQueue
    let metrics: MetricsRegistry
    let logger: Logger
    let settings: OutboxSettings

    init(desk: any DeskTicketWriter, outbox: any OutboxQueue, sessions: any SessionDirectory, tickets: CustomerTickets, ratings: any RatingStore,
         metrics: MetricsRegistry, logger: Logger, settings: OutboxSettings, platform: (any DeskPlatformWriter)? = nil) {
        delivery = OperationDelivery(desk: desk, outbox: outbox, sessions: sessions, tickets: tickets, ratings: ratings, policy: settings.policy,
                                     logger: logger, observe: { metrics.increment("outbox_deliveries_total", [("outcome", $0)]) },
                                     observeQueuedFailure: { metrics.increment("outbox_queued_writes_failed_total", [("reason", $0)]) },
                                     platform: platform)
        self.outbox = outbox
        self.metrics = metrics
        self.logger = logger
        self.settings = settings
        metrics.describe("outbox_deliveries_total", .counter, help: "Outbox delivery attempts by outcome (delivered, delivered_as_application, retry, awaiting_sign_in, failed).")
        metrics.describe("outbox_queued_writes_failed_total", .counter,
                         help: "Writes answered 202 (queued) that ended failed, by the reason's code: changes customers were told would reach Desk.")
        for reason in OperationDelivery.failureCodes { metrics.increment("outbox_queued_writes_failed_total", [("reason", reason)], by: 0) }
        metrics.describe("outbox_pending", .gauge, help: "Operations waiting for Desk.")
        metrics.describe("outbox_oldest_pending_seconds", .gauge, help: "Age of the oldest operation waiting for Desk.")
    }

    /// 200 with the fresh ticket when Desk accepts at once; 202 with the operation when it is queued; Desk's
    /// refusal as a problem otherwise (the operation is then failed).
    func submit(session: SessionRecord, ticketId: Int, kind: OperationKind, payload: JSONValue) async throws -> HTTPResponse {
        switch try await delivery.submit(customerId: session.customerId, sessionId: session.sessionId, ticketId: ticketId, kind: kind,
                                         payload: payload) {
        case .delivered(let ticket):
            return CustomerRoutes.respond(CustomerTickets.served(ticket))
        case .queued(let operation):
            return .json(Self.json(operation), status: 202, headers: [("Location", "/v1/operations/\(operation.id)"), ("Retry-After", "5")])
        }
    }

    static func json(_ operation: OutboxOperation) -> JSONValue {
        .object([
            ("id", .integer(operation.id)), ("kind", .string(operation.kind.publicName)),
            ("ticketId", .integer(operation.ticketId)), ("status", .string(operation.status.rawValue)), ("attempts", .integer(operation.attempts)),
            ("reason", operation.lastError.map(JSONValue.string) ?? .null),
            ("createdAt", .string(ISOTimestamp.format(operation.createdAt))),
            ("finishedAt", operation.finishedAt.map { .string(ISOTimestamp.format($0)) } ?? .null),
            ("deliveredAs", operation.deliveredAs.map { .string($0.rawValue) } ?? .null),
        ])
    }

    /// One relay pass; returns how many operations it handled.
    func relayOnce() async -> Int {
        do {
            return try await delivery.relayOnce()
        } catch {
            logger.warning("outbox relay pass failed", metadata: ["error": "\(DomainError.logged(error))"])
            return 0
        }
    }

    /// The queue's depth for the gauges (unread, they keep their values: the relay's pass logs the database's trouble).
    func measureDepth() async {
        guard let depth = try? await outbox.depth() else { return }
        metrics.set("outbox_pending", to: Double(depth.pending))
        metrics.set("outbox_oldest_pending_seconds", to: depth.oldestSeconds)
    }

    func runRelay() async {
        // Counting the queue reads every pending row (26–62 ms at 100,000): while a backlog drains, pass after pass,
        // the gauges are read at most once a second; after a pass that found nothing, every time.
        var measured = ContinuousClock.now - .seconds(10)
        while !Task.isCancelled {
            let handled = await relayOnce()
            if handled == 0 || ContinuousClock.now - measured >= .seconds(1) {
                measured = .now
                await measureDepth()
            }
            if handled == 0 {
                try? await Task.sleep(for: .milliseconds(settings.relayIntervalMilliseconds))
            }
        }
    }
}
