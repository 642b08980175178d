public import HTTPServer
public import Logging
public import Telemetry
import Crypto
import DeskClient
import Domain
import JSON
public import Store
import Synchronization

/// Cross-cutting policy of the public API.
public struct APIPolicy: Sendable {
    /// Origins allowed to call from browsers; `*` allows any.
    public var corsOrigins: [String] = []
    public var rateLimitPerMinute = 600
    public var rateLimitBurst = 120
    /// Sign-ins per client address (their own bucket; per user id see `CustomerAPISettings`).
    public var signInPerMinute = 30
    public var signInBurst = 10
    /// Failed authentications (401) per client address; past them, requests with unverified credentials are refused
    /// before any database lookup.
    public var authFailuresPerMinute = 30
    public var authFailureBurst = 30
    /// Peers whose `X-Forwarded-For` / `Forwarded` name the client.
    public var trustedProxies: [CIDR] = []

    public init() {}
}

/// The gateway's HTTP front: routing, request ids, CORS, rate limits, idempotency keys, ETags, problem+json for
/// every failure, metrics and access logs.
public final class APIResponder: HTTPResponder {
    private let router: Router<RouteHandler>
    private let metrics: MetricsRegistry
    private let logger: Logger
    private let policy: APIPolicy
    private let limiter: RateLimiter
    private let signIns: RateLimiter
    private let failures: RateLimiter
    private let verified: VerifiedCallers
    private let clients: ClientAddressResolver
    private let idempotency: IdempotencyStore?
    private let inFlight = Atomic<Int>(0)
    private let requestCounter = Atomic<UInt64>(0)
    private let idPrefix: String

    public init(routes: RouteTable, metrics: MetricsRegistry, logger: Logger, policy: APIPolicy = APIPolicy(),
                idempotency: IdempotencyStore? = nil, verified: VerifiedCallers = VerifiedCallers()) {
        self.router = routes.router
        self.metrics = metrics
        self.logger = logger
        self.policy = policy
        self.idempotency = idempotency
        limiter = RateLimiter(perMinute: policy.rateLimitPerMinute, burst: policy.rateLimitBurst)
        signIns = RateLimiter(perMinute: policy.signInPerMinute, burst: policy.signInBurst)
        failures = RateLimiter(perMinute: policy.authFailuresPerMinute, burst: policy.authFailureBurst)
        self.verified = verified
        clients = ClientAddressResolver(trustedProxies: policy.trustedProxies)
        var generator = SystemRandomNumberGenerator()
        let prefix = String(generator.next() as UInt32, radix: 16)
        idPrefix = String(repeating: "0", count: 8 - prefix.count) + prefix
        metrics.describe("http_requests_total", .counter, help: "HTTP requests by route template, method and status.")
        metrics.describe("http_request_duration_seconds", .histogram, help: "HTTP request latency by route template.")
        metrics.describe("ticket_cache_total", .counter, help: "Ticket reads by cache result (hit, miss: read from Desk, stale: Desk unreachable).")
        metrics.gauge("http_requests_in_flight", help: "Requests currently waiting on async work.") { [weak self] in
            [([], Double(self?.inFlight.load(ordering: .relaxed) ?? 0))]
        }
    }

    public func respond(to request: HTTPRequest) -> HTTPReply {
        let started = ContinuousClock.now
        let requestID = requestID(for: request)
        let isPublicAPI = request.path.hasPrefix("/v1/")
        if request.method == "OPTIONS", request.header("access-control-request-method") != nil {
            return .now(finish(preflight(request), request: request, route: "(preflight)", requestID: requestID, started: started))
        }
        var limitHeaders: [(name: String, value: String)] = []
        if isPublicAPI {
            switch admit(request) {
            case .admitted(let headers): limitHeaders = headers
            case .refused(let error):
                return .now(finish(error.response(instance: request.path, requestID: requestID), request: request,
                                   route: "(rate limited)", requestID: requestID, started: started))
            }
        }
        switch router.match(method: request.method, path: request.path) {
        case .notFound:
            let response = APIError.notFound().response(instance: request.path, requestID: requestID)
            return .now(finish(response, request: request, route: "(unmatched)", requestID: requestID, started: started, extra: limitHeaders))
        case .methodNotAllowed(let allowed, let template):
            let response = APIError.methodNotAllowed(allowed).response(instance: request.path, requestID: requestID)
            return .now(finish(response, request: request, route: template, requestID: requestID, started: started, extra: limitHeaders))
        case .found(let handler, let template, let parameters):
            var routed = request
            routed.pathParameters = parameters
            let info = RequestInfo(id: requestID, route: template)
            let slow: @Sendable (HTTPRequest, RequestInfo) async throws -> HTTPResponse
            switch handler {
            case .sync(let body):
                let response: HTTPResponse
                do { response = try body(routed, info) } catch { response = problem(for: error, request: routed, info: info) }
                return .now(finish(response, request: routed, route: template, requestID: requestID, started: started, extra: limitHeaders))
            case .hybrid(let fast, let rest):
                if let response = fast(routed, info) {
                    return .now(finish(response, request: routed, route: template, requestID: requestID, started: started, extra: limitHeaders))
                }
                slow = rest
            case .async(let body):
                slow = body
            }
            inFlight.add(1, ordering: .relaxed)
            return .later { [self, routed, limitHeaders] in
                let response: HTTPResponse
                do {
                    response = try await runWithIdempotency(routed, info: info, slow)
                } catch {
                    response = problem(for: error, request: routed, info: info)
                }
                inFlight.subtract(1, ordering: .relaxed)
                return finish(response, request: routed, route: template, requestID: requestID, started: started, extra: limitHeaders)
            }
        }
    }

    public func bodyTooLarge(_ request: HTTPRequest, limit: Int) -> HTTPResponse {
        let requestID = requestID(for: request)
        let response = APIError.payloadTooLarge(limit: limit).response(instance: request.path, requestID: requestID)
        return finish(response, request: request, route: "(body too large)", requestID: requestID, started: .now)
    }

    public func badRequest(_ request: HTTPRequest, reason: String) -> HTTPResponse {
        // The request's own id is not trusted here: its headers are what is wrong.
        var clean = request
        clean.headers = []
        let requestID = requestID(for: clean)
        let response = APIError(.malformedRequest, detail: reason)
            .response(instance: "/", requestID: requestID)
        return finish(response, request: clean, route: "(malformed request)", requestID: requestID, started: .now)
    }

    public func overloaded(_ request: HTTPRequest) -> HTTPResponse {
        let requestID = requestID(for: request)
        let response = APIError(.serviceUnavailable, detail: "The server is at its connection limit; retry shortly.", headers: [("Retry-After", "1")])
            .response(instance: request.path, requestID: requestID)
        return finish(response, request: request, route: "(connection limit)", requestID: requestID, started: .now)
    }

    public func shuttingDown(_ request: HTTPRequest) -> HTTPResponse {
        let requestID = requestID(for: request)
        return APIError.shuttingDown().response(instance: request.path, requestID: requestID)
    }

    // MARK: idempotency

    /// POSTs with `Idempotency-Key`: the first answer for a key is stored and replayed for the same body; the same key
    /// with another body is refused (422). Sessions are excluded: their answer holds a bearer token, which is never stored.
    private func runWithIdempotency(_ request: HTTPRequest, info: RequestInfo,
                                    _ body: @Sendable (HTTPRequest, RequestInfo) async throws -> HTTPResponse) async throws -> HTTPResponse {
        guard request.method == "POST", let key = request.header("idempotency-key"), let idempotency,
              request.path.hasPrefix("/v1/"), request.path != "/v1/sessions" else {
            return try await body(request, info)
        }
        guard !key.isEmpty, key.utf8.count <= 255, key.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw APIError(.invalidIdempotencyKey, detail: "Idempotency-Key must be 1 to 255 visible ASCII characters.")
        }
        let principal = Authenticator.bearer(request).map { "t:" + Codec.hex(Array(SHA256.hash(data: Array($0.utf8))).prefix(16)) }
            ?? "a:" + (request.remoteAddress ?? "unknown")
        var hasher = SHA256()
        hasher.update(data: Array("\(request.method) \(request.path)\n".utf8))
        hasher.update(data: request.body)
        let requestHash = Array(hasher.finalize())
        switch try await idempotency.claim(principal: principal, key: key, requestHash: requestHash) {
        case .mismatch:
            throw APIError(.idempotencyKeyReused, detail: "This Idempotency-Key was already used with a different request; use a new key for a new request.")
        case .inProgress:
            throw APIError(.idempotencyInProgress, detail: "A request with this Idempotency-Key is still being processed; retry shortly.",
                           headers: [("Retry-After", "1")])
        case .replay(let status, let headers, let stored):
            return HTTPResponse(status: status, headers: headers.map { ($0.0, $0.1) } + [("Idempotent-Replayed", "true")], body: stored)
        case .claimed:
            let response: HTTPResponse
            do {
                response = try await body(request, info)
            } catch {
                let failure = problem(for: error, request: request, info: info)
                if failure.status >= 500 || failure.status == 409 || failure.status == 429 {
                    try? await idempotency.release(principal: principal, key: key)
                } else {
                    try? await idempotency.complete(principal: principal, key: key, status: failure.status,
                                                    headers: failure.headers.map { ($0.name, $0.value) }, body: failure.body)
                }
                return failure
            }
            try? await idempotency.complete(principal: principal, key: key, status: response.status,
                                            headers: response.headers.map { ($0.name, $0.value) }, body: response.body)
            return response
        }
    }


    // MARK: CORS

    private func allowedOrigin(_ request: HTTPRequest) -> String? {
        guard let origin = request.header("origin"), !policy.corsOrigins.isEmpty else { return nil }
        if policy.corsOrigins.contains("*") || policy.corsOrigins.contains(origin) { return origin }
        return nil
    }

    private func preflight(_ request: HTTPRequest) -> HTTPResponse {
        guard let origin = allowedOrigin(request) else { return HTTPResponse(status: 204, headers: [("Vary", "Origin")]) }
        return HTTPResponse(status: 204, headers: [
            ("Access-Control-Allow-Origin", origin), ("Vary", "Origin"),
            ("Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE, OPTIONS"),
            ("Access-Control-Allow-Headers", "Authorization, Content-Type, Idempotency-Key, If-None-Match, X-Request-ID"),
            ("Access-Control-Max-Age", "600"),
        ])
    }

    // MARK: errors

    /// The single place where errors become responses; anything unknown is a 500 whose detail goes only to the log.
    func problem(for error: any Error, request: HTTPRequest, info: RequestInfo) -> HTTPResponse {
        let apiError: APIError
        switch error {
        case let error as APIError:
            apiError = error
        case let error as DomainError where error.code == .storeUnavailable:
            logger.warning("database unavailable", metadata: ["request_id": "\(info.id)", "error": "\(error.internalDetail ?? "")"])
            apiError = .serviceUnavailable("The database is unavailable; retry shortly.")
        case let error as DomainError where error.code == .storeFailure:
            logger.error("database error", metadata: ["request_id": "\(info.id)", "route": "\(info.route)",
                                                      "error": "\(error.internalDetail ?? "")"])
            apiError = .internalError()
        case let error as DomainError:
            if let detail = error.internalDetail {
                logger.notice("upstream refused", metadata: ["request_id": "\(info.id)", "code": "\(error.code)", "detail": "\(detail)"])
            }
            apiError = Self.map(error)
        default:
            logger.error("unhandled error", metadata: ["request_id": "\(info.id)", "route": "\(info.route)",
                                                       "error": "\(error)"])
            apiError = .internalError()
        }
        return apiError.response(instance: request.path, requestID: info.id)
    }

    static func map(_ error: DomainError) -> APIError {
        switch error.code {
        case .notFound:
            return APIError(.notFound, detail: error.message)
        case .conflict:
            return APIError(.ticketStateConflict, detail: error.message)
        case .invalid:
            return APIError(.deskRejected, detail: error.message)
        case .unauthorized:
            return APIError(.deskSessionExpired, detail: "Desk no longer accepts this session; sign in again.",
                            headers: [("WWW-Authenticate", #"Bearer realm="desk-gateway""#)])
        case .forbidden:
            return APIError(.forbidden, detail: error.message)
        case .rateLimited, .upstreamUnavailable:
            return APIError(.deskUnavailable, detail: "Sendbird Desk is not answering right now; retry later.",
                            headers: [("Retry-After", String(error.retryAfterSeconds ?? 5))])
        default:
            return APIError(.badGateway, detail: "Sendbird Desk answered in a way the gateway did not understand.")
        }
    }


    private func requestID(for request: HTTPRequest) -> String {
        if let given = request.header("x-request-id"), Self.isAcceptableID(given) { return given }
        let next = requestCounter.add(1, ordering: .relaxed).newValue
        return idPrefix + "-" + String(next, radix: 16)
    }

    /// Client-supplied ids are echoed and logged, so only short visible ASCII is accepted.
    private static func isAcceptableID(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 128 && id.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }

    private enum Admission {
        case admitted([(name: String, value: String)])
        case refused(APIError)
    }

    /// Which bucket a request counts against: a verified credential's own, or else its client address (sign-ins have
    /// their own per address). Signed Desk webhooks are not limited; an address with too many failed
    /// authentications is refused before anything looks its credentials up.
    private func admit(_ request: HTTPRequest) -> Admission {
        let client = clients.client(request)
        let credential = request.header("x-api-key") ?? Authenticator.bearer(request)
        let isVerified = credential.map(verified.contains) ?? false
        let isSignIn = request.method == "POST" && request.path == "/v1/sessions"
        let isWebhook = request.path == "/v1/webhooks/desk"
        if !isVerified, credential != nil || isSignIn || isWebhook, failures.isExhausted("f:" + client) {
            var error = APIError(.rateLimited, detail: "Too many failed authentications from this address; retry later.")
            error.headers = [("Retry-After", String(max(1, Int((60 / Double(max(1, policy.authFailuresPerMinute))).rounded(.up)))))]
            return .refused(error)
        }
        if isWebhook { return .admitted([]) }
        let (bucket, key, perMinute) = isSignIn ? (signIns, "s:" + client, policy.signInPerMinute)
            : (limiter, isVerified ? "t:" + credential! : "a:" + client, policy.rateLimitPerMinute)
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

    private func finish(_ response: HTTPResponse, request: HTTPRequest, route: String, requestID: String,
                        started: ContinuousClock.Instant, extra: [(name: String, value: String)] = []) -> HTTPResponse {
        if response.status == 401, request.path.hasPrefix("/v1/") {
            _ = failures.take("f:" + clients.client(request))
            if let credential = request.header("x-api-key") ?? Authenticator.bearer(request) { verified.remove(credential) }
        }
        var response = ETag.apply(to: response, request: request)
        response.headers.append(("X-Request-ID", requestID))
        response.headers.append(contentsOf: extra)
        if let origin = allowedOrigin(request) {
            response.headers.append(("Access-Control-Allow-Origin", origin))
            response.headers.append(("Vary", "Origin"))
            response.headers.append(("Access-Control-Expose-Headers",
                                     "ETag, X-Request-ID, X-Cache, Retry-After, Location, RateLimit, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, Idempotent-Replayed"))
        }
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        metrics.increment("http_requests_total", [("route", route), ("method", request.method), ("status", String(response.status))])
        if let cache = response.header("x-cache") { metrics.increment("ticket_cache_total", [("result", cache.lowercased())]) }
        metrics.observe("http_request_duration_seconds", [("route", route)], seconds)
        if logger.logLevel <= .info {
            logger.info("request", metadata: [
                "request_id": "\(requestID)", "method": "\(request.method)", "path": "\(request.path)",
                "route": "\(route)", "status": .stringConvertible(response.status),
                "duration_ms": .stringConvertible((seconds * 1e5).rounded() / 100),
            ])
        }
        return response
    }
}
