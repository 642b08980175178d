import Domain
import Foundation
import GatewayApp
import JSON
import Reports
import Store
import Testing
import TestSupport

/// The report page over real HTTP with a real database: who may open it, what it sends, and that its numbers are the
/// JSON API's.
@Suite struct ReportPageTests {
    static let form = [("Content-Type", "application/x-www-form-urlencoded")]

    func signIn(_ app: GatewayApplication, key: String, headers: [(String, String)] = []) async throws -> TestResponse {
        let body = "key=" + (key.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
        return try await httpRequest(port: app.port, "POST", "/reports/sign-in", headers: Self.form + headers, body: Array(body.utf8))
    }

    func cookie(_ response: TestResponse) -> String? {
        guard let header = response.header("Set-Cookie"), header.hasPrefix("dg_reports=") else { return nil }
        return String(header.dropFirst("dg_reports=".count).prefix { $0 != ";" })
    }

    func page(_ app: GatewayApplication, _ path: String, cookie: String, accept: String = "text/html") async throws -> TestResponse {
        try await httpRequest(port: app.port, "GET", path, headers: [("Cookie", "other=1; dg_reports=\(cookie)"), ("Accept", accept)])
    }

    /// Values of `attribute` on every element that has `marker` in its opening tag.
    func attributes(_ html: String, _ marker: String, _ attribute: String) -> [String] {
        var values: [String] = []
        var rest = html[...]
        while let range = rest.range(of: marker) {
            let tagEnd = rest[range.upperBound...].firstIndex(of: ">") ?? rest.endIndex
            let tagStart = rest[..<range.lowerBound].lastIndex(of: "<") ?? range.lowerBound
            let tag = rest[tagStart..<tagEnd]
            if let found = tag.range(of: " \(attribute)=\"") {
                values.append(String(tag[found.upperBound...].prefix { $0 != "\"" }))
            }
            rest = rest[tagEnd...]
        }
        return values
    }

    @Test func onlyAReportsKeyOpensThePageAndRevokingItEndsTheSession() async throws {
        // More sign-ins than one address may make by default (10 at once): the limit is not what is tested here.
        try await withGateway(configure: { $0.signInBurst = 100; $0.authFailuresPerMinute = 100; $0.authFailureBurst = 100 }) { app in
            let keys = APIKeyStore(database: app.database)
            let key = try await keys.create(name: "lead", scopes: ["reports"])
            let other = try await keys.create(name: "ops", scopes: ["ops"])
            // Anonymous: the sign-in form (200: a visit is not a failed authentication), with the page's headers.
            let anonymous = try await httpRequest(port: app.port, "GET", "/reports")
            #expect(anonymous.status == 200)
            #expect(anonymous.text.contains("action=\"/reports/sign-in\""))
            #expect(!anonymous.text.contains("card-responses"))
            let csp = try #require(anonymous.header("Content-Security-Policy"))
            #expect(csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'") && csp.contains("style-src 'sha256-"))
            #expect(!csp.contains("script-src") && !csp.contains("unsafe-inline"))
            #expect(anonymous.header("X-Frame-Options") == "DENY")
            #expect(anonymous.header("X-Content-Type-Options") == "nosniff")
            // Refused: a wrong key, a key without the reports scope, a customer's token, an empty form.
            let wrong = try await signIn(app, key: "dgk_" + String(repeating: "x", count: 43))
            #expect(wrong.status == 401 && cookie(wrong) == nil && wrong.text.contains("unknown, revoked"))
            #expect(try await signIn(app, key: other.key).status == 401)
            let customer = try await Customer.signIn(app)
            let asCustomer = try await signIn(app, key: customer.token)
            #expect(asCustomer.status == 403 && cookie(asCustomer) == nil, "\(asCustomer.status)")
            #expect(try await signIn(app, key: "").status == 401)
            let json = try await httpRequest(port: app.port, "POST", "/reports/sign-in", body: Array("{\"key\":\"\(key.key)\"}".utf8))
            #expect(json.status == 415 && json.header("Content-Type") == "application/problem+json")
            // Posted from another site: refused even with the right key.
            let foreign = try await signIn(app, key: key.key, headers: [("Origin", "http://evil.example")])
            #expect(foreign.status == 403 && cookie(foreign) == nil)
            // The right key: a session cookie scoped to the page, HttpOnly and SameSite=Strict; Secure behind TLS.
            let ok = try await signIn(app, key: key.key, headers: [("Origin", "http://127.0.0.1")])  // the test client sends Host: 127.0.0.1
            #expect(ok.status == 303 && ok.header("Location") == "/reports")
            let setCookie = try #require(ok.header("Set-Cookie"))
            #expect(setCookie.contains("Path=/reports") && setCookie.contains("HttpOnly") && setCookie.contains("SameSite=Strict"))
            #expect(!setCookie.contains("Secure"))
            // X-Forwarded-Proto from a client that is no trusted proxy says nothing (ReportPageOriginTests has the rest).
            let claimed = try await signIn(app, key: key.key, headers: [("X-Forwarded-Proto", "https")])
            #expect(claimed.status == 303 && claimed.header("Set-Cookie")?.contains("; Secure") == false)
            let session = try #require(cookie(ok))
            let opened = try await page(app, "/reports", cookie: session)
            #expect(opened.status == 200 && opened.text.contains("id=\"card-responses\""))
            // Signing in never sends the caller elsewhere.
            let next = "key=\(key.key)&next=" + ("//evil.example/x".addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
            let redirected = try await httpRequest(port: app.port, "POST", "/reports/sign-in", headers: Self.form, body: Array(next.utf8))
            #expect(redirected.header("Location") == "/reports")
            // Revoking the key ends its sessions at once.
            #expect(try await keys.revoke(id: key.id))
            let afterRevoke = try await page(app, "/reports", cookie: session)
            #expect(afterRevoke.status == 200 && !afterRevoke.text.contains("card-responses") && afterRevoke.text.contains("session has ended"))
            #expect(afterRevoke.header("Set-Cookie")?.contains("Max-Age=0") == true)
            #expect(try await signIn(app, key: key.key).status == 401)
            // Sign-out ends a session too.
            let second = try await keys.create(name: "lead 2", scopes: ["reports"])
            let fresh = try #require(cookie(try await signIn(app, key: second.key)))
            #expect(try await page(app, "/reports", cookie: fresh).text.contains("card-responses"))
            let out = try await httpRequest(port: app.port, "POST", "/reports/sign-out", headers: Self.form + [("Cookie", "dg_reports=\(fresh)")],
                                            body: [])
            #expect(out.status == 303 && out.header("Set-Cookie")?.contains("Max-Age=0") == true)
            #expect(!(try await page(app, "/reports", cookie: fresh).text.contains("card-responses")))
        }
    }

    @Test func framingIsConfigurable() async throws {
        try await withGateway(configure: { $0.reportPageFrameAncestors = "https://tools.example.com" }) { app in
            let response = try await httpRequest(port: app.port, "GET", "/reports")
            #expect(response.header("Content-Security-Policy")?.contains("frame-ancestors https://tools.example.com") == true)
            #expect(response.header("X-Frame-Options") == nil)
        }
    }

    @Test func thePageShowsTheJSONAPIsNumbers() async throws {
        try await withGateway(configure: { $0.reportTimeZones = ["UTC"] }) { app in
            let agents = [701, 702, 703]
            try await app.database.transaction { tx in
                try tx.query("INSERT INTO agents (id, display_name) VALUES (701, 'Ann'), (702, '<script>alert(1)</script>'), (703, 'Bo \"&\" Co')")
                try tx.query("INSERT INTO teams (id, key, name) VALUES (71, 't71', 'Front'), (72, 't72', 'Back')")
            }
            let store = CSATStore(database: app.database)
            let day = ISOTimestamp.parse("2026-10-01T12:00:00Z")!
            var index = 0
            // Ten days with ratings, one day without (a gap), then a request-only day.
            for offset in [0, 1, 2, 3, 4, 6, 7, 8, 9, 10] {
                for n in 0..<(3 + offset % 4) {
                    index += 1
                    let agent = agents[(index + n) % 3]
                    try await store.record(RatingRecord(ticketId: 50_000 + index, messageId: 1, score: 1 + (index * 7 + n) % 5,
                                                        comment: index % 3 == 0 ? "Comment <b>\(index)</b>" : nil, agentId: agent,
                                                        teamId: agent == 703 ? nil : 71 + agent % 2, channelType: "SENDBIRD_IOS",
                                                        priority: .medium, customerSendbirdId: "c", ratedAt: day + Double(offset) * 86_400,
                                                        source: .gateway))
                }
                try await store.recordRequest(ticketId: 60_000 + offset, messageId: 1, agentId: 701, teamId: 71, channelType: "SENDBIRD_IOS",
                                              priority: .medium, requestedAt: day + Double(offset) * 86_400)
            }
            let reporter = try await reporter(app)
            let session = try #require(cookie(try await signIn(app, key: reporter.key)))
            let range = "from=2026-10-01&to=2026-10-12&tz=UTC"
            let response = try await page(app, "/reports?\(range)", cookie: session)
            #expect(response.status == 200)
            let html = response.text
            // Never reflected unescaped.
            #expect(!html.contains("<script>alert(1)</script>") && html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"))
            #expect(html.contains("Bo &quot;&amp;&quot; Co"))
            let api = try #require(try await reporter.get("?groupBy=agent&\(range)").json)
            let totals = try #require(api["totals"] as? [String: Any])
            func number(_ value: Any?) -> String {
                guard let value = value as? NSNumber else { return "" }
                return JSONValue.number(value.doubleValue).serialized()
            }
            #expect(attributes(html, "id=\"card-responses\"", "data-value") == ["\(totals["responses"]!)"])
            #expect(attributes(html, "id=\"card-average\"", "data-value") == [number(totals["averageScore"])])
            #expect(attributes(html, "id=\"card-csat\"", "data-value") == [number(totals["csatPercent"])])
            #expect(attributes(html, "id=\"card-rate\"", "data-value") == [number(totals["responseRate"])])
            // Agents table: the API's rows, the same figures (sorted by responses, most first).
            let rows = try #require(api["rows"] as? [[String: Any]])
            let tableStart = try #require(html.range(of: "id=\"table-agents\""))
            let tableEnd = try #require(html.range(of: "</table>", range: tableStart.upperBound..<html.endIndex))
            let table = String(html[tableStart.lowerBound..<tableEnd.upperBound])
            let ids = attributes(table, "<tr data-id", "data-id")
            #expect(Set(ids) == Set(rows.map { "\(($0["id"] as? Int) ?? 0)" }))
            for row in rows {
                let id = "\(idOrZero(row["id"]))"
                let marker = "data-id=\"\(id)\""
                #expect(attributes(table, marker, "data-responses") == ["\(row["responses"]!)"], "\(id)")
                #expect(attributes(table, marker, "data-average") == [number(row["averageScore"])], "\(id)")
                #expect(attributes(table, marker, "data-csat") == [number(row["csatPercent"])], "\(id)")
            }
            let responses = attributes(table, "<tr data-id", "data-responses").compactMap(Int.init)
            #expect(responses == responses.sorted(by: >))
            // Trend: one row per day, the empty day a gap (no average), and the same total.
            let trendLabels = attributes(html, "<tr data-label", "data-label")
            #expect(trendLabels.count == 12 && trendLabels.first == "2026-10-01" && trendLabels.last == "2026-10-12")
            let gap = attributes(html, "data-label=\"2026-10-06\"", "data-average")
            #expect(gap == [""])
            #expect(attributes(html, "<tr data-label", "data-responses").compactMap(Int.init).reduce(0, +) == totals["responses"] as? Int)
            // Filters narrow both the same way.
            let filtered = try await page(app, "/reports?\(range)&agentId=701&score=4&score=5", cookie: session)
            let apiFiltered = try #require(try await reporter.get("?groupBy=agent&\(range)&agentId=701&score=4&score=5").json)
            #expect(attributes(filtered.text, "id=\"card-responses\"", "data-value") == ["\((apiFiltered["totals"] as? [String: Any])?["responses"] ?? -1)"])
            #expect(filtered.text.contains("Remove Agent: Ann"))
            // A reload costs a 304.
            let etag = try #require(response.header("ETag"))
            let again = try await httpRequest(port: app.port, "GET", "/reports?\(range)",
                                              headers: [("Cookie", "dg_reports=\(session)"), ("If-None-Match", etag)])
            #expect(again.status == 304)
            #expect(response.header("Cache-Control") == "private, no-cache")
            // The CSV of the agents table: its rows in the table's order, then the total.
            let csv = try await page(app, "/reports/export/agents.csv?\(range)", cookie: session, accept: "*/*")
            #expect(csv.header("Content-Type") == "text/csv; charset=utf-8")
            #expect(csv.header("Content-Disposition")?.hasPrefix("attachment;") == true)
            let csvIds = csv.text.split(separator: "\r\n").dropFirst().dropLast().map { String($0.split(separator: ",", omittingEmptySubsequences: false)[0]) }
            #expect(csvIds == ids.map { $0 == "0" ? "" : $0 })
            // Drill-down: the responses of one agent, newest first, with escaped comments; its CSV has the same rows.
            let drill = try await page(app, "/reports/responses?\(range)&agentId=702", cookie: session)
            #expect(drill.status == 200)
            let tickets = attributes(drill.text, "<tr data-ticket", "data-ticket")
            let listed = try #require(try await reporter.get("/responses?\(range)&agentId=702").json)
            #expect(tickets == (listed["items"] as? [[String: Any]] ?? []).map { "\($0["ticketId"]!)" })
            let everyone = try await page(app, "/reports/responses?\(range)", cookie: session)
            #expect(!everyone.text.contains("Comment <b>") && everyone.text.contains("Comment &lt;b&gt;"))
            let drillCSV = try await page(app, "/reports/export/responses.csv?\(range)&agentId=702", cookie: session, accept: "*/*")
            #expect(drillCSV.text.split(separator: "\r\n").count == tickets.count + 1)
            #expect(drillCSV.header("Transfer-Encoding") == "chunked" && drillCSV.header("ETag") == nil)
        }
    }

    /// Mail and chat tools add tracking parameters to shared links: the page ignores what it does not know and
    /// redirects to its canonical URL without them; the JSON API stays strict.
    @Test func sharedLinksWithTrackingParametersStillOpen() async throws {
        try await withGateway { app in
            let reporter = try await reporter(app)
            let session = try #require(cookie(try await signIn(app, key: reporter.key)))
            let shared = try await page(app, "/reports?range=7d&utm_source=newsletter&fbclid=IwAR0x&sort=name", cookie: session)
            #expect(shared.status == 303, "\(shared.status) \(shared.text.prefix(200))")
            let location = try #require(shared.header("Location"))
            #expect(location.hasPrefix("/reports") && location.contains("range=7d") && location.contains("sort=name"))
            #expect(!location.contains("utm_source") && !location.contains("fbclid"))
            #expect(try await page(app, location, cookie: session).status == 200)
            let listing = try await page(app, "/reports/responses?gclid=x", cookie: session)
            #expect(listing.status == 303 && !(listing.header("Location") ?? "gclid").contains("gclid"))
            #expect(try await reporter.get("?utm_source=newsletter").status == 400)
        }
    }

    @Test func badFiltersAreExplainedAndNothingIsReflectedRaw() async throws {
        try await withGateway { app in
            let reporter = try await reporter(app)
            let session = try #require(cookie(try await signIn(app, key: reporter.key)))
            let html = try await page(app, "/reports?tz=%3Cimg%20src%3Dx%3E&range=forever&sort=%22x&evil=1", cookie: session)
            #expect(html.status == 400 && html.header("Content-Type") == "text/html; charset=utf-8")
            #expect(html.text.contains("range must be one of") && !html.text.contains("evil"))
            #expect(!html.text.contains("<img src=x>"))
            let problem = try await page(app, "/reports?range=forever", cookie: session, accept: "application/json")
            #expect(problem.status == 400 && problem.header("Content-Type") == "application/problem+json")
            #expect(problem.json?["code"] as? String == "invalid_query")
            let api = try await page(app, "/reports?from=2026-13-01", cookie: session)
            #expect(api.status == 400 && api.text.contains("from must be a date"))
            #expect(try await page(app, "/reports/export/secrets.csv", cookie: session).status == 404)
        }
    }
}

private func idOrZero(_ value: Any?) -> Int { (value as? Int) ?? 0 }

/// A filter repeated without end (800 agent ids in a 10 KB URL rendered an 11 MB page in 0.7 s) is refused with a
/// clear 400 by the page and the API alike, before any work; the cap itself is served.
@Suite struct ReportFilterCapTests {
    @Test func moreValuesThanTheCapPerFilterAreRefusedByThePageAndTheAPI() async throws {
        try await withGateway { app in
            let reporter = try await reporter(app)
            let page = ReportPageTests()
            let session = try #require(page.cookie(try await page.signIn(app, key: reporter.key)))
            let cap = ReportParameters.maxFilterValues
            for name in ["agentId", "teamId", "channelType"] {
                let value = name == "channelType" ? "SENDBIRD" : "7"
                let atCap = Array(repeating: "\(name)=\(value)", count: cap).joined(separator: "&")
                let over = atCap + "&\(name)=\(value)"
                let fine = try await reporter.get("?" + atCap)
                #expect(fine.status == 200, "\(name): \(fine.text.prefix(200))")
                let refused = try await reporter.get("?" + over)
                #expect(refused.status == 400 && refused.header("Content-Type") == "application/problem+json", "\(name): \(refused.status)")
                #expect(refused.text.contains("at most \(cap) times") && refused.text.contains(name), "\(refused.text.prefix(300))")
                let shown = try await page.page(app, "/reports?" + atCap, cookie: session)
                #expect(shown.status == 200, "\(name): \(shown.status)")
                let pageRefused = try await page.page(app, "/reports?" + over, cookie: session)
                #expect(pageRefused.status == 400 && pageRefused.text.contains("at most \(cap) times"), "\(name): \(pageRefused.status)")
            }
        }
    }
}

/// Sign-in is compared with the page's own origin, scheme and port included, and only a trusted proxy may say the
/// client came over TLS (the cookie's Secure flag, the Origin's scheme).
@Suite struct ReportPageOriginTests {
    @Test func theOriginMustBeThePagesOwnAndOnlyTrustedProxiesSpeakForTLS() async throws {
        for trusted in [false, true] {
            try await withGateway(configure: { if trusted { $0.trustedProxies = ["127.0.0.1/32"] } }) { app in
                let page = ReportPageTests()
                let key = try await APIKeyStore(database: app.database).create(name: "lead", scopes: ["reports"]).key
                func signIn(_ headers: [(String, String)]) async throws -> TestResponse { try await page.signIn(app, key: key, headers: headers) }
                // Another port, another scheme, another host: refused. No Origin from a cross-site fetch: refused.
                for origin in ["http://127.0.0.1:8081", "https://127.0.0.1", "http://evil.example", "null"] {
                    #expect(try await signIn([("Origin", origin)]).status == 403, "\(origin)")
                }
                #expect(try await signIn([("Sec-Fetch-Site", "cross-site")]).status == 403)
                #expect(try await signIn([("Sec-Fetch-Site", "same-origin")]).status == 303)
                #expect(try await signIn([("Origin", "http://127.0.0.1:80")]).status == 303)
                // Behind a trusted proxy that terminated TLS, the page's origin is https and the cookie Secure.
                let overTLS = try await signIn([("X-Forwarded-Proto", "https"), ("Origin", "https://127.0.0.1")])
                if trusted {
                    #expect(overTLS.status == 303 && overTLS.header("Set-Cookie")?.contains("; Secure") == true, "\(overTLS.status)")
                } else {
                    #expect(overTLS.status == 403, "an https Origin from a client that is no proxy: \(overTLS.status)")
                    let plain = try await signIn([("X-Forwarded-Proto", "https")])
                    #expect(plain.status == 303 && plain.header("Set-Cookie")?.contains("; Secure") == false)
                }
            }
        }
    }
}
