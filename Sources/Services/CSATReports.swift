import Domain
public import Reports
import Synchronization

/// Why a report or a listing was not computed; the API maps each to its problem.
public enum ReportRefusal: Error, Sendable {
    /// More rows (groups × buckets) than `REPORT_MAX_CELLS`.
    case tooLarge(String)
    /// The database's statement timeout ended it.
    case timeout(String)
    /// This key already runs as many raw reports as it may.
    case keyBusy(String)
    /// Raw reports hold every connection they may use on this instance.
    case instanceBusy(String)
    /// A team-scoped key asked for another team.
    case otherTeam(String)
    /// A cursor this API did not issue.
    case badCursor(String)
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
    /// it names some); naming another team is refused, so no figure of another team, totals included, reaches it.
    public func scope(_ p: ReportParameters) throws(ReportRefusal) -> ReportParameters {
        guard let teams = teamIds else { return p }
        var scoped = p
        if p.teamIds.isEmpty {
            scoped.teamIds = teams
        } else if let other = p.teamIds.first(where: { !teams.contains($0) }) {
            throw .otherTeam("This API key sees the teams \(teams.map(String.init).joined(separator: ", ")) only; teamId \(other) is not one of them.")
        }
        return scoped
    }
}

/// The CSAT reports behind the API and the report page: plan (rollups of a configured zone, else raw ratings
/// admitted per key and per instance), read through the `ReportReader` port, shape. A team-scoped caller's reports,
/// listings and name lists are of its teams only.
public final class CSATReports: Sendable {
    let reader: any ReportReader
    let maxCells: Int
    let admission: ReportAdmission
    private let rollupZones = CachedValue<Set<String>>(ttl: 1)
    private let displayNames = TTLCache<ReportDimension, GroupNames>(ttl: 30)
    private let teamAgents = TTLCache<[Int], Set<Int>>(ttl: 60)
    private let channels = CachedValue<[String]>(ttl: 60)
    private let rollupReports = Atomic<Int>(0)
    private let rollupBlocks = Atomic<Int>(0)
    private let rawReports = Atomic<Int>(0)

    public init(reader: any ReportReader, maxCells: Int, rawConcurrency: Int, rawConcurrencyPerKey: Int) {
        self.reader = reader
        self.maxCells = maxCells
        admission = ReportAdmission(total: rawConcurrency, perKey: rawConcurrencyPerKey)
    }

    /// The one computation behind every report, JSON, CSV or the report page.
    public func shaped(_ asked: ReportParameters, caller: ReportCaller) async throws -> CSATReport {
        let p = try caller.scope(asked)
        let useRollups = try await hasRollups(p.timeZone)
        let names: GroupNames
        let sums: (sums: ReportSums, fromRollups: Bool)
        if let known = displayNames.get(p.groupBy) {
            // The usual case: no child task to read them alongside (its start woke a second thread per report).
            (names, sums) = (known, try await self.sums(p, rollups: useRollups, caller: caller))
        } else {
            async let loaded = groupNames(p.groupBy)
            sums = try await self.sums(p, rollups: useRollups, caller: caller)
            names = try await loaded
        }
        let report = CSATReportShaper.shape(parameters: p, source: sums.fromRollups ? "rollup" : "raw", current: sums.sums.current,
                                            previous: sums.sums.previous, names: names)
        if report.rows.count > maxCells { throw tooLarge(report.rows.count) }
        return report
    }

    /// Both periods' sums, from the rollups or (admitted) from the raw ratings.
    func sums(_ p: ReportParameters, rollups: Bool, caller: ReportCaller) async throws -> (sums: ReportSums, fromRollups: Bool) {
        do {
            if rollups {
                let plan = BlockPlan(p)
                if let sums = try await reader.fromBlocks(p, plan: plan) {
                    rollupReports.add(1, ordering: .relaxed)
                    rollupBlocks.add(plan.parts.count, ordering: .relaxed)
                    return (sums, true)
                }
                // The zone's rollups went away since they were looked up (`desk-gateway csat drop-zone`, a rebuild).
                rollupZones.put(try await reader.rollupZones())
            }
            // Counted as it starts: one that runs past the statement timeout held its connections the longest.
            return (try await admission.run(key: caller.admissionIdentity) { connections in
                rawReports.add(1, ordering: .relaxed)
                return try await rawSums(p, connections: connections)
            }, false)
        } catch let error as DomainError where error.code == .storeTimeout {
            throw ReportRefusal.timeout("The report took longer than the database allows; narrow the range, use a coarser "
                                        + "bucket or a time zone with rollups (REPORT_TIME_ZONES).")
        }
    }

    /// Reports computed so far from rollups and reports from raw ratings started (admitted).
    public var computedCounts: (rollup: Int, raw: Int) {
        (rollupReports.load(ordering: .relaxed), rawReports.load(ordering: .relaxed))
    }

    /// The rollup blocks the reports from rollups read, both periods': how many a range takes depends on how its dates
    /// fall (`BlockPlan`), which is what such a report's cost follows.
    public var rollupBlocksRead: Int { rollupBlocks.load(ordering: .relaxed) }

    /// Whether reports in this zone come from rollups (`report_zones`; a zone added elsewhere shows up within a second).
    /// A zone known to have them is not asked again: the report's own query tells when they went away (`sums`).
    public func hasRollups(_ zone: String) async throws -> Bool {
        if let known = rollupZones.lookup(), known.value.contains(zone) || rollupZones.age() < rollupZones.ttl {
            return known.value.contains(zone)
        }
        let fresh = try await reader.rollupZones()
        rollupZones.put(fresh)
        return fresh.contains(zone)
    }

    /// Agents' or teams' display names by id (briefly cached).
    public func names(_ group: ReportDimension) async throws -> [Int: String] {
        try await groupNames(group).byId
    }

    func groupNames(_ group: ReportDimension) async throws -> GroupNames {
        try await displayNames.value(group) { GroupNames(try await reader.names(group)) }
    }

    /// Agents' or teams' names a caller may pick from: a team-scoped key sees its teams, and the agents rated in them.
    public func names(_ group: ReportDimension, for caller: ReportCaller) async throws -> [Int: String] {
        let all = try await names(group)
        guard let teams = caller.teamIds else { return all }
        let allowed = group == .team ? Set(teams) : try await teamAgents.value(teams) { try await reader.agents(inTeams: teams) }
        return all.filter { allowed.contains($0.key) }
    }

    /// Channel types that have ratings in the rollups (empty when no zone has rollups yet), briefly cached.
    public func channelTypes() async throws -> [String] {
        try await channels.value { try await reader.channelTypes() }
    }

    /// Both periods' sums from the raw ratings: at once on two connections when the admission granted two, else one
    /// after the other on one; each query returns at most enough rows to tell that the report is too large.
    func rawSums(_ p: ReportParameters, connections: Int) async throws -> (current: [ReportEntry], previous: [(group: ReportKey, figures: CSATFigures)]) {
        // Ratings and requests come as separate rows: twice the cells, plus one to see the excess.
        let limit = 2 * maxCells + 1
        let previous = p.previous
        let current: [ReportEntry], before: [ReportEntry]
        if connections >= 2 {
            async let now = reader.fromRaw(p, from: p.from, to: p.to, bucket: p.bucket, perGroup: true, limit: limit)
            async let then = reader.fromRaw(p, from: previous.from, to: previous.to, bucket: .none, perGroup: p.previousPerGroup, limit: limit)
            (current, before) = (try await now, try await then)
        } else {
            current = try await reader.fromRaw(p, from: p.from, to: p.to, bucket: p.bucket, perGroup: true, limit: limit)
            if current.count >= limit { throw tooLarge(maxCells + 1) }
            before = try await reader.fromRaw(p, from: previous.from, to: previous.to, bucket: .none, perGroup: p.previousPerGroup, limit: limit)
        }
        if current.count >= limit || before.count >= limit { throw tooLarge(maxCells + 1) }
        return (current, before.map { ($0.group, $0.figures) })
    }

    func tooLarge(_ rows: Int) -> ReportRefusal {
        .tooLarge("The report would have \(rows > maxCells ? "more than \(maxCells)" : String(rows)) rows (groups × buckets; at most "
                  + "\(maxCells)); use a coarser bucket, a shorter range or filters.")
    }

    /// One page of rated responses, newest first, and the cursor of the next page. A listing whose filters match
    /// little may walk every rating of its range, so it is admitted like a raw report (per key and per instance, on
    /// one connection), and a statement timeout is a refusal, not a failure.
    public func responsePage(_ asked: ReportParameters, caller: ReportCaller) async throws -> (items: [ResponseItem], next: String?) {
        let p = try caller.scope(asked)
        var cursor: (Double, Int)?
        if let text = p.cursor {
            guard let decoded = KeysetCursor.decode(text) else { throw ReportRefusal.badCursor("cursor is not a cursor this API issued.") }
            cursor = (decoded.time, decoded.id)
        }
        let rows: [ResponseItem]
        do {
            rows = try await admission.run(key: caller.admissionIdentity, connections: 1) { _ in
                try await reader.responses(p, after: cursor, limit: p.limit + 1)
            }
        } catch let error as DomainError where error.code == .storeTimeout {
            throw ReportRefusal.timeout("The listing took longer than the database allows; narrow the range or the filters.")
        }
        let page = Array(rows.prefix(p.limit))
        let next = rows.count > p.limit ? page.last.map { KeysetCursor.encode(time: $0.ratedAt, id: $0.id) } : nil
        return (page, next)
    }

    /// The period's comments, lowest score first, admitted like a listing.
    public func lowestComments(_ asked: ReportParameters, caller: ReportCaller, limit: Int) async throws -> [ResponseItem] {
        let p = try caller.scope(asked)
        do {
            return try await admission.run(key: caller.admissionIdentity, connections: 1) { _ in try await reader.lowestComments(p, limit: limit) }
        } catch let error as DomainError where error.code == .storeTimeout {
            throw ReportRefusal.timeout("The comments took longer than the database allows; narrow the range or the filters.")
        }
    }
}
