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
