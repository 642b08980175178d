import GatewayApp
import API
import Domain
import Foundation
import HTTPServer
import Logging
import Telemetry
import Testing

/// The API's steps one at a time, without a server, a database or Desk.
@Suite struct MiddlewareTests {
    static func request(_ method: String = "GET", _ path: String = "/v1/tickets", headers: [(String, String)] = [],
                        from address: String = "192.0.2.10") -> HTTPRequest {
        HTTPRequest(method: method, path: path, headers: headers.map { ($0.0.lowercased(), $0.1) }, remoteAddress: address)
    }

    @Test func requestIDsEchoSafeClientIDsAndMakeUniqueOnes() {
        let ids = RequestIDs()
        #expect(ids.id(for: Self.request(headers: [("X-Request-ID", "abc-123")])) == "abc-123")
        for unsafe in ["has space", String(repeating: "x", count: 129), "", "tab\there"] {
            #expect(ids.id(for: Self.request(headers: [("X-Request-ID", unsafe)])) != unsafe)
        }
        let made = (0..<100).map { _ in ids.id(for: Self.request()) }
        #expect(Set(made).count == 100)
        #expect(Set(made.map { $0.split(separator: "-")[0] }).count == 1)
    }

    @Test func corsAnswersPreflightsAndDecoratesOnlyAllowedOrigins() {
        let cors = CORS(origins: ["https://app.example"])
        let preflight = Self.request("OPTIONS", headers: [("Origin", "https://app.example"), ("Access-Control-Request-Method", "POST")])
        #expect(cors.isPreflight(preflight))
        #expect(!cors.isPreflight(Self.request("OPTIONS")))
        var allowed = cors.preflight(preflight)
        cors.decorate(&allowed, for: preflight)
        #expect(allowed.status == 204)
        #expect(allowed.header("access-control-allow-origin") == "https://app.example")
        let other = cors.preflight(Self.request("OPTIONS", headers: [("Origin", "https://evil.example"), ("Access-Control-Request-Method", "POST")]))
        #expect(other.header("access-control-allow-origin") == nil)
        var response = HTTPResponse(status: 200)
        cors.decorate(&response, for: Self.request(headers: [("Origin", "https://evil.example")]))
        #expect(response.headers.map(\.name) == ["Vary"])
        cors.decorate(&response, for: Self.request(headers: [("Origin", "https://app.example")]))
        #expect(response.header("access-control-allow-origin") == "https://app.example")
        #expect(response.header("access-control-expose-headers")?.contains("X-Request-ID") == true)
        var any = HTTPResponse(status: 200)
        CORS(origins: ["*"]).decorate(&any, for: Self.request(headers: [("Origin", "https://x.example")]))
        #expect(any.header("access-control-allow-origin") == "*")
    }

    static func admitted(_ decision: Admission.Decision) -> Bool {
        if case .admitted = decision { return true }
        return false
    }

    @Test func admissionCountsVerifiedCallersApartAndMadeUpTokensTogether() {
        var policy = GatewayConfig().apiPolicy
        policy.rateLimitPerMinute = 60
        policy.rateLimitBurst = 5
        let verified = VerifiedCallers()
        verified.add("good-token")
        let admission = Admission(policy: policy, verified: verified)
        // Five random tokens from one address drain that address's bucket; the sixth is refused.
        for index in 0..<5 {
            #expect(Self.admitted(admission.admit(Self.request(headers: [("Authorization", "Bearer random-\(index)")]))))
        }
        guard case .refused(let error) = admission.admit(Self.request(headers: [("Authorization", "Bearer random-9")])) else {
            Issue.record("a sixth made-up token was admitted")
            return
        }
        #expect(error.response(instance: "/", requestID: "r").status == 429)
        // The verified token has a bucket of its own, from the same address.
        #expect(Self.admitted(admission.admit(Self.request(headers: [("Authorization", "Bearer good-token")]))))
        // Signed webhooks are not limited, and get no rate-limit headers.
        guard case .admitted(let standing) = admission.admit(Self.request("POST", "/v1/webhooks/desk")) else {
            Issue.record("the webhook was limited")
            return
        }
        #expect(standing == nil)
    }

    @Test func bearerTokensAreCutOnceAndRefusedPastTheHeaderLimit() {
        var request = Self.request(headers: [("Authorization", "bEaReR   tok-1  ")])
        #expect(request.bearerToken == "tok-1" && request.authorizationBytes == 16)
        request.headers = [("authorization", "Basic dG9rLTE=")]
        #expect(request.bearerToken == nil && request.authorizationBytes == 0)
        request.headers = [("authorization", "Bearer    ")]
        #expect(request.bearerToken == nil)
        // Verified tokens have buckets of their own, but only within 210 bytes of header: past it the same
        // verified token counts against the address like any unknown credential.
        var policy = GatewayConfig().apiPolicy
        policy.rateLimitPerMinute = 60
        policy.rateLimitBurst = 2
        let verified = VerifiedCallers()
        let long = String(repeating: "t", count: 203)
        verified.add(long)
        let admission = Admission(policy: policy, verified: verified)
        let within = Self.request(headers: [("Authorization", "Bearer " + long)])
        #expect(within.authorizationBytes == 210)
        for _ in 0..<2 { #expect(Self.admitted(admission.admit(within))) }
        let past = Self.request(headers: [("Authorization", "Bearer  " + long)])
        #expect(past.bearerToken == long && past.authorizationBytes == 211)
        for _ in 0..<2 { #expect(Self.admitted(admission.admit(past))) }
        #expect(!Self.admitted(admission.admit(past)))
        #expect(!Self.admitted(admission.admit(within)))
    }

    @Test func repeatedFailedAuthenticationsAreRefusedBeforeAnyLookup() {
        var policy = GatewayConfig().apiPolicy
        policy.authFailuresPerMinute = 60
        policy.authFailureBurst = 3
        let verified = VerifiedCallers()
        let admission = Admission(policy: policy, verified: verified)
        let unauthorized = HTTPResponse(status: 401)
        for index in 0..<3 {
            let request = Self.request(headers: [("Authorization", "Bearer wrong-\(index)")])
            #expect(Self.admitted(admission.admit(request)))
            admission.observe(unauthorized, to: request)
        }
        #expect(!Self.admitted(admission.admit(Self.request(headers: [("Authorization", "Bearer wrong-4")]))))
        // Another address, and requests without credentials, are unaffected.
        #expect(Self.admitted(admission.admit(Self.request(headers: [("Authorization", "Bearer x")], from: "198.51.100.7"))))
        #expect(Self.admitted(admission.admit(Self.request("GET", "/v1/tickets"))))
        // A 401 also forgets a credential that was verified before.
        verified.add("revoked")
        admission.observe(unauthorized, to: Self.request(headers: [("Authorization", "Bearer revoked")], from: "203.0.113.1"))
        #expect(!verified.contains("revoked", now: Date().timeIntervalSince1970))
    }

    @Test func verifiedCallersAreKeptApartInShardsAndForgottenTogether() {
        let verified = VerifiedCallers()
        let now = Date().timeIntervalSince1970
        // Keys of every length and last byte land in every shard.
        let credentials = (0..<200).map { "tok-\(String(repeating: "x", count: $0 % 9))-\($0)" }
        for credential in credentials { verified.add(credential) }
        #expect(verified.count == credentials.count)
        #expect(credentials.allSatisfy { verified.contains($0, now: now) })
        #expect(!verified.contains("tok-unknown", now: now))
        // Past their age they no longer count.
        #expect(!verified.contains(credentials[8], now: now + 301))
        verified.removeAll()
        #expect(verified.count == 0 && !credentials.contains { verified.contains($0, now: now) })
    }

    @Test func problemsMapEveryFailureWithoutLeakingDetail() {
        let mapper = ProblemMapper(logger: Logger(label: "test"))
        let info = RequestInfo(id: "r-1", route: "/v1/tickets/{id}")
        let request = Self.request()
        let cases: [(any Error, Int)] = [
            (DomainError(.notFound, "No such ticket."), 404),
            (DomainError(.conflict, "Closed."), 409),
            (DomainError(.upstreamUnavailable, "Desk down."), 503),
            (DomainError(.rateLimited, "Slow down."), 503),
            (DomainError(.unauthorized, "Expired."), 401),
            (DomainError(.upstreamProtocol, "Odd answer."), 502),
            (DomainError(.storeUnavailable, "DB down.", internalDetail: "connection refused on 10.0.0.5"), 503),
            (DomainError(.storeFailure, "Refused.", internalDetail: "syntax error at SELECT secret"), 500),
            (APIError(.forbidden, detail: "No."), 403),
            (CancellationError(), 500),
        ]
        for (error, status) in cases {
            let response = mapper.response(for: error, request: request, info: info)
            #expect(response.status == status, "\(error)")
            #expect(response.header("content-type") == "application/problem+json", "\(error)")
            let text = String(decoding: response.body, as: UTF8.self)
            #expect(!text.contains("10.0.0.5") && !text.contains("secret"), "\(text)")
        }
        #expect(mapper.response(for: DomainError(.upstreamUnavailable, "x", retryAfterSeconds: 7), request: request, info: info)
            .header("retry-after") == "7")
    }

    @Test func theAccessLogCountsByRouteTemplate() {
        let metrics = MetricsRegistry()
        let log = AccessLog(metrics: metrics, logger: Logger(label: "test"))
        var response = HTTPResponse(status: 200)
        response.headers.append(("X-Cache", "HIT"))
        log.record(response, request: Self.request("GET", "/v1/tickets/1001"), route: "/v1/tickets/{id}", requestID: "r", started: MonotonicClock.nanos())
        let text = metrics.render()
        #expect(text.contains(#"http_requests_total{route="/v1/tickets/{id}",method="GET",status="200"} 1"#), "\(text)")
        #expect(text.contains(#"ticket_cache_total{result="hit"} 1"#))
        #expect(!text.contains("/v1/tickets/1001"))
    }

    /// Probes and scrapes answered 2xx are logged at debug, not info; their failures and every other route at info.
    @Test func probesAnsweredWellAreLoggedAtDebugOnly() {
        let routes = ["/livez", "/readyz", "/metrics", "/v1/tickets/{id}"]
        func lines(at level: Logger.Level) -> [(route: String, status: String, level: Logger.Level)] {
            let logs = CapturedLogs()
            let log = AccessLog(metrics: MetricsRegistry(), logger: logs.logger(at: level), routes: routes)
            let answers: [(String, Int, Int)] = [("/livez", 200, 0), ("/readyz", 200, 1), ("/readyz", 503, 1), ("/metrics", 200, 2),
                                                 ("/v1/tickets/{id}", 200, 3), ("/livez", 200, -1), ("/livez", 503, -1)]
            for (route, status, number) in answers {
                log.record(HTTPResponse(status: status), request: Self.request("GET", route), route: route, routeNumber: number,
                           requestID: "r", started: MonotonicClock.nanos())
            }
            return logs.entries.withLock { $0 }.map { ($0.metadata["route"] ?? "", $0.metadata["status"] ?? "", $0.level) }
        }
        let info = lines(at: .info)
        #expect(info.map { "\($0.route) \($0.status)" } == ["/readyz 503", "/v1/tickets/{id} 200", "/livez 503"], "\(info)")
        #expect(info.allSatisfy { $0.level == .info })
        let debug = lines(at: .debug)
        #expect(debug.count == 7)
        #expect(debug.filter { $0.level == .debug }.map { "\($0.route) \($0.status)" }
                == ["/livez 200", "/readyz 200", "/metrics 200", "/livez 200"], "\(debug)")
        #expect(lines(at: .notice).isEmpty)
    }

    /// Label values are escaped by scalar: a quote or backslash that opens a grapheme cluster is escaped too.
    @Test func labelValuesAreEscapedEvenInsideAGraphemeCluster() {
        let metrics = MetricsRegistry()
        metrics.describe("named_total", .counter, help: "Named.")
        metrics.increment("named_total", [("name", "a\"\u{1F3FB}\\\u{301}\r\nb")])
        let text = metrics.render()
        #expect(text.contains("named_total{name=\"a\\\"\u{1F3FB}\\\\\u{301}\r\\nb\"} 1"), "\(text)")
    }

    /// A histogram's sum is what was observed, from any number of threads at once; what is no duration (a NaN,
    /// below zero) is counted in its bucket and adds nothing to the sum.
    @Test func histogramsSumWhatWasObserved() async {
        let metrics = MetricsRegistry()
        metrics.describe("work_seconds", .histogram, help: "Work.")
        let histogram = metrics.histogram("work_seconds")
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask { for _ in 0..<1_000 { histogram.observe(0.25); histogram.observe(0.000_001) } }
            }
        }
        histogram.observe(.nan)
        histogram.observe(-1)
        let text = metrics.render()
        #expect(text.contains("work_seconds_sum 1000.004\n"), "\(text)")
        #expect(text.contains("work_seconds_count 8002\n"), "\(text)")
    }

    /// Routes resolved ahead are counted without the registry's lock; what /metrics shows is what the unresolved way
    /// shows, and two threads counting at once lose nothing.
    @Test func resolvedRouteSeriesRenderAsTheSlowPathDoesAndLoseNoCount() async {
        let resolved = MetricsRegistry()
        let plain = MetricsRegistry()
        let fast = AccessLog(metrics: resolved, logger: Logger(label: "test"), routes: ["/v1/tickets/{id}", "(unmatched)"])
        let slow = AccessLog(metrics: plain, logger: Logger(label: "test"))
        let answers: [(String, String, Int)] = [("GET", "/v1/tickets/{id}", 200), ("HEAD", "/v1/tickets/{id}", 304),
                                                ("BREW", "/v1/tickets/{id}", 405), ("GET", "(unmatched)", 404), ("GET", "/elsewhere", 404)]
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<4 {
                group.addTask {
                    for index in 0..<2_000 {
                        let (method, route, status) = answers[(index + worker) % answers.count]
                        for log in [fast, slow] {
                            log.record(HTTPResponse(status: status), request: Self.request(method, "/x"), route: route, requestID: "r", started: MonotonicClock.nanos())
                        }
                    }
                }
            }
        }
        let counts = { (text: String) in text.split(separator: "\n").filter { $0.hasPrefix("http_requests_total{") || $0.contains("_count{") } }
        #expect(counts(resolved.render()) == counts(plain.render()))
        #expect(resolved.value("http_requests_total", [("route", "/v1/tickets/{id}"), ("method", "OTHER"), ("status", "405")]) == 1_600)
        #expect(resolved.render().contains(#"http_request_duration_seconds_count{route="/v1/tickets/{id}"} 4800"#))
        #expect(!resolved.render().contains("(preflight)"), "a route never answered has no series")
    }

    /// Callers seen once leave nothing behind: refilled buckets and expired cache entries are swept out.
    @Test func limiterBucketsAndCacheEntriesOfOneTimeCallersAreSweptOut() {
        let limiter = RateLimiter(perMinute: 60, burst: 5)
        let start = Date().timeIntervalSince1970
        for index in 0..<20_000 { _ = limiter.take("caller-\(index)", now: start) }
        #expect(limiter.count == 20_000)
        // A minute later every one of those buckets is full again (1 a second, 5 at most): the next request sweeps.
        _ = limiter.take("late", now: start + 61)
        #expect(limiter.count == 1)
        // And however many callers come at once, the map stays at its capacity.
        for index in 0..<(RateLimiter.capacity + 5_000) { _ = limiter.take("flood-\(index)", now: start + 62) }
        #expect(limiter.count <= RateLimiter.capacity)

        // The cache's own clock: the limiter's part may have taken seconds on a loaded machine, and a sweep is due
        // a TTL after the cache's last one (its creation).
        let cache = TTLCache<Int, String>(ttl: 5, capacity: 50_000)
        let created = Date().timeIntervalSince1970
        for index in 0..<10_000 { cache.put(index, "x", at: created) }
        #expect(cache.count == 10_000)
        cache.put(-1, "late", at: created + 6)
        #expect(cache.count == 1)
    }

    /// A cache entry read in place gives what the reader takes from it, with its time, and leaves it as it was.
    @Test func cacheEntriesReadInPlaceGiveTheirFieldsAndStay() {
        let cache = TTLCache<String, (name: String, count: Int)>(ttl: 60)
        cache.put("a", ("alpha", 3), at: 100)
        #expect(cache.read("a") { $0.value.count == 3 ? $0.value.name + "@\(Int($0.at))" : nil } == "alpha@100")
        #expect(cache.read("a") { $0.value.count == 4 ? $0.value.name : nil } == nil)
        #expect(cache.read("b") { $0.value.name } == nil)
        #expect(cache.lookup("a")?.value.name == "alpha" && cache.lookup("a")?.at == 100 && cache.count == 1)
    }
}
