import Crypto
public import Domain
public import HTTPServer

/// POSTs with `Idempotency-Key`: the first answer for a key is stored and replayed for the same body; the same key
/// with another body is refused (422). Sessions are excluded: their answer holds a bearer token, which is never stored.
public struct IdempotentWrites: Sendable {
    let keys: any IdempotencyKeys
    /// Whose keys a request's are (nil: the request claims nothing, and its route answers it as it would).
    let principal: @Sendable (HTTPRequest) async -> String?

    public init(keys: any IdempotencyKeys, principal: @escaping @Sendable (HTTPRequest) async -> String?) {
        self.keys = keys
        self.principal = principal
    }

    /// `failure` turns an error of `body` into the answer to store (errors the client may retry are not stored).
    public func run(_ request: HTTPRequest, info: RequestInfo,
                    _ body: @Sendable (HTTPRequest, RequestInfo) async throws -> HTTPResponse,
                    failure: (any Error) -> HTTPResponse) async throws -> HTTPResponse {
        guard request.method == "POST", let key = request.header("idempotency-key"),
              request.path.hasPrefix("/v1/"), request.path != "/v1/sessions" else {
            return try await body(request, info)
        }
        guard !key.isEmpty, key.utf8.count <= 255, key.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw APIError(.invalidIdempotencyKey, detail: "Idempotency-Key must be 1 to 255 visible ASCII characters.")
        }
        guard let principal = await principal(request) else { return try await body(request, info) }
        var hasher = SHA256()
        hasher.update(data: Array("\(request.method) \(request.path)\n".utf8))
        hasher.update(data: request.body)
        switch try await keys.claim(principal: principal, key: key, requestHash: Array(hasher.finalize())) {
        case .mismatch:
            throw APIError(.idempotencyKeyReused, detail: "This Idempotency-Key was already used with a different request; use a new key for a new request.")
        case .inProgress:
            throw APIError(.idempotencyInProgress, detail: "A request with this Idempotency-Key is still being processed; retry shortly.",
                           headers: [("Retry-After", "1")])
        case .replay(let status, let headers, let stored):
            return HTTPResponse(status: status, headers: headers.map { ($0.0, $0.1) } + [("Idempotent-Replayed", "true")], body: stored)
        case .claimed(let unanswered):
            let response: HTTPResponse
            do {
                response = try await Self.$unanswered.withValue(unanswered) { try await body(request, info) }
            } catch {
                let answer = failure(error)
                // Not kept: answers the client may retry, refused credentials among them (Desk ended the customer's
                // session: they sign in again and send the same key). A write that may have taken effect, or any
                // retry after one, leaves the next retry a note to look for what it made first.
                let domain = error as? DomainError
                let retryable = answer.status >= 500 || [401, 403, 409, 429].contains(answer.status)
                if retryable, unanswered != nil || (answer.status >= 500 && domain?.mayHaveTakenEffect == true) {
                    let settle = domain?.mayStillTakeEffect == true ? UnansweredAttempts.settleSeconds : nil
                    await persistently { try await keys.releaseUnanswered(principal: principal, key: key, earlier: unanswered, settleSeconds: settle) }
                } else if retryable {
                    await persistently { try await keys.release(principal: principal, key: key) }
                } else {
                    await store(answer, principal: principal, key: key)
                }
                return answer
            }
            await store(response, principal: principal, key: key)
            return response
        }
    }

    /// While a claimed request runs: the earlier attempts with its key that went unanswered (and may have made what
    /// this one is about to make), nil for a first attempt.
    @TaskLocal public static var unanswered: UnansweredAttempts?

    private func store(_ answer: HTTPResponse, principal: String, key: String) async {
        await persistently {
            try await keys.complete(principal: principal, key: key, status: answer.status,
                                    headers: answer.headers.map { ($0.name, $0.value) }, body: answer.body)
        }
    }

    /// Three tries over about a second: an answer not stored leaves its key claimed until the lease ends, and a retry
    /// after that runs the write again.
    private func persistently(_ write: () async throws -> Void) async {
        for pause in [0.1, 0.5, 0] {
            do { return try await write() } catch {
                if pause > 0 { try? await Task.sleep(for: .seconds(pause)) }
            }
        }
    }
}
