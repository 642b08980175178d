public import Domain
public import HTTPServer
public import Logging
public import Telemetry
public import Store
import Synchronization

/// Cross-cutting policy of the public API.
public struct APIPolicy: Sendable {
    /// Origins allowed to call from browsers; `*` allows any.
    public var corsOrigins: [String]
    public var rateLimitPerMinute: Int
    public var rateLimitBurst: Int
    /// Sign-ins per client address (their own bucket; per user id see `CustomerAPISettings`).
    public var signInPerMinute: Int
    public var signInBurst: Int
    /// Failed authentications (401) per client address; past them, requests with unverified credentials are refused
    /// before any database lookup.
    public var authFailuresPerMinute: Int
    public var authFailureBurst: Int
    /// Peers whose `X-Forwarded-For` / `Forwarded` name the client.
    public var trustedProxies: [CIDR]

    public init(corsOrigins: [String], rateLimitPerMinute: Int, rateLimitBurst: Int, signInPerMinute: Int, signInBurst: Int,
                authFailuresPerMinute: Int, authFailureBurst: Int, trustedProxies: [CIDR]) {
        self.corsOrigins = corsOrigins
        self.rateLimitPerMinute = rateLimitPerMinute
        self.rateLimitBurst = rateLimitBurst
        self.signInPerMinute = signInPerMinute
        self.signInBurst = signInBurst
        self.authFailuresPerMinute = authFailuresPerMinute
        self.authFailureBurst = authFailureBurst
        self.trustedProxies = trustedProxies
    }
}

/// The gateway's HTTP front, composed of small steps (each in `Middleware/`): request id, CORS, rate limits,
/// routing, idempotency keys, problem+json for every failure, ETags, metrics and the access log.
public final class APIResponder: HTTPResponder {
    private let router: Router<RouteHandler>
    private let ids = RequestIDs()
    private let cors: CORS
    private let admission: Admission
    private let idempotency: IdempotencyStore?
    private let problems: ProblemMapper
    private let accessLog: AccessLog
    private let inFlight = Atomic<Int>(0)
    /// Where server spans go when traces are exported; then every request is traced.
    private let spans: (any SpanRecorder)?

    public init(routes: RouteTable, metrics: MetricsRegistry, logger: Logger, policy: APIPolicy,
                idempotency: IdempotencyStore? = nil, verified: VerifiedCallers = VerifiedCallers(), spans: (any SpanRecorder)? = nil) {
        self.spans = spans
        router = routes.router
        cors = CORS(origins: policy.corsOrigins)
        admission = Admission(policy: policy, verified: verified)
        self.idempotency = idempotency
        problems = ProblemMapper(logger: logger)
        accessLog = AccessLog(metrics: metrics, logger: logger, routes: routes.router.templates + Self.pseudoRoutes)
        metrics.gauge("http_requests_in_flight", help: "Requests currently waiting on async work.") { [weak self] in
            [([], Double(self?.inFlight.load(ordering: .relaxed) ?? 0))]
        }
        metrics.gauge("memory_entries", help: "Entries of the in-memory structures that follow callers (each bounded by size and age).") {
            [weak self] in
            guard let self else { return [] }
            return [([("structure", "rate_limit_buckets")], Double(admission.bucketCount)),
                    ([("structure", "verified_callers")], Double(verified.count))]
        }
    }

    /// The route labels of answers given before or without routing.
    static let pseudoRoutes = ["(preflight)", "(rate limited)", "(unmatched)", "(body too large)", "(malformed request)", "(connection limit)"]

    public func respond(to request: HTTPRequest) -> HTTPReply {
        let started = ContinuousClock.now
        let requestID = ids.id(for: request)
        // The caller's trace when it sent one; a new one is started only where it can be seen (an access log line, a
        // route that may call Desk), so the cheap routes pay nothing for it.
        let given = request.header("traceparent").map { TraceContext.incoming(traceparent: $0, tracestate: request.header("tracestate")) }
            ?? (spans == nil ? nil : TraceContext.incoming(traceparent: nil))
        func done(_ response: HTTPResponse, _ request: HTTPRequest, _ route: String, _ extra: [(name: String, value: String)] = []) -> HTTPReply {
            .now(finish(response, request: request, route: route, requestID: requestID, started: started, extra: extra, trace: given))
        }
        if cors.isPreflight(request) { return done(cors.preflight(request), request, "(preflight)") }
        var limitHeaders: [(name: String, value: String)] = []
        if request.path.hasPrefix("/v1/") || request.path.hasPrefix("/reports") {
            switch admission.admit(request) {
            case .admitted(let headers): limitHeaders = headers
            case .refused(let error): return done(error.response(instance: request.path, requestID: requestID), request, "(rate limited)")
            }
        }
        switch router.match(method: request.method, path: request.path) {
        case .notFound:
            return done(APIError.notFound().response(instance: request.path, requestID: requestID), request, "(unmatched)", limitHeaders)
        case .methodNotAllowed(let allowed, let template):
            return done(APIError.methodNotAllowed(allowed).response(instance: request.path, requestID: requestID), request, template, limitHeaders)
        case .found(let handler, let template, let parameters):
            var routed = request
            routed.pathParameters = parameters
            let info = RequestInfo(id: requestID, route: template, trace: given)
            let slow: @Sendable (HTTPRequest, RequestInfo) async throws -> HTTPResponse
            switch handler {
            case .sync(let body):
                let response: HTTPResponse
                do { response = try body(routed, info) } catch { response = problems.response(for: error, request: routed, info: info) }
                return done(response, routed, template, limitHeaders)
            case .hybrid(let fast, let rest):
                if let response = fast(routed, info) { return done(response, routed, template, limitHeaders) }
                slow = rest
            case .async(let body):
                slow = body
            }
            inFlight.add(1, ordering: .relaxed)
            let trace = given ?? TraceContext.incoming(traceparent: nil)
            let traced = RequestInfo(id: requestID, route: template, trace: trace)
            return .later { [self, routed, limitHeaders] in
                // Desk calls made for this request carry its trace (DeskClient reads it from the task).
                let response: HTTPResponse = await TraceContext.$current.withValue(trace) {
                    do {
                        if let idempotency {
                            return try await idempotency.run(routed, info: traced, slow) { problems.response(for: $0, request: routed, info: traced) }
                        }
                        return try await slow(routed, traced)
                    } catch {
                        return problems.response(for: error, request: routed, info: traced)
                    }
                }
                inFlight.subtract(1, ordering: .relaxed)
                return finish(response, request: routed, route: template, requestID: requestID, started: started, extra: limitHeaders, trace: trace)
            }
        }
    }

    public func bodyTooLarge(_ request: HTTPRequest, limit: Int) -> HTTPResponse {
        let requestID = ids.id(for: request)
        let response = APIError.payloadTooLarge(limit: limit).response(instance: request.path, requestID: requestID)
        return finish(response, request: request, route: "(body too large)", requestID: requestID, started: .now)
    }

    public func badRequest(_ request: HTTPRequest, reason: String) -> HTTPResponse {
        // The request's own id is not trusted here: its headers are what is wrong.
        var clean = request
        clean.headers = []
        let requestID = ids.id(for: clean)
        let response = APIError(.malformedRequest, detail: reason).response(instance: "/", requestID: requestID)
        return finish(response, request: clean, route: "(malformed request)", requestID: requestID, started: .now)
    }

    public func overloaded(_ request: HTTPRequest) -> HTTPResponse {
        let requestID = ids.id(for: request)
        let response = APIError(.serviceUnavailable, detail: "The server is at its connection limit; retry shortly.", headers: [("Retry-After", "1")])
            .response(instance: request.path, requestID: requestID)
        return finish(response, request: request, route: "(connection limit)", requestID: requestID, started: .now)
    }

    public func shuttingDown(_ request: HTTPRequest) -> HTTPResponse {
        var response = APIError.shuttingDown().response(instance: request.path, requestID: ids.id(for: request))
        cors.decorate(&response, for: request)
        return response
    }

    /// Every answer's way out: failed-authentication bookkeeping, ETag, request id, rate-limit and CORS headers,
    /// metrics and the access log.
    private func finish(_ response: HTTPResponse, request: HTTPRequest, route: String, requestID: String,
                        started: ContinuousClock.Instant, extra: [(name: String, value: String)] = [], trace: TraceContext? = nil) -> HTTPResponse {
        admission.observe(response, to: request)
        var response = ETag.apply(to: response, request: request)
        // One allocation for the headers added below (request id, rate limits, CORS).
        response.headers.reserveCapacity(response.headers.count + extra.count + 4)
        response.headers.append(("X-Request-ID", requestID))
        response.headers.append(contentsOf: extra)
        cors.decorate(&response, for: request)
        accessLog.record(response, request: request, route: route, requestID: requestID, started: started, trace: trace)
        if let spans, let trace {
            spans.record(Span(context: trace, name: "\(request.method) \(route)", kind: .server, startNanos: Span.wallNanos(of: started),
                              endNanos: Span.now(),
                              attributes: [("http.request.method", .string(request.method)), ("http.route", .string(route)),
                                           ("url.path", .string(request.path)), ("http.response.status_code", .int(response.status)),
                                           ("http.request.id", .string(requestID))],
                              failed: response.status >= 500))
        }
        return response
    }
}
