public import Domain
import Postgres

/// Customers and bearer sessions in PostgreSQL.
public struct SessionStore: SessionDirectory {
    let database: Database
    let vault: TokenVault

    public init(database: Database, vault: TokenVault) {
        self.database = database
        self.vault = vault
    }

    /// Upserts the customer and opens a session; returns the new bearer token (never stored) and its record.
    public func open(sendbirdId: String, displayName: String?, deskCustomerId: Int?, deskToken: String,
                     lifetimeSeconds: Int) async throws -> (token: String, record: SessionRecord) {
        let token = TokenVault.newToken()
        let hash = TokenVault.hash(token)
        let sealed = try vault.seal(deskToken, boundTo: hash)
        let row = try await database.transaction { tx in
            let customer = try tx.query("""
                INSERT INTO customers (sendbird_id, display_name, desk_customer_id) VALUES ($1, $2, $3)
                ON CONFLICT (sendbird_id) DO UPDATE
                   SET display_name = COALESCE(EXCLUDED.display_name, customers.display_name),
                       desk_customer_id = COALESCE(EXCLUDED.desk_customer_id, customers.desk_customer_id),
                       updated_at = now()
                RETURNING id
                """, [sendbirdId, displayName, deskCustomerId])
            let customerId: Int = try customer[0].decode(0)
            let session = try tx.query("""
                INSERT INTO sessions (token_hash, customer_id, desk_token_sealed, expires_at)
                VALUES ($1, $2, $3, now() + make_interval(secs => $4))
                RETURNING id, extract(epoch FROM expires_at)::float8
                """, [PostgresBytes(hash), customerId, PostgresBytes(sealed), lifetimeSeconds])
            return (customerId, try session[0].decode(0, as: Int.self), try session[0].decode(1, as: Double.self))
        }
        return (token, SessionRecord(sessionId: row.1, customerId: row.0, sendbirdId: sendbirdId, deskToken: deskToken, expiresAt: row.2))
    }

    /// The live session for a bearer token; nil when unknown, expired or revoked.
    public func find(token: String) async throws -> SessionRecord? {
        let hash = TokenVault.hash(token)
        let rows = try await database.query("""
            SELECT s.id, s.customer_id, c.sendbird_id, s.desk_token_sealed, extract(epoch FROM s.expires_at)::float8
              FROM sessions s JOIN customers c ON c.id = s.customer_id
             WHERE s.token_hash = $1 AND s.revoked_at IS NULL AND s.expires_at > now()
            """, [PostgresBytes(hash)])
        guard let row = rows.first else { return nil }
        let sealed: PostgresBytes = try row.decode(3)
        guard let deskToken = try? vault.open(sealed.bytes, boundTo: hash) else { return nil }
        return SessionRecord(sessionId: try row.decode(0), customerId: try row.decode(1), sendbirdId: try row.decode(2),
                             deskToken: deskToken, expiresAt: try row.decode(4))
    }

    /// The Desk token of a session for background delivery (even after the session expired: Desk decides).
    public func deskToken(sessionId: Int) async throws -> String? {
        try unsealed(try await database.query("SELECT token_hash, desk_token_sealed FROM sessions WHERE id = $1", [sessionId]).first)
    }

    /// The newest later session's Desk token, signed out or expired or not (Desk decides, as for the write's own).
    public func newestDeskToken(customerId: Int, after sessionId: Int) async throws -> String? {
        try unsealed(try await database.query("""
            SELECT token_hash, desk_token_sealed FROM sessions WHERE customer_id = $1 AND id > $2 ORDER BY id DESC LIMIT 1
            """, [customerId, sessionId]).first)
    }

    /// The Desk token of a (token_hash, desk_token_sealed) row; nil when there is none or it does not open.
    private func unsealed(_ row: PostgresRow?) throws -> String? {
        guard let row else { return nil }
        let hash: PostgresBytes = try row.decode(0)
        let sealed: PostgresBytes = try row.decode(1)
        return try? vault.open(sealed.bytes, boundTo: hash.bytes)
    }

    public func revoke(sessionId: Int) async throws {
        try await database.query("UPDATE sessions SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL", [sessionId])
    }

    /// The session key: from configuration, or generated once and kept in the database (development only).
    public static func sessionKey(configured: [UInt8]?, database: Database) async throws -> (key: [UInt8], generated: Bool) {
        if let configured { return (configured, false) }
        let candidate = Codec.base64URL(TokenVault.generateKey())
        let rows = try await database.query("""
            WITH inserted AS (
                INSERT INTO gateway_settings (key, value) VALUES ('session_key', $1) ON CONFLICT (key) DO NOTHING RETURNING value)
            SELECT value FROM inserted UNION ALL SELECT value FROM gateway_settings WHERE key = 'session_key' LIMIT 1
            """, [candidate])
        let text: String = try rows[0].decode(0)
        guard let key = Codec.decodeBase64(text), key.count == 32 else { throw StoreError.sealing }
        return (key, true)
    }

}
