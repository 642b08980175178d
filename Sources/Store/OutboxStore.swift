public import Domain
import Postgres

/// The transactional outbox: written in the same transaction as the cache's pending marker, delivered in order per
/// ticket, claimed with `FOR UPDATE SKIP LOCKED` plus a lease so two instances never deliver the same operation.
public struct OutboxStore: OutboxQueue {
    let database: Database

    public init(database: Database) {
        self.database = database
    }

    static let columns = """
        id, ticket_id, customer_id, session_id, kind, payload::text, status, attempts, last_error,
        extract(epoch FROM created_at)::float8, extract(epoch FROM finished_at)::float8,
        extract(epoch FROM now() - awaiting_sign_in_since)::float8, delivered_as
        """

    static func decode(_ row: PostgresRow) throws -> OutboxOperation {
        let kind: String = try row.decode(4), status: String = try row.decode(6)
        guard let knownKind = OperationKind(rawValue: kind), let knownStatus = OperationStatus(rawValue: status) else {
            throw DomainError(.storeFailure, "The outbox holds an operation this version does not know.", internalDetail: "kind \(kind), status \(status)")
        }
        return OutboxOperation(id: try row.decode(0), ticketId: try row.decode(1), customerId: try row.decode(2), sessionId: try row.decode(3),
                               kind: knownKind, payload: try row.decode(5), status: knownStatus, attempts: try row.decode(7),
                               lastError: row[8], createdAt: try row.decode(9), finishedAt: try row.decodeIfPresent(10),
                               awaitedSignInSeconds: try row.decodeIfPresent(11), deliveredAs: row[12].flatMap(DeliveryPath.init(rawValue:)))
    }

    /// Queues an operation, already claimed by `owner` for an immediate attempt, and marks the cached ticket (when
    /// cached) as having it pending. Returns the operation and whether an earlier operation of the same ticket is
    /// still pending (then it must wait its turn: call `release`).
    public func enqueue(ticketId: Int, customerId: Int, sessionId: Int, kind: OperationKind, payload: String,
                        owner: String, leaseSeconds: Int) async throws -> (operation: OutboxOperation, earlierPending: Bool) {
        try await database.transaction { tx in
            let row = try tx.query("""
                INSERT INTO outbox (ticket_id, customer_id, session_id, kind, payload, claimed_until, claimed_by)
                VALUES ($1, $2, $3, $4, $5::jsonb, now() + make_interval(secs => $6), $7)
                RETURNING \(Self.columns)
                """, [ticketId, customerId, sessionId, kind.rawValue, payload, leaseSeconds, owner])
            let operation = try Self.decode(row[0])
            let earlier = try tx.query("SELECT 1 FROM outbox WHERE ticket_id = $1 AND status = 'pending' AND id < $2 LIMIT 1",
                                       [ticketId, operation.id])
            try Self.markPending(tx, ticketId: ticketId, id: operation.id, kind: kind.rawValue)
            return (operation: operation, earlierPending: !earlier.isEmpty)
        }
    }

    /// Adds a pending operation to its ticket's cached copy (`pendingOperations`), when the ticket is cached.
    static func markPending(_ tx: PostgresConnection, ticketId: Int, id: Int, kind: String) throws {
        try tx.query("""
            UPDATE tickets SET pending_operations = pending_operations || jsonb_build_array(jsonb_build_object('id', $2::bigint, 'kind', $3::text))
             WHERE id = $1
            """, [ticketId, id, kind])
    }

    /// Hands an operation claimed at enqueue time over to the relays.
    public func release(id: Int, owner: String) async throws {
        try await database.query("UPDATE outbox SET claimed_until = NULL WHERE id = $1 AND claimed_by = $2 AND status = 'pending'", [id, owner])
    }

    /// The kinds this release delivers, as SQL literals: a kind a later release queues is left to instances that know
    /// it (and holds back the ticket's later operations, which keeps each ticket's writes in order).
    static let knownKinds = OperationKind.allCases.map { "'\($0.rawValue)'" }.joined(separator: ", ")

    /// Claims due operations, at most the oldest pending one per ticket, so each ticket's operations go in order; the
    /// earliest due first. Taken in the order of the pending operations' own index (due time, id), a claim reads only
    /// the operations it takes: in the order of ids it walked every row of the outbox below the first pending one, so
    /// each batch of a backlog draining read the ones delivered before it again (90,000 of 100,000 taken and delivered
    /// 20 at a time: 14.4 ms a batch on average, 65 s in all; 0.8 ms and 3.7 s now).
    public func claimBatch(by owner: String, leaseSeconds: Int, limit: Int) async throws -> [OutboxOperation] {
        try await database.query("""
            UPDATE outbox SET claimed_until = now() + make_interval(secs => $2), claimed_by = $1
             WHERE id IN (
                SELECT o.id FROM outbox o
                 WHERE o.status = 'pending' AND o.next_attempt_at <= now()
                   AND (o.claimed_until IS NULL OR o.claimed_until < now())
                   AND o.kind IN (\(Self.knownKinds))
                   AND NOT EXISTS (SELECT 1 FROM outbox e WHERE e.ticket_id = o.ticket_id AND e.status = 'pending' AND e.id < o.id)
                 ORDER BY o.next_attempt_at, o.id
                 LIMIT $3
                 FOR UPDATE SKIP LOCKED)
            RETURNING \(Self.columns)
            """, [owner, leaseSeconds, limit]).map(Self.decode).sorted { $0.id < $1.id }
    }

    /// Ends an operation (delivered or failed) and drops it from the ticket's pending list.
    public func finish(_ operation: OutboxOperation, deliveredAs: DeliveryPath?, error: String?, refusedInRequest: Bool) async throws {
        try await database.transaction { tx in
            try tx.query("""
                UPDATE outbox SET status = $2, finished_at = now(), last_error = $3, attempts = attempts + 1, claimed_until = NULL,
                       refused_in_request = $4, delivered_as = $5
                 WHERE id = $1 AND status = 'pending'
                """, [operation.id, deliveredAs == nil ? "failed" : "delivered", error, refusedInRequest, deliveredAs?.rawValue])
            try tx.query("""
                UPDATE tickets SET pending_operations = coalesce(
                    (SELECT jsonb_agg(e) FROM jsonb_array_elements(pending_operations) e WHERE (e->>'id')::bigint <> $2), '[]'::jsonb)
                 WHERE id = $1
                """, [operation.ticketId, operation.id])
        }
    }

    /// Puts an operation back for a later attempt; a wait for the customer's sign-in keeps the time it began.
    public func reschedule(_ operation: OutboxOperation, afterSeconds delay: Double, error: String, awaitingSignIn: Bool) async throws {
        try await database.query("""
            UPDATE outbox SET attempts = attempts + 1, next_attempt_at = now() + make_interval(secs => $2), last_error = $3,
                   claimed_until = NULL,
                   awaiting_sign_in_since = CASE WHEN $4 THEN coalesce(awaiting_sign_in_since, now()) END
             WHERE id = $1 AND status = 'pending'
            """, [operation.id, delay, error, awaitingSignIn])
    }

    public func find(id: Int) async throws -> OutboxOperation? {
        try await database.query("SELECT \(Self.columns) FROM outbox WHERE id = $1", [id]).first.map(Self.decode)
    }

    /// Pending operations, oldest first, each with the seconds until its next attempt (0: due), for operators.
    /// The oldest are chosen among the pending ids alone (`id + 0`: not by walking the primary key, which passes every
    /// delivered write older than the first pending one): 17–21 ms with 100,000 pending among 1,600,000, where the walk
    /// took 340–390 ms, and nothing to read when none are pending, where the walk read the whole table.
    public func pending(limit: Int) async throws -> [(operation: OutboxOperation, dueInSeconds: Double)] {
        try await database.query("""
            SELECT \(Self.columns), greatest(extract(epoch FROM next_attempt_at - now()), 0)::float8
              FROM outbox WHERE id IN (SELECT id FROM outbox WHERE status = 'pending' ORDER BY id + 0 LIMIT $1) ORDER BY id
            """, [limit]).map { (try Self.decode($0), try $0.decode(13)) }
    }

    /// Makes every pending operation due now (an operator's nudge once Desk is back, instead of the backoff's wait);
    /// returns how many were waiting. Claimed ones are left to their relay.
    public func retryNow() async throws -> Int {
        try await database.query("""
            WITH due AS (
                UPDATE outbox SET next_attempt_at = now()
                 WHERE status = 'pending' AND next_attempt_at > now() AND (claimed_until IS NULL OR claimed_until < now())
                RETURNING 1)
            SELECT count(*) FROM due
            """)[0].decode(0)
    }

    /// Whether a failed operation `o` may be revived: answered 202 (a refusal its own request was answered with stays
    /// one) and still its ticket's latest. `failed` shows it and `revive` acts on it, so both read this one rule. Later
    /// writes are looked for pending and ended apart, each through its own index by ticket (migration 0026).
    private static let revivable = """
        (NOT o.refused_in_request
         AND NOT EXISTS (SELECT 1 FROM outbox l WHERE l.ticket_id = o.ticket_id AND l.id > o.id AND l.status = 'pending')
         AND NOT EXISTS (SELECT 1 FROM outbox l WHERE l.ticket_id = o.ticket_id AND l.id > o.id AND l.status <> 'pending'))
        """

    /// A failed operation `o` of a kind this release knows, ended within the last `$1` seconds: what `failed` lists and
    /// `revive` chooses from.
    private static let failedWithin = """
        o.status = 'failed' AND o.finished_at >= now() - make_interval(secs => $1) AND o.kind IN (\(knownKinds))
        """

    /// Operations that failed within the last `withinSeconds`, the latest failure first, each with whether `revive`
    /// can put it back (answered 202, and still its ticket's latest), for operators.
    public func failed(withinSeconds: Double, limit: Int) async throws -> [(operation: OutboxOperation, revivable: Bool)] {
        try await database.query("""
            SELECT \(Self.columns), \(Self.revivable)
              FROM outbox o
             WHERE \(Self.failedWithin)
             ORDER BY o.finished_at DESC, o.id DESC LIMIT $2
            """, [withinSeconds, limit]).map { (try Self.decode($0), try $0.decode(13)) }
    }

    /// Failed operations whose reason starts with `reason`, ended within the last `withinSeconds`, pending again and
    /// due now (an operator's answer once the cause is gone: customers signed in again after their Desk sessions ended,
    /// a defect fixed). Only an operation answered 202 (a refusal the customer was answered with stays one) and still
    /// its ticket's latest is revived, so a ticket's writes never reach Desk out of order, and none the customer has
    /// sent again since. Returns the ids revived (`dryRun`: the ids it would revive, nothing changed).
    public func revive(reason: String, withinSeconds: Double, dryRun: Bool = false) async throws -> [Int] {
        let chosen = "\(Self.failedWithin) AND \(Self.revivable) AND starts_with(o.last_error, $2)"
        if dryRun {
            return try await database.query("SELECT o.id FROM outbox o WHERE \(chosen) ORDER BY o.id", [withinSeconds, reason]).map { try $0.decode(0) }
        }
        return try await database.transaction { tx in
            let revived = try tx.query("""
                UPDATE outbox o SET status = 'pending', finished_at = NULL, next_attempt_at = now(), claimed_until = NULL,
                       awaiting_sign_in_since = NULL
                 WHERE \(chosen)
                RETURNING o.id, o.ticket_id, o.kind
                """, [withinSeconds, reason])
            for row in revived {
                try Self.markPending(tx, ticketId: try row.decode(1), id: try row.decode(0), kind: try row.decode(2))
            }
            return try revived.map { try $0.decode(0) }.sorted()
        }
    }

    /// Pending operations and the age of the oldest, in seconds.
    public func depth() async throws -> (pending: Int, oldestSeconds: Double) {
        let row = try await database.query("""
            SELECT count(*), coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8 FROM outbox WHERE status = 'pending'
            """)[0]
        return (try row.decode(0), try row.decode(1))
    }
}
