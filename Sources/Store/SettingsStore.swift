public import Domain
import Postgres

/// What `SettingsStore.resetDeskCache` removed, by table, and how much of it was still to be done.
public struct CacheResetSummary: Sendable, CustomStringConvertible {
    public var counts: [(table: String, rows: Int)] = []
    public var discarded = PendingDeskWork(writes: 0, events: 0)
    public var description: String {
        counts.map { "\($0.table) \($0.rows)" }.joined(separator: ", ")
            + (discarded.isEmpty ? "" : " (\(discarded) among them, discarded)")
    }
}

/// `gateway_settings`: small named values the gateway keeps about itself (which Desk its cache belongs to…).
public struct SettingsStore: Sendable {
    let database: Database

    public init(database: Database) {
        self.database = database
    }

    public func value(_ key: String) async throws -> String? {
        try await database.query("SELECT value FROM gateway_settings WHERE key = $1", [key]).first?.decode(0)
    }

    /// Stores `value` unless `key` already has one; returns what is stored afterwards.
    public func valueSettingIfMissing(_ key: String, to value: String) async throws -> String? {
        try await database.query("INSERT INTO gateway_settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING", [key, value])
        return try await self.value(key)
    }

    public func set(_ key: String, to value: String) async throws {
        try await database.query("INSERT INTO gateway_settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                             [key, value])
    }

    /// Forgets everything that belongs to one Desk: cached tickets and lists, sessions (they hold that Desk's session
    /// tokens), queued customer writes, idempotency records (they replay answers about its tickets), the webhook inbox
    /// and the sync position, and the setting `identityKey`. CSAT ratings and requests, rollups, the agent and team
    /// names they refer to, API keys and the session key stay.
    ///
    /// Writes and webhooks the gateway acknowledged and has not yet carried out are not discarded unless
    /// `discardingPending`: otherwise the reset throws `PendingDeskWork` and changes nothing. The two tables are locked
    /// against writes first, so what is counted is what would be deleted.
    public func resetDeskCache(identityKey: String, discardingPending: Bool) async throws -> CacheResetSummary {
        try await database.transaction { tx in
            var summary = CacheResetSummary()
            try tx.query("LOCK TABLE outbox, webhook_events IN EXCLUSIVE MODE")
            let pending = PendingDeskWork(
                writes: try tx.query("SELECT count(*) FROM outbox WHERE status = 'pending'").first?.decode(0) ?? 0,
                events: try tx.query("SELECT count(*) FROM webhook_events WHERE status = 'pending'").first?.decode(0) ?? 0)
            if !pending.isEmpty, !discardingPending { throw pending }
            summary.discarded = pending
            for table in ["outbox", "idempotency_keys", "sessions", "customer_syncs", "tickets", "webhook_events"] {
                summary.counts.append((table, try tx.query("DELETE FROM \(table)").affectedRows))
            }
            try tx.query("UPDATE customers SET desk_customer_id = NULL WHERE desk_customer_id IS NOT NULL")
            summary.counts.append(("sync_state", try tx.query("DELETE FROM sync_state").affectedRows))
            try tx.query("DELETE FROM gateway_settings WHERE key = $1", [identityKey])
            return summary
        }
    }
}
