import Postgres
import Foundation

public struct ApiKeyRecord: Sendable {
    public let id: Int
    public let name: String
    public let scopes: [String]
    public let createdAt: Double
    public let lastUsedAt: Double?
    public let revokedAt: Double?
}

/// API keys for reporting clients: `dgk_` + 256 random bits; only the SHA-256 is stored.
public struct ApiKeyStore: Sendable {
    let pool: Database

    public init(pool: Database) {
        self.pool = pool
    }

    /// Returns the key (shown once) and its id.
    public func create(name: String, scopes: [String]) async throws -> (key: String, id: Int) {
        let key = "dgk_" + TokenVault.newToken()
        let rows = try await pool.query("INSERT INTO api_keys (name, key_hash, scopes) VALUES ($1, $2, $3::text[]) RETURNING id",
                                        [name, PostgresBytes(TokenVault.hash(key)), scopes])
        return (key, try rows[0].decode(0))
    }

    /// The scopes of a live key, or nil.
    public func scopes(of key: String) async throws -> [String]? {
        try await live(key)?.scopes
    }

    /// A live key's id and scopes, or nil.
    public func live(_ key: String) async throws -> (id: Int, scopes: [String])? {
        let rows = try await pool.query("""
            UPDATE api_keys SET last_used_at = now() WHERE key_hash = $1 AND revoked_at IS NULL RETURNING id, array_to_string(scopes, ',')
            """, [PostgresBytes(TokenVault.hash(key))])
        guard let row = rows.first else { return nil }
        return (try row.decode(0), try row.decode(1, as: String.self).split(separator: ",").map(String.init))
    }

    public func list() async throws -> [ApiKeyRecord] {
        try await pool.query("""
            SELECT id, name, array_to_string(scopes, ','), extract(epoch FROM created_at)::float8,
                   extract(epoch FROM last_used_at)::float8, extract(epoch FROM revoked_at)::float8
              FROM api_keys ORDER BY id
            """).map { row in
            ApiKeyRecord(id: try row.decode(0), name: try row.decode(1), scopes: try row.decode(2, as: String.self).split(separator: ",").map(String.init),
                         createdAt: try row.decode(3), lastUsedAt: try row.decodeIfPresent(4), revokedAt: try row.decodeIfPresent(5))
        }
    }

    /// Returns false when no live key has this id. Every instance hears of it at once (`RevocationListener`).
    public func revoke(id: Int) async throws -> Bool {
        try await pool.transaction { tx in
            let revoked = try tx.query("UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL", [id]).affectedRows == 1
            if revoked { try tx.query("SELECT pg_notify($1, $2)", [RevocationListener.channel, "api_key:\(id)"]) }
            return revoked
        }
    }
}
