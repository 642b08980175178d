public import Domain
import Postgres

/// Sessions of the report page: a cookie token (256 random bits, only its SHA-256 stored) bound to the reports API
/// key that opened it. A session ends at sign-out, at expiry, or as soon as its key is revoked (checked on every page).
public struct ReportSessionStore: ReportSessionDirectory {
    let database: Database

    public init(database: Database) {
        self.database = database
    }

    /// Opens a session for a live key with the reports scope; nil for any other key (unknown, revoked, other scope).
    public func open(key: String, lifetimeSeconds: Int) async throws -> String? {
        let token = TokenVault.newToken()
        let rows = try await database.query("""
            INSERT INTO report_sessions (token_hash, api_key_id, expires_at)
            SELECT $1, id, now() + make_interval(secs => $3) FROM api_keys
             WHERE key_hash = $2 AND revoked_at IS NULL AND 'reports' = ANY (scopes)
            RETURNING id
            """, [PostgresBytes(TokenVault.hash(token)), PostgresBytes(TokenVault.hash(key)), Double(lifetimeSeconds)])
        return rows.first == nil ? nil : token
    }

    /// The id of the API key behind a live session and the teams it is limited to (nil: every team), or nil.
    public func key(of token: String) async throws -> (id: Int, teamIds: [Int]?)? {
        let rows = try await database.query("""
            SELECT k.id, array_to_string(k.team_ids, ',') FROM report_sessions s JOIN api_keys k ON k.id = s.api_key_id
             WHERE s.token_hash = $1 AND s.expires_at > now() AND k.revoked_at IS NULL AND 'reports' = ANY (k.scopes)
            """, [PostgresBytes(TokenVault.hash(token))])
        guard let row = rows.first else { return nil }
        return (try row.decode(0, as: Int.self), APIKeyStore.ids(row[1]))
    }

    public func close(token: String) async throws {
        _ = try await database.query("DELETE FROM report_sessions WHERE token_hash = $1", [PostgresBytes(TokenVault.hash(token))])
    }
}
