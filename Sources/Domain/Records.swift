import Synchronization

// The records the HTTP side keeps through PostgreSQL, as ports: `Store` implements them, the routes and services are
// wired to them in GatewayApp, and route tests use in-memory fakes.

/// What a cache write needs; built from a Desk ticket (`TicketDocument.row`).
public struct TicketRow: Sendable {
    public let id: Int
    public let customerId: Int
    public let channelUrl: String
    public let status: String
    public let priority: String
    public let title: String
    public let teamId: Int?
    public let agentId: Int?
    public let agentName: String?
    public let agentSendbirdId: String?
    /// JSON object text of the custom fields (for containment filters).
    public let customFields: String
    public let createdAt: Double
    public let updatedAt: Double
    public let closedAt: Double?
    public let document: String
    public let desk: String

    public init(id: Int, customerId: Int, channelUrl: String, status: String, priority: String, title: String, teamId: Int?,
                agentId: Int?, agentName: String?, agentSendbirdId: String?, customFields: String, createdAt: Double,
                updatedAt: Double, closedAt: Double?, document: String, desk: String) {
        (self.id, self.customerId, self.channelUrl, self.status, self.priority, self.title) = (id, customerId, channelUrl, status, priority, title)
        (self.teamId, self.agentId, self.agentName, self.agentSendbirdId) = (teamId, agentId, agentName, agentSendbirdId)
        (self.customFields, self.createdAt, self.updatedAt, self.closedAt) = (customFields, createdAt, updatedAt, closedAt)
        (self.document, self.desk) = (document, desk)
    }
}

/// What a rating needs to know about its ticket, from the cache.
public struct TicketSnapshot: Sendable {
    public let customerId: Int
    public let agentId: Int?
    public let teamId: Int?
    public let priority: TicketPriority
    public let channelType: String

    public init(customerId: Int, agentId: Int?, teamId: Int?, priority: TicketPriority, channelType: String) {
        (self.customerId, self.agentId, self.teamId, self.priority, self.channelType) = (customerId, agentId, teamId, priority, channelType)
    }
}

/// The ticket cache in PostgreSQL: Desk's view of every ticket the gateway has seen, per customer.
public protocol TicketRepository: Sendable {
    func find(id: Int) async throws -> CachedTicket?
    func find(channelUrl: String) async throws -> CachedTicket?
    /// Keeps the rows (an older state never overwrites a newer one; Desk's customer and channel always win) and
    /// returns the tickets Desk moved to another customer or channel.
    func upsert(_ rows: [TicketRow]) async throws -> [OwnershipChange]
    /// Newest first, keyset-paged after (createdAt, id); `customFields` is a JSON object every match must contain.
    func list(customerId: Int, closed: Bool?, customFields: String?, after cursor: (createdAt: Double, id: Int)?,
              limit: Int) async throws -> [CachedTicket]
    func openCount(customerId: Int) async throws -> Int
    /// Seconds since 1970 of the last full list read from Desk for this customer.
    func lastSync(customerId: Int) async throws -> Double?
    func markSynced(customerId: Int) async throws
    /// Team keys and names by id.
    func teams() async throws -> [Int: (key: String?, name: String)]
    /// JSON array text of the ticket's operations not yet delivered to Desk.
    func pendingOperations(ticketId: Int) async throws -> String
    func snapshot(ticketId: Int) async throws -> TicketSnapshot?
}

/// CSAT records as a customer's feedback reads them, beside the writes every path makes.
public protocol FeedbackRatings: RatingStore {
    /// Whether Desk sent this message as a CSAT request of this ticket (as far as the gateway has seen).
    func isRequest(ticketId: Int, messageId: Int) async throws -> Bool
    /// The stored answer to a request: nil when there is none, `.some(nil)` for a decline.
    func storedAnswer(ticketId: Int, messageId: Int) async throws -> Int??
}

/// `Idempotency-Key` records: the first request with a key claims it; its answer is stored and replayed.
public protocol IdempotencyKeys: Sendable {
    func claim(principal: String, key: String, requestHash: [UInt8]) async throws -> IdempotencyClaim
    func complete(principal: String, key: String, status: Int, headers: [(String, String)], body: [UInt8]) async throws
    /// Lets the key go (the answer is one the client may retry).
    func release(principal: String, key: String) async throws
    /// Lets the key go after an attempt that may have taken effect, or after any attempt that followed one: the next
    /// claim of the same request is told of them (`earlier`, with this attempt's start added when it is the first).
    /// `settleSeconds`: this attempt may still take effect, until that long from now.
    func releaseUnanswered(principal: String, key: String, earlier: UnansweredAttempts?, settleSeconds: Double?) async throws
}

/// Earlier attempts of a request (one Idempotency-Key) that ended without an answer and may have taken effect: one
/// failed so, or its instance died mid-request.
public struct UnansweredAttempts: Sendable, Equatable {
    /// When the first of them began (seconds since 1970).
    public var since: Double
    /// For how many more seconds (from the claim) Desk may still carry one of them out: it had not answered when
    /// the gateway stopped waiting. Nil when each was answered, or that time is over.
    public var settlingSeconds: Double?

    public init(since: Double, settlingSeconds: Double? = nil) {
        self.since = since
        self.settlingSeconds = settlingSeconds
    }

    /// How long after the gateway stopped waiting Desk is taken to have finished or dropped a write: a minute, the
    /// usual limit a load balancer sets on one request. A write Desk carries out later still can be made twice.
    public static let settleSeconds = 60.0
}

public enum IdempotencyClaim: Sendable {
    /// This request owns the key and must complete or release it. `unanswered`: earlier attempts of the same request
    /// that may have taken effect; nil for a first attempt.
    case claimed(unanswered: UnansweredAttempts?)
    /// The same key and body were answered before.
    case replay(status: Int, headers: [(String, String)], body: [UInt8])
    /// The same key is being processed by another request right now.
    case inProgress
    /// The key was used with a different request.
    case mismatch
}

/// API keys as a request checks them.
public protocol APIKeyDirectory: Sendable {
    /// A live (not revoked) key's id, scopes and teams (nil: every team).
    func live(_ key: String) async throws -> (id: Int, scopes: [String], teamIds: [Int]?)?
}

/// The report page's sign-in sessions (a cookie naming an API key).
public protocol ReportSessionDirectory: Sendable {
    /// A session for a live key with the reports scope; nil when the key is not one.
    func open(key: String, lifetimeSeconds: Int) async throws -> String?
    func key(of token: String) async throws -> (id: Int, teamIds: [Int]?)?
    func close(token: String) async throws
}

/// The connection pool's state, and a round trip that proves the database answers.
public struct DatabaseStatistics: Sendable {
    public let size: Int
    public let inUse: Int
    public let idle: Int
    public let waiting: Int
    /// Callers whose wait for a connection ran out since the pool started.
    public let timedOut: Int

    public init(size: Int, inUse: Int, idle: Int, waiting: Int, timedOut: Int = 0) {
        (self.size, self.inUse, self.idle, self.waiting, self.timedOut) = (size, inUse, idle, waiting, timedOut)
    }
}

public protocol DatabaseProbe: Sendable {
    func ping() async throws
    /// Whether the server takes writes (reached, and neither a standby nor read-only by setting).
    func acceptsWrites() async throws -> Bool
    var statistics: DatabaseStatistics { get }
}

extension DatabaseProbe {
    public func acceptsWrites() async throws -> Bool {
        try await ping()
        return true
    }
}

/// Which database served the report reads of one request (set per request as a task local; the answer's
/// `X-Report-Database` header).
public final class ReadOrigin: Sendable {
    @TaskLocal public static var current: ReadOrigin?
    private let replicaReads = Atomic<Int>(0)
    private let primaryReads = Atomic<Int>(0)

    public init() {}

    public func record(replica: Bool) {
        if replica { replicaReads.add(1, ordering: .relaxed) } else { primaryReads.add(1, ordering: .relaxed) }
    }

    /// `primary` when any read went to the primary, `replica` when all went to the replica, nil when none was made.
    public var label: String? {
        if primaryReads.load(ordering: .relaxed) > 0 { return "primary" }
        return replicaReads.load(ordering: .relaxed) > 0 ? "replica" : nil
    }
}

/// A Desk webhook event as the inbox stored it.
public struct InboxEvent: Sendable {
    public let id: Int
    public let type: String
    public let body: String

    public init(id: Int, type: String, body: String) {
        (self.id, self.type, self.body) = (id, type, body)
    }
}

/// What became of one stored event.
public enum InboxOutcome: String, Sendable {
    case applied
    /// Not interpretable (yet): kept for `webhooks replay`.
    case unrecognized
    /// Another Sendbird application's ticket: kept, never applied.
    case foreign
}

/// What one pass over the inbox did.
public struct InboxPass: Sendable {
    public var applied = 0
    public var unrecognized = 0
    public var foreign = 0
    public var failed = 0
    /// Why the first failed event failed (what `webhook_events.last_error` holds), for the log.
    public var firstError: String?
    public var total: Int { applied + unrecognized + foreign + failed }

    public init() {}
}

/// The writes an inbox event may make, inside the pass's transaction (synchronous: it runs on a database thread).
public protocol InboxTransaction {
    /// The customer's row id, created on first sight.
    func customerId(sendbirdId: String) throws -> Int
    /// Caches Desk's view of a ticket; returns the ownership change when Desk moved it.
    func upsert(_ row: TicketRow) throws -> OwnershipChange?
    /// Records one CSAT fact; returns whether anything changed.
    @discardableResult
    func apply(_ write: RatingWrite) throws -> Bool
}

/// Desk's webhooks as received: stored once per event (redeliveries collapse), applied later in batches.
public protocol WebhookEventInbox: Sendable {
    /// Returns false when the event was already received.
    func receive(dedupeKey: String, type: String, body: String) async throws -> Bool
    /// Events waiting to be applied, and the age in seconds of the oldest.
    func backlog() async throws -> (pending: Int, oldestSeconds: Double)
    /// Applies up to `limit` pending events of lane `lane` (of `lanes`) in one transaction, each through `apply`; an
    /// event whose application throws is rolled back alone and retried in a later pass.
    func process(limit: Int, lane: Int, lanes: Int,
                 apply: @escaping @Sendable (InboxEvent, any InboxTransaction) throws -> InboxOutcome) async throws -> InboxPass
}
