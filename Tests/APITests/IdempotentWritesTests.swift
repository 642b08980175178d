import API
import Domain
import HTTPServer
import Synchronization
import Testing

/// The middleware's side of idempotency keys (their SQL is tested against PostgreSQL in `IdempotencyStoreTests`):
/// which requests claim a key, and that an answer survives a store that fails for a moment.
@Suite struct IdempotentWritesTests {
    /// Fails its first `failures` writes of an answer or a release, then keeps what it is given.
    final class FlakyKeys: IdempotencyKeys, Sendable {
        let state: Mutex<(failuresLeft: Int, stored: Int?, released: Bool, claims: Int)>

        init(failures: Int) { state = Mutex((failures, nil, false, 0)) }

        func claim(principal: String, key: String, requestHash: [UInt8]) async throws -> IdempotencyClaim {
            state.withLock { $0.claims += 1 }
            return .claimed(unanswered: nil)
        }

        func complete(principal: String, key: String, status: Int, headers: [(String, String)], body: [UInt8]) async throws {
            try state.withLock { state in
                if state.failuresLeft > 0 { state.failuresLeft -= 1; throw DomainError(.storeUnavailable, "down") }
                state.stored = status
            }
        }

        func release(principal: String, key: String) async throws {
            try state.withLock { state in
                if state.failuresLeft > 0 { state.failuresLeft -= 1; throw DomainError(.storeUnavailable, "down") }
                state.released = true
            }
        }

        func releaseUnanswered(principal: String, key: String, earlier: UnansweredAttempts?, settleSeconds: Double?) async throws {
            try await release(principal: principal, key: key)
        }
    }

    static func post(_ writes: IdempotentWrites, status: Int) async throws -> HTTPResponse {
        let request = HTTPRequest(method: "POST", path: "/v1/tickets", headers: [("idempotency-key", "k-1")], body: Array("{}".utf8))
        return try await writes.run(request, info: RequestInfo(id: "r", route: "/v1/tickets"), { _, _ in
            if status >= 400 { throw DomainError(.conflict, "busy") }
            return HTTPResponse(status: status, headers: [], body: [])
        }, failure: { _ in HTTPResponse(status: 409, headers: [], body: []) })
    }

    @Test func anAnswerIsStoredThoughTheStoreFailsTwice() async throws {
        let keys = FlakyKeys(failures: 2)
        let response = try await Self.post(IdempotentWrites(keys: keys, principal: { _ in "c:1" }), status: 201)
        #expect(response.status == 201)
        #expect(keys.state.withLock { $0.stored } == 201)
    }

    @Test func aRetryableAnswerReleasesItsKeyThoughTheStoreFailsTwice() async throws {
        let keys = FlakyKeys(failures: 2)
        let response = try await Self.post(IdempotentWrites(keys: keys, principal: { _ in "c:1" }), status: 409)
        #expect(response.status == 409)
        #expect(keys.state.withLock { $0.released && $0.stored == nil })
    }

    @Test func aRequestWithoutAPrincipalClaimsNothing() async throws {
        let keys = FlakyKeys(failures: 0)
        let response = try await Self.post(IdempotentWrites(keys: keys, principal: { _ in nil }), status: 201)
        #expect(response.status == 201)
        #expect(keys.state.withLock { $0.claims == 0 && $0.stored == nil })
    }

    /// Records what the middleware does with a key whose claim may carry a note of unanswered attempts.
    final class RecordingKeys: IdempotencyKeys, Sendable {
        let note: UnansweredAttempts?
        let calls = Mutex<[String]>([])

        init(note: UnansweredAttempts?) { self.note = note }

        func claim(principal: String, key: String, requestHash: [UInt8]) async throws -> IdempotencyClaim { .claimed(unanswered: note) }
        func complete(principal: String, key: String, status: Int, headers: [(String, String)], body: [UInt8]) async throws {
            calls.withLock { $0.append("complete \(status)") }
        }
        func release(principal: String, key: String) async throws { calls.withLock { $0.append("release") } }
        func releaseUnanswered(principal: String, key: String, earlier: UnansweredAttempts?, settleSeconds: Double?) async throws {
            calls.withLock { $0.append("unanswered \(earlier?.since ?? 0) \(settleSeconds ?? 0)") }
        }
    }

    static func fail(_ keys: RecordingKeys, with error: DomainError, status: Int) async throws -> [String] {
        let request = HTTPRequest(method: "POST", path: "/v1/tickets", headers: [("idempotency-key", "k-1")], body: Array("{}".utf8))
        _ = try await IdempotentWrites(keys: keys, principal: { _ in "c:1" }).run(request, info: RequestInfo(id: "r", route: "/v1/tickets"),
                                                                                 { _, _ in throw error },
                                                                                 failure: { _ in HTTPResponse(status: status, headers: [], body: []) })
        return keys.calls.withLock { $0 }
    }

    /// A write Desk may still be carrying out asks the next claim to wait for it; one it answered only to look; and once
    /// a claim carries a note, a retry that fails for any reason the client may retry (Desk's rate limit, its
    /// session) hands the note on instead of forgetting it, so a later retry still looks before it creates.
    @Test func aNoteOfUnansweredAttemptsOutlivesEveryRetryableFailure() async throws {
        let unavailable = DomainError(.upstreamUnavailable, "no answer")
        #expect(try await Self.fail(RecordingKeys(note: nil), with: unavailable.effectUnknown(stillUnderWay: true), status: 503)
                == ["unanswered 0.0 60.0"])
        #expect(try await Self.fail(RecordingKeys(note: nil), with: unavailable.effectUnknown(), status: 503) == ["unanswered 0.0 0.0"])
        #expect(try await Self.fail(RecordingKeys(note: nil), with: unavailable, status: 503) == ["release"])
        #expect(try await Self.fail(RecordingKeys(note: nil), with: DomainError(.rateLimited, "slow down"), status: 429) == ["release"])
        let noted = UnansweredAttempts(since: 100, settlingSeconds: 20)
        #expect(try await Self.fail(RecordingKeys(note: noted), with: DomainError(.rateLimited, "slow down"), status: 429)
                == ["unanswered 100.0 0.0"])
        #expect(try await Self.fail(RecordingKeys(note: noted), with: DomainError(.unauthorized, "signed out"), status: 401)
                == ["unanswered 100.0 0.0"])
        #expect(try await Self.fail(RecordingKeys(note: noted), with: unavailable, status: 503) == ["unanswered 100.0 0.0"])
        // An answer the client cannot change by retrying is kept as any other.
        #expect(try await Self.fail(RecordingKeys(note: noted), with: DomainError(.invalid, "no"), status: 400) == ["complete 400"])
    }
}
