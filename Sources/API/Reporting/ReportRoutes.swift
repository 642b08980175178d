public import Domain
import Foundation
import HTTPServer
import JSON
public import Reports
public import Services
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
    /// The reports themselves (plan, read, shape, admission): the routes parse, authorise, cache and render.
    public let reports: CSATReports
    let settings: ReportSettings
    let knownZones: Set<String>
    let sessions: any SessionDirectory
    private let knownKeys = TTLCache<String, KnownKey>(ttl: 30)
    private let verified: VerifiedCallers
    private let results: ResultCache

    public init(keys: any APIKeyDirectory, reports: any ReportReader, sessions: any SessionDirectory, settings: ReportSettings,
                knownZones: Set<String>, verified: VerifiedCallers = VerifiedCallers()) {
        self.verified = verified
        self.keys = keys
        self.reports = CSATReports(reader: reports, maxCells: settings.maxCells, rawConcurrency: settings.rawConcurrency,
                                   rawConcurrencyPerKey: settings.rawConcurrencyPerKey)
        self.sessions = sessions
        self.settings = settings
        self.knownZones = knownZones
        results = ResultCache(maxBytes: settings.cacheMaxBytes, ttl: Double(settings.cacheSeconds))
    }

    /// Forgets every API key it knows: one was revoked (`RevocationListener`); the others are looked up again.
    public func forgetCredentials() { knownKeys.removeAll() }

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
        guard let key = Authenticator.reportKey(request) else {
            throw APIError(.unauthorized, detail: "Reports need an API key with the reports scope ('Authorization: Bearer dgk_…').",
                           headers: [("WWW-Authenticate", #"Bearer realm="desk-gateway-reports""#)])
        }
        if key.hasPrefix("dgk_") {
            let known: KnownKey?
            if let cached = knownKeys.get(key) { known = cached } else {
                known = try await keys.live(key).map { KnownKey(id: $0.id, scopes: $0.scopes, teamIds: $0.teamIds) }
                if let known { knownKeys.put(key, known) }
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
        guard settings.cacheSeconds > 0, let key = Authenticator.reportKey(request),
              key.hasPrefix("dgk_"), let known = knownKeys.get(key), known.scopes.contains("reports") else { return nil }
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
        key += ReportFormat.preferred(accept: request.header("accept")) == .csv ? "csv?" : "json?"
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
        let report = try await reports.shaped(p, caller: caller)
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

    static let responsesCSVHeader = "ratedAt,ticketId,messageId,score,comment,agentId,agentName,teamId,teamName,channelType,priority,source"

    static func responsesCSV(_ page: [ResponseItem]) -> String {
        responsesCSVHeader + "\r\n" + responsesCSVLines(page)
    }

    /// Every response matching the filters as CSV, sent as it is read: a page of `p.limit` at a time, each admitted
    /// like the listing, so memory stays one page whatever the count.
    func responsesExport(_ p: ReportParameters, caller: ReportCaller, headers: [(name: String, value: String)]) async throws -> HTTPResponse {
        // The first page is read before answering: a refusal (403, 429, timeout) is still a proper error.
        let first = try await reports.responsePage(p, caller: caller)
        let pages = ExportPages(first: first)
        let stream = ResponseStream {
            guard let chunk = pages.take() else { return nil }
            if chunk.isFirst { return Array((Self.responsesCSVHeader + "\r\n" + Self.responsesCSVLines(chunk.items)).utf8) }
            var next = p
            next.cursor = chunk.cursor
            let page = try await reports.responsePage(next, caller: caller)
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

    func responses(_ request: HTTPRequest, caller: ReportCaller) async throws -> HTTPResponse {
        let p = try parameters(request, listing: true)
        let (page, next) = try await reports.responsePage(p, caller: caller)
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

/// A live API key as the cache holds it (a revoked key stops working within 30 s everywhere).
struct KnownKey: Sendable {
    let id: Int
    let scopes: [String]
    let teamIds: [Int]?
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
        let now = WallClock.seconds()
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
        let now = WallClock.seconds()
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
        let now = WallClock.seconds()
        return state.withLock { state in
            state.sweep(now: now, ttl: ttl)
            return (state.entries.count, state.bytes)
        }
    }
}
