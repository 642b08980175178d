public import Domain
import Foundation
public import Logging
import Synchronization
import JSON

/// What a sync run did.
public struct SyncSummary: Sendable, CustomStringConvertible {
    public var agents = 0
    public var teams = 0
    public var pages = 0
    public var tickets = 0
    public var requests = 0
    public var newRequests = 0
    public var ratings = 0
    public var newRatings = 0
    public var seconds = 0.0
    public var skipped = false
    /// Tickets whose messages could not be read this run (retried next run).
    public var failedTickets = 0
    /// Times Desk answered 429 and the sync waited.
    public var rateLimited = 0
    /// Chat messages that could not be read and were skipped (each logged with its ticket).
    public var skippedMessages = 0
    /// Tickets read again one by one because a CSAT request of theirs is still unanswered (late ratings).
    public var lateChecked = 0
    /// A backfill: the offset it resumed from (0 when it started afresh).
    public var resumedAt = 0

    public var description: String {
        if skipped { return "sync skipped: another instance holds the sync lease" }
        return "agents \(agents), teams \(teams), pages \(pages), closed tickets \(tickets), CSAT requests \(requests) (\(newRequests) new), "
            + "ratings \(ratings) (\(newRatings) new), tickets to retry \(failedTickets), rate limited \(rateLimited), "
            + "unreadable messages skipped \(skippedMessages), awaiting answers re-read \(lateChecked) "
            + "in \(String(format: "%.1f", seconds)) s"
    }
}

/// Pulls agents, teams and closed tickets with their CSAT from Desk's Platform API, incrementally: the documented
/// `start_date` / `end_date` from the day before the last run to today (tickets seen twice are read once). A ticket
/// whose messages cannot be read (any status, any shape) never stops the run: it is counted, logged and read again
/// next run. Requests are paced (`SYNC_REQUESTS_PER_SECOND`) and a 429 waits for `Retry-After` and tries again.
/// Several instances may run it: a lease lets one work at a time. It sees Desk and the database only through the
/// ports it is given (`DeskPlatformReader`, `SyncState`, `RatingStore`).
/// Ratings found here get the agent and team the ticket has at sync time; the gateway's own feedback and webhooks
/// record them when they happen, and the same rating is stored once whichever path sees it first.
public struct SyncSettings: Sendable {
    /// Unanswered CSAT requests younger than this have their tickets read again on every run (late ratings).
    public var lateRatingDays = 30
    /// At most this many such tickets per run (the oldest requests first).
    public var lateRatingLimit = 500
    /// The first run (nothing synced yet) reads tickets closed this many days back.
    public var firstRunDays = 90
    /// Tickets per Platform API page of a backfill.
    public var pageSize = 100

    public init() {}
}

public struct DeskSync: Sendable {
    let desk: any DeskPlatformReader
    let state: any SyncState
    let ratings: any RatingStore
    let logger: Logger
    let instance = UUID().uuidString
    let pacer: Pacer
    /// Today, as `YYYY-MM-DD` (a test may fix it).
    let today: @Sendable () -> String
    let settings: SyncSettings

    public init(desk: any DeskPlatformReader, state: any SyncState, ratings: any RatingStore, logger: Logger,
                requestsPerSecond: Double = 5, settings: SyncSettings = SyncSettings(), today: (@Sendable () -> String)? = nil) {
        self.settings = settings
        self.desk = desk
        self.state = state
        self.ratings = ratings
        self.logger = logger
        self.today = today ?? { DeskSync.day(Date()) }
        pacer = Pacer(perSecond: requestsPerSecond)
    }

    /// One Desk call at the sync's pace; a 429 (after the client's own short retries) waits for Desk's
    /// `Retry-After` (at most a minute) and tries again, up to 8 times, so rate limiting slows the sync down and
    /// loses nothing.
    func paced<T: Sendable>(_ summary: inout SyncSummary, _ body: () async throws -> T) async throws -> T {
        var attempt = 0
        while true {
            await pacer.wait()
            do {
                return try await body()
            } catch let error as DomainError where error.code == .rateLimited && attempt < 8 {
                attempt += 1
                summary.rateLimited += 1
                let seconds = min(60, max(1, error.retryAfterSeconds ?? (1 << attempt)))
                logger.notice("Desk rate-limits the sync; waiting", metadata: ["seconds": "\(seconds)"])
                try await Task.sleep(for: .seconds(seconds))
            } catch let error as DomainError where error.code == .upstreamUnavailable && desk.isPaused && attempt < 8 {
                // Failures on a few tickets can open the circuit breaker; the run waits for its trial call instead of ending.
                attempt += 1
                try await Task.sleep(for: .seconds(min(30, max(1, error.retryAfterSeconds ?? 1))))
            }
        }
    }

    /// One run under the lease.
    public func run(progress: @Sendable (SyncSummary) -> Void = { _ in }) async throws -> SyncSummary {
        try await underLease { summary in try await run(&summary, progress: progress) }
    }

    /// `body` under the lease, which is given back when it ends, however it ends (skipped when another holds it).
    private func underLease(_ body: (inout SyncSummary) async throws -> Void) async throws -> SyncSummary {
        var summary = SyncSummary()
        guard try await state.takeLease(instance) else {
            summary.skipped = true
            return summary
        }
        do {
            try await body(&summary)
        } catch {
            try? await state.releaseLease(instance)
            throw error
        }
        try? await state.releaseLease(instance)
        return summary
    }

    private func run(_ summary: inout SyncSummary, progress: @Sendable (SyncSummary) -> Void) async throws {
        let started = Date()
        try await forEachDeskPage { offset in
            try await paced(&summary) { try await desk.agents(limit: 100, offset: offset) }
        } each: { agents in
            try await state.upsertAgents(agents)
            summary.agents += agents.count
        }
        try await forEachDeskPage { offset in
            try await paced(&summary) { try await desk.teams(limit: 100, offset: offset) }
        } each: { teams in
            try await state.upsertTeams(teams)
            summary.teams += teams.count
        }
        progress(summary)

        let position = try await state.ticketPosition()
        let today = today()
        // A day of overlap: whatever changed late on the last run's day is read again (and deduplicated). The first run
        // reads `firstRunDays` back.
        let startDate = position.syncedThrough.flatMap(Self.date).map { Self.day($0.addingTimeInterval(-86_400)) }
            ?? Self.date(today).map { Self.day($0.addingTimeInterval(-86_400 * Double(settings.firstRunDays))) }
        var seen = Set<Int>()
        var failed = Set<Int>()
        for id in position.retry {
            guard let ticket = try? await paced(&summary, { try await desk.platformTicket(id: id) }) else {
                failed.insert(id)
                continue
            }
            seen.insert(id)
            summary.tickets += 1
            if try await !collect(ticket, into: &summary) { failed.insert(id) }
        }
        // Late ratings: whatever date the list filters on (creation, maybe), a ticket whose CSAT request is still
        // unanswered is read again by itself until it is answered or the request is older than `lateRatingDays`.
        for id in try await ratings.ticketsAwaitingAnswers(maxAgeDays: settings.lateRatingDays, limit: settings.lateRatingLimit)
            where seen.insert(id).inserted {
            guard let ticket = try? await paced(&summary, { try await desk.platformTicket(id: id) }) else { continue }
            summary.lateChecked += 1
            if try await !collect(ticket, into: &summary) { failed.insert(id) }
        }
        try await forEachDeskPage { offset in
            try await paced(&summary) {
                try await desk.ticketPage(limit: 100, offset: offset, status: [.closed], startDate: startDate, endDate: today)
            }
        } each: { tickets in
            summary.pages += 1
            for ticket in tickets where seen.insert(ticket.id).inserted {
                summary.tickets += 1
                if try await !collect(ticket, into: &summary) { failed.insert(ticket.id) }
            }
            progress(summary)
            try await state.renewLease(instance)
        }
        summary.failedTickets = failed.count
        try await state.saveTicketPosition(syncedThrough: today, retry: Array(failed))
        summary.seconds = Date().timeIntervalSince(started)
    }

    /// Reads every ticket closed from `since` to `until` (YYYY-MM-DD, Desk's `start_date` / `end_date`), with its
    /// CSAT, under the lease. The offset reached is saved after each page: a backfill that is interrupted and started
    /// again with the same dates continues where it stopped (recording is idempotent, so nothing counts twice).
    /// Tickets whose messages could not be read join the next run's retry list.
    public func backfill(since: String, until: String, progress: @Sendable (SyncSummary) -> Void = { _ in }) async throws -> SyncSummary {
        try await underLease { summary in try await backfill(since: since, until: until, &summary, progress: progress) }
    }

    private func backfill(since: String, until: String, _ summary: inout SyncSummary, progress: @Sendable (SyncSummary) -> Void) async throws {
        let started = Date()
        let key = "backfill.\(since).\(until)"
        let start = Int(try await state.value(key) ?? "") ?? 0
        summary.resumedAt = start
        var failed: [Int] = []
        try await forEachDeskPage(startingAt: start) { offset in
            // The page about to be read is where an interruption resumes (reading it twice records nothing twice).
            try await state.setValue(key, String(offset))
            try await state.renewLease(instance)
            return try await paced(&summary) {
                try await desk.ticketPage(limit: settings.pageSize, offset: offset, status: [.closed], startDate: since, endDate: until)
            }
        } each: { tickets in
            summary.pages += 1
            for ticket in tickets {
                summary.tickets += 1
                if try await !collect(ticket, into: &summary) { failed.append(ticket.id) }
            }
            progress(summary)
        }
        try await state.addRetry(failed)
        try await state.setValue(key, nil)
        summary.failedTickets = failed.count
        summary.seconds = Date().timeIntervalSince(started)
    }

    static func day(_ date: Date) -> String {
        String(ISOTimestamp.format(date.timeIntervalSince1970).prefix(10))
    }

    static func date(_ day: String) -> Date? {
        ISOTimestamp.parse(day + "T00:00:00Z").map { Date(timeIntervalSince1970: $0) }
    }

    /// Records one closed ticket's CSAT requests and answers (through `RatingRecorder`); false when its messages
    /// could not be read (the ticket's own rating, if it has one, is recorded meanwhile and absorbed once the message
    /// is read).
    private func collect(_ ticket: DeskTicket, into summary: inout SyncSummary) async throws -> Bool {
        var messages: [DeskMessage] = []
        var complete = true
        switch await allMessages(ticket.id, &summary) {
        case .success(let all):
            messages = all
        case .failure(let error):
            // A ticket Desk no longer has messages for is final; anything else is tried again next run.
            if error.code != .notFound {
                complete = false
                logger.warning("could not read a ticket's messages; it is read again next sync",
                               metadata: ["ticket": "\(ticket.id)", "error": "\(error.code)"])
            }
        }
        let writes = RatingRecorder.writes(ticket: ticket, messages: messages, source: .sync)
        for write in writes {
            switch write {
            case .request: summary.requests += 1
            case .rating, .ticketLevel: summary.ratings += 1
            }
        }
        let changed = try await RatingRecorder.apply(writes, to: ratings)
        summary.newRequests += changed.requests
        summary.newRatings += changed.ratings
        return complete
    }

    private func allMessages(_ ticketId: Int, _ summary: inout SyncSummary) async -> Result<[DeskMessage], DomainError> {
        var messages: [DeskMessage] = []
        var skipped = 0
        defer {
            if skipped > 0 {
                summary.skippedMessages += skipped
                logger.warning("skipped chat messages that could not be read", metadata: ["ticket": "\(ticketId)", "count": "\(skipped)"])
            }
        }
        do {
            try await forEachDeskPage { offset in
                let page = try await paced(&summary) { try await desk.chatMessages(ticketId: ticketId, limit: 100, offset: offset) }
                skipped += page.skipped
                return page
            } each: { page in
                messages += page
            }
        } catch let error as DomainError {
            return .failure(error)
        } catch {
            return .failure(DomainError(.upstreamUnavailable, "The sync was interrupted."))
        }
        return .success(messages)
    }
}

/// Today as Desk's date parameters write it (UTC).
public enum DeskSyncDay {
    public static func today() -> String { DeskSync.day(Date()) }

    /// Whether `text` is a real date as `YYYY-MM-DD`.
    public static func isValid(_ text: String) -> Bool {
        text.count == 10 && DeskSync.date(text).map { DeskSync.day($0) == text } == true
    }
}

/// Spaces calls out to at most `perSecond`, across the tasks that share it.
final class Pacer: Sendable {
    private let interval: Duration
    private let next = Mutex(ContinuousClock.now)

    init(perSecond: Double) {
        interval = .milliseconds(Int(1000 / max(0.01, perSecond)))
    }

    func wait() async {
        let slot = next.withLock { next -> ContinuousClock.Instant in
            let slot = max(next, .now)
            next = slot + interval
            return slot
        }
        if slot > .now { try? await Task.sleep(until: slot, clock: .continuous) }
    }
}
