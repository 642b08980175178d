public import Domain
public import HTTPServer
public import Logging
public import Telemetry
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

/// The gateway's HTTP front: the request steps (`Middleware`: access log, server spans, request id, CORS, admission,
/// ETags), then routing, idempotency keys and problem+json around the route's handler.
public final class APIResponder: HTTPResponder {
    private let router: Router<Routed>
    /// Keeps the route entries the router lends.
    private let routeEntries: [RouteEntry]
    private let ids = RequestIDs()
    private let cors: CORS
    private let admission: Admission
    /// Access log, server spans, request id, CORS, admission, ETags: entered in this order, left in reverse.
    typealias Steps = Chained<AccessLog, Chained<ServerSpans, Chained<RequestIDs, Chained<CORS, Chained<Admission, ConditionalGET>>>>>
    private let steps: MiddlewareChain<Steps>
    private let idempotency: IdempotentWrites?
    private let problems: ProblemMapper
    private let inFlight = Atomic<Int>(0)
    /// What `OPTIONS *` names: every method some path of this server takes.
    private let serverMethods: [String]

    public init(routes: RouteTable, metrics: MetricsRegistry, logger: Logger, policy: APIPolicy,
                idempotency: IdempotentWrites? = nil, verified: VerifiedCallers = VerifiedCallers(), spans: (any SpanRecorder)? = nil) {
        router = routes.router
        routeEntries = routes.entries
        serverMethods = (routes.router.methods + ["OPTIONS"]).sorted()
        cors = CORS(origins: policy.corsOrigins)
        admission = Admission(policy: policy, verified: verified)
        self.idempotency = idempotency
        problems = ProblemMapper(logger: logger)
        let accessLog = AccessLog(metrics: metrics, logger: logger, routes: routes.router.templates + Self.pseudoRoutes)
        steps = MiddlewareChain(steps: accessLog.then(ServerSpans(spans: spans).then(ids.then(cors.then(admission.then(ConditionalGET()))))))
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

    /// An answer to `OPTIONS`: no content, the methods in `Allow`.
    static func options(allowing methods: [String]) -> HTTPResponse {
        var response = HTTPResponse(status: 204)
        response.headers.append(("Allow", methods.joined(separator: ", ")))
        return response
    }

    /// The route labels of answers given before or without routing (`*` is `OPTIONS *`).
    static let pseudoRoutes = ["*", "(preflight)", "(rate limited)", "(unmatched)", "(body too large)", "(malformed request)", "(connection limit)"]

    public func respond(to request: HTTPRequest) -> HTTPReply {
        var request = request
        return respond(inPlace: &request)
    }

    /// Routes the request where it lies, its path parameters set in it (a copy to set them retained and released
    /// every string and array of every request).
    public func respond(inPlace request: inout HTTPRequest) -> HTTPReply {
        var exchange = Exchange()
        if let answer = steps.enter(request, &exchange) { return .now(steps.leave(answer, request, exchange)) }
        switch router.match(method: request.method, path: request.path) {
        case .notFound:
            if request.path == "*" {
                exchange.route = "*"
                return .now(steps.leave(Self.options(allowing: serverMethods), request, exchange))
            }
            exchange.route = "(unmatched)"
            return .now(steps.leave(APIError.notFound().response(instance: request.path, requestID: exchange.requestID), request, exchange))
        case .methodNotAllowed(let allowed, let template):
            exchange.route = template
            // RFC 9110 §9.3.7: OPTIONS names what a path takes (a preflight never gets here: CORS answered it).
            if request.method == "OPTIONS" { return .now(steps.leave(Self.options(allowing: allowed + ["OPTIONS"]), request, exchange)) }
            let refusal = APIError.methodNotAllowed(allowed + ["OPTIONS"])
            return .now(steps.leave(refusal.response(instance: request.path, requestID: exchange.requestID), request, exchange))
        case .found(let routed, let template, let parameters):
            request.pathParameters = parameters
            exchange.route = template
            exchange.routeNumber = routed.number
            return routed.withHandler { handle($0, request, exchange) }
        }
    }

    /// A route's handler: at once on this thread when it can answer without waiting, else as a Swift task (its Desk
    /// calls carry the request's trace; a POST with `Idempotency-Key` is claimed first).
    private func handle(_ handler: RouteHandler, _ routed: HTTPRequest, _ exchange: Exchange) -> HTTPReply {
        let info = RequestInfo(id: exchange.requestID, route: exchange.route, trace: exchange.trace)
        let slow: @Sendable (HTTPRequest, RequestInfo) async throws -> HTTPResponse
        switch handler {
        // Answers are handed to `leave` as they come (a named one was copied on the way, and its headers array then
        // copied again when the steps append to it).
        case .sync(let body):
            do { return .now(steps.leave(try body(routed, info), routed, exchange)) } catch {
                return .now(steps.leave(problems.response(for: error, request: routed, info: info), routed, exchange))
            }
        case .hybrid(let fast, let rest):
            if let response = fast(routed, info) { return .now(steps.leave(consume response, routed, exchange)) }
            slow = rest
        case .async(let body):
            slow = body
        }
        return later(slow, routed, exchange)
    }

    /// A route's async work, run as a Swift task while the connection waits; its answer goes through the steps
    /// when the work ends.
    private func later(_ slow: @escaping @Sendable (HTTPRequest, RequestInfo) async throws -> HTTPResponse, _ routed: HTTPRequest,
                       _ exchange: Exchange) -> HTTPReply {
        inFlight.add(1, ordering: .relaxed)
        var traced = exchange
        traced.trace = exchange.trace ?? TraceContext.incoming(traceparent: nil)
        let trace = traced.trace
        let tracedInfo = RequestInfo(id: exchange.requestID, route: exchange.route, trace: trace)
        return .later { [self, routed, traced] in
            let response: HTTPResponse = await TraceContext.$current.withValue(trace) {
                do {
                    if let idempotency {
                        return try await idempotency.run(routed, info: tracedInfo, slow) { problems.response(for: $0, request: routed, info: tracedInfo) }
                    }
                    return try await slow(routed, tracedInfo)
                } catch {
                    return problems.response(for: error, request: routed, info: tracedInfo)
                }
            }
            inFlight.subtract(1, ordering: .relaxed)
            return steps.leave(response, routed, traced)
        }
    }

    /// An answer given by the server before any route: its route label names it in the metrics and the log.
    private func answer(_ response: (String) -> HTTPResponse, _ request: HTTPRequest, route: String) -> HTTPResponse {
        let exchange = Exchange(requestID: ids.id(for: request), route: route)
        return steps.leave(response(exchange.requestID), request, exchange)
    }

    public func bodyTooLarge(_ request: HTTPRequest, limit: Int) -> HTTPResponse {
        answer({ APIError.payloadTooLarge(limit: limit).response(instance: request.path, requestID: $0) }, request, route: "(body too large)")
    }

    public func badRequest(_ request: HTTPRequest, reason: String) -> HTTPResponse {
        // The request's own id is not trusted here: its headers are what is wrong.
        var clean = request
        clean.headers = []
        return answer({ APIError(.malformedRequest, detail: reason).response(instance: "/", requestID: $0) }, clean, route: "(malformed request)")
    }

    public func overloaded(_ request: HTTPRequest) -> HTTPResponse {
        answer({ APIError(.serviceUnavailable, detail: "The server is at its connection limit; retry shortly.", headers: [("Retry-After", "1")])
            .response(instance: request.path, requestID: $0) }, request, route: "(connection limit)")
    }

    public func shuttingDown(_ request: HTTPRequest) -> HTTPResponse {
        var response = APIError.shuttingDown().response(instance: request.path, requestID: ids.id(for: request))
        cors.decorate(&response, for: request)
        return response
    }
}
