public import Domain
import JSON
import Postgres

/// `Idempotency-Key` records: the first request with a key claims it; its answer is stored and replayed.
public struct IdempotencyStore: IdempotencyKeys {
    public typealias Claim = IdempotencyClaim

    let database: Database
    /// The replay window: a key older than this is taken over by the next request (housekeeping removes it).
    let windowSeconds: Double
    /// How long a claim may stay unanswered: longer than any request can run. A claim older than this without an
    /// answer belongs to a request that will never finish (its instance was killed, or storing its answer failed), and
    /// a retry with the same body takes it over instead of meeting 409 until the window ends.
    let leaseSeconds: Double

    public init(database: Database, windowHours: Double, leaseSeconds: Double = 300) {
        self.database = database
        windowSeconds = windowHours * 3600
        self.leaseSeconds = leaseSeconds
    }

    public func claim(principal: String, key: String, requestHash: [UInt8]) async throws -> Claim {
        let hash = PostgresBytes(requestHash)
        return try await database.withConnection { connection in
            // A key that vanished between the statements (its claim released) is tried once more.
            for _ in 0..<2 {
                let inserted = try connection.query("""
                    INSERT INTO idempotency_keys (principal, key, request_hash) VALUES ($1, $2, $3)
                    ON CONFLICT (principal, key) DO NOTHING RETURNING 1
                    """, [principal, key, hash])
                if !inserted.isEmpty { return .claimed(unanswered: nil) }
                // Past the window, or an attempt of this very request that ended unanswered (released so, or its
                // instance died: the lease ran out): taken over, and told of the attempts before. The condition is
                // checked again under the row's lock, so of two retries at once only one takes it.
                let taken = try connection.query("""
                    WITH old AS (SELECT created_at, unanswered_since, settles_at FROM idempotency_keys
                                  WHERE principal = $1 AND key = $2 FOR UPDATE)
                    UPDATE idempotency_keys k SET request_hash = $3, status = NULL, headers = NULL, body = NULL, created_at = now(),
                                                  unanswered_since = NULL, settles_at = NULL
                      FROM old
                     WHERE k.principal = $1 AND k.key = $2
                       AND (old.created_at <= now() - $4::float8 * interval '1 second'
                            OR (k.status IS NULL AND k.request_hash = $3
                                AND (old.unanswered_since IS NOT NULL OR old.created_at <= now() - $5::float8 * interval '1 second')))
                    RETURNING CASE WHEN old.created_at > now() - $4::float8 * interval '1 second'
                                   THEN extract(epoch FROM coalesce(old.unanswered_since, old.created_at))::float8 END,
                              CASE WHEN old.created_at > now() - $4::float8 * interval '1 second' AND old.settles_at > now()
                                   THEN extract(epoch FROM old.settles_at - now())::float8 END
                    """, [principal, key, hash, windowSeconds, leaseSeconds])
                if let row = taken.first {
                    let since: Double? = try row.decodeIfPresent(0)
                    return .claimed(unanswered: try since.map { UnansweredAttempts(since: $0, settlingSeconds: try row.decodeIfPresent(1)) })
                }
                let rows = try connection.query("SELECT request_hash, status, headers::text, body FROM idempotency_keys WHERE principal = $1 AND key = $2",
                                                [principal, key])
                if let row = rows.first { return try Self.claim(of: row, requestHash: requestHash) }
            }
            return .inProgress
        }
    }

    /// What a live key's row says to a request with `requestHash`.
    static func claim(of row: PostgresRow, requestHash: [UInt8]) throws -> Claim {
        let stored: PostgresBytes = try row.decode(0)
        guard stored.bytes == requestHash else { return .mismatch }
        guard let status: Int = try row.decodeIfPresent(1) else { return .inProgress }
        let headers = try parseHeaders(try row.decodeIfPresent(2) ?? "[]")
        let body: PostgresBytes = try row.decodeIfPresent(3) ?? PostgresBytes([])
        return .replay(status: status, headers: headers, body: body.bytes)
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

    public func releaseUnanswered(principal: String, key: String, earlier: UnansweredAttempts?, settleSeconds: Double?) async throws {
        try await database.query("""
            UPDATE idempotency_keys SET unanswered_since = coalesce(to_timestamp($3::float8), created_at),
                                        settles_at = now() + greatest($4::float8, $5::float8) * interval '1 second'
             WHERE principal = $1 AND key = $2 AND status IS NULL
            """, [principal, key, earlier?.since, earlier?.settlingSeconds, settleSeconds])
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
