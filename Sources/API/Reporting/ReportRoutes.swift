public import Domain
import Foundation
import HTTPServer
import JSON
public import Reports
import Synchronization

public struct ReportSettings: Sendable {
    /// Zones with rollups (REPORT_TIME_ZONES).
    public var zones: [String]
    public var maxDays: Int
    /// Seconds a computed report is reused for the same query (0: never); dashboards poll the same reports.
    public var cacheSeconds: Int
    /// Bytes the cached reports may hold at most, answers and keys together.
    public var cacheMaxBytes: Int
    /// Most rows (groups × buckets) one report may have; more is 400 `report_too_large`.
    public var maxCells: Int
    /// Reports computed from raw ratings at once on this instance, and for one API key.
    public var rawConcurrency: Int
    public var rawConcurrencyPerKey: Int

    public init(zones: [String], maxDays: Int, cacheSeconds: Int, cacheMaxBytes: Int, maxCells: Int, rawConcurrency: Int,
                rawConcurrencyPerKey: Int) {
        self.zones = zones
        self.maxDays = maxDays
        self.cacheSeconds = cacheSeconds
        self.cacheMaxBytes = cacheMaxBytes
        self.maxCells = maxCells
        self.rawConcurrency = rawConcurrency
        self.rawConcurrencyPerKey = rawConcurrencyPerKey
    }
}

/// `/v1/reports/csat` and `/v1/reports/csat/responses` for dashboards, authenticated by API keys with the
/// `reports` scope.
public struct ReportRoutes: Sendable {
    let keys: any APIKeyDirectory
    let reports: any ReportReader
    let settings: ReportSettings
    let knownZones: Set<String>
    let rollupZones: RollupZones
    let sessions: any SessionDirectory
    private let cache = KeyCache()
    private let verified: VerifiedCallers
    private let results: ResultCache
    private let admission: ReportAdmission

    public init(keys: any APIKeyDirectory, reports: any ReportReader, sessions: any SessionDirectory, settings: ReportSettings,
                knownZones: Set<String>, verified: VerifiedCallers = VerifiedCallers()) {
        self.verified = verified
        self.keys = keys
        self.reports = reports
        self.sessions = sessions
        self.settings = settings
        self.knownZones = knownZones
        self.rollupZones = RollupZones(reports: reports)
        admission = ReportAdmission(total: settings.rawConcurrency, perKey: settings.rawConcurrencyPerKey)
        results = ResultCache(maxBytes: settings.cacheMaxBytes, ttl: Double(settings.cacheSeconds))
    }

    /// Forgets every API key it knows: one was revoked (`RevocationListener`); the others are looked up again.
    public func forgetCredentials() { cache.forgetKeys() }

    /// What the report cache holds now (expired answers are let go first).
    public var cachedReports: (entries: Int, bytes: Int) { results.usage() }

    public func register(in routes: inout RouteTable) {
        routes.add("GET", "/v1/reports/csat", .hybrid(fast: { request, _ in cachedReport(request) }, slow: { request, _ in
            let caller = try await authorize(request)
            return try await Self.namingDatabase { try await report(request, caller: caller) }
        }))
        routes.add("GET", "/v1/reports/csat/responses", .async { request, _ in
            let caller = try await authorize(request)
            return try await Self.namingDatabase { try await responses(request, caller: caller) }
        })
    }

    /// Adds `X-Report-Database: replica` or `primary`: which database served the answer's report reads.
    static func namingDatabase(_ body: () async throws -> HTTPResponse) async throws -> HTTPResponse {
        let origin = ReadOrigin()
        var response = try await ReadOrigin.$current.withValue(origin) { try await body() }
        if let label = origin.label, response.header("x-report-database") == nil { response.headers.append(("X-Report-Database", label)) }
        return response
    }

    /// API keys come as `Authorization: Bearer dgk_…` or `X-API-Key`. A customer's session token is refused with 403.
    func authorize(_ request: HTTPRequest) async throws -> ReportCaller {
        let key = request.header("x-api-key") ?? Authenticator.bearer(request)
        guard let key else {
            throw APIError(.unauthorized, detail: "Reports need an API key with the reports scope ('Authorization: Bearer dgk_…').",
                           headers: [("WWW-Authenticate", #"Bearer realm="desk-gateway-reports""#)])
        }
        if key.hasPrefix("dgk_") {
            let known: KnownKey?
            if let cached = cache.get(key) { known = cached } else {
                known = try await keys.live(key).map { KnownKey(id: $0.id, scopes: $0.scopes, teamIds: $0.teamIds) }
                if let known { cache.put(key, known) }
            }
            guard let known else {
                throw APIError(.unauthorized, detail: "The API key is unknown or revoked.",
                               headers: [("WWW-Authenticate", #"Bearer realm="desk-gateway-reports""#)])
            }
            verified.add(key)
            guard known.scopes.contains("reports") else {
                throw APIError(.forbidden, detail: "This API key has no reports scope.")
            }
            return ReportCaller(keyId: known.id, teamIds: known.teamIds)
        }
        if try await sessions.find(token: key) != nil {
            throw APIError(.forbidden, detail: "Customer sessions cannot read reports; use an API key with the reports scope.")
        }
        throw APIError(.unauthorized, detail: "The API key is unknown or revoked.",
                       headers: [("WWW-Authenticate", #"Bearer realm="desk-gateway-reports""#)])
    }

    func parameters(_ request: HTTPRequest, listing: Bool) throws -> ReportParameters {
        try parameters(request.query, accept: request.header("accept"), listing: listing)
    }

    func parameters(_ query: [(name: String, value: String)], accept: String?, listing: Bool) throws -> ReportParameters {
        do {
            return try ReportParameters.parse(query, accept: accept, today: Self.today(in:),
                                              isKnownZone: { knownZones.contains($0) }, maxDays: settings.maxDays, listing: listing)
        } catch {
            throw APIError(.invalidQuery, detail: error.problems.map { "\($0.field) \($0.message)" }.joined(separator: "; ") + ".",
                           extensions: ["errors": .array(error.problems.map { .object([("field", .string($0.field)), ("message", .string($0.message))]) })])
        }
    }

    static func today(in zone: String) -> LocalDate? {
        guard let timeZone = TimeZone(identifier: zone) else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        let parts = calendar.dateComponents([.year, .month, .day], from: Date())
        guard let year = parts.year, let month = parts.month, let day = parts.day else { return nil }
        return LocalDate(year: year, month: month, day: day)
    }

    /// A cached answer for an already authorised key and the very same query, without any I/O.
    func cachedReport(_ request: HTTPRequest) -> HTTPResponse? {
        guard settings.cacheSeconds > 0, let key = request.header("x-api-key") ?? Authenticator.bearer(request),
              key.hasPrefix("dgk_"), let known = cache.get(key), known.scopes.contains("reports") else { return nil }
        return results.get(Self.cacheKey(request, teams: known.teamIds))
    }

    /// The query as a report means it: parameters in any order (and repeated values in any order) are one report.
    /// Built on every cached read: byte order (no Unicode collation), one string, no intermediate arrays.
    /// A team-scoped key's answers are its own: the teams lead the key.
    static func cacheKey(_ request: HTTPRequest, teams: [Int]?) -> String {
        func before(_ a: (name: String, value: String), _ b: (name: String, value: String)) -> Bool {
            a.name == b.name ? a.value.utf8.lexicographicallyPrecedes(b.value.utf8) : a.name.utf8.lexicographicallyPrecedes(b.name.utf8)
        }
        let query = request.query
        let items = zip(query, query.dropFirst()).allSatisfy({ !before($1, $0) }) ? query : query.sorted(by: before)
        var key = teams.map { "teams=" + $0.map(String.init).joined(separator: ",") + ";" } ?? ""
        key += request.header("accept")?.lowercased().contains("text/csv") == true ? "csv?" : "json?"
        key.reserveCapacity(items.reduce(8) { $0 + $1.name.utf8.count + $1.value.utf8.count + 2 })
        for (index, item) in items.enumerated() {
            if index > 0 { key += "&" }
            key += item.name
            key += "="
            key += item.value
        }
        return key
    }

    func report(_ request: HTTPRequest, caller: ReportCaller) async throws -> HTTPResponse {
        var response = try await computeReport(request, caller: caller)
        if settings.cacheSeconds > 0 {
            // Tagged once here, so a cached answer is not hashed again on every read (an agents' report is ~70 kB).
            if response.status == 200, response.stream == nil, response.header("etag") == nil {
                response.headers.append(("ETag", ETag.of(response.body)))
            }
            results.put(Self.cacheKey(request, teams: caller.teamIds), response)
        }
        return response
    }

    func computeReport(_ request: HTTPRequest, caller: ReportCaller) async throws -> HTTPResponse {
        let p = try parameters(request, listing: false)
        let report = try await shaped(p, caller: caller)
        var headers: [(name: String, value: String)] = [("X-Report-Source", report.source), ("Cache-Control", "no-cache")]
        if report.source == "raw" {
            headers.append(("Warning", #"199 desk-gateway "time zone not configured for rollups; computed from raw ratings""#))
        }
        if p.format == .csv {
            return HTTPResponse(status: 200, headers: [("Content-Type", "text/csv; charset=utf-8"),
                                                       ("Content-Disposition", #"inline; filename="csat-report.csv""#)] + headers,
                                body: Array(report.csv.utf8))
        }
        return HTTPResponse(status: 200, headers: [("Content-Type", "application/json")] + headers, body: report.jsonBytes())
    }

    /// The one computation behind every report, JSON, CSV or the report page: from the rollups of a configured zone,
    /// else from raw ratings (admitted per key and overall). A team-scoped key's report is of its teams only.
    func shaped(_ asked: ReportParameters, caller: ReportCaller) async throws -> CSATReport {
        let p = try caller.scope(asked)
        let key = caller.admissionIdentity
        let useRollups = try await rollupZones.contains(p.timeZone)
        async let names = cache.names(p.groupBy) { try await reports.names(p.groupBy) }
        let sums: (current: [ReportEntry], previous: [(group: Int, figures: CSATFigures)])
        do {
            if useRollups {
                sums = try await reports.fromBlocks(p, plan: BlockPlan(p))
            } else {
                sums = try await admission.run(key: key) { connections in try await rawSums(p, connections: connections) }
            }
        } catch let error as DomainError where error.code == .storeTimeout {
            throw APIError(.reportTimeout, detail: "The report took longer than the database allows; narrow the range, use a coarser "
                           + "bucket or a time zone with rollups (REPORT_TIME_ZONES).", headers: [("Retry-After", "5")])
        }
        let report = CSATReportShaper.shape(parameters: p, source: useRollups ? "rollup" : "raw", current: sums.current,
                                            previous: sums.previous, names: try await names)
        if report.rows.count > settings.maxCells { throw tooLarge(report.rows.count) }
        return report
    }

    /// Whether reports in this zone come from rollups (else from raw ratings, admitted per key and per instance).
    func hasRollups(_ zone: String) async throws -> Bool {
        try await rollupZones.contains(zone)
    }

    /// Agents' or teams' display names by id (briefly cached), for filters.
    func names(_ group: ReportGroup) async throws -> [Int: String] {
        try await cache.names(group) { try await reports.names(group) }
    }

    /// Both periods' sums from the raw ratings: at once on two connections when the admission granted two, else one
    /// after the other on one; each query returns at most enough rows to tell that the report is too large.
    func rawSums(_ p: ReportParameters, connections: Int) async throws
        -> (current: [ReportEntry], previous: [(group: Int, figures: CSATFigures)]) {
        // Ratings and requests come as separate rows: twice the cells, plus one to see the excess.
        let limit = 2 * settings.maxCells + 1
        let previous = p.previous
        let current: [ReportEntry], before: [ReportEntry]
        if connections >= 2 {
            async let now = reports.fromRaw(p, from: p.from, to: p.to, bucket: p.bucket, limit: limit)
            async let then = reports.fromRaw(p, from: previous.from, to: previous.to, bucket: .none, limit: limit)
            (current, before) = (try await now, try await then)
        } else {
            current = try await reports.fromRaw(p, from: p.from, to: p.to, bucket: p.bucket, limit: limit)
            if current.count >= limit { throw tooLarge(settings.maxCells + 1) }
            before = try await reports.fromRaw(p, from: previous.from, to: previous.to, bucket: .none, limit: limit)
        }
        if current.count >= limit || before.count >= limit { throw tooLarge(settings.maxCells + 1) }
        return (current, before.map { ($0.group, $0.figures) })
    }

    func tooLarge(_ rows: Int) -> APIError {
        APIError(.reportTooLarge, detail: "The report would have \(rows > settings.maxCells ? "more than \(settings.maxCells)" : String(rows)) "
                 + "rows (groups × buckets; at most \(settings.maxCells)); use a coarser bucket, a shorter range or filters.")
    }

    /// One page of rated responses, newest first, and the cursor of the next page. A listing whose filters match
    /// little may walk every rating of its range, so it is admitted like a raw report (per key and per instance, on
    /// one connection), and a statement timeout is a 503, not a failure.
    func responsePage(_ asked: ReportParameters, caller: ReportCaller) async throws -> (items: [ResponseItem], next: String?) {
        let p = try caller.scope(asked)
        var cursor: (Double, Int)?
        if let text = p.cursor {
            guard let decoded = KeysetCursor.decode(text) else {
                throw APIError(.invalidQuery, detail: "cursor is not a cursor this API issued.")
            }
            cursor = (decoded.time, decoded.id)
        }
        let rows: [ResponseItem]
        do {
            rows = try await admission.run(key: caller.admissionIdentity, connections: 1) { _ in
                try await reports.responses(p, after: cursor, limit: p.limit + 1)
            }
        } catch let error as DomainError where error.code == .storeTimeout {
            throw APIError(.reportTimeout, detail: "The listing took longer than the database allows; narrow the range or the filters.",
                           headers: [("Retry-After", "5")])
        }
        let page = Array(rows.prefix(p.limit))
        let next = rows.count > p.limit ? page.last.map {
            KeysetCursor.encode(time: $0.ratedAt, id: $0.id)
        } : nil
        return (page, next)
    }

    static let responsesCSVHeader = "ratedAt,ticketId,messageId,score,comment,agentId,agentName,teamId,teamName,channelType,priority,source"

    static func responsesCSV(_ page: [ResponseItem]) -> String {
        responsesCSVHeader + "\r\n" + responsesCSVLines(page)
    }

    /// Every response matching the filters as CSV, sent as it is read: a page of `p.limit` at a time, each admitted
    /// like the listing, so memory stays one page whatever the count.
    func responsesExport(_ p: ReportParameters, caller: ReportCaller, headers: [(name: String, value: String)]) async throws -> HTTPResponse {
        // The first page is read before answering: a refusal (403, 429, timeout) is still a proper error.
        let first = try await responsePage(p, caller: caller)
        let pages = ExportPages(first: first)
        let stream = ResponseStream {
            guard let chunk = pages.take() else { return nil }
            if chunk.isFirst { return Array((Self.responsesCSVHeader + "\r\n" + Self.responsesCSVLines(chunk.items)).utf8) }
            var next = p
            next.cursor = chunk.cursor
            let page = try await responsePage(next, caller: caller)
            pages.advance(page.next)
            return Array(Self.responsesCSVLines(page.items).utf8)
        }
        return HTTPResponse(status: 200, headers: headers, stream: stream)
    }

    static func responsesCSVLines(_ page: [ResponseItem]) -> String {
        var lines: [String] = []
        lines.reserveCapacity(page.count)
        for item in page {
            var cells: [String] = [ISOTimestamp.format(item.ratedAt), String(item.ticketId), String(item.messageId)]
            cells.append(item.score.map { String($0) } ?? "")
            cells.append(CSV.field(item.comment ?? ""))
            cells.append(item.agentId.map { String($0) } ?? "")
            cells.append(CSV.field(item.agentName ?? ""))
            cells.append(item.teamId.map { String($0) } ?? "")
            cells.append(CSV.field(item.teamName ?? ""))
            cells.append(CSV.field(item.channelType))
            cells.append(item.priority)
            cells.append(item.source)
            lines.append(cells.joined(separator: ","))
        }
        return lines.isEmpty ? "" : lines.joined(separator: "\r\n") + "\r\n"
    }

    /// Channel types that have ratings in the rollups (empty when no zone has rollups yet), briefly cached.
    func channelTypes() async throws -> [String] {
        try await cache.channelTypes { try await reports.channelTypes() }
    }

    /// The period's comments, lowest score first, admitted like a listing.
    func lowestComments(_ asked: ReportParameters, caller: ReportCaller, limit: Int) async throws -> [ResponseItem] {
        let p = try caller.scope(asked)
        do {
            return try await admission.run(key: caller.admissionIdentity, connections: 1) { _ in try await reports.lowestComments(p, limit: limit) }
        } catch let error as DomainError where error.code == .storeTimeout {
            throw APIError(.reportTimeout, detail: "The comments took longer than the database allows; narrow the range or the filters.",
                           headers: [("Retry-After", "5")])
        }
    }

    /// Agents' or teams' names a caller may pick from: a team-scoped key sees its teams, and the agents rated in them.
    func names(_ group: ReportGroup, for caller: ReportCaller) async throws -> [Int: String] {
        let all = try await names(group)
        guard let teams = caller.teamIds else { return all }
        let allowed = group == .team ? Set(teams) : try await cache.agents(in: teams) { try await reports.agents(inTeams: teams) }
        return all.filter { allowed.contains($0.key) }
    }

    func responses(_ request: HTTPRequest, caller: ReportCaller) async throws -> HTTPResponse {
        let p = try parameters(request, listing: true)
        let (page, next) = try await responsePage(p, caller: caller)
        if p.format == .csv {
            var headers: [(name: String, value: String)] = [("Content-Type", "text/csv; charset=utf-8")]
            if let next { headers.append(("Link", "<?cursor=\(next)>; rel=\"next\"")) }
            return HTTPResponse(status: 200, headers: headers, body: Array(Self.responsesCSV(page).utf8))
        }
        let items: [JSONValue] = page.map { item in
            .object([
                ("ticketId", .integer(item.ticketId)), ("messageId", .integer(item.messageId)),
                ("score", item.score.map(JSONValue.integer) ?? .null), ("comment", item.comment.map(JSONValue.string) ?? .null),
                ("agent", item.agentId.map { .object([("id", .integer($0)), ("name", item.agentName.map(JSONValue.string) ?? .null)]) } ?? .null),
                ("team", item.teamId.map { .object([("id", .integer($0)), ("name", item.teamName.map(JSONValue.string) ?? .null)]) } ?? .null),
                ("channelType", .string(item.channelType)), ("priority", .string(item.priority)),
                ("ratedAt", .string(ISOTimestamp.format(item.ratedAt))), ("source", .string(item.source)),
            ])
        }
        return .json(.object([("items", .array(items)), ("nextCursor", next.map(JSONValue.string) ?? .null), ("hasNext", .bool(next != nil)),
                              ("from", .string(p.from.description)), ("to", .string(p.to.description)), ("timeZone", .string(p.timeZone))]))
    }
}

/// Who asks for a report: an API key (its id), limited to some teams or not. The API and the report page build the
/// same caller for a key, so its raw reports are admitted once wherever they come from.
public struct ReportCaller: Sendable {
    public let keyId: Int
    /// The teams a team lead's key sees; nil: every team.
    public let teamIds: [Int]?

    public init(keyId: Int, teamIds: [Int]?) {
        self.keyId = keyId
        self.teamIds = teamIds
    }

    var admissionIdentity: String { "key:\(keyId)" }

    /// The parameters as this caller may ask them: a team-scoped key's reports are of its teams (all of them unless
    /// it names some); naming another team is 403, so no figure of another team, totals included, reaches it.
    func scope(_ p: ReportParameters) throws -> ReportParameters {
        guard let teams = teamIds else { return p }
        var scoped = p
        if p.teamIds.isEmpty {
            scoped.teamIds = teams
        } else if let other = p.teamIds.first(where: { !teams.contains($0) }) {
            throw APIError(.forbidden, detail: "This API key sees the teams \(teams.map(String.init).joined(separator: ", ")) only; "
                           + "teamId \(other) is not one of them.")
        }
        return scoped
    }
}

/// API-key scopes and display names, briefly remembered (a revoked key stops working within 30 s everywhere).
/// A live API key as the cache holds it.
struct KnownKey: Sendable {
    let id: Int
    let scopes: [String]
    let teamIds: [Int]?
}

final class KeyCache: Sendable {
    private let keys = TTLCache<String, KnownKey>(ttl: 30)
    private let displayNames = TTLCache<ReportGroup, [Int: String]>(ttl: 30)
    private let teamAgents = TTLCache<[Int], Set<Int>>(ttl: 60)
    private let channels = CachedValue<[String]>(ttl: 60)

    func get(_ key: String) -> KnownKey? { keys.get(key) }

    func put(_ key: String, _ known: KnownKey) { keys.put(key, known) }

    func forgetKeys() { keys.removeAll() }

    func names(_ group: ReportGroup, load: () async throws -> [Int: String]) async throws -> [Int: String] {
        try await displayNames.value(group, load: load)
    }

    func channelTypes(load: () async throws -> [String]) async throws -> [String] {
        try await channels.value(load: load)
    }

    func agents(in teams: [Int], load: () async throws -> Set<Int>) async throws -> Set<Int> {
        try await teamAgents.value(teams, load: load)
    }
}

/// Where a full export stands: the first page (read before answering), then the cursor of each next one.
final class ExportPages: Sendable {
    struct Chunk {
        let isFirst: Bool
        let items: [ResponseItem]
        let cursor: String?
    }
    private struct State {
        var first: [ResponseItem]?
        var cursor: String?
        var done: Bool
    }
    private let state: Mutex<State>

    init(first: (items: [ResponseItem], next: String?)) {
        state = Mutex(State(first: first.items, cursor: first.next, done: false))
    }

    /// The next chunk to send, or nil when every page was sent.
    func take() -> Chunk? {
        state.withLock { state in
            if let first = state.first {
                state.first = nil
                if state.cursor == nil { state.done = true }
                return Chunk(isFirst: true, items: first, cursor: nil)
            }
            guard !state.done, let cursor = state.cursor else { return nil }
            return Chunk(isFirst: false, items: [], cursor: cursor)
        }
    }

    func advance(_ next: String?) {
        state.withLock { state in
            state.cursor = next
            if next == nil { state.done = true }
        }
    }
}

/// Zones that have rollups, as `report_zones` says (a zone added elsewhere shows up within a second).
final class RollupZones: Sendable {
    private let reports: any ReportReader
    private let zones = CachedValue<Set<String>>(ttl: 1)

    init(reports: any ReportReader) {
        self.reports = reports
    }

    func contains(_ zone: String) async throws -> Bool {
        if let known = zones.lookup(), known.value.contains(zone) || zones.age() < zones.ttl {
            return known.value.contains(zone)
        }
        let fresh = try await reports.rollupZones()
        zones.put(fresh)
        return fresh.contains(zone)
    }
}

/// Recently computed reports by normalized query, bounded by bytes: an answer is kept only while it may be served
/// (`ttl`, `REPORT_CACHE_S`), expired ones are let go at the next use or scrape, and when a new answer would pass
/// `maxBytes` the oldest go first. One answer larger than a quarter of the bound is not kept at all.
final class ResultCache: Sendable {
    private struct Entry {
        let response: HTTPResponse
        let at: Double
        let bytes: Int
    }
    private struct State {
        var entries: [String: Entry] = [:]
        var bytes = 0
        var lastSweep = 0.0

        mutating func remove(_ key: String) {
            if let old = entries.removeValue(forKey: key) { bytes -= old.bytes }
        }

        mutating func sweep(now: Double, ttl: Double) {
            guard now - lastSweep >= min(ttl, 1) else { return }
            lastSweep = now
            for (key, entry) in entries where now - entry.at >= ttl { remove(key) }
        }
    }
    private let state = Mutex(State())
    let maxBytes: Int
    let ttl: Double

    init(maxBytes: Int, ttl: Double) {
        self.maxBytes = max(0, maxBytes)
        self.ttl = ttl
    }

    func get(_ key: String) -> HTTPResponse? {
        let now = Date().timeIntervalSince1970
        return state.withLock { state in
            state.sweep(now: now, ttl: ttl)
            guard let entry = state.entries[key] else { return nil }
            guard now - entry.at < ttl else { state.remove(key); return nil }
            return entry.response
        }
    }

    func put(_ key: String, _ response: HTTPResponse) {
        let size = response.body.count + key.utf8.count + response.headers.reduce(64) { $0 + $1.name.utf8.count + $1.value.utf8.count }
        guard ttl > 0, size <= maxBytes / 4 else { return }
        let now = Date().timeIntervalSince1970
        state.withLock { state in
            state.remove(key)
            state.sweep(now: now, ttl: ttl)
            while state.bytes + size > maxBytes, let oldest = state.entries.min(by: { $0.value.at < $1.value.at })?.key {
                state.remove(oldest)
            }
            state.entries[key] = Entry(response: response, at: now, bytes: size)
            state.bytes += size
        }
    }

    func usage() -> (entries: Int, bytes: Int) {
        let now = Date().timeIntervalSince1970
        return state.withLock { state in
            state.sweep(now: now, ttl: ttl)
            return (state.entries.count, state.bytes)
        }
    }
}
