public import Domain
public import Logging

/// One disagreement between the ratings stored and what Desk's tickets say now.
public struct CSATAuditDifference: Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// Desk's ticket has a score; nothing is stored for it.
        case missing
        /// Both have a score, and they differ.
        case different
        /// A score is stored; Desk's ticket has none (a decline through the gateway is not one: Desk cannot hold it).
        case extra
    }
    public let ticketId: Int
    public let kind: Kind
    public let deskScore: Int?
    public let storedScore: Int?

    public var description: String {
        "ticket \(ticketId): \(kind.rawValue) (Desk \(deskScore.map(String.init) ?? "-"), stored \(storedScore.map(String.init) ?? "-"))"
    }
}

/// A difference `--repair` left as it was, and why.
public struct CSATAuditSkip: Sendable, Equatable, CustomStringConvertible {
    public let ticketId: Int
    public let reason: String

    public var description: String { "ticket \(ticketId): not repaired: \(reason)" }
}

public struct CSATAuditReport: Sendable {
    public var tickets = 0
    public var differences: [CSATAuditDifference] = []
    public var repaired = 0
    public var skipped: [CSATAuditSkip] = []
    /// Rollup rows that differed from the raw ratings, per zone, and how many were left after a rebuild.
    public var rollupDrift: [String: Int] = [:]
    public var rollupDriftLeft: [String: Int] = [:]

    /// What is still wrong: differences not repaired and rollup rows still differing.
    public var remaining: Int { differences.count - repaired + rollupDriftLeft.values.reduce(0, +) }
}

/// Compares, ticket by ticket, the ratings stored with Desk's own ticket fields (`customerSatisfactionScore`) for the
/// tickets closed in a date range, and, with `repair`, reads the ticket's CSAT messages and records what they and
/// the ticket say through the one recording path (`RatingRecorder`): a message's answer replaces what is stored for
/// its request; the ticket's score alone goes only where the store's rule places it. A difference the repair could
/// not settle is named with its reason. Nothing is ever deleted: an extra rating is reported, not removed. The count
/// of differences left is kept for the gateway's metrics.
public struct CSATAudit: Sendable {
    let desk: any DeskPlatformReader
    let ratings: any RatingStore
    let state: any SyncState
    let logger: Logger

    public static let differencesKey = "csat.audit.differences"

    public init(desk: any DeskPlatformReader, ratings: any RatingStore, state: any SyncState, logger: Logger) {
        self.desk = desk
        self.ratings = ratings
        self.state = state
        self.logger = logger
    }

    public func run(from: String, to: String, repair: Bool, progress: @Sendable (CSATAuditReport) -> Void = { _ in }) async throws
        -> CSATAuditReport {
        var report = CSATAuditReport()
        try await forEachDeskPage { offset in
            try await desk.ticketPage(limit: 100, offset: offset, status: [.closed], startDate: from, endDate: to, order: "created_at")
        } each: { tickets in
            let stored = try await ratings.storedAnswers(ticketIds: tickets.map(\.id))
            for ticket in tickets {
                report.tickets += 1
                let deskScore = ticket.satisfactionScore.flatMap { DeskLimits.csatScores.contains($0) ? $0 : nil }
                let hasStored = stored[ticket.id] != nil
                let storedScore = stored[ticket.id] ?? nil
                let kind: CSATAuditDifference.Kind?
                if let deskScore {
                    kind = !hasStored ? .missing : storedScore != deskScore ? .different : nil
                } else {
                    kind = storedScore != nil ? .extra : nil
                }
                guard let kind else { continue }
                report.differences.append(CSATAuditDifference(ticketId: ticket.id, kind: kind, deskScore: deskScore, storedScore: storedScore))
                if repair, kind != .extra {
                    var messages: [DeskMessage] = []
                    try await forEachDeskPage(maxItems: 1000) { offset in
                        try await desk.chatMessages(ticketId: ticket.id, limit: 100, offset: offset)
                    } each: { messages += $0 }
                    let writes = RatingRecorder.writes(ticket: ticket, messages: messages, source: .sync)
                    if try await RatingRecorder.apply(writes, to: ratings).ratings > 0 {
                        report.repaired += 1
                    } else {
                        let answered = messages.contains { $0.isCSATRequest && $0.state == .confirmed && $0.score != nil }
                        let skip = CSATAuditSkip(ticketId: ticket.id, reason: answered
                            ? "the stored answer to Desk's CSAT message is newer than the message's"
                            : "no CSAT message holds an answer, and the ticket's score belongs to no request the gateway knows without one")
                        logger.warning("csat audit: a difference was not repaired", metadata: ["ticket": "\(ticket.id)", "reason": "\(skip.reason)"])
                        report.skipped.append(skip)
                    }
                }
            }
            progress(report)
        }
        try await state.setValue(Self.differencesKey, String(repair ? report.differences.count - report.repaired : report.differences.count))
        return report
    }
}
