public import Domain
import Postgres

public struct APIKeyRecord: Sendable {
    public let id: Int
    public let name: String
    public let scopes: [String]
    /// The teams a team-scoped key sees; nil: every team.
    public let teamIds: [Int]?
    public let createdAt: Double
    public let lastUsedAt: Double?
    public let revokedAt: Double?
}

/// API keys for reporting clients: `dgk_` + 256 random bits; only the SHA-256 is stored.
public struct APIKeyStore: APIKeyDirectory {
    let database: Database

    public init(database: Database) {
        self.database = database
    }

    /// Returns the key (shown once) and its id. `teams` (ids or Desk team keys) limit what the key sees; each must
    /// name a known team.
    public func create(name: String, scopes: [String], teams: [String] = []) async throws -> (key: String, id: Int) {
        let teamIds: [Int]? = teams.isEmpty ? nil : try await resolve(teams: teams)
        let key = "dgk_" + TokenVault.newToken()
        let rows = try await database.query("INSERT INTO api_keys (name, key_hash, scopes, team_ids) VALUES ($1, $2, $3::text[], $4::bigint[]) RETURNING id",
                                        [name, PostgresBytes(TokenVault.hash(key)), scopes, teamIds])
        return (key, try rows[0].decode(0))
    }

    /// Team ids for ids or Desk team keys; a name that is neither is an error naming it.
    func resolve(teams: [String]) async throws -> [Int] {
        let rows = try await database.query("SELECT id, coalesce(key, '') FROM teams WHERE key = ANY($1::text[]) OR id::text = ANY($1::text[])", [teams])
        var byName: [String: Int] = [:]
        for row in rows {
            let id: Int = try row.decode(0)
            byName[String(id)] = id
            byName[try row.decode(1, as: String.self)] = id
        }
        let unknown = teams.filter { byName[$0] == nil }
        guard unknown.isEmpty else { throw UnknownTeams(names: unknown) }
        return Array(Set(teams.compactMap { byName[$0] })).sorted()
    }

    public struct UnknownTeams: Error, CustomStringConvertible {
        public let names: [String]
        public var description: String { "no team with the id or key \(names.joined(separator: ", ")) (teams come from Desk's sync)" }
    }

    /// The scopes of a live key, or nil.
    public func scopes(of key: String) async throws -> [String]? {
        try await live(key)?.scopes
    }

    /// A live key's id, scopes and teams (nil: every team), or nil.
    public func live(_ key: String) async throws -> (id: Int, scopes: [String], teamIds: [Int]?)? {
        let hash = PostgresBytes(TokenVault.hash(key))
        let rows = try await database.withConnection { connection in
            do {
                return try connection.query("""
                    UPDATE api_keys SET last_used_at = now() WHERE key_hash = $1 AND revoked_at IS NULL
                    RETURNING id, array_to_string(scopes, ','), array_to_string(team_ids, ',')
                    """, [hash])
            } catch let error as PostgresError where error.sqlState == PostgresError.readOnlyTransaction {
                // A database that takes no writes (a standby, a failover under way) still answers who the key is:
                // reports are reads, and only the key's last use goes unrecorded. Only that refusal is read again: a
                // database that is away, or a pool with no free connection, fails once, not twice.
                return try connection.query("""
                    SELECT id, array_to_string(scopes, ','), array_to_string(team_ids, ',') FROM api_keys
                     WHERE key_hash = $1 AND revoked_at IS NULL
                    """, [hash])
            }
        }
        guard let row = rows.first else { return nil }
        return (try row.decode(0), try row.decode(1, as: String.self).split(separator: ",").map(String.init), Self.ids(row[2]))
    }

    static func ids(_ text: String?) -> [Int]? {
        text.map { $0.split(separator: ",").compactMap { Int($0) } }
    }

    public func list() async throws -> [APIKeyRecord] {
        try await database.query("""
            SELECT id, name, array_to_string(scopes, ','), extract(epoch FROM created_at)::float8,
                   extract(epoch FROM last_used_at)::float8, extract(epoch FROM revoked_at)::float8, array_to_string(team_ids, ',')
              FROM api_keys ORDER BY id
            """).map { row in
            APIKeyRecord(id: try row.decode(0), name: try row.decode(1), scopes: try row.decode(2, as: String.self).split(separator: ",").map(String.init),
                         teamIds: Self.ids(row[6]), createdAt: try row.decode(3), lastUsedAt: try row.decodeIfPresent(4), revokedAt: try row.decodeIfPresent(5))
        }
    }

    /// Returns false when no live key has this id. Every instance hears of it at once (`RevocationListener`).
    public func revoke(id: Int) async throws -> Bool {
        try await database.transaction { tx in
            let revoked = try tx.query("UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL", [id]).affectedRows == 1
            if revoked { try tx.query("SELECT pg_notify($1, $2)", [RevocationListener.channel, "api_key:\(id)"]) }
            return revoked
        }
    }
}
