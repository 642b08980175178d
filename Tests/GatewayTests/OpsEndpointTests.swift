import API
import DeskEmulator
import Foundation
import GatewayApp
import Testing
import TestSupport
import Store
import Telemetry

@Suite struct OpsEndpointTests {
    @Test func livezAndReadyzPassWithADatabase() async throws {
        try await TestGateway.with { app in
            let live = try await httpRequest(port: app.port, "GET", "/livez")
            #expect(live.status == 200)
            #expect(live.json?["status"] as? String == "pass")
            let ready = try await httpRequest(port: app.port, "GET", "/readyz")
            #expect(ready.status == 200)
            #expect(ready.header("Content-Type") == "application/health+json")
            let checks = ready.json?["checks"] as? [String: Any]
            let database = (checks?["database"] as? [[String: Any]])?.first
            #expect(database?["status"] as? String == "pass")
        }
    }

    @Test func readyzReportsDeskAsWarnWhileItIsDown() async throws {
        try await TestGateway.with { app in
            let emulator = try #require(app.emulator)
            let ready = try await httpRequest(port: app.port, "GET", "/readyz")
            let desk = ((ready.json?["checks"] as? [String: Any])?["desk"] as? [[String: Any]])?.first
            #expect(desk?["status"] as? String == "pass")

            emulator.setFaults(EmulatorFaults(down: true))
            // A run of the checks answers for a second after it ends.
            let degraded = try await readyz(app.port, until: { $0.json?["status"] as? String == "warn" })
            #expect(degraded.status == 200)
            #expect(degraded.json?["status"] as? String == "warn")
            let deskDown = ((degraded.json?["checks"] as? [String: Any])?["desk"] as? [[String: Any]])?.first
            #expect(deskDown?["status"] as? String == "warn")
            // Background syncs hitting the downed Desk may open the breaker first, and on a loaded machine the probe
            // may run out of its time first; each output says why.
            let output = deskDown?["output"] as? String ?? ""
            #expect(output.contains("503") || output.contains("circuit breaker open") || output.contains("no answer within"),
                    "output: \(output)")
        }
    }

    /// `/readyz` until `done` holds of its answer, for at most five seconds (a run of the checks answers for a second).
    func readyz(_ port: Int, until done: (TestResponse) -> Bool) async throws -> TestResponse {
        let deadline = ContinuousClock.now + .seconds(5)
        while true {
            let answer = try await httpRequest(port: port, "GET", "/readyz")
            if done(answer) || ContinuousClock.now > deadline { return answer }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    /// The route is public unless ADMIN_PORT is set: a flood of it must not become a flood of Desk calls or take the
    /// database pool. Concurrent and repeated probes share one run of the checks a second.
    @Test func aFloodOfReadinessProbesCostsDeskOneCallASecond() async throws {
        // 64 probes at once from one address: the earlier requests' connections, closed by this client but perhaps not
        // yet by the server, would otherwise count against HTTP_PER_ADDRESS_CONNECTION_LIMIT (64) and be refused.
        try await TestGateway.with(configure: { $0.httpPerAddressConnectionLimit = 0 }) { app in
            func probes() async throws -> Int {
                let text = try await httpRequest(port: app.port, "GET", "/metrics").text
                return text.split(separator: "\n").filter { $0.hasPrefix(#"desk_requests_total{operation="probe""#) }
                    .compactMap { Int($0.split(separator: " ").last ?? "") }.reduce(0, +)
            }
            #expect(try await httpRequest(port: app.port, "GET", "/readyz").status == 200)
            let before = try await probes()
            #expect(before >= 1)
            let started = ContinuousClock.now
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<64 { group.addTask { try await httpRequest(port: app.port, "GET", "/readyz").status } }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            for _ in 0..<20 { #expect(try await httpRequest(port: app.port, "GET", "/readyz").status == 200) }
            let seconds = Double((ContinuousClock.now - started).components.seconds) + 1
            #expect(statuses == [Int](repeating: 200, count: 64))
            let made = try await probes() - before
            // One run a second at most, plus the one that may have started as the window opened.
            #expect(made >= 0 && Double(made) <= seconds + 1, "\(made) Desk probes for 84 requests in under \(seconds) s")
        }
    }

    /// With every connection stuck (here on a lock; in life on a server that stopped answering) `/readyz` still
    /// answers within its checks' deadline, as a probe's timeout needs: the outbox's depth is not waited for.
    @Test func readinessAnswersWhileEveryConnectionIsStuck() async throws {
        try await TestGateway.with(configure: { $0.dbPoolSize = 1 }) { app in
            let admin = Database.forTests(try #require(app.config.databaseURL), poolSize: 1)
            defer { admin.shutdown() }
            let locked = Task { try await admin.transaction { tx in
                try tx.query("LOCK TABLE outbox IN ACCESS EXCLUSIVE MODE")
                try tx.query("SELECT pg_sleep(8)")
            } }
            let watcher = Database.forTests(try #require(app.config.databaseURL), poolSize: 1)
            defer { watcher.shutdown() }
            try await eventually(every: .milliseconds(20)) {
                try await !watcher.query("""
                    SELECT 1 FROM pg_locks WHERE relation = 'outbox'::regclass AND mode = 'AccessExclusiveLock' AND granted
                    """).isEmpty
            }
            let ready = try await httpRequest(port: app.port, "GET", "/readyz")
            let checks = ready.json?["checks"] as? [String: Any]
            let outbox = (checks?["outbox"] as? [[String: Any]])?.first
            #expect(outbox?["status"] as? String == "warn" && outbox?["output"] as? String == "outbox depth unknown", "\(ready.text)")
            _ = try await locked.value
        }
    }

    @Test func unknownRoutesAndMethodsGetProblemDetails() async throws {
        try await TestGateway.with { app in
            let missing = try await httpRequest(port: app.port, "GET", "/v1/does-not-exist", headers: [("X-Request-ID", "trace-123")])
            #expect(missing.status == 404)
            #expect(missing.header("Content-Type") == "application/problem+json")
            #expect(missing.header("X-Request-ID") == "trace-123")
            #expect(missing.json?["code"] as? String == "not_found")
            #expect(missing.json?["requestId"] as? String == "trace-123")
            #expect(missing.json?["status"] as? Int == 404)

            let wrong = try await httpRequest(port: app.port, "PUT", "/livez")
            #expect(wrong.status == 405)
            #expect(wrong.header("Allow") == "GET, HEAD, OPTIONS")
            #expect(wrong.json?["code"] as? String == "method_not_allowed")
        }
    }

    @Test func oversizedBodiesGet413ProblemDetails() async throws {
        try await TestGateway.with(configure: { $0.httpBodyLimitBytes = 2048 }) { app in
            let response = try await httpRequest(port: app.port, "POST", "/v1/anything", body: [UInt8](repeating: 32, count: 4096))
            #expect(response.status == 413)
            #expect(response.json?["code"] as? String == "payload_too_large")
        }
    }

    @Test func generatedRequestIdsAreUniqueAndEchoed() async throws {
        try await TestGateway.with { app in
            let first = try await httpRequest(port: app.port, "GET", "/livez")
            let second = try await httpRequest(port: app.port, "GET", "/livez")
            let ids = [first.header("X-Request-ID"), second.header("X-Request-ID")]
            #expect(ids.allSatisfy { ($0?.count ?? 0) > 8 })
            #expect(ids[0] != ids[1])
            // An id with control characters or spaces is replaced, not echoed.
            let hostile = try await httpRequest(port: app.port, "GET", "/livez", headers: [("X-Request-ID", "a b")])
            #expect(hostile.header("X-Request-ID") != "a b")
        }
    }

    @Test func metricsCountRequestsByRouteTemplate() async throws {
        try await TestGateway.with { app in
            for _ in 0..<3 { _ = try await httpRequest(port: app.port, "GET", "/livez") }
            _ = try await httpRequest(port: app.port, "GET", "/nope/123")
            let metrics = try await httpRequest(port: app.port, "GET", "/metrics")
            #expect(metrics.status == 200)
            let text = metrics.text
            #expect(text.contains(#"http_requests_total{route="/livez",method="GET",status="200"} 3"#))
            #expect(text.contains(#"http_requests_total{route="(unmatched)",method="GET",status="404"} 1"#))
            #expect(text.contains("http_request_duration_seconds_bucket{route=\"/livez\",le=\"+Inf\"} 3"))
            #expect(text.contains("db_pool_connections{state=\"idle\"}"))
            // The gauge is there with a count (not necessarily 0: the background loops share the pool).
            #expect(text.split(separator: "\n").contains { $0.hasPrefix("db_pool_waiting ") && Int($0.dropFirst("db_pool_waiting ".count)) != nil })
            #expect(text.contains("# TYPE db_pool_timeouts_total counter\ndb_pool_timeouts_total 0"))
            #expect(text.contains("http_requests_in_flight"))
            #expect(!text.contains("/nope/123"))
        }
    }

    /// The standard process families, with values that match the process as the kernel reports it.
    @Test func metricsDescribeTheProcessAndTheBuild() async throws {
        try await TestGateway.with { app in
            let text = try await httpRequest(port: app.port, "GET", "/metrics").text
            func value(_ name: String) -> Double? {
                text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.dropFirst(name.count + 1)) }
            }
            #expect(text.contains("# TYPE process_cpu_seconds_total counter"))
            #expect((value("process_cpu_seconds_total") ?? 0) > 0)
            let rss = try #require(value("process_resident_memory_bytes"))
            let statm = try String(contentsOfFile: "/proc/self/statm", encoding: .utf8).split(separator: " ")
            let kernelRSS = Double(statm[1]).map { $0 * Double(sysconf(Int32(_SC_PAGESIZE))) } ?? 0
            #expect(rss > 10_000_000 && abs(rss - kernelRSS) < 200_000_000, "\(rss) against \(kernelRSS)")
            #expect((value("process_virtual_memory_bytes") ?? 0) >= rss)
            #expect((value("process_open_fds") ?? 0) > 3)
            #expect((value("process_max_fds") ?? 0) >= (value("process_open_fds") ?? 0))
            #expect((value("process_threads") ?? 0) >= 2)
            let started = try #require(value("process_start_time_seconds"))
            #expect(started <= Date().timeIntervalSince1970 && started > Date().timeIntervalSince1970 - 86_400 * 3)
            #expect(text.contains(#"desk_gateway_build_info{version="\#(gatewayVersion)",revision="\#(ProcessMetrics.revision)"} 1"#))
            // Under make, the commit the binaries were built from (Makefile's DESK_GATEWAY_REVISION) is the one baked in.
            if let revision = ProcessInfo.processInfo.environment["DESK_GATEWAY_REVISION"], !revision.isEmpty {
                #expect(ProcessMetrics.revision == revision)
            }
            let ready = try await httpRequest(port: app.port, "GET", "/readyz").text
            #expect(ready.contains(#""revision":"\#(ProcessMetrics.revision)""#))
        }
    }

    /// With ADMIN_PORT, health and metrics answer there and leave the public port; the API stays where it was.
    @Test func theAdminPortTakesHealthAndMetricsOffThePublicOne() async throws {
        try await TestGateway.with(configure: { $0.adminPort = TestPorts.free() }) { app in
            let adminPort = app.config.adminPort
            for path in ["/livez", "/readyz", "/metrics"] {
                let admin = try await httpRequest(port: adminPort, "GET", path).status
                let onPublic = try await httpRequest(port: app.port, "GET", path).status
                #expect(admin == 200 && onPublic == 404, "\(path): \(admin) on the admin port, \(onPublic) on the public one")
            }
            #expect(try await httpRequest(port: adminPort, "GET", "/metrics").text.contains("process_resident_memory_bytes"))
            #expect(try await httpRequest(port: adminPort, "GET", "/v1/tickets").status == 404)
            #expect(try await httpRequest(port: app.port, "GET", "/openapi.yaml").status == 200)
            #expect(try await httpRequest(port: app.port, "GET", "/v1/tickets").status == 401)
            // `OPTIONS *` names what each port takes.
            let methods = try await onBlockingThread {
                try [adminPort, app.port].map { port -> String? in
                    let connection = try RawHTTPConnection(port: port)
                    try connection.send(Array("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n".utf8))
                    return try connection.readResponse()?.header("Allow")
                }
            }
            #expect(methods == ["GET, HEAD, OPTIONS", "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT"], "\(methods)")
        }
    }

    @Test func servesTheRepositoryOpenAPIDocument() async throws {
        try await TestGateway.with { app in
            let response = try await httpRequest(port: app.port, "GET", "/openapi.yaml")
            #expect(response.status == 200)
            let file = try String(contentsOfFile: TestPostgres.repositoryRoot + "/openapi.yaml", encoding: .utf8)
            #expect(response.text == file)
        }
    }

    /// A database that takes no writes (a standby after a failover, or `default_transaction_read_only`) is an outage
    /// of the database, not a defect: writes answer 503 with `Retry-After`, cached reads go on, `/readyz` warns, and
    /// once writes are taken again the gateway's pooled connections (opened read-only) are replaced by themselves.
    @Test func aDatabaseThatTakesNoWritesAnswers503AndReadyzWarns() async throws {
        try await TestGateway.with(configure: {
            $0.deskEmulatorPersistent = false
            $0.cacheTTLSeconds = 1
            $0.signInPerMinute = 10_000
            $0.signInBurst = 10_000
            $0.signInPerUserPerMinute = 10_000
            $0.signInPerUserBurst = 10_000
        }) { app in
            let customer = try await Customer.signIn(app)
            let id = try #require(try await customer.createTicket("before")["id"] as? Int)
            #expect(try await customer.send("GET", "/v1/tickets/\(id)").status == 200)
            #expect(try await customer.send("GET", "/v1/tickets?status=all").status == 200)
            let admin = Database.forTests(try #require(app.config.databaseURL), poolSize: 1)
            let key = try await APIKeyStore(database: admin).create(name: "dashboard", scopes: ["reports"]).key
            defer { admin.shutdown() }
            func setReadOnly(_ on: Bool) async throws {
                try await admin.query("DO $$ BEGIN EXECUTE format('ALTER DATABASE %I \(on ? "SET default_transaction_read_only = on" : "RESET default_transaction_read_only")', current_database()); END $$")
            }
            try await setReadOnly(true)
            // The gateway's connections come back read-only.
            try await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
            let signIn = #"{"userId":"demo-customer","accessToken":"demo-token"}"#
            let refused = try await httpRequest(port: app.port, "POST", "/v1/sessions", json: signIn)
            #expect(refused.status == 503, "\(refused.text)")
            #expect(refused.json?["code"] as? String == "service_unavailable")
            #expect(refused.header("Retry-After") != nil)
            #expect(try await customer.send("GET", "/v1/tickets/\(id)").status == 200)
            // Reads go on: a report (its key's last use goes unrecorded), and the list as the database holds it.
            let report = try await httpRequest(port: app.port, "GET", "/v1/reports/csat?tz=UTC", headers: [("X-API-Key", key)])
            #expect(report.status == 200, "\(report.text)")
            try await Task.sleep(for: .milliseconds(Int(app.config.cacheTTLSeconds) * 1000 + 200))
            let list = try await customer.send("GET", "/v1/tickets?status=all")
            #expect(list.status == 200 && list.json?["stale"] as? Bool == true, "\(list.text)")
            let ready = try await httpRequest(port: app.port, "GET", "/readyz")
            #expect(ready.status == 200)
            let database = ((ready.json?["checks"] as? [String: Any])?["database"] as? [[String: Any]])?.first
            #expect(database?["status"] as? String == "warn", "\(ready.text)")
            let metrics = try await httpRequest(port: app.port, "GET", "/metrics").text
            #expect(metrics.contains(#"readiness_check_warning{check="database"} 1"#) && metrics.contains(#"readiness_check_passing{check="database"} 1"#))
            // Writes at once, so that every pooled connection is opened again while the database is read-only.
            for _ in 0..<3 {
                let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                    for _ in 0..<8 { group.addTask { try await httpRequest(port: app.port, "POST", "/v1/sessions", json: signIn).status } }
                    return try await group.reduce(into: [Int]()) { $0.append($1) }
                }
                #expect(statuses.allSatisfy { $0 == 503 }, "\(statuses)")
            }

            try await setReadOnly(false)
            // Each read-only connection is closed when a write meets it; the pool holds 4, so the fifth write at the latest works.
            var statuses: [Int] = []
            for _ in 0..<8 {
                let status = try await httpRequest(port: app.port, "POST", "/v1/sessions", json: signIn).status
                statuses.append(status)
                if status == 201 { break }
            }
            #expect(statuses.last == 201, "\(statuses)")
            // Readiness closes a read-only connection it meets too: within a few checks (one a second) it passes.
            var status: String?
            for _ in 0..<10 where status != "pass" {
                try await Task.sleep(for: .milliseconds(1100))
                let again = try await httpRequest(port: app.port, "GET", "/readyz")
                status = ((again.json?["checks"] as? [String: Any])?["database"] as? [[String: Any]])?.first?["status"] as? String
            }
            #expect(status == "pass")
        }
    }

    @Test func readyzFailsWhileTheDatabaseIsDownAndRecoversWithoutARestart() async throws {
        try await TestPostgres.withPrivateCluster { cluster in
            var config = TestGateway.configuration(databaseURL: cluster.connectionString(database: "postgres"))
            config.dbConnectTimeoutSeconds = 2
            try await TestGateway.running(config) { app in
                #expect(try await httpRequest(port: app.port, "GET", "/readyz").status == 200)

                await cluster.stop(force: true)
                let down = try await readyz(app.port, until: { $0.status == 503 })
                #expect(down.status == 503)
                #expect(down.json?["status"] as? String == "fail")
                // Liveness does not depend on the database.
                #expect(try await httpRequest(port: app.port, "GET", "/livez").status == 200)

                try await cluster.start()
                let up = try await readyz(app.port, until: { $0.status == 200 })
                #expect(up.status == 200)
            }
        }
    }
}

@Suite struct ConfigTests {
    @Test func defaultsApplyWhenTheEnvironmentIsEmpty() throws {
        let config = try GatewayConfig.fromEnvironment([:])
        #expect(config.port == 8080)
        #expect(config.databaseURL == nil)
        #expect(config.httpBodyLimitBytes == 1 << 20)
    }

    /// Reports from rollups and from raw ratings each leave at least half the pool to everything else.
    @Test func reportsHoldAtMostHalfThePool() throws {
        for (pool, asked, raw, expected) in [("4", nil, nil, (2, 2)), ("16", "6", "3", (6, 3)), ("8", "6", "6", (4, 4)), ("1", "2", "2", (1, 1))] {
            var env = ["DB_POOL_SIZE": pool]
            env["REPORT_CONCURRENCY"] = asked
            env["REPORT_RAW_CONCURRENCY"] = raw
            let config = try GatewayConfig.fromEnvironment(env)
            #expect((config.reportConnections, config.reportSettings.rawConcurrency) == expected, "DB_POOL_SIZE=\(pool)")
        }
    }

    @Test func invalidValuesNameTheVariable() throws {
        for (name, value) in [("PORT", "eighty"), ("PORT", "70000"), ("DB_POOL_SIZE", "0"), ("HOST", "localhost"),
                              ("LOG_LEVEL", "loud"), ("HTTP_BODY_LIMIT_BYTES", "-1"), ("RETENTION_IDEMPOTENCY_HOURS", "0"),
                              ("RETENTION_CLOSED_TICKET_DAYS", "nan"), ("RETENTION_WEBHOOK_DAYS", "1e9")] {
            do {
                _ = try GatewayConfig.fromEnvironment([name: value])
                Issue.record("\(name)=\(value) was accepted")
            } catch {
                #expect(error.errors.count == 1)
                let error = try #require(error.errors.first)
                #expect(error.variable == name)
                #expect(error.description.contains(value))
            }
        }
    }

    /// Every refused value is named at once, in the table's order; a rule between two settings is judged only when
    /// both were read (a refused one would be judged by its default).
    @Test func everyRefusedSettingIsNamedAtOnce() {
        do {
            _ = try GatewayConfig.fromEnvironment(["PORT": "eighty", "LOG_LEVEL": "loud", "RATE_LIMIT_BURST": "-1", "HOST": "localhost",
                                                   "DESK_BASE_URL": "https://desk-api-abc.sendbird.com"])
            Issue.record("accepted")
        } catch {
            let named = error.errors.map(\.variable)
            #expect(Set(named) == ["PORT", "LOG_LEVEL", "RATE_LIMIT_BURST", "HOST", "DESK_APP_ID"])
            #expect(named == GatewaySettings.all.map(\.name).filter(Set(named).contains).filter { $0 != "DESK_APP_ID" } + ["DESK_APP_ID"])
            #expect(error.description.hasPrefix("invalid configuration, 5 settings:\n  "))
            #expect(error.description.split(separator: "\n").count == 6)
            #expect(error.description.contains("\n  PORT: expected a whole number from 0 to 65535, got 'eighty'"))
        }
        do {
            _ = try GatewayConfig.fromEnvironment(["HTTP_REQUEST_TIMEOUT_S": "600", "HTTP_CONNECTION_TIMEOUT_S": "soon"])
            Issue.record("accepted")
        } catch {
            #expect(error.errors.map(\.variable) == ["HTTP_CONNECTION_TIMEOUT_S"])
            #expect(error.description.hasPrefix("invalid configuration: HTTP_CONNECTION_TIMEOUT_S: expected"))
        }
        do {
            _ = try GatewayConfig.fromEnvironment(["HTTP_REQUEST_TIMEOUT_S": "600", "HTTP_CONNECTION_TIMEOUT_S": "60", "PORT": "x"])
            Issue.record("accepted")
        } catch {
            #expect(error.errors.map(\.variable) == ["PORT", "HTTP_REQUEST_TIMEOUT_S"])
        }
    }

    /// Browsers send `Origin` as scheme and host in small letters without the default port, and CORS compares it as
    /// text: a configured origin is brought to that form, and what cannot match any `Origin` is refused.
    @Test func corsOriginsAreKeptAsBrowsersSendThem() throws {
        let config = try GatewayConfig.fromEnvironment([
            "CORS_ALLOWED_ORIGINS": "HTTPS://App.Example.com:443, http://localhost:05173,capacitor://localhost, http://[::1]:80,https://app.example.com"])
        #expect(config.corsOrigins == ["https://app.example.com", "http://localhost:5173", "capacitor://localhost", "http://[::1]"])
        #expect(try GatewayConfig.fromEnvironment(["CORS_ALLOWED_ORIGINS": " * "]).corsOrigins == ["*"])
        for value in ["*,https://app.example.com", "https://app.example.com/", "https://app.example.com?x=1", "https://me@app.example.com",
                      "app.example.com", "https://app.example.com:0", "https://app.example.com:99999", "https://", "null"] {
            do {
                _ = try GatewayConfig.fromEnvironment(["CORS_ALLOWED_ORIGINS": value])
                Issue.record("CORS_ALLOWED_ORIGINS=\(value) was accepted")
            } catch {
                let error = try #require(error.errors.first)
                #expect(error.variable == "CORS_ALLOWED_ORIGINS")
            }
        }
    }

    /// A misspelt setting would be ignored without a word; the usual variables of shells, containers and Kubernetes
    /// (a Service named desk-gateway included) are not taken for one.
    @Test func misspeltSettingsAreNamedWithTheSettingTheyMiss() {
        var env = ["CORS_ALLOWED_ORIGIN": "https://app.example.com", "REPORT_TIMEZONES": "UTC", "DB_POOLSIZE": "8", "LOG_LEVL": "debug",
                   "PORT": "8080", "CORS_ALLOWED_ORIGINS": "*"]
        for name in ["HOME", "PATH", "HOSTNAME", "LANG", "LC_ALL", "TERM", "SHELL", "TZ", "SSL_CERT_DIR", "SSL_CERT_FILE", "RUST_BACKTRACE",
                     "DESK_GATEWAY_REVISION", "MALLOC_ARENA_MAX", "SWIFT_BACKTRACE", "KUBERNETES_SERVICE_HOST", "KUBERNETES_PORT",
                     "DESK_GATEWAY_PORT", "DESK_GATEWAY_SERVICE_HOST", "DESK_GATEWAY_SERVICE_PORT", "DESK_GATEWAY_PORT_8080_TCP_PORT",
                     "POSTGRES_PASSWORD", "PGPASSWORD", "PGHOST", "XDG_RUNTIME_DIR", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
                     "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "DESK_SERVICE_HOST",
                     "DESK_SERVICE_PORT", "REPORT_SERVICE_PORT_HTTP", "TEST_DATABASE_URL", "OLD_DESK_API_TOKEN"] {
            env[name] = "x"
        }
        // Kubernetes' links of a Service named `desk` and `report-cache`.
        env["DESK_PORT"] = "tcp://10.0.0.7:80"
        env["REPORT_CACHE_PORT"] = "tcp://10.0.0.8:6379"
        // A word off: left out, added, or spelt another way.
        for name in ["CORS_ORIGINS", "DATABASE_POOL_SIZE", "REPORT_CACHE_SECONDS", "DESK_TOKEN", "REPORT_CACHE_MB", "DB_STATEMENT_TIMEOUT",
                     "OTEL_SERVICE_NAMES"] {
            env[name] = "1"
        }
        let found = GatewayConfig.misspeltSettings(env).map { "\($0.given)→\($0.meant)" }
        #expect(found == ["CORS_ALLOWED_ORIGIN→CORS_ALLOWED_ORIGINS", "CORS_ORIGINS→CORS_ALLOWED_ORIGINS", "DATABASE_POOL_SIZE→DB_POOL_SIZE",
                          "DB_POOLSIZE→DB_POOL_SIZE", "DB_STATEMENT_TIMEOUT→DB_STATEMENT_TIMEOUT_MS", "DESK_TOKEN→DESK_API_TOKEN",
                          "LOG_LEVL→LOG_LEVEL", "OTEL_SERVICE_NAMES→OTEL_SERVICE_NAME", "REPORT_CACHE_MB→REPORT_CACHE_MAX_MB", "REPORT_CACHE_SECONDS→REPORT_CACHE_S",
                          "REPORT_TIMEZONES→REPORT_TIME_ZONES"], "\(found)")
    }

    @Test func aTeamTargetGivenTwiceAndAZoneInSmallLettersAreRefused() throws {
        #expect(try GatewayConfig.fromEnvironment(["REPORT_CSAT_TEAM_TARGETS": "11=80,12=90"]).reportCSATTeamTargets == [11: 80, 12: 90])
        do {
            _ = try GatewayConfig.fromEnvironment(["REPORT_CSAT_TEAM_TARGETS": "11=80,11=90"])
            Issue.record("a team given twice was accepted")
        } catch {
            let error = try #require(error.errors.first)
            #expect(error.message.contains("team 11 is given twice"))
        }
        do {
            _ = try GatewayConfig.fromEnvironment(["REPORT_TIME_ZONES": "UTC,asia/kolkata"])
            Issue.record("a zone in small letters was accepted")
        } catch {
            let error = try #require(error.errors.first)
            #expect(error.message.contains("names are case-sensitive, as in Asia/Kolkata"))
        }
    }

    @Test func retentionTakesFractions() throws {
        let config = try GatewayConfig.fromEnvironment(["RETENTION_IDEMPOTENCY_HOURS": "0.05", "RETENTION_CLOSED_TICKET_DAYS": "0.003"])
        #expect(config.retention.idempotencyHours == 0.05 && config.retentionIdempotencyHours == 0.05)
        #expect(config.retention.closedTicketDays == 0.003)
        #expect(try GatewayConfig.fromEnvironment([:]).retention.idempotencyHours == 24)
    }

    @Test func deskSettingsAreValidated() throws {
        #expect(throws: InvalidConfiguration.self) { try GatewayConfig.fromEnvironment(["DESK_BASE_URL": "ftp://desk"]) }
        do {
            _ = try GatewayConfig.fromEnvironment(["DESK_BASE_URL": "https://desk-api-abc.sendbird.com"])
            Issue.record("a base URL without an app id was accepted")
        } catch {
            let error = try #require(error.errors.first)
            #expect(error.variable == "DESK_APP_ID")
        }
        let config = try GatewayConfig.fromEnvironment(["DESK_BASE_URL": "https://desk-api-abc.sendbird.com/", "DESK_APP_ID": "abc",
                                                        "DESK_API_TOKEN": "tok-123"])
        #expect(config.deskBaseURL == "https://desk-api-abc.sendbird.com")
        #expect(!config.description.contains("tok-123"))
    }

    /// The reference and the example file are generated from the table (`make docs`); a setting added, changed or
    /// removed without regenerating them fails here.
    @Test func theReferenceAndTheExampleFileMatchTheSettingsTable() throws {
        let reference = try String(contentsOfFile: TestPostgres.repositoryRoot + "/docs/configuration.md", encoding: .utf8)
        #expect(reference == GatewaySettings.referenceMarkdown(), "docs/configuration.md differs from the settings table: run make docs")
        let example = try String(contentsOfFile: TestPostgres.repositoryRoot + "/deploy/desk-gateway.env.example", encoding: .utf8)
        #expect(example == GatewaySettings.exampleEnvironment(), "deploy/desk-gateway.env.example differs from the settings table: run make docs")
    }

    @Test func everySettingIsDeclaredOnceAndEveryDefaultIsAccepted() throws {
        let names = GatewaySettings.all.map(\.name)
        #expect(Set(names).count == names.count)
        #expect(names.count >= 75)
        // Each default, written back as text, reads as that default.
        var env: [String: String] = [:]
        for setting in GatewaySettings.all where !setting.defaultText.isEmpty && !["SESSION_KEY", "PG_BIN_DIR", "ASSETS_DIR"].contains(setting.name) {
            env[setting.name] = setting.defaultText
        }
        let fromText = try GatewayConfig.fromEnvironment(env)
        let defaults = GatewayConfig()
        #expect(fromText.port == defaults.port && fromText.retention.appliedWebhookDays == defaults.retention.appliedWebhookDays)
        #expect(fromText.reportTimeZones == defaults.reportTimeZones && fromText.deskEmulatorPersistent == defaults.deskEmulatorPersistent)
        #expect(fromText.logLevel == defaults.logLevel && fromText.reportPageSecureCookie == nil)
        #expect(fromText.apiPolicy.authFailureBurst == 30 && fromText.outboxSettings.policy.maxBackoffSeconds == 300)
    }

    @Test func theAuthFailureBurstIsItsOwnSetting() throws {
        let policy = try GatewayConfig.fromEnvironment(["AUTH_FAILURES_PER_MINUTE": "90", "AUTH_FAILURE_BURST": "7"]).apiPolicy
        #expect(policy.authFailuresPerMinute == 90 && policy.authFailureBurst == 7)
    }

    @Test func theDatabaseURLIsNeverPrinted() throws {
        let config = try GatewayConfig.fromEnvironment(["DATABASE_URL": "postgresql://app:hunter2@db/app"])
        #expect(!config.description.contains("hunter2"))
    }

    /// What `settings --check` and the start-up log print can be pasted back: each value in its setting's own syntax.
    @Test func settingsArePrintedAsTheyAreWritten() throws {
        let config = try GatewayConfig.fromEnvironment([
            "DESK_EMULATOR_STATE": "memory", "REPORT_CSAT_TEAM_TARGETS": "12=90, 3=85.5", "REPORT_CSAT_TARGET": "80",
            "REPORT_PAGE_SECURE_COOKIE": "auto", "RETENTION_IDEMPOTENCY_HOURS": "48", "REPORT_TIME_ZONES": "UTC,Asia/Kolkata",
            "DESK_BASE_URL": "https://desk.example", "DESK_APP_ID": "app", "SESSION_KEY": String(repeating: "A", count: 43) + "=",
        ])
        #expect(config.assignments == [
            "DESK_BASE_URL=https://desk.example", "DESK_APP_ID=app", "DESK_EMULATOR_STATE=memory", "SESSION_KEY=<redacted>",
            "REPORT_TIME_ZONES=UTC,Asia/Kolkata", "REPORT_CSAT_TARGET=80", "REPORT_CSAT_TEAM_TARGETS=3=85.5,12=90",
            "REPORT_PAGE_SECURE_COOKIE=auto", "RETENTION_IDEMPOTENCY_HOURS=48",
        ])
        // Every setting's value read back from what is printed gives the same assignments.
        let again = try GatewayConfig.fromEnvironment(Dictionary(uniqueKeysWithValues: config.assignments.map {
            let cut = $0.firstIndex(of: "=")!
            return (String($0[..<cut]), $0[$0.index(after: cut)...] == "<redacted>" ? String(repeating: "A", count: 43) + "=" : String($0[$0.index(after: cut)...]))
        }))
        #expect(again.assignments == config.assignments)
    }
}
