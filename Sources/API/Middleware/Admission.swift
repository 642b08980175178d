public import HTTPServer

/// Rate limits that count the right caller. A request with a verified credential counts against that credential;
/// anything else against its client address (sign-ins in a bucket of their own). Signed Desk webhooks are not
/// limited. An address with too many failed authentications is refused before anything looks its credentials up.
public final class Admission: Sendable {
    public enum Decision {
        /// Go on; the headers tell the client where it stands.
        case admitted([(name: String, value: String)])
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
        let credential = request.header("x-api-key") ?? Authenticator.bearer(request)
        let isVerified = credential.map(verified.contains) ?? false
        let isSignIn = request.method == "POST" && (request.path == "/v1/sessions" || request.path == "/reports/sign-in")
        let isWebhook = request.path == "/v1/webhooks/desk"
        if !isVerified, credential != nil || isSignIn || isWebhook, failures.isExhausted("f:" + client) {
            var error = APIError(.rateLimited, detail: "Too many failed authentications from this address; retry later.")
            error.headers = [("Retry-After", String(max(1, Int((60 / Double(max(1, policy.authFailuresPerMinute))).rounded(.up)))))]
            return .refused(error)
        }
        if isWebhook { return .admitted([]) }
        let (bucket, key, perMinute) = isSignIn ? (signIns, "s:" + client, policy.signInPerMinute)
            : isVerified ? (credentials, credential!, policy.rateLimitPerMinute) : (limiter, "a:" + client, policy.rateLimitPerMinute)
        let decision = bucket.take(key)
        let headers: [(name: String, value: String)] = [
            ("RateLimit-Limit", String(Int(bucket.burst))), ("RateLimit-Remaining", String(decision.remaining)),
            ("RateLimit-Reset", String(decision.reset)),
            ("RateLimit", "limit=\(Int(bucket.burst)), remaining=\(decision.remaining), reset=\(decision.reset)")]
        guard decision.allowed else {
            var error = APIError(.rateLimited, detail: "This client sent more than \(perMinute) \(isSignIn ? "sign-ins" : "requests") a minute; retry after \(decision.retryAfter) s.")
            error.headers = [("Retry-After", String(decision.retryAfter))] + headers
            return .refused(error)
        }
        return .admitted(headers)
    }

    /// A 401 counts against the caller's address and forgets the credential it presented.
    public func observe(_ response: HTTPResponse, to request: HTTPRequest) {
        guard response.status == 401, request.path.hasPrefix("/v1/") || request.path.hasPrefix("/reports") else { return }
        _ = failures.take("f:" + clients.client(request))
        if let credential = request.header("x-api-key") ?? Authenticator.bearer(request) { verified.remove(credential) }
    }
}
