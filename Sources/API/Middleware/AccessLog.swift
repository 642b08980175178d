public import Domain
public import HTTPServer
public import Logging
public import Telemetry

/// Metrics and the access log line of every answer, by route template (never the concrete path).
///
/// Every route's series are resolved when the log is made (`routes`), so an answer is counted with a few atomic
/// adds: no labels rendered, no registry lock taken (two request threads once queued on it).
public struct AccessLog: Sendable {
    let metrics: MetricsRegistry
    let logger: Logger
    /// Read once: the level is fixed at start, and asking the logger copies its handler on every answer.
    private let logsRequests: Bool
    private let logsProbes: Bool
    /// By route number: whether it is one of `probeRoutes`.
    private let probes: [Bool]
    private let series: [String: RouteSeries]
    /// The same series in the order of the routes given, found by a route's number (`Exchange.routeNumber`): no
    /// template hashed, no series retained per answer.
    private let numbered: Unretained<RouteSeries>
    /// The ticket cache's results and their counters, lent by index like the routes' series.
    private let cacheResults: [String]
    private let cacheCounters: Unretained<CounterHandle>

    /// The series of one route: its latency histogram and its requests by method and status.
    final class RouteSeries: Sendable {
        let duration: HistogramHandle
        let requests = KeyedCounters(capacity: 64)

        init(duration: HistogramHandle) {
            self.duration = duration
        }
    }

    public init(metrics: MetricsRegistry, logger: Logger, routes: [String] = []) {
        metrics.describe("http_requests_total", .counter, help: "HTTP requests by route template, method and status.")
        metrics.describe("http_request_duration_seconds", .histogram, help: "HTTP request latency by route template.")
        metrics.describe("ticket_cache_total", .counter, help: "Ticket reads by cache result (hit, miss: read from Desk, stale: Desk unreachable).")
        self.metrics = metrics
        self.logger = logger
        logsRequests = logger.logLevel <= .info
        logsProbes = logger.logLevel <= .debug
        probes = routes.map(Self.probeRoutes.contains)
        var series: [String: RouteSeries] = [:]
        for route in routes where series[route] == nil {
            series[route] = RouteSeries(duration: metrics.histogram("http_request_duration_seconds", [("route", route)]))
        }
        self.series = series
        numbered = Unretained(routes.map { series[$0]! })
        cacheResults = ["hit", "miss", "stale"]
        cacheCounters = Unretained(cacheResults.map { metrics.counter("ticket_cache_total", [("result", $0)]) })
        let all = series
        metrics.addSource("http_requests_total") {
            all.flatMap { route, series in
                series.requests.entries.map { key, value in
                    ([("route", route), ("method", Self.methods[key / 1000 - 1]), ("status", String(key % 1000))], Double(value))
                }
            }
        }
    }

    /// RFC 9110's methods and PATCH keep their name in the metrics; any other method (routed like the rest: 405 on a
    /// known path, 404 elsewhere) is counted as `OTHER`, so no request can add a series.
    public static let knownMethods: Set<String> = Set(methods.dropLast())
    static let methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT", "OTHER"]

    static func methodLabel(_ method: String) -> String { knownMethods.contains(method) ? method : "OTHER" }

    /// What orchestrators and Prometheus ask every few seconds (the paths `OpsRoutes` registers): their 2xx answers
    /// are logged at `debug`, so that `info` keeps one line per request a client made; any other answer at `info`.
    static let probeRoutes = OpsRoutes.probePaths

    /// 1 + the index of the method's label in `methods`.
    static func methodNumber(_ method: String) -> Int {
        for (index, name) in methods.enumerated() where name == method && index < methods.count - 1 { return index + 1 }
        return methods.count
    }

    /// `routeNumber`: the route's place in the `routes` this log was made with, or -1 to find it by `route`.
    public func record(_ response: HTTPResponse, request: HTTPRequest, route: String, routeNumber: Int = -1, requestID: String,
                       started: Int64, trace: TraceContext? = nil) {
        let seconds = Double(MonotonicClock.nanos() - started) / 1e9
        count(response, method: request.method, route: route, number: routeNumber, seconds: seconds)
        guard logsRequests else { return }
        let probe = (200..<300).contains(response.status)
            && (routeNumber >= 0 && routeNumber < probes.count ? probes[routeNumber] : Self.probeRoutes.contains(route))
        if probe && !logsProbes { return }
        var metadata: Logger.Metadata = [
            "request_id": "\(requestID)", "method": "\(Self.methodLabel(request.method))", "path": "\(request.path)",
            "route": "\(route)", "status": .stringConvertible(response.status),
            "duration_ms": .stringConvertible((seconds * 1e5).rounded() / 100),
        ]
        let trace = trace ?? TraceContext.incoming(traceparent: nil)
        metadata["trace_id"] = "\(trace.traceID)"
        metadata["span_id"] = "\(trace.spanID)"
        logger.log(level: probe ? .debug : .info, "request", metadata: metadata)
    }

    private func count(_ response: HTTPResponse, method: String, route: String, number: Int, seconds: Double) {
        if let cache = response.header("x-cache") {
            if let known = cacheResults.firstIndex(where: { HTTPResponse.sameName($0, cache) }) {
                cacheCounters.with(known) { $0.increment() }
            } else {
                metrics.increment("ticket_cache_total", [("result", cache.lowercased())])
            }
        }
        if number >= 0, number < numbered.count {
            if numbered.with(number, { Self.count(response, method: method, seconds: seconds, in: $0) }) { return }
        } else if let series = series[route] {
            if Self.count(response, method: method, seconds: seconds, in: series) { return }
        } else {
            metrics.observe("http_request_duration_seconds", [("route", route)], seconds)
        }
        metrics.increment("http_requests_total", [("route", route), ("method", Self.methodLabel(method)), ("status", String(response.status))])
    }

    /// The answer counted on its route's series; false when its method and status have no counter there.
    private static func count(_ response: HTTPResponse, method: String, seconds: Double, in series: RouteSeries) -> Bool {
        series.duration.observe(seconds)
        return response.status >= 100 && response.status <= 999
            && series.requests.increment(methodNumber(method) * 1000 + response.status)
    }
}
