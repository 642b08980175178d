public import Domain
import JSON
import Postgres

/// `Idempotency-Key` records: the first request with a key claims it; its answer is stored and replayed.
public struct IdempotencyStore: IdempotencyKeys {
    public typealias Claim = IdempotencyClaim

    let database: Database
    /// The replay window: a key older than this is taken over by the next request (housekeeping removes it).
    let windowSeconds: Double

    public init(database: Database, windowHours: Double) {
        self.database = database
        windowSeconds = windowHours * 3600
    }

    public func claim(principal: String, key: String, requestHash: [UInt8]) async throws -> Claim {
        try await database.withConnection { connection in
            let inserted = try connection.query("""
                INSERT INTO idempotency_keys (principal, key, request_hash) VALUES ($1, $2, $3)
                ON CONFLICT (principal, key) DO NOTHING RETURNING 1
                """, [principal, key, PostgresBytes(requestHash)])
            if !inserted.isEmpty { return .claimed }
            let rows = try connection.query("""
                SELECT request_hash, status, headers::text, body FROM idempotency_keys
                 WHERE principal = $1 AND key = $2 AND created_at > now() - $3::float8 * interval '1 second'
                """, [principal, key, windowSeconds])
            guard let row = rows.first else {
                // Expired: take it over.
                try connection.query("""
                    UPDATE idempotency_keys SET request_hash = $3, status = NULL, headers = NULL, body = NULL, created_at = now()
                     WHERE principal = $1 AND key = $2
                    """, [principal, key, PostgresBytes(requestHash)])
                return .claimed
            }
            let stored: PostgresBytes = try row.decode(0)
            guard stored.bytes == requestHash else { return .mismatch }
            guard let status: Int = try row.decodeIfPresent(1) else { return .inProgress }
            let headers = try Self.parseHeaders(try row.decodeIfPresent(2) ?? "[]")
            let body: PostgresBytes = try row.decodeIfPresent(3) ?? PostgresBytes([])
            return .replay(status: status, headers: headers, body: body.bytes)
        }
    }

    public func complete(principal: String, key: String, status: Int, headers: [(String, String)], body: [UInt8]) async throws {
        let headerJSON = JSONValue.array(headers.map { .array([.string($0.0), .string($0.1)]) }).serialized()
        try await database.query("UPDATE idempotency_keys SET status = $3, headers = $4::jsonb, body = $5 WHERE principal = $1 AND key = $2",
                             [principal, key, status, headerJSON, PostgresBytes(body)])
    }

    /// Lets a failed attempt be retried with the same key.
    public func release(principal: String, key: String) async throws {
        try await database.query("DELETE FROM idempotency_keys WHERE principal = $1 AND key = $2 AND status IS NULL", [principal, key])
    }

    /// `[[name, value], …]` as written by `complete`.
    static func parseHeaders(_ text: String) throws -> [(String, String)] {
        let value = try JSONParser.parse(text)
        return (value.arrayValue ?? []).compactMap { pair in
            guard let items = pair.arrayValue, items.count == 2, let name = items[0].stringValue, let value = items[1].stringValue else { return nil }
            return (name, value)
        }
    }
}
