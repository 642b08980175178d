/// Both periods' sums of a report: the current period's per group and bucket, the previous period's per group (where
/// rows do not show it, `ReportParameters.previousPerGroup`, it may come as entries of `ReportKey.none`).
public typealias ReportSums = (current: [ReportEntry], previous: [(group: ReportKey, figures: CSATFigures)])

/// The report reads as a port: `Store.ReportStore` reads PostgreSQL (the rollup blocks, or the raw ratings); the
/// routes plan, admit and shape around it, and their tests read an in-memory fake.
public protocol ReportReader: Sendable {
    /// Both periods from the zone's rollup blocks: the current period's sums per group and bucket, the previous
    /// period's per group (as its totals where rows do not show it: `ReportParameters.previousPerGroup`); nil when
    /// the zone has no complete rollups as the query saw the database (dropped or being rebuilt since the caller
    /// looked), which the raw ratings then answer.
    func fromBlocks(_ p: ReportParameters, plan: BlockPlan) async throws -> ReportSums?
    /// One period's sums from the raw ratings, at most `limit` rows: per group, or (`perGroup` false) one sum of every
    /// group as entries of `ReportKey.none`.
    func fromRaw(_ p: ReportParameters, from: LocalDate, to: LocalDate, bucket: ReportBucket, perGroup: Bool, limit: Int) async throws -> [ReportEntry]
    /// Display names of agents or teams by id (empty for a dimension without ids).
    func names(_ group: ReportDimension) async throws -> [Int: String]
    /// Channel types that have ratings in the rollups.
    func channelTypes() async throws -> [String]
    /// Agents rated in these teams.
    func agents(inTeams teams: [Int]) async throws -> Set<Int>
    /// Individual ratings, newest first, keyset-paged after (ratedAt, id).
    func responses(_ p: ReportParameters, after cursor: (ratedAt: Double, id: Int)?, limit: Int) async throws -> [ResponseItem]
    /// The period's comments, lowest score first.
    func lowestComments(_ p: ReportParameters, limit: Int) async throws -> [ResponseItem]
    /// Zones whose rollups are complete (reports may read them).
    func rollupZones() async throws -> Set<String>
}

/// One group's (and bucket's) sums.
public typealias ReportEntry = (group: ReportKey, bucketStart: LocalDate?, figures: CSATFigures)

/// One rated response as listings and exports show it.
public struct ResponseItem: Sendable {
    public let id: Int
    public let ticketId: Int
    public let messageId: Int
    public let score: Int?
    public let comment: String?
    public let agentId: Int?
    public let agentName: String?
    public let teamId: Int?
    public let teamName: String?
    public let channelType: String
    public let priority: String
    public let ratedAt: Double
    public let source: String

    public init(id: Int, ticketId: Int, messageId: Int, score: Int?, comment: String?, agentId: Int?, agentName: String?, teamId: Int?,
                teamName: String?, channelType: String, priority: String, ratedAt: Double, source: String) {
        (self.id, self.ticketId, self.messageId, self.score, self.comment) = (id, ticketId, messageId, score, comment)
        (self.agentId, self.agentName, self.teamId, self.teamName) = (agentId, agentName, teamId, teamName)
        (self.channelType, self.priority, self.ratedAt, self.source) = (channelType, priority, ratedAt, source)
    }
}
