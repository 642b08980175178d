public import Domain
public import HTTPServer

/// What the request steps learn about one request on its way in, and read again on the way out.
public struct Exchange: Sendable {
    /// `MonotonicClock.nanos()` when the request was taken up.
    public let started: Int64
    public var requestID = ""
    /// The route template, or the label of an answer given before routing (`(preflight)`, `(rate limited)`, …):
    /// never the concrete path, so it is safe as a metric label.
    public var route = ""
    /// The route's number in its table's templates (and in the access log's series); -1 for an answer given
    /// before or without routing, which the log finds by its label.
    public var routeNumber = -1
    /// The W3C trace the request belongs to, when it has one.
    public var trace: TraceContext?
    /// Where the caller stands with the rate limits, told on every answer to this request.
    public var rateLimit: RateLimitStanding?

    public init(started: Int64 = MonotonicClock.nanos(), requestID: String = "", route: String = "") {
        (self.started, self.requestID, self.route) = (started, requestID, route)
    }
}

/// The API's request steps, all of one shape. On the way in, in order, a step may answer the request itself (a
/// preflight, a refusal), naming the answer's route label; the first answer wins, and the steps after it, the router
/// and the handler are skipped. On the way out every step, in reverse order, sees every answer: its own and the
/// others', the router's 404 and 405, and the handlers', given at once or after async work. Steps run on the
/// libmicrohttpd thread and never wait, so a request answered from memory needs no Swift task.
///
/// Two things wrap a route's async work instead, since they await: idempotency keys (`IdempotencyKeys.run`) and
/// the mapping of its errors to problems (`ProblemMapper`).
public protocol Middleware: Sendable {
    func enter(_ request: HTTPRequest, _ exchange: inout Exchange) -> HTTPResponse?
    func leave(_ response: inout HTTPResponse, _ request: HTTPRequest, _ exchange: Exchange)
}

extension Middleware {
    public func enter(_ request: HTTPRequest, _ exchange: inout Exchange) -> HTTPResponse? { nil }
    public func leave(_ response: inout HTTPResponse, _ request: HTTPRequest, _ exchange: Exchange) {}
}

/// Two steps run as one: the outer one enters first and leaves last. Chains are built from concrete types, so a
/// request's trip through every step is direct calls the compiler can inline (no existential per step).
struct Chained<Outer: Middleware, Inner: Middleware>: Middleware {
    let outer: Outer
    let inner: Inner

    func enter(_ request: HTTPRequest, _ exchange: inout Exchange) -> HTTPResponse? {
        if let answer = outer.enter(request, &exchange) { return answer }
        return inner.enter(request, &exchange)
    }

    func leave(_ response: inout HTTPResponse, _ request: HTTPRequest, _ exchange: Exchange) {
        inner.leave(&response, request, exchange)
        outer.leave(&response, request, exchange)
    }
}

extension Middleware {
    /// This step around `next`.
    func then<Next: Middleware>(_ next: Next) -> Chained<Self, Next> { Chained(outer: self, inner: next) }
}

/// The steps of a responder, run as one. A class: as a struct held by the responder, the whole chain (every step's
/// stored references) was copied for each answer handed to `leave`.
final class MiddlewareChain<Steps: Middleware>: Sendable {
    let steps: Steps

    init(steps: Steps) {
        self.steps = steps
    }

    /// The first step's own answer, with the route label it gave, or nil when every step let the request through.
    func enter(_ request: HTTPRequest, _ exchange: inout Exchange) -> HTTPResponse? {
        steps.enter(request, &exchange)
    }

    /// Consuming: a handler's fresh answer arrives here uniquely held, so its headers grow in place (a borrowed one
    /// would be copied on the first header added).
    func leave(_ response: consuming HTTPResponse, _ request: HTTPRequest, _ exchange: Exchange) -> HTTPResponse {
        response.headers.reserveCapacity(response.headers.count + (exchange.rateLimit == nil ? 0 : RateLimitStanding.headerCount)
                                         + AnswerHeaders.addedBySteps)
        steps.leave(&response, request, exchange)
        return response
    }
}

/// Room for the headers the steps add on the way out, so an answer's header array is made once.
enum AnswerHeaders {
    /// Request id, CORS's origin and `Vary`, ETag; the rate-limit fields are counted apart, since only admitted
    /// requests carry them.
    static let addedBySteps = 4

    /// An empty header array for a handler's `own` headers and everything the steps add.
    static func withRoom(for own: Int) -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = []
        headers.reserveCapacity(own + addedBySteps + RateLimitStanding.headerCount)
        return headers
    }
}

extension RequestIDs: Middleware {
    public func enter(_ request: HTTPRequest, _ exchange: inout Exchange) -> HTTPResponse? {
        exchange.requestID = id(for: request)
        return nil
    }

    public func leave(_ response: inout HTTPResponse, _ request: HTTPRequest, _ exchange: Exchange) {
        response.headers.append(("X-Request-ID", exchange.requestID))
    }
}

extension CORS: Middleware {
    public func enter(_ request: HTTPRequest, _ exchange: inout Exchange) -> HTTPResponse? {
        guard isPreflight(request) else { return nil }
        exchange.route = "(preflight)"
        return preflight(request)
    }

    public func leave(_ response: inout HTTPResponse, _ request: HTTPRequest, _ exchange: Exchange) {
        decorate(&response, for: request)
    }
}

extension Admission: Middleware {
    /// The customer API and the reports are rate limited; health, metrics and the document are not.
    public func enter(_ request: HTTPRequest, _ exchange: inout Exchange) -> HTTPResponse? {
        guard request.path.hasPrefix("/v1/") || request.path.hasPrefix("/reports") else { return nil }
        switch admit(request) {
        case .admitted(let standing):
            exchange.rateLimit = standing
            return nil
        case .refused(let error):
            exchange.route = "(rate limited)"
            return error.response(instance: request.path, requestID: exchange.requestID)
        }
    }

    public func leave(_ response: inout HTTPResponse, _ request: HTTPRequest, _ exchange: Exchange) {
        observe(response, to: request)
        exchange.rateLimit?.append(to: &response.headers)
    }
}

/// `ETag` on whole GET answers, and 304 when the client has the answer already.
struct ConditionalGET: Middleware {
    func leave(_ response: inout HTTPResponse, _ request: HTTPRequest, _ exchange: Exchange) {
        ETag.apply(to: &response, request: request)
    }
}

/// The caller's W3C trace on the way in (or a new one when spans are exported); a server span on the way out.
struct ServerSpans: Middleware {
    let spans: (any SpanRecorder)?
    /// Asked per request without copying the optional existential.
    private let exports: Bool

    init(spans: (any SpanRecorder)?) {
        self.spans = spans
        exports = spans != nil
    }

    func enter(_ request: HTTPRequest, _ exchange: inout Exchange) -> HTTPResponse? {
        // A new trace is started only where it can be seen (an access log line, a route that may call Desk, an
        // exporter), so the cheap routes pay nothing for it.
        // Left alone when there is nothing to set: writing the optional trace goes through its value witnesses.
        if let parent = request.header("traceparent") {
            exchange.trace = TraceContext.incoming(traceparent: parent, tracestate: request.header("tracestate"))
        } else if exports {
            exchange.trace = TraceContext.incoming(traceparent: nil)
        }
        return nil
    }

    func leave(_ response: inout HTTPResponse, _ request: HTTPRequest, _ exchange: Exchange) {
        guard exports, let spans, let trace = exchange.trace else { return }
        spans.record(Span(context: trace, name: "\(request.method) \(exchange.route)", kind: .server, startNanos: Span.wallNanos(ofMonotonic: exchange.started),
                          endNanos: Span.now(),
                          attributes: [("http.request.method", .string(request.method)), ("http.route", .string(exchange.route)),
                                       ("url.path", .string(request.path)), ("http.response.status_code", .int(response.status)),
                                       ("http.request.id", .string(exchange.requestID))],
                          failed: response.status >= 500))
    }
}

extension AccessLog: Middleware {
    public func leave(_ response: inout HTTPResponse, _ request: HTTPRequest, _ exchange: Exchange) {
        record(response, request: request, route: exchange.route, routeNumber: exchange.routeNumber, requestID: exchange.requestID,
               started: exchange.started, trace: exchange.trace)
    }
}
