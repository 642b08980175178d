public import Domain

/// The read rules of the customer API, one function for a ticket named by id or by channel:
/// - the cache answers while its copy is younger than `ttl` and belongs to the caller;
/// - otherwise Desk is asked with the caller's session, and its answer is cached (Desk owns ownership: a copy
///   cached for another customer is never served, Desk decides);
/// - when Desk cannot be reached (down, rate limited, answering what cannot be read), or has not answered within
///   `staleBudget` while the caller has a cached copy (a hanging Desk would hold the read for every attempt's
///   deadline), the caller's own cached copy is served marked stale;
/// - when Desk says the ticket does not exist, it is forgotten and the answer is not found.
public struct TicketReader: Sendable {
    public enum Freshness: String, Sendable {
        /// From the cache, young enough.
        case hit = "HIT"
        /// Read from Desk just now.
        case miss = "MISS"
        /// The cache's copy, because Desk could not be reached.
        case stale = "STALE"
    }

    let cache: any TicketCache
    let desk: any DeskTicketSource
    let ttl: Double
    let staleBudget: Duration?
    let now: @Sendable () -> Double

    public init(cache: any TicketCache, desk: any DeskTicketSource, ttl: Double, staleBudget: Duration? = nil,
                now: (@Sendable () -> Double)? = nil) {
        self.cache = cache
        self.desk = desk
        self.ttl = ttl
        self.staleBudget = staleBudget
        self.now = now ?? { WallClock.seconds() }
    }

    public func read(_ key: TicketKey, customerId: Int, deskToken: String) async throws -> (ticket: CachedTicket, freshness: Freshness) {
        let cached = try await cache.find(key).flatMap { $0.customerId == customerId ? $0 : nil }
        if let cached, now() - cached.fetchedAt < ttl { return (cached, .hit) }
        do {
            let fresh: DeskTicket
            if let cached, let staleBudget {
                // The whole Desk read (every attempt) within the budget; past it the copy is served and the read let go.
                guard let answer = try await withDeadline(staleBudget, { [desk] in try await desk.ticket(key, deskToken: deskToken) }) else {
                    return (cached, .stale)
                }
                fresh = answer
            } else {
                fresh = try await desk.ticket(key, deskToken: deskToken)
            }
            do {
                return (try await cache.save(fresh, customerId: customerId), .miss)
            } catch let error as DomainError where error.code == .storeUnavailable && cached != nil {
                // A database that takes no writes (a failover under way) still holds the copy: served stale, as while
                // Desk is away.
                return (cached!, .stale)
            }
        } catch let error as DomainError where error.deskGaveNoUsableAnswer {
            guard let cached else { throw error }
            return (cached, .stale)
        } catch let error as DomainError where error.code == .notFound {
            cache.forget(key)
            throw Self.notFound(key)
        }
    }

    /// Before a write: a ticket cached for another customer is re-read from Desk with this customer's session (which
    /// moves it to them when Desk says it is theirs); with `requireCached` a ticket the cache does not hold is read
    /// too. Not found unless the ticket is the caller's afterwards.
    public func confirmOwnership(_ id: Int, customerId: Int, deskToken: String, requireCached: Bool = false) async throws {
        let cached = try await cache.find(.id(id))
        if let cached, cached.customerId == customerId { return }
        if cached == nil, !requireCached { return }
        let saved: CachedTicket
        do {
            saved = try await cache.save(try await desk.ticket(.id(id), deskToken: deskToken), customerId: customerId)
        } catch let error as DomainError where error.code == .notFound {
            throw Self.notFound(.id(id))
        }
        guard saved.customerId == customerId else { throw Self.notFound(.id(id)) }
    }

    static func notFound(_ key: TicketKey) -> DomainError {
        switch key {
        case .id: return DomainError(.notFound, "No ticket has this id.")
        case .channel: return DomainError(.notFound, "No ticket has this channel URL.")
        }
    }
}
