public import HTTPServer
import Domain
import JSON

/// Rate limits that count the right caller. A request with a verified credential counts against that credential;
/// anything else against its client address (sign-ins in a bucket of their own). Signed Desk webhooks are not
/// limited. An address with too many failed authentications is refused before anything looks its credentials up.
public final class Admission: Sendable {
    public enum Decision {
        /// Go on; the standing is told to the client on the answer (none for signed webhooks).
        case admitted(RateLimitStanding?)
        case refused(APIError)
    }

    private let policy: APIPolicy
    /// Requests by client address, and by verified credential (kept apart so no key string is built per request).
    private let limiter: RateLimiter
    private let credentials: RateLimiter
    private let signIns: RateLimiter
    private let failures: RateLimiter
    private let verified: VerifiedCallers
    private let clients: ClientAddressResolver

    public init(policy: APIPolicy, verified: VerifiedCallers) {
        self.policy = policy
        limiter = RateLimiter(perMinute: policy.rateLimitPerMinute, burst: policy.rateLimitBurst)
        credentials = RateLimiter(perMinute: policy.rateLimitPerMinute, burst: policy.rateLimitBurst)
        signIns = RateLimiter(perMinute: policy.signInPerMinute, burst: policy.signInBurst)
        failures = RateLimiter(perMinute: policy.authFailuresPerMinute, burst: policy.authFailureBurst)
        self.verified = verified
        clients = ClientAddressResolver(trustedProxies: policy.trustedProxies)
    }

    /// Token buckets held now (requests, sign-ins, failures), for the metrics.
    public var bucketCount: Int { limiter.count + credentials.count + signIns.count + failures.count }

    public func admit(_ request: HTTPRequest) -> Decision {
        let client = clients.client(request)
        let credential = Self.credential(of: request)
        // One clock reading for every bucket and cache asked below.
        let now = WallClock.seconds()
        let isVerified = credential.map { verified.contains($0, now: now) } ?? false
        let isSignIn = request.method == "POST" && (request.path == "/v1/sessions" || request.path == "/reports/sign-in")
        let isWebhook = request.path == "/v1/webhooks/desk"
        if !isVerified, credential != nil || isSignIn || isWebhook, failures.isExhausted("f:" + client, now: now) {
            var error = APIError(.rateLimited, detail: "Too many failed authentications from this address; retry later.")
            error.headers = [("Retry-After", String(max(1, Int((60 / Double(max(1, policy.authFailuresPerMinute))).rounded(.up)))))]
            return .refused(error)
        }
        if isWebhook { return .admitted(nil) }
        // The buckets passed as they are: picked into a tuple first, each was retained and released per request.
        if isSignIn { return take(from: signIns, key: "s:" + client, perMinute: policy.signInPerMinute, what: "sign-ins", now: now) }
        if let credential, isVerified {
            return take(from: credentials, key: credential, perMinute: policy.rateLimitPerMinute, what: "requests", now: now)
        }
        return take(from: limiter, key: "a:" + client, perMinute: policy.rateLimitPerMinute, what: "requests", now: now)
    }

    private func take(from bucket: RateLimiter, key: String, perMinute: Int, what: String, now: Double) -> Decision {
        let decision = bucket.take(key, now: now)
        let standing = RateLimitStanding(limit: Int(bucket.burst), remaining: decision.remaining, reset: decision.reset)
        guard decision.allowed else {
            var error = APIError(.rateLimited, detail: "This client sent more than \(perMinute) \(what) a minute; retry after \(decision.retryAfter) s.")
            error.headers = [("Retry-After", String(decision.retryAfter))]
            standing.append(to: &error.headers)
            return .refused(error)
        }
        return .admitted(standing)
    }

    /// A 401 counts against the caller's address and forgets the credential it presented.
    public func observe(_ response: HTTPResponse, to request: HTTPRequest) {
        guard response.status == 401, request.path.hasPrefix("/v1/") || request.path.hasPrefix("/reports") else { return }
        _ = failures.take("f:" + clients.client(request))
        if let credential = Self.credential(of: request) { verified.remove(credential) }
    }

    /// The credential the route will check, so the bucket is the one of the caller it serves: report routes read
    /// `X-API-Key` first, the customer API only the bearer token (a made-up `X-API-Key` beside a customer's token had
    /// moved the customer's requests from the token's bucket to the address's).
    static func credential(of request: HTTPRequest) -> String? {
        if request.path.hasPrefix("/v1/reports/") { return Authenticator.reportKey(request) }
        return Authenticator.bearer(request)
    }
}

/// Where a caller stands with its rate limit, told on every answer to it: the `RateLimit-Limit`, `-Remaining` and
/// `-Reset` fields and the combined `RateLimit` field (draft-ietf-httpapi-ratelimit-headers). Kept as numbers until
/// the answer is written, so an admitted request makes no array of them.
public struct RateLimitStanding: Sendable {
    let limit: Int
    let remaining: Int
    let reset: Int
    /// How many fields `append(to:)` adds.
    static let headerCount = 4

    func append(to headers: inout [(name: String, value: String)]) {
        // Written in place from the numbers, one allocation: interpolation grew its buffer twice and `+=` took
        // String's general append path six times. 96 bytes: 26 of text and three numbers of at most 20 characters.
        let combined = String(unsafeUninitializedCapacity: 96) { buffer in
            var out = MemorySink(buffer)
            out.put("limit=")
            out.putInteger(Int64(limit))
            out.put(", remaining=")
            out.putInteger(Int64(remaining))
            out.put(", reset=")
            out.putInteger(Int64(reset))
            return out.count
        }
        headers.append(("RateLimit-Limit", String(limit)))
        headers.append(("RateLimit-Remaining", String(remaining)))
        headers.append(("RateLimit-Reset", String(reset)))
        headers.append(("RateLimit", combined))
    }
}
