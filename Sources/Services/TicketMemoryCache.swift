import Domain

/// The hottest tickets as ready-to-send documents, in front of the PostgreSQL cache. Entries follow the same
/// freshness rule (`ttl`); every write through this instance replaces its entry.
public final class TicketMemoryCache: Sendable {
    public struct Entry: Sendable {
        public let customerId: Int
        public let channelUrl: String
        public let status: String
        public let body: [UInt8]
        public let etag: String
        public let fetchedAt: Double
    }

    private let entries: TTLCache<Int, Entry>
    private let etag: @Sendable ([UInt8]) -> String

    init(capacity: Int = 10_000, etag: @escaping @Sendable ([UInt8]) -> String) {
        self.etag = etag
        // Freshness is the caller's rule (`fetchedAt` against the cache TTL); the TTL here only guides eviction.
        entries = TTLCache(ttl: 600, capacity: capacity)
    }

    public var count: Int { entries.count }

    /// The body and tag of the entry if `customerId` owns it and it was fetched after `since`, read in place (the
    /// cached read needs nothing else of it).
    public func served(_ id: Int, customerId: Int, fetchedAfter since: Double) -> (body: [UInt8], etag: String)? {
        entries.read(id) { entry in
            entry.value.customerId == customerId && entry.value.fetchedAt > since ? (entry.value.body, entry.value.etag) : nil
        }
    }

    public func put(_ id: Int, customerId: Int, channelUrl: String, status: String, document: String, fetchedAt: Double, pending: String = "[]") {
        let body = TicketDocument.serve(document, stale: false, pending: pending)
        let entry = Entry(customerId: customerId, channelUrl: channelUrl, status: status, body: body, etag: etag(body),
                          fetchedAt: fetchedAt)
        entries.put(id, entry, at: fetchedAt)
    }

    public func remove(_ id: Int) {
        entries.remove(id)
    }
}
