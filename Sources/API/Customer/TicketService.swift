import DeskClient
import Domain
import Foundation
import Logging
import Store
import Synchronization

/// Freshness and size settings of the customer API.
public struct CustomerAPISettings: Sendable {
    /// A cached ticket younger than this is served without asking Desk.
    public var cacheTTLSeconds: Double = 15
    /// A customer's list is re-read from Desk when older than this.
    public var listTTLSeconds: Double = 15
    /// Tickets read per customer when refreshing a list (newest first).
    public var maxSyncTickets = 1000
    public var sessionLifetimeSeconds = 86_400
    public var sessionCacheSeconds: Double = 5
    /// Sign-ins per Sendbird user id (a second limit beside the one per client address).
    public var signInPerUserPerMinute = 10
    public var signInPerUserBurst = 5

    public init() {}
}

/// A ticket document ready to send, and whether Desk could confirm it.
struct ServedTicket: Sendable {
    let body: [UInt8]
    let etag: String?
    let cache: String
    var stale: Bool { cache == "STALE" }
}

/// Team names for rendering, refreshed from PostgreSQL now and then.
final class TeamDirectory: Sendable {
    private let store: TicketStore
    private let state = TTLCache<Int, [Int: (key: String?, name: String)]>(ttl: 60)

    init(store: TicketStore) {
        self.store = store
    }

    /// The known teams; reloaded every minute, or sooner (at most every 2 s) when `needing` a team not known yet.
    func current(needing id: Int? = nil) async -> [Int: (key: String?, name: String)] {
        let (teams, loadedAt) = state.lookup(0) ?? ([:], 0)
        let age = TTLCache<Int, [Int: (key: String?, name: String)]>.now - loadedAt
        let missing = id.map { teams[$0] == nil } ?? false
        guard age > state.ttl || (missing && age > 2) else { return teams }
        let fresh = (try? await store.teams()) ?? teams
        state.put(0, fresh)
        return fresh
    }

    func invalidate() {
        if let teams = state.lookup(0)?.value { state.put(0, teams, at: 0) }
    }
}

/// Ticket reads and writes for one customer: the cache first while fresh, Desk otherwise, every change written
/// through to PostgreSQL and the memory cache.
final class TicketService: Sendable {
    let desk: DeskClient
    let store: TicketStore
    let memory: TicketMemoryCache
    let teams: TeamDirectory
    let settings: CustomerAPISettings
    let logger: Logger

    init(desk: DeskClient, store: TicketStore, settings: CustomerAPISettings, logger: Logger) {
        self.desk = desk
        self.store = store
        self.settings = settings
        self.logger = logger
        memory = TicketMemoryCache()
        teams = TeamDirectory(store: store)
    }

    static func now() -> Double { Date().timeIntervalSince1970 }

    /// The memory fast path: a fresh entry owned by this customer, or nil.
    func fastGet(_ id: Int, customerId: Int) -> TicketMemoryCache.Entry? {
        guard let entry = memory.get(id), entry.customerId == customerId,
              Self.now() - entry.fetchedAt < settings.cacheTTLSeconds else { return nil }
        return entry
    }

    @discardableResult
    func save(_ ticket: DeskTicket, customerId: Int) async throws -> ServedTicket {
        let row = TicketDocument.row(ticket, customerId: customerId, teams: await teams.current(needing: ticket.groupId))
        report(try await store.upsert([row]))
        let pending = try await store.pendingOperations(ticketId: ticket.id)
        memory.put(ticket.id, customerId: customerId, channelUrl: ticket.channelUrl, status: row.status, document: row.document,
                   fetchedAt: Self.now(), pending: pending)
        let body = TicketDocument.serve(row.document, stale: false, pending: pending)
        return ServedTicket(body: body, etag: nil, cache: "MISS")
    }

    func get(_ id: Int, session: SessionRecord) async throws -> ServedTicket {
        if let entry = fastGet(id, customerId: session.customerId) {
            return ServedTicket(body: entry.body, etag: entry.etag, cache: "HIT")
        }
        // A row cached for another customer is not proof that this one may not see the ticket (Desk owns ownership:
        // the cache may hold another Desk's ticket of the same id); Desk is asked, and never the cached row served.
        let cached = try await store.find(id: id).flatMap { $0.customerId == session.customerId ? $0 : nil }
        if let cached, Self.now() - cached.fetchedAt < settings.cacheTTLSeconds {
            memory.put(id, customerId: cached.customerId, channelUrl: cached.channelUrl, status: cached.status,
                       document: cached.document, fetchedAt: cached.fetchedAt, pending: cached.pendingOperations)
            return ServedTicket(body: TicketDocument.serve(cached.document, stale: false, pending: cached.pendingOperations), etag: nil, cache: "HIT")
        }
        do {
            let ticket = try await desk.ticket(DeskSession(token: session.deskToken), id: id)
            return try await save(ticket, customerId: session.customerId)
        } catch let error as DomainError where error.code == .upstreamUnavailable || error.code == .rateLimited {
            guard let cached else { throw error }
            return ServedTicket(body: TicketDocument.serve(cached.document, stale: true, pending: cached.pendingOperations), etag: nil, cache: "STALE")
        } catch let error as DomainError where error.code == .notFound {
            memory.remove(id)
            throw APIError.notFound("No ticket has this id.")
        }
    }

    func get(channelUrl: String, session: SessionRecord) async throws -> ServedTicket {
        let cached = try await store.find(channelUrl: channelUrl).flatMap { $0.customerId == session.customerId ? $0 : nil }
        if let cached, Self.now() - cached.fetchedAt < settings.cacheTTLSeconds {
            return ServedTicket(body: TicketDocument.serve(cached.document, stale: false, pending: cached.pendingOperations), etag: nil, cache: "HIT")
        }
        do {
            let ticket = try await desk.ticket(DeskSession(token: session.deskToken), channelUrl: channelUrl)
            return try await save(ticket, customerId: session.customerId)
        } catch let error as DomainError where error.code == .upstreamUnavailable || error.code == .rateLimited {
            guard let cached else { throw error }
            return ServedTicket(body: TicketDocument.serve(cached.document, stale: true, pending: cached.pendingOperations), etag: nil, cache: "STALE")
        } catch let error as DomainError where error.code == .notFound {
            throw APIError.notFound("No ticket has this channel URL.")
        }
    }

    /// Before a write: a ticket cached for another customer is re-read from Desk with this customer's session, which
    /// moves it to them if Desk says it is theirs and answers 404 otherwise.
    /// With `requireCached`, a ticket the cache does not hold at all is read from Desk too (and must be the caller's).
    func confirmOwnership(_ id: Int, session: SessionRecord, requireCached: Bool = false) async throws {
        let cached = try await store.find(id: id)
        if let cached, cached.customerId == session.customerId { return }
        if cached == nil, !requireCached { return }
        do {
            let ticket = try await desk.ticket(DeskSession(token: session.deskToken), id: id)
            try await save(ticket, customerId: session.customerId)
        } catch let error as DomainError where error.code == .notFound {
            throw APIError.notFound("No ticket has this id.")
        }
        guard try await store.find(id: id)?.customerId == session.customerId else { throw APIError.notFound("No ticket has this id.") }
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
    func refreshList(_ session: SessionRecord) async throws -> Bool {
        if let last = try await store.lastSync(customerId: session.customerId), Self.now() - last < settings.listTTLSeconds {
            return false
        }
        let tickets: [DeskTicket]
        switch await fetchAll(DeskSession(token: session.deskToken)) {
        case .success(let all):
            tickets = all
        case .failure(let error):
            if error.code == .upstreamUnavailable || error.code == .rateLimited { return true }
            throw error
        }
        let directory = await teams.current()
        let rows = tickets.map { TicketDocument.row($0, customerId: session.customerId, teams: directory) }
        report(try await store.upsert(rows))
        for row in rows { memory.remove(row.id) }
        try await store.markSynced(customerId: session.customerId)
        return false
    }

    private func fetchAll(_ deskSession: DeskSession) async -> Result<[DeskTicket], DomainError> {
        var tickets: [DeskTicket] = []
        do throws(DomainError) {
            try await forEachDeskPage(maxItems: settings.maxSyncTickets) { offset throws(DomainError) in
                try await desk.listTickets(deskSession, status: .all, limit: 50, offset: offset)
            } each: { page throws(DomainError) in
                tickets += page
            }
        } catch {
            return .failure(error)
        }
        return .success(tickets)
    }
}
