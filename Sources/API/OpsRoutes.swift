import JSON
import HTTPServer
import Synchronization
public import Domain
public import Telemetry

/// `/livez`, `/readyz`, `/metrics` and `/openapi.yaml`.
public struct OpsRoutes: Sendable {
    let checks: [any ReadinessCheck]
    /// How long `/readyz` waits for each check.
    let checkDeadline: Duration
    let metrics: MetricsRegistry
    let openAPIDocument: String?
    let version: String
    let watchdog: Watchdog?
    /// The outcome of each check at the last `/readyz` (probes call it every few seconds), for the metrics.
    private let lastReadiness = LastReadiness()
    /// One run of the checks answers every `/readyz` that arrives while it runs or within a second after it ends. The
    /// route is public unless `ADMIN_PORT` is set: a flood of it made a Desk call and took a pooled connection per
    /// request; now it costs Desk and the database one check each a second at most.
    private let checkResults = CachedValue<[CheckResult]>(ttl: 1)

    public init(checks: [any ReadinessCheck], metrics: MetricsRegistry, database: (any DatabaseProbe)?, openAPIDocument: String?,
                version: String, watchdog: Watchdog? = nil, checkDeadline: Duration = .seconds(2)) {
        self.checks = checks
        self.checkDeadline = checkDeadline
        self.watchdog = watchdog
        self.metrics = metrics
        self.openAPIDocument = openAPIDocument
        self.version = version
        metrics.gauge("readiness_check_passing", help: "1 when the check passed (or warned) at the last /readyz, 0 when it failed.") {
            [lastReadiness] in lastReadiness.values.map { ([("check", $0.name)], $0.status != .fail ? 1 : 0) }
        }
        metrics.gauge("readiness_check_warning", help: "1 when the check warned at the last /readyz (the database: it takes no writes).") {
            [lastReadiness] in lastReadiness.values.map { ([("check", $0.name)], $0.status == .warn ? 1 : 0) }
        }
        if let database {
            metrics.gauge("db_pool_connections", help: "Database pool connections by state.") {
                let stats = database.statistics
                return [([("state", "in_use")], Double(stats.inUse)), ([("state", "idle")], Double(stats.idle))]
            }
            metrics.gauge("db_pool_waiting", help: "Callers waiting for a database connection (reports from rollups also while they hold their share, REPORT_CONCURRENCY).") {
                [([], Double(database.statistics.waiting))]
            }
            metrics.gauge("db_pool_timeouts_total", help: "Callers whose wait for a database connection ran out (answered 503).",
                          kind: .counter) {
                [([], Double(database.statistics.timedOut))]
            }
        }
    }

    public func register(in routes: inout RouteTable) {
        registerHealth(in: &routes)
        registerDocument(in: &routes)
    }

    /// `/openapi.yaml`: part of the public API.
    public func registerDocument(in routes: inout RouteTable) {
        routes.add("GET", "/openapi.yaml", .sync { [openAPIDocument] _, _ in
            guard let openAPIDocument else { throw APIError.notFound("This build has no OpenAPI document installed.") }
            return .text(openAPIDocument, contentType: "application/yaml")
        })
    }

    /// What orchestrators probe and Prometheus scrapes; the access log keeps their 2xx answers at `debug`.
    static let livePath = "/livez", readyPath = "/readyz", metricsPath = "/metrics"
    static let probePaths: Set<String> = [livePath, readyPath, metricsPath]

    /// `/livez`, `/readyz`, `/metrics`: on the public port, or on the admin port alone when one is set.
    public func registerHealth(in routes: inout RouteTable) {
        // Body and tag made once: the probe's answer costs no hashing. The headers are made per answer, with room for
        // the ones the steps add: a shared array would be copied, every pair in it, when the first is appended.
        let liveBody = Array(#"{"status":"pass"}"#.utf8)
        let liveTag = ETag.of(liveBody)
        routes.add("GET", Self.livePath, .sync { [watchdog] _, _ in
            guard let watchdog, watchdog.isStalled else {
                var headers = AnswerHeaders.withRoom(for: 3)
                headers.append(("Content-Type", "application/health+json"))
                headers.append(("Cache-Control", "no-store"))
                headers.append(("ETag", liveTag))
                return HTTPResponse(status: 200, headers: headers, body: liveBody)
            }
            let seconds = Int(watchdog.silence.components.seconds)
            return HTTPResponse(status: 503, headers: [("Content-Type", "application/health+json"), ("Cache-Control", "no-store")],
                                body: Array(#"{"status":"fail","output":"async work has made no progress for \#(seconds) s"}"#.utf8))
        })
        routes.add("GET", Self.readyPath, .async { _, _ in await readiness() })
        routes.add("GET", Self.metricsPath, .sync { [metrics] _, _ in
            .text(metrics.render(), contentType: "text/plain; version=0.0.4; charset=utf-8")
        })
    }

    /// `application/health+json`; 503 when any check fails, 200 on pass or warn.
    func readiness() async -> HTTPResponse {
        let results = await checkResults.shared { [checks, checkDeadline] in
            await withTaskGroup(of: (Int, CheckResult).self) { group in
                for (index, check) in checks.enumerated() {
                    group.addTask {
                        (index, await withDeadline(checkDeadline) { await check.check() } ?? check.unanswered(within: checkDeadline))
                    }
                }
                var results = [CheckResult?](repeating: nil, count: checks.count)
                for await (index, result) in group { results[index] = result }
                return results.map { $0! }
            }
        }
        let overall = results.map(\.status).max() ?? .pass
        lastReadiness.record(zip(checks, results).map { ($0.name, $1.status) })
        var entries: [(String, JSONValue)] = []
        for (check, result) in zip(checks, results) {
            var fields: [(String, JSONValue)] = [("componentType", .string(check.componentType)),
                                                 ("status", .string(result.status.rawValue))]
            if let value = result.observedValue { fields.append(("observedValue", .number(value))) }
            if let unit = result.observedUnit { fields.append(("observedUnit", .string(unit))) }
            if let output = result.output { fields.append(("output", .string(output))) }
            entries.append((check.name, .array([.object(fields)])))
        }
        let body: JSONValue = .object([("status", .string(overall.rawValue)), ("version", .string(version)),
                                       ("revision", .string(ProcessMetrics.revision)), ("checks", .object(entries))])
        return .json(body, status: overall == .fail ? 503 : 200, headers: [("Cache-Control", "no-store")],
                     contentType: "application/health+json")
    }
}

/// Thread safety: a lock around the last outcomes.
final class LastReadiness: Sendable {
    private let state = Mutex<[(name: String, status: HealthStatus)]>([])
    var values: [(name: String, status: HealthStatus)] { state.withLock { $0 } }
    func record(_ outcomes: [(String, HealthStatus)]) { state.withLock { $0 = outcomes.map { (name: $0.0, status: $0.1) } } }
}

