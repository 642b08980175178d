/// The capabilities the services need, declared here so that the services can be tested with in-memory fakes:
/// `DeskClient` implements the Desk side, `Store` the PostgreSQL side.

/// Desk's Platform API as the sync reads it.
public protocol DeskPlatformReader: Sendable {
    func agents(limit: Int, offset: Int) async throws(DomainError) -> DeskPage<DeskAgent>
    func teams(limit: Int, offset: Int) async throws(DomainError) -> DeskPage<DeskTeam>
    /// Tickets in `status` from `startDate` through `endDate` (days, `YYYY-MM-DD`; which date Desk filters on is not
    /// public), in `order` (`created_at`, `-updated_at`; Desk may ignore it, so callers check what they get).
    func ticketPage(limit: Int, offset: Int, status: [TicketStatus], startDate: String?, endDate: String?,
                    order: String?) async throws(DomainError) -> DeskPage<DeskTicket>
    func platformTicket(id: Int) async throws(DomainError) -> DeskTicket
    func chatMessages(ticketId: Int, limit: Int, offset: Int) async throws(DomainError) -> DeskPage<DeskMessage>
    /// True while calls fail fast without reaching Desk (the circuit breaker is open).
    var isPaused: Bool { get }
    /// 429 answers Desk gave so far, those the reader retried by itself included.
    var rateLimitedAnswers: Int { get }
}

extension DeskPlatformReader {
    public var rateLimitedAnswers: Int { 0 }
}

/// A CSAT request as it is recorded: agent, team, channel and priority are the ticket's when it was sent.
public struct CSATRequestRecord: Sendable, Equatable {
    public let ticketId: Int
    public let messageId: Int
    public let agentId: Int?
    public let teamId: Int?
    public let channelType: String
    public let priority: TicketPriority
    public let requestedAt: Double

    public init(ticketId: Int, messageId: Int, agentId: Int?, teamId: Int?, channelType: String, priority: TicketPriority, requestedAt: Double) {
        (self.ticketId, self.messageId, self.agentId, self.teamId) = (ticketId, messageId, agentId, teamId)
        (self.channelType, self.priority, self.requestedAt) = (channelType, priority, requestedAt)
    }
}

/// Where CSAT requests and answers are kept. Each call returns whether anything changed (the same answer seen again
/// through another path changes nothing; a later answer to the same request replaces the earlier one).
public protocol RatingStore: Sendable {
    func recordRequest(_ request: CSATRequestRecord) async throws -> Bool
    func record(_ rating: RatingRecord) async throws -> Bool
    /// A ticket's own rating when the CSAT message is not known (yet): absorbed once the message-level answer arrives.
    func recordTicketLevel(_ rating: RatingRecord, closedAt: Double) async throws -> Bool
    /// Tickets with a CSAT request younger than `maxAgeDays` that has no answer yet: at most `limit` requests' worth,
    /// in the order the requests were made from after `cursor` (nil: the oldest); `next` continues after the last of
    /// them, nil once the newest is reached, so every such request comes round however many there are.
    func ticketsAwaitingAnswers(maxAgeDays: Int, after cursor: String?, limit: Int) async throws -> (tickets: [Int], next: String?)
    /// The scores stored for these tickets (the latest answer of each; nil score: declined).
    func storedAnswers(ticketIds: [Int]) async throws -> [Int: Int?]
}

/// The sync's lease: a run renews it every 5 s, and one not renewed for `seconds` belongs to a run that died.
public enum SyncLease {
    public static let seconds = 20
}

/// Where the Desk sync keeps its lease, its position and the directory it copies.
public protocol SyncState: Sendable {
    /// A lease held by `instance` (taken over once it has run out); true when `instance` holds it now.
    func takeLease(_ instance: String) async throws -> Bool
    func renewLease(_ instance: String) async throws
    func releaseLease(_ instance: String) async throws
    /// The last day the ticket sync completed, and the tickets it must read again.
    func ticketPosition() async throws -> (syncedThrough: String?, retry: [Int])
    func saveTicketPosition(syncedThrough day: String, retry: [Int]) async throws
    /// Tickets to read again on the next run, added to those already listed.
    func addRetry(_ ticketIds: [Int]) async throws
    /// A named position (a backfill's offset, the last audit's figure); nil deletes it.
    func value(_ name: String) async throws -> String?
    func setValue(_ name: String, _ value: String?) async throws
    func upsertAgents(_ agents: [DeskAgent]) async throws
    func upsertTeams(_ teams: [DeskTeam]) async throws
}

/// One write of CSAT facts, as every path (sync, webhooks, the gateway's own feedback) hands it to a `RatingStore`.
public enum RatingWrite: Sendable, Equatable {
    case request(CSATRequestRecord)
    case rating(RatingRecord)
    /// The ticket's own rating, for a ticket whose CSAT message is not known.
    case ticketLevel(RatingRecord, closedAt: Double)
}

/// How a client names a ticket.
public enum TicketKey: Sendable, Hashable, CustomStringConvertible {
    case id(Int)
    case channel(String)

    public var description: String {
        switch self {
        case .id(let id): return "ticket \(id)"
        case .channel(let url): return "channel \(url)"
        }
    }
}

/// A ticket as the gateway caches it.
public struct CachedTicket: Sendable {
    public let id: Int
    public let customerId: Int
    public let channelUrl: String
    public let status: String
    /// The gateway's JSON for this ticket, without the `stale` member (added when served).
    public let document: String
    /// Seconds since 1970 when Desk last confirmed this state.
    public let fetchedAt: Double
    public let createdAt: Double
    /// JSON array text of operations queued for Desk and not yet delivered.
    public let pendingOperations: String

    public init(id: Int, customerId: Int, channelUrl: String, status: String, document: String, fetchedAt: Double, createdAt: Double,
                pendingOperations: String) {
        (self.id, self.customerId, self.channelUrl, self.status) = (id, customerId, channelUrl, status)
        (self.document, self.fetchedAt, self.createdAt, self.pendingOperations) = (document, fetchedAt, createdAt, pendingOperations)
    }
}

/// The ticket cache as the read rules use it.
public protocol TicketCache: Sendable {
    func find(_ key: TicketKey) async throws -> CachedTicket?
    /// Keeps Desk's view of `ticket` for `customerId` (Desk owns ownership) and returns it as cached now.
    func save(_ ticket: DeskTicket, customerId: Int) async throws -> CachedTicket
    /// Drops what is remembered of `key` (Desk says it does not exist).
    func forget(_ key: TicketKey)
}

/// Desk's customer API, read with the customer's own session.
public protocol DeskTicketSource: Sendable {
    func ticket(_ key: TicketKey, deskToken: String) async throws(DomainError) -> DeskTicket
}

/// Desk's customer API as a customer's list is refreshed: every ticket of the session's customer, newest first.
public protocol DeskCustomerReader: DeskTicketSource {
    func ticketPage(deskToken: String, limit: Int, offset: Int) async throws(DomainError) -> DeskPage<DeskTicket>
}

/// One customer write waiting for (or done with) Desk.
public struct OutboxOperation: Sendable {
    public let id: Int
    public let ticketId: Int
    public let customerId: Int
    public let sessionId: Int
    public let kind: OperationKind
    /// JSON object text.
    public let payload: String
    public let status: OperationStatus
    public let attempts: Int
    public let lastError: String?
    public let createdAt: Double
    public let finishedAt: Double?
    /// Seconds it has waited for its customer to sign in again (Desk refused every session of theirs); nil: not waiting.
    public let awaitedSignInSeconds: Double?
    /// How a delivered write reached Desk; nil while pending, when failed, or when an earlier release delivered it.
    public let deliveredAs: DeliveryPath?

    public init(id: Int, ticketId: Int, customerId: Int, sessionId: Int, kind: OperationKind, payload: String, status: OperationStatus,
                attempts: Int, lastError: String?, createdAt: Double, finishedAt: Double?, awaitedSignInSeconds: Double? = nil,
                deliveredAs: DeliveryPath? = nil) {
        (self.id, self.ticketId, self.customerId, self.sessionId, self.kind) = (id, ticketId, customerId, sessionId, kind)
        (self.payload, self.status, self.attempts, self.lastError) = (payload, status, attempts, lastError)
        (self.createdAt, self.finishedAt, self.awaitedSignInSeconds, self.deliveredAs) = (createdAt, finishedAt, awaitedSignInSeconds, deliveredAs)
    }
}

/// The outbox: customer writes queued for Desk, claimed by one deliverer at a time (a lease), in order per ticket.
public protocol OutboxQueue: Sendable {
    /// Queues an operation already claimed by `owner`; says whether an earlier one of the same ticket is still pending.
    func enqueue(ticketId: Int, customerId: Int, sessionId: Int, kind: OperationKind, payload: String,
                 owner: String, leaseSeconds: Int) async throws -> (operation: OutboxOperation, earlierPending: Bool)
    /// Hands a claimed operation over to the relays.
    func release(id: Int, owner: String) async throws
    /// Due operations, each the oldest pending one of its ticket, claimed for `leaseSeconds`.
    func claimBatch(by owner: String, leaseSeconds: Int, limit: Int) async throws -> [OutboxOperation]
    /// Ends a pending operation, whoever holds it now: it was delivered (`deliveredAs`, how) or refused for good (nil)
    /// once, and a relay whose lease ran out meanwhile must not deliver it again. `refusedInRequest`: refused while its
    /// own request waited, so the customer was answered with the refusal (such a write is never revived).
    func finish(_ operation: OutboxOperation, deliveredAs: DeliveryPath?, error: String?, refusedInRequest: Bool) async throws
    /// Puts an operation back for a later attempt; `awaitingSignIn` starts (or goes on with) its wait for a sign-in.
    func reschedule(_ operation: OutboxOperation, afterSeconds delay: Double, error: String, awaitingSignIn: Bool) async throws
    func find(id: Int) async throws -> OutboxOperation?
    func depth() async throws -> (pending: Int, oldestSeconds: Double)
}

extension OutboxQueue {
    /// Ends an operation delivered with the customer's session, or one Desk refused after the customer's request was
    /// answered.
    public func finish(_ operation: OutboxOperation, delivered: Bool, error: String?) async throws {
        try await finish(operation, deliveredAs: delivered ? .customer : nil, error: error, refusedInRequest: false)
    }
}

/// The Desk session token a queued operation is delivered with.
public protocol DeskSessionTokens: Sendable {
    func deskToken(sessionId: Int) async throws -> String?
    /// The Desk token of the newest session the customer opened after `sessionId`, for a write queued under a Desk
    /// session that has since ended.
    func newestDeskToken(customerId: Int, after sessionId: Int) async throws -> String?
}

/// A live gateway session as the API needs it on every request.
public struct SessionRecord: Sendable {
    public let sessionId: Int
    public let customerId: Int
    public let sendbirdId: String
    public let deskToken: String
    public let expiresAt: Double

    public init(sessionId: Int, customerId: Int, sendbirdId: String, deskToken: String, expiresAt: Double) {
        (self.sessionId, self.customerId, self.sendbirdId, self.deskToken, self.expiresAt) = (sessionId, customerId, sendbirdId, deskToken, expiresAt)
    }
}

/// Bearer sessions: each holds the customer's Desk session; only a hash of the bearer token is kept.
public protocol SessionDirectory: DeskSessionTokens {
    /// Opens a session for the customer (created on first sight); returns the new bearer token and its record.
    func open(sendbirdId: String, displayName: String?, deskCustomerId: Int?, deskToken: String,
              lifetimeSeconds: Int) async throws -> (token: String, record: SessionRecord)
    /// The live session a bearer token names, if any.
    func find(token: String) async throws -> SessionRecord?
    func revoke(sessionId: Int) async throws
}

/// Desk's customer API writes, with the customer's own session.
public protocol DeskTicketWriter: DeskTicketSource {
    func submitFeedback(ticketId: Int, messageId: Int, score: Int, comment: String?, deskToken: String) async throws(DomainError)
    func confirmClosure(ticketId: Int, messageId: Int, confirm: Bool, deskToken: String) async throws(DomainError)
    func close(ticketId: Int, comment: String, deskToken: String) async throws(DomainError) -> DeskTicket
    func reopen(ticketId: Int, deskToken: String) async throws(DomainError) -> DeskTicket
    func setCustomFields(ticketId: Int, _ fields: [(key: String, value: String)], deskToken: String) async throws(DomainError) -> DeskTicket
    func setRelatedChannels(ticketId: Int, _ urls: [String], deskToken: String) async throws(DomainError) -> DeskTicket
    func setPriority(ticketId: Int, _ priority: TicketPriority, deskToken: String) async throws(DomainError) -> DeskTicket
    /// Unassigns the ticket (PENDING, routed again), into the team `transferTo` names when given.
    func cancelAssignment(ticketId: Int, transferTo groupKey: String?, deskToken: String) async throws(DomainError) -> DeskTicket
    /// True while calls fail fast without reaching Desk.
    var isPaused: Bool { get }
}

/// Desk's Platform API writes, made with the gateway's API token as the application: what a queued write whose
/// customer never signed in again can still reach Desk with. Desk has them for closing, giving back to the queue and
/// priority; the rest (feedback, closure answers, reopening, custom fields, related channels) only the customer makes.
public protocol DeskPlatformWriter: Sendable {
    func platformClose(ticketId: Int, comment: String) async throws(DomainError) -> DeskTicket
    func platformCancel(ticketId: Int) async throws(DomainError) -> DeskTicket
    /// Gives a ticket back to the queue of the team `groupKey` names (PENDING there, routed again).
    func platformTransfer(ticketId: Int, toTeam groupKey: String) async throws(DomainError) -> DeskTicket
    func platformSetPriority(ticketId: Int, _ priority: TicketPriority) async throws(DomainError) -> DeskTicket
    func platformTicket(id: Int) async throws(DomainError) -> DeskTicket
}

/// A ticket a customer opens through Desk's customer API.
public struct NewDeskTicket: Sendable {
    public var title: String
    public var userName: String
    public var userId: String
    public var groupKey: String?
    public var customFields: [(key: String, value: String)]?
    public var priority: TicketPriority?
    public var relatedChannelUrls: [String]?
    public var channelType = "SENDBIRD_JAVASCRIPT"

    public init(title: String, userName: String, userId: String, groupKey: String? = nil,
                customFields: [(key: String, value: String)]? = nil, priority: TicketPriority? = nil,
                relatedChannelUrls: [String]? = nil) {
        (self.title, self.userName, self.userId, self.groupKey) = (title, userName, userId, groupKey)
        (self.customFields, self.priority, self.relatedChannelUrls) = (customFields, priority, relatedChannelUrls)
    }
}

/// Desk's customer API as a customer's ticket is created.
public protocol DeskTicketCreator: Sendable {
    /// Not retried: a repeated create would open a second ticket.
    func createTicket(_ ticket: NewDeskTicket, deskToken: String) async throws(DomainError) -> DeskTicket
}

/// All of Desk's customer API the customer routes use: reads and ticket writes, plus sign-in, new tickets and the
/// customer's own fields.
public protocol DeskCustomerAPI: DeskCustomerReader, DeskTicketWriter, DeskTicketCreator {
    /// Desk's session token for a Sendbird user (`unauthorized` when Sendbird refuses the access token).
    func signIn(userId: String, accessToken: String) async throws(DomainError) -> String
    func setCustomerCustomFields(_ fields: [(key: String, value: String)], deskToken: String) async throws(DomainError) -> DeskCustomer
    /// The question the customer picked from an FAQ bot's suggestions (the SDK's `selectQuestion`).
    func selectQuestion(ticketId: Int, faqFileId: Int, question: String, deskToken: String) async throws(DomainError)
}

/// Desk as the readiness check sees it.
public protocol DeskHealthProbe: Sendable {
    /// True while calls fail fast without reaching Desk (the circuit breaker is open).
    var isPaused: Bool { get }
    /// Why Desk is not usable now, or nil when it answered as expected.
    func probe() async -> String?
}

/// A cached ticket that Desk reports with another customer or channel than the cache held.
public struct OwnershipChange: Sendable, Equatable {
    public let ticketId: Int
    public let previousCustomerId: Int
    public let customerId: Int
    public let previousChannelUrl: String
    public let channelUrl: String

    public init(ticketId: Int, previousCustomerId: Int, customerId: Int, previousChannelUrl: String, channelUrl: String) {
        self.ticketId = ticketId
        self.previousCustomerId = previousCustomerId
        self.customerId = customerId
        self.previousChannelUrl = previousChannelUrl
        self.channelUrl = channelUrl
    }

    /// Log fields: both values of each (gateway customer ids and channel URLs, no ticket content).
    public var metadata: [String: String] {
        ["ticket": "\(ticketId)", "cached_customer": "\(previousCustomerId)", "desk_customer": "\(customerId)",
         "cached_channel": previousChannelUrl, "desk_channel": channelUrl]
    }
}

/// The writes a Desk webhook event makes, inside the inbox's transaction (synchronous: it runs on a database thread).
public protocol InboxWriter {
    /// Caches Desk's view of `ticket` for the customer with this Sendbird id (created on first sight). An older
    /// state (by Desk's `updatedAt`) never overwrites a newer one; Desk's customer and channel always win. Returns
    /// the ownership change when Desk moved the ticket.
    func cacheTicket(_ ticket: DeskTicket, customerSendbirdId: String) throws -> OwnershipChange?
    /// Records one CSAT fact; returns whether anything changed.
    @discardableResult
    func apply(_ write: RatingWrite) throws -> Bool
}
