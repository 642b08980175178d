import Foundation
import Synchronization

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

    private let entries = Mutex<[Int: Entry]>([:])
    private let capacity: Int

    init(capacity: Int = 50_000) {
        self.capacity = capacity
    }

    func get(_ id: Int) -> Entry? {
        entries.withLock { $0[id] }
    }

    func put(_ id: Int, customerId: Int, channelUrl: String, status: String, document: String, fetchedAt: Double, pending: String = "[]") {
        let body = TicketDocument.serve(document, stale: false, pending: pending)
        let entry = Entry(customerId: customerId, channelUrl: channelUrl, status: status, body: body, etag: ETag.of(body),
                          fetchedAt: fetchedAt)
        entries.withLock { entries in
            if entries.count >= capacity, entries[id] == nil {
                // Cheap eviction: drop an arbitrary half; the PostgreSQL cache still has everything.
                for key in entries.keys.prefix(capacity / 2) { entries.removeValue(forKey: key) }
            }
            entries[id] = entry
        }
    }

    func remove(_ id: Int) {
        _ = entries.withLock { $0.removeValue(forKey: id) }
    }
}
