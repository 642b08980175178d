import Domain
import Foundation

/// The hottest tickets as ready-to-send documents, in front of the PostgreSQL cache. Entries follow the same
/// freshness rule (`ttl`); every write through this instance replaces its entry.
final class TicketMemoryCache: Sendable {
    struct Entry: Sendable {
        let customerId: Int
        let channelUrl: String
        let status: String
        let body: [UInt8]
        let etag: String
        let fetchedAt: Double
    }

    private let entries: TTLCache<Int, Entry>

    init(capacity: Int = 10_000) {
        // Freshness is the caller's rule (`fetchedAt` against the cache TTL); the TTL here only guides eviction.
        entries = TTLCache(ttl: 600, capacity: capacity)
    }

    var count: Int { entries.count }

    func get(_ id: Int) -> Entry? {
        entries.lookup(id)?.value
    }

    func put(_ id: Int, customerId: Int, channelUrl: String, status: String, document: String, fetchedAt: Double, pending: String = "[]") {
        let body = TicketDocument.serve(document, stale: false, pending: pending)
        let entry = Entry(customerId: customerId, channelUrl: channelUrl, status: status, body: body, etag: ETag.of(body),
                          fetchedAt: fetchedAt)
        entries.put(id, entry, at: fetchedAt)
    }

    func remove(_ id: Int) {
        entries.remove(id)
    }
}
