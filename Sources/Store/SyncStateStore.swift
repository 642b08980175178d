public import Domain
import Postgres

/// `sync_state` and the agent directory: where the Desk sync keeps its lease and its position.
public struct SyncStateStore: SyncState {
    let database: Database

    public init(database: Database) {
        self.database = database
    }

    /// A two-minute lease held by `instance`, taken over when it has run out; true when `instance` holds it now.
    public func takeLease(_ instance: String) async throws -> Bool {
        let rows = try await database.query("""
            INSERT INTO sync_state (name, value) VALUES ('lease', $1)
            ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, updated_at = now()
             WHERE sync_state.value = EXCLUDED.value OR sync_state.updated_at < now() - make_interval(secs => $2)
            RETURNING 1
            """, [instance, SyncLease.seconds])
        return !rows.isEmpty
    }

    public func renewLease(_ instance: String) async throws {
        try await database.query("UPDATE sync_state SET updated_at = now() WHERE name = 'lease' AND value = $1", [instance])
    }

    public func releaseLease(_ instance: String) async throws {
        try await database.query("DELETE FROM sync_state WHERE name = 'lease' AND value = $1", [instance])
    }

    /// The last day the ticket sync completed, and the tickets it must read again.
    public func ticketPosition() async throws -> (syncedThrough: String?, retry: [Int]) {
        let rows = try await database.query("SELECT name, value FROM sync_state WHERE name IN ('tickets.synced_through', 'tickets.retry')")
        var values: [String: String] = [:]
        for row in rows.rows { values[try row.decode(0)] = try row.decode(1) }
        return (values["tickets.synced_through"], (values["tickets.retry"] ?? "").split(separator: ",").compactMap { Int($0) })
    }

    public func saveTicketPosition(syncedThrough day: String, retry: [Int]) async throws {
        try await database.query("""
            INSERT INTO sync_state (name, value) VALUES ('tickets.synced_through', $1), ('tickets.retry', $2)
            ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, updated_at = now()
            """, [day, retry.sorted().map(String.init).joined(separator: ",")])
    }

    public func addRetry(_ ticketIds: [Int]) async throws {
        guard !ticketIds.isEmpty else { return }
        let retry = try await ticketPosition().retry
        let merged = Set(retry).union(ticketIds).sorted().map(String.init).joined(separator: ",")
        try await database.query("""
            INSERT INTO sync_state (name, value) VALUES ('tickets.retry', $1)
            ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, updated_at = now()
            """, [merged])
    }

    public func value(_ name: String) async throws -> String? {
        try await database.query("SELECT value FROM sync_state WHERE name = $1", [name]).first.map { try $0.decode(0) }
    }

    public func setValue(_ name: String, _ value: String?) async throws {
        if let value {
            try await database.query("""
                INSERT INTO sync_state (name, value) VALUES ($1, $2)
                ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, updated_at = now()
                """, [name, value])
        } else {
            try await database.query("DELETE FROM sync_state WHERE name = $1", [name])
        }
    }

    public func upsertAgents(_ agents: [DeskAgent]) async throws {
        try await database.transaction { tx in
            for agent in agents {
                try tx.query("""
                    INSERT INTO agents (id, display_name, sendbird_id) VALUES ($1, $2, $3)
                    ON CONFLICT (id) DO UPDATE SET display_name = EXCLUDED.display_name, sendbird_id = EXCLUDED.sendbird_id, updated_at = now()
                    """, [agent.id, agent.displayName, agent.sendbirdId])
            }
        }
    }

    public func upsertTeams(_ teams: [DeskTeam]) async throws {
        try await TicketStore(database: database).upsertTeams(teams.map { (id: $0.id, key: $0.key, name: $0.name) })
    }
}
