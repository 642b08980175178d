public import Domain
import Foundation
import HTTPServer
import JSON
import Reports
import Services

public struct ReportPageSettings: Sendable {
    public var sessionHours: Int
    /// CSP `frame-ancestors` sources allowed to embed the page; nil: nobody (`'none'` and `X-Frame-Options: DENY`).
    public var frameAncestors: String?
    /// Groups with fewer responses than this are marked as a small sample.
    public var smallSample: Int
    /// Whether the session cookie is `Secure`; nil: when the request came over TLS (`X-Forwarded-Proto: https` from
    /// one of `trustedProxies`, never from any client).
    public var secureCookie: Bool?
    /// Proxies whose forwarding headers are believed (TRUSTED_PROXIES, as for the rate limits and the logs).
    public var trustedProxies: [CIDR]
    /// Zones offered in the time-zone list (the rollup zones; any other IANA zone may still be typed into the URL).
    public var zones: [String]
    /// Desk's dashboard, for links to tickets (`DESK_DASHBOARD_URL`); nil: ticket ids are plain text.
    public var deskDashboardURL: String? { didSet { ticketLinkParts = Self.linkParts(deskDashboardURL) } }
    /// The link's text around each ticket id, split once: a page writes one link a comment row.
    private var ticketLinkParts: [String]?
    /// The CSAT % to reach (`REPORT_CSAT_TARGET`), and per team by id (`REPORT_CSAT_TEAM_TARGETS`); nil: no target.
    public var csatTarget: Double?
    public var teamTargets: [Int: Double]

    public init(sessionHours: Int, frameAncestors: String?, smallSample: Int, secureCookie: Bool?, trustedProxies: [CIDR], zones: [String],
                deskDashboardURL: String?, csatTarget: Double? = nil, teamTargets: [Int: Double] = [:]) {
        self.sessionHours = sessionHours
        self.frameAncestors = frameAncestors
        self.smallSample = smallSample
        self.secureCookie = secureCookie
        self.trustedProxies = trustedProxies
        self.zones = zones
        self.deskDashboardURL = deskDashboardURL
        ticketLinkParts = Self.linkParts(deskDashboardURL)
        self.csatTarget = csatTarget
        self.teamTargets = teamTargets
    }

    /// A team's target: its own, else the overall one.
    public func target(team: Int) -> Double? { teamTargets[team] ?? csatTarget }

    public var hasTargets: Bool { csatTarget != nil || !teamTargets.isEmpty }

    /// The ticket in Desk's dashboard: the URL with `{ticketId}` replaced, else `<url>/tickets/<id>`.
    public func ticketLink(_ id: Int) -> String? { ticketLinkParts?.joined(separator: String(id)) }

    private static func linkParts(_ base: String?) -> [String]? {
        guard let base else { return nil }
        let parts = base.split(separator: "{ticketId}", omittingEmptySubsequences: false).map(String.init)
        return parts.count > 1 ? parts : [(base.hasSuffix("/") ? String(base.dropLast()) : base) + "/tickets/", ""]
    }
}

/// `/reports`: the CSAT report page for support leads, rendered here as HTML with inline SVG charts. Every figure on
/// it comes from `ReportRoutes.shaped`, the computation behind `/v1/reports/csat`, with the same parameters.
public struct ReportPageRoutes: Sendable {
    let api: ReportRoutes
    let sessions: any ReportSessionDirectory
    let customers: any SessionDirectory
    let settings: ReportPageSettings
    /// Headers on every answer of the page (built once: they depend on the settings only).
    let pageHeaders: [(name: String, value: String)]
    static let cookie = "dg_reports"

    public init(api: ReportRoutes, sessions: any ReportSessionDirectory, customers: any SessionDirectory, settings: ReportPageSettings) {
        self.api = api
        self.sessions = sessions
        self.customers = customers
        self.settings = settings
        pageHeaders = Self.securityHeaders(frameAncestors: settings.frameAncestors)
    }

    public func register(in routes: inout RouteTable) {
        routes.add("GET", "/reports", .async { request, _ in try await page(request) { try await summary(request, $0) } })
        routes.add("GET", "/reports/responses", .async { request, _ in try await page(request) { try await responses(request, $0) } })
        routes.add("GET", "/reports/export/{file}", .async { request, _ in try await page(request) { try await export(request, $0) } })
        routes.add("POST", "/reports/sign-in", .async { request, _ in try await signIn(request) })
        routes.add("POST", "/reports/sign-out", .async { request, _ in try await signOut(request) })
    }

    // MARK: Sessions

    static func cookieValue(_ request: HTTPRequest) -> String? {
        for value in request.headers.values("cookie") {
            for part in value.split(separator: ";") {
                let pair = part.trimmingCharacters(in: .whitespaces)
                if pair.hasPrefix(cookie + "=") { return String(pair.dropFirst(cookie.count + 1)) }
            }
        }
        return nil
    }

    func secure(_ request: HTTPRequest) -> Bool {
        settings.secureCookie ?? (ClientAddressResolver(trustedProxies: settings.trustedProxies).scheme(request) == "https")
    }

    func setCookie(_ token: String, _ request: HTTPRequest, maxAge: Int) -> (name: String, value: String) {
        ("Set-Cookie", "\(Self.cookie)=\(token); Path=/reports; Max-Age=\(maxAge); HttpOnly; SameSite=Strict" + (secure(request) ? "; Secure" : ""))
    }

    /// Headers on every answer of the page: no script at all, styles only by hash, framing as configured.
    static func securityHeaders(frameAncestors: String?) -> [(name: String, value: String)] {
        var csp = "default-src 'none'; style-src \(ReportPageHTML.cssHash); img-src 'self' data:; form-action 'self'; base-uri 'none'; "
        csp += "frame-ancestors " + (frameAncestors ?? "'none'")
        var headers: [(name: String, value: String)] = [("Content-Security-Policy", csp), ("X-Content-Type-Options", "nosniff"),
                                                        ("Referrer-Policy", "same-origin"), ("Cache-Control", "private, no-cache")]
        if frameAncestors == nil { headers.append(("X-Frame-Options", "DENY")) }
        return headers
    }

    func html(_ status: Int, _ body: [UInt8], _ extra: [(name: String, value: String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "text/html; charset=utf-8")] + pageHeaders + extra, body: body)
    }

    /// Runs a page for a signed-in caller (the key behind the session, with its teams); anyone else gets the sign-in
    /// form. A failure is an HTML page for browsers and problem+json for anything else.
    func page(_ request: HTTPRequest, _ body: (ReportCaller) async throws -> HTTPResponse) async throws -> HTTPResponse {
        let token = Self.cookieValue(request)
        var caller: ReportCaller?
        if let token, !token.isEmpty, token.utf8.count <= 128, let key = try await sessions.key(of: token) {
            caller = ReportCaller(keyId: key.id, teamIds: key.teamIds)
        }
        guard let caller else {
            let next = request.path + (request.query.isEmpty ? "" : "?" + PageFilters.encode(request.query))
            // 200, not 401: an anonymous visit is not a failed authentication (those are rate limited).
            return html(200, ReportPageHTML.signIn(next: next, message: token == nil ? nil : "Your session has ended; sign in again."),
                        token == nil ? [] : [setCookie("", request, maxAge: 0)])
        }
        do {
            return try await body(caller)
        } catch where Self.wantsHTML(request) {
            guard let error = (error as? APIError) ?? (error as? ReportRefusal).map(ProblemMapper.map) else { throw error }
            let problems = error.extensions["errors"].flatMap { value -> [String]? in
                guard case .array(let items) = value else { return nil }
                return items.compactMap { item in
                    guard case .object(let fields) = item else { return nil }
                    let text = fields.compactMap { field -> String? in if case .string(let s) = field.1 { return s } else { return nil } }
                    return text.joined(separator: " ")
                }
            } ?? []
            return html(error.status, ReportPageHTML.errorPage(status: error.status, title: error.title, detail: error.detail,
                                                               problems: problems, signedIn: true), error.headers)
        }
    }

    static func wantsHTML(_ request: HTTPRequest) -> Bool {
        request.header("accept")?.lowercased().contains("text/html") ?? false
    }

    /// Form fields of an `application/x-www-form-urlencoded` body.
    static func formFields(_ request: HTTPRequest) throws -> [String: String] {
        let type = request.header("content-type")?.lowercased().split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces) }
        guard type == "application/x-www-form-urlencoded" else {
            throw APIError(.unsupportedMediaType, detail: "Send the form as application/x-www-form-urlencoded.")
        }
        var fields: [String: String] = [:]
        for pair in String(decoding: request.body, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ text: Substring) -> String? { text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding }
            guard let name = decode(parts[0]), let value = parts.count > 1 ? decode(parts[1]) : "" else {
                throw APIError(.malformedRequest, detail: "The form is not valid URL encoding.")
            }
            fields[name] = value
        }
        return fields
    }

    /// A form posted from another site is refused (the cookie is SameSite=Strict as well): the Origin must be this
    /// page's own, scheme, host and port alike (the scheme as a trusted proxy tells it); a browser that sends no
    /// Origin is refused when its `Sec-Fetch-Site` says cross-site.
    func checkOrigin(_ request: HTTPRequest) throws {
        guard let origin = request.header("origin") else {
            if request.header("sec-fetch-site")?.lowercased() == "cross-site" {
                throw APIError(.forbidden, detail: "The form was posted from another site.")
            }
            return
        }
        let scheme = ClientAddressResolver(trustedProxies: settings.trustedProxies).scheme(request)
        guard let host = request.header("host"), Self.sameOrigin(origin, scheme: scheme, host: host) else {
            throw APIError(.forbidden, detail: "The form was posted from another site.")
        }
    }

    /// Whether `origin` (`scheme://host[:port]`) is `scheme` with the `host` header (default ports made explicit).
    static func sameOrigin(_ origin: String, scheme: String, host: String) -> Bool {
        func normalized(_ scheme: String, _ authority: Substring) -> String {
            let lower = authority.lowercased()
            let hasPort = lower.hasPrefix("[") ? lower.contains("]:") : lower.contains(":")
            return scheme + "://" + (hasPort ? lower : lower + ":" + (scheme == "https" ? "443" : "80"))
        }
        let parts = origin.lowercased().components(separatedBy: "://")
        guard parts.count == 2, ["http", "https"].contains(parts[0]), !parts[1].isEmpty, !parts[1].contains("/") else { return false }
        return normalized(parts[0], parts[1][...]) == normalized(scheme, host[...])
    }

    /// Where to go after signing in: a page of `/reports` only, never another site.
    static func safeNext(_ next: String?) -> String {
        guard let next, next.hasPrefix("/reports"), !next.hasPrefix("//"), !next.unicodeScalars.contains("\\"),
              !next.unicodeScalars.contains(where: { $0.value < 0x21 || $0.value == 0x7F }) else { return "/reports" }
        return next
    }

    func signIn(_ request: HTTPRequest) async throws -> HTTPResponse {
        try checkOrigin(request)
        let fields = try Self.formFields(request)
        let next = Self.safeNext(fields["next"])
        let key = (fields["key"] ?? "").trimmingCharacters(in: .whitespaces)
        guard !key.isEmpty, key.utf8.count <= 256 else {
            return html(401, ReportPageHTML.signIn(next: next, message: "Enter an API key with the reports scope."))
        }
        if !key.hasPrefix("dgk_"), try await customers.find(token: key) != nil {
            return html(403, ReportPageHTML.signIn(next: next, message: "Customer sessions cannot open the reports; use an API key with the reports scope."))
        }
        guard let token = try await sessions.open(key: key, lifetimeSeconds: settings.sessionHours * 3600) else {
            return html(401, ReportPageHTML.signIn(next: next, message: "The key is unknown, revoked, or has no reports scope."))
        }
        return HTTPResponse(status: 303, headers: [("Location", next), setCookie(token, request, maxAge: settings.sessionHours * 3600)]
                            + pageHeaders)
    }

    func signOut(_ request: HTTPRequest) async throws -> HTTPResponse {
        try checkOrigin(request)
        if let token = Self.cookieValue(request), !token.isEmpty, token.utf8.count <= 128 { try await sessions.close(token: token) }
        return HTTPResponse(status: 303, headers: [("Location", "/reports"), setCookie("", request, maxAge: 0)] + pageHeaders)
    }

    // MARK: Pages

    /// The API parameters for the filters (groupBy and bucket set by the caller).
    func parameters(_ filters: PageFilters, listing: Bool) throws -> ReportParameters {
        try api.parameters(filters.apiQuery(listing: listing), accept: nil, listing: listing)
    }

    func summary(_ request: HTTPRequest, _ caller: ReportCaller) async throws -> HTTPResponse {
        let filters = try PageFilters.parse(request.query, defaultZone: settings.zones.first ?? "UTC")
        if filters.fromForm { return canonical(filters, "/reports") }
        var p = try parameters(filters, listing: false)
        p.bucket = .none
        var byTeam = p
        byTeam.groupBy = .team
        var trendParameters = byTeam
        trendParameters.bucket = filters.bucket(for: p)
        var commentParameters = try parameters(filters, listing: true)
        commentParameters.cursor = nil
        let agents: CSATReport, teams: CSATReport, trend: CSATReport, comments: [ResponseItem]
        if try await api.reports.hasRollups(p.timeZone) {
            async let byAgent = api.reports.shaped(p, caller: caller)
            async let byTeam = api.reports.shaped(byTeam, caller: caller)
            async let perBucket = api.reports.shaped(trendParameters, caller: caller)
            async let lowest = api.reports.lowestComments(commentParameters, caller: caller, limit: SummaryView.commentCount)
            (agents, teams, trend, comments) = (try await byAgent, try await byTeam, try await perBucket, try await lowest)
        } else {
            // From raw ratings a key runs one report at a time (REPORT_RAW_CONCURRENCY_PER_KEY): one after the other.
            agents = try await api.reports.shaped(p, caller: caller)
            teams = try await api.reports.shaped(byTeam, caller: caller)
            trend = try await api.reports.shaped(trendParameters, caller: caller)
            comments = try await api.reports.lowestComments(commentParameters, caller: caller, limit: SummaryView.commentCount)
        }
        let context = try await context(filters, caller)
        let view = SummaryView(context: context, parameters: p, agents: agents, teams: teams, trend: trend, comments: comments)
        return html(200, ReportPageHTML.layout(title: "CSAT \(p.from) – \(p.to)", signedIn: true) { view.render(into: &$0) })
    }

    func responses(_ request: HTTPRequest, _ caller: ReportCaller) async throws -> HTTPResponse {
        let filters = try PageFilters.parse(request.query, defaultZone: settings.zones.first ?? "UTC")
        if filters.fromForm { return canonical(filters, "/reports/responses") }
        let p = try parameters(filters, listing: true)
        let (items, next) = try await api.reports.responsePage(p, caller: caller)
        let context = try await context(filters, caller)
        let view = ResponsesView(context: context, parameters: p, items: items, next: next)
        return html(200, ReportPageHTML.layout(title: "Responses \(p.from) – \(p.to)", signedIn: true, body: view.render()))
    }

    /// The filters' choices. Read after the figures, not alongside them: they are cached (a task each to read them
    /// alongside cost more than the read), and a miss is a query every half minute.
    func context(_ filters: PageFilters, _ caller: ReportCaller) async throws -> PageContext {
        PageContext(filters: filters, caller: caller, agentNames: try await api.reports.names(.agent, for: caller),
                    teamNames: try await api.reports.names(.team, for: caller), channelTypes: try await channelChoices(), settings: settings)
    }

    /// The channel types the filter offers: those with ratings, or every type Desk knows while no zone has rollups.
    func channelChoices() async throws -> [String] {
        let rated = try await api.reports.channelTypes()
        return rated.isEmpty ? PageFilters.channelTypes : rated
    }

    func canonical(_ filters: PageFilters, _ path: String) -> HTTPResponse {
        HTTPResponse(status: 303, headers: [("Location", filters.url(path, filters.items))] + pageHeaders)
    }

    /// A table as CSV in its sort order, or every response matching the filters (fetched a page at a time).
    func export(_ request: HTTPRequest, _ caller: ReportCaller) async throws -> HTTPResponse {
        let file = request.pathParameters["file"] ?? ""
        let filters = try PageFilters.parse(request.query, defaultZone: settings.zones.first ?? "UTC")
        let name = "csat-" + file.replacingOccurrences(of: ".csv", with: "") + "-\(filters.from)-\(filters.to).csv"
        let headers = [("Content-Type", "text/csv; charset=utf-8"), ("Content-Disposition", "attachment; filename=\"\(name)\"")] + pageHeaders
        switch file {
        case "agents.csv", "teams.csv":
            var p = try parameters(filters, listing: false)
            p.bucket = .none
            p.groupBy = file == "agents.csv" ? .agent : .team
            let report = try await api.reports.shaped(p, caller: caller)
            return HTTPResponse(status: 200, headers: headers, body: Array(report.reordered(filters.sorted(report.rows)).csv.utf8))
        case "responses.csv":
            var p = try parameters(filters, listing: true)
            p.cursor = nil
            p.limit = ReportPageRoutes.exportPageSize
            return try await api.responsesExport(p, caller: caller, headers: headers)
        default:
            throw APIError.notFound("Exports are agents.csv, teams.csv and responses.csv.")
        }
    }

    /// Responses fetched per page of a full export.
    static let exportPageSize = 500
}

/// The page's filters as they stand in its URL (so a view can be bookmarked and shared): a period preset or a
/// custom range, the time zone, the trend's bucket, the API's filters, and the tables' sort.
struct PageFilters {
    static let presets: [(id: String, label: String)] = [("7d", "7 days"), ("14d", "14 days"), ("30d", "30 days"), ("90d", "90 days"),
                                                        ("this-month", "This month"), ("last-month", "Last month")]
    static let sorts = ["name", "responses", "average", "csat", "previous"]
    static let channelTypes = ["SENDBIRD", "SENDBIRD_JAVASCRIPT", "SENDBIRD_IOS", "SENDBIRD_ANDROID", "FACEBOOK_CONVERSATION",
                               "FACEBOOK_FEED", "TWITTER_DIRECT_MESSAGE", "TWITTER_STATUS", "INSTAGRAM_COMMENT", "INSTAGRAM_DIRECT_MESSAGE",
                               "WHATSAPP_MESSAGE", "LINE"]

    var range = "30d"
    var from = LocalDate(dayNumber: 0)
    var to = LocalDate(dayNumber: 0)
    var zone = "UTC"
    var bucketChoice = "auto"
    var agentIds: [String] = []
    var teamIds: [String] = []
    var channelTypes: [String] = []
    var priorities: [String] = []
    var scores: [String] = []
    /// Responses with a comment only (`hasComment=true`); the listing's filter, kept by the summary's links.
    var hasComment = false
    var sort = "responses"
    var descending = true
    var cursor: String?
    /// Submitted by the filter form (which also sends the dates it showed), or a link carrying parameters the page
    /// does not know (`utm_source`, `fbclid`, … that mail and chat tools add): answered with a redirect to the
    /// canonical URL, so the address bar holds a clean, shareable view.
    var fromForm = false

    /// The dates of a preset, ending today in the zone.
    static func dates(of preset: String, today: LocalDate) -> (LocalDate, LocalDate)? {
        switch preset {
        case "7d": return (today.adding(days: -6), today)
        case "14d": return (today.adding(days: -13), today)
        case "30d": return (today.adding(days: -29), today)
        case "90d": return (today.adding(days: -89), today)
        case "this-month":
            let (y, m, _) = today.components
            return (LocalDate(year: y, month: m, day: 1), today)
        case "last-month":
            let (y, m, _) = today.components
            let first = LocalDate(year: m == 1 ? y - 1 : y, month: m == 1 ? 12 : m - 1, day: 1)
            return (first, LocalDate(year: y, month: m, day: 1).adding(days: -1))
        default: return nil
        }
    }

    static func parse(_ query: [(name: String, value: String)], defaultZone: String) throws -> PageFilters {
        var filters = PageFilters()
        var problems: [(String, String)] = []
        func single(_ name: String) -> String? {
            let all = query.filter { $0.name == name }
            if all.count > 1 { problems.append((name, "must be given once")) }
            return all.first?.value
        }
        let known: Set<String> = ["range", "from", "to", "tz", "bucket", "agentId", "teamId", "channelType", "priority", "score", "sort",
                                  "dir", "cursor", "shownFrom", "shownTo", "hasComment"]
        // Unknown parameters are ignored here (the JSON API stays strict): a shared link keeps working.
        let unknown = query.contains { !known.contains($0.name) }
        for name in ReportParameters.filters where query.count(where: { $0.name == name }) > ReportParameters.maxFilterValues {
            problems.append((name, "may be given at most \(ReportParameters.maxFilterValues) times"))
        }
        filters.zone = single("tz") ?? defaultZone
        let today = ReportRoutes.today(in: filters.zone) ?? ReportRoutes.today(in: "UTC") ?? LocalDate(dayNumber: 0)
        let range = single("range")
        if let range, range != "custom", !presets.contains(where: { $0.id == range }) {
            problems.append(("range", "must be one of \(presets.map(\.id).joined(separator: ", ")) or custom"))
        }
        let fromText = single("from"), toText = single("to")
        // The form sends the dates it showed (shownFrom/shownTo): dates left as shown follow the chosen preset,
        // edited dates make the range custom.
        let shownFrom = single("shownFrom"), shownTo = single("shownTo")
        filters.fromForm = shownFrom != nil || shownTo != nil || unknown
        let untouched = (shownFrom != nil || shownTo != nil) && range != nil && range != "custom" && fromText == shownFrom && toText == shownTo
        problems += filters.setPeriod(range: range, from: fromText, to: toText, untouched: untouched, today: today)
        if let bucket = single("bucket") {
            if ["auto", "day", "week", "month"].contains(bucket) { filters.bucketChoice = bucket } else {
                problems.append(("bucket", "must be auto, day, week or month"))
            }
        }
        filters.agentIds = query.filter { $0.name == "agentId" }.map(\.value)
        filters.teamIds = query.filter { $0.name == "teamId" }.map(\.value)
        filters.channelTypes = query.filter { $0.name == "channelType" }.map(\.value)
        filters.priorities = query.filter { $0.name == "priority" }.map(\.value)
        filters.scores = query.filter { $0.name == "score" }.map(\.value)
        if let sort = single("sort") {
            if sorts.contains(sort) { filters.sort = sort } else { problems.append(("sort", "must be one of \(sorts.joined(separator: ", "))")) }
        }
        if let dir = single("dir") {
            if dir == "asc" || dir == "desc" { filters.descending = dir == "desc" } else { problems.append(("dir", "must be asc or desc")) }
        } else {
            filters.descending = filters.sort != "name"
        }
        filters.cursor = single("cursor")
        if let comment = single("hasComment") {
            if comment == "true" || comment == "false" { filters.hasComment = comment == "true" } else { problems.append(("hasComment", "must be true or false")) }
        }
        guard problems.isEmpty else {
            throw APIError(.invalidQuery, detail: problems.map { "\($0.0) \($0.1)" }.joined(separator: "; ") + ".",
                           extensions: ["errors": .array(problems.map { .object([("field", .string($0.0)), ("message", .string($0.1))]) })])
        }
        return filters
    }

    /// The period: a preset's dates when the dates given are its own (or were left as the form showed them), else a
    /// custom range (a missing end is today, a missing start 29 days before the end). Returns what is wrong.
    mutating func setPeriod(range: String?, from fromText: String?, to toText: String?, untouched: Bool,
                            today: LocalDate) -> [(String, String)] {
        var problems: [(String, String)] = []
        let preset = Self.dates(of: range ?? "30d", today: today)
        if let preset, untouched || (fromText == nil || fromText == preset.0.description) && (toText == nil || toText == preset.1.description) {
            self.range = range ?? "30d"
            (from, to) = preset
            return problems
        }
        // Dates of their own make the range custom (the API checks them).
        self.range = "custom"
        to = toText.flatMap(LocalDate.init) ?? today
        from = fromText.flatMap(LocalDate.init) ?? to.adding(days: -29)
        for (field, text) in [("from", fromText), ("to", toText)] {
            if let text, let problem = LocalDate.problem(with: text) { problems.append((field, problem)) }
        }
        return problems
    }

    /// The trend's bucket: as chosen, or by the period's length (days up to 31, weeks up to 180, then months).
    func bucket(for p: ReportParameters) -> ReportBucket {
        switch bucketChoice {
        case "day": return .day
        case "week": return .week
        case "month": return .month
        default: return p.days <= 31 ? .day : p.days <= 180 ? .week : .month
        }
    }

    /// The query of the JSON API for these filters.
    func apiQuery(listing: Bool) -> [(name: String, value: String)] {
        var query: [(name: String, value: String)] = [("from", from.description), ("to", to.description), ("tz", zone)]
        query += agentIds.map { ("agentId", $0) } + teamIds.map { ("teamId", $0) } + channelTypes.map { ("channelType", $0) }
        query += priorities.map { ("priority", $0) } + scores.map { ("score", $0) }
        if listing, let cursor { query.append(("cursor", cursor)) }
        if listing, hasComment { query.append(("hasComment", "true")) }
        return query
    }

    /// This view's own query, canonical: a preset stands for its dates, defaults are left out.
    var items: [(name: String, value: String)] {
        var query: [(name: String, value: String)] = []
        if range == "custom" { query += [("from", from.description), ("to", to.description)] } else if range != "30d" { query.append(("range", range)) }
        query.append(("tz", zone))
        if bucketChoice != "auto" { query.append(("bucket", bucketChoice)) }
        query += agentIds.map { ("agentId", $0) } + teamIds.map { ("teamId", $0) } + channelTypes.map { ("channelType", $0) }
        query += priorities.map { ("priority", $0) } + scores.map { ("score", $0) }
        if hasComment { query.append(("hasComment", "true")) }
        if sort != "responses" || !descending { query += [("sort", sort), ("dir", descending ? "desc" : "asc")] }
        return query
    }

    static func encode(_ query: [(name: String, value: String)]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(query.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 2 } + 16)
        for (index, item) in query.enumerated() {
            if index > 0 { out.append(UInt8(ascii: "&")) }
            percentEncode(item.name, into: &out)
            out.append(UInt8(ascii: "="))
            percentEncode(item.value, into: &out)
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// RFC 3986 unreserved bytes stay, every other byte is %XX (pages build hundreds of links; no Foundation here).
    static func percentEncode(_ text: String, into out: inout [UInt8]) {
        let hex: (UInt8) -> UInt8 = { $0 < 10 ? UInt8(ascii: "0") + $0 : UInt8(ascii: "A") + $0 - 10 }
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(byte)
            default:
                // Byte by byte: an array literal here was an allocation per escaped byte.
                out.append(UInt8(ascii: "%"))
                out.append(hex(byte >> 4))
                out.append(hex(byte & 15))
            }
        }
    }

    func url(_ path: String, _ query: [(name: String, value: String)]) -> String {
        query.isEmpty ? path : path + "?" + Self.encode(query)
    }

    /// This view with one more filter value (a drill-down), or a custom period.
    func adding(_ name: String, _ value: String) -> PageFilters {
        var copy = self
        copy.cursor = nil
        switch name {
        case "agentId": if !copy.agentIds.contains(value) { copy.agentIds.append(value) }
        case "teamId": if !copy.teamIds.contains(value) { copy.teamIds.append(value) }
        case "score": copy.scores = [value]
        default: break
        }
        return copy
    }

    func period(_ start: LocalDate, _ end: LocalDate) -> PageFilters {
        var copy = self
        copy.range = "custom"
        copy.from = start
        copy.to = end
        copy.cursor = nil
        return copy
    }

    /// This view without one filter value: the chip's one-click removal.
    func removing(_ name: String, _ value: String) -> PageFilters {
        var copy = self
        copy.cursor = nil
        switch name {
        case "agentId": copy.agentIds.removeAll { $0 == value }
        case "teamId": copy.teamIds.removeAll { $0 == value }
        case "channelType": copy.channelTypes.removeAll { $0 == value }
        case "priority": copy.priorities.removeAll { $0 == value }
        case "score": copy.scores.removeAll { $0 == value }
        case "hasComment": copy.hasComment = false
        case "range": copy.range = "30d"; (copy.from, copy.to) = Self.dates(of: "30d", today: ReportRoutes.today(in: zone) ?? to) ?? (from, to)
        default: break
        }
        return copy
    }

    /// Rows in the tables' order; ties by name then id, so the order is stable.
    func sorted(_ rows: [CSATRow]) -> [CSATRow] {
        func key(_ row: CSATRow) -> Double? {
            switch sort {
            case "responses": return Double(row.figures.responses)
            case "average": return row.figures.averageScore
            case "csat": return row.figures.csatPercent
            case "previous": return row.previous?.averageScore
            default: return nil
            }
        }
        // Their places sorted, not the rows: a row is a few hundred bytes, which the merge moved at every step.
        let keys = rows.map(key)
        return rows.indices.sorted { a, b in
            if sort != "name", keys[a] != keys[b] {
                // Rows without a figure go last either way.
                guard let x = keys[a] else { return false }
                guard let y = keys[b] else { return true }
                return descending ? x > y : x < y
            }
            if rows[a].name != rows[b].name { return (rows[a].name < rows[b].name) != (sort == "name" && descending) }
            return rows[a].groupId < rows[b].groupId
        }.map { rows[$0] }
    }
}
