import Domain
import Postgres
import Store
import Testing
import TestSupport

/// The outbox's order and leases as its SQL keeps them: per ticket, only the oldest pending operation is ever
/// claimed; a claim keeps other relays out until its lease runs out; the ticket's pending list follows.
@Suite struct OutboxStoreTests {
    /// One operation of a new customer's, queued and claimed at enqueue for 30 s.
    static func queued(_ db: Database, ticket: Int, kind: OperationKind) async throws
        -> (outbox: OutboxStore, queued: (operation: OutboxOperation, earlierPending: Bool)) {
        let (customer, session) = try await customerWithSession(db)
        let outbox = OutboxStore(database: db)
        return (outbox, try await outbox.enqueue(ticketId: ticket, customerId: customer, sessionId: session, kind: kind, payload: "{}",
                                                 owner: "api", leaseSeconds: 30))
    }

    @Test func eachTicketsOperationsAreClaimedOneAtATimeInOrder() async throws {
        try await withStore { db in
            let (customer, session) = try await customerWithSession(db)
            let outbox = OutboxStore(database: db)
            var ids: [Int: [Int]] = [:]
            for (ticket, kind) in [(1, OperationKind.feedback), (1, .close), (2, .reopen), (1, .reopen)] {
                let queued = try await outbox.enqueue(ticketId: ticket, customerId: customer, sessionId: session, kind: kind, payload: "{}",
                                                      owner: "api", leaseSeconds: 30)
                #expect(queued.earlierPending == (ids[ticket] != nil))
                ids[ticket, default: []].append(queued.operation.id)
                try await outbox.release(id: queued.operation.id, owner: "api")
            }
            let first = try await outbox.claimBatch(by: "relay-a", leaseSeconds: 30, limit: 10)
            #expect(first.map(\.id) == [ids[1]![0], ids[2]![0]])
            // Nothing more for either ticket while their first operations are claimed and pending.
            #expect(try await outbox.claimBatch(by: "relay-b", leaseSeconds: 30, limit: 10).isEmpty)
            try await outbox.finish(first[0], delivered: true, error: nil)
            let next = try await outbox.claimBatch(by: "relay-b", leaseSeconds: 30, limit: 10)
            #expect(next.map(\.id) == [ids[1]![1]])
            // A failed operation ends too, and the next of its ticket follows.
            try await outbox.finish(next[0], delivered: false, error: "refused")
            let last = try await outbox.claimBatch(by: "relay-b", leaseSeconds: 30, limit: 10)
            #expect(last.map(\.id) == [ids[1]![2]])
            #expect(try await outbox.find(id: ids[1]![1])?.status == .failed)
            // Each ending keeps how the write reached Desk: none for a failure.
            try await outbox.finish(last[0], deliveredAs: .application, error: nil, refusedInRequest: false)
            var ended: [OutboxOperation?] = []
            for id in ids[1]! { ended.append(try await outbox.find(id: id)) }
            #expect(ended.map { $0?.deliveredAs } == [.customer, nil, .application])
            #expect(ended.map { $0?.status } == [.delivered, .failed, .delivered])
        }
    }

    /// While a later release runs beside this one, an operation of a kind only the later one knows is left to it,
    /// and its ticket's later operations wait behind it as they would behind any earlier one.
    @Test func aKindOfALaterReleaseIsLeftToInstancesThatKnowIt() async throws {
        try await withStore { db in
            let (customer, session) = try await customerWithSession(db)
            let outbox = OutboxStore(database: db)
            var ids: [Int] = []
            for ticket in [7, 7, 8] {
                let queued = try await outbox.enqueue(ticketId: ticket, customerId: customer, sessionId: session, kind: .close, payload: "{}",
                                                      owner: "api", leaseSeconds: 30)
                try await outbox.release(id: queued.operation.id, owner: "api")
                ids.append(queued.operation.id)
            }
            // What a later release's migration and its enqueue would leave.
            try await db.query("ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check")
            try await db.query("UPDATE outbox SET kind = 'a_later_kind' WHERE id = $1", [ids[0]])
            #expect(try await outbox.claimBatch(by: "relay", leaseSeconds: 30, limit: 10).map(\.id) == [ids[2]])
            #expect(try await outbox.depth().pending == 3)
        }
    }

    @Test func aLeaseKeepsOthersOutUntilItRunsOutAndARescheduleWaits() async throws {
        try await withStore { db in
            let (outbox, queued) = try await Self.queued(db, ticket: 5, kind: .feedback)
            // Claimed at enqueue: no relay takes it while the lease holds.
            #expect(try await outbox.claimBatch(by: "relay", leaseSeconds: 30, limit: 10).isEmpty)
            try await db.query("UPDATE outbox SET claimed_until = now() - interval '1 second' WHERE id = $1", [queued.operation.id])
            let taken = try await outbox.claimBatch(by: "relay", leaseSeconds: 30, limit: 10)
            #expect(taken.map(\.id) == [queued.operation.id])
            try await outbox.reschedule(taken[0], afterSeconds: 60, error: "timeout", awaitingSignIn: false)
            #expect(try await outbox.claimBatch(by: "other", leaseSeconds: 30, limit: 10).isEmpty)
            #expect(try await outbox.find(id: queued.operation.id)?.attempts == 1)
            #expect(try await outbox.depth().pending == 1)
        }
    }

    @Test func aWaitForTheCustomersSignInKeepsWhenItBeganUntilAnotherFailure() async throws {
        try await withStore { db in
            let (outbox, queued) = try await Self.queued(db, ticket: 6, kind: .close)
            #expect(queued.operation.awaitedSignInSeconds == nil)
            try await outbox.reschedule(queued.operation, afterSeconds: 0, error: "desk_session_expired", awaitingSignIn: true)
            try await db.query("UPDATE outbox SET awaiting_sign_in_since = awaiting_sign_in_since - interval '100 seconds' WHERE id = $1",
                               [queued.operation.id])
            // A second refusal goes on with the same wait, and the relay reads how long it has lasted.
            try await outbox.reschedule(queued.operation, afterSeconds: 0, error: "desk_session_expired", awaitingSignIn: true)
            let waited = try #require(try await outbox.claimBatch(by: "relay", leaseSeconds: 30, limit: 10).first?.awaitedSignInSeconds)
            #expect(waited >= 100 && waited < 160)
            // Desk away instead: the sign-in wait is over; a later refusal of the session starts a new one.
            try await outbox.reschedule(queued.operation, afterSeconds: 0, error: "desk_unavailable", awaitingSignIn: false)
            #expect(try await outbox.find(id: queued.operation.id)?.awaitedSignInSeconds == nil)
        }
    }

    @Test func operatorsSeeThePendingWritesAndCanMakeThemDueNow() async throws {
        try await withStore { db in
            let (outbox, first) = try await Self.queued(db, ticket: 7, kind: .close)
            let (customer, session) = try await customerWithSession(db, sendbirdId: "customer-2")
            let second = try await outbox.enqueue(ticketId: 8, customerId: customer, sessionId: session, kind: .reopen, payload: "{}",
                                                  owner: "api", leaseSeconds: 30)
            let done = try await outbox.enqueue(ticketId: 9, customerId: customer, sessionId: session, kind: .close, payload: "{}",
                                                owner: "api", leaseSeconds: 30)
            try await outbox.finish(done.operation, delivered: true, error: nil)
            try await outbox.reschedule(first.operation, afterSeconds: 3_600, error: "desk_unavailable: away", awaitingSignIn: false)
            try await outbox.reschedule(second.operation, afterSeconds: 0, error: "desk_unavailable: away", awaitingSignIn: false)
            // Oldest first, the delivered one left out, each with the wait before its next attempt.
            let listed = try await outbox.pending(limit: 10)
            #expect(listed.map(\.operation.id) == [first.operation.id, second.operation.id])
            #expect(listed[0].dueInSeconds > 3_500 && listed[1].dueInSeconds == 0)
            #expect(listed[0].operation.lastError == "desk_unavailable: away")
            #expect(try await outbox.pending(limit: 1).count == 1)
            // The nudge brings the waiting one forward; one a relay holds is left to it.
            try await db.query("UPDATE outbox SET claimed_until = now() + interval '1 minute' WHERE id = $1", [second.operation.id])
            try await db.query("UPDATE outbox SET next_attempt_at = now() + interval '1 hour' WHERE id = $1", [second.operation.id])
            #expect(try await outbox.retryNow() == 1)
            let after = try await outbox.pending(limit: 10)
            #expect(after[0].dueInSeconds == 0 && after[1].dueInSeconds > 3_500)
            #expect(try await outbox.claimBatch(by: "relay", leaseSeconds: 30, limit: 10).map(\.id) == [first.operation.id])
        }
    }

    @Test func aQueuedWriteFindsTheDeskTokenOfTheCustomersNewestLaterSession() async throws {
        try await withStore { db in
            let sessions = SessionStore(database: db, vault: TokenVault(key: TokenVault.generateKey()))
            func open(_ user: String, _ deskToken: String) async throws -> SessionRecord {
                try await sessions.open(sendbirdId: user, displayName: nil, deskCustomerId: nil, deskToken: deskToken, lifetimeSeconds: 60).record
            }
            let first = try await open("customer-a", "desk-1")
            let second = try await open("customer-a", "desk-2")
            _ = try await open("customer-b", "desk-other")
            try await sessions.revoke(sessionId: second.sessionId)
            let third = try await open("customer-a", "desk-3")
            #expect(try await sessions.newestDeskToken(customerId: first.customerId, after: first.sessionId) == "desk-3")
            #expect(try await sessions.newestDeskToken(customerId: first.customerId, after: third.sessionId) == nil)
            // Signed out is no bar (Desk decides whether its session still holds), another customer's never.
            try await db.query("DELETE FROM sessions WHERE id = $1", [third.sessionId])
            #expect(try await sessions.newestDeskToken(customerId: first.customerId, after: first.sessionId) == "desk-2")
            #expect(try await sessions.deskToken(sessionId: first.sessionId) == "desk-1")
        }
    }

    /// `outbox revive`: a write answered 202 that failed for the reason named, lately, and is still its ticket's latest
    /// is pending and due again, on the ticket's pending list too; one followed by another write of its ticket, one
    /// refused while its own request waited (the customer saw it fail), one that failed for another reason, one that
    /// failed too long ago and one already delivered stay as they are.
    @Test func aRevivedWriteIsPendingAgainOnlyWhenItIsStillItsTicketsLatest() async throws {
        try await withStore { db in
            let (customer, session) = try await customerWithSession(db)
            try await TicketStore(database: db).upsert([TicketStoreTests.row(10, customer: customer, status: "ACTIVE", updatedAt: 1_000)])
            let outbox = OutboxStore(database: db)
            func ended(_ ticket: Int, _ kind: OperationKind, delivered: Bool = false, _ reason: String?, inRequest: Bool = false) async throws -> Int {
                let queued = try await outbox.enqueue(ticketId: ticket, customerId: customer, sessionId: session, kind: kind, payload: "{}",
                                                      owner: "api", leaseSeconds: 30)
                try await outbox.finish(queued.operation, deliveredAs: delivered ? .customer : nil, error: reason, refusedInRequest: inRequest)
                return queued.operation.id
            }
            let expired = "desk_session_expired: Desk no longer accepts the customer's session"
            let followed = try await ended(9, .close, expired)
            _ = try await ended(9, .reopen, delivered: true, nil)
            let revivable = try await ended(10, .close, expired)
            let refused = try await ended(11, .close, "ticket_state_conflict: the ticket's state did not allow this")
            let old = try await ended(12, .close, expired)
            let answered = try await ended(13, .close, expired, inRequest: true)
            // Followed by a write still queued, rather than by one that has ended.
            let waitedOn = try await ended(14, .close, expired)
            _ = try await outbox.enqueue(ticketId: 14, customerId: customer, sessionId: session, kind: .reopen, payload: "{}", owner: "api",
                                         leaseSeconds: 30)
            try await db.query("UPDATE outbox SET finished_at = now() - interval '2 days' WHERE id = $1", [old])
            try await db.query("UPDATE outbox SET awaiting_sign_in_since = now() - interval '700 seconds' WHERE id = $1", [revivable])

            // `outbox list --failed`: the recent failures, each with whether it is still its ticket's latest.
            let listed = try await outbox.failed(withinSeconds: 86_400, limit: 10)
            #expect(Dictionary(uniqueKeysWithValues: listed.map { ($0.operation.id, $0.revivable) })
                    == [followed: false, revivable: true, refused: true, answered: false, waitedOn: false])
            #expect(listed.allSatisfy { $0.operation.finishedAt != nil })
            #expect(try await outbox.revive(reason: "desk_session_expired", withinSeconds: 86_400, dryRun: true) == [revivable])
            #expect(try await outbox.find(id: revivable)?.status == .failed, "a dry run changed the write")
            #expect(try await outbox.revive(reason: "desk_session_expired", withinSeconds: 86_400) == [revivable])
            let revived = try #require(try await outbox.find(id: revivable))
            #expect(revived.status == .pending && revived.finishedAt == nil && revived.awaitedSignInSeconds == nil)
            #expect(try await TicketStore(database: db).pendingOperations(ticketId: 10).contains("\"id\": \(revivable)"))
            #expect(try await outbox.claimBatch(by: "relay", leaseSeconds: 30, limit: 10).map(\.id) == [revivable])
            for id in [followed, refused, old, answered, waitedOn] { #expect(try await outbox.find(id: id)?.status == .failed) }
            // Run again: nothing more (the revived one is pending, not failed).
            #expect(try await outbox.revive(reason: "desk_session_expired", withinSeconds: 86_400).isEmpty)
        }
    }

    @Test func theTicketsPendingListFollowsItsOperations() async throws {
        try await withStore { db in
            let (customer, session) = try await customerWithSession(db)
            try await TicketStore(database: db).upsert([TicketStoreTests.row(9, customer: customer, status: "ACTIVE", updatedAt: 1_000)])
            let outbox = OutboxStore(database: db)
            let queued = try await outbox.enqueue(ticketId: 9, customerId: customer, sessionId: session, kind: .close, payload: "{}",
                                                  owner: "api", leaseSeconds: 30)
            #expect(try await TicketStore(database: db).pendingOperations(ticketId: 9).contains("\"id\": \(queued.operation.id)"))
            try await outbox.finish(queued.operation, delivered: true, error: nil)
            #expect(try await TicketStore(database: db).pendingOperations(ticketId: 9) == "[]")
        }
    }
}

/// Idempotency keys as their SQL keeps them: first claim wins, the answer replays, another body is a mismatch, a
/// released attempt may be retried, and a key past the window is taken over.
@Suite struct IdempotencyStoreTests {
    @Test func claimReplayMismatchReleaseAndTakeOver() async throws {
        try await withStore { db in
            let keys = IdempotencyStore(database: db, windowHours: 24)
            let hash: [UInt8] = [1, 2, 3], other: [UInt8] = [9]
            guard case .claimed = try await keys.claim(principal: "p", key: "k", requestHash: hash) else { Issue.record("not claimed"); return }
            guard case .inProgress = try await keys.claim(principal: "p", key: "k", requestHash: hash) else { Issue.record("not in progress"); return }
            // Another principal's key of the same name is its own.
            guard case .claimed = try await keys.claim(principal: "q", key: "k", requestHash: other) else { Issue.record("not separate"); return }
            try await keys.complete(principal: "p", key: "k", status: 201, headers: [("Location", "/v1/x")], body: Array("done".utf8))
            guard case .replay(let status, let headers, let body) = try await keys.claim(principal: "p", key: "k", requestHash: hash) else {
                Issue.record("no replay"); return
            }
            #expect(status == 201 && headers.first?.0 == "Location" && body == Array("done".utf8))
            guard case .mismatch = try await keys.claim(principal: "p", key: "k", requestHash: other) else { Issue.record("no mismatch"); return }
            // Releasing a completed key changes nothing; releasing an attempt in progress lets the next one claim.
            try await keys.release(principal: "p", key: "k")
            guard case .replay = try await keys.claim(principal: "p", key: "k", requestHash: hash) else { Issue.record("release dropped it"); return }
            try await keys.release(principal: "q", key: "k")
            guard case .claimed = try await keys.claim(principal: "q", key: "k", requestHash: hash) else { Issue.record("not released"); return }
            // Past the window the key is taken over, with the new request's body.
            try await db.query("UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE principal = 'p'")
            guard case .claimed = try await keys.claim(principal: "p", key: "k", requestHash: other) else { Issue.record("not taken over"); return }
            guard case .inProgress = try await keys.claim(principal: "p", key: "k", requestHash: other) else { Issue.record("take-over lost"); return }
        }
    }

    /// An attempt that ended unanswered and may have taken effect lets its key go with a note: the next claim of the
    /// same request is told since when attempts went unanswered (the first such attempt's start, kept over several),
    /// as is the one that takes over a claim whose instance died; two retries at once take it once; a first claim,
    /// another body, and a key past its window are told nothing.
    @Test func aClaimAfterUnansweredAttemptsIsToldSinceWhen() async throws {
        try await withStore { db in
            let keys = IdempotencyStore(database: db, windowHours: 24, leaseSeconds: 300)
            let hash: [UInt8] = [1, 2, 3], other: [UInt8] = [9]
            guard case .claimed(nil) = try await keys.claim(principal: "p", key: "k", requestHash: hash) else { Issue.record("not claimed"); return }
            let first: Double = try await db.query("SELECT extract(epoch FROM created_at)::float8 FROM idempotency_keys")[0].decode(0)
            try await keys.releaseUnanswered(principal: "p", key: "k", earlier: nil, settleSeconds: nil)
            guard case .mismatch = try await keys.claim(principal: "p", key: "k", requestHash: other) else { Issue.record("another body took it"); return }
            let claims = try await withThrowingTaskGroup(of: Double?.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        if case .claimed(let earlier) = try await keys.claim(principal: "p", key: "k", requestHash: hash) { return earlier?.since }
                        return nil
                    }
                }
                return try await group.reduce(into: [Double]()) { if let since = $1 { $0.append(since) } }
            }
            #expect(claims.count == 1 && abs((claims.first ?? 0) - first) < 0.001, "\(claims) against \(first)")
            // Unanswered again: the earliest start is kept.
            try await db.query("UPDATE idempotency_keys SET created_at = created_at + interval '10 seconds'")
            try await keys.releaseUnanswered(principal: "p", key: "k", earlier: UnansweredAttempts(since: first), settleSeconds: nil)
            guard case .claimed(let again) = try await keys.claim(principal: "p", key: "k", requestHash: hash) else { Issue.record("not retried"); return }
            #expect(again.map { abs($0.since - first) < 0.001 && $0.settlingSeconds == nil } == true, "\(String(describing: again))")
            // An instance that died mid-request: past the lease, the retry is told when that attempt began.
            try await db.query("UPDATE idempotency_keys SET created_at = now() - interval '400 seconds'")
            guard case .claimed(let died) = try await keys.claim(principal: "p", key: "k", requestHash: hash) else { Issue.record("not taken over"); return }
            #expect(died != nil)
            // Past the window, the key is a new request's.
            try await db.query("UPDATE idempotency_keys SET created_at = now() - interval '25 hours'")
            guard case .claimed(nil) = try await keys.claim(principal: "p", key: "k", requestHash: other) else { Issue.record("window kept a note"); return }
        }
    }

    /// An attempt Desk may still carry out (no answer came) leaves its key with how long that may last: the next
    /// claim is told what is left of it, a retry that fails without calling Desk keeps it, a later unanswered attempt
    /// extends it, and once it is over only the start is told.
    @Test func aClaimIsToldHowLongAnUnansweredAttemptMayStillTakeEffect() async throws {
        try await withStore { db in
            let keys = IdempotencyStore(database: db, windowHours: 24, leaseSeconds: 300)
            let hash: [UInt8] = [4, 5, 6]
            let claim = { () async throws -> UnansweredAttempts? in
                guard case .claimed(let earlier) = try await keys.claim(principal: "p", key: "s", requestHash: hash) else {
                    Issue.record("not claimed"); return nil
                }
                return earlier
            }
            #expect(try await claim() == nil)
            try await keys.releaseUnanswered(principal: "p", key: "s", earlier: nil, settleSeconds: 60)
            let first = try #require(try await claim())
            #expect((50...60).contains(first.settlingSeconds ?? 0), "\(first)")
            // A retry that waited (Desk not called) hands the same time on.
            try await keys.releaseUnanswered(principal: "p", key: "s", earlier: first, settleSeconds: nil)
            let kept = try #require(try await claim())
            #expect(abs(kept.since - first.since) < 0.001 && (45...60).contains(kept.settlingSeconds ?? 0), "\(kept)")
            // Unanswered again, for longer: the later end wins.
            try await keys.releaseUnanswered(principal: "p", key: "s", earlier: kept, settleSeconds: 90)
            let extended = try #require(try await claim())
            #expect(abs(extended.since - first.since) < 0.001 && (80...90).contains(extended.settlingSeconds ?? 0), "\(extended)")
            try await keys.releaseUnanswered(principal: "p", key: "s", earlier: extended, settleSeconds: nil)
            try await db.query("UPDATE idempotency_keys SET settles_at = now() - interval '1 second'")
            let over = try #require(try await claim())
            #expect(abs(over.since - first.since) < 0.001 && over.settlingSeconds == nil, "\(over)")
        }
    }

    /// A claim never answered (its instance was killed mid-request) holds its key for the lease, not for the window:
    /// then a retry of the same request takes it over, once however many retries arrive together; another body is
    /// still refused.
    @Test func anAbandonedClaimIsTakenOverAfterItsLease() async throws {
        try await withStore { db in
            let keys = IdempotencyStore(database: db, windowHours: 24, leaseSeconds: 300)
            let hash: [UInt8] = [1, 2, 3], other: [UInt8] = [9]
            guard case .claimed = try await keys.claim(principal: "p", key: "k", requestHash: hash) else { Issue.record("not claimed"); return }
            // A minute inside the lease and a minute past it: a loaded machine may take seconds between statements.
            try await db.query("UPDATE idempotency_keys SET created_at = now() - interval '240 seconds'")
            guard case .inProgress = try await keys.claim(principal: "p", key: "k", requestHash: hash) else { Issue.record("taken within the lease"); return }
            try await db.query("UPDATE idempotency_keys SET created_at = now() - interval '360 seconds'")
            guard case .mismatch = try await keys.claim(principal: "p", key: "k", requestHash: other) else { Issue.record("another body took it"); return }
            let claims = try await withThrowingTaskGroup(of: Bool.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        if case .claimed = try await keys.claim(principal: "p", key: "k", requestHash: hash) { return true }
                        return false
                    }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(claims == 1)
            // An answered key is never taken over within the window, however old.
            try await keys.complete(principal: "p", key: "k", status: 201, headers: [], body: Array("done".utf8))
            try await db.query("UPDATE idempotency_keys SET created_at = now() - interval '2 hours'")
            guard case .replay = try await keys.claim(principal: "p", key: "k", requestHash: hash) else { Issue.record("answer lost"); return }
        }
    }
}
