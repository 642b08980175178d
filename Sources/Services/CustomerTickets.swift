public import Domain
public import Logging

/// How fresh a customer's tickets must be, and how long Desk may take before a cached copy is served instead.
public struct TicketFreshness: Sendable {
    /// A cached ticket, or a customer's list, younger than this is served without asking Desk.
    public var cacheTTLSeconds: Double
    /// A read that has a cached copy to fall back on waits this long for Desk in all (every attempt), then serves
    /// the copy marked stale.
    public var staleReadBudgetSeconds: Double
    /// Tickets read per customer when refreshing a list (newest first).
    public var maxListTickets: Int

    public init(cacheTTLSeconds: Double, staleReadBudgetSeconds: Double, maxListTickets: Int = 1000) {
        (self.cacheTTLSeconds, self.staleReadBudgetSeconds, self.maxListTickets) = (cacheTTLSeconds, staleReadBudgetSeconds, maxListTickets)
    }
}

/// A ticket document ready to send, and whether Desk could confirm it.
public struct ServedTicket: Sendable {
    public let body: [UInt8]
    public let etag: String?
    public let cache: String
    public var stale: Bool { cache == "STALE" }
}

/// Team names for rendering, refreshed from PostgreSQL now and then.
public final class TeamDirectory: Sendable {
    private let store: any TicketRepository
    private let state = CachedValue<[Int: (key: String?, name: String)]>(ttl: 60)

    init(store: any TicketRepository) {
        self.store = store
    }

    /// The known teams; reloaded every minute, or sooner (at most every 2 s) when `needing` a team not known yet.
    public func current(needing id: Int? = nil) async -> [Int: (key: String?, name: String)] {
        let teams = state.lookup()?.value ?? [:]
        let age = state.age()
        let missing = id.map { teams[$0] == nil } ?? false
        guard age > state.ttl || (missing && age > 2) else { return teams }
        let fresh = (try? await store.teams()) ?? teams
        state.put(fresh)
        return fresh
    }
}

/// Ticket reads and writes for one customer: the cache first while fresh, Desk otherwise, every change written
/// through to PostgreSQL and the memory cache.
public final class CustomerTickets: TicketCache {
    let desk: any DeskCustomerReader
    let store: any TicketRepository
    public let memory: TicketMemoryCache
    public let teams: TeamDirectory
    let settings: TicketFreshness
    let logger: Logger
    /// When each customer's list was last known to be up to date (brought up to date here, or read so from
    /// PostgreSQL): a list read within `cacheTTLSeconds` of it skips asking PostgreSQL when the list was last synced,
    /// one query and a hop to the pool's thread of the two an open list made. Another instance's later sync only
    /// makes the list fresher, and nothing but a cache reset (with another Desk's configuration) takes a mark back.
    let listSynced: TTLCache<Int, Bool>

    /// `etag` tags a ready-to-send document (the memory cache keeps the tag with it).
    public init(desk: any DeskCustomerReader, store: any TicketRepository, settings: TicketFreshness, logger: Logger,
                etag: @escaping @Sendable ([UInt8]) -> String) {
        self.desk = desk
        self.store = store
        self.settings = settings
        self.logger = logger
        memory = TicketMemoryCache(etag: etag)
        teams = TeamDirectory(store: store)
        listSynced = TTLCache(ttl: max(settings.cacheTTLSeconds, 1), capacity: 100_000)
    }

    /// The memory fast path: the body and tag of a fresh entry owned by this customer, or nil.
    public func fastGet(_ id: Int, customerId: Int, now: Double = WallClock.seconds()) -> (body: [UInt8], etag: String)? {
        memory.served(id, customerId: customerId, fetchedAfter: now - settings.cacheTTLSeconds)
    }

    /// The read rules (cache, Desk, stale copy), on this service as the cache and the Desk client.
    var reader: TicketReader {
        TicketReader(cache: self, desk: desk, ttl: settings.cacheTTLSeconds, staleBudget: .milliseconds(Int(settings.staleReadBudgetSeconds * 1000)))
    }

    public func get(_ id: Int, session: SessionRecord) async throws -> ServedTicket {
        if let entry = fastGet(id, customerId: session.customerId) {
            return ServedTicket(body: entry.body, etag: entry.etag, cache: "HIT")
        }
        let (ticket, freshness) = try await reader.read(.id(id), customerId: session.customerId, deskToken: session.deskToken)
        if freshness == .hit {
            memory.put(id, customerId: ticket.customerId, channelUrl: ticket.channelUrl, status: ticket.status,
                       document: ticket.document, fetchedAt: ticket.fetchedAt, pending: ticket.pendingOperations)
        }
        return Self.served(ticket, freshness)
    }

    /// The customer's cached tickets (call `refreshList` first): newest first, keyset-paged after (createdAt, id);
    /// `customFields` is a JSON object every match must contain.
    public func list(_ session: SessionRecord, closed: Bool?, customFields: String?, after cursor: (createdAt: Double, id: Int)?,
                     limit: Int) async throws -> [CachedTicket] {
        try await store.list(customerId: session.customerId, closed: closed, customFields: customFields, after: cursor, limit: limit)
    }

    public func openCount(_ session: SessionRecord) async throws -> Int {
        try await store.openCount(customerId: session.customerId)
    }

    /// Who a rating on the ticket counts for now; nil unless the cache holds the ticket as this customer's.
    public func snapshot(_ id: Int, session: SessionRecord) async throws -> TicketSnapshot? {
        guard let snapshot = try await store.snapshot(ticketId: id), snapshot.customerId == session.customerId else { return nil }
        return snapshot
    }

    public func get(channelUrl: String, session: SessionRecord) async throws -> ServedTicket {
        let (ticket, freshness) = try await reader.read(.channel(channelUrl), customerId: session.customerId, deskToken: session.deskToken)
        return Self.served(ticket, freshness)
    }

    public func confirmOwnership(_ id: Int, session: SessionRecord, requireCached: Bool = false) async throws {
        try await reader.confirmOwnership(id, customerId: session.customerId, deskToken: session.deskToken, requireCached: requireCached)
    }

    public static func served(_ ticket: CachedTicket, _ freshness: TicketReader.Freshness = .miss) -> ServedTicket {
        ServedTicket(body: TicketDocument.serve(ticket.document, stale: freshness == .stale, pending: ticket.pendingOperations),
                     etag: nil, cache: freshness.rawValue)
    }

    // MARK: TicketCache

    public func find(_ key: TicketKey) async throws -> CachedTicket? {
        switch key {
        case .id(let id): return try await store.find(id: id)
        case .channel(let url): return try await store.find(channelUrl: url)
        }
    }

    @discardableResult
    public func save(_ ticket: DeskTicket, customerId: Int) async throws -> CachedTicket {
        try await save(ticket, customerId: customerId, row: await row(ticket, customerId: customerId))
    }

    private func row(_ ticket: DeskTicket, customerId: Int) async -> TicketRow {
        TicketDocument.row(ticket, customerId: customerId, teams: await teams.current(needing: ticket.groupId))
    }

    private func save(_ ticket: DeskTicket, customerId: Int, row: TicketRow) async throws -> CachedTicket {
        report(try await store.upsert([row]))
        let pending = try await store.pendingOperations(ticketId: ticket.id)
        let now = WallClock.seconds()
        memory.put(ticket.id, customerId: customerId, channelUrl: ticket.channelUrl, status: row.status, document: row.document,
                   fetchedAt: now, pending: pending)
        return Self.cached(ticket, customerId: customerId, row: row, fetchedAt: now, pending: pending)
    }

    private static func cached(_ ticket: DeskTicket, customerId: Int, row: TicketRow, fetchedAt: Double, pending: String) -> CachedTicket {
        CachedTicket(id: ticket.id, customerId: customerId, channelUrl: ticket.channelUrl, status: row.status, document: row.document,
                     fetchedAt: fetchedAt, createdAt: row.createdAt, pendingOperations: pending)
    }

    /// Creates a customer's ticket in Desk and keeps its copy. `unanswered`: earlier attempts of the same request (its
    /// Idempotency-Key) that may have made it, so Desk is first asked for the ticket one of them made
    /// (`earlierCreation`), which is answered instead of a second. While Desk may still be carrying one of them out,
    /// a ticket not found yet is not made again: the client is asked to retry once that time is over.
    public func create(_ new: NewDeskTicket, session: SessionRecord, unanswered: UnansweredAttempts?,
                       in desk: any DeskTicketCreator) async throws(DomainError) -> CachedTicket {
        if let unanswered {
            if let earlier = try await earlierCreation(title: new.title, since: unanswered.since, session: session) {
                return await keepCreated(earlier, customerId: session.customerId)
            }
            if let settling = unanswered.settlingSeconds, settling > 0 {
                let wait = Int(settling.rounded(.up))
                logger.notice("a retried creation waits: Desk may still make the ticket an unanswered attempt asked for",
                              metadata: ["customer": "\(session.customerId)", "retry_s": "\(wait)"])
                throw DomainError(.upstreamPending, "Desk may still be creating the ticket an earlier attempt asked for.",
                                  retryAfterSeconds: wait, internalDetail: "an unanswered creation may still be carried out for \(wait) s")
            }
        }
        return await keepCreated(try await desk.createTicket(new, deskToken: session.deskToken), customerId: session.customerId)
    }

    /// Keeps a ticket Desk has just created. Desk holds it whatever happens here, so a database that cannot take
    /// the copy now does not fail the creation: a 503 let the client's retry (same Idempotency-Key, the key let go)
    /// create a second ticket in Desk. The answer is then Desk's own copy, and the cache reads the ticket from Desk
    /// on its next read or list (this instance's list mark is dropped; another instance's may hold for
    /// `cacheTTLSeconds`).
    private func keepCreated(_ ticket: DeskTicket, customerId: Int) async -> CachedTicket {
        let row = await row(ticket, customerId: customerId)
        do {
            return try await save(ticket, customerId: customerId, row: row)
        } catch {
            logger.warning("Desk created a ticket whose copy the database could not store; it is answered from Desk's copy",
                           metadata: ["ticket": "\(ticket.id)", "error": "\(error)"])
            listSynced.remove(customerId)
            return Self.cached(ticket, customerId: customerId, row: row, fetchedAt: WallClock.seconds(), pending: "[]")
        }
    }

    /// A ticket an earlier attempt of this creation may have made (Desk took it but its answer never came, or its
    /// instance died): of the customer's 50 most recently updated tickets, the oldest with the same title created
    /// since that attempt began, allowing `creationClockMargin` between the two clocks. A failed look is thrown as a
    /// write that may have taken effect, so the client is told to retry with the same key (which keeps its note
    /// whatever the failure, and the next retry looks again).
    private func earlierCreation(title: String, since: Double, session: SessionRecord) async throws(DomainError) -> DeskTicket? {
        let page: DeskPage<DeskTicket>
        do {
            page = try await desk.ticketPage(deskToken: session.deskToken, limit: 50, offset: 0)
        } catch {
            throw error.effectUnknown()
        }
        let found = page.results.filter { $0.title == title && ($0.createdAt ?? 0) >= since - Self.creationClockMargin }
            .min { ($0.createdAt ?? 0, $0.id) < ($1.createdAt ?? 0, $1.id) }
        if let found {
            logger.notice("a retried creation found the ticket an unanswered attempt made in Desk; it is answered instead of a new one",
                          metadata: ["ticket": "\(found.id)", "customer": "\(session.customerId)"])
        }
        return found
    }

    /// How far Desk's clock (a ticket's `createdAt`) may be behind the database's (an attempt's start).
    static let creationClockMargin = 30.0

    public func forget(_ key: TicketKey) {
        if case .id(let id) = key { memory.remove(id) }
    }

    /// Desk gave cached tickets to another customer or channel: worth a warning each time it happens (then the row agrees).
    func report(_ changes: [OwnershipChange]) {
        for change in changes {
            memory.remove(change.ticketId)
            logger.warning("Desk reports a cached ticket with another customer or channel; the cache now follows Desk",
                           metadata: change.metadata.mapValues { .string($0) })
        }
    }

    /// Re-reads the customer's tickets from Desk when the last full read is older than the list TTL.
    /// Returns true when Desk could not be reached and the cache is all there is.
    public func refreshList(_ session: SessionRecord) async throws -> Bool {
        if listSynced.get(session.customerId, maxAge: settings.cacheTTLSeconds) != nil { return false }
        let last = try await store.lastSync(customerId: session.customerId)
        if let last, WallClock.seconds() - last < settings.cacheTTLSeconds {
            listSynced.put(session.customerId, true, at: last)
            return false
        }
        let tickets: [DeskTicket]
        // A list read before has its cached copy to serve: Desk gets the stale-read budget for all its pages.
        let fetched = last == nil ? await fetchAll(session.deskToken)
            : await withDeadline(.milliseconds(Int(settings.staleReadBudgetSeconds * 1000))) { [self] in await fetchAll(session.deskToken) }
        guard let fetched else { return true }
        switch fetched {
        case .success(let all):
            tickets = all
        case .failure(let error):
            if error.deskGaveNoUsableAnswer { return true }
            throw error
        }
        let directory = await teams.current()
        let rows = tickets.map { TicketDocument.row($0, customerId: session.customerId, teams: directory) }
        do {
            report(try await store.upsert(rows))
            for row in rows { memory.remove(row.id) }
            try await store.markSynced(customerId: session.customerId)
        } catch let error as DomainError where error.code == .storeUnavailable && last != nil {
            // A database that takes no writes (a failover under way) still holds the list read before: served stale,
            // as while Desk is away. A database that is away fails the list's own read next.
            return true
        }
        listSynced.put(session.customerId, true)
        return false
    }

    private func fetchAll(_ deskToken: String) async -> Result<[DeskTicket], DomainError> {
        var tickets: [DeskTicket] = []
        do throws(DomainError) {
            try await forEachDeskPage(maxItems: settings.maxListTickets) { offset throws(DomainError) in
                try await desk.ticketPage(deskToken: deskToken, limit: 50, offset: offset)
            } each: { page throws(DomainError) in
                tickets += page
            }
        } catch {
            return .failure(error)
        }
        return .success(tickets)
    }
}
