public import Domain
public import HTTPServer
public import Logging
public import Telemetry

/// Metrics and the access log line of every answer, by route template (never the concrete path).
public struct AccessLog: Sendable {
    let metrics: MetricsRegistry
    let logger: Logger

    public init(metrics: MetricsRegistry, logger: Logger) {
        metrics.describe("http_requests_total", .counter, help: "HTTP requests by route template, method and status.")
        metrics.describe("http_request_duration_seconds", .histogram, help: "HTTP request latency by route template.")
        metrics.describe("ticket_cache_total", .counter, help: "Ticket reads by cache result (hit, miss: read from Desk, stale: Desk unreachable).")
        self.metrics = metrics
        self.logger = logger
    }

    /// RFC 9110's methods and PATCH keep their name in the metrics; any other method (routed like the rest: 405 on a
    /// known path, 404 elsewhere) is counted as `OTHER`, so no request can add a series.
    public static let knownMethods: Set<String> = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"]

    static func methodLabel(_ method: String) -> String { knownMethods.contains(method) ? method : "OTHER" }

    public func record(_ response: HTTPResponse, request: HTTPRequest, route: String, requestID: String, started: ContinuousClock.Instant,
                       trace: TraceContext? = nil) {
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        metrics.increment("http_requests_total", [("route", route), ("method", Self.methodLabel(request.method)), ("status", String(response.status))])
        if let cache = response.header("x-cache") { metrics.increment("ticket_cache_total", [("result", cache.lowercased())]) }
        metrics.observe("http_request_duration_seconds", [("route", route)], seconds)
        guard logger.logLevel <= .info else { return }
        var metadata: Logger.Metadata = [
            "request_id": "\(requestID)", "method": "\(Self.methodLabel(request.method))", "path": "\(request.path)",
            "route": "\(route)", "status": .stringConvertible(response.status),
            "duration_ms": .stringConvertible((seconds * 1e5).rounded() / 100),
        ]
        let trace = trace ?? TraceContext.incoming(traceparent: nil)
        metadata["trace_id"] = "\(trace.traceID)"
        metadata["span_id"] = "\(trace.spanID)"
        logger.info("request", metadata: metadata)
    }
}
