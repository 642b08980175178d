import Postgres
public import Reports

/// CSAT report queries: from the rollup blocks in a configured zone, or exactly from the raw ratings (through the
/// `rated_at` index) in any other zone.
public struct ReportStore: ReportReader {
    let database: Database
    /// Where report reads go: a replica when one is configured and usable, else `pool`.
    let reads: ReportReads

    public init(database: Database, reads: ReportReads? = nil) {
        self.database = database
        self.reads = reads ?? ReportReads(primary: database)
    }

    public typealias Entry = ReportEntry

    /// Bound parameters and `AND column = ANY($n)` clauses for the report filters.
    struct Filters {
        var binds: [any PostgresEncodable]
        var sql = ""

        mutating func add(_ column: String, _ values: [any PostgresEncodable], cast: String) {
            guard !values.isEmpty else { return }
            binds.append(values.map { $0.postgresText ?? "" })
            sql += " AND \(column) = ANY($\(binds.count)::\(cast)[])"
        }

        /// agent, team, channel type and priority filters, on columns named with `prefix` and `coalesce`d ids.
        mutating func addDimensions(_ p: ReportParameters, prefix: String = "", nullableIds: Bool, dimensions: Bool = true) {
            let id = { (column: String) in nullableIds ? "coalesce(\(prefix)\(column), 0)" : "\(prefix)\(column)" }
            add(id("agent_id"), p.agentIds, cast: "bigint")
            add(id("team_id"), p.teamIds, cast: "bigint")
            guard dimensions else { return }
            add("\(prefix)channel_type", p.channelTypes, cast: "text")
            add("\(prefix)priority", p.priorities, cast: "text")
        }
    }

    static func bucketSQL(_ bucket: ReportBucket, _ day: String) -> String {
        switch bucket {
        case .none: return "NULL::date"
        case .day: return day
        case .week: return "date_trunc('week', \(day))::date"
        case .month: return "date_trunc('month', \(day))::date"
        }
    }

    static func decodeDate(_ text: String?) -> LocalDate? { text.flatMap(LocalDate.init) }

    /// Both periods of a report from the zone's rollup blocks, in one query: the current period's sums per group and
    /// bucket, and the previous period's per group, or as one ungrouped row for a bucketed report (a group may come in
    /// several entries; the shaper adds them up).
    /// Reports read the smallest rollup table that answers them (`BlockTable`).
    public func fromBlocks(_ p: ReportParameters, plan: BlockPlan) async throws -> ReportSums? {
        let (sql, binds) = Self.blocksStatement(p, plan: plan)
        // Capped: on the primary, reports from rollups hold at most REPORT_CONCURRENCY connections at once.
        let result = try await PostgresPool.capped { try await reads.run { try await $0.query(sql, binds) } }
        // Sized once: grown by doubling, a weekly report's 3,000 entries were copied about twice over.
        var current: [Entry] = []
        current.reserveCapacity(result.count)
        var previous: [(group: ReportKey, figures: CSATFigures)] = []
        var noRollups = false
        try result.forEachRow { row in
            let tag: Int = try row.decode(1)
            if tag == Self.noRollupsTag {
                noRollups = true
                return
            }
            // The previous period's totals row has no group.
            let group = !p.previousPerGroup && tag == BlockPlan.previousTag ? ReportKey.none : try p.groupBy.key(row)
            let distribution = ScoreCounts(try row.decode(4), try row.decode(5), try row.decode(6), try row.decode(7), try row.decode(8))
            let figures = CSATFigures(requests: try row.decode(2), responses: try row.decode(3), distribution: distribution)
            // A rollup row whose ratings and requests all moved to another agent or team stays, at zero: the raw
            // ratings have no such group, so neither has the report.
            if figures.requests == 0, figures.responses == 0 { return }
            if tag == BlockPlan.previousTag {
                previous.append((group, figures))
            } else if plan.buckets.indices.contains(tag - 1) {
                current.append((group, plan.buckets[tag - 1], figures))
            }
        }
        return noRollups ? nil : (current, previous)
    }

    /// The statement of `fromBlocks` and its parameters.
    static func blocksStatement(_ p: ReportParameters, plan: BlockPlan) -> (sql: String, binds: [any PostgresEncodable]) {
        let group = "b." + p.groupBy.column
        let table = BlockTable(p, grouped: true)
        // An agent × team block row already is an agent's sum for its block, a team block row a team's: where one block
        // alone makes a bucket (a weekly report's whole weeks), its rows are sent as they are. PostgreSQL's aggregation
        // of rows that are each their own group was half of a weekly agents' report's query.
        let passing = table == .team || (table == .agentTeam && p.groupBy == .agent) ? Self.singleBlockParts(plan) : []
        // A bucketed report shows the previous period only as its totals: summed there in one row, not one per group
        // (a weekly agents' report hashed 2,000 block rows into 200 groups for it and sent them back), and from the
        // team blocks unless agents narrow it (200 rows instead of 2,000).
        let isTotal = { (part: BlockPlan.Part) in !p.previousPerGroup && part.tag == BlockPlan.previousTag }
        let summed = plan.parts.indices.filter { !passing.contains($0) && !isTotal(plan.parts[$0]) }.map { plan.parts[$0] }
        let passed = passing.sorted().filter { !isTotal(plan.parts[$0]) }.map { plan.parts[$0] }
        let totalled = plan.parts.filter(isTotal)
        let grouped = Self.blockArrays(summed, tags: true, from: 2)
        var f = Filters(binds: [p.timeZone] + grouped.binds)
        f.addDimensions(p, prefix: "b.", nullableIds: false, dimensions: table == .detail)
        let join = { (table: BlockTable) in
            """
              JOIN \(table.rawValue) b ON b.zone_id = (SELECT id FROM report_zones WHERE zone = $1) AND b.level = q.level
                                AND b.first_day = date '1970-01-01' + q.first_day
             WHERE true\(f.sql)
            """
        }
        let blocks = join(table)
        var sql = """
            SELECT \(group), q.tag, \(grouped.sums)
              FROM \(grouped.from)
            \(blocks)
             GROUP BY 1, 2
            """
        var binds = f.binds
        if !totalled.isEmpty {
            // After the grouped branch, whose first column sets the type the NULL takes.
            let total = Self.blockArrays(totalled, tags: false, from: binds.count + 1)
            binds += total.binds
            sql += """

                UNION ALL
                SELECT NULL, \(BlockPlan.previousTag), \(total.sums)
                  FROM \(total.from)
                \(join(BlockTable(p, grouped: false)))
                HAVING count(*) > 0
                """
        }
        if !passed.isEmpty {
            let single = Self.blockArrays(passed, tags: true, from: binds.count + 1)
            binds += single.binds
            sql = """
                SELECT \(group), q.tag, b.requests, b.responses, b.s1, b.s2, b.s3, b.s4, b.s5
                  FROM \(single.from)
                \(blocks)
                UNION ALL
                \(sql)
                """
        }
        return (sql + noRollupsRow, binds)
    }

    /// `parts` as rows `q` (level, first day, tag when `tags`, sign when a block is taken away) from parameters `first`
    /// on, and the sums of the block rows joined to them: times the sign where any block is taken away (a signed cover),
    /// as they are otherwise.
    static func blockArrays(_ parts: [BlockPlan.Part], tags: Bool, from first: Int) -> (from: String, sums: String, binds: [any PostgresEncodable]) {
        let signed = parts.contains { $0.sign != 1 }
        var binds: [any PostgresEncodable] = [parts.map { $0.block.level }, parts.map { $0.block.firstDay.dayNumber }]
        var columns = ["level", "first_day"]
        if tags { (binds, columns) = (binds + [parts.map { $0.tag }], columns + ["tag"]) }
        if signed { (binds, columns) = (binds + [parts.map { $0.sign }], columns + ["sign"]) }
        let sums = ["requests", "responses", "s1", "s2", "s3", "s4", "s5"].map { "sum(b.\($0)\(signed ? " * q.sign" : ""))" }
        return ("unnest(\(arrays(from: first, count: binds.count))) AS q(\(columns.joined(separator: ", ")))", sums.joined(separator: ", "), binds)
    }

    /// `unnest`'s arguments, the parameters from `first` on, each behind a sub-select so that the planner does not see
    /// how long the arrays are. Seeing it, a statement with short arrays (a weekly report's previous period in five
    /// blocks) looked cheaper planned for its values than planned once, and PostgreSQL planned it anew for every report
    /// (about a millisecond); so each report statement takes its generic plan after the first five.
    static func arrays(from first: Int, count: Int) -> String {
        (first..<first + count).map { "(SELECT $\($0)::int[])" }.joined(separator: ", ")
    }

    /// The rollup tables, from the largest.
    enum BlockTable: String {
        case detail = "csat_detail_blocks", agentTeam = "csat_blocks", team = "csat_team_blocks"

        /// The smallest that answers `p`, per group or (`grouped` false) summed over every group: channel type and
        /// priority are kept only in the detail blocks, agents in the agent × team ones; a teams' report, or any sum of
        /// all groups, not narrowed to agents reads one row per team and block.
        init(_ p: ReportParameters, grouped: Bool) {
            if p.filtersDimensions || (grouped && !p.groupBy.inAgentTeamBlocks) {
                self = .detail
            } else {
                self = (!grouped || p.groupBy == .team) && p.agentIds.isEmpty ? .team : .agentTeam
            }
        }
    }

    /// The tag of the row that says the zone has no complete rollups (a plan's tags are the previous period's and 1…).
    static let noRollupsTag = -1
    /// That row, read in the same snapshot as the blocks: a zone dropped (or set to be rebuilt) since the caller looked
    /// has none.
    static let noRollupsRow = "\nUNION ALL SELECT NULL, \(noRollupsTag), 0, 0, 0, 0, 0, 0, 0"
        + " WHERE NOT EXISTS (SELECT 1 FROM report_zones WHERE zone = $1 AND backfilled_at IS NOT NULL)"

    /// The plan's parts that are the only block of their tag (their bucket, or the previous period), which is added.
    static func singleBlockParts(_ plan: BlockPlan) -> Set<Int> {
        var count: [Int: Int] = [:]
        for part in plan.parts { count[part.tag, default: 0] += 1 }
        return Set(plan.parts.indices.filter { count[plan.parts[$0].tag] == 1 && plan.parts[$0].sign == 1 })
    }

    /// The same sums computed from raw ratings and requests with days cut in `zone`.
    public func fromRaw(_ p: ReportParameters, from: LocalDate, to: LocalDate, bucket: ReportBucket, perGroup: Bool = true,
                        limit: Int) async throws -> [Entry] {
        // Summed over every group where only the total is shown (a bucketed report's previous period): one row, not one
        // a group, so a period with more groups than a report may have rows is no reason to refuse it.
        let group = !perGroup ? "NULL::text" : p.groupBy.hasIds ? "coalesce(\(p.groupBy.column), 0)" : p.groupBy.column
        var f = Filters(binds: [p.timeZone, from.description, to.description])
        f.addDimensions(p, nullableIds: true)
        let (binds, filters) = (f.binds, f.sql)
        // Bounds as instants, so the rated_at / requested_at indexes do the range.
        let sql = """
            SELECT \(group), \(Self.bucketSQL(bucket, "(rated_at AT TIME ZONE $1)::date")), 0, count(*), count(score),
                   coalesce(sum(score), 0), count(*) FILTER (WHERE score = 1), count(*) FILTER (WHERE score = 2),
                   count(*) FILTER (WHERE score = 3), count(*) FILTER (WHERE score = 4), count(*) FILTER (WHERE score = 5)
              FROM csat_ratings
             WHERE rated_at >= ($2::date)::timestamp AT TIME ZONE $1
               AND rated_at < ($3::date + 1)::timestamp AT TIME ZONE $1\(filters)
             GROUP BY 1, 2
            UNION ALL
            SELECT \(group), \(Self.bucketSQL(bucket, "(requested_at AT TIME ZONE $1)::date")), count(*), 0, 0, 0, 0, 0, 0, 0, 0
              FROM csat_requests
             WHERE requested_at >= ($2::date)::timestamp AT TIME ZONE $1
               AND requested_at < ($3::date + 1)::timestamp AT TIME ZONE $1\(filters)
             GROUP BY 1, 2
            """
        let bounded = limit == .max ? sql : "SELECT * FROM (\(sql)) AS sums LIMIT \(limit)"
        let dimension = p.groupBy
        let result = try await reads.run { try await $0.query(bounded, binds) }
        var entries: [Entry] = []
        entries.reserveCapacity(result.count)
        try result.forEachRow { row in
            entries.append((perGroup ? try dimension.key(row) : .none, Self.decodeDate(try row.decodeIfPresent(1)), try Self.figures(row)))
        }
        return entries
    }

    /// Columns 2…10: requests, responses, scored, score sum, counts of 1…5.
    static func figures(_ row: borrowing PostgresRowView) throws -> CSATFigures {
        CSATFigures(requests: try row.decode(2), responses: try row.decode(3), scored: try row.decode(4), scoreSum: try row.decode(5),
                    distribution: ScoreCounts(try row.decode(6), try row.decode(7), try row.decode(8), try row.decode(9), try row.decode(10)))
    }

    /// Display names of agents or teams (kept current by sync).
    public func names(_ group: ReportDimension) async throws -> [Int: String] {
        guard let sql = group.namesQuery else { return [:] }
        var names: [Int: String] = [:]
        for row in try await reads.run({ try await $0.query(sql) }) { names[try row.decode(0)] = try row.decode(1) }
        return names
    }

    /// Channel types with ratings, from the top-level detail blocks of the zones whose rollups are complete: every
    /// rating is in the 512-day block holding its day, a few thousand rows at 1,000,000 ratings where all of the detail
    /// blocks are millions (read whole, 0.4 s with the table in memory, past the statement timeout without, the report
    /// page's first view failing with it). Empty while no zone has complete rollups.
    public func channelTypes() async throws -> [String] {
        try await reads.run { try await $0.query(Self.channelTypesQuery) }.map { try $0.decode(0, as: String.self) }
    }

    static let channelTypesQuery = """
        SELECT DISTINCT b.channel_type FROM \(completeTopBlocks(.detail)) WHERE b.responses > 0 ORDER BY 1
        """

    /// `table`'s rows `b` of the top level in the zones whose rollups are complete: each holds its group's every rating
    /// of 512 days, so together they name every group that has one.
    static func completeTopBlocks(_ table: BlockTable) -> String {
        """
        report_zones z JOIN \(table.rawValue) b ON b.zone_id = z.id AND b.level = \(RollupBlocks.maxLevel) AND z.backfilled_at IS NOT NULL
        """
    }

    /// Agents with ratings in these teams (a team lead's agent list): from the top-level agent × team blocks of the
    /// zones whose rollups are complete (a row an agent, team and 512 days), else from the ratings through the team
    /// index (50,000 ratings of a team at 1,000,000: 120 ms with them in memory, seconds without).
    public func agents(inTeams teams: [Int]) async throws -> Set<Int> {
        Set(try await reads.run { try await $0.query(Self.teamAgentsQuery, [teams]) }.map { try $0.decode(0, as: Int.self) })
    }

    /// The second branch runs only where no zone is complete (a condition PostgreSQL tests once, before any row).
    static let teamAgentsQuery = """
        SELECT b.agent_id FROM \(completeTopBlocks(.agentTeam))
         WHERE b.team_id = ANY($1::bigint[]) AND b.agent_id <> 0 AND b.responses > 0
        UNION
        SELECT agent_id FROM csat_ratings
         WHERE NOT EXISTS (SELECT 1 FROM report_zones WHERE backfilled_at IS NOT NULL)
           AND coalesce(team_id, 0) = ANY($1::bigint[]) AND agent_id IS NOT NULL
        """

    /// Individual ratings, newest first, keyset-paged after (ratedAt, id).
    public func responses(_ p: ReportParameters, after cursor: (ratedAt: Double, id: Int)?, limit: Int) async throws -> [ResponseItem] {
        var f = Self.listingFilters(p)
        if let cursor {
            f.binds.append(cursor.ratedAt)
            f.binds.append(cursor.id)
            f.sql += " AND (r.rated_at, r.id) < (to_timestamp($\(f.binds.count - 1)), $\(f.binds.count))"
        }
        f.binds.append(limit)
        let sql = """
            SELECT \(Self.itemColumns)
              FROM csat_ratings r LEFT JOIN agents a ON a.id = r.agent_id LEFT JOIN teams t ON t.id = r.team_id
             WHERE \(Self.periodSQL)\(f.sql)
             ORDER BY r.rated_at DESC, r.id DESC
             LIMIT $\(f.binds.count)
            """
        return try await reads.run { try await $0.query(sql, f.binds) }.map(Self.item)
    }

    /// The period's comments, lowest score first (newest first within a score): one index range per score.
    public func lowestComments(_ asked: ReportParameters, limit: Int) async throws -> [ResponseItem] {
        var p = asked
        p.hasComment = nil   // these are the commented ones by definition
        var f = Self.listingFilters(p)
        f.binds.append(limit)
        let scores = p.scores.isEmpty ? Array(1...5) : Array(Set(p.scores)).sorted()
        let perScore = scores.map { score in
            "(SELECT r.* FROM csat_ratings r WHERE r.comment <> '' AND r.score = \(score) AND \(Self.periodSQL)\(f.sql) "
                + "ORDER BY r.rated_at DESC, r.id DESC LIMIT $\(f.binds.count))"
        }
        let sql = """
            SELECT \(Self.itemColumns)
              FROM (\(perScore.joined(separator: " UNION ALL "))) r
              LEFT JOIN agents a ON a.id = r.agent_id LEFT JOIN teams t ON t.id = r.team_id
             ORDER BY r.score, r.rated_at DESC, r.id DESC
             LIMIT $\(f.binds.count)
            """
        return try await reads.run { try await $0.query(sql, f.binds) }.map(Self.item)
    }

    /// The listing's period (binds 1–3: zone, first and last day) on `r.rated_at`.
    static let periodSQL = "r.rated_at >= ($2::date)::timestamp AT TIME ZONE $1 AND r.rated_at < ($3::date + 1)::timestamp AT TIME ZONE $1"

    static let itemColumns = """
        r.id, r.ticket_id, r.message_id, r.score, r.comment, r.agent_id, a.display_name, r.team_id, t.name,
        r.channel_type, r.priority, extract(epoch FROM r.rated_at)::float8, r.source
        """

    static func listingFilters(_ p: ReportParameters) -> Filters {
        var f = Filters(binds: [p.timeZone, p.from.description, p.to.description])
        f.addDimensions(p, prefix: "r.", nullableIds: true)
        f.add("r.score", p.scores, cast: "int")
        // The same predicate as the partial indexes (a NULL comment is no comment either way).
        if let hasComment = p.hasComment { f.sql += hasComment ? " AND r.comment <> ''" : " AND coalesce(r.comment, '') = ''" }
        return f
    }

    static func item(_ row: PostgresRow) throws -> ResponseItem {
        ResponseItem(id: try row.decode(0), ticketId: try row.decode(1), messageId: try row.decode(2), score: try row.decodeIfPresent(3),
                     comment: row[4], agentId: try row.decodeIfPresent(5), agentName: row[6], teamId: try row.decodeIfPresent(7),
                     teamName: row[8], channelType: try row.decode(9), priority: try row.decode(10), ratedAt: try row.decode(11),
                     source: try row.decode(12))
    }

    /// Time-zone names PostgreSQL knows (reports may use any of them).
    /// IANA zone names the database knows, without the tz database's own files (`posixrules`, `localtime`, `Factory`)
    /// and its `posix/` and `right/` copies, which are not zones a report should name.
    public func knownZones() async throws -> Set<String> {
        Set(try await database.query("""
            SELECT name FROM pg_timezone_names
             WHERE name NOT IN ('posixrules', 'localtime', 'Factory') AND name NOT LIKE 'posix/%' AND name NOT LIKE 'right/%'
            """).map { try $0.decode(0, as: String.self) })
    }

    /// Today's date in `zone`, by the database clock.
    public func today(in zone: String) async throws -> LocalDate? {
        LocalDate(try await database.query("SELECT (now() AT TIME ZONE $1)::date::text", [zone])[0].decode(0, as: String.self))
    }

    /// Zones whose rollups are complete (reports may read them).
    public func rollupZones() async throws -> Set<String> {
        try await CSATStore(database: database).zones()
    }
}

/// Where each report dimension lives in the tables: its column (in the ratings, the requests and the detail blocks;
/// agents and teams also in the agent × team blocks, teams in the team blocks), its display names, and how a row's value becomes a `ReportKey`.
/// A new dimension is a case of `ReportDimension` and its lines here (and a migration when the rollup blocks do not
/// carry its column yet).
extension ReportDimension {
    var column: String {
        switch self {
        case .agent: return "agent_id"
        case .team: return "team_id"
        case .channelType: return "channel_type"
        case .priority: return "priority"
        }
    }

    /// Whether the agent × team blocks (smaller than the detail blocks) can answer a report grouped by this.
    var inAgentTeamBlocks: Bool { hasIds }

    var namesQuery: String? {
        switch self {
        case .agent: return "SELECT id, display_name FROM agents"
        case .team: return "SELECT id, name FROM teams"
        case .channelType, .priority: return nil
        }
    }

    /// Column 0 of a report row: an id (0, the coalesced NULL, is none) or a text value.
    func key(_ row: borrowing PostgresRowView) throws -> ReportKey {
        hasIds ? .id(try row.decode(0)) : .text(try row.decode(0))
    }
}
