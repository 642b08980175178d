import Foundation
import Store
import Logging
public import Postgres

/// The gateway started against a Desk other than the one its database caches.
public struct DeskIdentityMismatch: Error, CustomStringConvertible, Sendable {
    public let recorded: String
    public let configured: String

    public var description: String {
        """
        this database caches tickets of Desk '\(recorded)', but the gateway is configured for Desk '\(configured)'. \
        Ticket ids of one Desk mean other tickets (and customers) in another, so starting would serve wrong tickets. \
        To start over against '\(configured)' (CSAT ratings, reports and API keys are kept): run `desk-gateway cache reset` \
        with the same configuration, or set CACHE_RESET_ON_DESK_CHANGE=true once.
        """
    }
}

/// Which Desk a database's cache belongs to: recorded on the first start, checked on every later one.
enum DeskIdentity {
    static let settingKey = "desk_identity"

    /// Base URL (scheme and host lowercased, no trailing slash) and application id; for the embedded emulator its
    /// instance id, made when its state was first created (a new emulator is a new Desk).
    static func describe(baseURL: String?, appId: String, emulatorInstance: String?) -> String {
        if let emulatorInstance { return "embedded emulator \(emulatorInstance) (app \(appId))" }
        var url = baseURL ?? ""
        while url.hasSuffix("/") { url.removeLast() }
        if var components = URLComponents(string: url) {
            components.scheme = components.scheme?.lowercased()
            components.host = components.host?.lowercased()
            url = components.string ?? url
        }
        return "\(url) (app \(appId))"
    }

    static func recorded(_ pool: PostgresPool) async throws -> String? {
        try await pool.query("SELECT value FROM gateway_settings WHERE key = $1", [settingKey]).first?.decode(0)
    }

    /// Records `identity` if none is, otherwise compares. A different one is refused unless `allowReset`, which clears
    /// the cache first (`resetCache`) and then records the new identity.
    static func verify(_ identity: String, pool: PostgresPool, allowReset: Bool, logger: Logger) async throws {
        try await pool.query("INSERT INTO gateway_settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
                             [settingKey, identity])
        guard let recorded = try await recorded(pool), recorded != identity else { return }
        guard allowReset else { throw DeskIdentityMismatch(recorded: recorded, configured: identity) }
        let removed = try await resetCache(pool)
        try await pool.query("INSERT INTO gateway_settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                             [settingKey, identity])
        logger.warning("Desk changed: the ticket cache was reset (CACHE_RESET_ON_DESK_CHANGE=true)",
                       metadata: ["previous": "\(recorded)", "current": "\(identity)", "removed": "\(removed)"])
    }
}

/// What `resetCache` removed, by table.
public struct CacheResetSummary: Sendable, CustomStringConvertible {
    public var counts: [(table: String, rows: Int)] = []
    public var description: String { counts.map { "\($0.table) \($0.rows)" }.joined(separator: ", ") }
}

/// Forgets everything that belongs to one Desk: cached tickets and lists, sessions (they hold that Desk's session
/// tokens), queued customer writes, idempotency records (they replay answers about its tickets), the webhook inbox
/// and the sync position, and the recorded identity. CSAT ratings and requests, rollups, the agent and team names
/// they refer to, API keys and the session key stay.
public func resetCache(_ pool: PostgresPool) async throws -> CacheResetSummary {
    try await pool.transaction { tx in
        var summary = CacheResetSummary()
        for table in ["outbox", "idempotency_keys", "sessions", "customer_syncs", "tickets", "webhook_events"] {
            summary.counts.append((table, try tx.query("DELETE FROM \(table)").affectedRows))
        }
        try tx.query("UPDATE customers SET desk_customer_id = NULL WHERE desk_customer_id IS NOT NULL")
        summary.counts.append(("sync_state", try tx.query("DELETE FROM sync_state").affectedRows))
        try tx.query("DELETE FROM gateway_settings WHERE key = $1", [DeskIdentity.settingKey])
        return summary
    }
}
