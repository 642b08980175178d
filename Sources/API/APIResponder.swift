public import HTTPServer
public import Logging
public import Telemetry
import Postgres
import Synchronization

/// The gateway's HTTP front: routing, request ids, problem+json for every failure, metrics and access logs.
public final class APIResponder: HTTPResponder {
    private let router: Router<RouteHandler>
    private let metrics: MetricsRegistry
    private let logger: Logger
    private let inFlight = Atomic<Int>(0)
    private let requestCounter = Atomic<UInt64>(0)
    private let idPrefix: String

    public init(routes: RouteTable, metrics: MetricsRegistry, logger: Logger) {
        self.router = routes.router
        self.metrics = metrics
        self.logger = logger
        var generator = SystemRandomNumberGenerator()
        let prefix = String(generator.next() as UInt32, radix: 16)
        idPrefix = String(repeating: "0", count: 8 - prefix.count) + prefix
        metrics.describe("http_requests_total", .counter, help: "HTTP requests by route template, method and status.")
        metrics.describe("http_request_duration_seconds", .histogram, help: "HTTP request latency by route template.")
        metrics.gauge("http_requests_in_flight", help: "Requests currently waiting on async work.") { [weak self] in
            [([], Double(self?.inFlight.load(ordering: .relaxed) ?? 0))]
        }
    }

    public func respond(to request: HTTPRequest) -> HTTPReply {
        let started = ContinuousClock.now
        let requestID = requestID(for: request)
        switch router.match(method: request.method, path: request.path) {
        case .notFound:
            let response = APIError.notFound().response(instance: request.path, requestID: requestID)
            return .now(finish(response, request: request, route: "(unmatched)", requestID: requestID, started: started))
        case .methodNotAllowed(let allowed, let template):
            let response = APIError.methodNotAllowed(allowed).response(instance: request.path, requestID: requestID)
            return .now(finish(response, request: request, route: template, requestID: requestID, started: started))
        case .found(let handler, let template, let parameters):
            var routed = request
            routed.pathParameters = parameters
            let info = RequestInfo(id: requestID, route: template)
            switch handler {
            case .sync(let body):
                let response: HTTPResponse
                do { response = try body(routed, info) } catch { response = problem(for: error, request: routed, info: info) }
                return .now(finish(response, request: routed, route: template, requestID: requestID, started: started))
            case .async(let body):
                inFlight.add(1, ordering: .relaxed)
                return .later { [self, routed] in
                    let response: HTTPResponse
                    do { response = try await body(routed, info) } catch { response = problem(for: error, request: routed, info: info) }
                    inFlight.subtract(1, ordering: .relaxed)
                    return finish(response, request: routed, route: template, requestID: requestID, started: started)
                }
            }
        }
    }

    public func bodyTooLarge(_ request: HTTPRequest, limit: Int) -> HTTPResponse {
        let requestID = requestID(for: request)
        let response = APIError.payloadTooLarge(limit: limit).response(instance: request.path, requestID: requestID)
        return finish(response, request: request, route: "(body too large)", requestID: requestID, started: .now)
    }

    public func shuttingDown(_ request: HTTPRequest) -> HTTPResponse {
        let requestID = requestID(for: request)
        return APIError.shuttingDown().response(instance: request.path, requestID: requestID)
    }

    /// The single place where errors become responses; anything unknown is a 500 whose detail goes only to the log.
    func problem(for error: any Error, request: HTTPRequest, info: RequestInfo) -> HTTPResponse {
        let apiError: APIError
        switch error {
        case let error as APIError:
            apiError = error
        case let error as PostgresError where error.isUnavailable:
            logger.warning("database unavailable", metadata: ["request_id": "\(info.id)", "error": "\(error.detail)"])
            apiError = .serviceUnavailable("The database is unavailable; retry shortly.")
        default:
            logger.error("unhandled error", metadata: ["request_id": "\(info.id)", "route": "\(info.route)",
                                                       "error": "\(Self.logDetail(error))"])
            apiError = .internalError()
        }
        return apiError.response(instance: request.path, requestID: info.id)
    }

    private static func logDetail(_ error: any Error) -> String {
        if let error = error as? PostgresError { return "\(error) \(error.detail)" }
        return String(describing: error)
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

    private func finish(_ response: HTTPResponse, request: HTTPRequest, route: String, requestID: String,
                        started: ContinuousClock.Instant) -> HTTPResponse {
        var response = response
        response.headers.append(("X-Request-ID", requestID))
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let status = String(response.status)
        metrics.increment("http_requests_total", [("route", route), ("method", request.method), ("status", status)])
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
