import API
import Domain
import HTTPServer
import JSON
import Logging
import Reports
import Synchronization
import Telemetry
import Testing

/// The report routes on in-memory fakes: no database, no socket. What the fakes hand back are stored sums (the SQL
/// that sums ratings is tested against PostgreSQL in StoreTests); these tests hold what the routes add around them:
/// keys and scopes, the choice of rollups or raw ratings, a team lead's scope, shaping and the problems.
@Suite struct ReportRouteTests {
    static let agentsNow: [ReportEntry] = [
        (.id(7), nil, CSATFigures(requests: 5, responses: 4, distribution: [0, 0, 1, 1, 2])),
        (.id(8), nil, CSATFigures(requests: 2, responses: 1, distribution: [1, 0, 0, 0, 0])),
    ]
    static let agentsBefore: [(group: ReportKey, figures: CSATFigures)] = [(.id(7), CSATFigures(requests: 1, responses: 1, distribution: [0, 0, 0, 1, 0]))]

    func app(zones: Set<String> = ["UTC"]) -> (APIResponder, FakeReportReader) {
        let reader = FakeReportReader(current: Self.agentsNow, previous: Self.agentsBefore, zones: zones,
                                      names: [.agent: [7: "Ana", 8: "Bo"], .team: [201: "Billing"]])
        let keys = FakeKeys(["dgk_all": (1, ["reports"], nil), "dgk_lead": (2, ["reports"], [201]), "dgk_none": (3, [], nil)])
        let settings = ReportSettings(zones: Array(zones), maxDays: 400, cacheSeconds: 0, cacheMaxBytes: 1 << 20, maxCells: 1000,
                                      rawConcurrency: 2, rawConcurrencyPerKey: 1)
        let reports = ReportRoutes(keys: keys, reports: reader, sessions: NoSessions(), settings: settings, knownZones: ["UTC", "Asia/Tokyo"])
        var routes = RouteTable()
        reports.register(in: &routes)
        let policy = APIPolicy(corsOrigins: [], rateLimitPerMinute: 10_000, rateLimitBurst: 10_000, signInPerMinute: 10, signInBurst: 10,
                               authFailuresPerMinute: 100, authFailureBurst: 100, trustedProxies: [])
        return (APIResponder(routes: routes, metrics: MetricsRegistry(), logger: Logger(label: "report-route-test"), policy: policy), reader)
    }

    func get(_ responder: APIResponder, _ path: String, _ query: [(name: String, value: String)], key: String?) async -> HTTPResponse {
        let headers = key.map { [(name: "Authorization", value: "Bearer \($0)")] } ?? []
        switch responder.respond(to: HTTPRequest(method: "GET", path: path, query: query, headers: headers, remoteAddress: "10.0.0.1")) {
        case .now(let response): return response
        case .later(let body): return await body()
        }
    }

    func json(_ response: HTTPResponse) throws -> JSONValue { try JSONParser.parse(response.body) }

    func number(_ value: JSONValue?) -> Double? {
        switch value {
        case .number(let d)?: return d
        case .integer(let i)?: return Double(i)
        default: return nil
        }
    }

    static let week: [(name: String, value: String)] = [("groupBy", "agent"), ("from", "2026-11-01"), ("to", "2026-11-07"), ("tz", "UTC")]

    @Test func aReportIsShapedFromTheRollupsWithNamesAndThePreviousPeriod() async throws {
        let (responder, reader) = app()
        let response = await get(responder, "/v1/reports/csat", Self.week, key: "dgk_all")
        #expect(response.status == 200)
        #expect(response.header("x-report-source") == "rollup")
        let body = try json(response)
        let rows = try #require(body["rows"]?.arrayValue)
        #expect(rows.map { $0["name"]?.stringValue } == ["Ana", "Bo"])
        // Ana: scores 3, 4, 5, 5 → 4.25 average, 3 of 4 at 4 or 5; Bo: one 1.
        #expect(number(rows[0]["averageScore"]) == 4.25 && number(rows[0]["csatPercent"]) == 75)
        #expect(number(rows[1]["averageScore"]) == 1 && number(rows[1]["csatPercent"]) == 0)
        #expect(number(rows[0]["previous"]?["averageScore"]) == 4)
        #expect(body["totals"]?["responses"]?.intValue == 5 && body["totals"]?["requests"]?.intValue == 7)
        #expect(reader.calls.withLock { $0 } == ["blocks"])
        #expect(reader.asked.withLock { $0.first?.teamIds } == [])
    }

    @Test func aZoneWithoutRollupsIsReadFromRawRatings() async throws {
        let (responder, reader) = app(zones: [])
        let response = await get(responder, "/v1/reports/csat", Self.week, key: "dgk_all")
        #expect(response.status == 200)
        #expect(response.header("x-report-source") == "raw")
        #expect(response.header("warning")?.contains("raw ratings") == true)
        #expect(reader.calls.withLock { $0.sorted() } == ["raw", "raw"])
        #expect(number(try json(response)["rows"]?.arrayValue?.first?["averageScore"]) == 4.25)
    }

    @Test func aTeamLeadsKeyIsHeldToItsTeams() async throws {
        let (responder, reader) = app()
        let own = await get(responder, "/v1/reports/csat", Self.week, key: "dgk_lead")
        #expect(own.status == 200)
        #expect(reader.asked.withLock { $0.last?.teamIds } == [201])
        let other = await get(responder, "/v1/reports/csat", Self.week + [("teamId", "202")], key: "dgk_lead")
        #expect(other.status == 403)
        #expect(other.header("content-type") == "application/problem+json")
        #expect(try json(other)["code"]?.stringValue == "forbidden")
        #expect(reader.asked.withLock { $0.count } == 1)
    }

    @Test func keysAreCheckedBeforeAnyRead() async throws {
        let (responder, reader) = app()
        let missing = await get(responder, "/v1/reports/csat", Self.week, key: nil)
        let unknown = await get(responder, "/v1/reports/csat", Self.week, key: "dgk_unknown")
        let unscoped = await get(responder, "/v1/reports/csat", Self.week, key: "dgk_none")
        #expect([missing.status, unknown.status, unscoped.status] == [401, 401, 403])
        #expect(missing.header("www-authenticate")?.hasPrefix("Bearer") == true)
        #expect(reader.calls.withLock { $0 }.isEmpty)
    }

    @Test func badParametersAreProblemsAndReadNothing() async throws {
        let (responder, reader) = app()
        let response = await get(responder, "/v1/reports/csat", [("from", "2026-11-08"), ("to", "2026-11-01"), ("bucket", "hour")], key: "dgk_all")
        #expect(response.status == 400)
        let problem = try json(response)
        #expect(problem["code"]?.stringValue == "invalid_query")
        #expect((problem["errors"]?.arrayValue?.count ?? 0) >= 2)
        #expect(reader.calls.withLock { $0 }.isEmpty)
    }
}

/// Stored sums and names, handed back as they were given; records what it was asked.
final class FakeReportReader: ReportReader {
    let current: [ReportEntry]
    let previous: [(group: ReportKey, figures: CSATFigures)]
    let zones: Set<String>
    let groupNames: [ReportDimension: [Int: String]]
    let calls = Mutex<[String]>([])
    let asked = Mutex<[ReportParameters]>([])

    init(current: [ReportEntry], previous: [(group: ReportKey, figures: CSATFigures)], zones: Set<String>, names: [ReportDimension: [Int: String]]) {
        (self.current, self.previous, self.zones, self.groupNames) = (current, previous, zones, names)
    }

    func note(_ call: String, _ p: ReportParameters) {
        calls.withLock { $0.append(call) }
        asked.withLock { $0.append(p) }
    }

    func fromBlocks(_ p: ReportParameters, plan: BlockPlan) async throws -> ReportSums? {
        note("blocks", p)
        return (current, previous)
    }

    func fromRaw(_ p: ReportParameters, from: LocalDate, to: LocalDate, bucket: ReportBucket, perGroup: Bool, limit: Int) async throws -> [ReportEntry] {
        note("raw", p)
        return from == p.from ? current : previous.map { ($0.group, nil, $0.figures) }
    }

    func names(_ group: ReportDimension) async throws -> [Int: String] { groupNames[group] ?? [:] }
    func channelTypes() async throws -> [String] { [] }
    func agents(inTeams teams: [Int]) async throws -> Set<Int> { [] }
    func responses(_ p: ReportParameters, after cursor: (ratedAt: Double, id: Int)?, limit: Int) async throws -> [ResponseItem] { [] }
    func lowestComments(_ p: ReportParameters, limit: Int) async throws -> [ResponseItem] { [] }
    func rollupZones() async throws -> Set<String> { zones }
}

struct FakeKeys: APIKeyDirectory {
    let keys: [String: (id: Int, scopes: [String], teamIds: [Int]?)]
    init(_ keys: [String: (id: Int, scopes: [String], teamIds: [Int]?)]) { self.keys = keys }
    func live(_ key: String) async throws -> (id: Int, scopes: [String], teamIds: [Int]?)? { keys[key] }
}

/// No customer sessions: report routes only ask whether a token is one.
struct NoSessions: SessionDirectory {
    func open(sendbirdId: String, displayName: String?, deskCustomerId: Int?, deskToken: String,
              lifetimeSeconds: Int) async throws -> (token: String, record: SessionRecord) {
        throw DomainError(.storeUnavailable, "no sessions here")
    }
    func find(token: String) async throws -> SessionRecord? { nil }
    func revoke(sessionId: Int) async throws {}
    func deskToken(sessionId: Int) async throws -> String? { nil }
    func newestDeskToken(customerId: Int, after sessionId: Int) async throws -> String? { nil }
}

/// The report page's links into Desk's dashboard: every `{ticketId}` filled in, else `<url>/tickets/<id>`.
@Suite struct TicketLinkTests {
    @Test func placeholdersAndThePlainURL() {
        func settings(_ url: String?) -> ReportPageSettings {
            ReportPageSettings(sessionHours: 1, frameAncestors: nil, smallSample: 5, secureCookie: nil, trustedProxies: [], zones: ["UTC"],
                               deskDashboardURL: url)
        }
        #expect(settings(nil).ticketLink(7) == nil)
        #expect(settings("https://d.example/desk").ticketLink(7) == "https://d.example/desk/tickets/7")
        #expect(settings("https://d.example/desk/").ticketLink(7) == "https://d.example/desk/tickets/7")
        #expect(settings("https://d.example/t/{ticketId}?x={ticketId}").ticketLink(42) == "https://d.example/t/42?x=42")
        #expect(settings("{ticketId}").ticketLink(3) == "3")
        var changed = settings(nil)
        changed.deskDashboardURL = "https://d.example/{ticketId}/view"
        #expect(changed.ticketLink(9) == "https://d.example/9/view")
        changed.deskDashboardURL = nil
        #expect(changed.ticketLink(9) == nil)
    }
}
