import Domain
import Services
import Synchronization
import Testing

/// The ticket cache in memory.
final class FakeTicketCache: TicketCache {
    let tickets = Mutex<[Int: CachedTicket]>([:])
    let forgotten = Mutex<[TicketKey]>([])

    func put(_ id: Int, customer: Int, fetchedAt: Double, document: String = "{}") {
        tickets.withLock { $0[id] = CachedTicket(id: id, customerId: customer, channelUrl: "channel-\(id)", status: "ACTIVE", document: document,
                                                 fetchedAt: fetchedAt, createdAt: 0, pendingOperations: "[]") }
    }

    func find(_ key: TicketKey) async throws -> CachedTicket? {
        tickets.withLock { tickets in
            switch key {
            case .id(let id): return tickets[id]
            case .channel(let url): return tickets.values.first { $0.channelUrl == url }
            }
        }
    }

    func save(_ ticket: DeskTicket, customerId: Int) async throws -> CachedTicket {
        let saved = CachedTicket(id: ticket.id, customerId: customerId, channelUrl: "channel-\(ticket.id)", status: ticket.status.rawValue,
                                 document: "desk", fetchedAt: 1_000, createdAt: 0, pendingOperations: "[]")
        tickets.withLock { $0[ticket.id] = saved }
        return saved
    }

    func forget(_ key: TicketKey) {
        forgotten.withLock { $0.append(key) }
        if case .id(let id) = key { _ = tickets.withLock { $0.removeValue(forKey: id) } }
    }
}

/// Desk's customer API in memory: which tickets each session token may read, or one failure for every call.
final class FakeTicketSource: DeskTicketSource {
    let readable = Mutex<[String: Set<Int>]>([:])
    let failure = Mutex<DomainError?>(nil)
    let calls = Mutex(0)

    func ticket(_ key: TicketKey, deskToken: String) async throws(DomainError) -> DeskTicket {
        calls.withLock { $0 += 1 }
        if let failure = failure.withLock({ $0 }) { throw failure }
        guard case .id(let id) = key, readable.withLock({ $0[deskToken]?.contains(id) ?? false }) else {
            throw DomainError(.notFound, "No such ticket.")
        }
        return Make.ticket(id, closedAt: nil)
    }
}

@Suite struct TicketReaderTests {
    static func reader(_ cache: FakeTicketCache, _ desk: FakeTicketSource) -> TicketReader {
        TicketReader(cache: cache, desk: desk, ttl: 15, now: { 1_000 })
    }

    @Test func aFreshCopyOfTheCallersTicketIsServedWithoutAskingDesk() async throws {
        let (cache, desk) = (FakeTicketCache(), FakeTicketSource())
        cache.put(1, customer: 7, fetchedAt: 990, document: "cached")
        let (ticket, freshness) = try await Self.reader(cache, desk).read(.id(1), customerId: 7, deskToken: "t7")
        #expect(freshness == .hit && ticket.document == "cached")
        #expect(desk.calls.withLock { $0 } == 0)
        // By channel, the same rule.
        #expect(try await Self.reader(cache, desk).read(.channel("channel-1"), customerId: 7, deskToken: "t7").freshness == .hit)
    }

    @Test func anOldCopyIsReadAgainFromDeskAndStaleOnlyWhenDeskIsAway() async throws {
        let (cache, desk) = (FakeTicketCache(), FakeTicketSource())
        cache.put(1, customer: 7, fetchedAt: 900, document: "old")
        desk.readable.withLock { $0["t7"] = [1] }
        let (fresh, freshness) = try await Self.reader(cache, desk).read(.id(1), customerId: 7, deskToken: "t7")
        #expect(freshness == .miss && fresh.document == "desk")
        cache.put(1, customer: 7, fetchedAt: 900, document: "old")
        for code in [DomainError.Code.upstreamUnavailable, .rateLimited] {
            desk.failure.withLock { $0 = DomainError(code, "away") }
            let (stale, staleness) = try await Self.reader(cache, desk).read(.id(1), customerId: 7, deskToken: "t7")
            #expect(staleness == .stale && stale.document == "old")
        }
        // Nothing cached: Desk's trouble is the answer.
        await #expect(throws: DomainError.self) { _ = try await Self.reader(cache, desk).read(.id(2), customerId: 7, deskToken: "t7") }
    }

    @Test func anotherCustomersCopyIsNeverServedDeskDecides() async throws {
        let (cache, desk) = (FakeTicketCache(), FakeTicketSource())
        cache.put(1, customer: 8, fetchedAt: 999, document: "theirs")
        // Desk says it is not this customer's: not found, and the copy is forgotten.
        do {
            _ = try await Self.reader(cache, desk).read(.id(1), customerId: 7, deskToken: "t7")
            Issue.record("another customer's ticket was served")
        } catch let error as DomainError {
            #expect(error.code == .notFound)
        }
        #expect(cache.forgotten.withLock { $0 } == [.id(1)])
        // Desk away: still not served stale to someone else.
        cache.put(1, customer: 8, fetchedAt: 999, document: "theirs")
        desk.failure.withLock { $0 = DomainError(.upstreamUnavailable, "away") }
        await #expect(throws: DomainError.self) { _ = try await Self.reader(cache, desk).read(.id(1), customerId: 7, deskToken: "t7") }
        // Desk says it is this customer's now (another Desk's ticket of the same id was cached): it moves to them.
        desk.failure.withLock { $0 = nil }
        desk.readable.withLock { $0["t7"] = [1] }
        let (moved, freshness) = try await Self.reader(cache, desk).read(.id(1), customerId: 7, deskToken: "t7")
        #expect(freshness == .miss && moved.customerId == 7)
    }

    @Test func writesConfirmOwnershipWithDeskWhenTheCacheCannotVouch() async throws {
        let (cache, desk) = (FakeTicketCache(), FakeTicketSource())
        cache.put(1, customer: 7, fetchedAt: 0)
        try await Self.reader(cache, desk).confirmOwnership(1, customerId: 7, deskToken: "t7")
        #expect(desk.calls.withLock { $0 } == 0)
        // Not cached: fine for ordinary writes, asked of Desk when the write requires it.
        try await Self.reader(cache, desk).confirmOwnership(2, customerId: 7, deskToken: "t7")
        await #expect(throws: DomainError.self) { try await Self.reader(cache, desk).confirmOwnership(2, customerId: 7, deskToken: "t7", requireCached: true) }
        // Cached for someone else: Desk decides.
        cache.put(3, customer: 8, fetchedAt: 0)
        await #expect(throws: DomainError.self) { try await Self.reader(cache, desk).confirmOwnership(3, customerId: 7, deskToken: "t7") }
        desk.readable.withLock { $0["t7"] = [3] }
        try await Self.reader(cache, desk).confirmOwnership(3, customerId: 7, deskToken: "t7")
        #expect(try await cache.find(.id(3))?.customerId == 7)
    }
}
