import API
import Store
import Foundation
import GatewayApp
import HTTPServer
import Logging
import Telemetry
import Testing
import TestSupport

/// Browsers refuse an answer whose `Access-Control-Allow-Origin` is sent twice, so every answer of every route
/// family, preflights and refusals included, is checked for doubled CORS headers over real HTTP.
@Suite struct CORSTests {
    static let origin = "http://app.example:18300"
    static let corsHeaders = ["access-control-allow-origin", "access-control-expose-headers", "access-control-allow-methods",
                              "access-control-allow-headers", "access-control-max-age", "access-control-allow-credentials", "vary"]

    /// Each CORS header at most once, `Origin` listed once in `Vary`, and the origin echoed when `allowed`.
    static func expectOnce(_ response: TestResponse, _ label: String, allowed: Bool = true,
                           sourceLocation: SourceLocation = #_sourceLocation) {
        for name in corsHeaders {
            let count = response.headers.filter { $0.name.lowercased() == name }.count
            #expect(count <= 1, "\(label) (\(response.status)): \(name) sent \(count) times", sourceLocation: sourceLocation)
        }
        let vary = response.header("vary")?.lowercased().split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } ?? []
        #expect(vary.filter { $0 == "origin" }.count == 1, "\(label): Vary \(vary)", sourceLocation: sourceLocation)
        #expect(response.header("access-control-allow-credentials") == nil, sourceLocation: sourceLocation)
        if allowed {
            #expect(response.header("access-control-allow-origin") == origin, "\(label) (\(response.status))", sourceLocation: sourceLocation)
        } else {
            #expect(response.header("access-control-allow-origin") == nil, "\(label)", sourceLocation: sourceLocation)
            #expect(response.header("access-control-expose-headers") == nil, "\(label)", sourceLocation: sourceLocation)
        }
    }

    @Test func noAnswerCarriesACORSHeaderTwice() async throws {
        try await withGateway(configure: {
            $0.corsOrigins = [Self.origin, "https://other.example"]
            $0.rateLimitBurst = 60
            $0.rateLimitPerMinute = 1
            $0.httpBodyLimitBytes = 4096
            $0.deskWebhookSecret = "cors-secret"
        }) { app in
            let port = app.port
            let from = [("Origin", Self.origin)]
            func call(_ method: String, _ path: String, _ json: String? = nil, headers: [(String, String)] = []) async throws -> TestResponse {
                if let json { return try await httpRequest(port: port, method, path, headers: from + headers, json: json) }
                return try await httpRequest(port: port, method, path, headers: from + headers)
            }
            // Preflights of every route family, allowed and not.
            for path in ["/v1/sessions", "/v1/tickets", "/v1/tickets/1", "/v1/reports/csat", "/v1/webhooks/desk", "/livez", "/nowhere"] {
                let preflight = try await call("OPTIONS", path, headers: [("Access-Control-Request-Method", "POST"),
                                                                           ("Access-Control-Request-Headers", "authorization, content-type, idempotency-key")])
                #expect(preflight.status == 204)
                Self.expectOnce(preflight, "preflight \(path)")
                #expect(preflight.header("access-control-allow-methods")?.contains("PATCH") == true)
                #expect(preflight.header("access-control-allow-headers")?.contains("Idempotency-Key") == true)
                #expect(preflight.header("access-control-allow-headers")?.contains("If-None-Match") == true)
                let refused = try await httpRequest(port: port, "OPTIONS", path, headers: [("Origin", "https://evil.example"),
                                                                                           ("Access-Control-Request-Method", "POST")])
                Self.expectOnce(refused, "refused preflight \(path)", allowed: false)
                #expect(refused.header("access-control-allow-methods") == nil)
            }

            let signIn = try await call("POST", "/v1/sessions", #"{"userId":"demo-customer","accessToken":"demo-token"}"#)
            #expect(signIn.status == 201)
            Self.expectOnce(signIn, "sign-in")
            let token = try #require(signIn.json?["token"] as? String)
            let auth = [("Authorization", "Bearer \(token)")]
            Self.expectOnce(try await call("POST", "/v1/sessions", #"{"userId":""}"#), "bad sign-in")

            let created = try await call("POST", "/v1/tickets", #"{"title":"CORS","userName":"Demo"}"#, headers: auth + [("Idempotency-Key", "cors-1")])
            #expect(created.status == 201)
            Self.expectOnce(created, "create")
            let replayed = try await call("POST", "/v1/tickets", #"{"title":"CORS","userName":"Demo"}"#, headers: auth + [("Idempotency-Key", "cors-1")])
            #expect(replayed.header("idempotent-replayed") == "true")
            Self.expectOnce(replayed, "idempotent replay")
            let id = try #require(created.json?["id"] as? Int)
            let read = try await call("GET", "/v1/tickets/\(id)", headers: auth)
            Self.expectOnce(read, "read")
            #expect(read.header("access-control-expose-headers")?.contains("ETag") == true)
            let etag = try #require(read.header("etag"))
            let notModified = try await call("GET", "/v1/tickets/\(id)", headers: auth + [("If-None-Match", etag)])
            #expect(notModified.status == 304)
            Self.expectOnce(notModified, "304")
            for (method, path, body) in [("GET", "/v1/tickets?status=open", nil), ("GET", "/v1/tickets/open-count", nil),
                                         ("GET", "/v1/tickets/999999", nil), ("GET", "/v1/operations/999999", nil),
                                         ("PATCH", "/v1/tickets/\(id)/custom-fields", #"{"customFields":{}}"#),
                                         ("POST", "/v1/tickets/\(id)/close", "{}"), ("POST", "/v1/tickets/\(id)/feedback", "{}"),
                                         ("POST", "/v1/link-previews", #"{"url":"ftp://x"}"#), ("POST", "/v1/messages/classify", "{}"),
                                         ("PATCH", "/v1/customers/me/custom-fields", #"{"customFields":{}}"#),
                                         ("DELETE", "/v1/tickets", nil), ("POST", "/v1/tickets", "not json")] as [(String, String, String?)] {
                Self.expectOnce(try await call(method, path, body, headers: auth), "\(method) \(path)")
            }
            let key = try await APIKeyStore(database: app.database).create(name: "cors", scopes: ["reports"]).key
            Self.expectOnce(try await call("GET", "/v1/reports/csat", headers: [("X-API-Key", key)]), "report")
            Self.expectOnce(try await call("GET", "/v1/reports/csat/responses?format=csv", headers: [("X-API-Key", key)]), "csv")
            Self.expectOnce(try await call("GET", "/v1/reports/csat"), "report without key")
            Self.expectOnce(try await call("POST", "/v1/webhooks/desk", #"{"eventType":"TICKET.CREATED"}"#,
                                           headers: [("x-hub-signature", "sha1=" + String(repeating: "0", count: 40))]), "webhook")
            for path in ["/livez", "/readyz", "/metrics", "/openapi.yaml", "/nowhere"] {
                Self.expectOnce(try await call("GET", path), path)
            }
            Self.expectOnce(try await call("POST", "/v1/tickets", String(repeating: "x", count: 5000), headers: auth), "413")
            let smuggled = try await httpRequest(port: port, "POST", "/v1/tickets",
                                                 headers: from + auth + [("Transfer-Encoding", "chunked"), ("Content-Length", "3")])
            #expect(smuggled.status == 400)
            // Its headers are what is wrong, so none of them (Origin included) is trusted; browsers never frame this way.
            Self.expectOnce(smuggled, "400 framing", allowed: false)
            // The customer's budget runs out: the 429 is readable from the page, Retry-After included.
            var limited: TestResponse?
            for _ in 0..<80 {
                let response = try await call("GET", "/v1/tickets/open-count", headers: auth)
                if response.status == 429 { limited = response; break }
            }
            let refusal = try #require(limited)
            Self.expectOnce(refusal, "429")
            #expect(refusal.header("access-control-expose-headers")?.contains("Retry-After") == true)
            // Requests from an origin not on the list are answered, without CORS headers.
            let foreign = try await httpRequest(port: port, "GET", "/livez", headers: [("Origin", "https://evil.example")])
            #expect(foreign.status == 200)
            Self.expectOnce(foreign, "foreign origin", allowed: false)
        }
    }

    @Test func drainAnswersAndWildcardCarryEachHeaderOnce() {
        let responder = APIResponder(routes: RouteTable(), metrics: MetricsRegistry(), logger: Logger(label: "cors-test"),
                                     policy: { var policy = GatewayConfig().apiPolicy; policy.corsOrigins = [Self.origin]; return policy }())
        let request = HTTPRequest(method: "GET", path: "/v1/tickets", headers: [("origin", Self.origin)], remoteAddress: "192.0.2.1")
        let draining = responder.shuttingDown(request)
        #expect(draining.status == 503)
        let wire = TestResponse(status: draining.status, headers: draining.headers, body: draining.body)
        Self.expectOnce(wire, "drain")

        // `*`: the literal wildcard (no credentials are ever allowed), so caches need no Vary.
        let any = CORS(origins: ["*"])
        var response = HTTPResponse(status: 200, headers: [("Vary", "Accept")])
        any.decorate(&response, for: request)
        any.decorate(&response, for: request)
        #expect(response.headers.filter { $0.name == "Access-Control-Allow-Origin" }.map(\.value) == ["*"])
        #expect(response.header("vary") == "Accept")
        // A list merges Origin into an existing Vary once, however often it is applied.
        let list = CORS(origins: [Self.origin])
        var listed = HTTPResponse(status: 200, headers: [("Vary", "Accept")])
        list.decorate(&listed, for: request)
        list.decorate(&listed, for: request)
        #expect(listed.header("vary") == "Accept, Origin")
        #expect(listed.headers.filter { $0.name.lowercased() == "access-control-allow-origin" }.count == 1)
    }
}
