public import Domain
import JSON
public import Logging
import Synchronization

/// Applies the stored Desk webhook events in the background: each event is dispatched on what `WebhookApplier` finds
/// in it (a ticket with its CSAT request or answer, a ticket without a customer, another application's ticket,
/// nothing it can read), and the inbox records the outcome. The HTTP side only stores events (`WebhookRoutes`).
public struct WebhookProcessor: Sendable {
    /// What the processor tells its surroundings (metrics, memory caches).
    public struct Observers: Sendable {
        /// Team keys and names for rendering tickets, read once per pass.
        public var teams: @Sendable () async -> [Int: (key: String?, name: String)]
        /// Tickets a pass changed.
        public var touched: @Sendable ([Int]) -> Void
        /// Events of one pass by outcome (`applied`, `unrecognized`, `foreign`, `failed`).
        public var counted: @Sendable (_ outcome: String, _ count: Int) -> Void
        /// The inbox's backlog, measured every 5 s.
        public var backlog: @Sendable (_ pending: Int, _ oldestSeconds: Double) -> Void

        public init(teams: @escaping @Sendable () async -> [Int: (key: String?, name: String)], touched: @escaping @Sendable ([Int]) -> Void,
                    counted: @escaping @Sendable (String, Int) -> Void, backlog: @escaping @Sendable (Int, Double) -> Void) {
            (self.teams, self.touched, self.counted, self.backlog) = (teams, touched, counted, backlog)
        }
    }

    let inbox: any WebhookEventInbox
    /// The configured Sendbird application: events naming another are stored as `foreign` and never applied.
    let appId: String
    let observers: Observers
    let logger: Logger

    public init(inbox: any WebhookEventInbox, appId: String, observers: Observers, logger: Logger) {
        (self.inbox, self.appId, self.observers, self.logger) = (inbox, appId, observers, logger)
    }

    /// Applies stored events until cancelled, with `workers` passes at once, each on its own lane of tickets (one
    /// ticket's events stay in order on its lane); every 5 s the first also measures the backlog.
    public func run(workers: Int = 1, interval: Duration = .milliseconds(200)) async {
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<max(1, workers) {
                group.addTask {
                    var measured = ContinuousClock.now - .seconds(10)
                    while !Task.isCancelled {
                        if worker == 0, ContinuousClock.now - measured >= .seconds(5) {
                            measured = .now
                            if let (pending, oldest) = try? await inbox.backlog() { observers.backlog(pending, oldest) }
                        }
                        if await processOnce(lane: worker, lanes: max(1, workers)) == 0 { try? await Task.sleep(for: interval) }
                    }
                }
            }
        }
    }

    /// One pass over the inbox (or one lane of it); returns how many events it handled.
    public func processOnce(lane: Int = 0, lanes: Int = 1) async -> Int {
        let teams = await observers.teams()
        let touched = TouchedTickets()
        do {
            let pass = try await inbox.process(limit: 50, lane: lane, lanes: lanes) { [appId, logger] event, tx in
                let result = try WebhookApplier.apply(try JSONParser.parse(event.body, repairingStrings: true), appId: appId, to: InboxTicketWriter(tx: tx, teams: teams))
                Self.log(result, event: event, logger: logger)
                if case .applied(let id, _) = result { touched.add(id) }
                return result.outcome
            }
            observers.touched(touched.all)
            for (outcome, count) in [("applied", pass.applied), ("unrecognized", pass.unrecognized), ("foreign", pass.foreign),
                                     ("failed", pass.failed)] where count > 0 {
                observers.counted(outcome, count)
            }
            if pass.failed > 0 {
                logger.warning("webhook events failed to apply; they will be retried",
                               metadata: ["count": "\(pass.failed)", "first_error": "\((pass.firstError ?? "").prefix(300))"])
            }
            return pass.total
        } catch {
            logger.warning("webhook inbox pass failed", metadata: ["error": "\(DomainError.logged(error))"])
            return 0
        }
    }

    static func log(_ result: WebhookApplier.Result, event: InboxEvent, logger: Logger) {
        switch result {
        case .foreign(let ticketId, let otherApp):
            logger.warning("a signed Desk webhook names another Sendbird application; stored as foreign, not applied",
                           metadata: ["event": "\(event.id)", "ticket": "\(ticketId)", "app": "\(otherApp.prefix(64))"])
        case .unrecognized(let keys):
            logger.warning("a Desk webhook event could not be interpreted; it is kept as unrecognized (desk-gateway webhooks replay)",
                           metadata: ["event": "\(event.id)", "type": "\(event.type)", "keys": "\(keys.prefix(20).joined(separator: ","))"])
        case .applied(_, .some(let moved)):
            logger.warning("Desk reports a cached ticket with another customer or channel; the cache now follows Desk",
                           metadata: moved.metadata.mapValues { .string($0) })
        case .applied, .noCustomer:
            break
        }
    }
}

extension WebhookApplier.Result {
    /// How the inbox records the event: a ticket without a customer counts as applied (there is nothing to cache).
    var outcome: InboxOutcome {
        switch self {
        case .applied, .noCustomer: return .applied
        case .foreign: return .foreign
        case .unrecognized: return .unrecognized
        }
    }
}

/// The inbox transaction as the webhook applier writes to it, with tickets rendered as the customer API serves them.
struct InboxTicketWriter: InboxWriter {
    let tx: any InboxTransaction
    let teams: [Int: (key: String?, name: String)]

    func cacheTicket(_ ticket: DeskTicket, customerSendbirdId: String) throws -> OwnershipChange? {
        try tx.upsert(TicketDocument.row(ticket, customerId: try tx.customerId(sendbirdId: customerSendbirdId), teams: teams))
    }

    func apply(_ write: RatingWrite) throws -> Bool {
        try tx.apply(write)
    }
}

/// Tickets one pass touched. Thread safety: a lock-protected list filled inside one inbox transaction.
final class TouchedTickets: Sendable {
    private let ids = Synchronization.Mutex<[Int]>([])
    func add(_ id: Int) { ids.withLock { $0.append(id) } }
    var all: [Int] { ids.withLock { $0 } }
}
