/// The capabilities the services need, declared here so that the services can be tested with in-memory fakes:
/// `DeskClient` implements the Desk side, `Store` the PostgreSQL side.

/// Desk's Platform API as the sync reads it.
public protocol DeskPlatformReader: Sendable {
    func agents(limit: Int, offset: Int) async throws(DomainError) -> DeskPage<DeskAgent>
    func teams(limit: Int, offset: Int) async throws(DomainError) -> DeskPage<DeskTeam>
    /// Tickets in `status` updated from `startDate` through `endDate` (days, `YYYY-MM-DD`), newest first.
    func ticketPage(limit: Int, offset: Int, status: [TicketStatus], startDate: String?, endDate: String?) async throws(DomainError) -> DeskPage<DeskTicket>
    func platformTicket(id: Int) async throws(DomainError) -> DeskTicket
    func chatMessages(ticketId: Int, limit: Int, offset: Int) async throws(DomainError) -> DeskPage<DeskMessage>
    /// True while calls fail fast without reaching Desk (the circuit breaker is open).
    var isPaused: Bool { get }
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
